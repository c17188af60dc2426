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

from .client_kernels import _row_stats, gather_node, group_rows
from .protocol import Message, expand_candidates, expect_array, pack_increments

__all__ = [
    "GridCodes",
    "fixed_candidates",
    "left_stats_coded",
    "left_stats_coded_numpy",
    "left_increments_coded",
    "pack_coded",
]

#: A pair whose node has fewer than one row per ``SORT_ROWS`` candidates chains its rows by
#: bin and adds the non-empty bins only (:func:`left_increments_coded`).
SORT_ROWS = 4
#: Codes are uint16: a pair of more candidates goes the general way.
MAX_GRID = np.iinfo(np.uint16).max - 1


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

    def update(
        self, feat_off: NDArray[np.int64], feat_cand: NDArray[np.float64], name: str
    ) -> None:
        """Take the fit's candidate lists, one per column (its codes remade if it changed).

        ``feat_cand[feat_off[f]:feat_off[f + 1]]`` are column ``f``'s candidates: ascending
        numbers (checked: they come from the server).
        """
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
            self.codes[f] = np.searchsorted(grid, self.Xt[f], side="left")
            self.grids[f] = grid.copy()


def fixed_candidates(
    msg: Message,
    grid: GridCodes | None,
    Xt: NDArray[np.float64],
    pair_feat: NDArray[np.int32],
    name: str,
) -> tuple[GridCodes, NDArray[np.int64], NDArray[np.float64]]:
    """A one-round level's candidates (``feat_cand``, per column) taken into ``grid``.

    Returns the grid (made on first use) and the pairs' candidate lists.
    """
    shape = (Xt.shape[0],)  # the features, and the client index (never a pair's)
    f_off = expect_array(msg, "feat_cand_off", "i", shape, "server").astype(np.int64)
    f_cand = expect_array(msg, "feat_cand", "f", (int(f_off[-1]),), "server")
    grid = grid or GridCodes(Xt)
    grid.update(f_off, f_cand, name)
    return grid, *expand_candidates(f_off, f_cand, pair_feat)


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
    order = np.empty(rows.shape[0], dtype=np.int64)
    start = np.zeros(slot_hi - slot_lo + 1, dtype=np.int64)
    group_rows(slot, slot_lo, order, start)
    p_lo, p_hi = pair_off[slot_lo], pair_off[slot_hi]
    c0 = cand_off[p_lo]
    max_nc = 0
    for p in range(p_lo, p_hi):
        max_nc = max(max_nc, cand_off[p + 1] - cand_off[p])
    n_stat = out.shape[1]
    hist = np.empty((max_nc + 1, n_stat))
    acc = np.empty(n_stat)
    n_in = rows.shape[0]
    ii = np.empty(n_in, dtype=np.int64)
    st = np.empty((n_in, 2 if n_classes else 4))
    cls = np.empty(n_in, dtype=np.int64)
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
            # Running sums bin by bin (each column's additions in the same order as
            # column by column: the same numbers), writing ``out`` row by row.
            for q in range(n_stat):
                acc[q] = 0.0
            for j in range(nc):
                for q in range(n_stat):
                    acc[q] += hist[j, q]
                    out[lo + j - c0, q] = acc[q]


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
    c0 = cand_off[pair_off[slot_lo]]
    for s in range(slot_lo, slot_hi):
        mine = np.flatnonzero(slot == s)
        stats = _row_stats(w[mine], y[rows[mine]], n_classes)[:, : out.shape[1]]
        for p in range(pair_off[s], pair_off[s + 1]):
            nc = int(cand_off[p + 1] - cand_off[p])
            if nc == 0:
                continue
            hist = np.zeros((nc + 1, stats.shape[1]))
            np.add.at(hist, codes_t[pair_feat[p], rows[mine]].astype(np.int64), stats)
            out[cand_off[p] - c0 : cand_off[p + 1] - c0] = np.cumsum(hist, axis=0)[:nc]


@numba.njit(nogil=True, cache=True)
def left_increments_coded(
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
    n_counts,
    inc,
    index,
):
    """:func:`left_stats_coded` straight to the increments that travel (the sparse rows).

    For the pairs of slots ``slot_lo..slot_hi`` marked ``present``: every candidate's
    left statistics as their running sum (the same additions as :func:`left_stats_coded`),
    then each one's increment over the previous candidate of its pair (the first: itself),
    as :func:`~fedforest.federated.protocol.pack_increments` computes it; only the non-zero
    ones are written. Returns (rows written, present candidates, largest |count|).

    Parameters
    ----------
    codes_t, rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off, slot_lo, slot_hi :
        as :func:`left_stats_coded`
    present : ndarray of bool, shape (n_pairs,)  # IN: the pairs whose candidates travel
    n_counts : int  # IN: the leading integer columns (for the largest count)
    inc : ndarray of float64, shape (m_max + 1, n_stats)  # OUT: the non-zero increments
        (``m_max``: at most one per candidate and one per row of each present pair; one
        more row of scratch)
    index : ndarray of int64, shape (m_max,)  # OUT: their positions among the block's
        present candidates (in pair order)
    """
    order = np.empty(rows.shape[0], dtype=np.int64)
    start = np.zeros(slot_hi - slot_lo + 1, dtype=np.int64)
    group_rows(slot, slot_lo, order, start)
    p_lo, p_hi = pair_off[slot_lo], pair_off[slot_hi]
    max_nc = 0
    for p in range(p_lo, p_hi):
        max_nc = max(max_nc, cand_off[p + 1] - cand_off[p])
    n_stat = inc.shape[1]
    hist = np.empty((max_nc + 1, n_stat))
    acc = np.empty(n_stat)
    prev = np.empty(n_stat)
    n_in = rows.shape[0]
    ii = np.empty(n_in, dtype=np.int64)
    st = np.empty((n_in, 2 if n_classes else 4))
    cls = np.empty(n_in, dtype=np.int64)
    head = np.empty(max_nc + 1, dtype=np.int64)
    nxt = np.empty(n_in, dtype=np.int64)
    m = 0  # rows written
    k = 0  # present candidates so far
    biggest = 0.0
    for s in range(slot_lo, slot_hi):
        a, b = start[s - slot_lo], start[s - slot_lo + 1]
        c = b - a
        gathered = False
        for p in range(pair_off[s], pair_off[s + 1]):
            nc = cand_off[p + 1] - cand_off[p]
            if nc == 0 or not present[p]:
                continue
            if not gathered:
                gather_node(order, a, c, rows, w, y, n_classes, ii, st, cls)
                gathered = True
            g = codes_t[pair_feat[p]]
            for q in range(n_stat):
                acc[q] = 0.0
                prev[q] = 0.0
            if c * SORT_ROWS < nc:
                # Few rows, many candidates: each bin's rows chained (in row order) and
                # only the non-empty bins added to the running sum, in bin order. The
                # candidates between two non-empty bins keep the same running sum, so
                # zero increments: the numbers pack_increments gets from every
                # candidate's sums.
                for j in range(nc + 1):
                    head[j] = -1
                for r_ in range(c - 1, -1, -1):
                    bk = g[ii[r_]]
                    nxt[r_] = head[bk]
                    head[bk] = r_
                for j in range(nc):
                    r_ = head[j]
                    if r_ < 0:
                        continue
                    for q in range(n_stat):
                        hist[0, q] = 0.0
                    while r_ >= 0:
                        hist[0, 0] += 1.0
                        hist[0, 1] += st[r_, 1]
                        if n_stat > 2:
                            if n_classes == 0:
                                hist[0, 2] += st[r_, 2]
                                hist[0, 3] += st[r_, 3]
                            else:
                                hist[0, cls[r_]] += st[r_, 1]
                        r_ = nxt[r_]
                    for q in range(n_stat):
                        acc[q] += hist[0, q]
                        inc[m, q] = acc[q] - prev[q]
                        prev[q] = acc[q]
                    for q in range(n_counts):
                        biggest = max(biggest, abs(inc[m, q]))
                    index[m] = k + j
                    m += 1
                k += nc
                continue
            for j in range(nc + 1):
                for q in range(n_stat):
                    hist[j, q] = 0.0
            _add_coded(hist, g, ii, st, cls, c, n_stat, n_classes)
            for j in range(nc):
                nz = False
                for q in range(n_stat):
                    acc[q] += hist[j, q]
                    v = acc[q] - prev[q]
                    inc[m, q] = v
                    nz |= v != 0.0
                    prev[q] = acc[q]
                if nz:
                    for q in range(n_counts):
                        biggest = max(biggest, abs(inc[m, q]))
                    index[m] = k
                    m += 1
                k += 1
    return m, k, biggest


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

    What :func:`~fedforest.federated.protocol.pack_increments` sends, from the codes: when
    the present pairs have more than ``SORT_ROWS`` candidates per row, straight from each
    non-empty bin (:func:`left_increments_coded`), else every candidate's sums first.
    ``blocks`` are (first slot, end slot, the block's in-bag positions), each run in a
    thread of its own (the kernel drops the GIL). The result is the same arrays
    ``pack_increments(left, first, n_counts, "left", present)`` makes, bit for bit.
    """
    n_cand = np.diff(cand_off)
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
    node_rows = np.bincount(slot[slot >= 0], minlength=pair_off.size - 1)
    bound = np.where(present, np.minimum(n_cand, node_rows[pair_node]), 0)
    parts: list[Any] = [None] * len(blocks)
    if n_cand[present].sum() <= SORT_ROWS * node_rows[pair_node][present].sum():
        # Rows enough to fill most bins: every candidate's sums, then pack_increments.
        left = np.empty((int(cand_off[-1]), n_stats))

        def fill(i: int) -> None:
            lo, hi, r = blocks[i]
            out = left[cand_off[pair_off[lo]] : cand_off[pair_off[hi]]]
            left_stats_coded(
                codes_t, rows[r], w[r], slot[r], y, n_classes, pair_off, pair_feat, cand_off,
                lo, hi, out,
            )  # fmt: skip

        _threads(fill, len(blocks))
        first = np.zeros(left.shape[0], dtype=bool)
        first[cand_off[:-1][n_cand > 0]] = True
        return pack_increments(left, first, n_counts, "left", np.repeat(present, n_cand))

    def job(i: int) -> None:
        lo, hi, r = blocks[i]
        m_max = int(bound[pair_off[lo] : pair_off[hi]].sum())
        inc, index = np.empty((m_max + 1, n_stats)), np.empty(m_max + 1, dtype=np.int64)
        m, k, big = left_increments_coded(
            codes_t, rows[r], w[r], slot[r], y, n_classes, pair_off, pair_feat, cand_off,
            present, lo, hi, n_counts, inc, index,
        )  # fmt: skip
        parts[i] = (inc[:m], index[:m], k, big)

    _threads(job, len(blocks))
    base = np.cumsum([0] + [p[2] for p in parts])
    inc = np.concatenate([p[0] for p in parts]) if parts else np.empty((0, n_stats))
    index = np.concatenate([p[1] + b for p, b in zip(parts, base, strict=False)])
    n, n_nonzero = int(base[-1]), int(index.size)
    biggest = max([p[3] for p in parts], default=0.0)
    row_bytes = 4 * n_counts + 8 * (n_stats - n_counts)
    sparse = n_nonzero * (row_bytes + 4) < n * row_bytes
    if not sparse:  # every present candidate travels, the zero increments too
        dense = np.zeros((n, n_stats))
        dense[index] = inc
        inc = dense
    dtype = np.int64 if biggest > np.iinfo(np.int32).max else np.int32
    out: dict[str, NDArray[Any]] = {"left_counts": np.rint(inc[:, :n_counts]).astype(dtype)}
    if n_stats > n_counts:
        out["left_sums"] = np.ascontiguousarray(inc[:, n_counts:])
    if sparse:
        out["left_index"] = index.astype(np.int32)
    return out


def _threads(job: Any, n: int) -> None:
    """``job(i)`` for ``i < n``, in threads when more than one (the kernels drop the GIL)."""
    if n == 1:
        job(0)
        return
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(job, range(n)))
