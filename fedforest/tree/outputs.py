"""A classifier forest's mean leaf values as scikit-learn's per-output probabilities and labels.

A multi-output classifier's trees hold, per node, one block of class proportions per output
(``n_classes[0]`` columns, then ``n_classes[1]``, ...). scikit-learn's multi-output forests
return a list of per-output arrays from ``predict_proba`` and a (n_samples, n_outputs) array
from ``predict``; these functions give fedforest's the same shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["R2ScoreMixin", "SubsetAccuracyMixin", "most_probable", "oob_proba", "per_output"]


def per_output(
    proba: NDArray[np.float64], n_classes: int | list[int]
) -> NDArray[np.float64] | list[NDArray[np.float64]]:
    """``proba`` (n, sum of n_classes) as one array per output; unchanged for one output."""
    if not isinstance(n_classes, list):
        return proba
    bounds = np.cumsum([0, *n_classes])
    return [proba[:, lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def most_probable(
    proba: NDArray[np.float64] | list[NDArray[np.float64]], classes: Any
) -> NDArray[Any]:
    """The most probable label, shape (n,), or (n, n_outputs) for multi-output (as sklearn).

    Ties go to the first class (``argmax``), as in scikit-learn.
    """
    if not isinstance(proba, list):
        return np.asarray(classes[np.argmax(proba, axis=1)])
    # One dtype for every output (scikit-learn's classes share y's): the widest of theirs.
    dtype = np.result_type(*[np.asarray(c).dtype for c in classes])
    out = np.empty((proba[0].shape[0], len(proba)), dtype=dtype)
    for k, p in enumerate(proba):
        out[:, k] = classes[k].take(np.argmax(p, axis=1), axis=0)
    return out


def oob_proba(pred: NDArray[np.float64], n_classes: int | list[int]) -> NDArray[np.float64]:
    """The out-of-bag class probabilities in scikit-learn's ``oob_decision_function_`` shape.

    (n, n_classes) for one output; (n, max n_classes, n_outputs) for several, an output with
    fewer classes padded with zeros (scikit-learn's layout, whose outputs all have as many
    classes). Rows without an out-of-bag prediction are NaN throughout.
    """
    if not isinstance(n_classes, list):
        return pred
    out = np.zeros((pred.shape[0], max(n_classes), len(n_classes)))
    for k, p in enumerate(per_output(pred, n_classes)):
        out[:, : p.shape[1], k] = p
    out[np.isnan(pred).any(axis=1)] = np.nan
    return out


class SubsetAccuracyMixin:
    """A classifier's ``score``: accuracy, and for multi-output ``y`` the subset accuracy.

    scikit-learn's ``ClassifierMixin.score`` calls ``accuracy_score``, which refuses
    multi-output labels other than 0/1 ("multiclass-multioutput is not supported"); the
    subset accuracy (the share of rows right on every output) is what it gives for 0/1
    labels, computed here for any labels.
    """

    def score(self, X: Any, y: Any, sample_weight: Any = None, *, client_ids: Any = None) -> float:
        """Mean accuracy of ``predict(X)`` against ``y`` (every output right, for 2-D ``y``).

        ``client_ids``: each row's client, for a forest that splits on the client (as
        ``predict``); None: the marginal rule.
        """
        from sklearn.metrics import accuracy_score  # on use, as scikit-learn's own score

        pred = np.asarray(self.predict(X, client_ids=client_ids))  # type: ignore[attr-defined]
        if pred.ndim == 1:
            return float(accuracy_score(y, pred, sample_weight=sample_weight))
        truth = np.asarray(y)
        if truth.shape != pred.shape:
            raise ValueError(f"y has shape {truth.shape}; the predictions have {pred.shape}.")
        return float(np.average(np.all(pred == truth, axis=1), weights=sample_weight))


class R2ScoreMixin:
    """A regressor's ``score``: scikit-learn's R^2, with ``predict``'s ``client_ids``."""

    def score(self, X: Any, y: Any, sample_weight: Any = None, *, client_ids: Any = None) -> float:
        """R^2 of ``predict(X, client_ids=client_ids)`` (the mean over outputs, as scikit-learn).

        ``client_ids``: each row's client, for a forest that splits on the client; None:
        the marginal rule.
        """
        from sklearn.metrics import r2_score  # on use, as scikit-learn's own score

        pred = self.predict(X, client_ids=client_ids)  # type: ignore[attr-defined]
        return float(r2_score(y, pred, sample_weight=sample_weight))
