"""The grower's tree builder (a tree's arrays as they grow) and its frontier of open nodes.

Moved out of ``grower.py`` (the 800-line cap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT, TREE_LEAF
from ...tree.arrays import Tree, empty_split_fields
from ..criteria import impurity, leaf_value
from .config import GrowerConfig
from .splitter import EPSILON


class _TreeBuilder:
    """Nodes of one tree as growing lists, in breadth-first order."""

    def __init__(self) -> None:
        self.feature: list[int] = []
        self.threshold: list[float] = []
        self.left: list[int] = []
        self.right: list[int] = []
        self.missing_left: list[int] = []
        self.stats: list[NDArray[np.float64]] = []
        #: class_weight's per-class weights for this tree (None: unweighted).
        self.class_w: NDArray[np.float64] | None = None
        self.sets: dict[int, tuple[NDArray[np.int32], NDArray[np.int8]]] = {}
        #: monotonic_cst: each node's value interval, where it is not (-inf, inf).
        self.bounds: dict[int, tuple[float, float]] = {}

    def add(self, stats: NDArray[np.float64] | None) -> int:
        self.feature.append(-2)
        self.threshold.append(-2.0)
        self.left.append(TREE_LEAF)
        self.right.append(TREE_LEAF)
        self.missing_left.append(0)
        self.stats.append(np.zeros(0) if stats is None else stats)
        return len(self.feature) - 1

    def add_children(self, left: NDArray[np.float64], right: NDArray[np.float64]) -> int:
        """The children of ``m`` splits (their statistics: rows of ``left``, ``right``).

        Appended as :meth:`add` would one by one: each split's left, then its right child.
        Returns the index of the first.
        """
        base, m = len(self.feature), left.shape[0]
        self.feature += [-2] * (2 * m)
        self.threshold += [-2.0] * (2 * m)
        self.left += [TREE_LEAF] * (2 * m)
        self.right += [TREE_LEAF] * (2 * m)
        self.missing_left += [0] * (2 * m)
        pairs: list[NDArray[np.float64]] = [None, None] * m  # type: ignore[list-item]
        pairs[0::2], pairs[1::2] = list(left), list(right)
        self.stats += pairs
        return base

    def finish(self, task: str, criterion: str, class_sizes: tuple[int, ...] = ()) -> Tree:
        stats = np.array(self.stats, dtype=np.float64)  # rows of equal length (vstack: 3x slower)
        feature, threshold = empty_split_fields(len(self.feature))
        internal = np.asarray(self.left) != TREE_LEAF
        feature[internal] = np.asarray(self.feature)[internal]
        threshold[internal] = np.asarray(self.threshold)[internal]
        return Tree(
            feature=feature,
            threshold=threshold,
            children_left=np.asarray(self.left, dtype=np.int32),
            children_right=np.asarray(self.right, dtype=np.int32),
            value=leaf_value(stats, task, class_sizes or None),
            n_node_samples=stats[:, STAT_ROWS].round().astype(np.int64),
            weighted_n_node_samples=stats[:, STAT_WEIGHT].copy(),
            impurity=impurity(stats, criterion, max(len(class_sizes), 1)),
            missing_go_to_left=np.asarray(self.missing_left, dtype=np.uint8),
            **self._set_arrays(),
        )

    def _set_arrays(self) -> dict[str, NDArray[Any]]:
        size = np.zeros(len(self.feature), dtype=np.int32)
        codes, sides = [np.zeros(0, np.int32)], [np.zeros(0, np.int8)]
        for node in sorted(self.sets):
            size[node] = self.sets[node][0].size
            codes.append(self.sets[node][0])
            sides.append(self.sets[node][1])
        return {
            "set_size": size,
            "set_code": np.concatenate(codes),
            "set_side": np.concatenate(sides),
        }


def _is_leaf_by_rule(
    stats: NDArray[np.float64], depth: int, cfg: GrowerConfig
) -> NDArray[np.bool_]:
    """scikit-learn's node-level stopping rules, vectorised over nodes."""
    rows = stats[:, STAT_ROWS]
    too_deep = cfg.max_depth is not None and depth >= cfg.max_depth
    return np.asarray(
        too_deep
        | (rows < cfg.min_samples_split)
        | (rows < 2 * cfg.min_samples_leaf)
        | (impurity(stats, cfg.criterion, cfg.class_outputs) <= EPSILON)
    )


@dataclass
class _Frontier:
    """Nodes to split at the current level, ordered by tree (one slot each)."""

    tree: NDArray[np.int64]
    node: NDArray[np.int64]
    depth: int

    def tree_offsets(self, n_trees: int) -> NDArray[np.int64]:
        off = np.zeros(n_trees + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.tree, minlength=n_trees), out=off[1:])
        return off
