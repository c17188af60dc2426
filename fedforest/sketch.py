"""Weighted quantile sketches (client side) and their mixture-quantile merge (server side).

Client side. Each client bins every feature once into at most ``N_FINE_BINS`` fine bins
of its own local quantiles (``fine_codes``); a bin holds one distinct value whenever the
feature has at most that many distinct values, so the sketch is then exact. The sketch of
a node and feature is the ``B`` weighted quantiles of the node's in-bag values at levels
``b / B`` (``b = 1..B``; bootstrap counts are the weights), read off a histogram of the
fine codes in one linear pass over the rows: no per-node sort.

Server side. Each sketch point stands for ``W_k / B`` of client ``k``'s node weight, so
the points of all clients describe the mixture CDF of the pooled node sample (Section 3.1
of the paper). The candidates are its ``B - 1`` quantiles at levels ``b / B``, de-duplicated,
and only those below the node maximum (a threshold at the maximum sends nothing right).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numpy.typing import NDArray

from ._common import CODE_DTYPE, N_FINE_BINS
from ._kernels import SMALL_SKETCH, group_rows

__all__ = [
    "fine_codes",
    "node_sketches",
    "node_sketches_numpy",
    "merge_sketches",
    "midpoint_candidates",
    "mixture_quantiles",
    "mixture_quantiles_numpy",
]

# scikit-learn does not split between values closer than this (``FEATURE_THRESHOLD``).
FEATURE_THRESHOLD = 1e-7


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
    """
    n, d = X.shape
    codes_t = np.empty((d, n), dtype=CODE_DTYPE)
    fine_min = np.full((d, n_fine), np.inf)
    fine_max = np.full((d, n_fine), -np.inf)
    for j in range(d):
        uniq = np.unique(X[:, j])
        if uniq.size <= n_fine:
            edges = uniq[:-1]
        else:
            qs = np.quantile(X[:, j], np.linspace(0, 1, n_fine + 1)[1:-1], method="lower")
            edges = np.unique(qs)
        code = np.searchsorted(edges, X[:, j], side="left")
        codes_t[j] = code
        np.minimum.at(fine_min[j], code, X[:, j])
        np.maximum.at(fine_max[j], code, X[:, j])
    return codes_t, fine_min, fine_max


@numba.njit(nogil=True, cache=True)
def node_sketches(Xt, codes_t, fine_max, rows, w, slot, pair_off, pair_feat, slot_lo, slot_hi, out):  # noqa: E501
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
    order = np.empty(rows.shape[0], dtype=np.int64)
    start = np.zeros(slot_hi - slot_lo + 1, dtype=np.int64)
    group_rows(slot, slot_lo, order, start)
    n_bins = out.shape[1]
    n_fine = fine_max.shape[1]
    hist = np.empty(n_fine)
    ii = np.empty(rows.shape[0], dtype=np.int64)
    ww = np.empty(rows.shape[0])
    vals = np.empty(SMALL_SKETCH)
    wsrt = np.empty(SMALL_SKETCH)
    p_lo = pair_off[slot_lo]
    for s in range(slot_lo, slot_hi):
        a, b = start[s - slot_lo], start[s - slot_lo + 1]
        c = b - a
        total = 0.0
        for k in range(c):
            ii[k] = rows[order[a + k]]
            ww[k] = w[order[a + k]]
            total += ww[k]
        for p in range(pair_off[s], pair_off[s + 1]):
            q, f = p - p_lo, pair_feat[p]
            if c == 0:
                for lv in range(n_bins):
                    out[q, lv] = np.nan
                continue
            level = 0
            cum = 0.0
            if c <= SMALL_SKETCH:
                # Stable insertion sort of (value, weight): no allocation, fast when tiny.
                for k in range(c):
                    v, wk, j = Xt[f, ii[k]], ww[k], k
                    while j > 0 and vals[j - 1] > v:
                        vals[j], wsrt[j] = vals[j - 1], wsrt[j - 1]
                        j -= 1
                    vals[j], wsrt[j] = v, wk
                for k in range(c):
                    cum += wsrt[k]
                    while level < n_bins and cum >= total * (level + 1) / n_bins * (1.0 - 1e-12):
                        out[q, level] = vals[k]
                        level += 1
                last = vals[c - 1]
            else:
                for j in range(n_fine):
                    hist[j] = 0.0
                for k in range(c):
                    hist[codes_t[f, ii[k]]] += ww[k]
                last = 0.0
                for j in range(n_fine):
                    if hist[j] <= 0.0:
                        continue
                    cum += hist[j]
                    last = fine_max[f, j]
                    while level < n_bins and cum >= total * (level + 1) / n_bins * (1.0 - 1e-12):
                        out[q, level] = last
                        level += 1
            for lv in range(level, n_bins):
                out[q, lv] = last


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
        mine = np.flatnonzero(slot == s)
        total = w[mine].sum()
        levels = total * np.arange(1, n_bins + 1) / n_bins * (1.0 - 1e-12)
        for p in range(pair_off[s], pair_off[s + 1]):
            f = pair_feat[p]
            if mine.size == 0:
                out[p - p_lo] = np.nan
                continue
            if mine.size <= SMALL_SKETCH:
                vals = Xt[f, rows[mine]]
                srt = np.argsort(vals, kind="stable")
                cum, pts = np.cumsum(w[mine][srt]), vals[srt]
            else:
                hist = np.bincount(
                    codes_t[f, rows[mine]], weights=w[mine], minlength=fine_max.shape[1]
                )
                used = np.flatnonzero(hist > 0)
                cum, pts = np.cumsum(hist[used]), fine_max[f, used]
            idx = np.minimum(np.searchsorted(cum, levels, side="left"), pts.size - 1)
            out[p - p_lo] = pts[idx]


def merge_sketches(
    sketches: NDArray[np.float64],
    weights: NDArray[np.float64],
    n_bins: int,
    n_threads: int = 1,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Mixture-quantile merge of the clients' sketches into candidate thresholds.

    Parameters
    ----------
    sketches : ndarray of float64, shape (n_clients, n_pairs, B)
        NaN rows for clients with no weight in the node.
    weights : ndarray of float64, shape (n_clients, n_pairs)
        Each client's node weight ``W_k``.
    n_bins : int
        ``B``; at most ``B - 1`` candidates per pair.
    n_threads : int, default=1
        Threads over blocks of pairs (the kernel releases the GIL).

    Returns
    -------
    cand_off : ndarray of int64, shape (n_pairs + 1,)
    cand : ndarray of float64, shape (n_candidates,)
        Sorted, distinct thresholds of pair ``p`` in ``cand[cand_off[p]:cand_off[p + 1]]``.
    """
    n_pairs = sketches.shape[1]
    out = np.empty((n_pairs, max(n_bins - 1, 0)))
    counts = np.zeros(n_pairs, dtype=np.int64)
    edges = np.linspace(0, n_pairs, max(1, min(n_threads, n_pairs // 4096)) + 1).astype(int)

    def run(k: int) -> None:
        lo, hi = edges[k], edges[k + 1]
        mixture_quantiles(sketches[:, lo:hi], weights[:, lo:hi], out[lo:hi], counts[lo:hi])

    if edges.size > 2:
        with ThreadPoolExecutor(edges.size - 1) as pool:
            list(pool.map(run, range(edges.size - 1)))
    else:
        run(0)
    cand_off = np.zeros(n_pairs + 1, dtype=np.int64)
    np.cumsum(counts, out=cand_off[1:])
    return cand_off, out[np.arange(out.shape[1])[None, :] < counts[:, None]]


@numba.njit(nogil=True, cache=True)
def mixture_quantiles(sketches, weights, out, counts):
    """Quantiles ``b / B`` (b = 1..B-1) of the clients' pooled sketch points, per pair.

    A point of client ``k`` weighs ``W_k / B``. Kept: distinct values below the node
    maximum (the largest sketch point), in increasing order.

    Parameters
    ----------
    sketches : ndarray of float64, shape (n_clients, n_pairs, B)  # IN
    weights : ndarray of float64, shape (n_clients, n_pairs)  # IN
    out : ndarray of float64, shape (n_pairs, B - 1)  # OUT: first ``counts[p]`` entries
    counts : ndarray of int64, shape (n_pairs,)  # OUT
    """
    n_clients, n_pairs, n_bins = sketches.shape
    vals = np.empty(n_clients * n_bins)
    pw = np.empty(n_clients * n_bins)
    for p in range(n_pairs):
        m = 0
        total = 0.0
        vmax = -np.inf
        for k in range(n_clients):
            wk = weights[k, p]
            if wk <= 0.0 or np.isnan(sketches[k, p, 0]):
                continue
            total += wk
            for b in range(n_bins):
                vals[m] = sketches[k, p, b]
                pw[m] = wk / n_bins
                m += 1
            vmax = max(vmax, sketches[k, p, n_bins - 1])
        counts[p] = 0
        if m == 0:
            continue
        order = np.argsort(vals[:m], kind="mergesort")
        i = 0
        cum = pw[order[0]]
        c = 0
        for q in range(n_bins - 1):
            level = total * (q + 1) / n_bins * (1.0 - 1e-12)
            while cum < level and i < m - 1:
                i += 1
                cum += pw[order[i]]
            v = vals[order[i]]
            if v < vmax and (c == 0 or v != out[p, c - 1]):
                out[p, c] = v
                c += 1
        counts[p] = c


def mixture_quantiles_numpy(
    sketches: NDArray[np.float64],
    weights: NDArray[np.float64],
    out: NDArray[np.float64],
    counts: NDArray[np.int64],
) -> None:
    """NumPy twin of :func:`mixture_quantiles`."""
    n_clients, n_pairs, b = sketches.shape
    for p in range(n_pairs):
        live = (weights[:, p] > 0) & ~np.isnan(sketches[:, p, 0])
        counts[p] = 0
        if not live.any():
            continue
        vals = sketches[live, p].ravel()
        pw = np.repeat(weights[live, p] / b, b)
        order = np.argsort(vals, kind="stable")
        cum = np.cumsum(pw[order])
        levels = weights[live, p].sum() * np.arange(1, b) / b * (1.0 - 1e-12)
        idx = np.minimum(np.searchsorted(cum, levels, side="left"), vals.size - 1)
        q = vals[order][idx]
        keep = q < sketches[live, p, b - 1].max()
        keep[1:] &= q[1:] != q[:-1]
        counts[p] = keep.sum()
        out[p, : counts[p]] = q[keep]


def midpoint_candidates(values: list[NDArray[np.float64]]) -> NDArray[np.float64]:
    """Every midpoint between consecutive distinct pooled values (verification mode).

    The clients' distinct node values are pooled and the thresholds computed exactly as
    scikit-learn does (``a / 2 + b / 2``, falling back to ``a`` when rounding reaches ``b``),
    skipping gaps scikit-learn would not split (``b <= a + 1e-7``).
    """
    pooled = np.unique(np.concatenate(values)) if values else np.empty(0)
    a, b = pooled[:-1], pooled[1:]
    mid = a / 2.0 + b / 2.0
    mid = np.where((mid == b) | np.isinf(mid), a, mid)
    return np.asarray(mid[b > a + FEATURE_THRESHOLD], dtype=np.float64)
