"""Kernels that route rows through a packed forest (numeric and set splits), with twins.

A numeric split sends a row left when ``x[feature] <= threshold``, and a missing value
(NaN, or +inf as the clients hold it) to the side ``missing_left`` gives. A code a set split
has not seen (an unseen category, an unknown or missing client) follows the *marginal
rule*: the row goes down both branches, weighted by the children's training weight.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from .._common import TREE_LEAF
from .._numba_cache import serialize_cache_writes

__all__ = [
    "apply_forest",
    "apply_forest_numpy",
    "apply_forest_sets",
    "predict_forest",
    "predict_forest_numpy",
]

serialize_cache_writes()  # before any kernel compiles: _numba_cache.py

#: Rows :func:`predict_forest` passes through each tree in turn (about 170 KB of them).
PREDICT_BLOCK = 1024


@numba.njit(inline="always")
def _set_side(x, lo, hi, set_code, set_side):
    # Side of code ``x`` in a set split: 0 left, 1 right, -1 not seen in training.
    if x != x or x < 0:
        return -1
    code = int(x)
    for k in range(lo, hi):
        if set_code[k] == code:
            return set_side[k]
    return -1


@numba.njit(inline="always")
def _numeric_child(x, threshold, missing_left, left, right):
    # A numeric split at the node's threshold to its children ``left``, ``right``: left
    # when x <= threshold; a missing value (NaN or +inf) by the flag. Scalars only: an
    # array given to a helper, even one inlined, costs a reference taken and dropped (two
    # atomic operations) at every node a row passes.
    if x != x or x == np.inf:
        return left if missing_left else right
    return left if x <= threshold else right


@numba.njit(nogil=True, cache=True)
def apply_forest(X, feature, threshold, left, right, offsets, out):
    """Leaf reached by every row in every tree (global node index), numeric splits only.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)  # IN
    feature, threshold, left, right : flat forest arrays from :func:`pack_forest`  # IN
    offsets : ndarray of int64, shape (n_trees + 1,)  # IN
    out : ndarray of int32, shape (n_samples, n_trees)  # OUT
    """
    n_trees = offsets.shape[0] - 1
    for i in range(X.shape[0]):
        for t in range(n_trees):
            node = offsets[t]
            while left[node] != -1:
                if X[i, feature[node]] <= threshold[node]:
                    node = left[node]
                else:
                    node = right[node]
            out[i, t] = node


def apply_forest_numpy(
    X: NDArray[np.float64],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    left: NDArray[np.int32],
    right: NDArray[np.int32],
    offsets: NDArray[np.int64],
    out: NDArray[np.int32],
) -> None:
    """NumPy twin of :func:`apply_forest` (same arguments, same result)."""
    n_trees = offsets.shape[0] - 1
    rows = np.arange(X.shape[0])
    for t in range(n_trees):
        node = np.full(X.shape[0], offsets[t], dtype=np.int64)
        active = left[node] != TREE_LEAF
        while active.any():
            idx = rows[active]
            cur = node[idx]
            go_left = X[idx, feature[cur]] <= threshold[cur]
            node[idx] = np.where(go_left, left[cur], right[cur])
            active = left[node] != TREE_LEAF
        out[:, t] = node


@numba.njit(nogil=True, cache=True)
def predict_forest(
    X,
    feature,
    threshold,
    left,
    right,
    set_off,
    set_code,
    set_side,
    weight,
    missing_left,
    value,
    offsets,
    out,
):
    """Sum over trees of each row's prediction, with the marginal rule at unseen codes.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_columns)  # IN: features, then the client
        code (-1 unknown) when the forest splits on H; set features hold codes
    feature, threshold, left, right, value, offsets : from :func:`pack_forest`  # IN
    set_off, set_code, set_side, weight, missing_left : from :func:`pack_sets`  # IN
    out : ndarray of float64, shape (n_samples, n_values)  # OUT: accumulated into
    """
    n_trees = offsets.shape[0] - 1
    # Tree after tree over a block of rows: a tree's nodes and the block's rows stay in
    # cache while every row of the block passes (each row's sum still adds the trees in
    # order: the same numbers).
    if set_off[set_off.shape[0] - 1] == set_off[0]:  # numeric splits only: one path a row
        for i0 in range(0, X.shape[0], PREDICT_BLOCK):
            for t in range(n_trees):
                for i in range(i0, min(i0 + PREDICT_BLOCK, X.shape[0])):
                    node = offsets[t]
                    while left[node] != -1:
                        node = _numeric_child(
                            X[i, feature[node]], threshold[node], missing_left[node],
                            left[node], right[node],
                        )  # fmt: skip
                    for v in range(value.shape[1]):
                        out[i, v] += 1.0 * value[node, v]
        return
    stack = np.empty(left.shape[0] + 1, dtype=np.int64)
    mass = np.empty(left.shape[0] + 1)
    for i0 in range(0, X.shape[0], PREDICT_BLOCK):
        for t in range(n_trees):
            for i in range(i0, min(i0 + PREDICT_BLOCK, X.shape[0])):
                top = 0
                stack[0] = offsets[t]
                mass[0] = 1.0
                while top >= 0:
                    node, m = stack[top], mass[top]
                    top -= 1
                    while left[node] != -1:
                        lo, hi = set_off[node], set_off[node + 1]
                        if hi == lo:
                            node = _numeric_child(
                                X[i, feature[node]], threshold[node], missing_left[node],
                                left[node], right[node],
                            )  # fmt: skip
                            continue
                        side = _set_side(X[i, feature[node]], lo, hi, set_code, set_side)
                        if side == 0:
                            node = left[node]
                        elif side == 1:
                            node = right[node]
                        else:
                            wl, wr = weight[left[node]], weight[right[node]]
                            top += 1
                            stack[top] = right[node]
                            mass[top] = m * wr / (wl + wr)
                            m = m * wl / (wl + wr)
                            node = left[node]
                    for v in range(value.shape[1]):
                        out[i, v] += m * value[node, v]


def predict_forest_numpy(
    X: NDArray[np.float64],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    left: NDArray[np.int32],
    right: NDArray[np.int32],
    set_off: NDArray[np.int64],
    set_code: NDArray[np.int32],
    set_side: NDArray[np.int8],
    weight: NDArray[np.float64],
    missing_left: NDArray[np.uint8],
    value: NDArray[np.float64],
    offsets: NDArray[np.int64],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`predict_forest` (node-by-node mass propagation)."""
    n = X.shape[0]
    for t in range(offsets.shape[0] - 1):
        mass = np.zeros((n, offsets[t + 1] - offsets[t]))
        mass[:, 0] = 1.0
        for local in range(mass.shape[1]):
            node = offsets[t] + local
            if left[node] == TREE_LEAF:
                out += mass[:, [local]] * value[node]
                continue
            x = X[:, feature[node]]
            if set_off[node + 1] == set_off[node]:
                go = np.where(x <= threshold[node], 0, 1)
                go[np.isnan(x) | (x == np.inf)] = 0 if missing_left[node] else 1
            else:
                codes = set_code[set_off[node] : set_off[node + 1]]
                sides = set_side[set_off[node] : set_off[node + 1]]
                lookup = dict(zip(codes.tolist(), sides.tolist(), strict=True))
                go = np.array([lookup.get(int(v), -1) if v >= 0 else -1 for v in x])
            wl, wr = weight[left[node]], weight[right[node]]
            share_l = np.where(go == 0, 1.0, np.where(go == 1, 0.0, wl / (wl + wr)))
            mass[:, left[node] - offsets[t]] += mass[:, local] * share_l
            mass[:, right[node] - offsets[t]] += mass[:, local] * (1.0 - share_l)


@numba.njit(nogil=True, cache=True)
def apply_forest_sets(
    X,
    feature,
    threshold,
    left,
    right,
    set_off,
    set_code,
    set_side,
    weight,
    missing_left,
    offsets,
    out,
):  # noqa: E501
    """Like :func:`apply_forest` with set splits; an unseen code takes the heavier child.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_columns)  # IN (see :func:`predict_forest`)
    out : ndarray of int32, shape (n_samples, n_trees)  # OUT: global leaf index
    """
    n_trees = offsets.shape[0] - 1
    for i in range(X.shape[0]):
        for t in range(n_trees):
            node = offsets[t]
            while left[node] != -1:
                lo, hi = set_off[node], set_off[node + 1]
                if hi == lo:
                    child = _numeric_child(
                        X[i, feature[node]], threshold[node], missing_left[node], left[node],
                        right[node],
                    )  # fmt: skip
                    go = 0 if child == left[node] else 1
                else:
                    go = _set_side(X[i, feature[node]], lo, hi, set_code, set_side)
                    if go < 0:
                        go = 0 if weight[left[node]] >= weight[right[node]] else 1
                node = left[node] if go == 0 else right[node]
            out[i, t] = node
