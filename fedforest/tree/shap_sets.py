"""Path-dependent TreeSHAP of a forest with set splits (categories, the client index).

shap's ``TreeExplainer`` takes numeric thresholds only. Path-dependent TreeSHAP (Lundberg
et al., 2020, "From local explanations to global understanding with explainable AI for
trees", Algorithm 2) needs of a split only which child a row takes and the children's
weights, so a set split is as easy as a threshold. A code a set split has not seen (an
unseen category, an unknown client) takes the marginal rule in ``predict``: both children,
weighted; here such a node weighs the row's leaves the same way whatever the coalition,
so its feature gets nothing from it and the values still add up to ``predict``.

For each leaf and row, with ``U`` the features on the leaf's path, ``z_k`` the product of
the weight fractions of the path's splits on feature ``k`` and ``o_k`` 1 if the row takes
the path at all of them (else 0), the leaf's weight under a coalition ``S`` is
``B * prod_{k in S} o_k * prod_{k not in S} z_k`` (``B``: the fractions of the nodes where
the row takes the marginal rule), and feature ``i`` gets
``v * B * (o_i - z_i) * sum_s e_s * s! (|U| - 1 - s)! / |U|!``, with ``e_s`` the
coefficients of ``prod_{k != i} (z_k + o_k t)``.
"""

from __future__ import annotations

from math import factorial

import numpy as np
from numpy.typing import NDArray

from .._common import TREE_LEAF
from .arrays import Tree
from .export import consistent_nodes

__all__ = ["shap_base_value", "shap_values_sets"]


def shap_values_sets(trees: list[Tree], n_columns: int, rows: NDArray[np.float64]) -> NDArray:
    """SHAP values of ``rows`` for the forest's mean prediction, set splits included.

    Parameters
    ----------
    trees : list of Tree
    n_columns : int
        Columns of ``rows`` (the model's features, and the client index last if the
        forest splits on it).
    rows : ndarray of float64, shape (n_samples, n_columns)
        As ``export_matrix`` gives them: categories as codes (-1: unseen), the client's
        position last (-1: unknown).

    Returns
    -------
    values : ndarray of float64, shape (n_samples, n_columns, n_values)
        ``values.sum(axis=1) + base`` is the forest's mean of the leaves' values (``base``:
        the mean of the trees' root values, node weights summed from the leaves up).
    """
    n = rows.shape[0]
    phi = np.zeros((n, n_columns, trees[0].value.shape[1]))
    for tree in trees:
        _add_tree(tree, rows, phi)
    return phi / len(trees)


def shap_base_value(trees: list[Tree]) -> NDArray[np.float64]:
    """The expected value of :func:`shap_values_sets`: the mean root value, shape (n_values,)."""
    return np.mean([consistent_nodes(tree)[1][0] for tree in trees], axis=0)


def _directions(tree: Tree, node: int, x: NDArray[np.float64]) -> NDArray[np.int8]:
    """Per row, the child taken at ``node``: 0 left, 1 right, -1 both (the marginal rule)."""
    left, right = tree.split_set(node)
    if left.size + right.size == 0:  # numeric: missing (NaN, +inf) to its recorded side
        go = np.where(x <= tree.threshold[node], 0, 1).astype(np.int8)
        go[np.isnan(x) | (x == np.inf)] = 0 if tree.missing_go_to_left[node] else 1
        return go
    go = np.full(x.shape[0], -1, dtype=np.int8)
    go[np.isin(x, left)] = 0
    go[np.isin(x, right)] = 1
    return go


def _add_tree(tree: Tree, rows: NDArray[np.float64], phi: NDArray[np.float64]) -> None:
    """Add one tree's SHAP values of ``rows`` to ``phi`` (IN/OUT), path by path."""
    weight, value = consistent_nodes(tree)
    n = rows.shape[0]
    # A path's state per row: B, and per feature on it z_k and o_k.
    stack: list[tuple[int, NDArray, dict[int, tuple[NDArray, NDArray]]]] = [(0, np.ones(n), {})]
    while stack:
        node, mass, factors = stack.pop()
        if tree.children_left[node] == TREE_LEAF:
            _add_leaf(value[node], mass, factors, phi)
            continue
        k = int(tree.feature[node])
        go = _directions(tree, node, rows[:, k])
        both = go == -1
        for side, child in enumerate((tree.children_left[node], tree.children_right[node])):
            share = weight[child] / weight[node] if weight[node] > 0 else 0.5
            z, o = factors.get(k, (np.ones(n), np.ones(n)))
            taken = factors | {
                k: (np.where(both, z, z * share), np.where(both, o, o * (go == side)))
            }
            stack.append((int(child), np.where(both, mass * share, mass), taken))


def _add_leaf(
    leaf: NDArray[np.float64],
    mass: NDArray[np.float64],
    factors: dict[int, tuple[NDArray, NDArray]],
    phi: NDArray[np.float64],
) -> None:
    """Add one leaf's share to ``phi`` (IN/OUT) for every feature on its path."""
    features = list(factors)
    u = len(features)
    weights = np.array([factorial(s) * factorial(u - 1 - s) / factorial(u) for s in range(u)])
    for i in features:
        coeffs = np.zeros((mass.shape[0], u))
        coeffs[:, 0] = 1.0
        for k in features:
            if k == i:
                continue
            z, o = factors[k]
            coeffs[:, 1:] = coeffs[:, 1:] * z[:, None] + coeffs[:, :-1] * o[:, None]
            coeffs[:, 0] *= z
        z, o = factors[i]
        share = mass * (o - z) * (coeffs @ weights)
        phi[:, i, :] += share[:, None] * leaf[None, :]
