"""Left statistics on a fixed grid: every row's bin made once per fit (``binning="global"``).

Under ``binning="global"`` the candidates of a numeric feature are the same at every node
of the fit (the pooled quantiles fixed at the handshake, plus
:data:`~fedforest.federated.server.missing.MISSING_SPLIT` when the feature has missing
values), and a categorical feature's are its codes ``0..C-2``: the server sends them once
per level, per column (``feat_cand``). So a row's bin, the number of a pair's candidates
below its value, depends on the row and the feature only: it is computed once
(:class:`GridCodes`, a ``searchsorted`` per column) and a level's left
statistics are a histogram of those codes per pair, then a running sum
(:func:`left_stats_coded`): one gather and one add per in-bag row and sampled feature,
instead of comparing the row with the pair's candidates.

The bins are those :func:`~fedforest.federated.client_kernels.left_stats` finds and the
statistics are added in the same order (rows in their node's order, then bins left to
right), so every sum is the same number: the forest is bit-identical. A column whose
list changed has its codes remade; the result never depends on the cache.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from . import client_kernels, kernel_views
from .client_increments import increment_message, increments_of
from .client_kernels import (
    longest_lists,
    node_setup,
    pairs_setup,
    twin_walk,
)
from .kernel_cache import cache_depends_on
from .kernel_views import borrowed, keep_alive
from .protocol import Message, expand_candidates, expect_array, pack_increments_numpy

__all__ = [
    "GridCodes",
    "answer_rows",
    "answer_rows_numpy",
    "fixed_candidates",
    "grid_codes",
    "grid_codes_numpy",
    "left_stats_coded",
    "left_stats_coded_numpy",
    "grid_increments",
    "pack_coded",
    "pack_coded_numpy",
]

# client_kernels' gather_node and running_sums, inlined into these kernels (off the
# default fit's path, so no first-run cost): as calls, grid_increments' pack_coded took
# about 3 % more time (bench_kernels.py --binning global, docs/benchmarks-history.md).
gather_node = numba.njit(inline="always")(client_kernels.gather_node.py_func)
running_sums = numba.njit(inline="always")(client_kernels.running_sums.py_func)

#: Codes are uint16: a pair of more candidates goes the general way.
MAX_GRID = np.iinfo(np.uint16).max - 1
#: :func:`grid_codes` counts the candidates below each value in lists up to this long.
SHORT_GRID = 128
#: :func:`grid_increments` lists a node's filled bins as it fills them (instead of reading
#: every bin) when the node's rows times this are at most the longest candidate list.
SPARSE_ROWS = 4


class GridCodes:
    """Per-feature bin codes of a client's rows against the fit's fixed candidate lists.

    Parameters
    ----------
    Xt : ndarray of float64, shape (n_columns, n_samples)
        The client's column-major values (+inf for a missing value; set features hold
        their codes).
    """

    def __init__(self, Xt: NDArray[np.float64]) -> None:
        self.Xt = Xt
        self.codes = np.zeros(Xt.shape, dtype=np.uint16)
        self.grids: dict[int, NDArray[np.float64]] = {}
        self.last: tuple[NDArray[np.int64], NDArray[np.float64]] | None = None

    def update(
        self, feat_off: NDArray[np.int64], feat_cand: NDArray[np.float64], name: str
    ) -> None:
        """Take the fit's candidate lists, one per column (its codes remade if it changed).

        ``feat_cand[feat_off[f]:feat_off[f + 1]]`` are column ``f``'s candidates: ascending
        numbers (checked: they come from the server).
        """
        last = self.last
        if (
            last is not None
            and np.array_equal(last[0], feat_off)
            and np.array_equal(last[1], feat_cand)
        ):
            return  # the lists of last level (every level's, mostly): nothing changed
        self.last = None  # until every column is taken (a refused list leaves some half-done)
        count = np.diff(feat_off)
        if feat_off[0] != 0 or np.any(count < 0) or count.max(initial=0) > MAX_GRID:
            raise ValueError(f"Client {name!r}: the server's 'feat_cand_off' is not offsets.")
        for f in np.flatnonzero(count).tolist():
            grid = feat_cand[feat_off[f] : feat_off[f + 1]]
            old = self.grids.get(f)
            if old is not None and np.array_equal(old, grid):
                continue
            if np.isnan(grid).any() or np.any(np.diff(grid) < 0):
                raise ValueError(
                    f"Client {name!r}: the server's 'feat_cand' of column {f} is not ascending."
                )
            grid_codes(grid, self.Xt[f], self.codes[f])
            self.grids[f] = grid.copy()
        self.last = (feat_off.copy(), feat_cand.copy())


@numba.njit(nogil=True, cache=True)
def grid_codes(grid, x, out):
    """``np.searchsorted(grid, x, side="left")`` into ``out``, ``grid`` ascending.

    Each value's count of candidates below it (a NaN's: all of them, as NumPy sorts NaN
    last). Lists of at most :data:`SHORT_GRID` candidates count them (a pass over the
    values per candidate, vectorised: ten times NumPy's speed at 31 candidates); longer
    ones binary-search each value, branch-free.

    Parameters
    ----------
    grid : ndarray of float64, shape (n,)  # IN: ascending, no NaN
    x : ndarray of float64, shape (m,)  # IN
    out : ndarray of uint16, shape (m,)  # OUT
    """
    n = grid.shape[0]
    if n <= SHORT_GRID:  # count the candidates below, one pass a candidate (vectorised)
        out[:] = 0
        for j in range(n):
            g = grid[j]
            for i in range(x.shape[0]):
                out[i] += g < x[i]
        for i in range(x.shape[0]):
            if x[i] != x[i]:
                out[i] = n
        return
    for i in range(x.shape[0]):
        v = x[i]
        if v != v:
            out[i] = n
            continue
        base = 0
        size = n
        while size > 1:
            half = size >> 1
            base += half if grid[base + half - 1] < v else 0
            size -= half
        out[i] = base + (1 if grid[base] < v else 0)


def grid_codes_numpy(
    grid: NDArray[np.float64], x: NDArray[np.float64], out: NDArray[np.uint16]
) -> None:
    """NumPy twin of :func:`grid_codes`."""
    out[:] = np.searchsorted(grid, x, side="left")


def fixed_candidates(
    msg: Message,
    grid: GridCodes | None,
    Xt: NDArray[np.float64],
    pair_feat: NDArray[np.int32],
    name: str,
    values: bool = True,
) -> tuple[GridCodes, NDArray[np.int64], NDArray[np.float64] | None]:
    """A one-round level's candidates (``feat_cand``, per column) taken into ``grid``.

    Returns the grid (made on first use), the pairs' candidate offsets and, if ``values``,
    their candidate lists (the codes answer without them: None then).
    """
    shape = (Xt.shape[0],)  # the features, and the client index (never a pair's)
    f_off = expect_array(msg, "feat_cand_off", "i", shape, "server").astype(np.int64)
    f_cand = expect_array(msg, "feat_cand", "f", (int(f_off[-1]),), "server")
    grid = grid or GridCodes(Xt)
    grid.update(f_off, f_cand, name)
    if values:
        return grid, *expand_candidates(f_off, f_cand, pair_feat)
    cand_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum(np.diff(f_off)[pair_feat], out=cand_off[1:])  # as expand_candidates
    return grid, cand_off, None


@numba.njit(inline="always")
def _add_coded(hist, g, ii, st, cls, c, n_stat, n_classes):
    # Every row's statistics into its bin ``g[row]``, in row order.
    if n_stat == 2:
        for k in range(c):
            bk = g[ii[k]]
            hist[bk, 0] += 1.0
            hist[bk, 1] += st[k, 1]
    elif n_classes == 0:
        for k in range(c):
            bk = g[ii[k]]
            hist[bk, 0] += 1.0
            hist[bk, 1] += st[k, 1]
            hist[bk, 2] += st[k, 2]
            hist[bk, 3] += st[k, 3]
    else:
        for k in range(c):
            bk = g[ii[k]]
            hist[bk, 0] += 1.0
            hist[bk, 1] += st[k, 1]
            hist[bk, cls[k]] += st[k, 1]


@numba.njit(nogil=True, cache=True)
def left_stats_coded(
    codes_t, rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off, slot_lo, slot_hi, out
):
    """Left statistics at every candidate of the pairs of slots ``slot_lo..slot_hi``.

    Parameters
    ----------
    codes_t : ndarray of uint16, shape (n_columns, n_samples)  # IN: row ``i``'s bin for
        feature ``f`` (the pair's candidates below its value), as :class:`GridCodes` makes
    rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off, slot_lo, slot_hi, out :
        as :func:`~fedforest.federated.client_kernels.left_stats`
    """
    n_stat = out.shape[1]
    order, start, ii, st, cls, c0, _, hist, _ = pairs_setup(
        rows, slot, slot_lo, slot_hi, n_classes, pair_off, cand_off, n_stat
    )
    for s in range(slot_lo, slot_hi):
        a, b = start[s - slot_lo], start[s - slot_lo + 1]
        c = b - a
        gather_node(order, a, c, rows, w, y, n_classes, ii, st, cls)
        for p in range(pair_off[s], pair_off[s + 1]):
            nc = cand_off[p + 1] - cand_off[p]
            if nc == 0:
                continue
            lo = cand_off[p]
            g = codes_t[pair_feat[p]]
            for j in range(nc + 1):
                for q in range(n_stat):
                    hist[j, q] = 0.0
            _add_coded(hist, g, ii, st, cls, c, n_stat, n_classes)
            running_sums(hist, nc, lo - c0, out)


def left_stats_coded_numpy(
    codes_t: NDArray[np.uint16],
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    y: NDArray[np.float64],
    n_classes: int,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`left_stats_coded`."""

    def bins_of(p: int, r: NDArray[np.int32]) -> NDArray[np.int64]:
        return codes_t[pair_feat[p], r].astype(np.int64)

    twin_walk(bins_of, rows, w, slot, y, n_classes, pair_off, cand_off, slot_lo, slot_hi, out)


@numba.njit(nogil=True, cache=True)
def grid_increments(
    codes_t,
    rows,
    w,
    slot,
    y,
    n_classes,
    pair_off,
    pair_feat,
    cand_off,
    present,
    slot_lo,
    slot_hi,
    counts,
    sums,
    index,
):
    """A one-round level's answer for slots ``slot_lo..slot_hi``: the non-zero increments.

    For the pairs marked ``present`` (with candidates): the histogram of every pair of a
    node in one pass over the node's in-bag rows (each row's statistics gathered once,
    added to its bin of each pair, in row order), then each pair's non-empty bins in
    order: the running sum and its increment over the previous non-empty bin, as
    :func:`left_stats_coded` and :func:`~fedforest.federated.protocol.pack_increments`
    compute them (the same additions, so the same numbers). An empty bin's increment is
    exactly zero and is not written. Returns (rows written, present candidates, largest
    integer increment); an integer increment larger than ``counts`` holds is written
    wrapped (the caller sees the largest and asks again with int64).

    Parameters
    ----------
    codes_t, rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off, slot_lo, slot_hi :
        as :func:`left_stats_coded`
    present : ndarray of bool, shape (n_pairs,)  # IN: the pairs whose candidates travel
    counts : ndarray of int32 or int64, shape (m_max, n_counts)  # OUT: the increments'
        integer columns (``m_max``: at most one row per candidate and per in-bag row of
        each present pair)
    sums : ndarray of float64, shape (m_max, n_stats - n_counts)  # OUT: the other columns
    index : ndarray of int32, shape (m_max,)  # OUT: their positions among the block's
        present candidates (in pair order)
    """
    order, start, ii, st, cls = node_setup(rows, slot, slot_lo, slot_hi, n_classes)
    max_nc, max_pairs = longest_lists(pair_off, cand_off, slot_lo, slot_hi)
    n_counts = counts.shape[1]
    n_stat = n_counts + sums.shape[1]
    # Zeroed once: the emission zeroes the bins it reads, the others were not touched.
    hist = np.zeros((max_pairs, max_nc + 1, n_stat))
    bins = np.empty((max_pairs, max_nc + 1), dtype=np.int64)  # each pair's non-empty bins
    acc = np.empty(n_stat)
    prev = np.empty(n_stat)
    n_bins = np.zeros(max_pairs, dtype=np.int64)
    pairs = np.empty(max_pairs, dtype=np.int64)
    feats = np.empty(max_pairs, dtype=np.int64)
    # Views numba does not reference-count (kernel_views.borrowed): the arguments, and
    # the scratch kept alive to the end; the inlined helpers take them per row and pair.
    owners = (order, start, ii, st, cls, hist, bins, acc, prev, n_bins, pairs, feats)
    order, start, ii, st = borrowed(order), borrowed(start), borrowed(ii), borrowed(st)
    cls, hist, bins, acc = borrowed(cls), borrowed(hist), borrowed(bins), borrowed(acc)
    prev, n_bins, pairs = borrowed(prev), borrowed(n_bins), borrowed(pairs)
    feats, codes_t, rows, w = borrowed(feats), borrowed(codes_t), borrowed(rows), borrowed(w)
    slot, y, pair_off = borrowed(slot), borrowed(y), borrowed(pair_off)
    pair_feat = borrowed(pair_feat)
    cand_off, present, counts = borrowed(cand_off), borrowed(present), borrowed(counts)
    sums, index = borrowed(sums), borrowed(index)
    m = 0  # rows written
    k = 0  # present candidates so far
    biggest = 0.0
    for s in range(slot_lo, slot_hi):
        n_p = 0
        for p in range(pair_off[s], pair_off[s + 1]):
            if present[p] and cand_off[p + 1] > cand_off[p]:
                pairs[n_p] = p
                feats[n_p] = pair_feat[p]
                n_p += 1
        if n_p == 0:
            continue
        a = start[s - slot_lo]
        c = start[s - slot_lo + 1] - a
        gather_node(order, a, c, rows, w, y, n_classes, ii, st, cls)
        # A node of few rows (deep levels) fills few of a pair's bins: it lists them as it
        # fills them and sorts that list, instead of reading every bin of every pair.
        few = c * SPARSE_ROWS <= max_nc
        if few:
            _node_histograms_listed(
                hist, codes_t, feats, n_p, ii, st, cls, c, n_stat, n_classes, bins, n_bins
            )
        else:
            _node_histograms(hist, codes_t, feats, n_p, ii, st, cls, c, n_stat, n_classes)
        for t in range(n_p):
            p = pairs[t]
            nc = cand_off[p + 1] - cand_off[p]
            if few:
                _sort_short(bins[t], n_bins[t])
            else:
                n_bins[t] = _filled_bins(hist, t, nc, bins[t])
            if n_stat == 4 and n_counts == 2:  # regression: the usual answer, unrolled
                m, biggest = _emit4(
                    hist, t, bins[t], n_bins[t], nc, k, counts, sums, index, m, biggest
                )
            else:
                m, biggest = _emit(
                    hist, t, bins[t], n_bins[t], nc, k, counts, sums, index, m, biggest, acc, prev
                )
            for q in range(n_stat):  # the bin above the last candidate: never sent
                hist[t, nc, q] = 0.0
            k += nc
    keep_alive(owners)
    return m, k, biggest


@numba.njit(nogil=True, cache=True, inline="always")
def _add_row(hist, t, bk, st, r, cls, n_stat, n_classes):
    # Row r's statistics into bin bk of pair t (st[r, 0] is 1.0).
    if n_stat == 4 and n_classes == 0:
        hist[t, bk, 0] += st[r, 0]
        hist[t, bk, 1] += st[r, 1]
        hist[t, bk, 2] += st[r, 2]
        hist[t, bk, 3] += st[r, 3]
        return
    hist[t, bk, 0] += 1.0
    hist[t, bk, 1] += st[r, 1]
    if n_stat > 2:
        if n_classes == 0:
            hist[t, bk, 2] += st[r, 2]
            hist[t, bk, 3] += st[r, 3]
        else:
            hist[t, bk, cls[r]] += st[r, 1]


@numba.njit(nogil=True, cache=True, inline="always")
def _node_histograms(hist, codes_t, feats, n_p, ii, st, cls, c, n_stat, n_classes):
    # Every pair of the node in one pass over its rows; a bin's additions in row order.
    for r in range(c):
        i = ii[r]
        for t in range(n_p):
            _add_row(hist, t, codes_t[feats[t], i], st, r, cls, n_stat, n_classes)


@numba.njit(nogil=True, cache=True, inline="always")
def _node_histograms_listed(
    hist, codes_t, feats, n_p, ii, st, cls, c, n_stat, n_classes, bins, n_bins
):
    # As _node_histograms (the same additions), listing each pair's bins as they fill.
    for t in range(n_p):
        n_bins[t] = 0
    for r in range(c):
        i = ii[r]
        for t in range(n_p):
            bk = codes_t[feats[t], i]
            if hist[t, bk, 0] == 0.0:  # a bin's first row (its count is >= 1 after)
                bins[t, n_bins[t]] = bk
                n_bins[t] += 1
            _add_row(hist, t, bk, st, r, cls, n_stat, n_classes)


@numba.njit(nogil=True, cache=True, inline="always")
def _sort_short(a, n):
    # Insertion sort of a[:n], n small (a node's few rows).
    for i in range(1, n):
        v = a[i]
        j = i - 1
        while j >= 0 and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


@numba.njit(nogil=True, cache=True, inline="always")
def _filled_bins(hist, t, nc, out):
    # The bins below nc that hold a row, ascending.
    n = 0
    for j in range(nc):
        out[n] = j
        n += hist[t, j, 0] != 0.0
    return n


@numba.njit(nogil=True, cache=True, inline="always")
def _emit(hist, t, bins, nb, nc, k, counts, sums, index, m, biggest, acc, prev):
    # grid_increments' emission: each listed bin below nc in order, its running sum's
    # increment over the previous one (bins with no row are not listed: zero increments).
    n_counts = counts.shape[1]
    n_stat = hist.shape[2]
    for q in range(n_stat):
        acc[q] = 0.0
        prev[q] = 0.0
    for b in range(nb):
        j = bins[b]
        if j >= nc:  # the bin above the last candidate (listed last)
            break
        for q in range(n_stat):
            acc[q] += hist[t, j, q]
            hist[t, j, q] = 0.0
            v = acc[q] - prev[q]
            prev[q] = acc[q]
            if q < n_counts:
                biggest = max(biggest, abs(v))
                counts[m, q] = np.rint(v)
            else:
                sums[m, q - n_counts] = v
        index[m] = k + j
        m += 1
    return m, biggest


@numba.njit(nogil=True, cache=True, inline="always")
def _emit4(hist, t, bins, nb, nc, k, counts, sums, index, m, biggest):
    # _emit for (rows, weight | sum w y, sum w y^2), unrolled.
    a0 = a1 = a2 = a3 = 0.0
    p0 = p1 = p2 = p3 = 0.0
    for b in range(nb):
        j = bins[b]
        if j >= nc:
            break
        a0 += hist[t, j, 0]
        a1 += hist[t, j, 1]
        a2 += hist[t, j, 2]
        a3 += hist[t, j, 3]
        hist[t, j, 0] = 0.0
        hist[t, j, 1] = 0.0
        hist[t, j, 2] = 0.0
        hist[t, j, 3] = 0.0
        v0, v1 = a0 - p0, a1 - p1
        biggest = max(biggest, max(abs(v0), abs(v1)))
        counts[m, 0] = np.rint(v0)
        counts[m, 1] = np.rint(v1)
        sums[m, 0] = a2 - p2
        sums[m, 1] = a3 - p3
        p0, p1, p2, p3 = a0, a1, a2, a3
        index[m] = k + j
        m += 1
    return m, biggest


@numba.njit(nogil=True, cache=True)
def answer_rows(slot, pair_off, cand_off, present, slot_lo, slot_hi):
    """The most rows :func:`grid_increments` writes for slots ``slot_lo..slot_hi``.

    Per present pair, the fewer of its candidates and its node's rows (a non-empty bin
    each). ``slot``: the in-bag rows' slots of that block (-1: in a leaf); the other
    arguments as :func:`grid_increments`'.
    """
    rows = np.zeros(max(slot_hi - slot_lo, 0), dtype=np.int64)
    for r in range(slot.shape[0]):
        if slot[r] >= 0:
            rows[slot[r] - slot_lo] += 1
    total = 0
    for s in range(slot_lo, slot_hi):
        for p in range(pair_off[s], pair_off[s + 1]):
            if present[p]:
                total += min(cand_off[p + 1] - cand_off[p], rows[s - slot_lo])
    return total


def answer_rows_numpy(
    slot: NDArray[np.int32],
    pair_off: NDArray[np.int64],
    cand_off: NDArray[np.int64],
    present: NDArray[np.bool_],
    slot_lo: int,
    slot_hi: int,
) -> int:
    """NumPy twin of :func:`answer_rows`."""
    n_cand = np.diff(cand_off)
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
    node_rows = np.bincount(slot[slot >= 0], minlength=pair_off.size - 1)
    bound = np.where(present, np.minimum(n_cand, node_rows[pair_node]), 0)
    return int(bound[pair_off[slot_lo] : pair_off[slot_hi]].sum())


# Both inline client_kernels' helpers: their cache goes stale with it too.
cache_depends_on(left_stats_coded, client_kernels)
cache_depends_on(grid_increments, client_kernels, kernel_views)


def pack_coded(
    codes_t: NDArray[np.uint16],
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    y: NDArray[np.float64],
    n_classes: int,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    present: NDArray[np.bool_],
    n_stats: int,
    n_counts: int,
    blocks: list[tuple[int, int, slice]],
) -> dict[str, NDArray[Any]]:
    """The left statistics' increments, packed, without every candidate's statistics first.

    What :func:`~fedforest.federated.protocol.pack_increments` sends, made by
    :func:`grid_increments` (one pass over a node's rows for all its pairs, the non-empty
    bins written straight into the arrays that travel). ``blocks`` are (first slot, end
    slot, the block's in-bag positions), each run in a thread of its own (the kernel drops
    the GIL). The result is the same arrays ``pack_increments(left, first, n_counts,
    "left", present)`` makes from :func:`left_stats_coded`'s ``left``, bit for bit
    (:func:`pack_coded_numpy` is that composition).
    """
    int32_max = float(np.iinfo(np.int32).max)
    parts: list[Any] = [None] * len(blocks)

    def job(i: int) -> None:
        lo, hi, r = blocks[i]
        m_max = answer_rows(slot[r], pair_off, cand_off, present, lo, hi)
        for dtype in (np.int32, np.int64):  # int64 only if a count does not fit int32
            # Sized for the worst case; the rows past ``m`` are never written, so never
            # touched: the views below hold no memory for them.
            counts = np.empty((m_max, n_counts), dtype=dtype)
            sums = np.empty((m_max, n_stats - n_counts))
            index = np.empty(m_max, dtype=np.int32)
            m, k, big = grid_increments(
                codes_t, rows[r], w[r], slot[r], y, n_classes, pair_off, pair_feat, cand_off,
                present, lo, hi, counts, sums, index,
            )  # fmt: skip
            if big <= int32_max or dtype is np.int64:
                break
        parts[i] = (counts[:m], sums[:m], index[:m], k, big)

    _threads(job, len(blocks))
    return increment_message(parts, n_counts, n_stats)


def pack_coded_numpy(
    codes_t: NDArray[np.uint16],
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    y: NDArray[np.float64],
    n_classes: int,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    present: NDArray[np.bool_],
    n_stats: int,
    n_counts: int,
    blocks: list[tuple[int, int, slice]],
) -> dict[str, NDArray[Any]]:
    """NumPy twin of :func:`pack_coded`: every candidate's sums, then their increments."""
    left = np.empty((int(cand_off[-1]), n_stats))
    for lo, hi, r in blocks:
        out = left[cand_off[pair_off[lo]] : cand_off[pair_off[hi]]]
        left_stats_coded_numpy(
            codes_t, rows[r], w[r], slot[r], y, n_classes, pair_off, pair_feat, cand_off,
            lo, hi, out,
        )  # fmt: skip
    return increments_of(left, cand_off, present, n_counts, pack_increments_numpy)


def _threads(job: Any, n: int) -> None:
    """``job(i)`` for ``i < n``, in threads when more than one (the kernels drop the GIL)."""
    if n == 1:
        job(0)
        return
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(job, range(n)))
