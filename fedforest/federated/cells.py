"""Cells of a feature table that hold more than one value: refused, naming the column.

A Parquet list or struct column reads into pandas as an ``object`` column of lists, arrays
or dicts, and an ``object`` array can hold them too. Neither is a number nor a category:
scikit-learn's forest refuses them with NumPy's "setting an array element with a
sequence", naming no column. Before this check, fedforest's refusal of such a column
suggested declaring it categorical, which then failed with "unhashable type: 'list'" (in
``fit``; a client's handshake failed with a ``TypeError`` it could not name), and a
``Client`` given an object array whose cells held lists of two numbers read each such
column as two columns, silently (``tests/test_odd_inputs_3.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["refuse_nested"]

#: Values that are collections, not one number or category.
_NESTED = (list, tuple, dict, set, frozenset, np.ndarray)


def _nested_kind(values: Any) -> str | None:
    """The type name of the first collection among ``values`` (None if there is none)."""
    for value in np.asarray(values, dtype=object).ravel().tolist():
        if isinstance(value, _NESTED):
            return type(value).__name__
    return None


def refuse_nested(X: Any, who: str | None = None) -> None:
    """Raise if an ``object`` column of ``X`` holds collections.

    A ``ValueError``, or in ``fit`` and ``predict`` (``who`` None) NumPy's ``TypeError``
    for dicts and sets, as scikit-learn raises it.

    Parameters
    ----------
    X : DataFrame or ndarray, shape (n_samples, n_features)
        A feature table; any other input (numeric arrays, sparse matrices) passes as it is.
    who : str, optional
        The client (``"Client 'a'"``) the error names; ``fit``'s ``X`` when None. The error
        names the column and the values' type, never a value (a client's error text may
        reach the server).
    """
    if isinstance(X, pd.DataFrame):
        dtypes = X.dtypes  # a new Series at each call: once, not once a column
        columns = [
            (repr(name), X.iloc[:, j])
            for j, name in enumerate(X.columns)
            if pd.api.types.is_object_dtype(dtypes.iloc[j])
        ]
    elif isinstance(X, np.ndarray) and X.dtype.kind == "O" and X.ndim == 2:
        columns = [(str(j), X[:, j]) for j in range(X.shape[1])]
    else:
        return
    for label, column in columns:
        kind = _nested_kind(column)
        if kind is None:
            continue
        sequence = kind not in ("dict", "set", "frozenset")
        numpy = (  # NumPy's own text, which scikit-learn's checks match
            "setting an array element with a sequence"
            if sequence
            else f"float() argument must be a string or a real number, not '{kind}'"
        )
        text = (
            f"olumn {label} of X holds {kind} values ({numpy}): a nested column, such as a "
            "Parquet list or struct column; fedforest needs one number or one category per "
            "cell: expand it into columns of their own, or drop it."
        )
        if who is not None:  # a client's refusals are ValueErrors (the CLI, a ClientApp)
            raise ValueError(f"{who}: c{text}")
        # fit and predict raise NumPy's type, as scikit-learn does (its estimator checks
        # expect the TypeError of a dict).
        raise (ValueError if sequence else TypeError)(f"C{text}")
