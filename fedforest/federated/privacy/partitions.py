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

Each node of a cut also has two options that are always released: 0 (its term is then
its rows below ``e``) and its total (Round A's summary; its rows above ``e``,
subtracted). A cut's nodes are taken in order (the server's slot order), and each
node's candidates, one at a time, against the one-signed sums below ``m`` that the
nodes before it reach with their kept candidates and options and the nodes after it
with their options (a subset-sum over at most ``m - 1`` rows per sign): a candidate is
dropped only for what is released.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from ..kernel_cache import cache_depends_on, inner_kernel
from . import rules
from .rules import _rows_below, _rows_below_numpy

__all__ = ["partition_filter", "partition_safe", "partition_safe_numpy"]


@inner_kernel
def _add_term(plus, minus, nxt_p, nxt_m, v, m):
    # One option of a node, a term of v rows (v > 0 added, v < 0 subtracted): the sums of
    # one sign below m reached with it (nxt_* |= reach shifted by |v|).
    if v >= 0 and v < m:
        for r in range(m - int(v)):
            if plus[r]:
                nxt_p[r + int(v)] = True
    if v <= 0 and -v < m:
        for r in range(m + int(v)):
            if minus[r]:
                nxt_m[r - int(v)] = True


@inner_kernel
def _combine(a, b, out, m):
    # out = the sums below m of one from a and one from b.
    out[:] = False
    for i in range(m):
        if a[i]:
            for j in range(m - i):
                if b[j]:
                    out[i + j] = True


@inner_kernel
def _isolates(plus, minus, v, m):
    # Whether a term of v rows, with some reached sum of its sign, makes 1 to m - 1 rows.
    if v >= 0:
        for r in range(m):
            if plus[r] and r + v >= 1 and r + v < m:
                return True
    if v <= 0:
        for r in range(m):
            if minus[r] and r - v >= 1 and r - v < m:
                return True
    return False


@numba.njit(nogil=True, cache=True)
def partition_safe(
    cands, cand_off, grid, grid_off, rows, lo, hi, total, cut_off, cut_pair, thr_off, thr,
    min_rows, out,
):  # fmt: skip
    """Clear ``out`` for the candidates that complete an isolating partition.

    Every node of a cut has, besides its released candidates, two options that are always
    released: 0 (``x = -inf``: its term is its rows below ``e``, added) and its total
    (Round A's summary: its rows above ``e``, subtracted). Its nodes are taken in order;
    a candidate of one is kept only if no choice of a kept candidate or option of each
    node before it and an option of each node after it makes, with it, 1 to ``m - 1``
    rows of one sign.

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
        last pair.
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
        n = k1 - k0
        if n < 3:
            continue
        # Each candidate's rows below it, found once per cut, not once per threshold.
        c_at = np.empty(n + 1, dtype=np.int64)
        c_at[0] = 0
        for i in range(n):
            p = cut_pair[k0 + i]
            c_at[i + 1] = c_at[i] + cand_off[p + 1] - cand_off[p]
        below = np.empty(c_at[n])
        for i in range(n):
            p = cut_pair[k0 + i]
            g0, g1 = grid_off[p], grid_off[p + 1]
            for c in range(cand_off[p], cand_off[p + 1]):
                below[c_at[i] + c - cand_off[p]] = _rows_below(
                    grid, rows, g0, g1, cands[c], lo[p], hi[p], total[p]
                )
        ce = np.empty(n)
        suf_p = np.zeros((n + 1, m), dtype=np.bool_)  # sums the nodes from i on reach
        suf_m = np.zeros((n + 1, m), dtype=np.bool_)  # with their two options alone
        both_p = np.zeros(m, dtype=np.bool_)
        both_m = np.zeros(m, dtype=np.bool_)
        # The sums the nodes before i reach (row ``cur``) and with node i (the other row):
        # two buffers a cut, swapped node by node.
        reach_p = np.zeros((2, m), dtype=np.bool_)
        reach_m = np.zeros((2, m), dtype=np.bool_)
        for t in range(thr_off[g], thr_off[g + 1]):
            e = thr[t]
            for i in range(n):
                p = cut_pair[k0 + i]
                ce[i] = _rows_below(
                    grid, rows, grid_off[p], grid_off[p + 1], e, lo[p], hi[p], total[p]
                )
            suf_p[:] = False
            suf_m[:] = False
            suf_p[n, 0] = suf_m[n, 0] = True
            for i in range(n - 1, -1, -1):
                p = cut_pair[k0 + i]
                _add_term(suf_p[i + 1], suf_m[i + 1], suf_p[i], suf_m[i], ce[i], m)
                _add_term(suf_p[i + 1], suf_m[i + 1], suf_p[i], suf_m[i], ce[i] - total[p], m)
            cur = 0
            reach_p[cur] = False
            reach_m[cur] = False
            reach_p[cur, 0] = reach_m[cur, 0] = True
            for i in range(n):
                p = cut_pair[k0 + i]
                pre_p, pre_m = reach_p[cur], reach_m[cur]
                nxt_p, nxt_m = reach_p[1 - cur], reach_m[1 - cur]
                nxt_p[:] = False
                nxt_m[:] = False
                _combine(pre_p, suf_p[i + 1], both_p, m)
                _combine(pre_m, suf_m[i + 1], both_m, m)
                _add_term(pre_p, pre_m, nxt_p, nxt_m, ce[i], m)
                _add_term(pre_p, pre_m, nxt_p, nxt_m, ce[i] - total[p], m)
                for c in range(cand_off[p], cand_off[p + 1]):
                    if not out[c]:
                        continue
                    v = ce[i] - below[c_at[i] + c - cand_off[p]]
                    if _isolates(both_p, both_m, v, m):
                        out[c] = False
                    else:
                        _add_term(pre_p, pre_m, nxt_p, nxt_m, v, m)
                cur = 1 - cur


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
        return _rows_below_numpy(grid[g], rows[g], x, (lo[p], hi[p], total[p]))

    def add(reach: tuple[set[int], set[int]], terms: list[float]) -> tuple[set[int], set[int]]:
        plus = {r + int(v) for r in reach[0] for v in terms if v >= 0 and r + v < m}
        minus = {r - int(v) for r in reach[1] for v in terms if v <= 0 and r - v < m}
        return plus, minus

    for g in range(cut_off.size - 1):
        pairs = [int(p) for p in cut_pair[cut_off[g] : cut_off[g + 1]]]
        if len(pairs) < 3:
            continue
        for e in thr[thr_off[g] : thr_off[g + 1]]:
            ce = [float(below(p, np.array([e]))[0]) for p in pairs]
            opts = [[c, c - float(total[p])] for c, p in zip(ce, pairs, strict=True)]
            suffix = [({0}, {0})]
            for o in reversed(opts):
                suffix.insert(0, add(suffix[0], o))
            pre: tuple[set[int], set[int]] = ({0}, {0})
            for i, p in enumerate(pairs):
                both = (
                    add(pre, [float(r) for r in suffix[i + 1][0]])[0],
                    add(pre, [-float(r) for r in suffix[i + 1][1]])[1],
                )
                c = slice(int(cand_off[p]), int(cand_off[p + 1]))
                v = ce[i] - below(p, cands[c])
                kept = list(opts[i])
                for j in np.flatnonzero(out[c]):
                    a = float(v[j])
                    if any(
                        0 < r + abs(a) < m
                        for side in (0, 1)
                        if (a >= 0, a <= 0)[side]
                        for r in both[side]
                    ):
                        out[c.start + j] = False
                    else:
                        kept.append(a)
                pre = add(pre, kept)


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


# Their machine code holds rules.py's _rows_below and its helpers (numba stamps a
# cached kernel with its own file only): stale when rules.py changes too.
cache_depends_on(partition_safe, rules)
