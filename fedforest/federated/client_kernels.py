"""Client-side row kernels: node summaries, left statistics at candidates.

Each numba kernel (``nogil``, cached) has a NumPy twin with the same signature and result;
``tests/test_kernels.py`` checks they agree. Per-tree client state is three parallel arrays
over the tree's in-bag rows: ``rows`` (row index), ``w`` (bootstrap count) and ``slot``
(the row's node in the server's current frontier, -1 once it sits in a finished leaf).

Row statistics follow :mod:`fedforest._common`: ``[1, w, w*y, w*y^2]`` for regression
(``n_classes == 0``) or ``[1, w, w*[y == c] for c]`` for classification, where ``y``
holds the global class index.
"""

from __future__ import annotations

import weakref
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from . import client_buckets, client_words, kernel_views
from .client_buckets import BUCKET_AMB, BUCKET_WORK, BUCKETS_MIN, BUCKETS_PER_CAND, bucket_bins
from .client_words import (
    add_words,
    bins_store,
    count_words,
    packed_words,
    row_words,
    whole_words,
    zero_rows,
)
from .kernel_cache import cache_depends_on, inner_kernel
from .kernel_views import borrowed, keep_alive

__all__ = [
    "node_summaries",
    "node_summaries_numpy",
    "group_rows",
    "group_rows_numpy",
    "left_stats",
    "left_stats_numpy",
    "left_stats_ranked",
    "left_stats_ranked_numpy",
    "value_ranks",
    "register_ranks",
    "ranks_for",
    "Ranks",
    "SMALL_NODE",
    "SMALL_SKETCH",
]


@numba.njit(inline="always")
def _add_row(out, k, w, y, n_classes):
    out[k, 0] += 1.0
    out[k, 1] += w
    if n_classes == 0:
        out[k, 2] += w * y
        out[k, 3] += w * y * y
    else:
        out[k, 2 + int(y)] += w


@numba.njit(nogil=True, cache=True)
def node_summaries(rows, w, slot, y, n_classes, out):
    """Add every in-bag row's statistics to its node's summary.

    Parameters
    ----------
    rows, w, slot : ndarray, shape (n_inbag,)  # IN
    y : ndarray of float64, shape (n_samples,)  # IN: target or class index
    n_classes : int  # IN: 0 for regression
    out : ndarray of float64, shape (n_slots, n_stats)  # OUT: accumulated into
    """
    for r in range(rows.shape[0]):
        s = slot[r]
        if s >= 0:
            _add_row(out, s, w[r], y[rows[r]], n_classes)


def _row_stats(
    w: NDArray[np.float64], y: NDArray[np.float64], n_classes: int
) -> NDArray[np.float64]:
    if n_classes == 0:
        return np.column_stack([np.ones_like(w), w, w * y, w * y * y])
    onehot = np.zeros((w.size, n_classes))
    onehot[np.arange(w.size), y.astype(np.int64)] = w
    return np.column_stack([np.ones_like(w), w, onehot])


def node_summaries_numpy(
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    y: NDArray[np.float64],
    n_classes: int,
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`node_summaries`."""
    keep = slot >= 0
    np.add.at(out, slot[keep], _row_stats(w[keep], y[rows[keep]], n_classes))


#: Nodes with at most this many in-bag rows (on a client) are binned by counting the
#: candidates below each value; larger ones go through the fine codes, whose fixed cost
#: (one pass over the ``N_FINE_BINS`` bins) is then small per row.
SMALL_NODE = 64
#: Nodes with at most this many rows are sketched by an insertion sort of their exact values
#: (quadratic, so the cut-over to the fine-code histogram comes earlier).
SMALL_SKETCH = 24


@numba.njit(nogil=True, cache=True)
def group_rows(slot, slot_lo, order, start):
    """Counting sort of in-bag positions by frontier slot.

    Parameters
    ----------
    slot : ndarray of int32, shape (n_inbag,)  # IN: slots in [slot_lo, slot_lo + n) or -1
    slot_lo : int  # IN
    order : ndarray of int64, shape (n_inbag,)  # OUT: positions grouped by slot
    start : ndarray of int64, shape (n + 1,)  # OUT: slot ``slot_lo + i`` owns
        ``order[start[i]:start[i + 1]]``
    """
    start[:] = 0
    for r in range(slot.shape[0]):
        if slot[r] >= 0:
            start[slot[r] - slot_lo + 1] += 1
    for i in range(start.shape[0] - 1):
        start[i + 1] += start[i]
    fill = start[:-1].copy()
    for r in range(slot.shape[0]):
        s = slot[r]
        if s >= 0:
            order[fill[s - slot_lo]] = r
            fill[s - slot_lo] += 1


@numba.njit(inline="always")
def largest_node(start):
    """The most rows of a slot after :func:`group_rows` (per-node scratch is this long)."""
    most = 0
    for i in range(start.shape[0] - 1):
        most = max(most, start[i + 1] - start[i])
    return most


@numba.njit(inline="always")
def node_setup(rows, slot, slot_lo, slot_hi, n_classes):
    """The set-up of the kernels that gather a node's rows (:func:`gather_node`).

    Returns ``order`` and ``start`` (:func:`group_rows` of slots ``slot_lo..slot_hi``) and
    the per-node scratch ``ii``, ``st``, ``cls``, as long as the largest node.
    """
    order = np.empty(rows.shape[0], dtype=np.int64)
    start = np.zeros(slot_hi - slot_lo + 1, dtype=np.int64)
    group_rows(slot, slot_lo, order, start)
    n_in = largest_node(start)
    ii = np.empty(n_in, dtype=np.int64)
    st = np.empty((n_in, 2 if n_classes else 4))
    cls = np.empty(n_in, dtype=np.int64)
    return order, start, ii, st, cls


@numba.njit(inline="always")
def longest_lists(pair_off, cand_off, slot_lo, slot_hi):
    """(the most candidates of a pair, the most pairs of a slot) of slots ``slot_lo..slot_hi``."""
    max_nc = 0
    max_pairs = 0
    for s in range(slot_lo, slot_hi):
        max_pairs = max(max_pairs, pair_off[s + 1] - pair_off[s])
        for p in range(pair_off[s], pair_off[s + 1]):
            max_nc = max(max_nc, cand_off[p + 1] - cand_off[p])
    return max_nc, max_pairs


@numba.njit(inline="always")
def bins_scratch(max_nc, uniq_off, n_in):
    """:func:`pair_bins`' scratch: ``rank_c``, ``lut``, ``padded``, ``rr``, ``xx``, ``bins``."""
    max_nu = 0
    for f in range(uniq_off.shape[0] - 1):
        max_nu = max(max_nu, uniq_off[f + 1] - uniq_off[f])
    n_pad = 1
    while n_pad < max_nc + 1 + BUCKET_AMB:  # a bucketed pair's padding too
        n_pad *= 2
    return (
        np.empty(max_nc, dtype=np.int64),
        np.empty(max(max_nu + 3, BUCKETS_PER_CAND * max_nc + BUCKETS_MIN), dtype=np.int32),
        np.empty(n_pad),
        np.empty(n_in, dtype=np.int32),
        np.empty(n_in),
        np.empty(n_in, dtype=np.int64),
    )


def group_rows_numpy(
    slot: NDArray[np.int32], slot_lo: int, order: NDArray[np.int64], start: NDArray[np.int64]
) -> None:
    """NumPy twin of :func:`group_rows`."""
    active = np.flatnonzero(slot >= 0)
    srt = np.argsort(slot[active], kind="stable")
    order[: active.size] = active[srt]
    start[:] = 0
    np.cumsum(np.bincount(slot[active] - slot_lo, minlength=start.size - 1), out=start[1:])


#: Nodes of at least this many rows (on a client) bin a pair's rows through a table over
#: value ranks (the candidates' ranks cost about a microsecond a pair); smaller ones compare
#: each row's value with the candidates.
RANK_ROWS = 256
#: The table spans the ranks between a pair's first and last candidate; it is used while
#: that span is at most ``LUT_ROWS`` entries per row of the node (plus ``LUT_MIN``).
LUT_ROWS = 16
LUT_MIN = 512
#: Pairs with at most this many candidates count the candidates below each value
#: (vectorised over the rows); longer lists use a branch-free binary search.
COUNT_MAX = 512
#: The count runs row by row over all the candidates (vectorised over the candidates) for
#: lists of at least ``ROW_WISE_MIN`` candidates in nodes of at most ``ROW_WISE_ROWS``
#: rows, and for lists of at least ``ROW_WISE_LONG`` in any node; else candidate by
#: candidate over all the rows. The same counts; row-wise took 0.15-0.8x the time there
#: (numba, one pair of 10-255 rows and 16-128 candidates; docs/benchmarks-history.md).
ROW_WISE_MIN = 16
ROW_WISE_ROWS = 128
ROW_WISE_LONG = 64
#: Round B's one-pass answer (client_increments): nodes of at most this many rows (and
#: lists of at most ``COUNT_MAX``) count the candidates below each value row by row,
#: vectorised over the candidates (the same counts as ``pair_bins``).
FEW_ROWS = 16

Ranks = tuple[NDArray[np.int32], NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]


def value_ranks(X: NDArray[np.float64], codes_t: NDArray[np.uint8], n_fine: int) -> Ranks:
    """Rank codes of a client's values, once per fit (as its fine codes): see ``Ranks``.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)
        Finite values, or +inf for a missing one.
    codes_t : ndarray of uint8, shape (n_features, n_samples)
        Their fine codes (ascending with the values).
    n_fine : int
        The number of fine bins.

    Returns
    -------
    ranks_t : ndarray of int32, shape (n_features, n_samples)
        Column-major: the number of the column's distinct finite values below the row's
        value (+inf: all of them).
    uniq : ndarray of float64
        Every column's sorted distinct finite values, one after the other.
    uniq_off : ndarray of int64, shape (n_features + 1,)
        Column ``j``'s values are ``uniq[uniq_off[j]:uniq_off[j + 1]]``.
    bin_start : ndarray of int64, shape (n_features, n_fine + 1)
        The rank of the first distinct value of each fine bin (the values of bin ``b`` have
        the ranks ``bin_start[j, b]:bin_start[j, b + 1]``).
    """
    n, d = X.shape
    ranks_t = np.empty((d, n), dtype=np.int32)
    bin_start = np.zeros((d, n_fine + 1), dtype=np.int64)
    parts = []
    uniq_off = np.zeros(d + 1, dtype=np.int64)
    for j in range(d):
        x = X[:, j]
        known = np.isfinite(x)
        u = np.unique(x[known])
        ranks_t[j] = np.searchsorted(u, x, side="left")
        code_u = np.zeros(u.size, dtype=np.int64)
        code_u[ranks_t[j][known]] = codes_t[j][known]
        bin_start[j] = np.searchsorted(code_u, np.arange(n_fine + 1), side="left")
        parts.append(u)
        uniq_off[j + 1] = uniq_off[j] + u.size
    uniq = np.concatenate(parts) if parts else np.empty(0)
    return ranks_t, uniq, uniq_off, bin_start


#: Rank codes by the identity of the fine codes they were made with (``register_ranks``):
#: :func:`left_stats` keeps the signature of its NumPy twin and finds them here.
_RANKS: dict[int, Ranks] = {}


def register_ranks(codes_t: NDArray[np.uint8], ranks: Ranks) -> None:
    """Keep ``ranks`` (as :func:`value_ranks` returns) for as long as ``codes_t`` lives."""
    key = id(codes_t)
    _RANKS[key] = ranks
    weakref.finalize(codes_t, _RANKS.pop, key, None)


def ranks_for(Xt: NDArray[np.float64], codes_t: NDArray[np.uint8], n_fine: int) -> Ranks:
    """The rank codes registered with ``codes_t``, else made from ``Xt`` (and registered)."""
    ranks = _RANKS.get(id(codes_t))
    if ranks is None:
        ranks = value_ranks(Xt[: codes_t.shape[0]].T, codes_t, n_fine)
        register_ranks(codes_t, ranks)
    return ranks


def left_stats(
    Xt: NDArray[np.float64],
    codes_t: NDArray[np.uint8],
    fine_min: NDArray[np.float64],
    fine_max: NDArray[np.float64],
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    y: NDArray[np.float64],
    n_classes: int,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
) -> None:
    """Left-child statistics at every candidate of the pairs of slots ``slot_lo..slot_hi``.

    The statistics at candidate ``t`` sum the rows with ``x <= t``, exactly, in row order:
    :func:`left_stats_ranked` on the rank codes of the same values (made once per set of
    fine codes: :func:`~fedforest.federated.client_sketch.fine_codes` registers them).

    Parameters
    ----------
    Xt : ndarray of float64, shape (n_features, n_samples)  # IN: column-major values
    codes_t : ndarray of uint8, shape (n_features, n_samples)  # IN: column-major codes
    fine_min, fine_max : ndarray of float64, shape (n_features, n_fine)  # IN
    rows, w, slot : ndarray, shape (n_inbag,)  # IN: rows of the trees owning these slots
    y : ndarray of float64, shape (n_samples,)  # IN
    n_classes : int  # IN
    pair_off : ndarray of int64, shape (n_slots + 1,)  # IN
    pair_feat : ndarray of int32, shape (n_pairs,)  # IN
    cand_off : ndarray of int64, shape (n_pairs + 1,)  # IN
    cand : ndarray of float64, shape (n_candidates,)  # IN
    slot_lo, slot_hi : int  # IN
    out : ndarray of float64, shape (n_block_candidates, n_stats)  # OUT: candidate
        ``cand_off[pair_off[slot_lo]] + i`` in row ``i``; with 2 columns, the rows and the
        weight only
    """
    left_stats_ranked(
        Xt, fine_min, fine_max, *ranks_for(Xt, codes_t, fine_min.shape[1]), rows, w, slot,
        y, n_classes, pair_off, pair_feat, cand_off, cand, slot_lo, slot_hi, out,
    )  # fmt: skip


@numba.njit(inline="always")
def _rank_right(uniq, u0, u1, t):
    # ``np.searchsorted(uniq[u0:u1], t, side="right")`` (a NaN: above every value).
    if t != t:
        return u1 - u0 + 1
    lo, hi = u0, u1
    while lo < hi:
        mid = (lo + hi) >> 1
        if uniq[mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    return lo - u0


@numba.njit(inline="always")
def _candidate_ranks(cs, fmin, fmax, uniq, u0, start, rank_c):
    # rank_c[j] = the distinct values <= cs[j] (cs ascending): one merge with the fine bins,
    # then a count among the few distinct values of the bin cs[j] falls in.
    n_fine = fmin.shape[0]
    b = 0
    for j in range(cs.shape[0]):
        t = cs[j]
        while b < n_fine and fmax[b] <= t:
            b += 1
        r = start[b]
        if b < n_fine and fmin[b] <= t:
            for i in range(start[b], start[b + 1]):
                r += uniq[u0 + i] <= t
        rank_c[j] = r


# gather_node, gather_counts, pair_bins, add_to_bins, running_sums and the sinks of
# client_words are numba functions of their own, not inline="always": an inlined callee
# is copied, typed and lowered again in every kernel that calls it, where a call compiles
# it once per argument types and LLVM links it in (and inlines the small ones). The first
# run's compile CPU of left_stats_ranked and client_kept.left_stats_kept, about 3 s less
# (docs/benchmarks.md, "First run"); client_grid and client_kept inline copies where a
# call a pair measured slower.
@inner_kernel
def gather_node(order, a, c, rows, w, y, n_classes, ii, st, cls):
    """Gather a node's ``c`` in-bag rows (``order[a:a + c]``) into contiguous scratch.

    Their row index in ``ii``, statistics ``[1, w, w y, w y^2]`` (regression) or
    ``[1, w]`` in ``st``, and classification's class column ``2 + y`` in ``cls``. Shared
    by the left-statistics kernels (here and in :mod:`~fedforest.federated.client_grid`).
    """
    for k in range(c):
        r = order[a + k]
        ii[k] = rows[r]
        wk, yk = w[r], y[rows[r]]
        st[k, 0] = 1.0
        st[k, 1] = wk
        if n_classes == 0:
            st[k, 2] = wk * yk
            st[k, 3] = wk * yk * yk
        else:
            cls[k] = 2 + int(yk)


@inner_kernel
def gather_counts(order, a, c, rows, w, ii, st):
    """:func:`gather_node` of the rows and weight alone (the grids' counts): no target read."""
    for k in range(c):
        r = order[a + k]
        ii[k] = rows[r]
        st[k, 0] = 1.0
        st[k, 1] = w[r]


@inner_kernel
def pair_bins(
    cs, c, f, Xt, fine_min, fine_max, ranks_t, uniq, uniq_off, bin_start, ii, rank_c, lut,
    padded, rr, xx, bins,
):  # fmt: skip
    """Each of a node's ``c`` rows (``ii``) binned among one pair's candidates ``cs``.

    ``bins[k]`` is the number of candidates below row ``k``'s value of feature ``f`` (see
    :func:`left_stats_ranked`): through equal buckets (``client_buckets.bucket_bins``) where
    the candidates are ascending and spread, else as that kernel says; ``rank_c``, ``lut``,
    ``padded`` (a power of two longer than ``cs``), ``rr`` and ``xx`` are scratch. Shared with
    :mod:`~fedforest.federated.client_increments`.
    """
    nc = cs.shape[0]
    n_pad = padded.shape[0]
    ascending = True
    for j in range(1, nc):
        ascending &= cs[j] >= cs[j - 1]
    xf = Xt[f]
    for k in range(c):
        xx[k] = xf[ii[k]]
    if ascending and c * nc >= BUCKET_WORK and bucket_bins(cs, c, xx, lut, rank_c, padded, bins):
        return
    use_lut = False
    r_lo = span = 0
    if ascending and c >= RANK_ROWS:
        u0, u1 = uniq_off[f], uniq_off[f + 1]
        r_lo = _rank_right(uniq, u0, u1, cs[0])
        span = _rank_right(uniq, u0, u1, cs[nc - 1]) - r_lo + 1
        use_lut = span <= LUT_ROWS * c + LUT_MIN
    if use_lut:
        _candidate_ranks(cs, fine_min[f], fine_max[f], uniq, u0, bin_start[f], rank_c)
        # lut[1 + i]: the candidates whose R is at most r_lo + i; below r_lo none,
        # from the last R on all of them (the index is clamped into 0..span).
        lut[0] = 0
        pos = 1
        for j in range(nc):
            e = rank_c[j] - r_lo + 1
            for i in range(pos, e):
                lut[i] = j
            pos = max(pos, e)
        for i in range(pos, span + 1):
            lut[i] = nc
        ranks_f = ranks_t[f]
        for k in range(c):
            rr[k] = ranks_f[ii[k]]
        for k in range(c):
            bins[k] = lut[min(max(rr[k] - r_lo + 1, 0), span)]
    elif nc < ROW_WISE_MIN or (c > ROW_WISE_ROWS and nc < ROW_WISE_LONG):
        for k in range(c):
            bins[k] = 0
        for j in range(nc):
            t = cs[j]
            for k in range(c):
                bins[k] += t < xx[k]
    elif nc <= COUNT_MAX or not ascending:
        # The same count, row by row (vectorised over the candidates): no load and
        # store of every row's count per candidate (Round A's grids under "secure").
        for k in range(c):
            x = xx[k]
            acc = 0
            for j in range(nc):
                acc += cs[j] < x
            bins[k] = acc
    else:
        # Candidates padded to a power of two with +inf (never below a value).
        for j in range(nc):
            padded[j] = cs[j]
        for j in range(nc, n_pad):
            padded[j] = np.inf
        for k in range(c):
            x = xx[k]
            q = 0
            step = n_pad >> 1
            while step > 0:
                q += step if padded[q + step - 1] < x else 0
                step >>= 1
            bins[k] = q + (padded[q] < x)


@inner_kernel
def add_to_bins(hist, bins, st, cls, c, n_stat, n_classes):
    """Add a node's ``c`` gathered rows (:func:`gather_node`) to their bins, in row order.

    Rows and weight only when ``n_stat`` is 2 (the grids' counts under ``"secure"``), else
    every column.
    """
    if n_stat == 2:  # rows and weight only (the grids' counts under "secure")
        for k in range(c):
            bk = bins[k]
            hist[bk, 0] += 1.0
            hist[bk, 1] += st[k, 1]
    elif n_classes == 0:
        for k in range(c):
            bk = bins[k]
            for q in range(4):
                hist[bk, q] += st[k, q]
    else:
        for k in range(c):
            bk = bins[k]
            hist[bk, 0] += 1.0
            hist[bk, 1] += st[k, 1]
            hist[bk, cls[k]] += st[k, 1]


@numba.njit(inline="always")
def pairs_setup(rows, slot, slot_lo, slot_hi, n_classes, pair_off, cand_off, n_stat):
    """:func:`node_setup`, the first candidate, longest list, histogram and running sums."""
    order, start, ii, st, cls = node_setup(rows, slot, slot_lo, slot_hi, n_classes)
    c0 = cand_off[pair_off[slot_lo]]
    max_nc = longest_lists(pair_off, cand_off, slot_lo, slot_hi)[0]
    hist = np.empty((max_nc + 1, n_stat))
    return order, start, ii, st, cls, c0, max_nc, hist, np.empty(n_stat)


@inner_kernel
def running_sums(hist, nc, k, out):
    """A pair's left statistics: ``out[k + j]`` = the sums of bins ``0..j`` of ``hist``.

    Column by column, each column's additions in bin order.
    """
    for q in range(hist.shape[1]):
        run = 0.0
        for j in range(nc):
            run += hist[j, q]
            out[k + j, q] = run


@numba.njit(nogil=True, cache=True)
def left_stats_ranked(
    Xt, fine_min, fine_max, ranks_t, uniq, uniq_off, bin_start, rows, w, slot, y, n_classes,
    pair_off, pair_feat, cand_off, cand, slot_lo, slot_hi, out, scale=None, kept=None,
    kept_off=None, kept_ok=None,
):  # fmt: skip
    """:func:`left_stats` in one branch-free pass per pair over its node's rows.

    Each row's bin (the number of candidates below its value) comes, where a pair's
    candidates are ascending and no more than ``BUCKET_AMB`` share one of the equal buckets
    between the first and last (:mod:`~fedforest.federated.client_buckets`), from its
    bucket: a table lookup and a few comparisons. Otherwise, in nodes of at least
    ``RANK_ROWS`` rows, from a table over value ranks: a candidate ``t`` becomes the rank
    ``R = #{distinct values <= t}`` and a row of rank ``r`` lies right of it exactly when
    ``R <= r``. Smaller nodes (or a long span of ranks) compare the values: a count of the
    candidates below (vectorised over the rows), or a branch-free binary search for long
    lists. The rows' statistics are then added to their bins in row order, as before, and
    each pair's running sums written (:func:`running_sums`). Given ``scale``, they are
    written as the words a secure answer sends instead (:func:`packed_words`: numba
    compiles the one sink of each call's types), and ``False`` returned where a sum would
    not pack (``out`` then partly written); in a node whose weights are whole (bootstrap
    counts) the rows and weight are summed as one integer word (:func:`row_words`).

    Parameters
    ----------
    Xt, fine_min, fine_max : as :func:`left_stats`  # IN
    ranks_t, uniq, uniq_off, bin_start : as :func:`value_ranks` returns  # IN
    rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off, cand, slot_lo, slot_hi,
    out : as :func:`left_stats`; with ``scale``, uint64 of shape (n_block_candidates,
        n_stat - 1)
    scale : ndarray of float64, shape (n_stat,), or None  # IN: ``2^frac_bits`` per column
        of the statistics (the first two whole counts: 1)
    kept : ndarray of uint8, uint16 or int32 (holding ``nc``: ``client_kept.bins_dtype``),
        shape (n_visits,), or None  # OUT: pair ``p``'s rows' bins (in node order) at
        ``kept[kept_off[p]:kept_off[p + 1]]`` (Round A's, for Round B:
        :mod:`~fedforest.federated.client_kept`); ``kept_off`` int64 (n_pairs + 1,)
    kept_ok : ndarray of uint8, shape (n_pairs,), or None  # OUT: 1 where pair ``p``'s
        bins were written and its candidates do not descend (a row's bin then says which
        of them lie below it), else left as it was
    """
    n_stat = out.shape[1]
    if scale is not None:  # the rows and the weight share the first word
        n_stat += 1
    order, start, ii, st, cls, c0, max_nc, hist, acc = pairs_setup(
        rows, slot, slot_lo, slot_hi, n_classes, pair_off, cand_off, n_stat
    )
    rank_c, lut, padded, rr, xx, bins = bins_scratch(max_nc, uniq_off, ii.shape[0])
    words = np.empty(max_nc + 1, dtype=np.uint64)
    row_word = np.empty(ii.shape[0], dtype=np.uint64)
    # Every array the pairs' helpers get, as views numba does not reference-count
    # (kernel_views.borrowed): the arguments, and the scratch, kept alive to the end.
    scratch = (order, start, ii, st, cls, hist, acc, rank_c, lut, padded, rr, xx, bins, words)
    scratch = (scratch, row_word)
    order, start, ii, st = borrowed(order), borrowed(start), borrowed(ii), borrowed(st)
    cls, hist, acc, rank_c = borrowed(cls), borrowed(hist), borrowed(acc), borrowed(rank_c)
    lut, padded, rr, xx = borrowed(lut), borrowed(padded), borrowed(rr), borrowed(xx)
    bins, words, row_word = borrowed(bins), borrowed(words), borrowed(row_word)
    Xt, fine_min, fine_max = borrowed(Xt), borrowed(fine_min), borrowed(fine_max)
    ranks_t, uniq, uniq_off = borrowed(ranks_t), borrowed(uniq), borrowed(uniq_off)
    bin_start, rows, w, slot = borrowed(bin_start), borrowed(rows), borrowed(w), borrowed(slot)
    y, pair_off, pair_feat = borrowed(y), borrowed(pair_off), borrowed(pair_feat)
    cand_off, cand, out = borrowed(cand_off), borrowed(cand), borrowed(out)
    for s in range(slot_lo, slot_hi):
        a, b = start[s - slot_lo], start[s - slot_lo + 1]
        c = b - a
        if n_stat == 2:  # the counts alone: no target gathered
            gather_counts(order, a, c, rows, w, ii, st)
        else:
            gather_node(order, a, c, rows, w, y, n_classes, ii, st, cls)
        whole = False
        if scale is not None:  # the rows and weight as one integer word (row_words)
            whole = row_words(st, c, scale, row_word)
        for p in range(pair_off[s], pair_off[s + 1]):
            nc = cand_off[p + 1] - cand_off[p]
            if nc == 0:
                continue
            lo = cand_off[p]
            cs = cand[lo : lo + nc]
            if c == 0:  # the sums of no rows (kept_ok as below: no bins, their order)
                if kept is not None:
                    up = kept_off[p + 1] == kept_off[p]
                    for j in range(1, nc):
                        up &= cs[j] >= cs[j - 1]  # NaN: False
                    kept_ok[p] = up
                zero_rows(out, lo - c0, nc)
                continue
            base = 0 if kept is None else kept_off[p]  # kept: the pair's own bins
            pb = borrowed(bins_store(kept, bins)[base : base + c])
            pair_bins(
                cs, c, pair_feat[p], Xt, fine_min, fine_max, ranks_t, uniq, uniq_off,
                bin_start, ii, rank_c, lut, padded, rr, xx, pb,
            )  # fmt: skip
            if kept is not None:
                up = kept_off[p + 1] - kept_off[p] == c
                for j in range(1, nc):
                    up &= cs[j] >= cs[j - 1]  # NaN: False
                kept_ok[p] = up
            if whole and n_stat == 2:  # the counts alone (Round A's grids): one word a row
                count_words(words, row_word, pb, c, nc, lo - c0, out)
                continue
            # Explicit loops: numba's slice assignments cost about a microsecond a pair.
            if whole:  # the counts' word, the other columns as floats
                for j in range(nc + 1):
                    words[j] = 0
                    for q in range(2, n_stat):
                        hist[j, q] = 0.0
                add_words(words, hist, row_word, pb, st, cls, c, n_stat, n_classes)
            else:
                for j in range(nc + 1):
                    for q in range(n_stat):
                        hist[j, q] = 0.0
                add_to_bins(hist, pb, st, cls, c, n_stat, n_classes)
            if scale is None:  # pruned at compile time (scale's type): one sink a kernel
                running_sums(hist, nc, lo - c0, out)
            elif whole:
                if not whole_words(words, hist, nc, lo - c0, out, acc, scale):
                    keep_alive(scratch)
                    return False
            elif not packed_words(hist, nc, lo - c0, out, acc, scale):
                keep_alive(scratch)
                return False
    keep_alive(scratch)
    return True


# Its cached code holds its sinks from client_words and the buckets of client_buckets
# (pair_bins inlines them): an edit there makes these disk caches stale.
cache_depends_on(left_stats_ranked, client_words, client_buckets, kernel_views)


def twin_walk(
    bins_of: Any, rows: NDArray[np.int32], w: NDArray[np.float64], slot: NDArray[np.int32],
    y: NDArray[np.float64], n_classes: int, pair_off: NDArray[np.int64],
    cand_off: NDArray[np.int64], slot_lo: int, slot_hi: int, out: NDArray[np.float64],
) -> None:  # fmt: skip
    """The NumPy twins' walk: left statistics of every pair with candidates of a block.

    ``bins_of(p, rows)``: the bin (candidates below) of each of ``rows`` (a node's, in
    order) for pair ``p``; the rows' statistics are summed per bin, then cumulated.
    """
    c0 = cand_off[pair_off[slot_lo]]
    for s in range(slot_lo, slot_hi):
        mine = np.flatnonzero(slot == s)
        stats = _row_stats(w[mine], y[rows[mine]], n_classes)[:, : out.shape[1]]
        for p in range(pair_off[s], pair_off[s + 1]):
            nc = int(cand_off[p + 1] - cand_off[p])
            if nc:
                hist = np.zeros((nc + 1, stats.shape[1]))
                np.add.at(hist, bins_of(p, rows[mine]), stats)
                out[cand_off[p] - c0 : cand_off[p + 1] - c0] = np.cumsum(hist, axis=0)[:nc]


def left_stats_ranked_numpy(
    Xt: NDArray[np.float64],
    fine_min: NDArray[np.float64],
    fine_max: NDArray[np.float64],
    ranks_t: NDArray[np.int32],
    uniq: NDArray[np.float64],
    uniq_off: NDArray[np.int64],
    bin_start: NDArray[np.int64],
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    y: NDArray[np.float64],
    n_classes: int,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`left_stats_ranked`: every pair binned by rank (and searchsorted)."""

    def bins_of(p: int, r: NDArray[np.int32]) -> NDArray[np.int64]:
        cs, f = cand[cand_off[p] : cand_off[p + 1]], pair_feat[p]
        u = uniq[uniq_off[f] : uniq_off[f + 1]]
        rank_c = np.where(np.isnan(cs), u.size + 1, np.searchsorted(u, cs, side="right"))
        return np.searchsorted(rank_c, ranks_t[f, r], side="right")

    twin_walk(bins_of, rows, w, slot, y, n_classes, pair_off, cand_off, slot_lo, slot_hi, out)


def left_stats_numpy(
    Xt: NDArray[np.float64],
    codes_t: NDArray[np.uint8],
    fine_min: NDArray[np.float64],
    fine_max: NDArray[np.float64],
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    y: NDArray[np.float64],
    n_classes: int,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`left_stats` (bins every row by its exact value)."""

    def bins_of(p: int, r: NDArray[np.int32]) -> NDArray[np.int64]:
        cs = cand[cand_off[p] : cand_off[p + 1]]
        return np.searchsorted(cs, Xt[pair_feat[p], r], side="left")

    twin_walk(bins_of, rows, w, slot, y, n_classes, pair_off, cand_off, slot_lo, slot_hi, out)
