"""A client's Round B answer in one pass: left-statistic increments, packed as they travel.

Under ``privacy="none"`` a client answers Round B with the statistics of its rows left of
every candidate, sent as per-bin increments (:func:`~fedforest.federated.protocol.
pack_increments`: the difference of consecutive cumulative statistics of a pair, only the
non-zero ones when that saves bytes). :func:`left_increments_ranked` bins a pair's rows
as :func:`~fedforest.federated.client_kernels.left_stats_ranked` does and writes the
increments of the bins holding rows straight away, without the cumulative array of every
candidate and the second pass over it: the same numbers (each increment is still the
difference of the same two running sums, and a bin without rows leaves them unchanged),
the same message (:func:`left_increment_answer`). Single-output targets, exact split rule;
the other answers keep the two steps.

Round A's sketch call (:func:`pair_sketches`) lives here too.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .._common import N_FINE_BINS, count_columns, n_stats
from . import client_buckets, client_kernels, kernel_views
from .client_kernels import (
    COUNT_MAX,
    FEW_ROWS,
    add_to_bins,
    bins_scratch,
    gather_node,
    left_stats_numpy,
    pair_bins,
    pairs_setup,
    ranks_for,
)
from .client_sketch import fine_codes, sketch_pairs
from .client_targets import proposal_target
from .criteria import CRITERION_CODES
from .kernel_cache import cache_depends_on
from .kernel_views import borrowed, keep_alive
from .protocol import pack_increments

__all__ = [
    "left_increment_answer",
    "left_increments_numpy",
    "left_increments_ranked",
    "pair_sketches",
]


def pair_sketches(client: Any, fit: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Quantile sketch and (if asked for) local best threshold of every pair, one pass.

    ``client`` is the :class:`~fedforest.federated.client.Client`, ``fit`` its state
    (moved out of client.py, at the layout's limit).
    """
    assert fit.pair_off is not None and fit.pair_feat is not None
    assert fit.slot_tree is not None and client._codes is not None and fit.n_bins is not None
    codes, _, fine_max = client._codes
    n_pairs = int(fit.pair_off[-1])
    out = np.empty((n_pairs, fit.n_bins))
    local = np.empty(n_pairs if fit.local_candidates else 0)
    pair_off, pair_feat, slot_tree = fit.pair_off, fit.pair_feat, fit.slot_tree
    # Proposals (local_candidates) of a Poisson forest use squared error: they only add
    # candidates, scored on the pooled Poisson statistics.
    criterion = CRITERION_CODES[fit.criterion if fit.criterion != "poisson" else "squared_error"]
    target = proposal_target(fit.y, fit.n_classes)  # local_candidates

    def job(a: int, b: int) -> None:
        s_lo, s_hi = int(slot_tree[a]), int(slot_tree[b])
        r = slice(int(fit.tree_rows[a]), int(fit.tree_rows[b]))
        block = slice(int(pair_off[s_lo]), int(pair_off[s_hi]))
        sketch_pairs(
            client.Xt, codes, fine_max, target, fit.n_classes, criterion, fit.min_rows,
            fit.rows[r], fit.w[r], fit.slot[r], pair_off, pair_feat, s_lo, s_hi, out[block],
            local[block] if local.size else local,
        )  # fmt: skip

    client._run_blocks(fit, job)
    return out, local


#: Pairs whose candidates outnumber this many times their node's rows write the increments
#: of the bins holding rows only (put in order), the others walk every bin, branch-free.
SPARSE_EMIT = 2


@numba.njit(nogil=True, cache=True)
def left_increments_ranked(
    Xt, fine_min, fine_max, ranks_t, uniq, uniq_off, bin_start, rows, w, slot, y, n_classes,
    pair_off, pair_feat, pair_keep, cand_off, cand, slot_lo, slot_hi, counts, sums, index,
):  # fmt: skip
    """The non-zero increments of the left statistics of the kept pairs of ``slot_lo..slot_hi``.

    Parameters
    ----------
    Xt, fine_min, fine_max, ranks_t, uniq, uniq_off, bin_start, rows, w, slot, y, n_classes,
    pair_off, pair_feat, cand_off, cand, slot_lo, slot_hi : as ``left_stats_ranked``  # IN
    pair_keep : ndarray of bool, shape (n_pairs,)  # IN: pairs whose candidates are sent
    counts : ndarray of int64, shape (n_kept, n_counts)  # OUT: integer columns (rounded)
    sums : ndarray of float64, shape (n_kept, n_stats - n_counts)  # OUT: the others
    index : ndarray of int64, shape (n_kept,)  # OUT: position among the kept candidates

    ``n_kept`` is at least the number of candidates of the kept pairs. Returns (candidates
    of the kept pairs, increments written, largest absolute integer increment), as
    ``protocol._fill_increments``.
    """
    n_counts = counts.shape[1]
    n_stat = n_counts + sums.shape[1]
    order, start, ii, st, cls, _, max_nc, hist, acc = pairs_setup(
        rows, slot, slot_lo, slot_hi, n_classes, pair_off, cand_off, n_stat
    )
    hist[:] = 0.0  # zero between pairs: used bins are reset
    rank_c, lut, padded, rr, xx, bins = bins_scratch(max_nc, uniq_off, ii.shape[0])
    used = np.empty(max_nc // SPARSE_EMIT + 1, dtype=np.int64)  # distinct bins of few rows
    # Views numba does not reference-count (kernel_views.borrowed): the arguments, and
    # the scratch kept alive to the end; the helpers take them per pair and bin.
    owners = (order, start, ii, st, cls, hist, acc, rank_c, lut, padded, rr, xx, bins, used)
    order, start, ii, st = borrowed(order), borrowed(start), borrowed(ii), borrowed(st)
    cls, hist, acc, rank_c = borrowed(cls), borrowed(hist), borrowed(acc), borrowed(rank_c)
    lut, padded, rr, xx = borrowed(lut), borrowed(padded), borrowed(rr), borrowed(xx)
    bins, used, Xt = borrowed(bins), borrowed(used), borrowed(Xt)
    fine_min, fine_max, ranks_t = borrowed(fine_min), borrowed(fine_max), borrowed(ranks_t)
    uniq, uniq_off, bin_start = borrowed(uniq), borrowed(uniq_off), borrowed(bin_start)
    rows, w, slot, y = borrowed(rows), borrowed(w), borrowed(slot), borrowed(y)
    pair_off, pair_feat, pair_keep = borrowed(pair_off), borrowed(pair_feat), borrowed(pair_keep)
    cand_off, cand, counts = borrowed(cand_off), borrowed(cand), borrowed(counts)
    sums, index = borrowed(sums), borrowed(index)
    kept = 0  # candidates of the kept pairs so far
    j = 0  # increments written
    biggest = 0.0
    for s in range(slot_lo, slot_hi):
        a, b = start[s - slot_lo], start[s - slot_lo + 1]
        c = b - a
        gather_node(order, a, c, rows, w, y, n_classes, ii, st, cls)
        for p in range(pair_off[s], pair_off[s + 1]):
            nc = cand_off[p + 1] - cand_off[p]
            if nc == 0 or not pair_keep[p]:
                continue
            cs = cand[cand_off[p] : cand_off[p + 1]]
            if c <= FEW_ROWS and nc <= COUNT_MAX:  # pair_bins' count, written out here
                xf = Xt[pair_feat[p]]
                for k in range(c):
                    x = xf[ii[k]]
                    below = 0
                    for t in range(nc):
                        below += cs[t] < x
                    bins[k] = below
            else:
                pair_bins(
                    cs, c, pair_feat[p], Xt, fine_min, fine_max, ranks_t, uniq, uniq_off,
                    bin_start, ii, rank_c, lut, padded, rr, xx, bins,
                )  # fmt: skip
            add_to_bins(hist, bins, st, cls, c, n_stat, n_classes)
            # The running sums of left_stats_ranked. A bin without rows adds +0.0, which
            # changes a running sum at most in the sign of a zero, so every increment is
            # the same number whether such a bin is skipped or not (its own is exactly
            # zero, and zero increments do not travel in the sparse form). Few rows: the
            # bins holding rows only (then reset by the rows); else every bin, branch-free
            # (reset as read; bin nc too: right of every candidate).
            for q in range(n_stat):
                acc[q] = 0.0
            if c * SPARSE_EMIT < nc:
                # The bins holding rows, ascending (an insertion sort of the few rows'
                # bins, each once): no visit of every candidate's bin.
                n_used = 0
                for k in range(c):
                    bk, i = bins[k], n_used
                    while i > 0 and used[i - 1] > bk:
                        i -= 1
                    if i > 0 and used[i - 1] == bk:
                        continue
                    for m in range(n_used, i, -1):
                        used[m] = used[m - 1]
                    used[i] = bk
                    n_used += 1
                for i in range(n_used):
                    t = used[i]
                    if t < nc:  # bin nc: right of every candidate, no increment
                        if n_stat == 4 and n_counts == 2:  # a regression: its columns named
                            j, biggest = _emit4(hist, t, acc, counts, sums, index, j, kept, biggest)
                        else:
                            j, biggest = _emit(
                                hist, t, acc, n_counts, counts, sums, index, j, kept, biggest
                            )
                    else:
                        for q in range(n_stat):
                            hist[nc, q] = 0.0
            else:
                for t in range(nc):
                    if n_stat == 4 and n_counts == 2:  # a regression: its columns named
                        j, biggest = _emit4(hist, t, acc, counts, sums, index, j, kept, biggest)
                    else:
                        j, biggest = _emit(
                            hist, t, acc, n_counts, counts, sums, index, j, kept, biggest
                        )
                for q in range(n_stat):
                    hist[nc, q] = 0.0
            kept += nc
    keep_alive(owners)
    return kept, j, biggest


# Its cached code holds pair_bins, add_to_bins and gather_node (client_kernels.py), and
# borrowed (kernel_views).
cache_depends_on(left_increments_ranked, client_kernels, client_buckets, kernel_views)


@numba.njit(inline="always")
def _emit(hist, t, acc, n_counts, counts, sums, index, j, kept, biggest):
    # Bin ``t``'s increment over the running sums ``acc`` (updated) into row ``j``, which
    # the next bin's overwrites unless it is non-zero; the bin is reset to zeros.
    nonzero = False
    for q in range(n_counts):
        new = acc[q] + hist[t, q]
        v = new - acc[q]
        acc[q] = new
        hist[t, q] = 0.0
        nonzero |= v != 0.0
        biggest = max(biggest, abs(v))
        counts[j, q] = np.int64(np.rint(v))
    for q in range(n_counts, acc.shape[0]):
        new = acc[q] + hist[t, q]
        v = new - acc[q]
        acc[q] = new
        hist[t, q] = 0.0
        nonzero |= v != 0.0
        sums[j, q - n_counts] = v
    index[j] = kept + t
    return j + nonzero, biggest


@numba.njit(inline="always")
def _emit4(hist, t, acc, counts, sums, index, j, kept, biggest):
    # _emit of four columns, the first two counts (a regression's n, w; w y, w y^2): the
    # same numbers, its loops over the columns written out (a tenth of the kernel's time
    # at the papers' scale; called in a branch of its own, not from _emit).
    n0, n1, n2, n3 = (
        acc[0] + hist[t, 0],
        acc[1] + hist[t, 1],
        acc[2] + hist[t, 2],
        acc[3] + hist[t, 3],
    )
    v0, v1, v2, v3 = n0 - acc[0], n1 - acc[1], n2 - acc[2], n3 - acc[3]
    acc[0], acc[1], acc[2], acc[3] = n0, n1, n2, n3
    hist[t, 0] = hist[t, 1] = hist[t, 2] = hist[t, 3] = 0.0
    biggest = max(max(biggest, abs(v0)), abs(v1))
    counts[j, 0], counts[j, 1] = np.int64(np.rint(v0)), np.int64(np.rint(v1))
    sums[j, 0], sums[j, 1] = v2, v3
    index[j] = kept + t
    return j + ((v0 != 0.0) | (v1 != 0.0) | (v2 != 0.0) | (v3 != 0.0)), biggest


def left_increments_numpy(
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
    pair_keep: NDArray[np.bool_],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    n_stat: int,
    n_counts: int,
) -> dict[str, NDArray[Any]]:
    """NumPy twin of :func:`left_increment_answer`: the two steps (all slots at once)."""
    left = np.zeros((cand.size, n_stat))
    n_slots = pair_off.size - 1
    left_stats_numpy(
        Xt, codes_t, fine_min, fine_max, rows, w, slot, y, n_classes, pair_off, pair_feat,
        cand_off, cand, 0, n_slots, left,
    )  # fmt: skip
    return increments_of(left, cand_off, pair_keep, n_counts, pack_increments)


def left_increment_answer(
    client: Any, fit: Any, cand_off: NDArray[np.int64], cand: NDArray[np.float64]
) -> dict[str, NDArray[Any]]:
    """A client's Round B answer (single output, exact rule), in one pass a block of trees.

    What ``pack_increments`` sends of the left statistics at ``cand``, made by
    :func:`left_increments_ranked` in the client's blocks of trees (threads). ``client``
    is the :class:`~fedforest.federated.client.Client`, ``fit`` its state.
    """
    assert fit.pair_off is not None and fit.pair_feat is not None
    assert fit.slot_tree is not None and fit.pair_present is not None
    if client._codes is None:
        client._codes = fine_codes(client.X, N_FINE_BINS)
    codes_t, fine_min, fine_max = client._codes
    ranks_t, uniq, uniq_off, bin_start = ranks_for(client.Xt, codes_t, fine_min.shape[1])
    task = "classification" if fit.n_classes else "regression"
    n_stat, n_counts = n_stats(task, fit.n_classes), count_columns(fit.n_classes, fit.weighted)
    pair_off, slot_tree, keep = fit.pair_off, fit.slot_tree, fit.pair_present
    kept_before = np.zeros(pair_off[-1] + 1, dtype=np.int64)  # kept candidates before a pair
    np.cumsum(np.where(keep, np.diff(cand_off), 0), out=kept_before[1:])
    parts: dict[int, tuple[Any, ...]] = {}

    def job(a: int, b: int) -> None:
        s_lo, s_hi = int(slot_tree[a]), int(slot_tree[b])
        r = slice(int(fit.tree_rows[a]), int(fit.tree_rows[b]))
        k0 = int(kept_before[pair_off[s_lo]])
        m = int(kept_before[pair_off[s_hi]]) - k0
        buf = (
            np.empty((m, n_counts), np.int64),
            np.empty((m, n_stat - n_counts)),
            np.empty(m, np.int64),
        )
        res = left_increments_ranked(
            client.Xt, fine_min, fine_max, ranks_t, uniq, uniq_off, bin_start, fit.rows[r],
            fit.w[r], fit.slot[r], fit.y, fit.n_classes, pair_off, fit.pair_feat, keep,
            cand_off, cand, s_lo, s_hi, *buf,
        )  # fmt: skip
        n_block, m, big = res
        parts[a] = (buf[0][:m], buf[1][:m], buf[2][:m], n_block, big)

    client._run_blocks(fit, job)
    return increment_message([parts[a] for a in sorted(parts)], n_counts, n_stat)


def increment_message(
    parts: list[tuple[NDArray[Any], NDArray[np.float64], NDArray[Any], int, float]],
    n_counts: int,
    n_stat: int,
) -> dict[str, NDArray[Any]]:
    """The one-pass kernels' blocks of increments as ``pack_increments`` would send them.

    ``parts``: per block of slots, in order, its non-zero increments (integer columns,
    the others, their positions among the block's candidates), the block's candidates
    and its largest integer increment. Sparse when that saves bytes, else every candidate
    (zeros included); int64 counts only if one exceeds int32. Shared by
    ``client_increments.left_increment_answer`` and ``client_grid.pack_coded``.
    """
    base = np.cumsum([0] + [int(p[3]) for p in parts])
    n = int(base[-1])
    biggest = max([float(p[4]) for p in parts], default=0.0)
    dtype = np.int64 if biggest > np.iinfo(np.int32).max else np.int32
    if len(parts) == 1:
        counts, sums, index = parts[0][:3]
    else:
        counts = np.concatenate([p[0].astype(dtype, copy=False) for p in parts])
        sums = np.concatenate([p[1] for p in parts])
        index = np.concatenate([p[2] + b for p, b in zip(parts, base, strict=False)])
    counts = counts.astype(dtype, copy=False)
    row_bytes = 4 * n_counts + 8 * (n_stat - n_counts)
    sparse = index.size * (row_bytes + 4) < n * row_bytes
    if not sparse:  # every candidate travels, the zero increments too
        dense_counts, dense_sums = (
            np.zeros((n, n_counts), dtype=dtype),
            np.zeros((n, sums.shape[1])),
        )
        dense_counts[index], dense_sums[index] = counts, sums
        counts, sums = dense_counts, dense_sums
    out: dict[str, NDArray[Any]] = {"left_counts": counts}
    if n_stat > n_counts:
        out["left_sums"] = sums
    if sparse:
        out["left_index"] = index.astype(np.int32, copy=False)
    return out


def increments_of(
    left: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    keep: NDArray[np.bool_],
    n_counts: int,
    pack: Any,
) -> dict[str, NDArray[Any]]:
    """The twins' second step: ``pack(left, first, n_counts, "left", present)``.

    ``left``: every candidate's left statistics; ``keep``: the pairs that travel.
    """
    n_cand = np.diff(cand_off)
    first = np.zeros(left.shape[0], dtype=bool)  # the first candidate of every pair
    first[cand_off[:-1][n_cand > 0]] = True
    return pack(left, first, n_counts, "left", np.repeat(keep, n_cand))
