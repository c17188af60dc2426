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
    "group_rows",
    "group_rows_numpy",
    "left_stats",
    "left_stats_numpy",
    "SMALL_NODE",
    "SMALL_SKETCH",
]


@numba.njit(nogil=True, cache=True)
def route_rows(
    Xt, rows, slot, feature, threshold, left, right, set_off, set_code, set_side, missing_left
):
    """Move rows to the children of last level's splits, in place.

    Parameters
    ----------
    Xt : ndarray of float64, shape (n_columns, n_samples)  # IN: column-major values; set
        features hold codes, and the last row the client's own index when H is split on
    rows : ndarray of int32, shape (n_inbag,)  # IN
    slot : ndarray of int32, shape (n_inbag,)  # IN/OUT: previous slot -> new slot
    feature : ndarray of int32, shape (n_prev_slots,)  # IN: -1 when the node became a leaf
    threshold : ndarray of float64, shape (n_prev_slots,)  # IN
    left, right : ndarray of int32, shape (n_prev_slots,)  # IN: new slots, -1 for a leaf child
    set_off : ndarray of int64, shape (n_prev_slots + 1,)  # IN: set split codes of slot s in
        ``set_code[set_off[s]:set_off[s + 1]]`` (empty: numeric split)
    set_code : ndarray of int32  # IN
    set_side : ndarray of int8  # IN: 0 left, 1 right
    missing_left : ndarray of uint8, shape (n_prev_slots,)  # IN: where a missing value
        (+inf) goes at a numeric split: 1 left, 0 right
    """
    for r in range(rows.shape[0]):
        s = slot[r]
        if s < 0:
            continue
        f = feature[s]
        if f < 0:
            slot[r] = -1
            continue
        x = Xt[f, rows[r]]
        go_right = x > threshold[s]
        if x == np.inf:
            go_right = missing_left[s] == 0
        if set_off[s + 1] > set_off[s]:
            go_right = False  # a training row always has a known code; left is a safe default
            for k in range(set_off[s], set_off[s + 1]):
                if set_code[k] == int(x):
                    go_right = set_side[k] == 1
        slot[r] = right[s] if go_right else left[s]


def route_rows_numpy(
    Xt: NDArray[np.float64],
    rows: NDArray[np.int32],
    slot: NDArray[np.int32],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    left: NDArray[np.int32],
    right: NDArray[np.int32],
    set_off: NDArray[np.int64],
    set_code: NDArray[np.int32],
    set_side: NDArray[np.int8],
    missing_left: NDArray[np.uint8],
) -> None:
    """NumPy twin of :func:`route_rows`."""
    active = np.flatnonzero(slot >= 0)
    s = slot[active]
    f = feature[s]
    split = f >= 0
    x = np.zeros(active.size)
    x[split] = Xt[f[split], rows[active[split]]]
    go_right = x > threshold[s]
    gone = x == np.inf
    go_right[gone] = missing_left[s[gone]] == 0
    for node in np.unique(s[split]):
        lo, hi = set_off[node], set_off[node + 1]
        if hi > lo:
            mine = s == node
            rights = set_code[lo:hi][set_side[lo:hi] == 1]
            go_right[mine] = np.isin(x[mine].astype(np.int64), rights)
    slot[active] = np.where(split, np.where(go_right, right[s], left[s]), -1)


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


def group_rows_numpy(
    slot: NDArray[np.int32], slot_lo: int, order: NDArray[np.int64], start: NDArray[np.int64]
) -> None:
    """NumPy twin of :func:`group_rows`."""
    active = np.flatnonzero(slot >= 0)
    srt = np.argsort(slot[active], kind="stable")
    order[: active.size] = active[srt]
    start[:] = 0
    np.cumsum(np.bincount(slot[active] - slot_lo, minlength=start.size - 1), out=start[1:])


@numba.njit(inline="always")
def _count_below(cs, x):
    # ``np.searchsorted(cs, x)``: a branch-free count vectorises and beats a binary search
    # (mispredicted at every step) on the <= B - 1 candidates of a pair; long lists bisect.
    if cs.shape[0] > 128:
        return np.searchsorted(cs, x)
    k = 0
    for j in range(cs.shape[0]):
        k += cs[j] < x
    return k


@numba.njit(nogil=True, cache=True)
def _fine_lut(cs, fmin, fmax, lut):
    # Fine bin -> number of candidates below it, or -1 when a candidate falls inside the
    # bin's value range (those rows are binned by their exact value). One merge pass.
    j = 0
    for c in range(lut.shape[0]):
        if fmin[c] > fmax[c]:
            lut[c] = -1
            continue
        while j < cs.shape[0] and cs[j] < fmin[c]:
            j += 1
        lut[c] = -1 if (j < cs.shape[0] and cs[j] < fmax[c]) else j


@numba.njit(nogil=True, cache=True)
def left_stats(
    Xt,
    codes_t,
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
    slot_lo,
    slot_hi,
    out,
):  # noqa: E501
    """Left-child statistics at every candidate of the pairs of slots ``slot_lo..slot_hi``.

    The statistics at candidate ``t`` sum the rows with ``x <= t``, exactly: a row is
    binned through its fine code when no candidate falls inside its fine bin's value range
    (one table lookup), else by binary search on its value.

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
        ``cand_off[pair_off[slot_lo]] + i`` in row ``i``
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
    lut = np.empty(fine_min.shape[1], dtype=np.int32)
    # The node's rows, weights and targets gathered once, contiguous, for all its pairs.
    ii = np.empty(rows.shape[0], dtype=np.int64)
    ww = np.empty(rows.shape[0])
    yy = np.empty(rows.shape[0])
    for s in range(slot_lo, slot_hi):
        a, b = start[s - slot_lo], start[s - slot_lo + 1]
        c = b - a
        for k in range(c):
            r = order[a + k]
            ii[k] = rows[r]
            ww[k] = w[r]
            yy[k] = y[rows[r]]
        for p in range(pair_off[s], pair_off[s + 1]):
            nc = cand_off[p + 1] - cand_off[p]
            if nc == 0:
                continue
            lo = cand_off[p]
            cs = cand[lo : lo + nc]
            f = pair_feat[p]
            # Explicit loops: numba's slice assignments cost about a microsecond a pair.
            for j in range(nc + 1):
                for q in range(n_stat):
                    hist[j, q] = 0.0
            if c <= SMALL_NODE:
                for k in range(c):
                    _add_row(hist, _count_below(cs, Xt[f, ii[k]]), ww[k], yy[k], n_classes)
            else:
                _fine_lut(cs, fine_min[f], fine_max[f], lut)
                for k in range(c):
                    bin_ = lut[codes_t[f, ii[k]]]
                    if bin_ < 0:
                        bin_ = _count_below(cs, Xt[f, ii[k]])
                    _add_row(hist, bin_, ww[k], yy[k], n_classes)
            for q in range(n_stat):
                acc = 0.0
                for j in range(nc):
                    acc += hist[j, q]
                    out[lo + j - c0, q] = acc


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
    c0 = cand_off[pair_off[slot_lo]]
    for s in range(slot_lo, slot_hi):
        mine = np.flatnonzero(slot == s)
        stats = _row_stats(w[mine], y[rows[mine]], n_classes)
        for p in range(pair_off[s], pair_off[s + 1]):
            cs = cand[cand_off[p] : cand_off[p + 1]]
            if cs.size == 0:
                continue
            bins = np.searchsorted(cs, Xt[pair_feat[p], rows[mine]], side="left")
            hist = np.zeros((cs.size + 1, stats.shape[1]))
            np.add.at(hist, bins, stats)
            out[cand_off[p] - c0 : cand_off[p + 1] - c0] = np.cumsum(hist, axis=0)[: cs.size]
