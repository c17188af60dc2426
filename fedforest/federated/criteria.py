"""Additive sufficient statistics and the impurity maps Psi, vectorised over nodes/candidates.

Statistics are rows of an array whose columns follow :mod:`fedforest._common`:
``[rows, weight, task...]`` with ``task = (sum w*y, sum w*y^2)`` for regression (one such
pair per output for multi-output y: ``(sum w*y_1, sum w*y_1^2, sum w*y_2, ...)``) and the
weighted count of each class for classification (one block of class columns per output for
multi-output y; Gini and entropy are then the mean over the outputs, as scikit-learn's
``ClassificationCriterion``). Because every column is a sum over rows,
the statistics of the pooled data are the sum of the clients' statistics, and every
quantity below is the one centralized CART would compute (Theorem 3.5 of the paper).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .._common import STAT_ROWS, STAT_TASK, STAT_WEIGHT

__all__ = [
    "CRITERIA",
    "CRITERION_CODES",
    "impurity",
    "weighted_impurity",
    "weighted_gain",
    "leaf_value",
    "s_log_mean",
]

#: Criteria per task.
CRITERIA = {"regression": ("squared_error", "poisson"), "classification": ("gini", "entropy")}

FloatArray = NDArray[np.float64]


#: Integer codes of the criteria for the numba kernels (client and server).
CRITERION_CODES = {"squared_error": 0, "gini": 1, "entropy": 2, "poisson": 3}

#: scikit-learn's EPSILON: a Poisson child whose target sum is at most this is refused.
_EPS = float(np.finfo(np.float64).eps)


def s_log_mean(s: FloatArray, w: FloatArray) -> FloatArray:
    """``S log(S / W)`` (0 where S <= 0 or W <= 0): a node's term of the Poisson gain."""
    ok = (s > 0) & (w > 0)
    out = np.zeros(np.broadcast(s, w).shape, dtype=np.float64)
    np.multiply(s, np.log(np.where(ok, s, 1.0) / np.where(ok, w, 1.0)), out=out, where=ok)
    return out


def _safe_div(num: FloatArray, den: FloatArray) -> FloatArray:
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def weighted_impurity(stats: FloatArray, criterion: str, n_outputs: int = 1) -> FloatArray:
    """``W * Psi(s)`` for statistics ``s`` of shape (..., n_stats); 0 where W = 0.

    Parameters
    ----------
    stats : ndarray of float64, shape (..., n_stats)
    criterion : {"squared_error", "poisson", "gini", "entropy"}
        Under "poisson" the task columns are ``(sum w*y, sum w*y*log(y))``.
    n_outputs : int
        Gini and entropy: the outputs whose class blocks the task columns hold (each block
        sums to W); Psi is the mean of the outputs' impurities. Regression reads its
        outputs off the columns.

    Returns
    -------
    ndarray of float64, shape (...)
    """
    w = stats[..., STAT_WEIGHT]
    task = stats[..., STAT_TASK:]
    if criterion == "poisson":
        # Half the Poisson deviance times W: sum w y log y - S log(S / W), the statistics
        # being (S, sum w y log y) (0 for a node without positive targets); with several
        # outputs, one such pair each and the mean over them (scikit-learn's).
        s, t = task[..., 0::2], task[..., 1::2]
        deviance = np.maximum(t - s_log_mean(s, w[..., None]), 0.0)
        return deviance.sum(axis=-1) / deviance.shape[-1]
    if criterion == "squared_error":
        # W * (Q/W - (S/W)^2) = Q - S^2 / W; the form scikit-learn's proxy uses. With
        # several outputs, the mean over them (scikit-learn's multi-output impurity).
        s, q = task[..., 0::2], task[..., 1::2]
        per_output = np.maximum(q - _safe_div(s**2, w[..., None]), 0.0)
        return per_output.sum(axis=-1) / per_output.shape[-1]
    if criterion == "gini":
        # Mean over the outputs of W - sum_c n_c^2 / W: each output's W is the node's.
        return np.maximum(w - _safe_div((task**2).sum(axis=-1), w) / n_outputs, 0.0)
    if criterion == "entropy":
        p = _safe_div(task, w[..., None])
        logp = np.zeros_like(p)
        np.log2(p, out=logp, where=p > 0)
        return -(task * logp).sum(axis=-1) / n_outputs
    raise ValueError(f"Unknown criterion {criterion!r}.")


def impurity(stats: FloatArray, criterion: str, n_outputs: int = 1) -> FloatArray:
    """Node impurity ``Psi(s)`` (variance, Gini or entropy in bits), shape (...).

    The mean over the outputs with several (``n_outputs``: see :func:`weighted_impurity`).
    """
    return _safe_div(weighted_impurity(stats, criterion, n_outputs), stats[..., STAT_WEIGHT])


def weighted_gain(
    parent: FloatArray, left: FloatArray, criterion: str, n_outputs: int = 1
) -> FloatArray:
    """Weighted impurity decrease ``W Psi(s) - W_L Psi(s_L) - W_R Psi(s_R)``.

    Parameters
    ----------
    parent : ndarray of float64, shape (n, n_stats)
        Pooled node statistics, one row per candidate.
    left : ndarray of float64, shape (n, n_stats)
        Pooled left-child statistics; the right child is ``parent - left``.
    n_outputs : int
        Gini and entropy: the class blocks of multi-output y (see
        :func:`weighted_impurity`).

    Returns
    -------
    ndarray of float64, shape (n,)
        Divide by the root weight for scikit-learn's ``min_impurity_decrease`` scale.
    """
    right = parent - left
    if criterion == "poisson":
        # scikit-learn's proxy: a child with target sum <= EPSILON (of any output, with
        # several) is inadmissible (-inf); the gain is the mean over the outputs.
        y, w = slice(STAT_TASK, None, 2), STAT_WEIGHT
        children = s_log_mean(left[:, y], left[:, w, None]) + s_log_mean(
            right[:, y], right[:, w, None]
        )
        node = s_log_mean(parent[:, y], parent[:, w, None])
        gain = (children.sum(axis=-1) - node.sum(axis=-1)) / children.shape[-1]
        ok = ((left[:, y] > _EPS) & (right[:, y] > _EPS)).all(axis=-1)
        return np.where(ok, gain, -np.inf)
    if criterion == "squared_error":
        # Same value as the definition, without cancelling the large sums of squares; the
        # mean over the outputs with several (their sums at STAT_TASK, STAT_TASK + 2, ...).
        # Summed in the split scan's order: children over the outputs, then the parent's.
        s = slice(STAT_TASK, None, 2)
        children = _safe_div(left[:, s] ** 2, left[:, STAT_WEIGHT, None]) + _safe_div(
            right[:, s] ** 2, right[:, STAT_WEIGHT, None]
        )
        node = _safe_div(parent[:, s] ** 2, parent[:, STAT_WEIGHT, None])
        return (children.sum(axis=-1) - node.sum(axis=-1)) / children.shape[-1]
    return (
        weighted_impurity(parent, criterion, n_outputs)
        - weighted_impurity(left, criterion, n_outputs)
        - weighted_impurity(right, criterion, n_outputs)
    )


def leaf_value(
    stats: FloatArray, task: str, class_sizes: tuple[int, ...] | None = None
) -> FloatArray:
    """Leaf prediction from node statistics: mean target, or class proportions.

    ``class_sizes``: the classes of each output (multi-output classification; None: one
    output); the proportions are then those of each output's block.

    Returns
    -------
    ndarray of float64, shape (n, n_outputs) for regression or (n, n_classes) (n_classes
    summed over the outputs with several)
    """
    w = stats[:, STAT_WEIGHT]
    if task == "regression":
        return _safe_div(stats[:, STAT_TASK::2], w[:, None])
    # Class weights summed in floats (class_weight, noisy sums under "dp") can leave a
    # child's class column a rounding below 0: proportions of the clipped columns.
    counts = np.maximum(stats[:, STAT_TASK:], 0.0)
    if class_sizes is not None and len(class_sizes) > 1:
        starts = np.cumsum((0,) + class_sizes[:-1])
        totals = np.add.reduceat(counts, starts, axis=1)
        return _safe_div(counts, np.repeat(totals, class_sizes, axis=1))
    return _safe_div(counts, counts.sum(axis=1)[:, None])


def n_rows(stats: FloatArray) -> FloatArray:
    """Distinct in-bag rows counted in the statistics, shape (...)."""
    return stats[..., STAT_ROWS]
