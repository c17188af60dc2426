"""Weighted quantile sketches and local best thresholds: the client side of Round A.

Each client bins every feature once into at most ``N_FINE_BINS`` fine bins of its own
local quantiles (``fine_codes``); a bin holds one distinct value whenever the feature has
at most that many distinct values, so the sketch is then exact. The sketch of a node and
feature is the ``B`` weighted quantiles of the node's in-bag values at levels ``b / B``
(``b = 1..B``; bootstrap counts are the weights), read off a histogram of the fine codes in
one linear pass over the rows: no per-node sort. The server's half (the mixture-quantile
merge) is :mod:`fedforest.federated.server.merge`.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from .._common import CODE_DTYPE, N_FINE_BINS
from . import client_kernels, client_sorted, kernel_views
from .client_kernels import SMALL_SKETCH, group_rows, largest_node, ranks_for, register_ranks
from .client_sorted import (
    BUCKET_ROWS,
    SORT_ROWS,
    exact_quantiles,
    level_targets,
    sort_scratch,
    sorted_sketch,
)
from .kernel_cache import cache_depends_on
from .kernel_views import borrowed, keep_alive

__all__ = [
    "distinct_values",
    "fine_codes",
    "fine_codes_kernel",
    "fine_codes_numpy",
    "local_best_thresholds",
    "local_best_thresholds_numpy",
    "node_sketches",
    "node_sketches_numpy",
    "sketch_pairs",
    "sketch_pairs_ranked",
    "sketch_pairs_ranked_numpy",
]


def distinct_values(
    X: NDArray[np.float64],
    rows: NDArray[np.int32],
    slot: NDArray[np.int32],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Verification mode: every distinct node value of every (node, feature) pair.

    Missing values (+inf) are no candidates. Returns the offsets per pair and the values.
    """
    active = slot >= 0
    order = np.argsort(slot[active], kind="stable")
    slots, in_node = slot[active][order], rows[active][order]
    bounds = np.searchsorted(slots, np.arange(pair_off.size))
    values = []
    for s in range(pair_off.size - 1):
        node_rows = in_node[bounds[s] : bounds[s + 1]]
        for p in range(int(pair_off[s]), int(pair_off[s + 1])):
            v = np.unique(X[node_rows, pair_feat[p]])
            values.append(v[np.isfinite(v)])
    off = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum([v.size for v in values], out=off[1:])
    flat = np.concatenate(values) if values else np.empty(0)
    return off, flat


def fine_codes(
    X: NDArray[np.float64], n_fine: int = N_FINE_BINS
) -> tuple[NDArray[np.uint8], NDArray[np.float64], NDArray[np.float64]]:
    """Bin each column into at most ``n_fine`` local quantile bins, once per client.

    Returns
    -------
    codes_t : ndarray of uint8, shape (n_features, n_samples)
        Column-major, as the kernels read one feature of many rows.
    fine_min, fine_max : ndarray of float64, shape (n_features, n_fine)
        Smallest and largest value in each bin (+inf / -inf for unused bins).

    The rank codes of the same values (``client_kernels.value_ranks``) are registered
    with ``codes_t`` for :func:`~fedforest.federated.client_kernels.left_stats`. Every
    column sorted in one NumPy call, the rest in one pass a column (:func:`fine_codes_kernel`);
    :func:`fine_codes_numpy` is its twin (the same arrays; of equal values, ``0.0`` and
    ``-0.0``, either may stand for both, as of that twin's unstable sort).
    """
    n, d = X.shape
    xt = np.ascontiguousarray(X.T, dtype=np.float64)
    order = np.argsort(xt, axis=1)  # +inf (missing) and NaN last; -inf first, skipped
    codes_t = np.empty((d, n), dtype=CODE_DTYPE)
    fine_min = np.full((d, n_fine), np.inf)
    fine_max = np.full((d, n_fine), -np.inf)
    ranks_t = np.empty((d, n), dtype=np.int32)
    bin_start = np.zeros((d, n_fine + 1), dtype=np.int64)
    uniq = np.empty(n * d)
    uniq_off = np.zeros(d + 1, dtype=np.int64)
    # np.quantile's "lower" levels of n_fine (every value known) or n_fine - 1 bins
    levels = np.linspace(0, 1, n_fine + 1)[1:-1]
    levels_known = np.linspace(0, 1, n_fine)[1:-1]
    fine_codes_kernel(
        xt, order, n_fine, levels, levels_known, codes_t, fine_min, fine_max, ranks_t,
        bin_start, uniq, uniq_off,
    )  # fmt: skip
    register_ranks(codes_t, (ranks_t, uniq[: uniq_off[-1]].copy(), uniq_off, bin_start))
    return codes_t, fine_min, fine_max


@numba.njit(nogil=True, cache=True)
def fine_codes_kernel(
    xt, order, n_fine, levels, levels_known, codes_t, fine_min, fine_max, ranks_t, bin_start,
    uniq, uniq_off,
):  # fmt: skip
    """:func:`fine_codes` of every column, given each column's rows in ascending order.

    Parameters
    ----------
    xt : ndarray of float64, shape (n_features, n_samples)  # IN: column-major values
    order : ndarray of int64, shape (n_features, n_samples)  # IN: ``argsort(xt, axis=1)``
    n_fine : int  # IN
    levels, levels_known : ndarray of float64  # IN: the quantile levels of ``n_fine``
        and ``n_fine - 1`` bins (a column with a missing value keeps the last for them)
    codes_t : ndarray of uint8, shape (n_features, n_samples)  # OUT
    fine_min, fine_max : ndarray of float64, shape (n_features, n_fine)  # IN/OUT: +inf
        and -inf on entry; each used bin's smallest and largest value
    ranks_t : ndarray of int32, shape (n_features, n_samples)  # OUT: rank among the
        column's distinct finite values (their number for a missing one)
    bin_start : ndarray of int64, shape (n_features, n_fine + 1)  # OUT
    uniq : ndarray of float64, shape (>= n_samples * n_features,)  # OUT: the distinct
        finite values of the columns, one after the other
    uniq_off : ndarray of int64, shape (n_features + 1,)  # OUT
    """
    d, n = xt.shape
    xs = np.empty(n)  # a column's finite values, ascending
    code_u = np.empty(n, dtype=np.int64)
    edges = np.empty(n_fine)
    uniq_off[0] = 0
    for j in range(d):
        u0 = uniq_off[j]
        m = 0
        nu = 0
        for t in range(n):
            i = order[j, t]
            v = xt[j, i]
            if not np.isfinite(v):
                ranks_t[j, i] = -1
                continue
            if nu == 0 or v != uniq[u0 + nu - 1]:
                uniq[u0 + nu] = v
                nu += 1
            ranks_t[j, i] = nu - 1
            xs[m] = v
            m += 1
        for i in range(n):
            if ranks_t[j, i] < 0:
                ranks_t[j, i] = nu
        lv = levels if m == n else levels_known
        ne = 0
        if nu <= lv.shape[0] + 1:  # every distinct value its own bin
            for t in range(nu - 1):
                edges[t] = uniq[u0 + t]
            ne = max(nu - 1, 0)
        else:  # np.quantile(xs, lv, method="lower"), distinct
            for q in range(lv.shape[0]):
                v = xs[int(np.floor((m - 1) * lv[q]))]
                if ne == 0 or v != edges[ne - 1]:
                    edges[ne] = v
                    ne += 1
        e = 0
        for t in range(nu):  # searchsorted(edges, uniq, "left")
            while e < ne and edges[e] < uniq[u0 + t]:
                e += 1
            code_u[t] = e
        for i in range(n):
            r = ranks_t[j, i]
            codes_t[j, i] = code_u[r] if r < nu else n_fine - 1
        for t in range(nu):
            if t == 0 or code_u[t] != code_u[t - 1]:
                fine_min[j, code_u[t]] = uniq[u0 + t]
            if t == nu - 1 or code_u[t + 1] != code_u[t]:
                fine_max[j, code_u[t]] = uniq[u0 + t]
        if m < n:
            fine_min[j, n_fine - 1] = np.inf
            fine_max[j, n_fine - 1] = np.inf
        t = 0
        for b in range(n_fine + 1):  # searchsorted(code_u, arange(n_fine + 1), "left")
            while t < nu and code_u[t] < b:
                t += 1
            bin_start[j, b] = t
        uniq_off[j + 1] = u0 + nu


def fine_codes_numpy(
    X: NDArray[np.float64], n_fine: int = N_FINE_BINS
) -> tuple[NDArray[np.uint8], NDArray[np.float64], NDArray[np.float64]]:
    """NumPy twin of :func:`fine_codes` (a sort and a dozen array steps a column).

    Returns
    -------
    codes_t : ndarray of uint8, shape (n_features, n_samples)
        Column-major, as the kernels read one feature of many rows.
    fine_min, fine_max : ndarray of float64, shape (n_features, n_fine)
        Smallest and largest value in each bin (+inf / -inf for unused bins).

    The rank codes of the same values (``client_kernels.value_ranks``) are registered
    with ``codes_t`` for :func:`~fedforest.federated.client_kernels.left_stats`.
    """
    n, d = X.shape
    codes_t = np.empty((d, n), dtype=CODE_DTYPE)
    fine_min = np.full((d, n_fine), np.inf)
    fine_max = np.full((d, n_fine), -np.inf)
    ranks_t = np.empty((d, n), dtype=np.int32)
    bin_start = np.zeros((d, n_fine + 1), dtype=np.int64)
    parts = []
    uniq_off = np.zeros(d + 1, dtype=np.int64)
    for j in range(d):
        x = X[:, j]
        known = np.isfinite(x)
        # A column with missing values (+inf) keeps the last code for them alone, with
        # fine_min = fine_max = +inf: every kernel can tell that bin from the others.
        n_known = n_fine if known.all() else n_fine - 1
        # One sort gives the distinct values, every row's rank among them (value_ranks)
        # and the quantiles (order statistics: the same from sorted values).
        xk = x[known]
        order = np.argsort(xk)
        xs = xk[order]
        change = xs[1:] != xs[:-1]
        uniq = xs[np.concatenate([[True], change])] if xs.size else xs
        rank = np.full(n, uniq.size, dtype=np.int64)
        rank_k = np.empty(xs.size, dtype=np.int64)
        rank_k[order] = np.concatenate([[0], np.cumsum(change)]) if xs.size else rank_k
        rank[known] = rank_k
        if uniq.size <= n_known:
            edges = uniq[:-1]
        else:
            # np.quantile(xs, levels, method="lower") of the sorted values, without its
            # partition of them: numpy's index for "lower", floor((n - 1) * level).
            levels = np.linspace(0, 1, n_known + 1)[1:-1]
            edges = np.unique(xs[np.floor((xs.size - 1) * levels).astype(np.intp)])
        # The codes ascend with the values, so a bin's extremes are its first and last.
        code_u = np.searchsorted(edges, uniq, side="left")
        code = np.full(n, n_fine - 1, dtype=np.int64)
        code[known] = code_u[rank[known]]
        codes_t[j] = code
        ranks_t[j] = rank
        if uniq.size:
            change = code_u[1:] != code_u[:-1]
            first = np.concatenate([[True], change])
            last = np.concatenate([change, [True]])
            fine_min[j, code_u[first]] = uniq[first]
            fine_max[j, code_u[last]] = uniq[last]
        if not known.all():
            fine_min[j, -1] = fine_max[j, -1] = np.inf
        bin_start[j] = np.searchsorted(code_u, np.arange(n_fine + 1), side="left")
        parts.append(uniq)
        uniq_off[j + 1] = uniq_off[j] + uniq.size
    uniq_all = np.concatenate(parts) if parts else np.empty(0)
    register_ranks(codes_t, (ranks_t, uniq_all, uniq_off, bin_start))
    return codes_t, fine_min, fine_max


def node_sketches(
    Xt: NDArray[np.float64],
    codes_t: NDArray[np.uint8],
    fine_max: NDArray[np.float64],
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
) -> None:
    """Weighted quantile sketches of every (node, feature) pair of slots ``slot_lo..slot_hi``.

    Row ``q`` of ``out`` holds, for pair ``pair_off[slot_lo] + q``, the smallest node value
    whose cumulative bootstrap weight reaches ``b / B`` of the node's, for ``b = 1..B``
    (so its last entry is the node maximum). Small nodes sort their exact values; larger
    ones read the quantiles off a histogram of the fine codes (exact while a fine bin holds
    one distinct value, else the bin's largest value).

    Parameters
    ----------
    Xt : ndarray of float64, shape (n_features, n_samples)  # IN: column-major values
    codes_t : ndarray of uint8, shape (n_features, n_samples)  # IN: column-major codes
    fine_max : ndarray of float64, shape (n_features, n_fine)  # IN
    rows, w, slot : ndarray, shape (n_inbag,)  # IN
    pair_off : ndarray of int64, shape (n_slots + 1,)  # IN
    pair_feat : ndarray of int32, shape (n_pairs,)  # IN
    slot_lo, slot_hi : int  # IN
    out : ndarray of float64, shape (n_block_pairs, B)  # OUT: NaN rows for empty nodes
    """
    sketch_pairs(
        Xt, codes_t, fine_max, np.empty(0), 0, 0, 1,
        rows, w, slot, pair_off, pair_feat, slot_lo, slot_hi, out, np.empty(0),
    )  # fmt: skip


#: Nodes whose values fall in fewer than ``2 B`` fine bins read their quantiles off their
#: sorted values while they have at most this many rows (resolution follows the node).
EXACT_SKETCH = 4096


def sketch_pairs(
    Xt: NDArray[np.float64],
    codes_t: NDArray[np.uint8],
    fine_max: NDArray[np.float64],
    y: NDArray[np.float64],
    n_classes: int,
    criterion: int,
    min_rows: int,
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
    local_out: NDArray[np.float64],
) -> None:
    """:func:`node_sketches` and :func:`local_best_thresholds` in one pass over the rows.

    Either output may be empty (``out`` with 0 columns, ``local_out`` of length 0): that
    part is skipped. Both read the same sorted values (nodes of at most ``SMALL_SKETCH``
    rows) or the same fine-code histogram (larger nodes). The kernel is
    :func:`sketch_pairs_ranked`, on the rank codes registered with ``codes_t``.
    """
    ranks_t, uniq, uniq_off, _ = ranks_for(Xt, codes_t, fine_max.shape[1])
    sketch_pairs_ranked(
        Xt, codes_t, fine_max, ranks_t, uniq, uniq_off, y, n_classes, criterion, min_rows,
        rows, w, slot, pair_off, pair_feat, slot_lo, slot_hi, out, local_out,
    )  # fmt: skip


@numba.njit(nogil=True, cache=True)
def sketch_pairs_ranked(
    Xt, codes_t, fine_max, ranks_t, uniq, uniq_off, y, n_classes, criterion, min_rows,
    rows, w, slot, pair_off, pair_feat, slot_lo, slot_hi, out, local_out,
):  # fmt: skip
    """:func:`sketch_pairs` with the rank codes of :func:`~.client_kernels.value_ranks`.

    Nodes whose values fall in few fine bins read their exact quantiles off a histogram of
    their value ranks (no sort) where the sums stay exact (whole weights) and the ranks
    are dense enough: the numbers a sort gives. Nodes of fewer than ``SORT_ROWS`` rows with
    whole weights (and more than ``SMALL_SKETCH``) go through :func:`~.client_sorted.
    sorted_sketch` instead (the same numbers): the fine codes they use only, without a
    pass over every fine bin, their rows sorted when the exact quantiles are read.
    """
    order = np.empty(rows.shape[0], dtype=np.int64)
    start = np.zeros(slot_hi - slot_lo + 1, dtype=np.int64)
    group_rows(slot, slot_lo, order, start)
    n_bins = out.shape[1]
    want_local = local_out.shape[0] > 0
    n_fine = fine_max.shape[1]
    n_cols = max(n_classes, 1)
    hist = np.empty(n_fine)
    gh = np.empty((n_fine if want_local else 0, 2 + n_cols))
    n_in = largest_node(start)  # per-node scratch
    ii = np.empty(n_in, dtype=np.int64)
    ww = np.empty(n_in)
    yy = np.empty(n_in if want_local else 0)
    vals = np.empty(SMALL_SKETCH)
    wsrt = np.empty(SMALL_SKETCH)
    isrt = np.empty(SMALL_SKETCH, dtype=np.int64)
    n_g_max = max(n_fine, SMALL_SKETCH)
    g_val = np.empty(n_g_max)
    g_cnt = np.zeros(n_g_max)
    g_w = np.zeros(n_g_max)
    g_s = np.zeros((n_g_max, n_cols))
    scratch = np.empty((3, n_cols))
    max_nu = 0
    for f in range(uniq_off.shape[0] - 1):
        max_nu = max(max_nu, uniq_off[f + 1] - uniq_off[f])
    rank_w = np.empty(max_nu + 2)
    cnt = np.empty(n_fine + 1, dtype=np.int64)
    vals_b = np.empty(BUCKET_ROWS)
    wts_b = np.empty(BUCKET_ROWS)
    sg, s_cnt, s_bm, s_val, s_pos, s_code = sort_scratch(n_fine, n_cols)
    thr = np.empty(n_bins)  # each level's share of a pair's weight (level_targets)
    # Views numba does not reference-count (kernel_views.borrowed): the arguments, and
    # the scratch kept alive to the end; the helpers take them per pair.
    owners = (order, start, hist, gh, ii, ww, yy, vals, wsrt, isrt, g_val, g_cnt, g_w, g_s)
    owners = (owners, (scratch, rank_w, cnt, vals_b, wts_b, sg, s_cnt, s_bm, s_val, s_pos))
    owners = (owners, s_code, thr)
    order, start, hist, gh = borrowed(order), borrowed(start), borrowed(hist), borrowed(gh)
    ii, ww, yy, vals = borrowed(ii), borrowed(ww), borrowed(yy), borrowed(vals)
    wsrt, isrt, g_val, g_cnt = borrowed(wsrt), borrowed(isrt), borrowed(g_val), borrowed(g_cnt)
    g_w, g_s, scratch = borrowed(g_w), borrowed(g_s), borrowed(scratch)
    rank_w, cnt, vals_b = borrowed(rank_w), borrowed(cnt), borrowed(vals_b)
    wts_b, sg, s_cnt, s_bm = borrowed(wts_b), borrowed(sg), borrowed(s_cnt), borrowed(s_bm)
    s_val, s_pos, s_code = borrowed(s_val), borrowed(s_pos), borrowed(s_code)
    thr, Xt, codes_t = borrowed(thr), borrowed(Xt), borrowed(codes_t)
    fine_max, ranks_t, uniq = borrowed(fine_max), borrowed(ranks_t), borrowed(uniq)
    uniq_off, y, rows, w = borrowed(uniq_off), borrowed(y), borrowed(rows), borrowed(w)
    slot, pair_off, pair_feat = borrowed(slot), borrowed(pair_off), borrowed(pair_feat)
    out, local_out = borrowed(out), borrowed(local_out)
    p_lo = pair_off[slot_lo]
    for s in range(slot_lo, slot_hi):
        a, b = start[s - slot_lo], start[s - slot_lo + 1]
        c = b - a
        total = 0.0
        whole = True
        for k in range(c):
            ii[k] = rows[order[a + k]]
            ww[k] = w[order[a + k]]
            total += ww[k]
            whole &= ww[k] == np.floor(ww[k])
            if want_local:
                yy[k] = y[ii[k]]
        for p in range(pair_off[s], pair_off[s + 1]):
            q, f = p - p_lo, pair_feat[p]
            if want_local:
                local_out[q] = np.nan
            if c == 0:
                for lv in range(n_bins):
                    out[q, lv] = np.nan
                continue
            level = 0
            cum = 0.0
            n_g = 0
            if c <= SMALL_SKETCH:
                # Stable insertion sort of (value, weight, row): no allocation, fast when tiny.
                miss = 0.0
                for k in range(c):
                    v, wk, r, j = Xt[f, ii[k]], ww[k], k, k
                    if v == np.inf:  # a missing value: sorted last, in no quantile
                        miss += wk
                    while j > 0 and vals[j - 1] > v:
                        vals[j], wsrt[j], isrt[j] = vals[j - 1], wsrt[j - 1], isrt[j - 1]
                        j -= 1
                    vals[j], wsrt[j], isrt[j] = v, wk, r
                tot = total - miss
                if not tot > 0.0:
                    for lv in range(n_bins):
                        out[q, lv] = np.nan
                    continue
                level_targets(thr, tot)
                n_known = c
                while n_known > 0 and vals[n_known - 1] == np.inf:
                    n_known -= 1
                for k in range(n_known):
                    cum += wsrt[k]
                    while level < n_bins and cum >= thr[level]:
                        out[q, level] = vals[k]
                        level += 1
                    if want_local:
                        if n_g == 0 or vals[k] != g_val[n_g - 1]:
                            _clear_group(g_val, g_cnt, g_w, g_s, n_g, vals[k], n_cols)
                            n_g += 1
                        _add_group(g_cnt, g_w, g_s, n_g - 1, wsrt[k], yy[isrt[k]], n_classes)
                last = vals[n_known - 1]
            elif whole and c < SORT_ROWS:  # no pass over every fine bin
                last = 0.0
                n_g = sorted_sketch(
                    Xt, codes_t, fine_max, f, ii, ww, yy, c, total, n_classes, want_local, out,
                    q, sg, s_cnt, s_bm, s_val, s_pos, s_code, g_val, g_cnt, g_w, g_s, thr,
                )  # fmt: skip
                if n_g < 0:
                    continue
                level = n_bins
            elif want_local:
                # One zeroed block per node and feature: weight, rows, then the task sums.
                for j in range(n_fine):  # loops: a slice assignment costs about 1 us
                    for col in range(2 + n_cols):
                        gh[j, col] = 0.0
                for k in range(c):
                    cd = codes_t[f, ii[k]]
                    gh[cd, 0] += ww[k]
                    gh[cd, 1] += 1.0
                    if n_classes == 0:
                        gh[cd, 2] += ww[k] * yy[k]
                    else:
                        gh[cd, 2 + int(yy[k])] += ww[k]
                last = 0.0
                tot = total
                if fine_max[f, n_fine - 1] == np.inf:  # the missing values' bin
                    tot -= gh[n_fine - 1, 0]
                    gh[n_fine - 1, 0] = 0.0
                if not tot > 0.0:
                    for lv in range(n_bins):
                        out[q, lv] = np.nan
                    continue
                level_targets(thr, tot)
                for j in range(n_fine):
                    if gh[j, 0] <= 0.0:
                        continue
                    cum += gh[j, 0]
                    last = fine_max[f, j]
                    while level < n_bins and cum >= thr[level]:
                        out[q, level] = last
                        level += 1
                    g_val[n_g], g_cnt[n_g], g_w[n_g] = last, gh[j, 1], gh[j, 0]
                    for col in range(n_cols):
                        g_s[n_g, col] = gh[j, 2 + col]
                    n_g += 1
                if n_g < 2 * n_bins and c <= EXACT_SKETCH and n_bins > 0:
                    exact_quantiles(
                        Xt, codes_t, ranks_t, uniq, uniq_off, f, ii, ww, c, tot, out, q,
                        rank_w, cnt, vals_b, wts_b,
                    )  # fmt: skip
                    level = n_bins
            else:
                for j in range(n_fine):
                    hist[j] = 0.0
                for k in range(c):
                    hist[codes_t[f, ii[k]]] += ww[k]
                last = 0.0
                n_used = 0
                tot = total
                if fine_max[f, n_fine - 1] == np.inf:  # the missing values' bin
                    tot -= hist[n_fine - 1]
                    hist[n_fine - 1] = 0.0
                if not tot > 0.0:
                    for lv in range(n_bins):
                        out[q, lv] = np.nan
                    continue
                level_targets(thr, tot)
                for j in range(n_fine):
                    if hist[j] <= 0.0:
                        continue
                    n_used += 1
                    cum += hist[j]
                    last = fine_max[f, j]
                    while level < n_bins and cum >= thr[level]:
                        out[q, level] = last
                        level += 1
                if n_used < 2 * n_bins and c <= EXACT_SKETCH:
                    # The node's values sit in few of the client's fine bins: the bins would
                    # blur its quantiles, so read them off its sorted values instead.
                    exact_quantiles(
                        Xt, codes_t, ranks_t, uniq, uniq_off, f, ii, ww, c, tot, out, q,
                        rank_w, cnt, vals_b, wts_b,
                    )  # fmt: skip
                    level = n_bins
            for lv in range(level, n_bins):
                out[q, lv] = last
            if want_local and c >= 2 * min_rows:
                local_out[q] = _best_scan(
                    g_val, g_cnt, g_w, g_s, n_g, c, n_cols, criterion, min_rows, scratch
                )
    keep_alive(owners)


# Its cached code holds sorted_sketch, exact_quantiles and group_rows (other modules),
# and borrowed (kernel_views).
cache_depends_on(sketch_pairs_ranked, client_sorted, client_kernels, kernel_views)


def node_sketches_numpy(
    Xt: NDArray[np.float64],
    codes_t: NDArray[np.uint8],
    fine_max: NDArray[np.float64],
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`node_sketches`."""
    n_bins = out.shape[1]
    p_lo = pair_off[slot_lo]
    for s in range(slot_lo, slot_hi):
        node = np.flatnonzero(slot == s)
        for p in range(pair_off[s], pair_off[s + 1]):
            f = pair_feat[p]
            mine = node[Xt[f, rows[node]] != np.inf]  # missing values are in no quantile
            total = w[mine].sum()
            if mine.size == 0 or not total > 0:
                out[p - p_lo] = np.nan
                continue
            levels = total * np.arange(1, n_bins + 1) / n_bins * (1.0 - 1e-12)
            hist = np.bincount(codes_t[f, rows[mine]], weights=w[mine], minlength=fine_max.shape[1])
            used = np.flatnonzero(hist > 0)
            few_bins = used.size < 2 * n_bins and node.size <= EXACT_SKETCH
            if node.size <= SMALL_SKETCH or few_bins:
                vals = Xt[f, rows[mine]]
                srt = np.argsort(vals, kind="stable")
                cum, pts = np.cumsum(w[mine][srt]), vals[srt]
            else:
                cum, pts = np.cumsum(hist[used]), fine_max[f, used]
            idx = np.minimum(np.searchsorted(cum, levels, side="left"), pts.size - 1)
            out[p - p_lo] = pts[idx]


# --------------------------------------------------------------------- local candidates


@numba.njit(inline="always")
def _split_score(sl, wl, sr, wr, n_cols, criterion):
    # A score that orders a node's splits like the impurity decrease does (node terms
    # dropped): sum S_L^2 / W_L + S_R^2 / W_R for squared error and Gini, and
    # sum S_L log(S_L / W_L) + S_R log(S_R / W_R) for entropy.
    score = 0.0
    for c in range(n_cols):
        a, b = sl[c], sr[c]
        if criterion == 2:
            if a > 0.0:
                score += a * np.log(a / wl)
            if b > 0.0:
                score += b * np.log(b / wr)
        else:
            score += a * a / wl + b * b / wr
    return score


def local_best_thresholds(
    Xt: NDArray[np.float64],
    codes_t: NDArray[np.uint8],
    fine_max: NDArray[np.float64],
    y: NDArray[np.float64],
    n_classes: int,
    criterion: int,
    min_rows: int,
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
) -> None:
    """Each (node, feature) pair's best threshold on this client's own in-bag rows.

    The threshold is the node value ``v`` whose split ``x <= v`` maximises the local
    impurity decrease with at least ``min_rows`` distinct rows on each side (ties: the
    smallest ``v``); NaN when no such split exists. Nodes of at most ``SMALL_SKETCH`` rows
    scan their sorted exact values; larger ones scan the fine-code histogram (exact while
    a fine bin holds one distinct value, else at the bins' largest values).

    Parameters
    ----------
    Xt, codes_t, fine_max : as :func:`node_sketches`  # IN
    y : ndarray of float64, shape (n_samples,)  # IN: target or class index
    n_classes : int  # IN: 0 for regression
    criterion : int  # IN: a value of ``fedforest.federated.criteria.CRITERION_CODES``
    min_rows : int  # IN
    rows, w, slot, pair_off, pair_feat, slot_lo, slot_hi : as :func:`node_sketches`  # IN
    out : ndarray of float64, shape (n_block_pairs,)  # OUT
    """
    sketch_pairs(
        Xt, codes_t, fine_max, y, n_classes, criterion, min_rows,
        rows, w, slot, pair_off, pair_feat, slot_lo, slot_hi, np.empty((out.shape[0], 0)), out,
    )  # fmt: skip


@numba.njit(inline="always")
def _clear_group(g_val, g_cnt, g_w, g_s, g, value, n_cols):
    g_val[g] = value
    g_cnt[g] = 0.0
    g_w[g] = 0.0
    for col in range(n_cols):
        g_s[g, col] = 0.0


@numba.njit(inline="always")
def _best_scan(g_val, g_cnt, g_w, g_s, n_g, c, n_cols, criterion, min_rows, scratch):
    # Best cut between consecutive groups (sorted values or fine bins); NaN if none.
    tot_s, sl, sr = scratch[0], scratch[1], scratch[2]
    tot_w = 0.0
    for col in range(n_cols):
        tot_s[col] = 0.0
        sl[col] = 0.0
    for g in range(n_g):
        tot_w += g_w[g]
        for col in range(n_cols):
            tot_s[col] += g_s[g, col]
    cnt_l = 0.0
    w_l = 0.0
    best = -np.inf
    value = np.nan
    for g in range(n_g - 1):
        cnt_l += g_cnt[g]
        w_l += g_w[g]
        for col in range(n_cols):
            sl[col] += g_s[g, col]
        if cnt_l < min_rows or c - cnt_l < min_rows or w_l <= 0.0 or tot_w - w_l <= 0.0:
            continue
        for col in range(n_cols):
            sr[col] = tot_s[col] - sl[col]
        score = _split_score(sl, w_l, sr, tot_w - w_l, n_cols, criterion)
        if score > best:
            best = score
            value = g_val[g]
    return value


@numba.njit(inline="always")
def _add_group(g_cnt, g_w, g_s, g, wk, yk, n_classes):
    g_cnt[g] += 1.0
    g_w[g] += wk
    if n_classes == 0:
        g_s[g, 0] += wk * yk
    else:
        g_s[g, int(yk)] += wk


def local_best_thresholds_numpy(
    Xt: NDArray[np.float64],
    codes_t: NDArray[np.uint8],
    fine_max: NDArray[np.float64],
    y: NDArray[np.float64],
    n_classes: int,
    criterion: int,
    min_rows: int,
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`local_best_thresholds`."""
    p_lo = pair_off[slot_lo]
    n_cols = max(n_classes, 1)
    for s in range(slot_lo, slot_hi):
        mine = np.flatnonzero(slot == s)
        c = mine.size
        for p in range(pair_off[s], pair_off[s + 1]):
            q, f = p - p_lo, pair_feat[p]
            out[q] = np.nan
            if c < 2 * min_rows:
                continue
            wk, yk = w[mine], y[rows[mine]]
            task = wk[:, None] * (
                yk[:, None] if n_classes == 0 else np.eye(n_cols)[yk.astype(np.int64)]
            )
            if c <= SMALL_SKETCH:
                keys = Xt[f, rows[mine]]
                vals, inv = np.unique(keys, return_inverse=True)
            else:
                codes = codes_t[f, rows[mine]].astype(np.int64)
                used, inv = np.unique(codes, return_inverse=True)
                vals = fine_max[f, used]
            cnt = np.bincount(inv, minlength=vals.size).astype(np.float64)
            gw = np.bincount(inv, weights=wk, minlength=vals.size)
            gs = np.stack(
                [np.bincount(inv, weights=task[:, j], minlength=vals.size) for j in range(n_cols)],
                axis=1,
            )
            cl, wl, s_l = np.cumsum(cnt)[:-1], np.cumsum(gw)[:-1], np.cumsum(gs, axis=0)[:-1]
            wr, s_r = gw.sum() - wl, gs.sum(axis=0) - s_l
            with np.errstate(divide="ignore", invalid="ignore"):
                if criterion == 2:
                    score = np.where(s_l > 0, s_l * np.log(s_l / wl[:, None]), 0.0).sum(1)
                    score += np.where(s_r > 0, s_r * np.log(s_r / wr[:, None]), 0.0).sum(1)
                else:
                    score = (s_l**2 / wl[:, None] + s_r**2 / wr[:, None]).sum(1)
            ok = (cl >= min_rows) & (c - cl >= min_rows) & (wl > 0) & (wr > 0)
            if ok.any():
                score = np.where(ok, score, -np.inf)
                out[q] = vals[int(np.argmax(score))]


def sketch_pairs_ranked_numpy(
    Xt: NDArray[np.float64],
    codes_t: NDArray[np.uint8],
    fine_max: NDArray[np.float64],
    ranks_t: NDArray[np.int32],
    uniq: NDArray[np.float64],
    uniq_off: NDArray[np.int64],
    y: NDArray[np.float64],
    n_classes: int,
    criterion: int,
    min_rows: int,
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    slot_lo: int,
    slot_hi: int,
    out: NDArray[np.float64],
    local_out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`sketch_pairs_ranked` (sorts; the rank codes are not read)."""
    block = (pair_off, pair_feat, slot_lo, slot_hi)
    if out.shape[1] > 0:
        node_sketches_numpy(Xt, codes_t, fine_max, rows, w, slot, *block, out)
    if local_out.shape[0] > 0:
        local_best_thresholds_numpy(
            Xt, codes_t, fine_max, y, n_classes, criterion, min_rows, rows, w, slot, *block,
            local_out,
        )  # fmt: skip
