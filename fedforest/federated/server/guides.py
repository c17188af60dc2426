"""Guided candidates under ``privacy="secure"``: where the forest's earlier nodes found signal.

The minimum-rows rule leaves a node of ``n`` rows at most ``n / m - 1`` candidates per
feature, ``m`` rows apart; a node of 30 rows gets one. Where they sit decides what the
tree can find: a step of the target at ``x = 0`` is split at the candidate nearest to it,
up to ``m`` rows away. So each candidate slot is given first to guides: the thresholds
earlier nodes found best on the feature (per node and sampled feature, the admissible
candidate of largest gain, from Round B's pooled sums: released information), and the
node's quantile candidates fill the rest.

A node of tree ``t`` at depth ``L`` is guided by the best thresholds of the trees ``<= t``
(its own and the earlier trees) at depths ``< L``, inside its path bounds, largest gain
first (:class:`Guides`). Each tree's candidates sit elsewhere (its bootstrap and its grid
shift differ), so across many trees the thresholds of largest gain sit where the target
changes, closer than one tree's candidates `m` rows apart can (docs/privacy-findings.md,
"What it costs": the paper's homogeneous setting 1.075 -> 1.040 of scikit-learn's MSE against
guides of the node's own tree only). Exactly those entries are known when the node grows,
whatever ``tree_batch_size``, so the forest does not depend on it; a warm start carries
the earlier fit's entries (the estimator keeps them), so it equals one fit. At most
:data:`KEPT_PER_LEVEL` entries per tree, feature and level are kept (deep trees). Where the
pooled sums locate a step between a best candidate's neighbours precisely (a clean step,
such as a class boundary), the entry is the step's estimated position, not the candidate
(:func:`refined_best`): otherwise an early tree's coarse threshold takes the slot next to
the step and keeps the node's quantile candidates ``m`` rows from it.

The rule is unchanged: the guides join the node's grid (Round A counts the node's rows
below them, as it does at its ancestors' thresholds), and a guide or quantile candidate is
kept only where the node's rows below it, above it and between it and every kept one are
at least ``m`` (exact, from Round A's counts); the rules across levels then check the kept
candidates as any others. The thresholds are the server's (released to every client in
the requests anyway); nothing more is asked of the clients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_TASK, STAT_WEIGHT
from ..kernel_cache import cache_depends_on
from ..threads import join_ranges, thread_map, work_ranges
from . import sorted_search
from .config import GrowerConfig
from .missing import MISSING_SPLIT
from .sorted_search import search_left, search_right

__all__ = [
    "GUIDES_PER_PAIR",
    "Guides",
    "entry_order",
    "guided_candidates",
    "guided_candidates_numpy",
    "guided_in_threads",
    "pair_best",
    "refine_args",
    "refined_best",
    "root_medians",
    "root_medians_numpy",
    "top_guides",
    "top_guides_numpy",
]

#: At most this many guides per (node, feature), the best by gain.
GUIDES_PER_PAIR = 4
#: Entries kept per (tree, feature) and level, the best by gain.
KEPT_PER_LEVEL = 8
#: A node's first guide is the median of at least this many roots' best thresholds near
#: it (:func:`root_medians`), within this many ``m`` of the root's rows either side.
MEDIAN_OF = 3
MEDIAN_WINDOW = 3
#: A pair's best threshold moves to the step its pooled sums locate when the share of the
#: weight below the step is known to this standard error (:func:`refined_best`).
REFINE_SE = 0.05


def _pair_best_at(
    cand_off: NDArray[np.int64], gain: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Per pair, the index of its admissible candidate of largest positive gain (first on ties)."""
    n = np.diff(cand_off)
    pairs = np.flatnonzero(n > 0)
    if not pairs.size:
        return pairs, np.zeros(0, np.int64), np.zeros(0)
    g = np.where(np.isfinite(gain), gain, -np.inf)
    best = np.maximum.reduceat(g, cand_off[pairs])
    owner = np.repeat(np.arange(pairs.size), n[pairs])
    idx = np.where(g == best[owner], np.arange(g.size), g.size)
    first = np.minimum.reduceat(idx, cand_off[pairs])
    keep = best > 0
    return pairs[keep], first[keep], best[keep]


def pair_best(
    cand_off: NDArray[np.int64], cand: NDArray[np.float64], gain: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """Per pair, its admissible candidate of largest positive gain (the first on ties).

    Returns the pairs that have one, their thresholds and gains.
    """
    pairs, at, best = _pair_best_at(cand_off, gain)
    return pairs, cand[at], best


def refined_best(
    cand_off: NDArray[np.int64], cand: NDArray[np.float64], gain: NDArray[np.float64],
    left: NDArray[np.float64], total: NDArray[np.float64], cols: NDArray[np.int64],
    squares: bool,
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:  # fmt: skip
    """:func:`pair_best`, each threshold moved to a clean step between its neighbours.

    The best candidate ``c`` of a pair says the target changes near it, between its
    neighbours ``c- < c < c+``. With ``A`` the node's rows at or below ``c-``, ``B`` those
    above ``c+`` and ``U`` those between (at a pair's first or last candidate, ``U`` is the
    interval on its inner side), a step from ``A``'s mean to ``B``'s puts a share ``q =
    <mu_B - mu_U, mu_B - mu_A> / |mu_B - mu_A|^2`` (clipped to [0, 1]) of ``U``'s weight
    below it: the threshold moves there, linearly between the candidates, where the step
    is clean, i.e. ``q``'s standard error ``sqrt(var / W_U) / |mu_B - mu_A|`` (``var``:
    the pooled within-``A`` and within-``B`` variance) is below :data:`REFINE_SE`; else it
    stays. A noiseless step (a class boundary) is then found between the candidates; a
    noisy one keeps the candidate, which the selection by gain across trees places better
    (docs/privacy-findings.md, "What it costs"). Round B's pooled sums only: post-processing.

    Parameters
    ----------
    cand_off, cand, gain : as for :func:`pair_best`
    left : ndarray of float64, shape (cand.size, n_stats)
        Each candidate's pooled left statistics (``x <= cand``).
    total : ndarray of float64, shape (cand_off.size - 1, n_stats)
        Each pair's node totals.
    cols : ndarray of int64
        The columns whose means locate the step: each output's sum of w*y (``squares``:
        the next column holds w*y^2), or the class weights (variance ``mu (1 - mu)``).
    """
    pairs, j, best = _pair_best_at(cand_off, gain)
    thr = cand[j]
    if not pairs.size:
        return pairs, thr, best
    has_lo, has_hi = j > cand_off[pairs], j < cand_off[pairs + 1] - 1
    lo_j, hi_j = np.where(has_lo, j - 1, j), np.where(has_hi, j + 1, j)
    c_lo, c_hi = cand[lo_j], cand[hi_j]
    ok = (has_lo | has_hi) & np.isfinite(c_lo) & np.isfinite(c_hi)
    ok &= (c_lo != MISSING_SPLIT) & (c_hi != MISSING_SPLIT) & (c_lo < c_hi)
    ok &= (c_lo <= thr) & (thr <= c_hi)
    a = left[lo_j]  # rows <= c- (at the first candidate: <= c)
    b = total[pairs] - left[hi_j]
    u = left[hi_j] - a
    w_a, w_b, w_u = a[:, STAT_WEIGHT], b[:, STAT_WEIGHT], u[:, STAT_WEIGHT]
    ok &= (w_a > 0) & (w_b > 0) & (w_u > 0)
    w_a, w_b, w_u = (np.where(w > 0, w, 1.0) for w in (w_a, w_b, w_u))
    mu_a, mu_b = a[:, cols] / w_a[:, None], b[:, cols] / w_b[:, None]
    mu_u = u[:, cols] / w_u[:, None]
    step = mu_b - mu_a
    den = np.einsum("ij,ij->i", step, step)
    ok &= den > 1e-12 * (1.0 + np.einsum("ij,ij->i", mu_a, mu_a))
    den = np.where(ok, den, 1.0)
    q = np.clip(np.einsum("ij,ij->i", mu_b - mu_u, step) / den, 0.0, 1.0)
    if squares:
        var_a = a[:, cols + 1] / w_a[:, None] - mu_a**2
        var_b = b[:, cols + 1] / w_b[:, None] - mu_b**2
    else:
        var_a, var_b = mu_a * (1.0 - mu_a), mu_b * (1.0 - mu_b)
    var = np.maximum(var_a, 0.0) * w_a[:, None] + np.maximum(var_b, 0.0) * w_b[:, None]
    var = var.sum(axis=1) / (w_a + w_b)
    ok &= np.sqrt(var / w_u / den) < REFINE_SE
    # U's weight below the knots x0 < x1 <= x2: 0, w1, w_u (at an end, x1 = x2).
    x0, x1 = np.where(has_lo, c_lo, thr), np.where(has_lo, thr, c_hi)
    w1 = np.where(has_lo, left[j, STAT_WEIGHT] - a[:, STAT_WEIGHT], w_u)
    at = q * w_u
    in_first = at <= w1
    f1 = np.minimum(at, w1) / np.where(w1 > 0, w1, 1.0)
    f2 = np.maximum(at - w1, 0.0) / np.where(w_u > w1, w_u - w1, 1.0)
    x = np.where(in_first, x0 + f1 * (x1 - x0), x1 + f2 * (c_hi - x1))
    return pairs, np.where(ok, x, thr), best


def refine_args(
    cfg: GrowerConfig, left: NDArray[np.float64], pooled: NDArray[np.float64],
    pair_node: NDArray[np.int64],
) -> tuple[Any, ...]:  # fmt: skip
    """:meth:`Guides.record`'s ``refine`` for a level: squared error and classes only."""
    s = pooled.shape[1]
    if cfg.task == "classification":
        return left, pooled[pair_node], np.arange(STAT_TASK, s, dtype=np.int64), False
    if cfg.criterion != "squared_error":  # Poisson's columns are no (w y, w y^2) pairs
        return ()
    return left, pooled[pair_node], np.arange(STAT_TASK, s, 2, dtype=np.int64), True


def entry_order(
    feature: NDArray[np.int64], gain: NDArray[np.float64], tree: NDArray[np.int64],
    depth: NDArray[np.int64], threshold: NDArray[np.float64],
) -> NDArray[np.int64]:  # fmt: skip
    """``np.lexsort((threshold, depth, tree, -gain, feature))``, its five passes cut to two.

    Sorted by feature and ``-gain``; only the runs of equal (feature, gain) (NaN equal to
    NaN, as the sort places them) are then sorted by tree, depth and threshold: the same
    order, full ties left in entry order as there.
    """
    order = np.lexsort((-gain, feature))
    f, g = feature[order], -gain[order]
    same = (f[1:] == f[:-1]) & ((g[1:] == g[:-1]) | (np.isnan(g[1:]) & np.isnan(g[:-1])))
    if same.any():
        tied = np.zeros(order.size, dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        at = np.flatnonzero(tied)
        run = np.concatenate([[0], np.cumsum(~same)])[at]
        idx = order[at]
        order[at] = idx[np.lexsort((threshold[idx], depth[idx], tree[idx], run))]
    return order


@dataclass
class Guides:
    """The forest's best thresholds so far: per (tree, depth, feature), each pair's best.

    :meth:`find` gives a node of tree ``t`` at depth ``L`` the thresholds of trees ``<= t``
    at depths ``< L`` (:attr:`level`), inside the node's path bounds on the feature, largest
    gain first. Exactly those are known when the node grows whatever ``tree_batch_size``
    (batches grow one after another, a batch's trees level by level), so the forest does
    not depend on it; a warm start gets the earlier fit's (:meth:`pool`, :meth:`add_pool`).
    """

    d: int
    tree: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    depth: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    feature: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    gain: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    threshold: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    #: The depth of the nodes growing now (set before each level's Round A).
    level: int = 0
    #: The roots' cumulative distributions (:meth:`set_root`): edges, rows, window rows.
    root_cdf: tuple[list[NDArray[np.float64]], list[NDArray[np.float64]], float] | None = None
    _index: tuple[NDArray[Any], ...] | None = None

    def add(
        self, tree: NDArray[np.int64], depth: NDArray[np.int64], feature: NDArray[np.int64],
        thr: NDArray[np.float64], gain: NDArray[np.float64],
    ) -> None:  # fmt: skip
        """Join thresholds with their tree, depth, feature and gain."""
        self.tree = np.concatenate([self.tree, np.asarray(tree, dtype=np.int64)])
        self.depth = np.concatenate([self.depth, np.asarray(depth, dtype=np.int64)])
        self.feature = np.concatenate([self.feature, np.asarray(feature, dtype=np.int64)])
        self.threshold = np.concatenate([self.threshold, np.asarray(thr, dtype=np.float64)])
        self.gain = np.concatenate([self.gain, np.asarray(gain, dtype=np.float64)])
        self._index = None

    def record(
        self, tree: NDArray[np.int64], feature: NDArray[np.int32], cand_off: NDArray[np.int64],
        cand: NDArray[np.float64], gain: NDArray[np.float64], refine: tuple[Any, ...] = (),
    ) -> None:  # fmt: skip
        """Join each pair's best numeric threshold at the current level (:attr:`level`).

        ``refine``: ``left, total, cols, squares`` of :func:`refined_best` (moves a
        threshold to a clean step between its neighbours).
        """
        if refine:
            pairs, thr, g = refined_best(cand_off, cand, gain, *refine)
        else:
            pairs, thr, g = pair_best(cand_off, cand, gain)
        known = thr != MISSING_SPLIT  # "value known | missing" guides nothing
        pairs, thr, g = pairs[known], thr[known], g[known]
        # At most KEPT_PER_LEVEL per (tree, feature) and level, the largest gains: bounds
        # the entries of deep trees (the same whatever the batching: a level is whole).
        key = tree[pairs].astype(np.int64) * self.d + feature[pairs]
        order = np.lexsort((thr, -g, key))
        key = key[order]
        first = np.searchsorted(key, key, side="left")
        keep = order[np.arange(key.size) - first < KEPT_PER_LEVEL]
        pairs, thr, g = pairs[keep], thr[keep], g[keep]
        depth = np.full(pairs.size, self.level, dtype=np.int64)
        self.add(tree[pairs], depth, feature[pairs], thr, g)

    def pool(self) -> dict[str, NDArray[Any]]:
        """Every entry, for a warm start (:meth:`add_pool`)."""
        return {
            "tree": self.tree, "depth": self.depth, "feature": self.feature,
            "threshold": self.threshold, "gain": self.gain,
        }  # fmt: skip

    def add_pool(self, pool: dict[str, NDArray[Any]]) -> None:
        """Join an earlier fit's entries (a warm start: its trees come first)."""
        self.add(pool["tree"], pool["depth"], pool["feature"], pool["threshold"], pool["gain"])

    def _sorted(self) -> tuple[NDArray[Any], ...]:
        """Per feature, the entries by gain, then by threshold (see :func:`top_guides`).

        By gain: largest first, ties by tree, depth, threshold.
        """
        if self._index is None:
            off = np.zeros(self.d + 1, dtype=np.int64)
            np.cumsum(np.bincount(self.feature, minlength=self.d), out=off[1:])
            order = entry_order(self.feature, self.gain, self.tree, self.depth, self.threshold)
            thr = np.ascontiguousarray(self.threshold[order])
            by_thr = np.lexsort((thr, self.feature[order]))  # ties by rank: the sort is stable
            self._index = (off, self.tree[order], self.depth[order], thr, thr[by_thr], by_thr)
        return self._index

    def find(
        self, tree: NDArray[np.int64], feature: NDArray[np.int64], lo: NDArray[np.float64],
        hi: NDArray[np.float64],
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:  # fmt: skip
        """Per pair (tree, feature, path bounds): its guides strictly inside the bounds.

        At most :data:`GUIDES_PER_PAIR`, best first; returns offsets and thresholds.
        """
        e_off, e_tree, e_depth, e_thr, s_thr, s_at = self._sorted()
        out_off = np.zeros(tree.size + 1, dtype=np.int64)
        out = np.empty(tree.size * GUIDES_PER_PAIR)
        tree, feature = np.asarray(tree, dtype=np.int64), np.asarray(feature, dtype=np.int64)
        lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        top_guides(
            e_off, e_tree, e_depth, e_thr, s_thr, s_at, tree, feature, lo, hi, self.level,
            GUIDES_PER_PAIR, out_off, out,
        )  # fmt: skip
        if self.root_cdf is not None and out_off[-1]:
            w_lo, w_hi = self._window(feature, out[out_off[:-1]], out_off)
            root_medians(
                e_off, e_tree, e_depth, s_thr, s_at, tree, feature, lo, hi, w_lo, w_hi,
                out_off, out,
            )  # fmt: skip
        return out_off, out[: out_off[-1]]

    def set_root(
        self, edges: list[NDArray[np.float64]], mass: list[NDArray[np.float64]], rows: float
    ) -> None:
        """The roots' pooled distributions (grid rounds): the window of :func:`root_medians`.

        ``edges[f]``, ``mass[f]``: feature ``f``'s root bins and their rows (empty for a
        categorical feature); ``rows``: the window's half-width in the root's rows.
        """
        cum = [np.concatenate([[0.0], np.cumsum(w)]) for w in mass]
        self.root_cdf = (list(edges), cum, float(rows))

    def _window(
        self, feature: NDArray[np.int64], x: NDArray[np.float64], off: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per query, the values ``rows`` of the root's rows below and above its first guide."""
        assert self.root_cdf is not None
        edges, cum, rows = self.root_cdf
        w_lo, w_hi = np.full(x.size, np.inf), np.full(x.size, -np.inf)  # empty: no median
        has = np.flatnonzero(np.diff(off) > 0)
        if not has.size:
            return w_lo, w_hi
        has = has[np.argsort(feature[has], kind="stable")]  # by feature, queries in order
        f_has = feature[has]
        cuts = (np.flatnonzero(np.diff(f_has)) + 1).tolist()
        for a, z in zip([0, *cuts], [*cuts, has.size], strict=True):
            e, c = edges[int(f_has[a])], cum[int(f_has[a])]
            if e.size < 2:
                continue
            at = has[a:z]
            r = np.interp(x[at], e, c)
            w_lo[at], w_hi[at] = np.interp(r - rows, c, e), np.interp(r + rows, c, e)
        return w_lo, w_hi


#: A query whose bounds hold at most this many entries of its feature scans them (by
#: threshold) instead of the feature's entries by gain: a deep node's narrow bounds.
_SLICE = 256


@numba.njit(nogil=True, cache=True)
def top_guides(  # type: ignore[no-untyped-def]
    e_off, e_tree, e_depth, e_thr, s_thr, s_at, tree, feature, lo, hi, level, k_max, out_off, out
):
    """Per query pair, the entries of largest gain that guide it (at most ``k_max``).

    Parameters
    ----------
    e_off : ndarray of int64, shape (d + 1,)  # IN
        Each feature's entries in ``e_tree``, ``e_depth``, ``e_thr``, largest gain first.
    s_thr, s_at : ndarray, shape (e_thr.size,)  # IN
        The same entries by threshold within each feature, and each one's index in the
        order by gain (narrow bounds: the entries inside them, found by bisection).
    tree, feature : ndarray of int64, shape (n,)  # IN
        Each pair's (global) tree index and feature.
    lo, hi : ndarray of float64, shape (n,)  # IN
        The node's path bounds on the feature: an entry strictly inside counts.
    level : int  # IN
        The nodes' depth: entries of trees ``<= tree`` at depths ``< level`` count.
    k_max : int  # IN
    out_off : ndarray of int64, shape (n + 1,)  # OUT
    out : ndarray of float64, shape (n * k_max,)  # OUT
        Each pair's guides, best first, distinct: the ``k_max`` distinct thresholds of
        smallest index by gain among the entries that count.
    """
    k = 0
    out_off[0] = 0
    best = np.empty(k_max, dtype=np.int64)
    for i in range(tree.size):
        start = k
        f = feature[i]
        a, b = e_off[f], e_off[f + 1]
        i0 = search_right(s_thr, a, b, lo[i])
        i1 = search_left(s_thr, a, b, hi[i])
        if i1 - i0 <= _SLICE:
            # Bisection: each distinct threshold inside once, at its best index by gain.
            n = 0
            j = i0
            while j < i1:
                x = s_thr[j]
                r = -1
                while j < i1 and s_thr[j] == x:
                    e = s_at[j]
                    if e_tree[e] <= tree[i] and e_depth[e] < level and (r < 0 or e < r):
                        r = e
                    j += 1
                if r < 0 or (n == k_max and r > best[n - 1]):
                    continue
                c = n if n < k_max else k_max - 1
                while c > 0 and best[c - 1] > r:  # insert by index (the order by gain)
                    if c < k_max:
                        best[c] = best[c - 1]
                    c -= 1
                best[c] = r
                if n < k_max:
                    n += 1
            for c in range(n):
                out[k] = e_thr[best[c]]
                k += 1
        else:
            for e in range(a, b):
                if k - start >= k_max:
                    break
                if e_tree[e] > tree[i] or e_depth[e] >= level:
                    continue
                x = e_thr[e]
                if not (lo[i] < x < hi[i]):
                    continue
                seen = False
                for c in range(start, k):
                    if out[c] == x:
                        seen = True
                        break
                if not seen:
                    out[k] = x
                    k += 1
        out_off[i + 1] = k


def top_guides_numpy(
    e_off: NDArray[np.int64], e_tree: NDArray[np.int64], e_depth: NDArray[np.int64],
    e_thr: NDArray[np.float64], s_thr: NDArray[np.float64], s_at: NDArray[np.int64],
    tree: NDArray[np.int64], feature: NDArray[np.int64],
    lo: NDArray[np.float64], hi: NDArray[np.float64], level: int, k_max: int,
    out_off: NDArray[np.int64], out: NDArray[np.float64],
) -> None:  # fmt: skip
    """NumPy twin of :func:`top_guides` (same arguments, same outputs; by gain only)."""
    del s_thr, s_at  # the kernel's shortcut for narrow bounds
    k = 0
    out_off[0] = 0
    for i in range(tree.size):
        a, b = int(e_off[feature[i]]), int(e_off[feature[i] + 1])
        ok = (e_tree[a:b] <= tree[i]) & (e_depth[a:b] < level)
        ok &= (e_thr[a:b] > lo[i]) & (e_thr[a:b] < hi[i])
        mine = list(dict.fromkeys(float(x) for x in e_thr[a:b][ok]))[:k_max]
        out[k : k + len(mine)] = mine
        k += len(mine)
        out_off[i + 1] = k


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
    # The node's rows below each kept candidate, beside it (``out[c]`` is on the grid, so
    # this is ``cum_rows`` at its first position there, as a search would find it again).
    kept_rows = np.empty(out.size)
    for p in range(grid_off.size - 1):
        g0, g1 = grid_off[p], grid_off[p + 1]
        n = node_rows[p]
        start = k
        for source in range(2):
            a = guide_off[p] if source == 0 else quant_off[p]
            b = guide_off[p + 1] if source == 0 else quant_off[p + 1]
            for i in range(a, b):
                x = guide[i] if source == 0 else quant[i]
                j = search_left(grid, g0, g1, x)
                if j >= g1 or grid[j] != x:
                    continue
                r = cum_rows[j]
                ok = r >= min_rows and n - r >= min_rows
                for c in range(start, k):
                    if abs(kept_rows[c] - r) < min_rows:
                        ok = False
                        break
                if ok:
                    out[k] = x
                    kept_rows[k] = r
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


@numba.njit(nogil=True, cache=True)
def root_medians(  # type: ignore[no-untyped-def]
    e_off, e_tree, e_depth, s_thr, s_at, tree, feature, lo, hi, w_lo, w_hi, out_off, out
):
    """Each query's first guide moved to the median of the roots' best thresholds near it.

    Parameters
    ----------
    e_off, e_tree, e_depth, s_thr, s_at : as for :func:`top_guides`  # IN
    tree, feature, lo, hi : ndarray, shape (n,)  # IN
        Each query's tree, feature and path bounds.
    w_lo, w_hi : ndarray of float64, shape (n,)  # IN
        Each query's window around its first guide.
    out_off : ndarray of int64, shape (n + 1,)  # IN
    out : ndarray of float64  # IN/OUT
        :func:`top_guides`' guides. A query's first becomes the median of the entries of
        depth 0 (roots) of trees ``<= tree`` on the feature with ``w_lo <= x <= w_hi``,
        where at least :data:`MEDIAN_OF` are, the median is inside the bounds and no other
        guide of the query equals it.
    """
    vals = np.empty(s_thr.size)
    for i in range(tree.size):
        k0, k1 = out_off[i], out_off[i + 1]
        if k1 == k0:
            continue
        f = feature[i]
        a, b = e_off[f], e_off[f + 1]
        j = search_left(s_thr, a, b, w_lo[i])
        j1 = search_right(s_thr, a, b, w_hi[i])
        c = 0
        while j < j1:
            e = s_at[j]
            if e_depth[e] == 0 and e_tree[e] <= tree[i]:
                vals[c] = s_thr[j]  # increasing: the entries by threshold
                c += 1
            j += 1
        if c < MEDIAN_OF:
            continue
        v = 0.5 * (vals[(c - 1) // 2] + vals[c // 2])
        if not (lo[i] < v < hi[i]):
            continue
        clash = False
        for k in range(k0 + 1, k1):
            if out[k] == v:
                clash = True
        if not clash:
            out[k0] = v


# their disk caches stamped with the helpers they call (numba stamps their own file only)
for _kernel in (top_guides, guided_candidates, root_medians):
    cache_depends_on(_kernel, sorted_search)


def root_medians_numpy(
    e_off: NDArray[np.int64], e_tree: NDArray[np.int64], e_depth: NDArray[np.int64],
    s_thr: NDArray[np.float64], s_at: NDArray[np.int64], tree: NDArray[np.int64],
    feature: NDArray[np.int64], lo: NDArray[np.float64], hi: NDArray[np.float64],
    w_lo: NDArray[np.float64], w_hi: NDArray[np.float64], out_off: NDArray[np.int64],
    out: NDArray[np.float64],
) -> None:  # fmt: skip
    """NumPy twin of :func:`root_medians` (same arguments, same outputs)."""
    for i in range(tree.size):
        k0, k1 = int(out_off[i]), int(out_off[i + 1])
        if k1 == k0:
            continue
        a, b = int(e_off[feature[i]]), int(e_off[feature[i] + 1])
        thr, at = s_thr[a:b], s_at[a:b]
        ok = (thr >= w_lo[i]) & (thr <= w_hi[i]) & (e_depth[at] == 0) & (e_tree[at] <= tree[i])
        if ok.sum() < MEDIAN_OF:
            continue
        v = float(np.median(thr[ok]))
        if lo[i] < v < hi[i] and v not in out[k0 + 1 : k1]:
            out[k0] = v


#: :func:`guided_in_threads` runs on ranges of pairs in threads from this many candidates.
PARALLEL_GUIDED = 20_000


def guided_in_threads(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    cum_rows: NDArray[np.float64],
    node_rows: NDArray[np.float64],
    quant: NDArray[np.float64],
    quant_off: NDArray[np.int64],
    guide: NDArray[np.float64],
    guide_off: NDArray[np.int64],
    min_rows: int,
    n_threads: int = 1,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`guided_candidates` (its ``out_off`` and ``out``), ranges of pairs in threads.

    Each pair's candidates depend on its own arguments: each range writes into a buffer of
    its own (the offsets stay absolute, the output's relative), joined in order; from
    :data:`PARALLEL_GUIDED` candidates on with ``n_threads`` > 1, else one call.
    """
    n = n_threads if quant.size + guide.size >= PARALLEL_GUIDED else 1
    parts = work_ranges(np.diff(quant_off) + np.diff(guide_off), n)

    def run(r: tuple[int, int]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        a, b = r
        off = np.zeros(b - a + 1, dtype=np.int64)
        out = np.empty(int(quant_off[b] - quant_off[a] + guide_off[b] - guide_off[a]))
        guided_candidates(
            grid, grid_off[a : b + 1], cum_rows, node_rows[a:b], quant, quant_off[a : b + 1],
            guide, guide_off[a : b + 1], min_rows, off, out,
        )  # fmt: skip
        return out[: off[-1]], off

    return join_ranges(thread_map(run, parts, n))


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
