"""server/sorted_search.py: ``np.searchsorted`` of one value in a segment, both sides."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from fedforest.federated.server.sorted_search import search_left, search_right, sort_floats


@numba.njit(cache=False)
def _numba_own(a, lo, hi, v):  # type: ignore[no-untyped-def]
    """numba's own ``np.searchsorted`` on the segment (what the kernels called before)."""
    s = a[lo:hi]
    return lo + np.searchsorted(s, v, side="left"), lo + np.searchsorted(s, v, side="right")


def _sorted_with_ties(rng: np.random.Generator, n: int, nan: bool) -> np.ndarray:
    """Sorted values drawn from a few levels (ties), with -inf/+inf and maybe NaN last."""
    levels = np.concatenate([[-np.inf, np.inf, -0.0, 0.0], rng.normal(size=5).round(1)])
    if nan:
        levels = np.concatenate([levels, [np.nan, np.nan]])
    return np.sort(rng.choice(levels, n))


@pytest.mark.parametrize("nan", [False, True])
def test_the_answer_is_searchsorted_on_the_segment(nan: bool) -> None:
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(300):
        n = int(rng.integers(0, 40))
        inner = _sorted_with_ties(rng, n, nan)
        # the segment inside other values (the kernels search segments of flat arrays)
        a = np.concatenate([rng.normal(size=3), inner, rng.normal(size=2)])
        lo, hi = 3, 3 + n
        keys = np.concatenate([inner, [-np.inf, np.inf, np.nan, 0.0, -0.0], rng.normal(size=4)])
        for v in keys:
            want_l = lo + int(np.searchsorted(inner, v, side="left"))
            want_r = lo + int(np.searchsorted(inner, v, side="right"))
            assert search_left(a, lo, hi, v) == want_l, (inner, v)
            assert search_right(a, lo, hi, v) == want_r, (inner, v)
            assert _numba_own(a, lo, hi, v) == (want_l, want_r)
            checked += 1
    assert checked > 3000


def test_unsorted_segments_give_numbas_own_answer() -> None:
    """The same bisection step for step: the same index even where a segment is unsorted."""
    rng = np.random.default_rng(5)
    for _ in range(500):
        a = rng.choice(np.array([-np.inf, 0.0, 1.0, 2.0, np.inf, np.nan]), int(rng.integers(0, 20)))
        for v in (-1.0, 0.0, 1.0, 1.5, np.inf, np.nan):
            assert (search_left(a, 0, a.size, v), search_right(a, 0, a.size, v)) == _numba_own(
                a, 0, a.size, v
            )


@numba.njit(cache=False)
def _numba_sort(a):  # type: ignore[no-untyped-def]
    """numba's own ``a.sort()`` (what ``fallback.spaced_thresholds`` called before)."""
    a.sort()


@pytest.mark.parametrize("nan", [False, True])
def test_sort_floats_orders_as_numbas_own_sort(nan: bool) -> None:
    """The same array bit for bit, -0.0 and 0.0 among ties included, short and long."""
    rng = np.random.default_rng(3)
    levels = np.array([-np.inf, np.inf, -0.0, 0.0, -0.0, 0.0, 1.5, -2.0])
    if nan:
        levels = np.concatenate([levels, [np.nan]])
    signs_differ = 0
    for n in [*range(0, 40), *rng.integers(40, 600, size=60)]:
        a = rng.choice(levels, int(n))
        other = rng.random(a.size) < 0.3
        a[other] = rng.normal(size=int(other.sum())).round(1)  # more ties
        mine, own = a.copy(), a.copy()
        sort_floats(mine)
        _numba_sort(own)
        assert mine.tobytes() == own.tobytes(), (n, a)
        # -0.0 and 0.0 both present: an order a stable sort need not give
        zeros = own[own == 0.0]
        signs_differ += bool(np.signbit(zeros).any() and (~np.signbit(zeros)).any())
    assert signs_differ > 50
