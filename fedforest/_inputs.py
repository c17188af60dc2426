"""Input handling of the estimators: lengths, columns, categorical codes, declarations.

Validation happens here, once, at the boundary; every error names the argument.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import replace
from types import FrameType
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d, validate_data

from .federated.categorical import (
    column_floats,
    encode,
    encode_counted,
    given_entries,
    is_mask,
    is_missing,
    is_numeric_column,
    named_columns,
    pandas_frame,
    refuse_mixed,
    sort_categories,
    sorted_levels,
)
from .federated.cells import refuse_nested
from .federated.domains import type_hint
from .federated.label_dtypes import labels_array
from .federated.privacy.weight_band import bounded_weights, kept_top
from .federated.server.config import GrowerConfig
from .federated.server.weights import named_class_weights

__all__ = [
    "declared_features",
    "pooled_domains",
    "encode_declared",
    "estimator_config",
    "NOT_FEDERABLE",
    "check_bootstrap",
    "check_federable",
    "check_numeric_columns",
    "check_same_length",
    "check_targets",
    "class_weight_codes",
    "decode_classes",
    "encode_labels",
    "n_columns",
    "n_rows",
    "fit_weights",
    "named",
    "take_rows",
    "validated_rows",
    "weights_back",
    "with_codes",
]


def n_rows(obj: Any) -> int | None:
    """Length of the first axis, or None when ``obj`` has none (left to ``validate_data``)."""
    shape = getattr(obj, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else None
    try:
        return len(obj)
    except TypeError:
        return None


def check_same_length(X: Any, other: Any, name: str, hint: str) -> None:
    """``other`` must have one entry per row of ``X``."""
    n_x, n_other = n_rows(X), n_rows(other)
    if n_x is not None and n_other is not None and n_x != n_other:
        raise ValueError(f"{name} has {n_other} entries but X has {n_x} rows; give {hint}.")


def check_targets(X: Any, y: Any, task: str) -> None:
    """``y`` has one target per row of ``X``; a classifier's text labels mixed with others named.

    scikit-learn's own check fails there with a TypeError that names nothing (None among
    strings: "'<' not supported", a ``pd.NA``: "boolean value of NA is ambiguous"); the
    message is the one each client gives under ``fit_federated``.
    """
    check_same_length(X, y, "y", "one target per row of X")
    labels = np.asarray(y) if task == "classification" else None
    if labels is None or labels.dtype != object:
        return
    kinds = {type(v) for v in labels.ravel().tolist()}
    text = {k for k in kinds if issubclass(k, str)}
    if text and kinds - text:
        found = ", ".join(sorted(k.__name__ for k in kinds))
        raise ValueError(
            f"Mix of label input types (string and number) in y ({found}); a class label "
            "is a string, a number or a bool, never missing."
        )


def check_numeric_columns(X: Any) -> None:
    """Name the first non-numeric column of X (NumPy's own error names none).

    A DataFrame's columns by dtype; an array (or nested lists) of objects or strings by
    trying each column as floats, as ``validate_data`` would ("could not convert string to
    float: 'v'", naming no column, where a DataFrame's text column is categorical).
    """
    if not isinstance(X, pd.DataFrame):
        _check_numeric_array(X)
        return
    for j, (column, dtype) in enumerate(zip(X.columns, X.dtypes, strict=True)):
        if not is_numeric_column(X.iloc[:, j]):
            refuse_mixed(X.iloc[:, j], f"Column {column!r} of X")
            raise ValueError(
                f"Column {column!r} of X has dtype {dtype}; fedforest needs numeric features, "
                "or categorical ones as a pandas 'category' column or listed in "
                "categorical_features."
            )


def _check_numeric_array(X: Any, categorical: Sequence[int] = (), fitted: bool = False) -> None:
    """An array of objects or strings: name its first column (not categorical) of non-numbers.

    ``fitted``: the rows of a fitted model (whose categorical columns are fixed).
    """
    if sparse.issparse(X) or not isinstance(X, (np.ndarray, list, tuple)):
        return
    try:
        arr = np.asarray(X)
    except ValueError:  # ragged: validate_data says so
        return
    if arr.ndim != 2 or arr.dtype.kind not in "OUS":
        return
    for j in range(arr.shape[1]):
        if j in categorical:
            continue
        try:
            arr[:, j].astype(np.float64)
        except (TypeError, ValueError) as exc:
            # NumPy's exception type (a TypeError for a dict: scikit-learn's checks ask it).
            if fitted:
                raise type(exc)(
                    f"Column {j} of X is not numeric ({exc}), but the model was trained on "
                    "it as a numeric feature."
                ) from exc
            refuse_mixed(arr[:, j], f"Column {j} of X", exc)
            raise type(exc)(
                f"Column {j} of X is not numeric ({exc}); fedforest needs numeric features, "
                f"or categorical ones listed in categorical_features (e.g. "
                f"categorical_features=[{j}]) or given as a pandas 'category' column."
            ) from exc


def validated_rows(est: Any, X: Any) -> NDArray[np.float64]:
    """Rows to predict as scikit-learn validates them, categorical columns as the fitted codes.

    A DataFrame's columns are checked against ``feature_names_in_`` first (scikit-learn's
    error): the codes go by position, and a reordered frame gave another column's codes
    and an error blaming the categorical column. A text column is named when the rows
    fail: NumPy's own error ("could not convert string to float: 'True'") names none.
    """
    X = pandas_frame(X)  # pyarrow's or polars' frame: as fit read it
    refuse_nested(X)
    fitted = getattr(est, "feature_names_in_", None)
    if fitted is not None and isinstance(X, pd.DataFrame):
        names = list(X.columns)
        if all(isinstance(c, str) for c in names) and names != list(fitted):
            validate_data(est, X, skip_check_array=True, reset=False)  # raises: names differ
    categories = getattr(est, "categories_", {})
    if not isinstance(X, pd.DataFrame):
        shape = X.shape if hasattr(X, "shape") else np.asarray(X, dtype=object).shape
        if len(shape) == 2 and shape[1] != est.n_features_in_:  # scikit-learn's error first:
            # "Column 3 of X is not numeric ... trained on it as a numeric feature", of a
            # model with 3 columns
            validate_data(est, X, skip_check_array=True, reset=False)
        _check_numeric_array(X, sorted(categories), fitted=True)
    X = with_codes(X, sorted(categories), categories)
    try:
        return np.asarray(
            validate_data(est, X, dtype=np.float64, ensure_all_finite="allow-nan", reset=False)
        )
    except (ValueError, TypeError) as exc:  # a date column: NumPy's DTypePromotionError
        if isinstance(X, pd.DataFrame):  # categorical columns are codes by now
            for column, dtype in zip(X.columns, X.dtypes, strict=True):
                if not pd.api.types.is_numeric_dtype(dtype):
                    raise ValueError(
                        f"Column {column!r} of X has dtype {dtype}, but the model was trained "
                        f"on it as a numeric feature: {exc}"
                    ) from exc
        raise


def n_columns(X: Any) -> int:
    shape = getattr(X, "shape", None)
    if shape is None:
        shape = np.asarray(X, dtype=object).shape
    return int(shape[1]) if len(shape) == 2 else 0


def take_rows(X: Any, mask: NDArray[np.bool_]) -> Any:
    """Rows of a DataFrame or array, keeping raw categorical values."""
    if isinstance(X, pd.DataFrame):
        return X.iloc[np.flatnonzero(mask)]
    return np.asarray(X, dtype=object)[mask]


def named(clients: list[Any], names: Any) -> None:
    """``fit``'s clients of an array given X's column names (``feature_names_in_``).

    They name columns as ``fit_federated``'s clients do (a warning of the secure grids
    named column 'a' "'0'" under ``fit``); names never change a forest.
    """
    for client in clients:
        if client.feature_names is None and names is not None:
            client.feature_names = [str(name) for name in names]


def with_codes(X: Any, cat_cols: list[int], categories: dict[int, list[Any]] | None) -> Any:
    """X with its categorical columns as float codes.

    Codes of ``categories``, or of the values seen here when None (enough to validate
    shapes and names). A SciPy sparse matrix (CSR, CSC, ...) becomes a dense array: its
    implicit entries are zeros (a missing value is NaN, as in scikit-learn); so do the
    sparse columns of a DataFrame (``pd.SparseDtype``: scikit-learn's forests take them,
    its ``validate_data`` with dense-only ``X`` refuses them). With ``categories`` (rows to
    predict), a column's numbers where its levels are text (or text where they are numbers)
    warn, naming the column and the rows: they match no level.
    """
    if sparse.issparse(X):
        X = X.toarray()
    if isinstance(X, pd.DataFrame):  # pandas' sparse columns: dense, as SciPy's
        dense = {c: t.subtype for c, t in X.dtypes.items() if isinstance(t, pd.SparseDtype)}
        X = X.astype(dense) if dense else X
        X = _object_numbers(X, cat_cols)
    if not cat_cols:
        return X
    frame = X.copy() if isinstance(X, pd.DataFrame) else pd.DataFrame(np.asarray(X, dtype=object))
    other = []
    for j in cat_cols:
        raw = np.asarray(frame.iloc[:, j], dtype=object)
        if categories is None:  # the values seen here: no other kind
            frame[frame.columns[j]] = encode(raw, sort_categories(set(raw.tolist())))
            continue
        cats = categories[j]
        frame[frame.columns[j]], n = encode_counted(raw, cats)
        if n:
            kind = "numbers" if isinstance(cats[0], str) else "text"
            other.append(f"{frame.columns[j]!r} ({kind} in {n} of {len(raw)} rows)")
    if other:  # as scikit-learn's encoders with handle_unknown="warn"
        warn_caller(
            f"categorical column(s) {', '.join(other)} of X hold numbers where the model's "
            "levels are text, or text where they are numbers: such a value matches no level, "
            "so those rows take the rule of an unseen category (the marginal rule). Give the "
            "column's values as in training (model.categories_), e.g. X[col].astype(str).",
            UserWarning,
        )
    if isinstance(X, pd.DataFrame):
        return frame
    return frame.to_numpy(dtype=np.float64)


def _object_numbers(X: pd.DataFrame, cat_cols: list[int]) -> pd.DataFrame:
    """A DataFrame's object columns of numbers as floats, ``pd.NA`` (and None) as NaN.

    ``validate_data`` stops at a ``pd.NA`` in such a column with a TypeError from pandas
    that names no column; None and NaN were already missing values. A column of missing
    values only (rows to predict whose feature is unknown) is NaN too.
    """
    found = [
        j
        for j, dtype in enumerate(X.dtypes)
        if dtype.kind == "O"
        and j not in cat_cols
        and (is_numeric_column(X.iloc[:, j]) or X.iloc[:, j].map(is_missing).all())
    ]
    if not found:
        return X
    X = X.copy()
    for j in found:
        X.isetitem(j, column_floats(X.iloc[:, j]))
    return X


#: scikit-learn options that a federation cannot compute exactly from pooled sums, and why.
NOT_FEDERABLE = {
    "absolute_error": (
        "criterion='absolute_error' needs each node's median, which is not a sum of the "
        "clients' statistics: no split can be evaluated exactly from aggregates. Use "
        "'squared_error'"
    ),
    "max_leaf_nodes": (
        "max_leaf_nodes grows trees best-first, one split at a time: a federated round per "
        "split instead of per level. Limit the trees with max_depth or min_samples_leaf"
    ),
}


def warn_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` pointing at the first frame outside fedforest (the user's line)."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame: FrameType | None = sys._getframe(1)
    level = 2  # our caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


#: The smallest ``min_aggregate_rows`` that does not warn (issue 11: at least 10).
SAFE_MIN_ROWS = 10


def warn_low_min_rows(privacy: str, min_aggregate_rows: int | None) -> None:
    """Under "secure"/"dp", warn (UserWarning) when ``min_aggregate_rows`` is below 10.

    Values below 1 are refused by the parameter validation; 1 to 9 are legal (the tests
    compare protocols under equal rules with 1) but weaken what a released sum hides.
    """
    m = min_aggregate_rows
    if privacy == "none" or m is None or m >= SAFE_MIN_ROWS:
        return
    warn_caller(
        f"min_aggregate_rows={m} is below {SAFE_MIN_ROWS}: under privacy={privacy!r} the "
        f"server may then see sums over as few as {m} row(s) (node summaries, the pooled "
        "bins between candidates, category statistics, leaves), and a sum over one row is "
        "that row's value. Leave it None (max(10, 2 * min_samples_leaf)) unless the rows "
        'are not sensitive (docs/privacy.md, "min_aggregate_rows").',
        UserWarning,
    )


def fit_weights(
    weights: NDArray[np.float64] | None, privacy: str
) -> tuple[NDArray[np.float64] | None, int]:
    """``fit``'s sample weights as the clients get them, and the power of two applied.

    The trees depend on the weights' ratios only (scikit-learn's criteria, the weight
    fraction, impurity-decrease and pruning rules are all relative), and a power of two
    scales every sum exactly; but the sums must be representable: weights of 1e-12 fell
    below the secure fixed point's resolution (a forest of single leaves), 1e12 overflowed
    it, and 1e300 overflowed the squared sums under "none". So the largest weight is put in
    [0.5, 1) (:func:`weights_back` undoes it on the fitted trees). Under "dp" a row weighs
    at most 1 (the noise's bound), under "secure" within a band (``weight_band``): the
    weights stay as given, with a warning when the clients will bound some, and when the
    band trims the largest by over 8 bits, the largest they keep is the one put in [0.5, 1).
    """
    if weights is not None and (why := bounded_weights(weights, privacy)) is not None:
        warn_caller(why, UserWarning)
    if weights is None or privacy == "dp":
        return weights, 0
    top = float(weights.max()) if weights.size else 0.0
    if privacy == "secure" and top > 0.0 and (kept := kept_top(weights)) < top * 2.0**-8:
        # The band trims the largest weight by over 8 bits: scaled by it as given, the kept
        # weights lost those bits of the fixed point (all of them at a ratio of 1e12, a
        # refusal). A smaller trim keeps the scaling it had, so its forest.
        top = kept
    if top <= 0.0:
        return weights, 0
    exponent = math.frexp(top)[1]
    return np.ldexp(weights, -exponent), exponent


def weights_back(result: Any, exponent: int) -> Any:
    """The fitted trees' node weights (and per-tree importances) in the given weights' units."""
    if not exponent:
        return result
    trees = [
        replace(tree, weighted_n_node_samples=np.ldexp(tree.weighted_n_node_samples, exponent))
        for tree in result.trees
    ]
    return replace(
        result, trees=trees, tree_importances=np.ldexp(result.tree_importances, exponent)
    )


#: scikit-learn 1.9's deprecation of "friedman_mse" (its wording): it maps to squared_error.
FRIEDMAN_MSE_DEPRECATED = (
    'Value `"friedman_mse"` for `criterion` is deprecated and will be removed in 1.11. '
    'It maps to `"squared_error"` as both were always equivalent. Use '
    '`criterion="squared_error"` to remove this warning.'
)


def criterion_name(criterion: str) -> str:
    """The criterion the server evaluates: scikit-learn's aliases resolved."""
    # "log_loss" is the Shannon entropy; "friedman_mse" has the same best splits as
    # "squared_error" (scikit-learn 1.9 deprecated it, mapping it so).
    return {"log_loss": "entropy", "friedman_mse": "squared_error"}.get(criterion, criterion)


def check_federable(criterion: str, max_leaf_nodes: int | None) -> None:
    """Refuse, saying why, what scikit-learn has and a federation cannot do exactly."""
    if criterion == "friedman_mse":
        warn_caller(FRIEDMAN_MSE_DEPRECATED, FutureWarning)
    if criterion == "absolute_error":
        raise ValueError(NOT_FEDERABLE["absolute_error"] + ".")
    # Only a value scikit-learn would take: any other is the parameter check's to refuse.
    if isinstance(max_leaf_nodes, (int, np.integer)) and not isinstance(max_leaf_nodes, bool):
        raise ValueError(NOT_FEDERABLE["max_leaf_nodes"] + "; leave max_leaf_nodes=None.")


def check_declarations(class_weight: Any, categories: Any) -> None:
    """``class_weight``'s weights and ``categories``' levels, refused before any round.

    A negative, NaN or infinite class weight, or all of them 0, gave a forest of NaN or
    zero probabilities silently (scikit-learn fails, naming no parameter; every class at 0:
    ``weights.fixed_class_weights``, which knows the classes); a string of
    levels (``{"city": "Lyon"}``) declared its characters, and no level (``[]``) made every
    value of the column missing, silently.
    """
    for cw in class_weight if isinstance(class_weight, list) else [class_weight]:
        if not isinstance(cw, dict):
            continue
        for label, w in cw.items():
            if not isinstance(w, (int, float, np.number)):
                raise ValueError(f"class_weight[{label!r}] must be a number, got {w!r}.")
            if not (math.isfinite(float(w)) and float(w) >= 0):
                raise ValueError(
                    f"class_weight[{label!r}] is {w!r}; class weights must be finite and "
                    "non-negative."
                )
    for column, levels in (categories or {}).items() if isinstance(categories, dict) else ():
        if isinstance(levels, (str, bytes)) or not hasattr(levels, "__iter__"):
            one = f" ([{levels!r}] declares one level)" if isinstance(levels, str) else ""
            raise ValueError(
                f"categories[{column!r}] must be a list of levels, got {levels!r}{one}."
            )
        if len(list(levels)) == 0:
            raise ValueError(
                f"categories[{column!r}] declares no level: every value of the column "
                "would be missing. List its levels, or leave it out of categories."
            )


def warn_numeric_declared(est: Any) -> None:
    """After ``fit_federated``: the estimator's ``categorical_features`` the clients did not follow.

    ``categorical_features`` on the estimator is ``fit``'s (it builds the clients); under
    ``fit_federated`` each ``Client`` declares its own, and a column the estimator names
    but the clients gave as numbers was split as numbers, silently. Names no column there
    (a wrong name or index) likewise.
    """
    if est.categorical_features is None:
        return
    names = [str(c) for c in getattr(est, "feature_names_in_", [])]
    named = named_columns(est.categorical_features, est.n_features_in_, names)
    numeric = [f for f, j in named if j is None or j not in est.categories_]
    if numeric:
        warn_caller(
            f"categorical_features names {numeric}, which the clients gave as numeric "
            "columns (or no column): under fit_federated each Client declares its "
            "categorical columns (Client(..., categorical_features=[...])); the estimator's "
            "categorical_features is fit's. They were split as numbers.",
            UserWarning,
        )


def check_bootstrap(bootstrap: bool, oob_score: bool, max_samples: Any) -> None:
    """Options that need the bootstrap, refused without it (scikit-learn's messages)."""
    if max_samples is not None and not bootstrap:
        raise ValueError(  # scikit-learn 1.9.1's words, its "max_sample" included
            "`max_sample` cannot be set if `bootstrap=False`. Either switch to "
            "`bootstrap=True` or set `max_sample=None`."
        )
    if oob_score and not bootstrap:
        raise ValueError(
            "Out of bag estimation only available if bootstrap=True; got oob_score=True "
            "with bootstrap=False. Set bootstrap=True or oob_score=False."
        )


def encode_labels(y: Any) -> tuple[NDArray[np.int64], Any]:
    """A classifier's y as class codes, and the labels they stand for.

    1-D y (or one column, with scikit-learn's DataConversionWarning): codes (n,) and the
    sorted labels. Several columns (multi-output): codes (n, n_outputs) and a list of each
    output's sorted labels, as scikit-learn's ``classes_``.
    """
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] > 1:
        check_classification_targets(arr)
        found = [np.unique(arr[:, k], return_inverse=True) for k in range(arr.shape[1])]
        codes = np.column_stack([inverse for _, inverse in found]).astype(np.int64)
        return codes, [labels for labels, _ in found]
    y = column_or_1d(y, warn=True)
    # As a column, as scikit-learn's forests check it: the check refuses bytes labels
    # of a 1-D y ("labels represented as bytes"), which those forests fit.
    check_classification_targets(y.reshape(-1, 1))
    labels, encoded = np.unique(y, return_inverse=True)
    return encoded.astype(np.int64), labels


def decode_classes(
    classes: list[Any], fit_labels: Any, dtype: str | None = None
) -> tuple[Any, Any]:
    """``classes_`` and ``n_classes_`` from the handshake's class list (a list per output).

    ``fit_labels`` (simulation mode, from :func:`encode_labels`): the clients held codes, so
    the class list holds codes into these labels; None: the clients' own labels, of the
    dtype of their y together (``dtype``, ``federated/label_dtypes.py``), as scikit-learn's.
    """
    if classes and np.ndim(classes[0]) == 1:  # multi-output: one list per output
        if fit_labels is None:
            found = [labels_array(list(c), dtype) for c in classes]
        else:
            found = [
                f[np.asarray(c, dtype=np.int64)] for f, c in zip(fit_labels, classes, strict=True)
            ]
        return found, [len(c) for c in found]
    if fit_labels is not None:
        labels = fit_labels[np.asarray(classes, dtype=np.int64)]
    else:
        labels = labels_array(list(classes), dtype)
    return labels, len(labels)


def class_weight_codes(class_weight: Any, label_codes: Any) -> Any:
    """``class_weight`` with its labels as the clients hold them.

    ``label_codes`` (simulation mode, from :func:`encode_labels`): the clients hold codes
    into these labels (a list of them per output for multi-output y), so a dict's labels
    (a list of dicts per output) become codes; None: the clients' own labels.
    """
    if isinstance(class_weight, list) and isinstance(label_codes, list):
        if len(class_weight) != len(label_codes):
            raise ValueError(
                f"class_weight is a list of {len(class_weight)} dicts, but y has "
                f"{len(label_codes)} outputs; give one dict per output."
            )
        return [
            class_weight_codes(cw, codes)
            for cw, codes in zip(class_weight, label_codes, strict=True)
        ]
    if isinstance(class_weight, list):
        return [dict(cw) if isinstance(cw, dict) else cw for cw in class_weight]
    if not isinstance(class_weight, dict) or not isinstance(label_codes, np.ndarray):
        return dict(class_weight) if isinstance(class_weight, dict) else class_weight
    labels = label_codes.tolist()
    index = {label: i for i, label in enumerate(labels)}
    named = named_class_weights(class_weight, labels)
    return {index[label]: float(w) for label, w in named.items()}


# ------------------------------------------------- the configuration; declared domains
# ``categories`` (both estimators) declares categorical columns' levels and ``classes``
# (the classifier) the labels: public lists the handshake sends in place of the levels
# and labels the clients hold (``federated/server/domains.py`` says what travels).
def declared_features(categorical_features: Any, categories: Any) -> Sequence[Any] | None:
    """``categorical_features`` plus the columns ``categories`` declares (a dict's keys)."""
    if not isinstance(categories, dict):
        return categorical_features
    given = given_entries(categorical_features)
    if is_mask(given):  # its indices
        given = [j for j, f in enumerate(given) if f]
    return [*given, *(k for k in categories if k not in given)]


def _declared_classes(classes: Any) -> list[Any]:
    """The declared labels, one sorted list (a list of them per output), plain Python."""
    if len(classes) and all(np.ndim(c) == 1 for c in classes):  # one list per output
        return [sorted_levels(list(c), "classes", missing=False) for c in classes]
    if np.ndim(classes) != 1 or not len(classes):
        raise ValueError(
            "classes must be a non-empty list of labels (a list per output for multi-output y)."
        )
    return sorted_levels(list(classes), "classes", missing=False)


def encode_declared(y: NDArray[Any], classes: Any) -> tuple[NDArray[np.int64], Any]:
    """A classifier's y as codes into its declared classes, and those classes (arrays).

    Raises a ``ValueError`` when ``y`` holds a label that is not declared.
    """
    declared = _declared_classes(classes)
    multi = y.ndim == 2 and y.shape[1] > 1
    per_output = declared if multi else [declared]
    if multi != isinstance(declared[0], list) or (multi and len(declared) != y.shape[1]):
        raise ValueError("classes must give one list of labels per output of y.")
    columns = [y[:, o] for o in range(y.shape[1])] if multi else [y.ravel()]
    codes = np.empty((len(columns[0]), len(columns)), dtype=np.int64)
    for o, (column, labels) in enumerate(zip(columns, per_output, strict=True)):
        codes[:, o] = codes_into(column, labels)
        if (codes[:, o] < 0).any():  # the labels found, only to say which are not declared
            found, declared_set = np.unique(column).tolist(), set(labels)
            unknown = [v for v in found if v not in declared_set]
            hint = type_hint(set(found), declared_set)
            raise ValueError(f"y holds labels {unknown[:5]} that classes does not declare.{hint}")
    labels_out = [np.asarray(c) for c in per_output]
    return (codes if multi else codes[:, 0]), (labels_out if multi else labels_out[0])


def codes_into(values: NDArray[Any], labels: list[Any]) -> NDArray[np.int64]:
    """Each value's index in ``labels``, -1 where it is none of them (or missing).

    Python's equality, as a dict lookup (``1 == 1.0 == True``), looked up once per distinct
    value: ``pd.factorize`` codes the rows in C (a Dask worker's partition of millions of
    rows took a dict lookup a row).
    """
    rows, distinct = pd.factorize(np.asarray(values).ravel())  # -1: a missing value
    index = {label: k for k, label in enumerate(labels)}
    found = [index.get(v, -1) for v in np.asarray(distinct, dtype=object).tolist()]
    return np.array([*found, -1], dtype=np.int64)[rows]  # rows' -1 reads the last entry


def pooled_domains(X: Any, columns: Sequence[int]) -> dict[int, list[Any]]:
    """``fit`` under ``"dp"``: each categorical column's levels in the rows it holds.

    Simulation mode holds every row in this process: it declares the levels of its own
    rows, so no client's handshake names any (docs/privacy.md: the model's lists then come
    from the rows; ``categories=`` keeps them out of the data).
    """
    out = {}
    for j in columns:
        col = X.iloc[:, j] if isinstance(X, pd.DataFrame) else np.asarray(X, dtype=object)[:, j]
        out[int(j)] = sort_categories(v for v in list(col) if not is_missing(v))
    return out


def _row_labels(est: Any) -> Any:
    """The labels of y where this process holds them (``fit``; a Dask fit), else None.

    The clients then hold codes 0..K-1 into them.
    """
    held = getattr(est, "_label_codes", None)
    return held if held is not None else getattr(est, "_dask_labels", None)


def _declares_from_rows(est: Any) -> bool:
    """``fit`` (or a Dask fit) under "secure"/"dp" declares the labels of y itself."""
    held = _row_labels(est)
    return getattr(est, "classes", None) is None and est.privacy != "none" and held is not None


def _client_classes(est: Any) -> Any:
    """The declared classes as the clients hold them: codes in ``fit``, labels otherwise."""
    classes = getattr(est, "classes", None)
    if _declares_from_rows(est):
        # Under "secure"/"dp" the labels of y, declared here (docs/privacy.md): a client's
        # handshake names none, and a label few rows hold is a class as any other.
        classes = _row_labels(est)
    if classes is None:
        return None
    declared = _declared_classes(classes)
    if _row_labels(est) is None:  # fit_federated: the clients' own labels
        return declared
    if declared and isinstance(declared[0], list):
        return [list(range(len(c))) for c in declared]
    return list(range(len(declared)))


def _python(value: Any) -> Any:
    """A NumPy number as Python's (``np.arange`` in a parameter grid): messages carry JSON."""
    if isinstance(value, np.integer):  # was "Object of type int64 is not JSON serializable"
        return int(value)
    return float(value) if isinstance(value, np.floating) else value  # float16, long double


def estimator_config(est: Any) -> GrowerConfig:
    """The server's configuration from an estimator's parameters (a new seed each call)."""
    seed = int(check_random_state(est.random_state).randint(np.iinfo(np.int32).max))
    return GrowerConfig(
        task=est._task,
        criterion=criterion_name(est.criterion),  # "log_loss" is entropy, and so on
        n_estimators=int(est.n_estimators),  # True is 1, as in scikit-learn
        max_depth=_python(est.max_depth),
        min_samples_split=_python(est.min_samples_split),
        min_samples_leaf=_python(est.min_samples_leaf),
        min_impurity_decrease=_python(est.min_impurity_decrease),
        min_weight_fraction_leaf=_python(est.min_weight_fraction_leaf),
        ccp_alpha=_python(est.ccp_alpha),
        monotonic_cst=est.monotonic_cst,
        max_features=_python(est.max_features),
        n_bins=_python(est.n_bins),
        # Local candidates are values of a client's rows: only under privacy="none".
        local_candidates=(
            est.local_candidates if est.local_candidates is not None else est.privacy == "none"
        ),
        binning=est.binning,
        bootstrap=est.bootstrap,
        oob_score=bool(est.oob_score),
        seed=seed,
        verbose=_python(est.verbose),
        tree_batch_size=_python(est.tree_batch_size),
        n_jobs=_python(est.n_jobs),
        split_on_client=est.split_on_client,
        split_rule=est.split_rule,
        top_l=_python(est.top_l),
        client_fraction=_python(est.client_fraction),
        max_samples=_python(est.max_samples),
        on_client_failure=est.on_client_failure,
        privacy=est.privacy,
        min_aggregate_rows=_python(est.min_aggregate_rows),
        epsilon=_python(est.epsilon),
        delta=_python(est.delta),
        dp_colluders=int(est.dp_colluders),
        class_weight=est._class_weight(),
        categories=getattr(est, "_fit_categories", None) or est.categories,
        classes=_client_classes(est),
        classes_from_rows=_declares_from_rows(est),
    )
