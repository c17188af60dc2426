"""Left statistics written as the words a secure answer sends: encoded and packed in the kernel.

Under ``privacy="secure"`` with packed counts (whole weights, no noise) a client's Round A
answer is, per grid edge, the word ``rows + weight * 2^32`` of the rows and weight left of
the edge, and its Round B answer (one output) per candidate that word and the fixed-point
words of the other statistics
(:func:`~fedforest.federated.privacy.secagg.to_fixed_packed` of
:func:`~fedforest.federated.client_kernels.left_stats`). :func:`left_words` writes those
words directly, from the same running sums, so the client neither allocates nor reads back
a float array of every edge (16 bytes an edge in Round A, 1.1 GB a fit at 100,000 rows,
made fresh per round): the same words, bit for bit. A sum the encoding refuses (not
finite, reaching ``2^62``, a count outside ``[0, 2^32)``) makes the kernel return
``False``; the caller then takes the two steps, which raise their own errors.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from . import client_kernels as K
from .client_kernels import (
    add_to_bins,
    bins_scratch,
    gather_node,
    longest_lists,
    node_setup,
    pair_bins,
)
from .privacy.secagg import HALF_BITS, pack_counts, to_fixed

__all__ = ["left_words", "left_words_ranked", "left_words_ranked_numpy"]

#: ``secagg._LIMIT``: a value whose magnitude reaches it is refused (2^62).
_LIMIT = float(2**62)


def left_words(
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
    scale: NDArray[np.float64],
    out: NDArray[np.uint64],
) -> bool:
    """The packed words of the left statistics at every candidate of a block of slots.

    Arguments as :func:`~fedforest.federated.client_kernels.left_stats`; ``scale`` is
    ``2^frac_bits`` per column of the statistics (``n_stat`` of them, the first two whole
    counts: 1) and ``out`` uint64 of shape (n_block_candidates, n_stat - 1):
    ``to_fixed_packed`` of the statistics. Returns ``False`` (``out`` then partly written)
    where that encoding would refuse a sum.
    """
    ranks_t, uniq, uniq_off, bin_start = K.ranks_for(Xt, codes_t, fine_min.shape[1])
    return bool(
        left_words_ranked(
            Xt,
            fine_min,
            fine_max,
            ranks_t,
            uniq,
            uniq_off,
            bin_start,
            rows,
            w,
            slot,
            y,
            n_classes,
            pair_off,
            pair_feat,
            cand_off,
            cand,
            slot_lo,
            slot_hi,
            scale,
            out,
        )  # fmt: skip
    )


@numba.njit(nogil=True, cache=True)
def left_words_ranked(
    Xt,
    fine_min,
    fine_max,
    ranks_t,
    uniq,
    uniq_off,
    bin_start,
    rows,
    w,
    slot,
    y,
    n_classes,
    pair_off,
    pair_feat,
    cand_off,
    cand,
    slot_lo,
    slot_hi,
    scale,
    out,
):
    """:func:`left_words` on rank codes: ``left_stats_ranked``'s pass, its sums packed.

    The bins and the order of additions are ``left_stats_ranked``'s, so the running sums
    are the same floats; each row of them is then encoded as ``to_fixed_packed`` does
    (``rint`` of the sum times its scale, checked; the rows in the low half-word of the
    first word, the weight in the high; the other columns one word each).
    """
    order, start, ii, st, cls = node_setup(rows, slot, slot_lo, slot_hi, n_classes)
    c0 = cand_off[pair_off[slot_lo]]
    max_nc = longest_lists(pair_off, cand_off, slot_lo, slot_hi)[0]
    n_stat = out.shape[1] + 1
    hist = np.empty((max_nc + 1, n_stat))
    acc = np.empty(n_stat)
    word = np.empty(n_stat, dtype=np.int64)
    rank_c, lut, padded, rr, xx, bins = bins_scratch(max_nc, uniq_off, ii.shape[0])
    for s in range(slot_lo, slot_hi):
        a, b = start[s - slot_lo], start[s - slot_lo + 1]
        c = b - a
        gather_node(order, a, c, rows, w, y, n_classes, ii, st, cls)
        for p in range(pair_off[s], pair_off[s + 1]):
            nc = cand_off[p + 1] - cand_off[p]
            if nc == 0:
                continue
            lo = cand_off[p]
            cs = cand[lo : lo + nc]
            f = pair_feat[p]
            pair_bins(
                cs, c, f, Xt, fine_min, fine_max, ranks_t, uniq, uniq_off, bin_start, ii,
                rank_c, lut, padded, rr, xx, bins,
            )  # fmt: skip
            for j in range(nc + 1):
                for q in range(n_stat):
                    hist[j, q] = 0.0
            add_to_bins(hist, bins, st, cls, c, n_stat, n_classes)
            for q in range(n_stat):
                acc[q] = 0.0
            for j in range(nc):
                for q in range(n_stat):
                    acc[q] += hist[j, q]
                    v = acc[q] * scale[q]
                    if not abs(v) < _LIMIT:
                        return False
                    word[q] = np.int64(np.rint(v))
                u, v = word[0], word[1]
                if u < 0 or v < 0 or u >> HALF_BITS or v >> HALF_BITS:
                    return False
                k = lo + j - c0
                out[k, 0] = np.uint64(u) | (np.uint64(v) << np.uint64(HALF_BITS))
                for q in range(2, n_stat):
                    out[k, q - 1] = np.uint64(word[q])
    return True


def left_words_ranked_numpy(
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
    scale: NDArray[np.float64],
    out: NDArray[np.uint64],
) -> bool:
    """NumPy twin of :func:`left_words_ranked`: the statistics, then encoded and packed."""
    stats = np.empty((out.shape[0], out.shape[1] + 1))
    K.left_stats_ranked_numpy(
        Xt, fine_min, fine_max, ranks_t, uniq, uniq_off, bin_start, rows, w, slot, y,
        n_classes, pair_off, pair_feat, cand_off, cand, slot_lo, slot_hi, stats,
    )  # fmt: skip
    try:
        out[:] = pack_counts(to_fixed(stats * scale, 0), "twin")
    except ValueError:
        return False
    return True
