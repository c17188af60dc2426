"""The minimum-rows rule for partitions: an ancestor's sum less one of each descendant's.

An ancestor ``A`` released its cumulative sum ``S_A(e)`` on a feature; its descendants at
a depth (every one of them a node that releases the feature there: they partition
``A``'s rows) release ``S_c(x_c)`` at their candidates. ``S_A(e) - sum_c S_c(x_c)`` is
``sum_c (S_c(e) - S_c(x_c))``: each term adds ``c``'s rows in ``(x_c, e]`` or subtracts
those in ``(e, x_c]``. When every term has one sign and they cover 1 to ``m - 1`` rows
together, those rows are isolated (above the thresholds, with the totals, the same
magnitudes). The rules between two sums and for intervals see one node at a time; with
two descendants the parent's rule covers it (each child's rows between its candidate
and the parent's threshold number none or at least ``m``), so cuts of three or more
nodes (an ancestor two levels up or more) are checked here.

A cut's nodes are taken in order (the server's slot order): only its last node's
candidates can complete a combination, so they are checked, one at a time, against the
sums the other nodes' released candidates reach (a subset-sum over at most ``m - 1``
rows per sign), and a candidate is dropped only for candidates that are released.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from .rules import _rows_below

__all__ = ["partition_filter", "partition_safe", "partition_safe_numpy"]


@numba.njit(nogil=True, cache=True)
def _shift_or(reach, nxt, v, m):
    # nxt |= reach shifted up by v (sums below m only).
    for r in range(m - v):
        if reach[r]:
            nxt[r + v] = True


@numba.njit(nogil=True, cache=True)
def partition_safe(
    cands, cand_off, grid, grid_off, rows, lo, hi, total, cut_off, cut_pair, thr_off, thr,
    min_rows, out,
):  # fmt: skip
    """Clear ``out`` for the candidates that complete an isolating partition.

    Parameters
    ----------
    cands : ndarray of float64  # IN
        Each pair's candidates, pair after pair (``cand_off``, shape (n_pairs + 1,)).
    grid, rows : ndarray of float64  # IN
        Each pair's grid (it holds every threshold of the cuts the pair is in, inside its
        path bounds) and the node's pooled rows with ``x <= edge`` (``grid_off``).
    lo, hi, total : ndarray of float64, shape (n_pairs,)  # IN
        The node's path bounds on the feature and its pooled rows.
    cut_off : ndarray of int64, shape (n_cuts + 1,)  # IN
        Each cut's pairs in ``cut_pair``, increasing; cuts in increasing order of their
        last pair (those whose last pair comes first are checked first).
    thr_off, thr : ndarray  # IN
        Each cut's ancestor's thresholds on the feature (``thr_off``, shape (n_cuts + 1,)).
    min_rows : int  # IN
    out : ndarray of bool, shape (cands.size,)  # IN, OUT
        False for candidates not released (they constrain nothing); set to False for those
        this rule drops.
    """
    m = min_rows
    for g in range(cut_off.size - 1):
        k0, k1 = cut_off[g], cut_off[g + 1]
        if k1 - k0 < 2:
            continue
        last = cut_pair[k1 - 1]
        for t in range(thr_off[g], thr_off[g + 1]):
            e = thr[t]
            plus = np.zeros(m, dtype=np.bool_)  # sums one-signed below m reached so far
            minus = np.zeros(m, dtype=np.bool_)
            plus[0] = minus[0] = True
            for k in range(k0, k1 - 1):
                p = cut_pair[k]
                g0, g1 = grid_off[p], grid_off[p + 1]
                ce = _rows_below(grid, rows, g0, g1, e, lo[p], hi[p], total[p])
                nxt_p = np.zeros(m, dtype=np.bool_)
                nxt_m = np.zeros(m, dtype=np.bool_)
                for c in range(cand_off[p], cand_off[p + 1]):
                    if not out[c]:
                        continue
                    v = ce - _rows_below(grid, rows, g0, g1, cands[c], lo[p], hi[p], total[p])
                    if v >= 0 and v < m:
                        _shift_or(plus, nxt_p, int(v), m)
                    if v <= 0 and -v < m:
                        _shift_or(minus, nxt_m, int(-v), m)
                plus, minus = nxt_p, nxt_m
            g0, g1 = grid_off[last], grid_off[last + 1]
            ce = _rows_below(grid, rows, g0, g1, e, lo[last], hi[last], total[last])
            for c in range(cand_off[last], cand_off[last + 1]):
                if not out[c]:
                    continue
                v = ce - _rows_below(grid, rows, g0, g1, cands[c], lo[last], hi[last], total[last])
                reach, a = (plus, v) if v >= 0 else (minus, -v)
                for r in range(m):  # r + a in 1 .. m - 1 for some reached r
                    if reach[r] and r + a >= 1 and r + a < m:
                        out[c] = False
                        break
                if v == 0 and out[c]:
                    for r in range(1, m):
                        if minus[r]:
                            out[c] = False
                            break


def partition_safe_numpy(
    cands: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    rows: NDArray[np.float64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    total: NDArray[np.float64],
    cut_off: NDArray[np.int64],
    cut_pair: NDArray[np.int64],
    thr_off: NDArray[np.int64],
    thr: NDArray[np.float64],
    min_rows: int,
    out: NDArray[np.bool_],
) -> None:
    """NumPy twin of :func:`partition_safe` (same arguments, same outputs)."""
    m = min_rows

    def below(p: int, x: NDArray[np.float64]) -> NDArray[np.float64]:
        g = slice(int(grid_off[p]), int(grid_off[p + 1]))
        j = np.searchsorted(grid[g], x, side="right") - 1
        got = np.where(j >= 0, rows[g][np.maximum(j, 0)] if g.stop > g.start else 0.0, 0.0)
        return np.where(x >= hi[p], total[p], np.where(x <= lo[p], 0.0, got))

    for g in range(cut_off.size - 1):
        pairs = [int(p) for p in cut_pair[cut_off[g] : cut_off[g + 1]]]
        if len(pairs) < 2:
            continue
        *first, last = pairs
        for e in thr[thr_off[g] : thr_off[g + 1]]:
            plus, minus = {0}, {0}
            for p in first:
                c = slice(int(cand_off[p]), int(cand_off[p + 1]))
                v = (below(p, np.array([e])) - below(p, cands[c]))[out[c]]
                plus = {r + int(s) for r in plus for s in v[(v >= 0) & (v < m)] if r + s < m}
                minus = {r - int(s) for r in minus for s in v[(v <= 0) & (-v < m)] if r - s < m}
            c = slice(int(cand_off[last]), int(cand_off[last + 1]))
            v = below(last, np.array([e])) - below(last, cands[c])
            for i in np.flatnonzero(out[c]):
                a = abs(int(v[i]))
                sides = ([plus] if v[i] >= 0 else []) + ([minus] if v[i] <= 0 else [])
                if any(0 < r + a < m for reach in sides for r in reach):
                    out[c.start + i] = False


def partition_filter(
    cuts: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]],
    keys: NDArray[np.int64],
    cands: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    rows: NDArray[np.float64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    total: NDArray[np.float64],
    min_rows: int,
    out: NDArray[np.bool_],
) -> None:
    """:func:`partition_safe` on a level's cuts, given by their pairs' keys.

    ``cuts`` holds each cut's pair keys (``slot * d + feature``; ``cut_off``) and its
    ancestor's thresholds (``thr_off``, ``thr``); ``keys`` are the keys of the pairs whose
    candidates are given (``cand_off``), in slot order. A cut with a pair that has no
    candidates here (too few rows, or not splittable) releases no partition: skipped.
    """
    cut_off, cut_key, thr_off, thr = cuts
    cut = np.zeros(0, dtype=np.int64)
    if cut_off.size > 1 and keys.size:
        order = np.argsort(keys, kind="stable")
        at = order[np.minimum(np.searchsorted(keys[order], cut_key), keys.size - 1)]
        size = np.diff(cut_off)
        whole = np.add.reduceat((keys[at] == cut_key).astype(np.int64), cut_off[:-1]) == size
        cut = np.flatnonzero(whole & (size >= 3))
    if cut.size:
        # Each kept cut's pairs, increasing; the cuts by their last pair.
        owner = np.repeat(np.arange(size.size), size)
        sel = np.isin(owner, cut)
        pair, owner = at[sel], owner[sel]
        by = np.lexsort((pair, owner))
        pair, owner = pair[by], owner[by]
        n = np.bincount(owner, minlength=size.size)[cut]
        rank = np.argsort(pair[np.cumsum(n) - 1], kind="stable")
        starts = np.cumsum(n) - n
        pair = pair[np.concatenate([np.arange(starts[r], starts[r] + n[r]) for r in rank])]
        n, cut = n[rank], cut[rank]
        t = np.concatenate([thr[thr_off[g] : thr_off[g + 1]] for g in cut])
    else:  # none (the kernel still runs: one signature, compiled ahead)
        pair, n, t = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    new_off = np.zeros(cut.size + 1, dtype=np.int64)
    np.cumsum(n, out=new_off[1:])
    t_off = np.zeros(cut.size + 1, dtype=np.int64)
    np.cumsum(thr_off[cut + 1] - thr_off[cut], out=t_off[1:])
    partition_safe(
        cands, cand_off, grid, grid_off, rows, lo, hi, total, new_off,
        np.ascontiguousarray(pair, dtype=np.int64), t_off, np.ascontiguousarray(t), int(min_rows),
        out,
    )  # fmt: skip
