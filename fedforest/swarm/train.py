"""What a swarm peer computes from its own rows before sharing: trees, surrogates, imputers.

* :func:`trees_from_sklearn` imports a fitted scikit-learn ``DecisionTreeClassifier`` or
  ``RandomForestClassifier`` into the flat :class:`~fedforest.tree.arrays.Tree` format.
* :func:`tree_surrogates` (numba) and :func:`tree_surrogates_numpy` find, for every internal
  node, the best surrogate splits by adjusted agreement (*Mind the Missing Split*, eq. 21).
* :func:`fit_imputer` fits the linear (numeric) or multinomial logistic (categorical)
  imputer of one feature and its 3-fold cross-validated quality (R^2 or macro F1).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .._common import TREE_LEAF, TREE_UNDEFINED
from .._numba_cache import serialize_cache_writes
from ..tree.arrays import Tree

__all__ = [
    "Imputer",
    "trees_from_sklearn",
    "tree_surrogates",
    "tree_surrogates_numpy",
    "forest_surrogates",
    "fit_imputer",
]

serialize_cache_writes()  # before any kernel compiles: _numba_cache.py


# ----------------------------------------------------------------------- scikit-learn import
def trees_from_sklearn(estimator: Any) -> tuple[list[Tree], NDArray[Any]]:
    """Flat trees of a fitted scikit-learn classification tree or forest.

    Parameters
    ----------
    estimator : DecisionTreeClassifier or RandomForestClassifier (or ExtraTreesClassifier)
        Fitted, single output.

    Returns
    -------
    trees : list of Tree
        ``value`` holds class proportions; ``weighted_n_node_samples`` the (bootstrap)
        weight reaching each node, so ``value * weighted_n_node_samples[:, None]`` are the
        class counts.
    classes : ndarray, shape (n_classes,)
        The estimator's ``classes_``.

    Raises
    ------
    TypeError
        If ``estimator`` is not a fitted scikit-learn classification tree or forest.
    ValueError
        If it was fitted with several outputs.
    """
    from sklearn.utils.validation import check_is_fitted

    if not hasattr(estimator, "classes_") and not hasattr(estimator, "tree_"):
        raise TypeError(
            f"expected a fitted scikit-learn DecisionTreeClassifier or RandomForestClassifier, "
            f"got {type(estimator).__name__}"
        )
    check_is_fitted(estimator)
    if getattr(estimator, "n_outputs_", 1) != 1:
        raise ValueError(
            f"{type(estimator).__name__} was fitted with n_outputs_={estimator.n_outputs_}; "
            "only single-output classifiers can be imported"
        )
    members = list(getattr(estimator, "estimators_", [estimator]))
    if not members or not all(hasattr(m, "tree_") for m in members):
        raise TypeError(f"{type(estimator).__name__} holds no decision trees to import")
    if not hasattr(members[0], "classes_") or not hasattr(estimator, "classes_"):
        raise TypeError(f"{type(estimator).__name__} is not a classifier (no classes_)")
    return [_tree_from_sklearn(m.tree_) for m in members], np.asarray(estimator.classes_)


def _tree_from_sklearn(st: Any) -> Tree:
    """One ``sklearn.tree._tree.Tree`` as a flat :class:`Tree` with class proportions."""
    left = np.asarray(st.children_left, dtype=np.int32)
    leaf = left == TREE_LEAF
    value = np.asarray(st.value, dtype=np.float64)[:, 0, :]
    total = value.sum(axis=1, keepdims=True)
    value = np.divide(value, total, out=np.full_like(value, 1.0 / value.shape[1]), where=total > 0)
    return Tree(
        feature=np.where(leaf, TREE_UNDEFINED, st.feature).astype(np.int32),
        threshold=np.where(leaf, float(TREE_UNDEFINED), st.threshold).astype(np.float64),
        children_left=left,
        children_right=np.asarray(st.children_right, dtype=np.int32),
        value=value,
        n_node_samples=np.asarray(st.n_node_samples, dtype=np.int64),
        weighted_n_node_samples=np.asarray(st.weighted_n_node_samples, dtype=np.float64),
        impurity=np.asarray(st.impurity, dtype=np.float64),
    )


# ----------------------------------------------------------------------- surrogate splits
@numba.njit(nogil=True, cache=True)
def _offer(node, adj, feat, thr, flip, out_feature, out_threshold, out_flip, out_adj):  # type: ignore[no-untyped-def]
    """Insert a candidate into the node's ranked list if it beats the last entry."""
    k = out_adj.shape[1]
    if not adj > out_adj[node, k - 1]:
        return
    pos = k - 1
    while pos > 0 and adj > out_adj[node, pos - 1]:
        out_feature[node, pos] = out_feature[node, pos - 1]
        out_threshold[node, pos] = out_threshold[node, pos - 1]
        out_flip[node, pos] = out_flip[node, pos - 1]
        out_adj[node, pos] = out_adj[node, pos - 1]
        pos -= 1
    out_feature[node, pos] = feat
    out_threshold[node, pos] = thr
    out_flip[node, pos] = flip
    out_adj[node, pos] = adj


@numba.njit(nogil=True, cache=True)
def _best_cut(vals, goes_left, n_left):  # type: ignore[no-untyped-def]
    """Best surrogate cut of one feature at one node: (adj, threshold, flip)."""
    m = vals.shape[0]
    order = np.argsort(vals, kind="mergesort")
    n_maj = max(n_left, m - n_left)
    best, best_thr, best_flip = 0.0, 0.0, False
    cum_left = 0
    for j in range(1, m):
        cum_left += goes_left[order[j - 1]]
        lo, hi = vals[order[j - 1]], vals[order[j]]
        if not hi > lo:
            continue
        agree = cum_left + (m - n_left) - (j - cum_left)  # same side as the primary split
        for flip in range(2):
            n_surr = m - agree if flip else agree
            adj = (n_surr - n_maj) / (m - n_maj)
            if adj > best:
                mid = 0.5 * (lo + hi)
                best, best_thr, best_flip = adj, (lo if mid >= hi else mid), flip == 1
    return best, best_thr, best_flip


@numba.njit(nogil=True, cache=True)
def tree_surrogates(  # type: ignore[no-untyped-def]
    X, feature, threshold, left, right, candidates, out_feature, out_threshold, out_flip, out_adj
):
    """Ranked surrogate splits of every internal node of one tree (eq. 21).

    The peer's training rows are routed down the tree; at each internal node every
    candidate feature (except the node's own) is scanned at every midpoint between
    distinct values, in both directions, and the adjusted agreement
    ``(n_surr - n_maj) / (n_total - n_maj)`` is computed. The best cut of each feature
    enters the ranked list if its adjusted agreement is positive (better than sending
    every row to the majority child); ties keep the earlier candidate.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)  # IN, the peer's training rows
    feature, threshold, left, right : one tree's arrays, local child indices  # IN
    candidates : ndarray of int64, shape (n_candidates,)  # IN, surrogate features
    out_feature : ndarray of int32, shape (n_nodes, n_surrogates)  # OUT, -1 = none
    out_threshold : ndarray of float64, shape (n_nodes, n_surrogates)  # OUT
    out_flip : ndarray of bool, shape (n_nodes, n_surrogates)  # OUT, ``x <= t`` goes right
    out_adj : ndarray of float64, shape (n_nodes, n_surrogates)  # OUT, adjusted agreement
    """
    n, n_nodes = X.shape[0], feature.shape[0]
    out_feature[:] = -1
    out_threshold[:] = 0.0
    out_flip[:] = False
    out_adj[:] = 0.0
    samples = np.arange(n)
    start = np.zeros(n_nodes, dtype=np.int64)
    stop = np.zeros(n_nodes, dtype=np.int64)
    stop[0] = n
    for node in range(n_nodes):
        if left[node] == -1:
            continue
        lo, hi = start[node], stop[node]
        rows = samples[lo:hi].copy()
        m = hi - lo
        goes_left = np.empty(m, dtype=np.int64)
        for j in range(m):
            goes_left[j] = 1 if X[rows[j], feature[node]] <= threshold[node] else 0
        n_left = goes_left.sum()
        if 0 < n_left < m:
            vals = np.empty(m)
            for c in candidates:
                if c == feature[node]:
                    continue
                for j in range(m):
                    vals[j] = X[rows[j], c]
                adj, thr, flip = _best_cut(vals, goes_left, n_left)
                _offer(node, adj, c, thr, flip, out_feature, out_threshold, out_flip, out_adj)
        a, b = lo, lo + n_left
        for j in range(m):  # stable partition: left rows first
            if goes_left[j]:
                samples[a] = rows[j]
                a += 1
            else:
                samples[b] = rows[j]
                b += 1
        start[left[node]], stop[left[node]] = lo, lo + n_left
        start[right[node]], stop[right[node]] = lo + n_left, hi


def _best_cut_numpy(
    vals: NDArray[np.float64], goes_left: NDArray[np.int64], n_left: int
) -> tuple[float, float, bool]:
    """NumPy twin of :func:`_best_cut`."""
    m = vals.shape[0]
    order = np.argsort(vals, kind="mergesort")
    v = vals[order]
    cum_left = np.cumsum(goes_left[order])[:-1]  # primary-left rows among the first j
    j = np.arange(1, m)
    agree = cum_left + (m - n_left) - (j - cum_left)
    n_maj = max(n_left, m - n_left)
    both = np.stack([agree, m - agree], axis=1).astype(np.float64)  # (cut, flip), scan order
    adj = (both - n_maj) / (m - n_maj)
    adj[~(v[1:] > v[:-1])] = -np.inf
    flat = int(np.argmax(adj))
    best = float(adj.flat[flat])
    if not best > 0.0:
        return 0.0, 0.0, False
    cut, flip = divmod(flat, 2)
    lo, hi = float(v[cut]), float(v[cut + 1])
    mid = 0.5 * (lo + hi)
    return best, (lo if mid >= hi else mid), bool(flip)


def tree_surrogates_numpy(
    X: NDArray[np.float64],
    tree: Tree,
    candidates: NDArray[np.int64],
    n_surrogates: int,
) -> tuple[NDArray[np.int32], NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]]:
    """NumPy twin of :func:`tree_surrogates`; returns the four output arrays."""
    n_nodes = tree.node_count
    shape = (n_nodes, n_surrogates)
    out = (np.full(shape, -1, np.int32), np.zeros(shape), np.zeros(shape, bool), np.zeros(shape))
    rows_at: dict[int, NDArray[np.int64]] = {0: np.arange(X.shape[0])}
    for node in range(n_nodes):
        rows = rows_at.pop(node)
        if tree.children_left[node] == TREE_LEAF:
            continue
        f = int(tree.feature[node])
        goes_left = (X[rows, f] <= tree.threshold[node]).astype(np.int64)
        rows_at[int(tree.children_left[node])] = rows[goes_left == 1]
        rows_at[int(tree.children_right[node])] = rows[goes_left == 0]
        n_left = int(goes_left.sum())
        if not 0 < n_left < rows.shape[0]:
            continue
        found = [
            (*_best_cut_numpy(X[rows, c], goes_left, n_left), int(c)) for c in candidates if c != f
        ]
        ranked = sorted(
            (item for item in found if item[0] > 0.0), key=lambda item: -item[0]
        )  # stable: ties keep candidate order
        for s, (adj, thr, flip, c) in enumerate(ranked[:n_surrogates]):
            out[0][node, s], out[1][node, s], out[2][node, s], out[3][node, s] = c, thr, flip, adj
    return out


def forest_surrogates(
    X: NDArray[np.float64], trees: list[Tree], candidates: NDArray[np.int64], n_surrogates: int
) -> tuple[NDArray[np.int32], NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]]:
    """:func:`tree_surrogates` for every tree, concatenated node-wise (tree order)."""
    n_nodes = sum(t.node_count for t in trees)
    shape = (n_nodes, n_surrogates)
    feat, thr = np.full(shape, -1, np.int32), np.zeros(shape)
    flip, adj = np.zeros(shape, bool), np.zeros(shape)
    X = np.ascontiguousarray(X, dtype=np.float64)
    cand = np.asarray(candidates, dtype=np.int64)
    lo = 0
    for tree in trees:
        hi = lo + tree.node_count
        if cand.size and n_surrogates:
            tree_surrogates(
                X, tree.feature, tree.threshold, tree.children_left, tree.children_right,
                cand, feat[lo:hi], thr[lo:hi], flip[lo:hi], adj[lo:hi],
            )  # fmt: skip
        lo = hi
    return feat, thr, flip, adj


# ----------------------------------------------------------------------- imputers
@dataclass(frozen=True, eq=False)
class Imputer:
    """A linear imputer of one feature from other features (eq. 7-10).

    Attributes
    ----------
    feature : str
        The imputed feature.
    kind : {"numeric", "categorical"}
    inputs : tuple of str
        Input feature names, in the order of ``coef``'s last axis.
    intercept : ndarray of float64, shape (1,) or (n_categories,)
    coef : ndarray of float64, shape (1, n_inputs) or (n_categories, n_inputs)
        Numeric: ``x_hat = intercept[0] + coef[0] @ x``; categorical: softmax scores.
    categories : ndarray of float64, shape (0,) or (n_categories,)
        The categories (sorted codes) of a categorical feature.
    quality : float
        Mean 3-fold cross-validated R^2 (numeric) or macro F1 (categorical); NaN when it
        could not be estimated.
    n_train : int
        Training rows of the imputer.
    """

    feature: str
    kind: str
    inputs: tuple[str, ...]
    intercept: NDArray[np.float64]
    coef: NDArray[np.float64]
    categories: NDArray[np.float64]
    quality: float
    n_train: int

    def predict(self, X_in: NDArray[np.float64]) -> NDArray[np.float64]:
        """Imputed values (numeric) or category probabilities (categorical).

        Parameters
        ----------
        X_in : ndarray of float64, shape (n_samples, n_inputs)
            The input columns in ``inputs`` order; NaN propagates to the row's output.

        Returns
        -------
        ndarray of float64, shape (n_samples,) or (n_samples, n_categories)
        """
        z = X_in @ self.coef.T + self.intercept[None, :]
        if self.kind == "numeric":
            return np.asarray(z[:, 0])
        z = z - np.max(z, axis=1, keepdims=True)
        ez = np.exp(z)
        return np.asarray(ez / ez.sum(axis=1, keepdims=True))


def fit_imputer(
    name: str, kind: str, target: NDArray[np.float64], X_in: NDArray[np.float64],
    inputs: tuple[str, ...], random_state: int,
) -> Imputer:  # fmt: skip
    """Fit the imputer of one feature and score it by 3-fold cross-validation.

    Numeric features get a ``LinearRegression`` scored by R^2; categorical ones a
    multinomial ``LogisticRegression`` (on standardised inputs, folded back into the
    coefficients) scored by macro F1, as in the paper's Section III-B3.
    """
    from sklearn.exceptions import ConvergenceWarning

    n = target.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=ConvergenceWarning)
        warnings.simplefilter("ignore", category=UserWarning)
        warnings.simplefilter("ignore", category=RuntimeWarning)
        if kind == "numeric":
            intercept, coef = _fit_linear(target, X_in)
            categories = np.zeros(0)
        else:
            categories, intercept, coef = _fit_logistic(target, X_in)
        quality = _cv_quality(kind, target, X_in, random_state)
    return Imputer(name, kind, inputs, intercept, coef, categories, quality, n)


def _fit_linear(
    target: NDArray[np.float64], X_in: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    from sklearn.linear_model import LinearRegression

    model = LinearRegression().fit(X_in, target)
    return np.array([float(model.intercept_)]), np.asarray(model.coef_, dtype=np.float64)[None, :]


def _fit_logistic(
    target: NDArray[np.float64], X_in: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    from sklearn.linear_model import LogisticRegression

    categories = np.unique(target)
    if categories.shape[0] == 1:  # one category seen: impute it with certainty
        return categories, np.zeros(1), np.zeros((1, X_in.shape[1]))
    mean = X_in.mean(axis=0)
    scale = X_in.std(axis=0)
    scale[scale == 0.0] = 1.0
    model = LogisticRegression(max_iter=500).fit((X_in - mean) / scale, target)
    coef = np.asarray(model.coef_, dtype=np.float64) / scale[None, :]
    intercept = np.asarray(model.intercept_, dtype=np.float64) - coef @ mean
    if categories.shape[0] == 2:  # binary: scores (0, z) give softmax = sigmoid(z)
        coef = np.vstack([np.zeros_like(coef), coef])
        intercept = np.array([0.0, intercept[0]])
    return categories, intercept, coef


def _cv_quality(
    kind: str, target: NDArray[np.float64], X_in: NDArray[np.float64], random_state: int
) -> float:
    """Mean 3-fold CV R^2 (numeric) or macro F1 (categorical); NaN if it cannot be run."""
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if target.shape[0] < 6:
        return float("nan")
    try:
        if kind == "numeric":
            scores = cross_val_score(
                LinearRegression(), X_in, target, scoring="r2",
                cv=KFold(3, shuffle=True, random_state=random_state),
            )  # fmt: skip
        else:
            _, counts = np.unique(target, return_counts=True)
            if counts.shape[0] < 2:
                return float("nan")
            splitter: Any = (
                StratifiedKFold(3, shuffle=True, random_state=random_state)
                if counts.min() >= 3
                else KFold(3, shuffle=True, random_state=random_state)
            )
            model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))
            scores = cross_val_score(model, X_in, target, scoring="f1_macro", cv=splitter)
    except ValueError:
        return float("nan")
    score = float(np.nanmean(scores)) if np.isfinite(scores).any() else float("nan")
    return score
