"""A site's columns and labels read as the estimators read them (peers and predicting sites).

``Peer.fit`` and ``SwarmForest.predict_proba`` take pandas frames as users have them: an
``object`` column of numbers (a merge, ``astype(object)``, Python values with ``None``)
is numbers, as in ``fit`` and scikit-learn, not text; ``bool[pyarrow]`` is 0/1; labels
from ``read_csv`` (``object``), ``category`` or ``string[pyarrow]`` are strings, which a
bundle holds (its file keeps numbers or strings only).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.utils.multiclass import check_classification_targets

from ..federated.categorical import column_floats, is_missing, is_numeric_column, named_columns
from ..federated.client_targets import as_scikit_learn_reads

__all__ = ["check_distinct", "declared_columns", "floats", "is_numeric", "is_text", "labels"]


def is_text(series: pd.Series) -> bool:
    """A text column: pandas ``str``, ``object`` not all numbers, ``category`` of non-numbers.

    An ``object`` column of numbers (missing values aside) is numeric: it was text, every
    distinct value a category written in the bundle's lists.
    """
    if isinstance(series.dtype, pd.CategoricalDtype):
        return not pd.api.types.is_numeric_dtype(series.cat.categories.dtype)
    if series.dtype == object:
        return not is_numeric_column(series)
    return bool(pd.api.types.is_string_dtype(series.dtype))


def is_numeric(series: pd.Series) -> bool:
    """Numbers or booleans (``bool[pyarrow]`` too, which pandas does not call numeric)."""
    return is_numeric_column(series)


def floats(series: pd.Series) -> NDArray[np.float64]:
    """A numeric column as float64, its missing values (None, ``pd.NA``) as NaN."""
    if series.dtype == object:
        return column_floats(series)
    return series.to_numpy(dtype=np.float64, na_value=np.nan)


def declared_columns(features: Any, names: tuple[str, ...]) -> set[str]:
    """The names of the columns ``categorical_features`` names, as the estimators resolve it.

    Names (a list, a NumPy array, a pandas Index), column indices or a boolean mask
    (``federated/categorical.py::named_columns``). An Index was pandas' "truth value of an
    Index is ambiguous", a mask or the index of a column named by a number "not columns of X".
    """
    if isinstance(features, str):  # its letters were read as column names
        raise ValueError(
            f"categorical_features must be a list of columns, got the string {features!r}; "
            f"give [{features!r}]"
        )
    resolved = named_columns(features, len(names), names)
    unknown = [f for f, j in resolved if j is None]
    if unknown:
        raise ValueError(f"categorical_features {unknown} are not columns of X ({list(names)})")
    return {names[j] for _, j in resolved if j is not None}


def check_distinct(columns: Any, what: str) -> None:
    """Refuse a frame whose column names repeat (``X[name]`` would be a frame)."""
    seen: set[str] = set()
    for col in columns:
        if str(col) in seen:
            raise ValueError(f"{what} has the column {str(col)!r} twice; give each column once")
        seen.add(str(col))


def labels(y: Any, what: str = "y") -> NDArray[Any]:
    """Class labels as a bundle holds them: numbers, booleans, NumPy strings or bytes.

    Bytes are kept, as the estimators keep them (``predict`` gives bytes); a bundle file
    refuses them, as a model file does. Before, they were decoded to strings (and text and
    bytes mixed in an ``object`` y were one class when equal). Bytes in an ``object`` y get
    the estimators' error, scikit-learn's "Unknown label type" (taken until 2026-12-05).
    ``object`` labels (``read_csv``'s text, a ``category`` or ``string[pyarrow]`` column)
    were fitted, then refused by ``share()``; datetime labels likewise. pandas' nullable
    labels (``Int64``, ``boolean``) are floats, as scikit-learn and the estimators read them.
    """
    arr = as_scikit_learn_reads(y)
    if arr.dtype.kind == "f" and np.isnan(arr).any():  # pd.NA of a nullable column too
        row = int(np.flatnonzero(np.isnan(arr.ravel()))[0])
        raise ValueError(f"{what} holds a missing label (row {row}); drop the row")
    if arr.dtype.kind in "biufUS":  # bytes too, as the estimators (a file refuses them)
        return arr
    if arr.dtype.kind not in "OS":
        raise ValueError(
            f"{what} has dtype {arr.dtype}; a bundle's class labels are numbers or strings "
            "(give y.astype(str))"
        )
    values = arr.ravel().tolist()
    for row, value in enumerate(values):
        if is_missing(value):
            raise ValueError(f"{what} holds a missing label (row {row}); drop the row")
    if all(isinstance(v, str) for v in values):
        return arr.astype(str)
    if all(isinstance(v, bytes) for v in values):  # the estimators' (scikit-learn's) error
        check_classification_targets(arr.reshape(len(arr), -1))
    if all(isinstance(v, int | float | np.number | np.bool_) for v in values):
        return np.asarray(values).reshape(arr.shape)
    kinds = sorted({type(v).__name__ for v in values})
    raise ValueError(
        f"{what} mixes labels of types {', '.join(kinds)}; give them all as strings or all "
        "as numbers"
    )
