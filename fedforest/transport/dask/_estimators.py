"""The estimators on Dask collections: fit through a DaskFederation, predict per partition.

``FedForestRegressor.fit`` / ``FedForestClassifier.fit`` and their ``predict``,
``predict_proba``, ``predict_log_proba`` and ``apply`` come here when given a Dask
collection (``fedforest.forest`` imports this module only then). The estimator is used
through its public methods only, so this module does not import ``fedforest.forest``.
"""

from __future__ import annotations

import copy
from typing import Any

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..._inputs import _declared_classes, check_targets, codes_into
from ...federated.client_targets import as_scikit_learn_reads
from ...federated.domains import type_hint
from ._collections import PARTITIONS_AS, is_dask_collection, row_blocks
from .federation import DaskFederation

__all__ = ["fit", "map_method", "score"]


def fit(model: Any, X: Any, y: Any, client_ids: Any) -> Any:
    """``model.fit(X, y, client_ids=...)`` for Dask collections, through a DaskFederation.

    ``client_ids``: None or ``"partition"`` (one client per partition, named by its
    number), ``"worker"`` (one per worker) or a Dask collection of labels partitioned as X.
    """
    if not (is_dask_collection(X) and is_dask_collection(y)):
        raise ValueError(
            f"X is a {_kind(X)} and y a {_kind(y)}: give both as Dask collections "
            "(partitioned alike), or both in memory."
        )
    if isinstance(client_ids, str) or client_ids is None:
        partitions_as = "partition" if client_ids is None else client_ids
        if partitions_as not in PARTITIONS_AS:
            raise ValueError(
                f"client_ids={client_ids!r}: for Dask input give a Dask collection of labels "
                f"partitioned as X (a column: client_ids=ddf[{client_ids!r}], and "
                f"X=ddf.drop(columns={client_ids!r}) unless it is a feature too), or one of "
                f"{PARTITIONS_AS} (a client per partition or per worker)."
            )
        labels = None
    elif is_dask_collection(client_ids):
        partitions_as, labels = "partition", client_ids
    else:
        raise ValueError(
            f"client_ids is a {type(client_ids).__name__}; with Dask X give a Dask collection "
            f"of labels partitioned as X, or one of {PARTITIONS_AS}."
        )
    if callable(model.oob_score):
        raise ValueError(
            "A callable oob_score needs every row's out-of-bag prediction in one place; on "
            "Dask they stay on the workers, which return only sums: use oob_score=True."
        )
    model._validate_params()  # before any actor is built
    classes = None
    if getattr(model, "_task", None) == "classification":
        y, classes = _label_codes(y, getattr(model, "classes", None))
    fed = DaskFederation.from_collections(
        X,
        y,
        client_ids=labels,
        partitions_as=partitions_as,
        categorical_features=model.categorical_features,
    )
    # The labels reached this process: under "secure"/"dp" it declares them, as fit on
    # rows in memory does (no client names any; a label few rows hold is a class).
    model._dask_labels = classes
    try:
        model.fit_federated(fed)
    finally:
        fed.close()
        del model._dask_labels
    if classes is not None:
        # The clients held codes 0..K-1, as in fit on rows in memory: back to the labels.
        model._set_classes(model._fit_class_list, classes)
    return model


def _kind(obj: Any) -> str:
    """The library and class of ``obj``: "dask DataFrame", "pandas Series", "numpy ndarray".

    Dask's and pandas' classes share their names: "X is a DataFrame and y a Series" did
    not say which was which.
    """
    package = type(obj).__module__.partition(".")[0]
    return type(obj).__name__ if package == "builtins" else f"{package} {type(obj).__name__}"


def _label_codes(y: Any, declared: Any = None) -> tuple[Any, NDArray[Any]]:
    """Class labels as codes into the sorted labels, computed on the workers.

    As ``fit`` on rows in memory, the clients receive codes 0..K-1 (the labels seed the
    bootstrap under ``privacy="secure"``, so codes keep both fits' forests equal). Without
    ``declared`` (the estimator's ``classes``) the distinct labels reach this process; with
    it, nothing of y does: each worker codes its rows into the declared labels (sorted, as
    ``fit`` on rows in memory does) and refuses a label outside them.
    """
    if isinstance(y, dd.DataFrame):
        row_blocks(y, "y", ndim=1)  # one column, or a ValueError
        y = y.iloc[:, 0]
    if declared is not None:
        listed = _declared_classes(declared)
        if listed and isinstance(listed[0], list):
            raise ValueError(
                "classes gives one list per output, but y on Dask is one column (multi-output "
                "classification on Dask collections is not supported); give one list of labels."
            )
        classes = np.asarray(listed)
        row_blocks(y, "y", ndim=1)  # one column, or a ValueError
        encode: Any = _encode_declared
    else:
        blocks = row_blocks(y, "y", ndim=1)
        per_block = dask.compute(*[dask.delayed(_distinct)(b, i) for i, b in enumerate(blocks)])
        # Text labels in one partition and numbers in another: the message of the rows in
        # memory (np.unique's TypeError named nothing).
        pooled = [np.asarray(v, object) for v in per_block]
        check_targets(None, np.concatenate(pooled) if pooled else pooled, "classification")
        classes = np.unique(np.concatenate(per_block)) if per_block else np.zeros(0)
        check_classification_targets(classes)
        encode = _encode
    if isinstance(y, dd.Series):
        return y.map_partitions(encode, classes, meta=(y.name, "int64")), classes
    return y.map_blocks(encode, classes, dtype=np.int64), classes


def _distinct(part: Any, index: int) -> NDArray[Any]:
    """One partition's distinct labels (run where it lives).

    pandas' nullable labels (``Int64``, ``boolean``) are floats, as ``fit`` on the rows in
    memory and scikit-learn read them (``classes_`` was ``[0, 1]`` or ``[False, True]``).
    A missing text label is refused as ``fit`` on the rows in memory refuses it, then the
    partition named (it was NumPy's "TypeError: boolean value of NA is ambiguous").
    """
    labels = as_scikit_learn_reads(part)
    try:
        check_targets(None, labels, "classification")
    except ValueError as exc:
        raise ValueError(f"{exc} (Partition {index} of y.)") from None
    return np.unique(labels)


def _encode(part: Any, classes: NDArray[Any]) -> Any:
    """One partition's labels as codes (run where it lives)."""
    codes = np.searchsorted(classes, as_scikit_learn_reads(part)).astype(np.int64)
    return pd.Series(codes, index=part.index, name=part.name) if hasattr(part, "index") else codes


def _encode_declared(part: Any, classes: NDArray[Any]) -> Any:
    """One partition's labels as codes into the declared ``classes`` (run where it lives).

    A label outside them is a ``ValueError`` in the words of a Flower client's handshake
    (``federated.domains.check_declared_labels``), which names no label; nor does it count
    the rows (it did: "3 row(s) of y hold a label ...").
    """
    codes = codes_into(np.asarray(part), classes.tolist())
    if (codes < 0).any():
        found = set(pd.unique(np.asarray(part, dtype=object).ravel()[codes < 0]).tolist())
        raise ValueError(
            "y on Dask: label(s) of y are not among the declared classes; declare every "
            f"label (classes=[...]).{type_hint(found, set(classes.tolist()))}"
        )
    return pd.Series(codes, index=part.index, name=part.name) if hasattr(part, "index") else codes


def map_method(model: Any, method: str, X: Any, client_ids: Any) -> Any:
    """``model.<method>(X)`` partition by partition, the model sent once to each worker.

    Returns a Dask Array: rows chunked as X's (a DataFrame's partitions give chunks of
    unknown length, as ``DataFrame.to_dask_array()``), one column per class (probabilities)
    or per tree (``apply``).
    """
    check_is_fitted(model, "trees_")
    row_blocks(X, "X", ndim=2)  # a ValueError unless a Dask DataFrame or 2-D Array
    if client_ids is not None:
        if not is_dask_collection(client_ids):
            raise ValueError(
                f"client_ids is a {type(client_ids).__name__}; with Dask X give a Dask "
                "collection of labels partitioned as X (or None)."
            )
        row_blocks(client_ids, "client_ids", ndim=1)
    # Feature names checked here, once (scikit-learn's warning or error at the call): on
    # the workers each partition warned again, or in a worker's log where no one sees it.
    sample = X._meta if isinstance(X, dd.DataFrame) else np.empty((0, X.shape[1]))
    validate_data(model, sample, skip_check_array=True, reset=False)
    dtype, width = _output(model, method)
    ref = _shipped(model)
    meta = np.empty((0, width) if width else (0,), dtype)
    if isinstance(X, da.Array):
        X = X.rechunk({1: -1})
        # A column beside X's rows: map_blocks aligns a 1-D array with X's last axis (as
        # NumPy broadcasts), which gave every block all the labels ("client_ids has shape
        # (600,); expected (200,)").
        ids = [] if client_ids is None else [_ids_like(client_ids, X)[:, None]]
        shape: dict[str, Any] = {"chunks": (X.chunks[0], (width,))} if width else {"drop_axis": 1}
        return da.map_blocks(_run, X, ref, method, *ids, dtype=dtype, meta=meta, **shape)
    if client_ids is not None and not isinstance(client_ids, dd.Series):
        raise ValueError(
            f"client_ids is a {type(client_ids).__name__}; with a Dask DataFrame X give a "
            "Dask Series of labels partitioned as X."
        )
    parts: list[Any] = [X] if client_ids is None else [X, client_ids]
    return dd.map_partitions(
        _run, parts[0], ref, method, *parts[1:], meta=meta, align_dataframes=False
    )


def _output(model: Any, method: str) -> tuple[np.dtype[Any], int]:
    """The method's output dtype and columns (0 for one value per row)."""
    if method == "apply":
        return np.dtype(np.int64), len(model.trees_)
    if method in ("predict_proba", "predict_log_proba"):
        return np.dtype(np.float64), len(model.classes_)
    classes = getattr(model, "classes_", None)
    return (np.dtype(np.float64) if classes is None else np.asarray(classes).dtype), 0


def _shipped(model: Any) -> Any:
    """The model as one piece of data every task reads: scattered to every worker once.

    A shallow copy with ``n_jobs=1``: a worker runs one partition per thread, and
    joblib inside a worker process warned (to the worker's stderr, once per partition)
    that it set ``n_jobs=1`` anyway.
    """
    model = copy.copy(model)
    model.n_jobs = 1
    try:
        from distributed import get_client

        client = get_client()
    except (ImportError, ValueError):
        return dask.delayed(model, pure=True)  # no cluster: Dask's local schedulers
    if client.status in ("closing", "closed"):
        # Closed, yet still the current client (inside its ``with`` block): the graph is
        # built, and computing it meets Dask's own ClosedClientError, as any collection's
        # does (before: "AttributeError: 'NoneType' object has no attribute 'scatter'").
        return dask.delayed(model, pure=True)
    return client.scatter(model, broadcast=True, hash=False)


def _ids_like(ids: Any, X: da.Array) -> da.Array:
    """Client labels as a 1-D Dask Array chunked as X's rows."""
    if not isinstance(ids, da.Array):
        raise ValueError(
            f"client_ids is a {type(ids).__name__}; with a Dask Array X give a 1-D Dask "
            "Array of labels chunked as X's rows."
        )
    if ids.chunks[0] != X.chunks[0]:
        raise ValueError(
            f"client_ids has row chunks {ids.chunks[0]} but X has {X.chunks[0]}; rechunk it "
            "like X (client_ids.rechunk(X.chunks[0]))."
        )
    return ids


def _run(
    part: Any,
    model: Any,
    method: str,
    ids: Any = None,
    partition_info: Any = None,
    block_info: Any = None,
) -> NDArray[Any]:
    """One partition's output (run on the worker holding it).

    Dask passes ``partition_info`` (a DataFrame's partition) or ``block_info`` (an Array's
    block): a ValueError of the rows (a text in a numeric column, an infinity) names the
    partition, which it did not among a collection's hundreds.
    """
    try:
        return _predicted(part, model, method, ids)
    except ValueError as exc:
        if type(exc) is not ValueError:
            raise
        if partition_info is not None:
            where = int(partition_info["number"])
        elif block_info is not None and None in block_info:
            where = int(block_info[None]["chunk-location"][0])
        else:
            raise
        raise ValueError(f"{exc} (Partition {where} of X.)") from None


def _predicted(part: Any, model: Any, method: str, ids: Any) -> NDArray[Any]:
    """:func:`_run`'s output, the partition's index aside."""
    dtype, width = _output(model, method)
    if len(part) == 0:
        return np.empty((0, width) if width else (0,), dtype)
    labels = None if ids is None else np.asarray(ids).reshape(-1)
    names = getattr(model, "feature_names_in_", None)
    if names is not None and not isinstance(part, pd.DataFrame):
        part = pd.DataFrame(part, columns=names)  # checked by map_method: no warning here
    elif names is None and isinstance(part, pd.DataFrame):
        part = part.set_axis(range(part.shape[1]), axis=1)  # by position, as on the driver
    return np.asarray(getattr(model, method)(part, client_ids=labels))


def score(model: Any, X: Any, y: Any, sample_weight: Any, client_ids: Any) -> float:
    """R^2 or accuracy of ``model.predict(X)`` against ``y``, partition by partition.

    Each partition sends back its weight, mean, squared deviations and squared residuals
    (regressor) or its weight of right predictions (classifier), pooled here: no row and
    no prediction reaches this process. The R^2 is scikit-learn's ``r2_score`` (1 for a
    perfect fit of a constant ``y``, else 0 there) up to the order of the sums.
    """
    classification = getattr(model, "_task", None) == "classification"
    pred = map_method(model, "predict", X, client_ids)
    if pred.ndim != 1:
        raise ValueError("score on Dask collections takes one output (y of one column).")
    preds = list(pred.to_delayed())
    named = {"y": y} if sample_weight is None else {"y": y, "sample_weight": sample_weight}
    blocks = {name: row_blocks(obj, name, ndim=1) for name, obj in named.items()}
    for name, parts in blocks.items():
        if len(parts) != len(preds):
            raise ValueError(
                f"{name} has {len(parts)} partitions but X has {len(preds)}; partition "
                f"{name} as X so each row meets its own."
            )
    weights = blocks.get("sample_weight", [None] * len(preds))
    sums = dask.compute(
        *[
            dask.delayed(_score_sums)(p, t, w, i, classification)
            for i, (p, t, w) in enumerate(zip(preds, blocks["y"], weights, strict=True))
        ]
    )
    if classification:
        total, right = np.sum(sums, axis=0)
        if not total > 0:
            raise ValueError("score: y has no rows (or sample_weight sums to 0).")
        return float(right / total)
    total, mean, squares, residual = 0.0, 0.0, 0.0, 0.0
    for w, m, sq, res in sums:  # Chan et al.'s pooling of means and squared deviations
        if w > 0:
            delta, pooled = m - mean, total + w
            squares += sq + delta * delta * total * w / pooled
            mean += delta * w / pooled
            total, residual = pooled, residual + res
    if not total > 0:
        raise ValueError("score: y has no rows (or sample_weight sums to 0).")
    if squares == 0:
        return 1.0 if residual == 0 else 0.0
    return float(1.0 - residual / squares)


def _score_sums(
    pred: NDArray[Any], truth: Any, weight: Any, index: int, classification: bool
) -> tuple[float, ...]:
    """One partition's sums for :func:`score` (run where it lives)."""
    values = as_scikit_learn_reads(truth) if classification else np.asarray(truth, np.float64)
    values = np.asarray(values).reshape(-1)
    if len(values) != len(pred):
        raise ValueError(
            f"Partition {index}: y has {len(values)} rows but X has {len(pred)}; partition y as X."
        )
    w = np.ones(len(values)) if weight is None else np.asarray(weight, np.float64).reshape(-1)
    if len(w) != len(values):
        raise ValueError(
            f"Partition {index}: sample_weight has {len(w)} rows but X has {len(values)}."
        )
    _refuse_missing(values, "y", index)
    _refuse_missing(w, "sample_weight", index)
    total = float(w.sum())
    if classification:
        return total, float(w[np.asarray(pred) == values].sum())
    if not total > 0:
        return 0.0, 0.0, 0.0, 0.0
    mean = float(np.dot(w, values) / total)
    return (
        total,
        mean,
        float(np.dot(w, (values - mean) ** 2)),
        float(np.dot(w, (values - pred) ** 2)),
    )


def _refuse_missing(values: NDArray[Any], name: str, index: int) -> None:
    """A missing or infinite value of ``name`` in partition ``index``: a ValueError.

    scikit-learn's ``score`` refuses them on the rows in memory ("Input contains NaN.");
    here the sums went on: the score was NaN, or a partition of NaN weights left out.
    """
    bad = ~np.isfinite(values) if values.dtype.kind in "fc" else pd.isna(values)
    if bad.any():
        raise ValueError(
            f"score: {name} holds {int(bad.sum())} missing or infinite value(s) in partition "
            f"{index}; scikit-learn's score refuses them too: drop those rows or fill them."
        )
