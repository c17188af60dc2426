"""Views a kernel does not reference-count (``kernel_views.borrowed``, ``keep_alive``).

numba takes and drops a reference (two atomic operations) for each array a helper is
given, each slice and each name bound; views without an owner skip that. These tests
check that a view is the same memory (read, written, sliced, any dtype and layout), that
scratch kept alive by :func:`keep_alive` holds its values, and, against a control, that
the compiled code of a helper loop over views calls neither ``NRT_incref`` nor
``NRT_decref``. Whole fits through the kernels that use them are checked against their
NumPy twins and the identity hashes elsewhere.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from fedforest.federated.kernel_cache import inner_kernel
from fedforest.federated.kernel_views import borrowed, keep_alive


@inner_kernel
def _pick(a, b, i):  # type: ignore[no-untyped-def]
    # Branches and two returns: LLVM keeps it a call, numba counts its arrays.
    if a[i] > 0.5:
        return a[i] + b[i % b.size]
    return b[i % b.size]


@numba.njit(cache=False)
def _sum_plain(a, b):  # type: ignore[no-untyped-def]
    s = 0.0
    for i in range(a.size):
        s += _pick(a[i:], b, 0)
    return s


@numba.njit(cache=False)
def _sum_borrowed(a, b):  # type: ignore[no-untyped-def]
    a, b = borrowed(a), borrowed(b)
    s = 0.0
    for i in range(a.size):
        s += _pick(a[i:], b, 0)
    return s


@numba.njit(cache=False)
def _write_through(x, rows):  # type: ignore[no-untyped-def]
    v = borrowed(x)
    for r in rows:
        row = v[r]  # a row of a view: a view
        for j in range(row.size):
            row[j] += r + 0.5 * j
    return v.shape[0] * 1000 + v.shape[1]


@numba.njit(cache=False)
def _scratch_sum(n, reps):  # type: ignore[no-untyped-def]
    owner = np.arange(n) * 1.0
    view = borrowed(owner)
    total = 0.0
    for _ in range(reps):
        fresh = np.empty(n)  # allocations after the owner's last use by name
        for i in range(n):
            fresh[i] = view[i]
        total += fresh.sum()
    keep_alive(owner)
    return total


def test_a_view_is_the_same_memory() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random(257), rng.random(13)
    assert _sum_borrowed(a, b) == _sum_plain(a, b)
    x = np.zeros((5, 4))
    assert _write_through(x, np.array([1, 3])) == 5004
    want = np.zeros((5, 4))
    want[[1, 3]] = np.array([1, 3])[:, None] + 0.5 * np.arange(4)
    np.testing.assert_array_equal(x, want)
    f = np.asfortranarray(np.zeros((3, 2), dtype=np.float64))
    _write_through(f, np.array([2]))
    np.testing.assert_array_equal(f[2], [2.0, 2.5])


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64, np.float32])
def test_a_view_keeps_its_dtype(dtype) -> None:  # noqa: ANN001
    @numba.njit(cache=False)
    def total(a):  # type: ignore[no-untyped-def]
        v = borrowed(a)
        s = v[0] - v[0]
        for x in v[1:]:
            s += x
        return s + v[0]

    a = np.arange(1, 20, dtype=dtype)  # sums within uint8
    assert total(a) == a.sum(dtype=dtype)


def test_scratch_kept_alive_holds_its_values() -> None:
    n, reps = 10_000, 30
    assert _scratch_sum(n, reps) == reps * (n - 1) * n / 2


def test_only_arrays_are_borrowed() -> None:
    @numba.njit(cache=False)
    def scalar(x):  # type: ignore[no-untyped-def]
        return borrowed(x)

    with pytest.raises(numba.core.errors.TypingError):
        scalar(1.0)


def _refcount_calls(kernel) -> int:  # noqa: ANN001
    """Calls of NRT_incref and NRT_decref in the kernel's and its helpers' native code.

    Not in the Python entry point (it unboxes the arguments once a call) nor in NRT's
    own functions.
    """
    ir = next(iter(kernel.inspect_llvm().values()))
    calls, native = 0, False
    for line in ir.splitlines():
        if line.startswith("define"):
            native = "@_ZN" in line and "@_ZN7cpython" not in line
        elif native:
            calls += line.count("call void @NRT_incref") + line.count("call void @NRT_decref")
    return calls


def test_views_leave_no_reference_counting_in_the_loop() -> None:
    """The helper called on slices: counted for the arrays, not for the views."""
    rng = np.random.default_rng(1)
    a, b = rng.random(64), rng.random(7)
    _sum_plain(a, b), _sum_borrowed(a, b)
    assert _refcount_calls(_sum_plain) > 0  # the control: numba counts them
    assert _refcount_calls(_sum_borrowed) == 0
