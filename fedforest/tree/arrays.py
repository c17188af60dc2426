"""Flat-array trees and forests, and the kernels that route rows through them.

A tree is a set of parallel arrays indexed by node, node 0 the root, as in scikit-learn's
``sklearn.tree._tree.Tree``: ``feature``, ``threshold``, ``children_left``,
``children_right``, ``value``, ``n_node_samples``, ``weighted_n_node_samples`` and
``impurity``. A numeric split sends a row left when ``x[feature] <= threshold``. Children
always have larger indices than their parent (breadth-first order), which the loader checks.

Set splits (categorical features and the client index H) keep, per node, the codes seen in
training with their side: ``set_size[node]`` codes in ``set_code`` / ``set_side`` (0 left,
1 right), node after node. A code a set split has not seen (an unseen category, an
unknown or missing client) follows the *marginal rule*: the row goes down both branches,
weighted by the children's training weight, and the tree's prediction is the mixture.
The client index is the pseudo-feature ``n_features`` (one past the last column).

The kernels that route rows through them are in :mod:`fedforest.tree.apply`, the safe
file format in :mod:`fedforest.tree.io`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._common import NODE_DTYPE, TREE_LEAF, TREE_UNDEFINED

__all__ = ["Tree", "empty_split_fields", "pack_forest", "pack_sets"]


def _empty_int32() -> NDArray[np.int32]:
    return np.zeros(0, dtype=np.int32)


@dataclass(frozen=True)
class Tree:
    """One fitted tree as flat arrays (scikit-learn's names).

    Attributes
    ----------
    feature : ndarray of int32, shape (n_nodes,)
        Split feature, ``TREE_UNDEFINED`` (-2) at leaves; ``n_features`` for the client H.
    threshold : ndarray of float64, shape (n_nodes,)
        Split threshold (left when ``x <= threshold``), -2.0 at leaves and set splits.
    children_left, children_right : ndarray of int32, shape (n_nodes,)
        Child node indices, ``TREE_LEAF`` (-1) at leaves.
    value : ndarray of float64, shape (n_nodes, n_values)
        Mean target (regression, ``n_values=1``) or class proportions (classification).
    n_node_samples : ndarray of int64, shape (n_nodes,)
        Distinct in-bag rows reaching the node, summed over clients.
    weighted_n_node_samples : ndarray of float64, shape (n_nodes,)
        Bootstrap weight reaching the node, summed over clients.
    impurity : ndarray of float64, shape (n_nodes,)
        Node impurity from the pooled statistics.
    set_size : ndarray of int32, shape (n_nodes,)
        Number of codes of a set split (0 for numeric splits and leaves).
    set_code, set_side : ndarray of int32 / int8, shape (sum(set_size),)
        The codes of every set split, node after node, and their side (0 left, 1 right).
    missing_go_to_left : ndarray of uint8, shape (n_nodes,)
        Where a row whose split value is missing (NaN) goes at a numeric split: 1 left,
        0 right (scikit-learn's field). A split learnt with missing values sends them to the
        side that gained more; one that saw none, to the child with more rows.
    """

    feature: NDArray[np.int32]
    threshold: NDArray[np.float64]
    children_left: NDArray[np.int32]
    children_right: NDArray[np.int32]
    value: NDArray[np.float64]
    n_node_samples: NDArray[np.int64]
    weighted_n_node_samples: NDArray[np.float64]
    impurity: NDArray[np.float64]
    set_size: NDArray[np.int32] = field(default_factory=_empty_int32)
    set_code: NDArray[np.int32] = field(default_factory=_empty_int32)
    set_side: NDArray[np.int8] = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    missing_go_to_left: NDArray[np.uint8] = field(
        default_factory=lambda: np.zeros(0, dtype=np.uint8)
    )

    #: Per-node arrays (one entry per node).
    ARRAYS = (
        "feature",
        "threshold",
        "children_left",
        "children_right",
        "value",
        "n_node_samples",
        "weighted_n_node_samples",
        "impurity",
        "set_size",
        "missing_go_to_left",
    )
    #: Flat arrays of the set splits (``sum(set_size)`` entries).
    SET_ARRAYS = ("set_code", "set_side")

    def __post_init__(self) -> None:
        if self.set_size.shape[0] != self.feature.shape[0]:
            object.__setattr__(self, "set_size", np.zeros(self.feature.shape[0], np.int32))
        if self.missing_go_to_left.shape[0] != self.feature.shape[0]:
            # Trees from before missing values (or built without): the larger child.
            larger = np.zeros(self.feature.shape[0], np.uint8)
            internal = np.flatnonzero(self.children_left != TREE_LEAF)
            rows = np.asarray(self.n_node_samples)
            larger[internal] = (
                rows[self.children_left[internal]] > rows[self.children_right[internal]]
            )
            object.__setattr__(self, "missing_go_to_left", larger)

    @property
    def node_count(self) -> int:
        """Number of nodes."""
        return int(self.feature.shape[0])

    @property
    def max_depth(self) -> int:
        """Depth of the deepest leaf (the root has depth 0)."""
        depth = np.zeros(self.node_count, dtype=np.int64)
        for node in range(self.node_count):
            if self.children_left[node] != TREE_LEAF:
                depth[self.children_left[node]] = depth[node] + 1
                depth[self.children_right[node]] = depth[node] + 1
        return int(depth.max())

    @property
    def n_leaves(self) -> int:
        """Number of leaves."""
        return int(np.count_nonzero(self.children_left == TREE_LEAF))

    def is_leaf(self) -> NDArray[np.bool_]:
        """Boolean mask of the leaves, shape (n_nodes,)."""
        return np.asarray(self.children_left == TREE_LEAF)

    def split_set(self, node: int) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
        """Codes sent left and right by the set split at ``node`` (empty if numeric)."""
        off = np.concatenate([[0], np.cumsum(self.set_size)])
        codes = self.set_code[off[node] : off[node + 1]]
        sides = self.set_side[off[node] : off[node + 1]]
        return codes[sides == 0], codes[sides == 1]

    def as_dict(self) -> dict[str, Any]:
        """The arrays by name."""
        return {name: getattr(self, name) for name in self.ARRAYS + self.SET_ARRAYS}


def empty_split_fields(n_nodes: int) -> tuple[NDArray[np.int32], NDArray[np.float64]]:
    """``feature`` and ``threshold`` arrays initialised to the leaf sentinels."""
    return (
        np.full(n_nodes, TREE_UNDEFINED, dtype=np.int32),
        np.full(n_nodes, float(TREE_UNDEFINED), dtype=np.float64),
    )


def pack_forest(
    trees: list[Tree],
) -> tuple[
    NDArray[np.int32],
    NDArray[np.float64],
    NDArray[np.int32],
    NDArray[np.int32],
    NDArray[np.float64],
    NDArray[np.int64],
]:
    """Concatenate trees into one set of arrays with global child indices.

    Returns
    -------
    feature, threshold, left, right, value, offsets
        ``offsets`` has shape (n_trees + 1,); tree ``t`` owns nodes
        ``offsets[t]:offsets[t + 1]`` and its root is ``offsets[t]``.
    """
    sizes = np.array([t.node_count for t in trees], dtype=np.int64)
    offsets = np.zeros(len(trees) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    feature = np.concatenate([t.feature for t in trees]).astype(np.int32)
    threshold = np.concatenate([t.threshold for t in trees]).astype(np.float64)
    left = np.concatenate(
        [
            np.where(t.children_left == TREE_LEAF, TREE_LEAF, t.children_left + o)
            for t, o in zip(trees, offsets, strict=False)
        ]
    ).astype(NODE_DTYPE)
    right = np.concatenate(
        [
            np.where(t.children_right == TREE_LEAF, TREE_LEAF, t.children_right + o)
            for t, o in zip(trees, offsets, strict=False)
        ]
    ).astype(NODE_DTYPE)
    value = np.concatenate([t.value for t in trees], axis=0)
    return feature, threshold, left, right, value, offsets


def pack_sets(
    trees: list[Tree],
) -> tuple[
    NDArray[np.int64], NDArray[np.int32], NDArray[np.int8], NDArray[np.float64], NDArray[np.uint8]
]:
    """Set splits, node weights and missing-value sides of the packed forest (global order).

    Returns
    -------
    set_off : ndarray of int64, shape (n_nodes + 1,)
        Node ``i`` owns ``set_code[set_off[i]:set_off[i + 1]]`` (empty: numeric split).
    set_code : ndarray of int32
    set_side : ndarray of int8
    weight : ndarray of float64, shape (n_nodes,)
        ``weighted_n_node_samples``, for the marginal rule.
    missing_left : ndarray of uint8, shape (n_nodes,)
        ``missing_go_to_left``.
    """
    sizes = np.concatenate([t.set_size for t in trees]).astype(np.int64)
    set_off = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=set_off[1:])
    code = np.concatenate([t.set_code for t in trees]).astype(np.int32)
    side = np.concatenate([t.set_side for t in trees]).astype(np.int8)
    weight = np.concatenate([t.weighted_n_node_samples for t in trees]).astype(np.float64)
    missing_left = np.concatenate([t.missing_go_to_left for t in trees]).astype(np.uint8)
    return set_off, code, side, weight, missing_left
