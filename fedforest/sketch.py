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

import numba
import numpy as np
from numpy.typing import NDArray

from ._common import CODE_DTYPE, N_FINE_BINS

__all__ = [
    "fine_codes",
    "fine_sketch",
    "fine_sketch_numpy",
    "merge_sketches",
    "midpoint_candidates",
    "take_quantiles",
    "take_quantiles_numpy",
]

# scikit-learn does not split between values closer than this (``FEATURE_THRESHOLD``).
FEATURE_THRESHOLD = 1e-7


def fine_codes(
    X: NDArray[np.float64], n_fine: int = N_FINE_BINS
) -> tuple[NDArray[np.uint8], NDArray[np.float64], NDArray[np.float64]]:
    """Bin each column into at most ``n_fine`` local quantile bins, once per client.

    Returns
    -------
    codes : ndarray of uint8, shape (n_samples, n_features)
    fine_min, fine_max : ndarray of float64, shape (n_features, n_fine)
        Smallest and largest value in each bin (+inf / -inf for unused bins).
    """
    n, d = X.shape
    codes = np.empty((n, d), dtype=CODE_DTYPE)
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
        codes[:, j] = code
        np.minimum.at(fine_min[j], code, X[:, j])
        np.maximum.at(fine_max[j], code, X[:, j])
    return codes, fine_min, fine_max


@numba.njit(nogil=True, cache=True)
def fine_sketch(codes, fine_max, rows, w, slot, pair_off, pair_feat, pair_lo, hist, out):  # type: ignore[no-untyped-def]
    """Weighted quantile sketches of a contiguous block of (node, feature) pairs.

    Parameters
    ----------
    codes : ndarray of uint8, shape (n_samples, n_features)  # IN
    fine_max : ndarray of float64, shape (n_features, n_fine)  # IN
    rows, w, slot : ndarray, shape (n_inbag,)  # IN: row index, bootstrap weight, frontier slot
    pair_off : ndarray of int64, shape (n_slots + 1,)  # IN: pairs of slot s
    pair_feat : ndarray of int32, shape (n_pairs,)  # IN
    pair_lo : int  # IN: first pair of the block; rows must only reach pairs of the block
    hist : ndarray of float64, shape (n_block_pairs, n_fine)  # scratch, zeroed here
    out : ndarray of float64, shape (n_block_pairs, B)  # OUT: NaN where the node is empty
    """
    hist[:, :] = 0.0
    for r in range(rows.shape[0]):
        s = slot[r]
        if s < 0:
            continue
        i = rows[r]
        for p in range(pair_off[s], pair_off[s + 1]):
            hist[p - pair_lo, codes[i, pair_feat[p]]] += w[r]
    n_bins = out.shape[1]
    n_fine = hist.shape[1]
    for q in range(out.shape[0]):
        f = pair_feat[q + pair_lo]
        total = 0.0
        for c in range(n_fine):
            total += hist[q, c]
        if total <= 0.0:
            out[q, :] = np.nan
            continue
        cum = 0.0
        b = 0
        for c in range(n_fine):
            cum += hist[q, c]
            # Level (b + 1) / B reached inside fine bin c; the relative slack absorbs rounding.
            while b < n_bins and cum >= total * (b + 1) / n_bins * (1.0 - 1e-12):
                out[q, b] = fine_max[f, c]
                b += 1
        while b < n_bins:
            out[q, b] = out[q, b - 1]
            b += 1


def fine_sketch_numpy(
    codes: NDArray[np.uint8],
    fine_max: NDArray[np.float64],
    rows: NDArray[np.int32],
    w: NDArray[np.float64],
    slot: NDArray[np.int32],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    pair_lo: int,
    hist: NDArray[np.float64],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`fine_sketch` (same arguments, same result)."""
    hist[:, :] = 0.0
    keep = slot >= 0
    r_rows, r_w, r_slot = rows[keep], w[keep], slot[keep]
    n_per = (pair_off[r_slot + 1] - pair_off[r_slot]).astype(np.int64)
    rep = np.repeat(np.arange(r_rows.size), n_per)
    starts = np.repeat(pair_off[r_slot] - np.cumsum(n_per) + n_per, n_per)
    pairs = starts + np.arange(rep.size)
    np.add.at(hist, (pairs - pair_lo, codes[r_rows[rep], pair_feat[pairs]]), r_w[rep])
    n_bins = out.shape[1]
    cum = np.cumsum(hist, axis=1)
    total = cum[:, -1]
    levels = total[:, None] * np.arange(1, n_bins + 1) / n_bins * (1.0 - 1e-12)
    for q in range(out.shape[0]):
        if total[q] <= 0:
            out[q] = np.nan
            continue
        c = np.minimum(np.searchsorted(cum[q], levels[q], side="left"), hist.shape[1] - 1)
        out[q] = fine_max[pair_feat[q + pair_lo], c]


def merge_sketches(
    sketches: NDArray[np.float64], weights: NDArray[np.float64], n_bins: int
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

    Returns
    -------
    cand_off : ndarray of int64, shape (n_pairs + 1,)
    cand : ndarray of float64, shape (n_candidates,)
        Sorted, distinct thresholds of pair ``p`` in ``cand[cand_off[p]:cand_off[p + 1]]``.
    """
    n_clients, n_pairs, b = sketches.shape
    vals = np.transpose(sketches, (1, 0, 2)).reshape(n_pairs, n_clients * b)
    pw = np.repeat((weights / b).T, b, axis=1)
    pw = np.where(np.isnan(vals), 0.0, pw)
    vals = np.where(np.isnan(vals), np.inf, vals)
    order = np.argsort(vals, axis=1, kind="stable")
    vals = np.take_along_axis(vals, order, axis=1)
    cum = np.cumsum(np.take_along_axis(pw, order, axis=1), axis=1)
    total = cum[:, -1:]
    levels = total * (np.arange(1, n_bins) / n_bins)[None, :] * (1.0 - 1e-12)
    out = np.full((n_pairs, max(n_bins - 1, 0)), np.nan)
    take_quantiles(vals, cum, levels, out)
    node_max = np.where(
        total[:, 0] > 0, np.max(np.where(np.isinf(vals), -np.inf, vals), axis=1), -np.inf
    )
    keep = out < node_max[:, None]
    # Drop repeats: the rows of ``out`` are sorted, so a repeat equals its left neighbour.
    keep[:, 1:] &= out[:, 1:] != out[:, :-1]
    counts = keep.sum(axis=1)
    cand_off = np.zeros(n_pairs + 1, dtype=np.int64)
    np.cumsum(counts, out=cand_off[1:])
    return cand_off, out[keep]


@numba.njit(nogil=True, cache=True)
def take_quantiles(vals, cum, levels, out):  # type: ignore[no-untyped-def]
    """First value whose cumulative weight reaches each level, row by row.

    Parameters
    ----------
    vals : ndarray of float64, shape (n_pairs, n_points)  # IN: sorted per row
    cum : ndarray of float64, shape (n_pairs, n_points)  # IN: cumulative weights
    levels : ndarray of float64, shape (n_pairs, n_levels)  # IN: increasing per row
    out : ndarray of float64, shape (n_pairs, n_levels)  # OUT: untouched for empty rows
    """
    n_points = vals.shape[1]
    for p in range(vals.shape[0]):
        if cum[p, n_points - 1] <= 0.0:
            continue
        i = 0
        for q in range(levels.shape[1]):
            while i < n_points - 1 and cum[p, i] < levels[p, q]:
                i += 1
            out[p, q] = vals[p, i]


def take_quantiles_numpy(
    vals: NDArray[np.float64],
    cum: NDArray[np.float64],
    levels: NDArray[np.float64],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`take_quantiles`."""
    for p in range(vals.shape[0]):
        if cum[p, -1] <= 0:
            continue
        idx = np.searchsorted(cum[p], levels[p], side="left")
        out[p] = vals[p, np.minimum(idx, vals.shape[1] - 1)]


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
