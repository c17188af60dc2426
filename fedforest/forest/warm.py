"""Warm start: the fitted state new trees join, and what they must share with it.

The estimators' ``fit`` and ``fit_federated`` read an earlier fit through these (moved out
of ``fedforest/_inputs.py`` at the layout's 800 lines, unchanged).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..federated.server.handshake import check_warm_schema

__all__ = [
    "NOTHING_TO_ADD",
    "NO_NEW_TREES",
    "check_warm_classes",
    "fewer_trees",
    "warm_prior",
    "warm_schema",
]


#: :func:`warm_prior` under warm_start when n_estimators did not grow: nothing to fit.
NOTHING_TO_ADD: dict[str, Any] = {}
#: scikit-learn's warning then, which the caller gives after its settings' (as scikit-learn).
NO_NEW_TREES = "Warm-start fitting without increasing n_estimators does not fit new trees."


def fewer_trees(est: Any) -> bool:
    """Under ``warm_start``, ``n_estimators`` below the fitted trees' count.

    :func:`warm_prior` refuses it; the caller checks its settings first (a class_weight
    preset's warning, the bootstrap's checks, then the refusal: scikit-learn's order).
    """
    return bool(est.warm_start and "trees_" in vars(est) and est.n_estimators < len(est.trees_))


def warm_prior(est: Any) -> dict[str, Any] | None:
    """Under ``warm_start``, the fitted state new trees join (None: grow from scratch).

    :data:`NOTHING_TO_ADD` when ``n_estimators`` did not grow (the caller warns
    :data:`NO_NEW_TREES`); fewer trees refused (:func:`fewer_trees`).
    """
    if not est.warm_start or "trees_" not in vars(est):
        return None
    n_old = len(est.trees_)
    if fewer_trees(est):
        raise ValueError(
            f"n_estimators={est.n_estimators} must be larger or equal to "
            f"len(estimators_)={n_old} when warm_start==True"
        )
    if "_tree_importances" not in vars(est):
        why = "a loaded model file keeps no seed or per-tree importances"
        raise ValueError(f"warm_start cannot add trees here: {why}; fit with warm_start=False.")
    if est.n_estimators == n_old:
        return NOTHING_TO_ADD
    return dict(est.__dict__)  # the fitted state the new trees join (and a failure restores)


def _labels(classes: Any) -> Any:
    """Class labels as plain Python lists (a list of them per output), for comparison."""
    if isinstance(classes, list):
        return [np.asarray(c).tolist() for c in classes]
    return np.asarray(classes).tolist()


def check_warm_classes(warm: dict[str, Any] | None, labels: Any) -> None:
    """Under ``warm_start``, ``fit``'s labels of y must be the earlier trees' ``classes_``.

    The trees hold class proportions by position: labels that differ (one renamed, one
    more or less) gave the earlier trees' columns to other labels, silently, when their
    number matched (scikit-learn's forest does not check either); checked before any
    tree grows.
    """
    if warm is None or "classes_" not in warm or labels is None:
        return
    old, new = _labels(warm["classes_"]), _labels(labels)
    if old != new:
        raise ValueError(
            f"warm_start adds trees to a forest fitted on the classes {old}, but y holds the "
            f"classes {new}; the trees hold class proportions by position. Give y with the "
            "first fit's classes (declare them with classes=[...] when y lacks some), or "
            "set warm_start=False to fit a new forest."
        )


def warm_schema(warm: dict[str, Any], est: Any) -> tuple[Any, ...]:
    """The earlier trees' columns and outputs, as the handshake checks them (``warm_schema``).

    ``fit`` hands its clients arrays, so the names of the new X (``est.feature_names_in_``,
    just set by ``validate_data``; none under ``fit_federated``) are checked here.
    """
    names = warm.get("feature_names_in_")
    cats = warm.get("categories_", {})
    if est._task == "classification":
        n_classes = warm.get("n_classes_", 0)
        n_outputs = len(n_classes) if isinstance(n_classes, list) else 1
    else:
        n_outputs = int(warm["trees_"][0].value.shape[1])
    d = int(warm["n_features_in_"])
    split_on_h = any(bool((t.feature == d).any()) for t in warm["trees_"])
    schema = (
        d,
        None if names is None else tuple(str(n) for n in names),
        tuple((str(j), tuple(cats[j])) for j in sorted(cats)),
        n_outputs,
        tuple(str(c) for c in warm["clients_"]) if split_on_h else None,  # H by position
    )
    now = getattr(est, "feature_names_in_", None)
    if now is not None:
        check_warm_schema(schema, len(now), [str(n) for n in now], None)
    return schema
