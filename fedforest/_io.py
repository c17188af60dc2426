"""Saving and loading fitted estimators in the safe file format of :mod:`fedforest.tree.io`.

A model file is data, not code: it is read with ``allow_pickle=False`` and every array is
validated before use; a foreign, truncated or pickled file raises ``ValueError``.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._common import is_int_in
from .federated.label_dtypes import label_dtype, label_dtype_problem, labels_array
from .federated.protocol import KINDS, CommunicationLedger
from .tree.arrays import Tree
from .tree.io import load_forest, save_forest

__all__ = ["MODEL_KINDS", "load_model", "save_model"]


#: The estimator kinds a model file may hold (the class names, as written in the header).
MODEL_KINDS = ("FedForestRegressor", "FedForestClassifier")
#: The fields of a model's header (``save_model``'s, and ``oob_score`` of files written
#: before its extra array): any other is refused, naming it (a newer fedforest's, or damage).
_HEADER_FIELDS = (
    "kind", "params", "n_features_in", "feature_names_in", "classes", "classes_dtype",
    "n_outputs", "n_clients", "clients", "categories", "dropped_clients", "dropped_reasons",
    "communication", "privacy_report", "oob_score",
)  # fmt: skip
#: The extra arrays a model file may hold (``extra/<name>``).
_EXTRA_ARRAYS = ("feature_importances", "oob_score")
#: A dropped client's reason (``federation.drop_reason``): a type name, a protocol step.
_REASON = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,99}} in ({'|'.join(KINDS)})")


def _json_param(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return _json_param(value.item())
    if isinstance(value, dict):  # class_weight: [label, weight] pairs (JSON keys are text)
        pairs = [[_json_param(k), _json_param(v)] for k, v in value.items()]
        return {"pairs": pairs} if all(None not in pair for pair in pairs) else None
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim == 1):
        # monotonic_cst, categorical_features, classes: a list of scalars; a multi-output
        # classifier's classes and class_weight: one list or one dict of pairs per output
        items = [_json_param(v) for v in value]
        if all(isinstance(v, (bool, int, float, str)) for v in items):
            return items
        if items and all(_one_output_param(v) for v in items):
            return items
        return None
    return None  # e.g. a RandomState instance: the fitted trees do not depend on it any more


def _one_output_param(item: Any) -> bool:
    """An output's entry of a multi-output parameter as written: scalars, or pairs."""
    if isinstance(item, list):
        return all(isinstance(v, (bool, int, float, str)) for v in item)
    return isinstance(item, dict) and set(item) == {"pairs"}


def _param_from_json(name: str, value: Any) -> Any:
    """Inverse of :func:`_json_param` for the values it turns into another shape."""
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return [_param_from_json(name, v) for v in value]  # class_weight: a dict per output
    if isinstance(value, dict):
        pairs = value.get("pairs")
        if set(value) != {"pairs"} or not isinstance(pairs, list):
            # save writes every dict as its pairs: a mapping of another shape is not its own
            raise ValueError(f"parameter {name!r} is a mapping that is not {{'pairs': [...]}}")
        if name == "categories":  # declared levels: [column, [levels...]] pairs
            if not all(
                isinstance(p, list)
                and len(p) == 2
                and isinstance(p[0], (int, str))
                and isinstance(p[1], list)
                and all(isinstance(v, (bool, int, float, str)) for v in p[1])
                for p in pairs
            ):
                raise ValueError(f"parameter {name!r} holds malformed [column, levels] pairs")
            return {column: levels for column, levels in pairs}
        if not all(
            isinstance(p, list)
            and len(p) == 2
            and isinstance(p[0], (bool, int, float, str))
            and isinstance(p[1], (int, float))
            and not isinstance(p[1], bool)
            for p in pairs
        ):
            raise ValueError(f"parameter {name!r} holds malformed [label, weight] pairs")
        return {label: float(weight) for label, weight in pairs}
    return value


def save_model(model: Any, path: str | os.PathLike[str]) -> None:
    """Write a fitted fedforest estimator to ``path`` (no pickle).

    Stored: the hyperparameters, the trees, ``n_features_in_``, ``feature_names_in_``,
    ``classes_``, ``feature_importances_``, ``oob_score_``, ``n_clients_``,
    ``dropped_clients_`` and the communication ledger. Per-training-row arrays (``oob_prediction_``,
    ``oob_decision_function_``) are not: a model file carries nothing row by row.
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model, "trees_")
    kind = type(model).__name__
    if kind not in MODEL_KINDS:
        raise TypeError(f"save_model stores fedforest estimators only, got {kind}.")
    names = getattr(model, "feature_names_in_", None)
    classes = getattr(model, "classes_", None)
    _check_label_kind(classes)
    header = {
        "kind": kind,
        # A callable oob_score is code, not data: the file says True (its score is saved).
        "params": {
            k: True if k == "oob_score" and callable(v) else _json_param(v)
            for k, v in model.get_params().items()
        },
        "n_features_in": int(model.n_features_in_),
        "feature_names_in": None if names is None else [str(n) for n in names],
        "classes": _class_list(classes),
        # classes_' dtype (scikit-learn's: y's), which JSON's labels lose; None: a regressor.
        "classes_dtype": None if classes is None else label_dtype(_first_output(classes)),
        "n_outputs": int(getattr(model, "n_outputs_", 1)),
        "n_clients": int(getattr(model, "n_clients_", 0)),
        "clients": [str(c) for c in getattr(model, "clients_", [])],
        "categories": {str(j): list(v) for j, v in getattr(model, "categories_", {}).items()},
        "dropped_clients": [[str(c), int(r)] for c, r in getattr(model, "dropped_clients_", [])],
        "dropped_reasons": dict(getattr(model, "dropped_reasons_", {})),
        "communication": model.communication_.to_dict(),
        "privacy_report": getattr(model, "privacy_report_", None),
    }
    importances = np.asarray(model.feature_importances_, dtype=np.float64)
    if getattr(model, "split_on_client", False):  # d + 1 entries, the client index H last
        importances = np.append(importances, float(getattr(model, "client_importance_", 0.0)))
    extra = {"feature_importances": importances}
    if hasattr(model, "oob_score_"):
        # An array, not a header field: the score may be NaN, which JSON cannot hold.
        extra["oob_score"] = np.asarray([model.oob_score_], dtype=np.float64)
    save_forest(path, header, model.trees_, extra=extra)


def load_model(path: str | os.PathLike[str], estimators: dict[str, type]) -> Any:
    """Load a model written by ``model.save(path)`` as one of ``estimators`` (kind -> class).

    Only arrays and a JSON header are read (``allow_pickle=False``); every field is
    checked against the others before the estimator is built.

    Raises
    ------
    ValueError
        If the file is not a valid fedforest model (foreign, truncated, pickled, or with
        arrays out of range or inconsistent with its header).
    """
    header, trees, extra = load_forest(path)
    if header.get("kind") == "SwarmShareBundle":  # swarm/bundle.py's BUNDLE_KIND (a layer up)
        raise ValueError(  # a good file of another kind: no advice to re-save it
            f"cannot load model file {os.fspath(path)!r}: it is a swarm share bundle "
            "(Peer.share().save()), not a model; read it with fedforest.swarm.ShareBundle.load "
            "or load_bundles."
        )
    if unknown := sorted(set(header) - set(_HEADER_FIELDS)):  # skipped, it loaded silently
        raise ValueError(
            f"cannot load model file {os.fspath(path)!r}: its header has fields {unknown} "
            "that this fedforest does not know: a newer fedforest wrote it? Upgrade fedforest "
            "to load it (or, if not, the file is damaged)."
        )
    params = header.get("params")
    if isinstance(params, dict):
        # A parameter no estimator of this version has (dropped silently: get_params and
        # clone lost it); another kind's (a forged kind) is left to the checks below.
        known = {name for cls in estimators.values() for name in cls().get_params()}
        if unknown := sorted(set(params) - known):
            raise ValueError(
                f"cannot load model file {os.fspath(path)!r}: its parameters {unknown} are "
                "not parameters of this fedforest's estimators: a newer fedforest wrote it? "
                "Upgrade fedforest to load it."
            )
    try:
        return _build(header, trees, extra, estimators)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"cannot load model file {os.fspath(path)!r}: invalid content ({exc}). Was it "
            "written by fedforest's save()? Re-create it by saving the fitted model again."
        ) from exc


def _build(
    header: dict[str, Any],
    trees: list[Tree],
    extra: dict[str, NDArray[Any]],
    kinds: dict[str, type],
) -> Any:
    """The estimator described by a loaded file; raises on any inconsistency."""
    kind = header.get("kind")
    if kind not in kinds:
        raise ValueError(f"unknown model kind {kind!r}, expected one of {sorted(kinds)}")
    cls = kinds[kind]
    params = header["params"]
    if not isinstance(params, dict):
        raise ValueError(f"params is a {type(params).__name__}, expected a dict")
    known = cls().get_params()
    if "privacy" not in params:
        # Files from before the privacy levels (0.1.0) hold forests of the paper's protocol.
        params = {**params, "privacy": "none"}
    model = cls(**{k: _param_from_json(k, v) for k, v in params.items() if k in known})
    model._validate_params()
    d = header["n_features_in"]
    if not is_int_in(d, 1):
        raise ValueError(f"n_features_in {d!r} is not a positive integer")
    names = header["feature_names_in"]
    if names is not None and (
        not isinstance(names, list)
        or len(names) != d
        or not all(isinstance(n, str) for n in names)
        or len(set(names)) != d
    ):
        raise ValueError(f"feature_names_in is not a list of {d} distinct strings")
    unknown = sorted(set(extra) - set(_EXTRA_ARRAYS))
    if unknown:
        raise ValueError(f"unexpected arrays {['extra/' + k for k in unknown]}")
    importances = _importances(extra, d)
    clients = header.get("clients", [])
    if not isinstance(clients, list) or not all(isinstance(c, str) for c in clients):
        raise ValueError("clients is not a list of client names")
    _check_client_codes(trees, d, len(clients))
    categories = _categories(header.get("categories", {}), d, trees)
    n_outputs = header.get("n_outputs", 1)  # files from before multi-output: one
    if not is_int_in(n_outputs, 1):
        raise ValueError(f"n_outputs {n_outputs!r} is not an integer >= 1")
    is_classifier = kind == "FedForestClassifier"
    classes: list[NDArray[Any]] | NDArray[Any] | None
    if is_classifier and n_outputs > 1:
        classes = _output_classes(header["classes"], n_outputs, trees)
    else:
        classes = _classes(header["classes"], is_classifier, trees)
    n_values = trees[0].value.shape[1]
    if classes is None and n_outputs != n_values:
        raise ValueError(
            f"a regressor with n_outputs {n_outputs!r} has {n_values} values per node (one per "
            "output)"
        )
    if not isinstance(header["communication"], dict):
        raise ValueError("communication is not a dict of round records")
    ledger = CommunicationLedger.from_dict(header["communication"])
    n_clients = header.get("n_clients", 0)
    if not is_int_in(n_clients):
        raise ValueError(f"n_clients {n_clients!r} is not a non-negative integer")

    model.trees_ = trees
    model.n_features_in_ = d
    if names is not None:
        model.feature_names_in_ = np.asarray(names, dtype=object)
    model.feature_importances_ = importances[:d]  # a (d + 1,) array: H's share last
    model.client_importance_ = float(importances[d:].sum())
    model.communication_ = ledger
    model.n_clients_ = n_clients
    model.clients_ = np.asarray(clients, dtype=object)
    model.categories_ = categories
    model.dropped_clients_ = _dropped_clients(header.get("dropped_clients", []))
    # Files before the reasons: none (the clients and rounds are there).
    model.dropped_reasons_ = _dropped_reasons(header.get("dropped_reasons", {}), model)
    report = header.get("privacy_report")
    if report is not None:
        model.privacy_report_ = _privacy_report(report)
    if "oob_score" in extra:
        oob = np.asarray(extra["oob_score"])
        if oob.shape != (1,) or oob.dtype.kind != "f":
            raise ValueError(f"oob_score is {oob.dtype} {oob.shape}, expected one float")
        model.oob_score_ = float(oob[0])
    elif isinstance(header.get("oob_score"), float):  # files written before the extra array
        model.oob_score_ = header["oob_score"]
    if classes is not None:
        classes = _typed_classes(header.get("classes_dtype"), header["classes"], classes)
        model.classes_ = classes
        model.n_classes_ = [len(c) for c in classes] if isinstance(classes, list) else len(classes)
    model._pack()
    return model


def _privacy_report(raw: Any) -> dict[str, Any]:
    """A stored ``privacy_report_``: a flat dict of JSON scalars."""
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and (v is None or isinstance(v, (bool, int, float, str)))
        for k, v in raw.items()
    ):
        raise ValueError("privacy_report is not a flat mapping of names to numbers or strings")
    return dict(raw)


def _dropped_clients(dropped: Any) -> list[tuple[str, int]]:
    """``[[name, round], ...]`` from the header as (name, round) pairs."""
    if not isinstance(dropped, list) or not all(
        isinstance(d, list)
        and len(d) == 2
        and isinstance(d[0], str)
        and isinstance(d[1], int)
        and not isinstance(d[1], bool)
        for d in dropped
    ):
        raise ValueError("dropped_clients is not a list of [client name, round] pairs")
    return [(name, r) for name, r in dropped]


def _dropped_reasons(raw: Any, model: Any) -> dict[str, str]:
    """``{name: reason}``: a dropped client's, "<exception type> in <protocol step>"."""
    names = {name for name, _ in model.dropped_clients_}
    if not isinstance(raw, dict) or not all(
        name in names and isinstance(why, str) and _REASON.fullmatch(why) is not None
        for name, why in raw.items()
    ):
        raise ValueError(
            "dropped_reasons is not a map of dropped clients to '<exception type> in <step>'"
        )
    return dict(raw)


def _categories(raw: Any, d: int, trees: list[Tree]) -> dict[int, list[Any]]:
    """Category lists by feature; set splits on a feature must use its codes only."""
    if not isinstance(raw, dict):
        raise ValueError("categories is not a dict of category lists")
    out: dict[int, list[Any]] = {}
    for key, values in raw.items():
        if not str(key).isdigit() or not 0 <= int(key) < d or not isinstance(values, list):
            raise ValueError(f"categories has an invalid entry for feature {key!r}")
        known = [v for v in values if v is not None]  # null: the missing-value category
        if (
            not all(isinstance(v, (str, int, float)) for v in known)
            or any(isinstance(v, float) and not np.isfinite(v) for v in known)
            or len({isinstance(v, str) for v in known}) > 1
            or len(values) - len(known) > 1
            or len({(type(v) is str, v) for v in known}) != len(known)
        ):
            raise ValueError(
                f"categories of feature {key} are not distinct strings or numbers "
                "(and at most one null)"
            )
        out[int(key)] = values
    for t, tree in enumerate(trees):
        for node in np.flatnonzero((tree.set_size > 0) & (tree.feature < d)):
            j = int(tree.feature[node])
            codes = np.concatenate(tree.split_set(int(node)))
            if j not in out or codes.max() >= len(out[j]):
                raise ValueError(f"tree {t}, node {node} splits on unknown categories of {j}")
    return out


def _check_client_codes(trees: list[Tree], d: int, n_clients: int) -> None:
    """Splits on the client index H must name clients the model knows."""
    for t, tree in enumerate(trees):
        for node in np.flatnonzero(tree.feature == d):
            left, right = tree.split_set(int(node))
            codes = np.concatenate([left, right])
            if codes.size and codes.max() >= n_clients:
                raise ValueError(
                    f"tree {t}, node {node} splits on client {codes.max()} of {n_clients}"
                )


def _importances(extra: dict[str, NDArray[Any]], d: int) -> NDArray[np.float64]:
    """``d`` importances, or ``d + 1`` (the client H last) when the forest may split on H."""
    imp = extra.get("feature_importances")
    if imp is None:
        raise ValueError("the array extra/feature_importances is missing")
    if (
        imp.dtype.kind != "f"
        or imp.shape not in ((d,), (d + 1,))
        or not np.all(np.isfinite(imp))
        or (imp < 0).any()
    ):
        raise ValueError(
            f"feature_importances is {imp.dtype} {imp.shape}, expected ({d},) or ({d + 1},) "
            "finite floats >= 0"
        )
    return np.asarray(imp, dtype=np.float64)


def _check_label_kind(classes: Any) -> None:
    """Refuse labels a file cannot give back, before anything is written.

    Dates, durations and bytes (``fit`` takes them, as scikit-learn's forests do): dates
    loaded as their integers, silently, and durations and bytes failed in the header's writer.
    """
    for labels in classes if isinstance(classes, list) else [classes]:
        if labels is not None and np.asarray(labels).dtype.kind in "MmS":
            raise ValueError(
                f"classes_ has dtype {np.asarray(labels).dtype}, which a model file cannot "
                "keep (it keeps labels as text, numbers or bools): fit on y as text or "
                "integers (y.astype(str), say) to save the model."
            )


def _class_list(classes: Any) -> list[Any] | None:
    """``classes_`` for the header: a list of labels, or one list per output."""
    if classes is None:
        return None
    if isinstance(classes, list):  # multi-output: one array of labels per output
        return [np.asarray(c).tolist() for c in classes]
    return list(np.asarray(classes).tolist())


def _first_output(classes: Any) -> NDArray[Any]:
    return np.asarray(classes[0] if isinstance(classes, list) else classes)


def _typed_classes(code: Any, raw: list[Any], classes: Any) -> Any:
    """The checked ``classes`` in the dtype ``classes_dtype`` says (files before it: NumPy's)."""
    if code is None:
        return classes
    multi = isinstance(classes, list)
    flat = [v for c in raw for v in c] if multi else raw
    if (why := label_dtype_problem(code, flat)) is not None:
        raise ValueError(f"classes_dtype {why}")
    return [labels_array(c, code) for c in raw] if multi else labels_array(raw, code)


def _output_classes(classes: Any, n_outputs: int, trees: list[Tree]) -> list[NDArray[Any]]:
    """A multi-output classifier's class lists, one per output, checked against the trees.

    Each tree's values hold one block of class proportions per output (each summing to 1).
    """
    if not isinstance(classes, list) or len(classes) != n_outputs:
        raise ValueError(f"a classifier with n_outputs {n_outputs} needs {n_outputs} class lists")
    if any(not isinstance(c, list) or not c for c in classes):
        raise ValueError("each output's classes must be a non-empty list")
    sizes = [len(c) for c in classes]
    labels = [_classes(c, True, trees, n_values=len(c), check_values=False) for c in classes]
    if any(t.value.shape[1] != sum(sizes) for t in trees):
        raise ValueError(
            f"trees hold {trees[0].value.shape[1]} values per node, not {sum(sizes)} (one per "
            "class of every output)"
        )
    starts = np.cumsum([0, *sizes[:-1]])
    for t, tree in enumerate(trees):
        value = tree.value
        sums = np.add.reduceat(value, starts, axis=1)
        if (value < 0).any() or (value > 1).any() or not np.allclose(sums, 1.0):
            raise ValueError(
                f"tree {t} has class proportions outside [0, 1] or an output's not summing to 1"
            )
    return [np.asarray(c) for c in labels]


def _classes(
    classes: Any,
    is_classifier: bool,
    trees: list[Tree],
    n_values: int | None = None,
    check_values: bool = True,
) -> NDArray[Any] | None:
    """The class labels, checked against the model kind and the trees' values.

    ``n_values``/``check_values``: one output's labels of a multi-output classifier (its
    block of the values is checked by the caller).
    """
    if n_values is None:
        n_values = trees[0].value.shape[1]
    if any(t.value.shape[1] != trees[0].value.shape[1] for t in trees):
        raise ValueError("trees disagree on the number of outputs")
    if not is_classifier:
        if classes is not None:  # one value per output and node (multi-output: several)
            raise ValueError("a regressor has no class list")
        return None
    if not isinstance(classes, list) or len(classes) != n_values:
        raise ValueError(f"a classifier needs a list of {n_values} class labels, one per value")
    if not all(isinstance(c, (bool, int, float, str)) for c in classes):
        raise ValueError("class labels must be numbers or strings")
    labels = np.asarray(classes)
    if labels.ndim != 1 or np.unique(labels).size != labels.size:
        raise ValueError("class labels must be distinct")
    for t, tree in enumerate(trees if check_values else []):
        value = tree.value
        if (value < 0).any() or (value > 1).any() or not np.allclose(value.sum(axis=1), 1.0):
            raise ValueError(f"tree {t} has class proportions outside [0, 1] or not summing to 1")
    return labels
