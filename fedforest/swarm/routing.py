"""Inference with unavailable features: the routing kernels of the swarm strategies.

A pooled forest is flat arrays (:func:`fedforest.tree.arrays.pack_forest`) with *global* feature
indices. A row reaches a node whose split feature it does not have when ``X[i, f]`` is NaN
(a site fills the columns it never measured with NaN). The strategies of
Tajabadi & Heider, *Mind the Missing Split* (Section III), differ only in how such a node is
resolved:

=========  ===================================================================  ========
strategy   at a node whose feature is missing                                   kernel
=========  ===================================================================  ========
``fpv``    discard the tree (eq. 1-2)                                            single
``pr``     depth ``< d_thresh``: discard; else right with probability            single
           ``N_R / N`` (eq. 3-6)
``mi``     compare the imputed value with the threshold; no imputer: discard     single
           (eq. 7-11)
``ipr``    right with probability ``sigmoid((x_hat - t) / sigma)`` (numeric) or  single
           the imputed class mass above ``t`` (categorical); no imputer: PR
           rule (eq. 12-17)
``ss``     the best available surrogate split (eq. 21); none: PR rule (eq. 22)  single
``mp``     both children, weighted by the IPR probabilities (empirical          marginal
           ``N_R / N`` without an imputer), recursively (eq. 18-20)
=========  ===================================================================  ========

:func:`route_single` follows one path per (tree, row) and writes the leaf reached, or -1
when the tree is discarded for that row. :func:`marginal_proba` sums the exact mixture of
leaf distributions of eq. 19 over the trees. Random choices use a counter-based hash of
``(seed, row, node)`` (:func:`hash_uniform`), so results do not depend on thread count,
chunking or visiting order, and the NumPy twins reproduce the kernels exactly.

Imputation arrays (``imp_kind``, ``xhat``, ``sigma``, ``cat_slot``, ``cat_values``,
``cat_prob``) are built by :class:`fedforest.swarm.SwarmForest`:

* ``imp_kind[f]``: 0 no imputer, 1 numeric (linear regression), 2 categorical (logistic);
* ``xhat[i, f]``: the imputed value (numeric) or the most probable category (categorical),
  NaN when imputation fails for that row (an input is missing);
* ``sigma[f]``: the feature's standard deviation averaged over the peers that have it;
* ``cat_values[cat_slot[f], :]``: the categories of feature ``f`` (padded with +inf) and
  ``cat_prob[i, cat_slot[f], :]`` their imputed probabilities (NaN when imputation fails).
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from .._common import TREE_LEAF
from .._numba_cache import serialize_cache_writes
from ..federated import kernel_views
from ..federated.kernel_cache import cache_depends_on
from ..federated.kernel_views import borrowed

__all__ = [
    "DISCARDED",
    "IMPUTE_NONE",
    "IMPUTE_HARD",
    "IMPUTE_SOFT",
    "KIND_NONE",
    "KIND_NUMERIC",
    "KIND_CATEGORICAL",
    "hash_uniform",
    "hash_uniform_numpy",
    "route_single",
    "route_single_numpy",
    "marginal_proba",
    "marginal_proba_numpy",
]

serialize_cache_writes()  # before any kernel compiles: _numba_cache.py

#: ``out[i, t]`` of :func:`route_single` when tree ``t`` is discarded for row ``i``.
DISCARDED = -1
#: ``impute_mode`` of :func:`route_single`: no imputation, hard (MI), probabilistic (IPR).
IMPUTE_NONE = 0
IMPUTE_HARD = 1
IMPUTE_SOFT = 2
#: ``imp_kind`` values: no imputer, linear regression, multinomial logistic regression.
KIND_NONE = 0
KIND_NUMERIC = 1
KIND_CATEGORICAL = 2

_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_TO_UNIT = 1.0 / 9007199254740992.0  # 2 ** -53


# ----------------------------------------------------------------------- random numbers
@numba.njit(nogil=True, cache=True, inline="always")
def _mix64(z):  # type: ignore[no-untyped-def]
    """splitmix64 finaliser of a uint64."""
    z = z + np.uint64(_GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


@numba.njit(nogil=True, cache=True)
def hash_uniform(seed, row, node):  # type: ignore[no-untyped-def]
    """Uniform draw in [0, 1) determined by ``(seed, row, node)`` (all non-negative ints)."""
    z = _mix64(np.uint64(node))
    z = _mix64(z ^ np.uint64(row))
    z = _mix64(z ^ np.uint64(seed))
    return np.float64(z >> np.uint64(11)) * _TO_UNIT


def _mix64_numpy(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    z = z + np.uint64(_GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return np.asarray(z ^ (z >> np.uint64(31)))


def hash_uniform_numpy(seed: int, row: NDArray[np.int64], node: NDArray[np.int64]) -> NDArray:
    """NumPy twin of :func:`hash_uniform`, vectorised over ``row`` and ``node``."""
    row_u = np.asarray(row).astype(np.uint64)
    node_u = np.asarray(node).astype(np.uint64)
    z = _mix64_numpy(node_u)
    z = _mix64_numpy(z ^ row_u)
    z = _mix64_numpy(z ^ np.uint64(seed))
    return (z >> np.uint64(11)).astype(np.float64) * _TO_UNIT


# ----------------------------------------------------------------------- one node
@numba.njit(nogil=True, cache=True, inline="always")
def _informed_p_right(i, f, t, imp_kind, xhat, sigma, cat_slot, cat_values, cat_prob):  # type: ignore[no-untyped-def]
    """IPR probability of going right (eq. 14 and 16), NaN when imputation fails."""
    kind = imp_kind[f]
    if kind == KIND_NUMERIC:
        v = xhat[i, f]
        if np.isnan(v):
            return np.nan
        s = sigma[f]
        if not s > 0.0:  # constant feature (or unknown spread): the imputed side is certain
            return 1.0 if v > t else 0.0
        return 1.0 / (1.0 + np.exp(-(v - t) / s))
    if kind == KIND_CATEGORICAL:
        c = cat_slot[f]
        if np.isnan(cat_prob[i, c, 0]):
            return np.nan
        p_left = 0.0
        for k in range(cat_values.shape[1]):
            if cat_values[c, k] <= t:
                p_left += cat_prob[i, c, k]
        return min(1.0, max(0.0, 1.0 - p_left))
    return np.nan


@numba.njit(nogil=True, cache=True, inline="always")
def _resolve_missing(  # type: ignore[no-untyped-def]
    i, row, node, X, feature, threshold, p_right, depth,
    surr_feature, surr_threshold, surr_flip,
    imp_kind, xhat, sigma, cat_slot, cat_values, cat_prob,
    use_surrogate, impute_mode, use_pr, d_thresh, seed,
):  # fmt: skip
    """Child of ``node`` (0 left, 1 right) for a row missing its feature; -1 discards."""
    if use_surrogate:
        for s in range(surr_feature.shape[1]):
            sf = surr_feature[node, s]
            if sf < 0:
                break
            xs = X[i, sf]
            if not np.isnan(xs):
                go_left = xs <= surr_threshold[node, s]
                if surr_flip[node, s]:
                    go_left = not go_left
                return 0 if go_left else 1
    f = feature[node]
    t = threshold[node]
    if impute_mode == IMPUTE_HARD:
        v = xhat[i, f]
        if not np.isnan(v):
            return 0 if v <= t else 1
    elif impute_mode == IMPUTE_SOFT:
        p = _informed_p_right(i, f, t, imp_kind, xhat, sigma, cat_slot, cat_values, cat_prob)
        if not np.isnan(p):
            return 1 if hash_uniform(seed, row, node) < p else 0
    if use_pr and depth[node] >= d_thresh:
        return 1 if hash_uniform(seed, row, node) < p_right[node] else 0
    return -1


# ----------------------------------------------------------------------- one path per tree
@numba.njit(nogil=True, cache=True)
def route_single(  # type: ignore[no-untyped-def]
    X, feature, threshold, left, right, offsets, active, p_right, depth,
    surr_feature, surr_threshold, surr_flip,
    imp_kind, xhat, sigma, cat_slot, cat_values, cat_prob,
    use_surrogate, impute_mode, use_pr, d_thresh, seed, row_offset, out,
):  # fmt: skip
    """Leaf reached by every row in every tree, resolving missing features by strategy.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)  # IN, NaN = unavailable
    feature, threshold, left, right, offsets : pooled forest (global indices)  # IN
    active : ndarray of bool, shape (n_trees,)  # IN, inactive trees give -1
    p_right : ndarray of float64, shape (n_nodes,)  # IN, N_R / N (eq. 3)
    depth : ndarray of int32, shape (n_nodes,)  # IN, root depth 0
    surr_feature, surr_threshold, surr_flip : shape (n_nodes, n_surrogates)  # IN
        Ranked surrogate splits (feature -1 = none; flip: ``x <= t`` goes right).
    imp_kind, xhat, sigma, cat_slot, cat_values, cat_prob : imputation arrays  # IN
    use_surrogate, use_pr : bool  # IN
    impute_mode : int  # IN, IMPUTE_NONE, IMPUTE_HARD or IMPUTE_SOFT
    d_thresh : int  # IN, PR discards trees whose missing split is shallower
    seed, row_offset : int  # IN, draws use row index ``row_offset + i``
    out : ndarray of int32, shape (n_trees, n_samples)  # OUT, leaf or -1
        Tree-major, so that each tree's rows are written contiguously.
    """
    # Views numba does not reference-count (kernel_views.borrowed): _resolve_missing,
    # inlined, would take and drop a reference to each array at every missing feature.
    X, feature, threshold = borrowed(X), borrowed(feature), borrowed(threshold)
    left, right = borrowed(left), borrowed(right)
    offsets, active, p_right = borrowed(offsets), borrowed(active), borrowed(p_right)
    depth, surr_feature = borrowed(depth), borrowed(surr_feature)
    surr_threshold, surr_flip = borrowed(surr_threshold), borrowed(surr_flip)
    imp_kind, xhat, sigma = borrowed(imp_kind), borrowed(xhat), borrowed(sigma)
    cat_slot, cat_values = borrowed(cat_slot), borrowed(cat_values)
    cat_prob, out = borrowed(cat_prob), borrowed(out)
    n_trees = offsets.shape[0] - 1
    for t in range(n_trees):  # tree-major: one tree's nodes stay in cache across the rows
        for i in range(X.shape[0]):
            row = row_offset + i
            if not active[t]:
                out[t, i] = -1
                continue
            node = offsets[t]
            while left[node] != -1:
                x = X[i, feature[node]]
                if np.isnan(x):
                    side = _resolve_missing(
                        i, row, node, X, feature, threshold, p_right, depth,
                        surr_feature, surr_threshold, surr_flip,
                        imp_kind, xhat, sigma, cat_slot, cat_values, cat_prob,
                        use_surrogate, impute_mode, use_pr, d_thresh, seed,
                    )  # fmt: skip
                    if side < 0:
                        node = -1
                        break
                    node = right[node] if side == 1 else left[node]
                elif x <= threshold[node]:
                    node = left[node]
                else:
                    node = right[node]
            out[t, i] = node


# ----------------------------------------------------------------------- marginal prediction
@numba.njit(nogil=True, cache=True)
def marginal_proba(  # type: ignore[no-untyped-def]
    X, feature, threshold, left, right, value, offsets, active, p_right,
    imp_kind, xhat, sigma, cat_slot, cat_values, cat_prob, max_depth, out,
):  # fmt: skip
    """Sum over active trees of the exact marginal class distribution of eq. 19.

    At a node whose feature the row has, one child is followed; otherwise both, weighted
    by the IPR probabilities (eq. 14/16), or by the empirical ``N_L / N``, ``N_R / N``
    when no imputer applies. Branches of weight 0 are not visited.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)  # IN, NaN = unavailable
    feature, threshold, left, right, offsets : pooled forest (global indices)  # IN
    value : ndarray of float64, shape (n_nodes, n_classes)  # IN, leaf distributions (eq. 18)
    active : ndarray of bool, shape (n_trees,)  # IN
    p_right : ndarray of float64, shape (n_nodes,)  # IN
    imp_kind, xhat, sigma, cat_slot, cat_values, cat_prob : imputation arrays  # IN
    max_depth : int  # IN, deepest leaf of the forest (sizes the stack)
    out : ndarray of float64, shape (n_samples, n_classes)  # OUT, overwritten
    """
    # As in route_single: views numba does not reference-count.
    X, feature, threshold = borrowed(X), borrowed(feature), borrowed(threshold)
    left, right = borrowed(left), borrowed(right)
    value, offsets, active = borrowed(value), borrowed(offsets), borrowed(active)
    p_right, imp_kind, xhat = borrowed(p_right), borrowed(imp_kind), borrowed(xhat)
    sigma, cat_slot, cat_values = borrowed(sigma), borrowed(cat_slot), borrowed(cat_values)
    cat_prob, out = borrowed(cat_prob), borrowed(out)
    n_trees = offsets.shape[0] - 1
    n_classes = value.shape[1]
    stack_node = np.empty(max_depth + 2, dtype=np.int64)
    stack_w = np.empty(max_depth + 2, dtype=np.float64)
    out[:] = 0.0
    for t in range(n_trees):  # tree-major: one tree's nodes stay in cache across the rows
        if not active[t]:
            continue
        for i in range(X.shape[0]):
            stack_node[0] = offsets[t]
            stack_w[0] = 1.0
            top = 1
            while top > 0:
                top -= 1
                node = stack_node[top]
                w = stack_w[top]
                if left[node] == -1:
                    for c in range(n_classes):
                        out[i, c] += w * value[node, c]
                    continue
                f = feature[node]
                x = X[i, f]
                if not np.isnan(x):
                    stack_node[top] = left[node] if x <= threshold[node] else right[node]
                    stack_w[top] = w
                    top += 1
                    continue
                p = _informed_p_right(
                    i, f, threshold[node], imp_kind, xhat, sigma, cat_slot, cat_values, cat_prob
                )
                if np.isnan(p):
                    p = p_right[node]
                if p < 1.0:
                    stack_node[top] = left[node]
                    stack_w[top] = w * (1.0 - p)
                    top += 1
                if p > 0.0:
                    stack_node[top] = right[node]
                    stack_w[top] = w * p
                    top += 1


# ----------------------------------------------------------------------- NumPy twins
def _informed_p_right_numpy(
    rows: NDArray[np.int64],
    f: NDArray[np.int64],
    t: NDArray[np.float64],
    arrays: dict[str, NDArray],
) -> NDArray[np.float64]:
    """Vectorised :func:`_informed_p_right` for (row, feature, threshold) triples.

    ``arrays`` holds the imputation arrays by name (``imp_kind``, ``xhat``, ``sigma``,
    ``cat_slot``, ``cat_values``, ``cat_prob``).
    """
    imp_kind, xhat, sigma = arrays["imp_kind"], arrays["xhat"], arrays["sigma"]
    cat_slot, cat_values, cat_prob = arrays["cat_slot"], arrays["cat_values"], arrays["cat_prob"]
    out = np.full(rows.shape[0], np.nan)
    kind = imp_kind[f]
    num = kind == KIND_NUMERIC
    if num.any():
        v, s, tn = xhat[rows[num], f[num]], sigma[f[num]], t[num]
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            soft = 1.0 / (1.0 + np.exp(-(v - tn) / s))
        hard = np.where(v > tn, 1.0, 0.0)
        out[num] = np.where(np.isnan(v), np.nan, np.where(s > 0.0, soft, hard))
    cat = kind == KIND_CATEGORICAL
    if cat.any():
        slot = cat_slot[f[cat]]
        prob = cat_prob[rows[cat], slot, :]
        below = cat_values[slot, :] <= t[cat][:, None]
        p_left = np.sum(np.where(below, prob, 0.0), axis=1)
        out[cat] = np.where(np.isnan(prob[:, 0]), np.nan, np.clip(1.0 - p_left, 0.0, 1.0))
    return out


def _resolve_missing_numpy(
    rows: NDArray[np.int64],
    node: NDArray[np.int64],
    X: NDArray[np.float64],
    arrays: dict[str, NDArray],
    use_surrogate: bool,
    impute_mode: int,
    use_pr: bool,
    d_thresh: int,
    seed: int,
    row_offset: int,
) -> NDArray[np.int64]:
    """Vectorised :func:`_resolve_missing`: 0 left, 1 right, -1 discard per row."""
    side = np.full(rows.shape[0], -1, dtype=np.int64)
    todo = np.ones(rows.shape[0], dtype=bool)
    if use_surrogate:
        for s in range(arrays["surr_feature"].shape[1]):
            sf = arrays["surr_feature"][node, s]
            todo &= sf >= 0  # a ranked list ends at its first -1
            xs = X[rows, np.maximum(sf, 0)]
            hit = todo & ~np.isnan(xs)
            go_left = (xs <= arrays["surr_threshold"][node, s]) ^ arrays["surr_flip"][node, s]
            side[hit] = np.where(go_left[hit], 0, 1)
            todo &= ~hit
        todo = side < 0
    f = arrays["feature"][node].astype(np.int64)
    t = arrays["threshold"][node]
    u = hash_uniform_numpy(seed, rows + row_offset, node)
    if impute_mode == IMPUTE_HARD:
        v = arrays["xhat"][rows, f]
        hit = todo & ~np.isnan(v)
        side[hit] = np.where(v[hit] <= t[hit], 0, 1)
        todo &= ~hit
    elif impute_mode == IMPUTE_SOFT:
        p = _informed_p_right_numpy(rows, f, t, arrays)
        hit = todo & ~np.isnan(p)
        side[hit] = np.where(u[hit] < p[hit], 1, 0)
        todo &= ~hit
    if use_pr:
        hit = todo & (arrays["depth"][node] >= d_thresh)
        side[hit] = np.where(u[hit] < arrays["p_right"][node][hit], 1, 0)
    return side


def route_single_numpy(
    X: NDArray[np.float64],
    forest: dict[str, NDArray],
    use_surrogate: bool,
    impute_mode: int,
    use_pr: bool,
    d_thresh: int,
    seed: int,
    row_offset: int,
    out: NDArray[np.int32],
) -> None:
    """NumPy twin of :func:`route_single`.

    ``forest`` holds the kernel's array arguments by name (``feature``, ``threshold``,
    ``left``, ``right``, ``offsets``, ``active``, ``p_right``, ``depth``, ``surr_*`` and the
    imputation arrays); the result is the same.
    """
    n = X.shape[0]
    all_rows = np.arange(n, dtype=np.int64)
    left, right = forest["left"], forest["right"]
    for t in range(forest["offsets"].shape[0] - 1):
        if not forest["active"][t]:
            out[t, :] = DISCARDED
            continue
        node = np.full(n, forest["offsets"][t], dtype=np.int64)
        alive = left[node] != TREE_LEAF
        while alive.any():
            rows = all_rows[alive]
            cur = node[rows]
            x = X[rows, forest["feature"][cur]]
            go_right = (x > forest["threshold"][cur]).astype(np.int64)
            miss = np.isnan(x)
            if miss.any():
                go_right[miss] = _resolve_missing_numpy(
                    rows[miss], cur[miss], X, forest, use_surrogate, impute_mode,
                    use_pr, d_thresh, seed, row_offset,
                )  # fmt: skip
            nxt = np.where(go_right == 1, right[cur], left[cur])
            nxt[go_right < 0] = DISCARDED
            node[rows] = nxt
            alive = np.zeros(n, dtype=bool)
            ok = node >= 0
            alive[ok] = left[node[ok]] != TREE_LEAF
        out[t, :] = node


def marginal_proba_numpy(
    X: NDArray[np.float64], forest: dict[str, NDArray], out: NDArray[np.float64]
) -> None:
    """NumPy twin of :func:`marginal_proba` (weights pushed down node by node).

    Children have larger indices than their parent, so one pass over a tree's nodes in
    index order propagates every row's weight from the root to the leaves.
    """
    n = X.shape[0]
    rows = np.arange(n, dtype=np.int64)
    out[:] = 0.0
    offsets, left, right = forest["offsets"], forest["left"], forest["right"]
    for t in range(offsets.shape[0] - 1):
        if not forest["active"][t]:
            continue
        lo, hi = int(offsets[t]), int(offsets[t + 1])
        weight = np.zeros((n, hi - lo))
        weight[:, 0] = 1.0
        for node in range(lo, hi):
            w = weight[:, node - lo]
            if left[node] == TREE_LEAF:
                out += w[:, None] * forest["value"][node][None, :]
                continue
            f = int(forest["feature"][node])
            x = X[:, f]
            p = _informed_p_right_numpy(
                rows, np.full(n, f), np.full(n, forest["threshold"][node]), forest
            )
            p = np.where(np.isnan(p), forest["p_right"][node], p)
            p = np.where(np.isnan(x), p, (x > forest["threshold"][node]).astype(np.float64))
            weight[:, left[node] - lo] += w * (1.0 - p)
            weight[:, right[node] - lo] += w * p


# Their cached code holds borrowed's (kernel_views): an edit there makes it stale.
cache_depends_on(route_single, kernel_views)
cache_depends_on(marginal_proba, kernel_views)
