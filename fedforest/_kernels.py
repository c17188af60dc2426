"""Client-side row kernels: routing, node summaries, left statistics at candidates.

Each numba kernel (``nogil``, cached) has a NumPy twin with the same signature and result;
``tests/test_kernels.py`` checks they agree. Per-tree client state is three parallel arrays
over the tree's in-bag rows: ``rows`` (row index), ``w`` (bootstrap count) and ``slot``
(the row's node in the server's current frontier, -1 once it sits in a finished leaf).

Row statistics follow :mod:`fedforest._common`: ``[1, w, w*y, w*y^2]`` for regression
(``n_classes == 0``) or ``[1, w, w*[y == c] for c]`` for classification, where ``y``
holds the global class index.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "route_rows",
    "route_rows_numpy",
    "node_summaries",
    "node_summaries_numpy",
    "left_stat_hist",
    "left_stat_hist_numpy",
]


@numba.njit(nogil=True, cache=True)
def route_rows(X, rows, slot, feature, threshold, left, right):  # type: ignore[no-untyped-def]
    """Move rows to the children of last level's splits, in place.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)  # IN
    rows : ndarray of int32, shape (n_inbag,)  # IN
    slot : ndarray of int32, shape (n_inbag,)  # IN/OUT: previous slot -> new slot
    feature : ndarray of int32, shape (n_prev_slots,)  # IN: -1 when the node became a leaf
    threshold : ndarray of float64, shape (n_prev_slots,)  # IN
    left, right : ndarray of int32, shape (n_prev_slots,)  # IN: new slots, -1 for a leaf child
    """
    for r in range(rows.shape[0]):
        s = slot[r]
        if s < 0:
            continue
        f = feature[s]
        if f < 0:
            slot[r] = -1
        elif X[rows[r], f] <= threshold[s]:
            slot[r] = left[s]
        else:
            slot[r] = right[s]


def route_rows_numpy(
    X: NDArray[np.float64],
    rows: NDArray[np.int32],
    slot: NDArray[np.int32],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    left: NDArray[np.int32],
    right: NDArray[np.int32],
) -> None:
    """NumPy twin of :func:`route_rows`."""
    active = np.flatnonzero(slot >= 0)
    s = slot[active]
    f = feature[s]
    split = f >= 0
    go_left = np.zeros(active.size, dtype=bool)
    go_left[split] = X[rows[active[split]], f[split]] <= threshold[s[split]]
    new = np.where(go_left, left[s], right[s])
    slot[active] = np.where(split, new, -1)


@numba.njit(inline="always")
def _add_row(out, k, w, y, n_classes):  # type: ignore[no-untyped-def]
    out[k, 0] += 1.0
    out[k, 1] += w
    if n_classes == 0:
        out[k, 2] += w * y
        out[k, 3] += w * y * y
    else:
        out[k, 2 + int(y)] += w


@numba.njit(nogil=True, cache=True)
def node_summaries(rows, w, slot, y, n_classes, out):  # type: ignore[no-untyped-def]
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


@numba.njit(nogil=True, cache=True)
def _bin_lut(cand, fine_min_f, fine_max_f, lut):  # type: ignore[no-untyped-def]
    # Fine bin -> candidate bin when no candidate falls inside the bin's value range,
    # else -1 (those rows are binned by their exact value).
    for c in range(lut.shape[0]):
        if fine_min_f[c] > fine_max_f[c]:
            lut[c] = -1
            continue
        lo = np.searchsorted(cand, fine_min_f[c])
        hi = np.searchsorted(cand, fine_max_f[c])
        lut[c] = lo if lo == hi else -1


@numba.njit(nogil=True, cache=True)
def left_stat_hist(  # type: ignore[no-untyped-def]
    X,
    codes,
    fine_min,
    fine_max,
    rows,
    w,
    slot,
    y,
    n_classes,
    pair_off,
    pair_feat,
    cand_off,
    cand,
    pair_lo,
    lut,
    out,
):
    """Histogram of row statistics over the candidate bins of a block of pairs.

    Bin ``b`` of pair ``p`` holds the rows with ``cand[b-1] < x <= cand[b]``; the left
    statistics at candidate ``b`` are the cumulative sum of bins ``0..b``. Bins are found
    through the fine codes (one table lookup) and by the exact value only for rows whose
    fine bin straddles a candidate, so the statistics are exact at every threshold.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)  # IN
    codes : ndarray of uint8, shape (n_samples, n_features)  # IN
    fine_min, fine_max : ndarray of float64, shape (n_features, n_fine)  # IN
    rows, w, slot : ndarray, shape (n_inbag,)  # IN
    y : ndarray of float64, shape (n_samples,)  # IN
    n_classes : int  # IN
    pair_off : ndarray of int64, shape (n_slots + 1,)  # IN
    pair_feat : ndarray of int32, shape (n_pairs,)  # IN
    cand_off : ndarray of int64, shape (n_pairs + 1,)  # IN
    cand : ndarray of float64, shape (n_candidates,)  # IN
    pair_lo : int  # IN: first pair of the block
    lut : ndarray of int32, shape (n_block_pairs, n_fine)  # scratch
    out : ndarray of float64, shape (n_block_bins, n_stats)  # OUT: zeroed here;
        pair p owns rows ``cand_off[p] + p - base`` .. ``cand_off[p + 1] + p - base`` where
        ``base = cand_off[pair_lo] + pair_lo``.
    """
    out[:, :] = 0.0
    n_block = lut.shape[0]
    for q in range(n_block):
        p = q + pair_lo
        f = pair_feat[p]
        _bin_lut(cand[cand_off[p] : cand_off[p + 1]], fine_min[f], fine_max[f], lut[q])
    base = cand_off[pair_lo] + pair_lo
    for r in range(rows.shape[0]):
        s = slot[r]
        if s < 0:
            continue
        i = rows[r]
        for p in range(pair_off[s], pair_off[s + 1]):
            f = pair_feat[p]
            b = lut[p - pair_lo, codes[i, f]]
            if b < 0:
                b = np.searchsorted(cand[cand_off[p] : cand_off[p + 1]], X[i, f])
            _add_row(out, cand_off[p] + p - base + b, w[r], y[i], n_classes)


def left_stat_hist_numpy(
    X: NDArray[np.float64],
    codes: NDArray[np.uint8],
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
    pair_lo: int,
    lut: NDArray[np.int32],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`left_stat_hist` (bins every row by its exact value)."""
    out[:, :] = 0.0
    base = cand_off[pair_lo] + pair_lo
    keep = np.flatnonzero(slot >= 0)
    for q in range(lut.shape[0]):
        p = q + pair_lo
        mine = keep[(pair_off[slot[keep]] <= p) & (pair_off[slot[keep] + 1] > p)]
        vals = X[rows[mine], pair_feat[p]]
        b = np.searchsorted(cand[cand_off[p] : cand_off[p + 1]], vals, side="left")
        stats = _row_stats(w[mine], y[rows[mine]], n_classes)
        np.add.at(out, cand_off[p] + p - base + b, stats)
