"""Round A's sketch of small nodes without a pass over every fine bin; exact quantiles.

Under ``privacy="none"`` a client sketches every (node, feature) pair in Round A. Deep
nodes hold few rows, and for them the general kernel's fixed cost dominates: a pass over
all ``N_FINE_BINS`` fine bins per pair (a histogram zeroed and scanned), then, as few bins
are used, a sort of the node's values for the exact quantiles. A pair of fewer than
:data:`SORT_ROWS` rows (whole weights) is instead histogrammed over the fine codes it uses
only (a bitmap of the codes, walked in ascending order) and its rows sorted by value by a
counting sort on those codes (the codes ascend with the values; an insertion sort orders
each code's rows); the sketch (the exact quantiles or the histogram's, as
:func:`~.client_sketch.sketch_pairs_ranked` chooses) and the local candidates' groups are
read off them (:func:`sorted_sketch`): the same numbers, as every sum is added in the
same order (rows in node order into their bins, bins in ascending order; whole weights
make the exact quantiles' partial sums exact).

Also here (from client_sketch.py): :func:`exact_quantiles`, a node's exact quantiles off
a histogram of its value ranks, a counting sort on fine codes, or a sort; and
:func:`level_targets`, each quantile level's share of a pair's weight, once a pair.

Tried and dropped: keeping the sorted rows for Round B, to bin them by a merge with the
candidates (``c + nc`` steps instead of ``c * nc`` comparisons): 15-30 % slower at nodes
of 50-200 rows than the vectorised count (the merge's branches mispredict).
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

__all__ = [
    "BUCKET_ROWS",
    "SORT_ROWS",
    "exact_quantiles",
    "level_targets",
    "sort_scratch",
    "sorted_sketch",
]


#: Pairs of fewer rows than this (whole weights) are sketched by :func:`sorted_sketch` in
#: Round A (their rows sorted only when few codes are used: the exact quantiles).
SORT_ROWS = 256


@numba.njit(inline="always")
def sort_scratch(n_fine, n_cols):
    """Scratch of :func:`sorted_sketch` (allocated once per kernel call)."""
    return (
        np.zeros((n_fine, 2 + n_cols)),  # per code: weight, rows, task sums (kept zero)
        np.zeros(n_fine, dtype=np.int64),  # per code: rows (kept zero), then positions
        np.zeros((n_fine + 63) // 64, dtype=np.uint64),  # the codes used (kept zero)
        np.empty(SORT_ROWS),  # the sorted values
        np.empty(SORT_ROWS, dtype=np.int64),  # their positions in the node
        np.empty(SORT_ROWS, dtype=np.int64),  # each row's code
    )


@numba.njit(inline="always")
def sorted_sketch(
    Xt, codes_t, fine_max, f, ii, ww, yy, c, total, n_classes, want_local, out, q,
    gh, cnt, bm, sv, sk, kc, g_val, g_cnt, g_w, g_s, thr,
):  # fmt: skip
    """One pair's sketch and local groups from its ``c < SORT_ROWS`` rows; whole weights.

    Writes ``out[q]`` (NaN when no known value has weight), the groups ``g_*`` of the
    fine codes used (their largest value, rows, weight, task sums: what the general
    kernel reads off its histogram); the rows are sorted (``sv``, ``sk``) only for the exact
    quantiles. Returns the number of groups, or -1 when ``out[q]`` is NaN. The scratch
    (:func:`sort_scratch`) is left zeroed.
    """
    n_fine = fine_max.shape[1]
    n_bins = out.shape[1]
    n_cols = g_s.shape[1]
    codes_f = codes_t[f]
    xf = Xt[f]
    for k in range(c):  # every row into its code's bin, in node order (the general sums)
        cd = np.int64(codes_f[ii[k]])
        kc[k] = cd
        bm[cd >> 6] |= np.uint64(1) << np.uint64(cd & 63)
        cnt[cd] += 1
        gh[cd, 0] += ww[k]
        if want_local:
            gh[cd, 1] += 1.0
            if n_classes == 0:
                gh[cd, 2] += ww[k] * yy[k]
            else:
                gh[cd, 2 + int(yy[k])] += ww[k]
    # The codes used, ascending: counting-sort positions, groups, histogram quantiles.
    tot = total
    if fine_max[f, n_fine - 1] == np.inf:  # the missing values' bin
        tot -= gh[n_fine - 1, 0]
    n_used = 0
    run = 0
    for wi in range(bm.shape[0]):
        word = bm[wi]
        while word != 0:
            j = wi * 64 + np.int64(trailing_zeros(word))
            word &= word - np.uint64(1)
            rows_j = cnt[j]
            cnt[j] = run
            run += rows_j
            if gh[j, 0] > 0.0 and not (j == n_fine - 1 and fine_max[f, j] == np.inf):
                g_val[n_used] = fine_max[f, j]
                g_cnt[n_used] = gh[j, 1]
                g_w[n_used] = gh[j, 0]
                for col in range(n_cols):
                    g_s[n_used, col] = gh[j, 2 + col]
                n_used += 1
            for col in range(gh.shape[1]):
                gh[j, col] = 0.0
    exact = n_used < 2 * n_bins and tot > 0.0  # the exact quantiles: the rows sorted
    for k in range(c if exact else 0):  # a stable counting sort by code, then by value
        pos = cnt[kc[k]]
        cnt[kc[k]] = pos + 1
        sk[pos] = k
        sv[pos] = xf[ii[k]]
    for k in range(1, c if exact else 0):
        v, r, j = sv[k], sk[k], k
        while j > 0 and sv[j - 1] > v:
            sv[j], sk[j] = sv[j - 1], sk[j - 1]
            j -= 1
        sv[j], sk[j] = v, r
    for wi in range(bm.shape[0]):
        word = bm[wi]
        while word != 0:
            cnt[wi * 64 + np.int64(trailing_zeros(word))] = 0
            word &= word - np.uint64(1)
        bm[wi] = 0
    if not tot > 0.0:
        for lv in range(n_bins):
            out[q, lv] = np.nan
        return -1
    level_targets(thr, tot)
    level = 0
    cum = 0.0
    if exact:  # the sorted values' (whole weights: exact partial sums)
        for k in range(c):
            cum += ww[sk[k]]
            while level < n_bins and cum >= thr[level]:
                out[q, level] = sv[k]
                level += 1
        for lv in range(level, n_bins):
            out[q, lv] = sv[c - 1]
    else:  # the histogram's quantiles at the codes' largest values
        last = 0.0
        for g in range(n_used):
            cum += g_w[g]
            last = g_val[g]
            while level < n_bins and cum >= thr[level]:
                out[q, level] = last
                level += 1
        for lv in range(level, n_bins):
            out[q, lv] = last
    return n_used


@numba.njit(inline="always")
def level_targets(thr, tot):
    """``thr[l]``: the weight the running sum must reach for level ``(l + 1) / B``.

    The sketch's rule, ``tot * (l + 1) / B * (1 - 1e-12)``, computed once a pair (the
    same numbers as in the loops that cross the levels, which read them here).
    """
    n_bins = thr.shape[0]
    for lv in range(n_bins):
        thr[lv] = tot * (lv + 1) / n_bins * (1.0 - 1e-12)


# ------------------------------------------------ exact quantiles of small nodes (Round A)

#: The exact quantiles of a node (fewer than ``2 B`` fine bins used) are read off a
#: histogram over the ranks of its values when every weight is whole and the ranks span at
#: most ``RANK_SPAN_ROWS`` entries per row (plus ``RANK_SPAN_MIN``); else off its sorted values.
RANK_SPAN_ROWS = 8
RANK_SPAN_MIN = 256


@numba.njit(nogil=True, cache=True)
def exact_quantiles(
    Xt, codes_t, ranks_t, uniq, uniq_off, f, ii, ww, c, total, out, q, rank_w, cnt, vals, wts
):
    """:func:`_exact_sketch` with the same numbers, without a comparison sort if it can.

    With whole weights every partial sum is exact and the order of equal values does not
    matter: a histogram of the value ranks (dense nodes), else the rows bucketed by fine
    code (a counting sort) and put in order within their buckets.
    """
    whole = True
    for k in range(c):
        whole &= ww[k] == np.floor(ww[k])
    if whole and _exact_ranked(ranks_t, uniq, uniq_off, f, ii, ww, c, total, out, q, rank_w):
        return
    if not (whole and _exact_bucketed(Xt, codes_t, f, ii, ww, c, total, out, q, cnt, vals, wts)):
        _exact_sketch(Xt, f, ii, ww, c, total, out, q)


@numba.njit(nogil=True, cache=True)
def _exact_bucketed(Xt, codes_t, f, ii, ww, c, total, out, q, cnt, vals, wts):
    """:func:`_exact_sketch` for whole weights, sorting by fine code first.

    The rows are put in order by a counting sort on their fine codes (which ascend with
    the values), then an insertion sort within the buckets. False (nothing written) for a
    node above ``BUCKET_ROWS`` rows or with a bucket above ``BUCKET_MAX`` (the insertion
    sort is quadratic in a bucket).
    """
    if c > BUCKET_ROWS:
        return False
    codes_f = codes_t[f]
    for j in range(cnt.shape[0]):
        cnt[j] = 0
    for k in range(c):
        cnt[codes_f[ii[k]] + 1] += 1
    biggest = 0
    for j in range(1, cnt.shape[0]):
        biggest = max(biggest, cnt[j])
        cnt[j] += cnt[j - 1]
    if biggest > BUCKET_MAX:
        return False
    for k in range(c):
        cd = codes_f[ii[k]]
        pos = cnt[cd]
        vals[pos] = Xt[f, ii[k]]
        wts[pos] = ww[k]
        cnt[cd] = pos + 1
    for k in range(1, c):  # out of order only within a bucket: a few moves each
        v, wk, j = vals[k], wts[k], k
        while j > 0 and vals[j - 1] > v:
            vals[j], wts[j] = vals[j - 1], wts[j - 1]
            j -= 1
        vals[j], wts[j] = v, wk
    n_bins = out.shape[1]
    level = 0
    cum = 0.0
    for k in range(c):
        cum += wts[k]
        while level < n_bins and cum >= total * (level + 1) / n_bins * (1.0 - 1e-12):
            out[q, level] = vals[k]
            level += 1
    for lv in range(level, n_bins):
        out[q, lv] = vals[c - 1]
    return True


#: Nodes of at most this many rows, none of whose fine bins holds more than
#: ``BUCKET_MAX`` of them, sort their values by fine code (see ``_exact_bucketed``).
BUCKET_ROWS = 512
BUCKET_MAX = 64


@numba.njit(nogil=True, cache=True)
def _exact_ranked(ranks_t, uniq, uniq_off, f, ii, ww, c, total, out, q, rank_w):
    """:func:`_exact_sketch` off a histogram of the node's value ranks; False if too sparse.

    With whole weights every partial sum is exact, so the weight of a distinct value added
    at once crosses the same levels, at the same value, as its rows one by one in sorted
    order. Missing values (+inf, rank ``n_u``) come last, as in the sort.
    """
    u0 = uniq_off[f]
    n_u = uniq_off[f + 1] - u0
    ranks_f = ranks_t[f]
    r_lo, r_hi = n_u, -1
    for k in range(c):
        r = np.int64(ranks_f[ii[k]])
        if r < n_u:
            r_lo = min(r_lo, r)
            r_hi = max(r_hi, r)
    if r_hi < 0:
        return False
    span = r_hi - r_lo + 1
    if span > RANK_SPAN_ROWS * c + RANK_SPAN_MIN:
        return False
    for i in range(span + 1):
        rank_w[i] = 0.0
    missing = False
    for k in range(c):
        r = np.int64(ranks_f[ii[k]])
        missing |= r == n_u
        rank_w[min(r - r_lo, span)] += ww[k]  # slot ``span``: the missing values
    n_bins = out.shape[1]
    level = 0
    cum = 0.0
    for i in range(span + 1):
        wi = rank_w[i]
        if wi <= 0.0:
            continue
        cum += wi
        v = uniq[u0 + r_lo + i] if i < span else np.inf
        while level < n_bins and cum >= total * (level + 1) / n_bins * (1.0 - 1e-12):
            out[q, level] = v
            level += 1
    top = np.inf if missing else uniq[u0 + r_hi]
    for lv in range(level, n_bins):
        out[q, lv] = top
    return True


@numba.njit(nogil=True, cache=True)
def _exact_sketch(Xt, f, ii, ww, c, total, out, q):
    """Exact weighted quantiles of one node's values into ``out[q]`` (levels ``b / B``)."""
    vals = np.empty(c)
    for k in range(c):
        vals[k] = Xt[f, ii[k]]
    order = np.argsort(vals)
    n_bins = out.shape[1]
    level = 0
    cum = 0.0
    for k in range(c):
        cum += ww[order[k]]
        while level < n_bins and cum >= total * (level + 1) / n_bins * (1.0 - 1e-12):
            out[q, level] = vals[order[k]]
            level += 1
    for lv in range(level, n_bins):
        out[q, lv] = vals[order[c - 1]]
