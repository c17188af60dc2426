"""A forest with set splits as the attributes of ONNX's ``TreeEnsemble`` (ai.onnx.ml 5).

ai.onnx.ml 5's ``TreeEnsemble`` has set tests (``BRANCH_MEMBER``: true when the value is in
a list), so categorical features and the client index H export to ONNX as to Treelite:
the model reads the columns of ``export_matrix`` (codes; the client's position last), and
a code a set split has not seen (an unseen category or client, -1, NaN) goes to the heavier
child, as ``apply`` sends it (fedforest's ``predict`` mixes both children there).

Arrays in, arrays out: the caller makes ONNX tensors of the float arrays. Each leaf of the
operator feeds one target, so a tree whose leaves hold several values (class proportions,
outputs) is written once per target; the leaves are divided by the number of trees and
summed (``aggregate_function`` SUM), which is the forest's mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._common import TREE_LEAF
from .arrays import Tree

__all__ = ["BRANCH_LEQ", "BRANCH_MEMBER", "tree_ensemble_attributes"]

#: ``nodes_modes`` of ai.onnx.ml 5's TreeEnsemble: x <= split, and x in a set.
BRANCH_LEQ, BRANCH_MEMBER = 0, 6
#: ``aggregate_function`` SUM and ``post_transform`` NONE.
_SUM, _NONE = 1, 0


def tree_ensemble_attributes(
    trees: list[Tree], missing_left: list[NDArray[np.bool_]], splits: list[NDArray[np.float64]]
) -> dict[str, Any]:
    """The TreeEnsemble attributes of ``trees``, every target a copy of each tree.

    Parameters
    ----------
    trees : list of Tree
    missing_left : list of ndarray of bool, shape (n_nodes,)
        Per tree, where NaN goes at each numeric split.
    splits : list of ndarray of float64, shape (n_nodes,)
        Per tree, the threshold written at each numeric split (the tree's own, or rounded
        down to float32 for float32 input).

    Returns
    -------
    dict
        Integer attributes as lists; ``nodes_modes`` uint8, ``nodes_splits``,
        ``membership_values`` and ``leaf_weights`` float64 arrays (tensors for ONNX).
    """
    n_targets = int(trees[0].value.shape[1])
    out: dict[str, list[Any]] = {
        k: []
        for k in (
            "tree_roots", "nodes_featureids", "nodes_modes", "nodes_splits", "nodes_truenodeids",
            "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs",
            "nodes_missing_value_tracks_true", "membership_values", "leaf_targetids",
            "leaf_weights",
        )
    }  # fmt: skip
    scale = 1.0 / len(trees)
    for target in range(n_targets):
        for tree, nan_left, split in zip(trees, missing_left, splits, strict=True):
            _add_tree(out, tree, nan_left, split, target, scale)
    attrs: dict[str, Any] = dict(out)
    attrs["nodes_modes"] = np.array(out["nodes_modes"], dtype=np.uint8)
    for name in ("nodes_splits", "membership_values", "leaf_weights"):
        attrs[name] = np.array(out[name], dtype=np.float64)
    attrs.update(n_targets=n_targets, aggregate_function=_SUM, post_transform=_NONE)
    return attrs


def _add_tree(
    out: dict[str, list[Any]],
    tree: Tree,
    nan_left: NDArray[np.bool_],
    split: NDArray[np.float64],
    target: int,
    scale: float,
) -> None:
    """One tree's internal nodes and leaves (for ``target``) appended to ``out``."""
    leaf = tree.children_left == TREE_LEAF
    # Positions in the operator's node and leaf arrays of this tree's nodes.
    node_id = np.cumsum(~leaf) - 1 + len(out["nodes_featureids"])
    leaf_id = np.cumsum(leaf) - 1 + len(out["leaf_weights"])
    if leaf[0]:  # a tree of one leaf: a test whose both branches reach it
        out["tree_roots"].append(len(out["nodes_featureids"]))
        _node(out, 0, BRANCH_LEQ, 0.0, (int(leaf_id[0]), 1), (int(leaf_id[0]), 1), 0)
    else:
        out["tree_roots"].append(int(node_id[0]))
    w = tree.weighted_n_node_samples
    for node in range(tree.node_count):
        if leaf[node]:
            out["leaf_targetids"].append(target)
            out["leaf_weights"].append(float(tree.value[node, target]) * scale)
            continue
        left, right = int(tree.children_left[node]), int(tree.children_right[node])
        true, false = left, right
        if tree.set_size[node] > 0:
            # The lighter side's codes are the set: every other code (the heavier side's,
            # unseen ones, -1, NaN) fails the test and goes to the heavier child.
            codes_left, codes_right = tree.split_set(node)
            heavy_left = bool(w[left] >= w[right])
            listed = codes_right if heavy_left else codes_left
            if heavy_left:
                true, false = right, left
            out["membership_values"] += [*sorted(float(c) for c in listed), np.nan]
            mode, value, nan_true = BRANCH_MEMBER, np.nan, 0
        else:
            mode, value, nan_true = BRANCH_LEQ, float(split[node]), int(nan_left[node])
        _node(
            out,
            int(tree.feature[node]),
            mode,
            value,
            (int(leaf_id[true] if leaf[true] else node_id[true]), int(leaf[true])),
            (int(leaf_id[false] if leaf[false] else node_id[false]), int(leaf[false])),
            nan_true,
        )


def _node(
    out: dict[str, list[Any]],
    feature: int,
    mode: int,
    split: float,
    true: tuple[int, int],
    false: tuple[int, int],
    nan_true: int,
) -> None:
    """One internal node: its test, and each branch as (index, whether a leaf)."""
    out["nodes_featureids"].append(feature)
    out["nodes_modes"].append(mode)
    out["nodes_splits"].append(split)
    out["nodes_truenodeids"].append(true[0])
    out["nodes_trueleafs"].append(true[1])
    out["nodes_falsenodeids"].append(false[0])
    out["nodes_falseleafs"].append(false[1])
    out["nodes_missing_value_tracks_true"].append(nan_true)
