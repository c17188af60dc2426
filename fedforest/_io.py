"""Saving and loading fitted estimators in the safe file format of :mod:`fedforest._tree`.

A model file is data, not code: it is read with ``allow_pickle=False`` and every array is
validated before use; a foreign, truncated or pickled file raises ``ValueError``.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ._tree import load_forest, save_forest
from .protocol import CommunicationLedger

__all__ = ["save_model", "load"]


def _estimators() -> dict[str, type]:
    from .forest import FedForestClassifier, FedForestRegressor

    return {"FedForestRegressor": FedForestRegressor, "FedForestClassifier": FedForestClassifier}


def _json_param(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return value.item()
    return None  # e.g. a RandomState instance: the fitted trees do not depend on it any more


def save_model(model: Any, path: str | os.PathLike[str]) -> None:
    """Write a fitted fedforest estimator to ``path`` (no pickle)."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model, "trees_")
    kind = type(model).__name__
    names = getattr(model, "feature_names_in_", None)
    classes = getattr(model, "classes_", None)
    header = {
        "kind": kind,
        "params": {k: _json_param(v) for k, v in model.get_params().items()},
        "n_features_in": int(model.n_features_in_),
        "feature_names_in": None if names is None else [str(n) for n in names],
        "classes": None if classes is None else np.asarray(classes).tolist(),
        "oob_score": getattr(model, "oob_score_", None),
        "n_clients": int(getattr(model, "n_clients_", 0)),
        "communication": model.communication_.to_dict(),
    }
    save_forest(
        path,
        header,
        model.trees_,
        extra={"feature_importances": np.asarray(model.feature_importances_)},
    )


def load(path: str | os.PathLike[str]) -> Any:
    """Load a model written by ``model.save(path)``.

    Raises
    ------
    ValueError
        If the file is not a valid fedforest model (foreign, truncated, pickled, or with
        arrays out of range).
    """
    header, trees, extra = load_forest(path)
    kinds = _estimators()
    kind = header.get("kind")
    if kind not in kinds:
        raise ValueError(f"cannot load model file {str(path)!r}: unknown model kind {kind!r}.")
    cls = kinds[kind]
    try:
        model = cls(**{k: v for k, v in header["params"].items() if k in cls().get_params()})
        d = int(header["n_features_in"])
        importances = np.asarray(extra["feature_importances"], dtype=np.float64)
        if importances.shape != (d,):
            raise ValueError(f"feature_importances has shape {importances.shape}, expected ({d},)")
        n_values = trees[0].value.shape[1]
        classes = header["classes"]
        if (
            (classes is None) != (kind == "FedForestRegressor")
            or (classes is not None and len(classes) != n_values)
            or (classes is None and n_values != 1)
        ):
            raise ValueError("class list does not match the trees' values")
        if any(t.value.shape[1] != n_values for t in trees):
            raise ValueError("trees disagree on the number of outputs")
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"cannot load model file {str(path)!r}: invalid content ({exc}).") from exc
    model.trees_ = trees
    model.n_features_in_ = d
    if header["feature_names_in"] is not None:
        model.feature_names_in_ = np.asarray(header["feature_names_in"], dtype=object)
    model.feature_importances_ = importances
    model.communication_ = CommunicationLedger.from_dict(header["communication"])
    model.n_clients_ = header.get("n_clients", 0)
    if header.get("oob_score") is not None:
        model.oob_score_ = float(header["oob_score"])
    if classes is not None:
        model.classes_ = np.asarray(classes)
        model.n_classes_ = len(classes)
    model._pack()
    return model
