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

#: Nodes a tree's arrays hold at first (then doubled as the tree grows), unless its depth
#: bounds it lower (:func:`first_room`); at most :data:`MOST_FIRST_ROOM` when it does not.
FIRST_ROOM = 64
MOST_FIRST_ROOM = 1023


def first_room(max_depth: int | None) -> int:
    """Room a builder starts with: every node a tree of ``max_depth`` can hold, if few.

    A depth-8 tree (511 nodes) grew its arrays three times from :data:`FIRST_ROOM`: 21
    arrays made and copied per tree (2.6 ms of a 2,000-row fit's 50 trees).
    """
    if max_depth is None:
        return FIRST_ROOM
    return max(FIRST_ROOM, min(2 ** (min(max_depth, 30) + 1) - 1, MOST_FIRST_ROOM))


class _TreeBuilder:
    """Nodes of one tree as growing arrays, in breadth-first order.

    The arrays hold room for more nodes (grown by doubling); the first :attr:`n` rows are
    the tree's. A node's statistics are known once set (:meth:`set_stats`): a root
    before its first level, or a child after a client was dropped, has none yet.
    """

    def __init__(self, room: int = FIRST_ROOM) -> None:
        self.n = 0
        self._first_room = room  # the first growth's room (``first_room``)
        self.feature = np.empty(0, dtype=np.int64)
        self.threshold = np.empty(0)
        self.left = np.empty(0, dtype=np.int64)
        self.right = np.empty(0, dtype=np.int64)
        self.missing_left = np.empty(0, dtype=np.uint8)
        self.known = np.empty(0, dtype=bool)
        self._stats: NDArray[np.float64] | None = None  # (room, n_stats)
        #: class_weight's per-class weights for this tree (None: unweighted).
        self.class_w: NDArray[np.float64] | None = None
        self.sets: dict[int, tuple[NDArray[np.int32], NDArray[np.int8]]] = {}
        #: monotonic_cst: each node's value interval, where it is not (-inf, inf).
        self.bounds: dict[int, tuple[float, float]] = {}

    @property
    def stats(self) -> NDArray[np.float64]:
        """Every node's statistics, shape (n, n_stats) (zeros where not known)."""
        if self._stats is None:
            return np.zeros((self.n, 0))
        return self._stats[: self.n]

    def _room(self, k: int) -> None:
        """Room for ``k`` more nodes (new rows: a leaf, no statistics)."""
        need = self.n + k
        if need <= self.feature.size:
            return
        room = max(need, 2 * self.feature.size, self._first_room)

        def grown(a: NDArray[Any], fill: float) -> NDArray[Any]:
            out = np.full((room, *a.shape[1:]), fill, dtype=a.dtype)
            out[: self.n] = a[: self.n]
            return out

        self.feature, self.threshold = grown(self.feature, -2), grown(self.threshold, -2.0)
        self.left, self.right = grown(self.left, TREE_LEAF), grown(self.right, TREE_LEAF)
        self.missing_left, self.known = grown(self.missing_left, 0), grown(self.known, False)
        if self._stats is not None:
            self._stats = grown(self._stats, 0.0)

    def add(self, stats: NDArray[np.float64] | None) -> int:
        self._room(1)
        node = self.n
        self.n += 1
        if stats is not None:
            self.set_stats(np.array([node]), stats[None, :])
        return node

    def add_children(self, left: NDArray[np.float64], right: NDArray[np.float64]) -> int:
        """The children of ``m`` splits (their statistics: rows of ``left``, ``right``).

        Appended as :meth:`add` would one by one: each split's left, then its right child.
        Returns the index of the first.
        """
        m = left.shape[0]
        self._room(2 * m)
        base = self.n
        self.n += 2 * m
        rows = np.empty((2 * m, left.shape[1]))
        rows[0::2], rows[1::2] = left, right
        self.set_stats(np.arange(base, base + 2 * m), rows)
        return base

    def set_stats(self, nodes: NDArray[np.int64], rows: NDArray[np.float64]) -> None:
        """The statistics of ``nodes`` (known from now on)."""
        if self._stats is None:
            self._stats = np.zeros((self.feature.size, rows.shape[1]))
        self._stats[nodes] = rows
        self.known[nodes] = True

    def set_splits(
        self,
        nodes: NDArray[np.int64],
        feature: NDArray[np.int32],
        threshold: NDArray[np.float64],
        missing_left: NDArray[np.uint8],
        children: NDArray[np.int64],
    ) -> None:
        """``nodes`` split on ``feature`` at ``threshold``; ``children``: (left, right) rows."""
        self.feature[nodes], self.threshold[nodes] = feature, threshold
        self.missing_left[nodes] = missing_left
        self.left[nodes], self.right[nodes] = children[:, 0], children[:, 1]

    def finish(self, task: str, criterion: str, class_sizes: tuple[int, ...] = ()) -> Tree:
        n = self.n
        stats = self.stats
        feature, threshold = empty_split_fields(n)
        internal = self.left[:n] != TREE_LEAF
        feature[internal] = self.feature[:n][internal]
        threshold[internal] = self.threshold[:n][internal]
        return Tree(
            feature=feature,
            threshold=threshold,
            children_left=self.left[:n].astype(np.int32),
            children_right=self.right[:n].astype(np.int32),
            value=leaf_value(stats, task, class_sizes or None),
            n_node_samples=stats[:, STAT_ROWS].round().astype(np.int64),
            weighted_n_node_samples=stats[:, STAT_WEIGHT].copy(),
            impurity=impurity(stats, criterion, max(len(class_sizes), 1)),
            missing_go_to_left=self.missing_left[:n].copy(),
            **self._set_arrays(),
        )

    def _set_arrays(self) -> dict[str, NDArray[Any]]:
        size = np.zeros(self.n, dtype=np.int32)
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


def frontier_stats(
    builders: list[_TreeBuilder], tree: NDArray[np.int64], node: NDArray[np.int64], columns: int
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """The first ``columns`` statistics of each frontier node, and whether they are known.

    ``tree`` runs tree by tree (a frontier's order): one gather per tree.
    """
    out = np.zeros((tree.size, columns))
    known = np.zeros(tree.size, dtype=bool)
    cuts = (np.flatnonzero(np.diff(tree)) + 1).tolist()
    for a, z in zip([0, *cuts], [*cuts, tree.size], strict=True):
        if a == z:
            continue
        b = builders[int(tree[a])]
        known[a:z] = b.known[node[a:z]]
        if b.stats.shape[1]:
            out[a:z] = b.stats[node[a:z], :columns]
    return out, known


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
