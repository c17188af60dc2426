"""Categorical columns: detection, the handshake's category union, and code encoding.

A categorical column travels as codes: the index of each value in the federation's
sorted category list (fixed by the server at the handshake from the clients' own lists).
An unknown value has code -1, which set splits route by the marginal rule. No one-hot
encoding anywhere.

A missing value in a categorical column (NaN, None, ``pd.NA``) is a category of its own,
:data:`MISSING_CATEGORY` (JSON ``null``), last in the sorted list: set splits learn its side
from the pooled statistics like any other category's. At predict time a missing value in a
column that had none in training has no code (-1) and follows the marginal rule.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from .cells import refuse_nested

__all__ = [
    "MARKED_WARNING",
    "MISSING_CATEGORY",
    "refuse_mixed",
    "local_codes",
    "local_codes_loop",
    "sort_categories",
    "sort_categories_loop",
    "sorted_levels",
    "mixed_kinds",
    "categorical_columns",
    "check_levels",
    "encode",
    "encode_loop",
    "encode_counted",
    "encode_counted_loop",
    "given_entries",
    "is_mask",
    "is_missing",
    "is_numeric_column",
    "named_columns",
    "other_kind_rows",
    "pandas_frame",
    "read_features",
    "value_kinds",
]

#: The category of the missing values of a categorical column (JSON null).
MISSING_CATEGORY = None


def is_missing(value: Any) -> bool:
    """A missing scalar: None, NaN (any float type), ``pd.NA`` or ``pd.NaT``."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and bool(np.isnan(value))


def value_kinds(values: Any) -> str:
    """What a column holds that is not a number, by type ("str values"), never a value.

    A client's error text reaches the server (Flower's error reply, Dask's error frame),
    and NumPy's own ("could not convert string to float: '...'") quotes the value.
    """
    kinds = set()
    for value in np.asarray(values, dtype=object).ravel().tolist():
        if is_missing(value):
            continue
        try:
            float(value)
        except (TypeError, ValueError):
            kinds.add(type(value).__name__)
    return f"{', '.join(sorted(kinds))} values" if kinds else "values that are not numbers"


def _key(value: Any) -> tuple[int, Any]:
    # Numbers before strings, each in their natural order; bools count as numbers; the
    # missing category last.
    if is_missing(value):
        return (2, "")
    if isinstance(value, (bool, int, float, np.integer, np.floating)):
        return (0, float(value))
    return (1, str(value))


#: The exact types the vectorised paths read: pandas' ``factorize`` groups their values as
#: Python's ``==`` does (1, 1.0 and True one value, "1" another) and sets apart as missing
#: exactly the values :func:`is_missing` calls so (None, NaN, ``pd.NA``, ``pd.NaT``). Any
#: other type (NumPy scalars, Decimal, bytes, timestamps, str subclasses) takes the loops.
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None), type(pd.NA), type(pd.NaT)})


def _distinct(values: list[Any]) -> tuple[NDArray[np.intp], list[Any]] | None:
    """Each value's index among the distinct values (-1: missing), and those values.

    The distinct values in the order first seen, each as its first row holds it. None where
    some value's type is not one of :data:`_PLAIN_TYPES` (the caller loops, value by value).
    """
    if not isinstance(values, list) or not set(map(type, values)) <= _PLAIN_TYPES:
        return None
    column = np.empty(len(values), dtype=object)
    column[:] = values
    inverse, uniques = pd.factorize(column)
    return inverse, uniques.tolist()


def _sorted_distinct(inverse: NDArray[np.intp], uniques: list[Any]) -> list[Any]:
    """:func:`sort_categories` of the values :func:`_distinct` read.

    The set is filled in the loop's order (the missing category where its first row
    stood), so that values of one key (``2**53`` and ``2**53 + 1``) keep the loop's order.
    """
    gone = np.flatnonzero(inverse < 0)
    if gone.size:
        first = int(gone[0])
        seen = int(inverse[:first].max()) + 1 if first else 0  # codes come in first-seen order
        uniques = [*uniques[:seen], MISSING_CATEGORY, *uniques[seen:]]
    return sorted(set(uniques), key=_key)


def sort_categories(values: Iterable[Any]) -> list[Any]:
    """The sorted union of category values, as plain Python (JSON-able) values.

    Every kind of missing value becomes one :data:`MISSING_CATEGORY`, sorted last.
    Vectorised (:func:`_distinct`); :func:`sort_categories_loop` is its reference.
    """
    listed = list(values)
    found = _distinct(listed)
    return sort_categories_loop(listed) if found is None else _sorted_distinct(*found)


def sort_categories_loop(values: Iterable[Any]) -> list[Any]:
    """:func:`sort_categories` value by value (any type)."""
    plain = {
        MISSING_CATEGORY if is_missing(v) else v.item() if isinstance(v, np.generic) else v
        for v in values
    }
    return sorted(plain, key=_key)


def mixed_kinds(values: Iterable[Any]) -> str | None:
    """The types of ``values`` (``"float, str"``) where they mix text and numbers, else None.

    Missing values are left out. scikit-learn's encoders and ``unique_labels`` refuse such
    a mix, and so does the server's check of a client's levels and labels.
    """
    present = [v for v in values if not is_missing(v)]
    if len({isinstance(v, str) for v in present}) < 2:
        return None
    return ", ".join(sorted({type(v).__name__ for v in present}))


def refuse_mixed(values: Iterable[Any], what: str, cause: Exception | None = None) -> None:
    """Refuse ``what``, a column not declared categorical, if it mixes text and numbers.

    Refused as "not numeric" (``fit`` and a ``Client`` alike), it was sent to
    ``categorical_features``, where the same column is refused as a mix (as scikit-learn's
    encoders refuse it): the message says the mix and both fixes, never a value.
    ``cause``: NumPy's error, kept as the refusal's cause (it may quote a value).
    """
    if (kinds := mixed_kinds(values)) is not None:
        raise ValueError(
            f"{what} mixes text and numbers ({kinds} values), which is neither a numeric "
            "nor a categorical column: convert it (X[column].astype(str) for categories, "
            "or pd.to_numeric for numbers)."
        ) from cause


def sorted_levels(values: Iterable[Any], what: str, missing: bool = True) -> list[Any]:
    """Declared levels or labels, sorted (:func:`sort_categories`), checked.

    A mix of text and numbers is refused, naming ``what`` (it made ``classes=[0, 1, "a"]``
    text, silently), and so is a missing value unless ``missing`` (a class, None).
    """
    levels = sort_categories(values)
    if not missing and MISSING_CATEGORY in levels:
        raise ValueError(f"{what} holds a missing value; a class label is never missing.")
    if (kinds := mixed_kinds(levels)) is not None:
        raise ValueError(
            f"{what} mixes text and numbers ({kinds} values); give all its levels as text or "
            "all as numbers, as scikit-learn's encoders and unique_labels want them."
        )
    return levels


def local_codes(raw: ArrayLike) -> NDArray[np.float64]:
    """Each value's index among the column's own sorted levels (:func:`sort_categories`).

    A client-side summary of a raw categorical column up to its levels' names (the
    missing category, however written, last): the data secret hashes it.
    """
    values = np.asarray(raw, dtype=object).ravel().tolist()
    found = _distinct(values)
    if found is None:
        return local_codes_loop(values)
    inverse, uniques = found
    index = {level: k for k, level in enumerate(_sorted_distinct(inverse, uniques))}
    table = [index[v] for v in uniques] + [index.get(MISSING_CATEGORY, -1)]
    return np.array(table, dtype=np.float64)[inverse]


def local_codes_loop(raw: ArrayLike) -> NDArray[np.float64]:
    """:func:`local_codes` value by value (any type)."""
    values = np.asarray(raw, dtype=object).ravel().tolist()
    index = {level: k for k, level in enumerate(sort_categories_loop(values))}
    plain = (
        MISSING_CATEGORY if is_missing(v) else v.item() if isinstance(v, np.generic) else v
        for v in values
    )
    return np.array([index[v] for v in plain], dtype=np.float64)


#: What ``infer_dtype`` calls an object column of numbers (scikit-learn converts them).
_NUMBERS = frozenset({"integer", "floating", "mixed-integer-float", "decimal", "boolean"})


def is_numeric_column(column: pd.Series) -> bool:
    """A numeric or boolean dtype, or an object column of numbers, its missing values aside.

    scikit-learn reads such an object column as floats; it was refused as not numeric.
    So is a column of missing values only, as objects (None, ``pd.NA``, ``pd.NaT``) or
    pyarrow's null type (an all-null Parquet column read with ``dtype_backend="pyarrow"``):
    NaN, as ``fit`` reads it; a ``Client`` refused it ("has dtype object"). pandas calls
    pyarrow's booleans (``bool[pyarrow]``) not numeric, unlike ``bool`` and ``boolean``;
    scikit-learn reads them as 0/1 (NaN where missing), as the other two.
    """
    dtype = column.dtype
    if pd.api.types.is_numeric_dtype(dtype) or getattr(dtype, "kind", "") == "b":
        return True
    objects = column.dtype == object
    if objects and pd.api.types.infer_dtype(column, skipna=True) in _NUMBERS:
        return True
    untyped = objects or str(dtype) == "null[pyarrow]"
    return untyped and bool(column.map(is_missing).all())


def column_floats(column: Any) -> NDArray[np.float64]:
    """A numeric column as floats, its missing values (None, NaN, ``pd.NA``) as NaN.

    NumPy reads None in an object column as NaN but stops at ``pd.NA`` ("float() argument
    must be a string or a real number, not 'NAType'"), which pandas' nullable dtypes
    leave in an object column (``astype(object)``, a merge, ``where``).
    """
    if getattr(getattr(column, "dtype", None), "kind", "") != "O":
        return np.asarray(column, dtype=np.float64)
    values = np.asarray(column, dtype=object)
    return np.array([np.nan if is_missing(v) else v for v in values.tolist()], dtype=np.float64)


def _is_text(column: pd.Series) -> bool:
    """Text: pandas' ``str`` dtype, or an object column of strings (missing values aside).

    ``is_string_dtype`` says no to an object column with a None, NaN or ``pd.NA`` in it:
    such a column was refused as not numeric, where the same column of pandas' ``str``
    dtype (or ``category``) is categorical with a missing category.
    """
    if pd.api.types.is_string_dtype(column):
        return True
    return column.dtype == object and pd.api.types.infer_dtype(column, skipna=True) == "string"


def given_entries(features: Iterable[Any] | None) -> list[Any]:
    """A column list (``categorical_features``) as plain Python entries ([] for None).

    A NumPy array or pandas Index (``df.select_dtypes("object").columns``) has no truth
    value; NumPy scalars become Python's (``np.bool_`` a ``bool``, ``np.str_`` a ``str``).
    """
    given = [] if features is None else list(features)
    return [f.item() if isinstance(f, np.generic) else f for f in given]


def is_mask(entries: Sequence[Any]) -> bool:
    """Whether plain entries (:func:`given_entries`) are a boolean mask, as scikit-learn's."""
    return bool(entries) and all(isinstance(f, bool) for f in entries)


def named_columns(
    features: Iterable[Any] | None, n_features: int, names: Sequence[str] | None
) -> list[tuple[Any, int | None]]:
    """Each entry of a column list and the index of the column it names (None: no column).

    scikit-learn's conventions (``categorical_features`` of its histogram gradient
    boosting): a boolean mask names the positions where it is True; an integer is a column
    index in ``[0, n_features)`` (a negative one names no column: scikit-learn refuses
    it); anything else names the column of that name (``str(entry)`` among ``names``, the
    table's column names; None: the table has none). The entries keep their order and
    their repeats (a mask's are its True positions); the callers say what an entry naming
    no column means (``fit`` refuses it, ``fit_federated`` warns).
    """
    entries = given_entries(features)
    if is_mask(entries):
        entries = [j for j, f in enumerate(entries) if f]
    out: list[tuple[Any, int | None]] = []
    for f in entries:
        if isinstance(f, int) and not isinstance(f, bool):
            out.append((f, f if 0 <= f < n_features else None))
        elif names is not None and str(f) in names:
            out.append((f, list(names).index(str(f))))
        else:
            out.append((f, None))
    return out


def categorical_columns(
    X: ArrayLike,
    categorical_features: Sequence[Any] | None,
    n_features: int,
    who: str | None = None,
) -> list[int]:
    """Indices of the categorical columns: pandas ``category`` and text columns, plus those named.

    Text columns (pandas' ``str`` dtype, as ``read_csv`` gives them under pandas 3, or
    object columns holding strings) are categorical: a CSV's text column needs no
    declaration. With ``who`` (``fit``'s X, a client), a text column not named in
    ``categorical_features`` whose values read as numbers once spaces around them are
    dropped and a comma made a point (``" 3 "``, ``"1,5"``, ``"265,000"``) warns, naming it.

    Raises
    ------
    ValueError
        If ``categorical_features`` names a column that does not exist.
    """
    cols: set[int] = set()
    names = [str(c) for c in X.columns] if isinstance(X, pd.DataFrame) else None
    text: set[int] = set()
    if isinstance(X, pd.DataFrame):
        # A column is read only where is_string_dtype reads its values (dtype kind "O"):
        # the others' answer is their dtype's (taking 630 columns took 0.2 CPU s, draw 28)
        text = {
            j
            for j, t in enumerate(X.dtypes)
            if not isinstance(t, pd.CategoricalDtype)
            and (
                _is_text(X.iloc[:, j])
                if getattr(t, "kind", "O") == "O"
                else pd.api.types.is_string_dtype(t)
            )
        }
        cols |= text | {j for j, t in enumerate(X.dtypes) if isinstance(t, pd.CategoricalDtype)}
    features = given_entries(categorical_features)
    if is_mask(features) and len(features) != n_features:
        raise ValueError(
            f"categorical_features is a boolean mask of {len(features)} entries, but X "
            f"has {n_features} columns; give one entry per column."
        )
    declared: set[int] = set()
    for f, j in named_columns(features, n_features, names):
        if j is not None:
            declared.add(j)
        elif isinstance(f, int) and not isinstance(f, bool):
            raise ValueError(
                f"categorical_features names column {f}, but X has {n_features} columns."
            )
        else:
            raise ValueError(
                f"categorical_features names {f!r}, which is not a column of X "
                f"(columns: {names if names is not None else list(range(n_features))})."
            )
    if who is not None and names is not None:
        _warn_number_text(X, sorted(text - declared), names, who)
    return sorted(cols | declared)


#: A text column whose distinct values are numbers but for at most this many, and at least
#: :data:`MARKED_NUMBERS` numbers, warns: numbers with a missing-value marker ("?").
MARKERS = 3
MARKED_NUMBERS = 10
#: That warning's words after the columns (``fedforest train`` says it per file instead).
MARKED_WARNING = "hold text whose values read as numbers but for at most"


def _warn_number_text(X: Any, columns: list[int], names: list[str], who: str) -> None:
    """Warn of text columns whose values are numbers written with spaces or a comma.

    scikit-learn reads ``" 3 "`` as 3 and refuses ``"1,5"`` or ``"265,000"`` (the shipped
    heart-failure CSV's platelets, which its loader reads with ``thousands=","``); fedforest
    takes any text
    column as categorical, one level per distinct text, so such a column of measurements
    splits as categories, or under ``"secure"`` loses its rare levels to missing (the
    warning then blamed the levels). Text of plain numbers (``"3"``, codes made text on
    purpose) does not warn. The message names the columns, never a value.

    Numbers with a few other texts among them (a missing-value marker, ``"?"`` in UCI's
    files, which ``read_csv`` does not know) warn too, where at least
    :data:`MARKED_NUMBERS` distinct numbers and at most :data:`MARKERS` other texts are
    seen, the numbers in at least half the rows (``fedforest train`` names the texts of
    such a file's column: ``cli/train.py::_stray_text``, whose rule this one's implies):
    such a column of measurements was categorical without a word, one level per number,
    where scikit-learn refuses it ("could not convert string to float: '?'").
    """
    found, marked = [], []
    for j in columns:
        rows = X.iloc[:, j].dropna().astype(str).value_counts(sort=False)
        values = pd.Series(rows.index)
        if values.empty:
            continue
        stripped = values.str.strip()
        numbers = pd.to_numeric(stripped, errors="coerce").notna().to_numpy()
        few = MARKED_NUMBERS <= numbers.sum() and 0 < (~numbers).sum() <= MARKERS
        if few and 2 * rows.to_numpy()[numbers].sum() >= rows.sum():  # most rows numbers
            marked.append(names[j])
            continue
        if not (stripped.str.contains(",", regex=False) | (values != stripped)).any():
            continue  # plain text or plain numbers
        if pd.to_numeric(stripped.str.replace(",", ".", regex=False), "coerce").notna().all():
            found.append(names[j])
    if found:
        warnings.warn(
            f"{who}: column(s) {found} hold text whose values read as numbers once the spaces "
            "around them are dropped and a comma read (a decimal comma, or a thousands "
            "separator): fedforest takes a text column as categorical (a level per distinct "
            "text), where scikit-learn reads numbers (and refuses a comma). To split them as "
            "numbers, convert them (a CSV: pd.read_csv(path, decimal=',') or thousands=',', "
            "skipinitialspace=True; a column: pd.to_numeric); to keep them categorical, name "
            "them in categorical_features.",
            UserWarning,
            stacklevel=4,
        )
    if marked:
        warnings.warn(
            f"{who}: column(s) {marked} {MARKED_WARNING} {MARKERS} other texts: fedforest "
            "takes a text column as categorical (a level per distinct text, here per "
            "number), where scikit-learn refuses it. If "
            "those texts mark missing values ('?', '-', 'n/a'), read them as missing to "
            "split the column as numbers (a CSV: pd.read_csv(path, na_values=[...]); a "
            "column: pd.to_numeric(column, errors='coerce')); to keep it categorical, name it "
            "in categorical_features.",
            UserWarning,
            stacklevel=4,
        )


def encode(raw: NDArray[Any], categories: list[Any]) -> NDArray[np.float64]:
    """Codes of ``raw`` values in ``categories`` (-1.0 for values not in the list).

    A value's code is the level of its key (:func:`_key`: numbers by value, bools as
    numbers, anything else by its text, every missing value one). Vectorised
    (:func:`_distinct`: one key per distinct value); :func:`encode_loop` is its reference.
    """
    index = {_key(c): k for k, c in enumerate(categories)}
    found = _distinct(raw.tolist())
    if found is None:
        return encode_loop(raw, categories)
    inverse, uniques = found
    table = [index.get(_key(v), -1) for v in [*uniques, MISSING_CATEGORY]]
    return np.array(table, dtype=np.float64)[inverse]


def encode_loop(raw: NDArray[Any], categories: list[Any]) -> NDArray[np.float64]:
    """:func:`encode` value by value (any type)."""
    index = {_key(c): k for k, c in enumerate(categories)}
    keys = [_key(_plain(v)) for v in raw.tolist()]
    return np.array([index.get(k, -1) for k in keys], dtype=np.float64)


def other_kind_rows(raw: NDArray[Any], categories: list[Any]) -> int:
    """Rows holding a number where the levels are text, or text where they are numbers.

    Such a value matches no level (``"3"`` is not ``3``), so the row takes the rule of an
    unseen category at every split on the column: a column read back as numbers (a CSV of
    codes once given as text) did so in every row, silently.
    """
    present = [c for c in categories if not is_missing(c)]
    if not present:
        return 0
    kind = _key(present[0])[0]  # the levels never mix them (sorted_levels)
    # As encode reads a value: an interval or a timestamp by its text, which may match
    # (and as missing what it reads as missing: numpy's NaT)
    return sum(1 for v in raw.tolist() if _key(_plain(v))[0] not in (2, kind))


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def encode_counted(raw: NDArray[Any], categories: list[Any]) -> tuple[NDArray[np.float64], int]:
    """:func:`encode`'s codes and :func:`other_kind_rows`' count in one pass over the rows.

    The rows to predict are read once (the two read them twice), vectorised
    (:func:`_distinct`: one key per distinct value); :func:`encode_counted_loop` is its
    reference. The same codes and count as the two (``tests/test_categorical_missing.py``
    compares them on values of every kind).
    """
    found = _distinct(raw.tolist())
    if found is None:
        return encode_counted_loop(raw, categories)
    inverse, uniques = found
    index = {_key(c): k for k, c in enumerate(categories)}
    present = [c for c in categories if not is_missing(c)]
    level_kind = _key(present[0])[0] if present else -1  # the levels never mix them
    keys = [_key(v) for v in [*uniques, MISSING_CATEGORY]]
    codes = np.array([index.get(key, -1) for key in keys], dtype=np.float64)[inverse]
    other = np.array([bool(present) and key[0] not in (2, level_kind) for key in keys])
    return codes, int(np.count_nonzero(other[inverse]))


def encode_counted_loop(
    raw: NDArray[Any], categories: list[Any]
) -> tuple[NDArray[np.float64], int]:
    """:func:`encode_counted` value by value (any type).

    A plain ``str``, ``float``, ``int`` or None takes its code from the level's own value;
    any other value takes :func:`encode`'s key.
    """
    index = {_key(c): k for k, c in enumerate(categories)}
    by_text = {key[1]: k for key, k in index.items() if key[0] == 1}
    by_number = {key[1]: k for key, k in index.items() if key[0] == 0}
    missing = index.get(_key(None), -1)
    present = [c for c in categories if not is_missing(c)]
    level_kind = _key(present[0])[0] if present else -1  # the levels never mix them
    number_rows = bool(present) and level_kind != 0  # a number among text levels
    text_rows = bool(present) and level_kind != 1
    codes, other = [], 0
    for v in raw.tolist():
        kind = type(v)
        if kind is str:
            codes.append(by_text.get(v, -1))
            other += text_rows
        elif kind is float or kind is int:
            if v != v:  # NaN
                codes.append(missing)
            else:
                codes.append(by_number.get(float(v), -1))
                other += number_rows
        elif v is None:
            codes.append(missing)
        else:  # as other_kind_rows reads it: an interval or a timestamp by its text
            key = _key(_plain(v))
            codes.append(index.get(key, -1))
            other += bool(present) and key[0] not in (2, level_kind)
    return np.array(codes, dtype=np.float64), other


def _is_sparse(X: Any) -> bool:
    """Whether ``X`` is a SciPy sparse matrix or array, without importing SciPy.

    A sparse object exists only once ``scipy.sparse`` is imported, so a process that has
    not imported it (a Flower ClientApp reading its file: 0.2 to 0.3 CPU seconds) need not.
    """
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(X))


def pandas_frame(X: Any) -> Any:
    """A data frame of another library (pyarrow's ``Table``, polars) as pandas', else ``X``.

    scikit-learn reads such a frame's column names (``feature_names_in_``, through narwhals),
    but fedforest tells text, category and numeric columns apart by their pandas dtype: a
    pyarrow table's text column was NumPy's "could not convert string to float" in ``fit``,
    and a ``Client`` took the table as an array, without its column names (its model then
    warned "X has feature names" at predict on the very table). Any tabular object of the
    Arrow stream interface (``__arrow_c_stream__`` and ``columns``) is read by pandas
    (``DataFrame.from_arrow``): numbers stay numbers (an integer column with nulls becomes
    floats with NaN), text is ``str``, a dictionary column ``category``.

    A pandas frame's pyarrow dictionary columns (``pd.read_parquet(path,
    dtype_backend="pyarrow")`` of a ``category`` column) become ``category`` too: they were
    refused as not numeric, with the advice to give a ``category`` column.
    """
    if not isinstance(X, pd.DataFrame | pd.Series | np.ndarray):
        if not (hasattr(X, "__arrow_c_stream__") and hasattr(X, "columns")):
            return X
        X = pd.DataFrame.from_arrow(X)
    if not isinstance(X, pd.DataFrame):
        return X
    dictionary = [
        j
        for j, t in enumerate(X.dtypes)
        if isinstance(t, pd.ArrowDtype) and hasattr(t.pyarrow_dtype, "index_type")
    ]
    if not dictionary:
        return X
    X = X.copy(deep=False)
    for j in dictionary:  # by position: a frame may repeat a name (refused later, naming it)
        X.isetitem(j, X.iloc[:, j].astype("category"))
    return X


def read_features(
    X: ArrayLike, who: str, categorical_features: Sequence[Any] | None = None
) -> tuple[NDArray[np.float64], list[str] | None, dict[int, NDArray[Any]]]:
    """Numeric matrix, column names and raw categorical columns of a feature table.

    Categorical columns are returned raw (by column index) and left as 0.0 in the matrix
    until the federation's codes are known. Raises one ``ValueError`` naming the column
    for non-numeric columns that are not declared categorical, or infinity. NaN in a
    numeric column is a missing value: it is kept; in a categorical column it is the
    category :data:`MISSING_CATEGORY`.
    """
    if _is_sparse(X):  # SciPy sparse: dense (implicit entries are zeros)
        X = X.toarray()  # type: ignore[union-attr]
    n_features = X.shape[1] if hasattr(X, "shape") and len(X.shape) == 2 else -1
    frame = X if isinstance(X, pd.DataFrame) else None
    names = [str(c) for c in frame.columns] if frame is not None else None
    kinds = {isinstance(c, str) for c in frame.columns} if frame is not None else set()
    if kinds == {True, False}:  # scikit-learn's error (fit's), naming the client
        raise TypeError(
            f"{who}: feature names are only supported if all input features have string "
            "names, but X mixes them with other types; convert them all to strings "
            "(X.columns = X.columns.astype(str)) or none."
        )
    if kinds == {False}:  # no string name: columns by position, as scikit-learn reads X
        names = None
    if names is not None and len(set(names)) < len(names):  # the handshake would blame it
        twice = sorted({c for c in names if names.count(c) > 1})
        raise ValueError(f"{who}: X has duplicate column names {twice}; name each column once.")
    if n_features < 0:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"{who}: X must be 2-D, got shape {X.shape}.")
        n_features = X.shape[1]
    refuse_nested(X, who)
    cat = categorical_columns(X, categorical_features, n_features, who)
    raw: dict[int, NDArray[Any]] = {}
    columns = []
    for j in range(n_features):
        col = frame.iloc[:, j] if frame is not None else np.asarray(X)[:, j]
        if j in cat:
            raw[j] = np.asarray(col, dtype=object)
            check_levels(raw[j], getattr(col, "cat", None), who, _name(names, j))
            columns.append(np.zeros(len(raw[j])))
            continue
        if frame is not None and not is_numeric_column(col):
            refuse_mixed(col, f"{who}: column {_name(names, j)}")
            raise ValueError(
                f"{who}: column {_name(names, j)} has dtype {col.dtype}; fedforest needs numeric "
                "features, or a pandas 'category' column / categorical_features=[...] for "
                "categories."
            )
        if col.dtype.kind == "c":  # NumPy's cast dropped the imaginary part, with a warning
            raise ValueError(
                f"{who}: column {_name(names, j)} of X is complex: Complex data not supported."
            )
        try:
            columns.append(column_floats(col))
        except (TypeError, ValueError) as exc:
            # NumPy's text quotes the value: the kinds only (the text may reach the server).
            refuse_mixed(col, f"{who}: column {_name(names, j)}", exc)
            raise ValueError(
                f"{who}: column {_name(names, j)} is not numeric (it holds {value_kinds(col)})."
            ) from exc
    arr = np.column_stack(columns) if columns else np.empty((int(np.shape(X)[0]), 0))
    if arr.shape[0] == 0:
        raise ValueError(f"{who} has no rows; remove it from the federation.")
    if arr.shape[1] == 0:  # it was "has no rows" (scikit-learn: "0 feature(s)")
        raise ValueError(
            f"{who}: X has 0 features (shape {arr.shape}); a client needs at least one column."
        )
    if np.isinf(arr).any():
        j = int(np.flatnonzero(np.isinf(arr).any(axis=0))[0])
        raise ValueError(
            f"{who}: column {_name(names, j)} of X contains infinity; a missing value is NaN."
        )
    return np.ascontiguousarray(arr), names, raw


def _name(names: list[str] | None, j: int) -> str:
    return repr(names[j]) if names is not None else str(j)


#: What a category level may be: what the handshake and a model file carry (JSON's scalars).
_LEVEL_TYPES = (str, bool, int, float, np.bool_, np.integer, np.floating)


def check_levels(values: NDArray[Any], cat: Any, who: str, column: str) -> None:
    """A categorical column's levels are all text or all numbers, as the handshake wants.

    Said here, naming the client and the column: the server's check of the handshake
    refused such a client's levels as an invalid reply (under ``"none"``; intervals from
    ``pd.cut``, timestamps, bytes under any privacy), and under ``"secure"`` a mix's
    numbers were lost to missing values. ``cat``: a pandas column's ``.cat`` (its declared
    categories, unused ones too, travel in the handshake).
    """
    levels = pd.unique(values).tolist() + ([] if cat is None else list(cat.categories))
    odd = sorted(
        {type(v).__name__ for v in levels if not (is_missing(v) or isinstance(v, _LEVEL_TYPES))}
    )
    if odd:
        raise ValueError(
            f"{who}: categorical column {column} holds {', '.join(odd)} values; its levels "
            "must be text or numbers: convert the column (X[column].astype(str), or its "
            ".cat.codes for a pandas category)."
        )
    if (kinds := mixed_kinds(levels)) is not None:
        raise ValueError(
            f"{who}: categorical column {column} mixes text and numbers ({kinds} values); "
            "its levels must be all text or all numbers, as scikit-learn's encoders want "
            "them: convert the column (X[column].astype(str), or pd.to_numeric)."
        )
