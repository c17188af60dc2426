"""Left statistics written as the words a secure answer sends: encoded and packed in the kernel.

The kernel is :func:`~fedforest.federated.client_kernels.left_stats_ranked` given a
``scale`` (its sinks in :mod:`~fedforest.federated.client_words`); here are its
call on fine codes (:func:`left_words`) and the NumPy twin of that case.

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

from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import client_kernels as K
from .privacy.secagg import pack_counts, to_fixed

__all__ = ["left_words", "left_words_ranked_numpy"]


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
    kept: tuple[NDArray[Any], NDArray[np.int64], NDArray[np.uint8]] | None = None,
) -> bool:
    """The packed words of the left statistics at every candidate of a block of slots.

    Arguments as :func:`~fedforest.federated.client_kernels.left_stats`; ``scale`` is
    ``2^frac_bits`` per column of the statistics (``n_stat`` of them, the first two whole
    counts: 1) and ``out`` uint64 of shape (n_block_candidates, n_stat - 1):
    ``to_fixed_packed`` of the statistics. Returns ``False`` (``out`` then partly written)
    where that encoding would refuse a sum. ``kept``: ``left_stats_ranked``'s ``kept``,
    ``kept_off``, ``kept_ok``, written (Round A's bins kept for Round B).
    """
    ranks = K.ranks_for(Xt, codes_t, fine_min.shape[1])
    return bool(
        K.left_stats_ranked(
            Xt,
            fine_min,
            fine_max,
            *ranks,
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
            out,
            scale,
            *(() if kept is None else kept),
        )  # fmt: skip
    )


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
    out: NDArray[np.uint64],
    scale: NDArray[np.float64],
) -> bool:
    """NumPy twin of ``left_stats_ranked`` given ``scale``: the statistics, then packed."""
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
