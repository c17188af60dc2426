"""The clients' Round A sketches as the server checks and merges them: runs of equal values.

A client with fewer rows in a node than ``B`` repeats values across the ``B`` levels of its
sketch, and deep in a tree most sketches hold a few distinct values (about 3 of 32 at depth
7 of a 2,000-row fit), so sketches travel run-length encoded (``pack_sketch``). The server
keeps them so: each row is its runs (value, length), a run never crossing into the next
row and adjacent runs of one row never holding the same bits or both NaN (runs of equal
values are joined). The checks and the mixture-quantile merge then read the runs, not
``B`` values per row (:func:`~fedforest.federated.protocol.unpack_sketch` still gives
dense rows).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from numpy.typing import NDArray

from ..protocol import Message, expect_array, sketch_run_lengths
from ..scratch import scratch

__all__ = [
    "SketchRuns",
    "dense_runs",
    "runs_problem",
    "runs_problem_numpy",
    "sketch_runs",
    "split_runs",
    "split_runs_numpy",
    "stack_runs",
]


class SketchRuns(NamedTuple):
    """Sketch rows as runs: row ``r`` is runs ``row_off[r]:row_off[r + 1]``."""

    values: NDArray[np.float64]  # (n_runs,)
    lengths: NDArray[np.int64]  # (n_runs,): adding up to B in each row
    row_off: NDArray[np.int64]  # (n_rows + 1,)


def sketch_runs(msg: Message, n: int, b: int, sender: str) -> SketchRuns:
    """The sketch of a Round A reply as runs (validated as ``unpack_sketch`` validates it)."""
    if "sketch_runs" not in msg.arrays:
        return dense_runs(expect_array(msg, "sketch", "f", (n, b), sender))
    values, runs = sketch_run_lengths(msg, n, b, sender)
    return _split(np.ascontiguousarray(values, dtype=np.float64), runs, n, b)


def dense_runs(sketch: NDArray[np.float64]) -> SketchRuns:
    """Dense sketch rows (shape (n, B)) as runs."""
    n, b = sketch.shape
    flat = np.ascontiguousarray(sketch, dtype=np.float64).reshape(-1)
    return _split(flat, np.empty(0, dtype=np.int64), n, b)


def _split(values: NDArray[np.float64], lengths: NDArray[np.int64], n: int, b: int) -> SketchRuns:
    cap = values.size + n
    rv, rl = np.empty(cap), np.empty(cap, dtype=np.int64)
    row_off = np.zeros(n + 1, dtype=np.int64)
    m = split_runs(values, lengths, b, rv, rl, row_off) if n * b else 0
    return SketchRuns(rv[:m], rl[:m], row_off)


def stack_runs(parts: list[SketchRuns], borrow: bool = False) -> SketchRuns:
    """The rows of several sketches, one after the other.

    ``borrow``: the runs' values and lengths in this thread's scratch memory
    (:mod:`..scratch`: valid until the next such call; the caller only reads them).
    """
    if not parts:
        return SketchRuns(np.empty(0), np.empty(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
    base = np.cumsum([0] + [p.values.size for p in parts])
    row_off = np.concatenate([p.row_off[:-1] + base[i] for i, p in enumerate(parts)] + [base[-1:]])
    n = int(base[-1])
    values = scratch("stacked-runs", n, np.float64) if borrow else np.empty(n)
    lengths = scratch("stacked-lengths", n, np.int64) if borrow else np.empty(n, np.int64)
    np.concatenate([p.values for p in parts], out=values)
    np.concatenate([p.lengths for p in parts], out=lengths)
    return SketchRuns(values, lengths, row_off.astype(np.int64))


@numba.njit(nogil=True, cache=True)
def split_runs(values, lengths, b, rv, rl, row_off):  # type: ignore[no-untyped-def]
    """Runs of values (lengths adding up to ``n * b``) as runs within rows of ``b``.

    A run reaching past the end of a row is split there; a run holding the same bits as
    the one before it in the row (or NaN after NaN) is joined to it: at most ``m + n`` runs.

    Parameters
    ----------
    values : ndarray of float64, shape (m,)  # IN
    lengths : ndarray of int64, shape (m,) or (0,)  # IN: positive; (0,): every run is 1
    b : int  # IN: the row length ``B``
    rv : ndarray of float64, shape (>= m + n,)  # OUT: the runs' values
    rl : ndarray of int64, shape (>= m + n,)  # OUT: their lengths
    row_off : ndarray of int64, shape (n + 1,)  # OUT

    Returns
    -------
    int
        The number of runs written.
    """
    unit = lengths.shape[0] == 0
    k = 0
    row = 0
    at = 0  # position within the row
    row_off[0] = 0
    for i in range(values.shape[0]):
        v = values[i]
        left = 1 if unit else lengths[i]
        while left > 0:
            take = min(left, b - at)
            same = False
            if at > 0:
                u = rv[k - 1]
                same = u == v and math.copysign(1.0, u) == math.copysign(1.0, v)
                same = same or (np.isnan(u) and np.isnan(v))
            if same:
                rl[k - 1] += take
            else:
                rv[k] = v
                rl[k] = take
                k += 1
            at += take
            left -= take
            if at == b:
                row += 1
                row_off[row] = k
                at = 0
    return k


def split_runs_numpy(
    values: NDArray[np.float64], lengths: NDArray[np.int64], n: int, b: int
) -> SketchRuns:
    """NumPy twin of :func:`split_runs` (by the dense rows)."""
    dense = np.repeat(values, lengths if lengths.size else 1).reshape(n, b)
    start = np.ones((n, b), dtype=bool)
    a, z = dense[:, 1:], dense[:, :-1]
    same = ((a == z) & (np.signbit(a) == np.signbit(z))) | (np.isnan(a) & np.isnan(z))
    start[:, 1:] = ~same
    flat_start = np.flatnonzero(start.ravel())
    ends = np.append(flat_start[1:], n * b)
    row_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(start.sum(axis=1), out=row_off[1:])
    return SketchRuns(dense.ravel()[flat_start], (ends - flat_start).astype(np.int64), row_off)


@numba.njit(nogil=True, cache=True)
def runs_problem(rv, row_off, gone):  # type: ignore[no-untyped-def]
    """Sketch rows (given as runs) finite and sorted, except rows all NaN.

    The same outcomes as :func:`~.check_kernels.dense_sketch_problem` on the dense rows.

    Parameters
    ----------
    rv : ndarray of float64, shape (n_runs,)  # IN: the runs' values
    row_off : ndarray of int64, shape (n + 1,)  # IN
    gone : ndarray of bool, shape (n,)  # OUT: rows holding a NaN

    Returns
    -------
    int
        0, ``NONFINITE`` (1: a row not all NaN holds NaN or infinity) or ``UNSORTED`` (2).
    """
    worst = 0
    for i in range(row_off.shape[0] - 1):
        lo, hi = row_off[i], row_off[i + 1]
        n_nan = 0
        for j in range(lo, hi):
            if np.isnan(rv[j]):
                n_nan += 1
        gone[i] = n_nan > 0
        if n_nan == hi - lo:
            continue
        for j in range(lo, hi):
            if not np.isfinite(rv[j]):
                worst = 1
        if worst == 0:
            for j in range(lo + 1, hi):
                if rv[j] - rv[j - 1] < 0:
                    worst = 2
    return worst


def runs_problem_numpy(
    rv: NDArray[np.float64], row_off: NDArray[np.int64], gone: NDArray[np.bool_]
) -> int:
    """NumPy twin of :func:`runs_problem`."""
    n = row_off.size - 1
    row = np.repeat(np.arange(n), np.diff(row_off))
    nan = np.isnan(rv)
    gone[:] = np.bincount(row[nan], minlength=n) > 0
    empty = np.bincount(row[nan], minlength=n) == np.diff(row_off)
    kept = ~empty[row]
    if not np.all(np.isfinite(rv[kept])):
        return 1
    falls = (np.diff(rv) < 0) & (row[1:] == row[:-1]) & kept[1:]
    return 2 if falls.any() else 0
