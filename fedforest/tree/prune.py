"""Minimal cost-complexity pruning of fitted trees (scikit-learn's ``ccp_alpha``).

Pruning reads only what a fitted tree holds (each node's ``impurity`` and
``weighted_n_node_samples``), so the server prunes a federated tree without another
message: nothing about any client's rows is asked or released for it. The algorithm is
scikit-learn's (``sklearn/tree/_tree.pyx``, ``_cost_complexity_prune``, after Breiman et
al. 1984, Ch. 3): the weighted impurity of a node ``R(t) = w_t / w_root * impurity_t``,
of a branch the sum over its leaves ``R(T_t)``, and while the weakest link

    alpha_eff(t) = (R(t) - R(T_t)) / (|leaves(T_t)| - 1)

is at most ``ccp_alpha``, the branch with the smallest ``alpha_eff`` (the first node in
index order among equals) becomes a leaf. A pruned node keeps its value and statistics;
the nodes below it are removed and the rest keep their order (children after parents).
"""

from __future__ import annotations

from dataclasses import replace

import numba
import numpy as np
from numpy.typing import NDArray

from .._common import TREE_LEAF, TREE_UNDEFINED
from .._numba_cache import serialize_cache_writes
from .arrays import Tree

__all__ = ["ccp_prune", "node_importances", "prune_forest", "prune_tree"]

serialize_cache_writes()  # before any kernel compiles: _numba_cache.py


@numba.njit(nogil=True, cache=True)
def ccp_prune(children_left, children_right, r_node, ccp_alpha, in_subtree):  # type: ignore[no-untyped-def]
    """Which nodes stay in the tree pruned at ``ccp_alpha`` (scikit-learn's weakest links).

    Parameters
    ----------
    children_left, children_right : ndarray of int32, shape (n_nodes,)  # IN
        Children of every node, ``TREE_LEAF`` (-1) at leaves; children after parents.
    r_node : ndarray of float64, shape (n_nodes,)  # IN
        ``w_t / w_root * impurity_t`` of every node.
    ccp_alpha : float  # IN
    in_subtree : ndarray of bool, shape (n_nodes,)  # OUT
        True for the nodes of the pruned tree (its leaves included).
    """
    n = r_node.shape[0]
    parent = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        if children_left[i] != -1:
            parent[children_left[i]] = i
            parent[children_right[i]] = i
    leaf = children_left == -1
    r_branch = np.zeros(n)
    n_leaves = np.zeros(n, dtype=np.int64)
    for i in range(n):
        if not leaf[i]:
            continue
        r_branch[i] = r_node[i]
        j = i
        while j != 0:
            j = parent[j]
            r_branch[j] += r_node[i]
            n_leaves[j] += 1
    candidate = ~leaf
    for i in range(n):
        in_subtree[i] = True
    stack = np.empty(n, dtype=np.int64)
    while candidate[0]:
        best, best_alpha = -1, np.inf
        for i in range(n):
            if candidate[i]:
                alpha = (r_node[i] - r_branch[i]) / (n_leaves[i] - 1)
                if alpha < best_alpha:
                    best, best_alpha = i, alpha
        if ccp_alpha < best_alpha or best < 0:
            break
        # The branch below ``best`` leaves the tree; ``best`` becomes a leaf.
        top = 0
        stack[0] = best
        top = 1
        while top:
            top -= 1
            j = stack[top]
            candidate[j] = False
            in_subtree[j] = j == best
            if children_left[j] != -1:
                stack[top] = children_left[j]
                stack[top + 1] = children_right[j]
                top += 2
        removed = n_leaves[best] - 1
        n_leaves[best] = 0
        diff = r_node[best] - r_branch[best]
        r_branch[best] = r_node[best]
        j = parent[best]
        while j != -1:
            n_leaves[j] -= removed
            r_branch[j] += diff
            j = parent[j]


def prune_tree(tree: Tree, ccp_alpha: float) -> Tree:
    """``tree`` pruned at ``ccp_alpha`` (the same object when nothing is pruned)."""
    if ccp_alpha <= 0.0 or tree.children_left.size <= 1:
        return tree
    w = tree.weighted_n_node_samples
    r_node = w / w[0] * tree.impurity if w[0] > 0 else np.zeros_like(w)
    keep = np.empty(r_node.size, dtype=np.bool_)
    # A float: numba has no float16 and no long double (a NumPy scalar of either failed
    # inside the kernel, where scikit-learn takes it).
    alpha = float(ccp_alpha)
    ccp_prune(tree.children_left, tree.children_right, np.ascontiguousarray(r_node), alpha, keep)
    internal = tree.children_left != TREE_LEAF
    kept_internal = keep.copy()
    kept_internal[keep] = internal[keep] & keep[np.maximum(tree.children_left[keep], 0)]
    if kept_internal.sum() == internal.sum():
        return tree
    new_index = np.cumsum(keep) - 1
    cut = keep & internal & ~kept_internal  # nodes that become leaves

    def renumber(children: NDArray[np.int32]) -> NDArray[np.int32]:
        out = np.where(kept_internal, new_index[np.maximum(children, 0)], TREE_LEAF)
        return np.asarray(out[keep], dtype=np.int32)

    feature, threshold = tree.feature.copy(), tree.threshold.copy()
    feature[cut], threshold[cut] = TREE_UNDEFINED, float(TREE_UNDEFINED)
    set_size = tree.set_size.copy() if tree.set_size.size else np.zeros(0, np.int32)
    set_code, set_side = tree.set_code, tree.set_side
    if set_size.size:
        node_of_code = np.repeat(np.arange(set_size.size), set_size)
        stay = kept_internal[node_of_code]
        set_code, set_side = set_code[stay], set_side[stay]
        set_size[~kept_internal] = 0
        set_size = set_size[keep]
    missing = tree.missing_go_to_left
    if missing.size:
        missing = np.where(kept_internal, missing, 0).astype(np.uint8)[keep]
    return replace(
        tree,
        feature=feature[keep],
        threshold=threshold[keep],
        children_left=renumber(tree.children_left),
        children_right=renumber(tree.children_right),
        value=tree.value[keep],
        n_node_samples=tree.n_node_samples[keep],
        weighted_n_node_samples=w[keep],
        impurity=tree.impurity[keep],
        set_size=set_size,
        set_code=set_code,
        set_side=set_side,
        missing_go_to_left=missing,
    )


def node_importances(tree: Tree, n_columns: int) -> NDArray[np.float64]:
    """A tree's weighted impurity decrease per split feature (scikit-learn's, unnormalised).

    ``sum over the splits on f of w_t imp_t - w_l imp_l - w_r imp_r``; ``n_columns`` counts
    the client index H (feature ``n_features``) where the forest splits on it.
    """
    out = np.zeros(n_columns)
    node = np.flatnonzero(tree.children_left != TREE_LEAF)
    left, right = tree.children_left[node], tree.children_right[node]
    w, imp = tree.weighted_n_node_samples, tree.impurity
    gain = w[node] * imp[node] - w[left] * imp[left] - w[right] * imp[right]
    np.add.at(out, tree.feature[node], gain)
    return out


def prune_forest(
    trees: list[Tree], ccp_alpha: float, importances: NDArray[np.float64]
) -> list[Tree]:
    """Every tree pruned at ``ccp_alpha``.

    A pruned tree's row of ``importances`` (per tree, per column) is recomputed from what
    is left of it, in place.
    """
    out = []
    for t, tree in enumerate(trees):
        pruned = prune_tree(tree, ccp_alpha)
        if pruned is not tree:
            importances[t] = node_importances(pruned, importances.shape[1])
        out.append(pruned)
    return out
