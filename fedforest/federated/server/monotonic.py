"""``monotonic_cst``: scikit-learn's monotonicity constraints, enforced by the server alone.

scikit-learn (``tree/_splitter.pyx``, ``_criterion.pyx``, ``_tree.pyx``) gives every node a
value interval ``[lower, upper]`` (the root ``(-inf, inf)``) and:

- rejects a split on a constrained feature unless both children's values lie in the node's
  interval and are ordered as the constraint says (``(v_L - v_R) * cst <= 0``); splits on
  unconstrained features are not checked;
- gives the children of a split on a ``+1`` feature ``[lower, mid]`` (left) and
  ``[mid, upper]`` (right), ``mid = v_L / 2 + v_R / 2`` (the means halved as there: its
  ``sum / (2 W)``); ``-1`` the other way round; an unconstrained split passes the node's
  interval to both children;
- clips every node's value into its interval.

A value is the node's mean target (regression: one output only) or, for binary
classification, the share of the *first* class with the constraint's sign flipped, as
scikit-learn does (its constraint is on the positive class's probability; it tracks the
negative one, and so do we, for the same trees to the last bit). The server has every
candidate's pooled left statistics and the node's, so the rule needs no new message and
holds at every privacy level: ``splitter.best_splits`` refuses the candidates that
:func:`allowed` marks, whichever path (``level.py`` under ``"none"``, ``secure.py`` under
``"secure"`` and ``"dp"``) calls it. Set splits (categorical features, the client index)
are unconstrained: a categorical feature may not be constrained (:func:`check_after_handshake`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_TASK, STAT_WEIGHT
from ...tree.arrays import Tree

__all__ = [
    "LevelBounds",
    "allowed",
    "check_after_handshake",
    "check_values",
    "clip_tree",
    "level_bounds",
    "record_children",
]

#: The interval of a node no constrained split lies above.
_UNBOUNDED = (-np.inf, np.inf)


@dataclass(frozen=True)
class LevelBounds:
    """The constraints and every frontier node's value interval at one level.

    Attributes
    ----------
    cst : ndarray of int8, shape (n_features + 1,)
        Each feature's constraint on the tracked value (classification: signs flipped);
        the last entry, 0, is the client index H's.
    lower, upper : ndarray of float64, shape (n_nodes,)
    """

    cst: NDArray[np.int8]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]


def check_values(raw: Any, split_rule: str) -> None:
    """Before the handshake: scikit-learn's check of the values (its message), and AvgImp."""
    if raw is None:
        return
    cst = np.asarray(raw)
    if cst.ndim != 1:
        raise ValueError(
            f"monotonic_cst must be None or a 1-D array-like of -1, 0 or 1 (one per "
            f"feature), got an array of shape {cst.shape}."
        )
    if not np.all(np.isin(cst, (-1, 0, 1))):
        raise ValueError(
            f"monotonic_cst must be None or an array-like of -1, 0 or 1, but got {np.unique(cst)}"
        )
    if split_rule == "avgimp" and np.any(cst != 0):
        raise ValueError(
            'monotonic_cst is not available with split_rule="avgimp" ("auto" does not pick it '
            "then): AvgImp chooses a split before it knows its children's values, which the "
            'constraints compare. Use split_rule="exact".'
        )


def check_after_handshake(
    raw: Any,
    *,
    n_features: int,
    n_outputs: int,
    class_sizes: tuple[int, ...],
    n_categories: NDArray[np.int64],
) -> NDArray[np.int8] | None:
    """scikit-learn's refusals once the clients' schema is known; the tracked constraints.

    Returns each feature's constraint on the tracked value (classification: on the first
    class's share, so with the signs flipped), with a trailing 0 for the client index H;
    None without constraints.
    """
    if raw is None:
        return None
    cst = np.asarray(raw)
    if n_outputs > 1 or len(class_sizes) > 1:
        raise ValueError("Monotonicity constraints are not supported with multiple outputs.")
    if cst.shape[0] != n_features:
        raise ValueError(
            f"monotonic_cst has shape {cst.shape[0]} but the input data X has {n_features} "
            "features."
        )
    if class_sizes and class_sizes[0] > 2:
        raise ValueError(
            "Monotonicity constraints are not supported with multiclass classification "
            f"(the clients hold {class_sizes[0]} classes; scikit-learn constrains the "
            "positive class's probability of a binary classifier)."
        )
    categorical = np.flatnonzero((n_categories > 0) & (cst != 0))
    if categorical.size:
        raise ValueError(
            f"monotonic_cst constrains feature {int(categorical[0])}, which is categorical: "
            "its categories have no order to be monotone in. Set its constraint to 0."
        )
    out = np.zeros(n_features + 1, dtype=np.int8)
    out[:n_features] = cst.astype(np.int8) * (-1 if class_sizes else 1)
    return out


def _values(stats: NDArray[np.float64]) -> NDArray[np.float64]:
    """The tracked value: mean target, or the first class's share (``sum / W``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(stats[..., STAT_TASK] / stats[..., STAT_WEIGHT])


def allowed(
    parent: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    left: NDArray[np.float64],
    bounds: LevelBounds,
) -> NDArray[np.uint8]:
    """Per candidate, 1 where scikit-learn's monotonicity check lets it be chosen.

    Parameters
    ----------
    parent : ndarray of float64, shape (n_nodes, n_stats)
    pair_off : ndarray of int64, shape (n_nodes + 1,)
    pair_feat : ndarray of int32, shape (n_pairs,)
    cand_off : ndarray of int64, shape (n_pairs + 1,)
    left : ndarray of float64, shape (n_candidates, n_stats)
    bounds : LevelBounds

    Returns
    -------
    ndarray of uint8, shape (n_candidates,)
    """
    pair_node = np.repeat(np.arange(parent.shape[0]), np.diff(pair_off))
    cand_pair = np.repeat(np.arange(pair_feat.size), np.diff(cand_off))
    cst = bounds.cst[pair_feat[cand_pair]].astype(np.float64)
    out = np.ones(cand_pair.size, dtype=np.uint8)
    at = np.flatnonzero(cst != 0)  # unconstrained features: no check (scikit-learn's)
    node = pair_node[cand_pair[at]]
    v_l = _values(left[at])
    v_r = _values(parent[node] - left[at])
    lo, hi = bounds.lower[node], bounds.upper[node]
    with np.errstate(invalid="ignore"):
        ok = (v_l >= lo) & (v_r >= lo) & (v_l <= hi) & (v_r <= hi) & ((v_l - v_r) * cst[at] <= 0)
    out[at] = ok
    return out


def level_bounds(
    builders: list[Any], tree: NDArray[np.int64], node: NDArray[np.int64], cst: NDArray[np.int8]
) -> LevelBounds:
    """The frontier's intervals, from each tree builder's ``bounds`` (node -> interval)."""
    pairs = [builders[t].bounds.get(n, _UNBOUNDED) for t, n in zip(tree, node, strict=True)]
    lower = np.array([p[0] for p in pairs], dtype=np.float64)
    upper = np.array([p[1] for p in pairs], dtype=np.float64)
    return LevelBounds(cst, lower, upper)


def child_bounds(
    feature: NDArray[np.int32],
    left: NDArray[np.float64],
    right: NDArray[np.float64],
    bounds: LevelBounds,
) -> tuple[NDArray[np.float64], ...]:
    """The children's intervals of splits on ``feature`` (one entry per split).

    Returns ``(lower_left, upper_left, lower_right, upper_right)``. The middle value is
    kept inside the node's interval: under ``"dp"`` the children's statistics are made
    consistent after the check, and may have moved.
    """
    cst = bounds.cst[feature]
    with np.errstate(divide="ignore", invalid="ignore"):
        mid = left[:, STAT_TASK] / (2 * left[:, STAT_WEIGHT]) + right[:, STAT_TASK] / (
            2 * right[:, STAT_WEIGHT]
        )
    lo, hi = bounds.lower, bounds.upper
    mid = np.clip(np.nan_to_num(mid, nan=0.0), lo, hi)
    return (
        np.where(cst == -1, mid, lo),
        np.where(cst == 1, mid, hi),
        np.where(cst == 1, mid, lo),
        np.where(cst == -1, mid, hi),
    )


def record_children(
    builders: list[Any],
    trees: NDArray[np.int64],
    children: NDArray[np.int64],
    feature: NDArray[np.int32],
    left: NDArray[np.float64],
    right: NDArray[np.float64],
    bounds: LevelBounds,
) -> None:
    """Store the intervals of the children of this level's splits in their trees' builders.

    ``bounds`` holds the split nodes' intervals (one entry per split, as the other arrays);
    ``children`` is each split's (left, right) node.
    """
    lo_l, hi_l, lo_r, hi_r = child_bounds(feature, left, right, bounds)
    for r, t in enumerate(trees.tolist()):
        b = builders[t].bounds
        b[int(children[r, 0])] = (float(lo_l[r]), float(hi_l[r]))
        b[int(children[r, 1])] = (float(lo_r[r]), float(hi_r[r]))


def splits_only(bounds: LevelBounds, split: NDArray[np.int64]) -> LevelBounds:
    """The intervals of the split nodes among a level's."""
    return replace(bounds, lower=bounds.lower[split], upper=bounds.upper[split])


def clip_tree(tree: Tree, node_bounds: dict[int, tuple[float, float]], task: str) -> Tree:
    """Every node's value clipped into its interval (scikit-learn's ``clip_node_value``).

    Classification: the first class's share is clipped and the second made ``1 -`` it,
    at every node (scikit-learn does so for every node of a constrained tree).
    """
    value = tree.value.copy()
    n = value.shape[0]
    lower, upper = np.full(n, -np.inf), np.full(n, np.inf)
    for node, (lo, hi) in node_bounds.items():
        lower[node], upper[node] = lo, hi
    value[:, 0] = np.minimum(np.maximum(value[:, 0], lower), upper)
    if task == "classification" and value.shape[1] == 2:
        value[:, 1] = 1.0 - value[:, 0]
    return replace(tree, value=value)
