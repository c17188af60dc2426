"""Server side: the best split of every frontier node from the clients' summed statistics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ._common import STAT_ROWS, STAT_WEIGHT
from .criteria import weighted_gain

__all__ = ["BestSplits", "best_splits"]

# scikit-learn's EPSILON in the split acceptance rule.
EPSILON = float(np.finfo(np.float64).eps)
_TIE_RTOL = 1e-12


@dataclass(frozen=True)
class BestSplits:
    """One entry per frontier node; ``feature == -1`` means the node becomes a leaf.

    Attributes
    ----------
    feature : ndarray of int32, shape (n_nodes,)
    threshold : ndarray of float64, shape (n_nodes,)
    gain : ndarray of float64, shape (n_nodes,)
        Weighted impurity decrease ``W Psi(s) - W_L Psi(s_L) - W_R Psi(s_R)``.
    left, right : ndarray of float64, shape (n_nodes, n_stats)
        Pooled statistics of the children (zeros where there is no split).
    """

    feature: NDArray[np.int32]
    threshold: NDArray[np.float64]
    gain: NDArray[np.float64]
    left: NDArray[np.float64]
    right: NDArray[np.float64]


def best_splits(
    parent: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    left: NDArray[np.float64],
    *,
    criterion: str,
    min_samples_leaf: int,
    min_impurity_decrease: float,
    root_weight: NDArray[np.float64],
) -> BestSplits:
    """Evaluate every candidate of every node and keep each node's best.

    Follows scikit-learn's rules: a candidate is admissible when both children keep at
    least ``min_samples_leaf`` distinct rows and positive weight; the best admissible
    candidate is kept unless ``gain / root_weight + EPSILON < min_impurity_decrease``.
    Ties (gains within a relative 1e-12, the rounding of summing in another client
    partition) go to the first candidate in the request order (sampled feature order,
    then increasing threshold), which depends only on the seed, never on the clients.

    Parameters
    ----------
    parent : ndarray of float64, shape (n_nodes, n_stats)
        Pooled node statistics.
    pair_off : ndarray of int64, shape (n_nodes + 1,)
        Node ``i`` owns pairs ``pair_off[i]:pair_off[i + 1]``.
    pair_feat : ndarray of int32, shape (n_pairs,)
    cand_off : ndarray of int64, shape (n_pairs + 1,)
    cand : ndarray of float64, shape (n_candidates,)
    left : ndarray of float64, shape (n_candidates, n_stats)
        Pooled left-child statistics at each candidate.
    root_weight : ndarray of float64, shape (n_nodes,)
        Weight at the root of each node's tree.
    """
    n_nodes, n_stats = parent.shape
    pair_node = np.repeat(np.arange(n_nodes), np.diff(pair_off))
    cand_pair = np.repeat(np.arange(pair_feat.size), np.diff(cand_off))
    cand_node = pair_node[cand_pair]
    par = parent[cand_node]
    right = par - left
    ok = (
        (left[:, STAT_ROWS] >= min_samples_leaf)
        & (right[:, STAT_ROWS] >= min_samples_leaf)
        & (left[:, STAT_WEIGHT] > 0)
        & (right[:, STAT_WEIGHT] > 0)
    )
    gain = np.where(ok, weighted_gain(par, left, criterion), -np.inf)
    best = np.full(n_nodes, -np.inf)
    np.maximum.at(best, cand_node, gain)
    # Equal partitions reached through different clients' sums differ in the last bits:
    # gains within a relative 1e-12 of the best are ties, broken by request order.
    slack = _TIE_RTOL * np.abs(best[cand_node])
    hits = np.flatnonzero((gain >= best[cand_node] - slack) & np.isfinite(gain))
    nodes, first = np.unique(cand_node[hits], return_index=True)
    chosen = hits[first]
    accept = best[nodes] / root_weight[nodes] + EPSILON >= min_impurity_decrease
    nodes, chosen = nodes[accept], chosen[accept]

    feature = np.full(n_nodes, -1, dtype=np.int32)
    threshold = np.full(n_nodes, np.nan)
    out_left = np.zeros((n_nodes, n_stats))
    feature[nodes] = pair_feat[cand_pair[chosen]]
    threshold[nodes] = cand[chosen]
    out_left[nodes] = left[chosen]
    out_right = np.where(feature[:, None] >= 0, parent - out_left, 0.0)
    return BestSplits(feature, threshold, np.where(feature >= 0, best, 0.0), out_left, out_right)
