"""Guided candidates under ``privacy="secure"``: where a tree's earlier nodes found signal.

The minimum-rows rule leaves a node of ``n`` rows at most ``n / m - 1`` candidates per
feature, ``m`` rows apart; a node of 30 rows gets one. Where they sit decides what the
tree can find: a step of the target at ``x = 0`` is split at the candidate nearest to it,
up to ``m`` rows away. So each candidate slot is given first to the thresholds the same
tree's earlier levels found best on the feature (per node and sampled feature, the
admissible candidate of largest gain, from Round B's pooled sums: released information),
and the node's quantile candidates fill the rest.

The rule is unchanged: the guides join the node's grid (Round A counts the node's rows
below them, as it does at its ancestors' thresholds), and a guide or quantile candidate is
kept only where the node's rows below it, above it and between it and every kept one are
at least ``m`` (exact, from Round A's counts); the rules across levels then check the kept
candidates as any others. Only the tree's own earlier levels guide it, so the forest does
not depend on ``tree_batch_size`` (docs/privacy.md, "What it costs").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np
from numpy.typing import NDArray

from .missing import MISSING_SPLIT

__all__ = [
    "GUIDES_PER_PAIR",
    "Guides",
    "guided_candidates",
    "guided_candidates_numpy",
    "pair_best",
]

#: At most this many guides per (node, feature), the best by gain.
GUIDES_PER_PAIR = 4
#: Per (tree, feature), the guides kept between levels (best by gain).
_KEPT_PER_KEY = 16


def pair_best(
    cand_off: NDArray[np.int64], cand: NDArray[np.float64], gain: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """Per pair, its admissible candidate of largest positive gain (the first on ties).

    Returns the pairs that have one, their thresholds and gains.
    """
    n = np.diff(cand_off)
    pairs = np.flatnonzero(n > 0)
    if not pairs.size:
        return pairs, np.zeros(0), np.zeros(0)
    g = np.where(np.isfinite(gain), gain, -np.inf)
    best = np.maximum.reduceat(g, cand_off[pairs])
    owner = np.repeat(np.arange(pairs.size), n[pairs])
    idx = np.where(g == best[owner], np.arange(g.size), g.size)
    first = np.minimum.reduceat(idx, cand_off[pairs])
    keep = best > 0
    return pairs[keep], cand[first[keep]], best[keep]


@dataclass
class Guides:
    """Per (tree, feature): thresholds found best at earlier levels, with their gains."""

    d: int
    key: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    gain: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    threshold: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    def add(
        self, tree: NDArray[np.int64], feature: NDArray[np.int64], thr: NDArray[np.float64],
        gain: NDArray[np.float64],
    ) -> None:  # fmt: skip
        """Join a level's best thresholds; keep the ``_KEPT_PER_KEY`` best per key."""
        key = np.concatenate([self.key, tree * self.d + feature])
        g = np.concatenate([self.gain, gain])
        t = np.concatenate([self.threshold, thr])
        order = np.lexsort((-g, key))
        key, g, t = key[order], g[order], t[order]
        start = np.searchsorted(key, key, side="left")
        keep = np.arange(key.size) - start < _KEPT_PER_KEY
        self.key, self.gain, self.threshold = key[keep], g[keep], t[keep]

    def record(
        self, tree: NDArray[np.int64], feature: NDArray[np.int32], cand_off: NDArray[np.int64],
        cand: NDArray[np.float64], gain: NDArray[np.float64],
    ) -> None:  # fmt: skip
        """Join each pair's best numeric threshold (per pair: its tree and feature)."""
        pairs, thr, g = pair_best(cand_off, cand, gain)
        known = thr != MISSING_SPLIT  # "value known | missing" guides nothing
        pairs = pairs[known]
        self.add(tree[pairs], feature[pairs].astype(np.int64), thr[known], g[known])

    def find(
        self, tree: NDArray[np.int64], feature: NDArray[np.int64], lo: NDArray[np.float64],
        hi: NDArray[np.float64],
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:  # fmt: skip
        """Per pair (tree, feature, path bounds): its guides strictly inside the bounds.

        At most :data:`GUIDES_PER_PAIR`, best first; returns offsets and thresholds.
        """
        q = tree * self.d + feature
        a = np.searchsorted(self.key, q, side="left")
        b = np.searchsorted(self.key, q, side="right")
        n = b - a
        owner = np.repeat(np.arange(q.size), n)
        idx = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n - a, n)
        t = self.threshold[idx]
        inside = (t > lo[owner]) & (t < hi[owner])
        owner, t = owner[inside], t[inside]
        first = np.searchsorted(owner, owner, side="left")
        keep = np.arange(owner.size) - first < GUIDES_PER_PAIR
        owner, t = owner[keep], t[keep]
        off = np.zeros(q.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=q.size), out=off[1:])
        return off, t


@numba.njit(nogil=True, cache=True)
def guided_candidates(  # type: ignore[no-untyped-def]
    grid, grid_off, cum_rows, node_rows, quant, quant_off, guide, guide_off, min_rows, out_off, out
):
    """Each pair's candidates: its guides first, then its quantile candidates, ``m`` apart.

    Parameters
    ----------
    grid : ndarray of float64  # IN
        Each pair's grid, pair after pair (``grid_off``, shape (n_pairs + 1,)); the guides
        are on it.
    cum_rows : ndarray of float64, shape (grid.size,)  # IN
        The node's pooled rows with ``x <= edge``.
    node_rows : ndarray of float64, shape (n_pairs,)  # IN
    quant : ndarray of float64  # IN
        Each pair's quantile candidates (:func:`~..privacy.rules.secure_candidates`),
        increasing, on its grid (``quant_off``).
    guide : ndarray of float64  # IN
        Each pair's guides, best first (``guide_off``); one not on the grid is skipped.
    min_rows : int  # IN
    out_off : ndarray of int64, shape (n_pairs + 1,)  # OUT
    out : ndarray of float64, shape (quant.size + guide.size,)  # OUT
        The kept candidates, increasing, pair after pair. A guide is kept where the
        node's rows below it and above it, and between it and every guide kept before,
        are at least ``min_rows``; a quantile candidate likewise against every kept one.
        So consecutive kept candidates are at least ``min_rows`` rows apart, as the
        quantile candidates alone are.
    """
    k = 0
    out_off[0] = 0
    for p in range(grid_off.size - 1):
        g0, g1 = grid_off[p], grid_off[p + 1]
        n = node_rows[p]
        start = k
        for source in range(2):
            a = guide_off[p] if source == 0 else quant_off[p]
            b = guide_off[p + 1] if source == 0 else quant_off[p + 1]
            for i in range(a, b):
                x = guide[i] if source == 0 else quant[i]
                j = g0 + np.searchsorted(grid[g0:g1], x)
                if j >= g1 or grid[j] != x:
                    continue
                r = cum_rows[j]
                ok = r >= min_rows and n - r >= min_rows
                for c in range(start, k):
                    c_j = g0 + np.searchsorted(grid[g0:g1], out[c])
                    if abs(cum_rows[c_j] - r) < min_rows:
                        ok = False
                        break
                if ok:
                    out[k] = x
                    k += 1
        # increasing (insertion sort: a few candidates)
        for i in range(start + 1, k):
            v = out[i]
            j = i
            while j > start and v < out[j - 1]:
                out[j] = out[j - 1]
                j -= 1
            out[j] = v
        out_off[p + 1] = k


def guided_candidates_numpy(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    cum_rows: NDArray[np.float64],
    node_rows: NDArray[np.float64],
    quant: NDArray[np.float64],
    quant_off: NDArray[np.int64],
    guide: NDArray[np.float64],
    guide_off: NDArray[np.int64],
    min_rows: int,
    out_off: NDArray[np.int64],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`guided_candidates` (same arguments, same outputs)."""
    k = 0
    out_off[0] = 0
    for p in range(grid_off.size - 1):
        g = grid[grid_off[p] : grid_off[p + 1]]
        r_all = cum_rows[grid_off[p] : grid_off[p + 1]]
        kept: list[float] = []
        rows: list[float] = []
        for x in [*guide[guide_off[p] : guide_off[p + 1]], *quant[quant_off[p] : quant_off[p + 1]]]:
            j = int(np.searchsorted(g, x))
            if j >= g.size or g[j] != x:
                continue
            r = float(r_all[j])
            if r < min_rows or node_rows[p] - r < min_rows:
                continue
            if any(abs(r - s) < min_rows for s in rows):
                continue
            kept.append(float(x))
            rows.append(r)
        kept.sort()
        out[k : k + len(kept)] = kept
        k += len(kept)
        out_off[p + 1] = k
