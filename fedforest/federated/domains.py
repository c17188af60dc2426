"""Category levels and class labels at the handshake: what a client may say (client side).

A categorical column's list of levels and a classifier's labels are data values. What
the handshake carries depends on the privacy level and on what the user declared:

- a column whose levels the user declared (the estimators' ``categories={column:
  levels}``, sent by the server, or ``categories="from_dtype"``: each client's pandas
  ``CategoricalDtype`` categories) travels as the declared list (public, not data), and
  its domain is those levels plus the missing category;
- an undeclared column sends the levels present under ``"none"`` (the paper's), under
  ``"secure"`` only the levels the client holds in at least ``min_level_rows`` rows (plus
  the missing category, where its rows hold a missing value or a rarer level: those rows
  count as missing unless another client names their level), under ``"dp"`` nothing (the
  server refuses the fit: a level one row holds would change the reply);
- class labels: a declared list (``classes=``) is checked here and not answered (under
  ``"none"`` the labels present and their counts still travel, for ``class_weight``);
  undeclared, the labels present travel, except under ``"dp"`` (nothing; the server
  refuses).

NumPy only: a Flower ClientApp imports it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._common import is_int_in
from .categorical import MISSING_CATEGORY, encode, is_missing, sort_categories

__all__ = [
    "declaration_hint",
    "parse_categories",
    "check_declared_labels",
    "column_index",
    "declared_by_request",
    "dtype_levels",
    "encode_levels",
    "code_counts",
    "handshake_levels",
    "level_counts",
]


def declaration_hint(message: str, spelled: dict[str, str], where: str, see: str = "") -> str:
    """``message`` with how a front end spells the parameters it names.

    Where ``message`` names an estimator parameter a user must declare (``classes=``,
    ``categories=``, ``epsilon=``), appends how ``where`` spells it (``spelled``: parameter
    -> the front end's option or key; ``see``: a page to read); unchanged if it names none.
    """
    said = [option for name, option in spelled.items() if name in message]
    if not said:
        return message
    return f"{message} ({where}: {' and '.join(said)}{f'; {see}' if see else ''})"


def parse_categories(specs: Sequence[str], where: str, how: str) -> dict[str, list[str]]:
    """Declared levels written as text: one ``"COLUMN=LEVEL,LEVEL,..."`` per spec.

    The one parser of the command line's ``--categories`` (one spec per option) and the
    Flower run config's ``categories`` (its specs joined by ``;``). Columns and levels are
    stripped and stay text, as ``read_csv`` reads a text column. A spec without a column
    or levels, a column given twice, an empty or repeated level raise ``ValueError``
    starting with ``where`` (the option or key as the user gave it) and saying ``how`` it
    is written.
    """
    out: dict[str, list[str]] = {}
    for spec in specs:
        column, sep, levels = (part.strip() for part in spec.partition("="))
        if not sep or not column or not levels:
            raise ValueError(f"{where}: {spec.strip()!r} is not {how}.")
        if column in out:
            raise ValueError(f"{where}: column {column!r} is given twice.")
        listed = [level.strip() for level in levels.split(",")]
        if "" in listed or len(set(listed)) != len(listed):
            raise ValueError(
                f"{where}: the levels of column {column!r} must be non-empty and distinct "
                f"(got {levels!r})."
            )
        out[column] = listed
    return out


def dtype_levels(X: Any, columns: Sequence[int]) -> dict[int, list[Any]]:
    """The declared categories of ``X``'s pandas ``category`` columns among ``columns``."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None:
        return {}
    out = {}
    for j in columns:
        cats = getattr(dtypes.iloc[j], "categories", None)
        if cats is not None:
            out[j] = sort_categories(list(cats))
    return out


def column_index(key: Any, names: list[str] | None, n_features: int) -> int | None:
    """The column a declared domain's key names, or None where it names none.

    A key is an index, or a name where the columns are named.
    """
    k = key.item() if hasattr(key, "item") else key
    if is_int_in(k, 0, n_features):
        return k
    if isinstance(k, str) and names is not None and k in names:
        return names.index(k)
    return None


def declared_by_request(
    header: dict[str, Any], names: list[str] | None, n_features: int, who: str
) -> dict[int, list[Any]]:
    """The server's declared domains (``domains``: [column, levels] pairs) by column index.

    A column is an index or, where the client's columns are named, a name.
    """
    out = {}
    for key, levels in header.get("domains") or []:
        j = column_index(key, names, n_features)
        if j is None:
            raise ValueError(
                f"{who}: the declared categories name column {key!r}, which is not one of "
                f"its columns ({names if names is not None else n_features})."
            )
        out[j] = sort_categories(levels)
    return out


def handshake_levels(
    raw: dict[int, NDArray[Any]],
    dtype: dict[int, list[Any]],
    header: dict[str, Any],
    names: list[str] | None,
    n_features: int,
    who: str,
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The reply's ``categories`` (levels, column by column) and ``declared`` (dtype domains).

    ``raw``: the categorical columns' values by index; ``dtype``: their pandas categories.
    """
    privacy = header.get("privacy", "none")
    by_server = declared_by_request(header, names, n_features, who)
    for j in by_server:
        if j not in raw:
            raise ValueError(
                f"{who}: column {_name(names, j)} has declared categories, but it is numeric "
                "here; give it to the Client as categorical (categorical_features=[...] or a "
                "pandas 'category' column)."
            )
    levels: dict[str, list[Any]] = {}
    declared: dict[str, list[Any]] = {}
    m = int(header.get("min_level_rows", 1))
    for j, values in raw.items():
        if j in by_server:
            levels[str(j)] = []  # the server's list: nothing of this client's
        elif header.get("from_dtype") and j in dtype:
            levels[str(j)] = []
            declared[str(j)] = dtype[j]  # the user's declaration, public
        elif privacy == "dp":
            levels[str(j)] = []  # refused by the server: a row would change the levels
        elif privacy == "secure":
            levels[str(j)] = _frequent_levels(values, m)
        else:
            levels[str(j)] = sort_categories(values.tolist())
    return levels, declared


def _frequent_levels(values: NDArray[Any], m: int) -> list[Any]:
    """The levels held in at least ``m`` rows, and the missing category if any row is left.

    A level held in fewer rows would name those rows' value: its rows become missing
    values unless another client names the level.
    """
    keys = [MISSING_CATEGORY if is_missing(v) else v for v in sort_categories(values.tolist())]
    codes = encode(values, keys)
    counts = np.bincount(codes.astype(np.int64), minlength=len(keys))
    kept = [v for v, c in zip(keys, counts, strict=True) if c >= m and v is not MISSING_CATEGORY]
    if len(kept) < len(keys):  # a missing value, or a rarer level
        kept.append(MISSING_CATEGORY)
    return kept


#: :func:`encode_levels`'s warning when no row of the column keeps its level.
_ALL_OUTSIDE = (
    " No row of this column keeps its level: a column of (nearly) unique values, such as an "
    "identifier or a date read as text, gives no split; drop it, or give it as numbers."
)


def encode_levels(
    raw: NDArray[Any], categories: list[Any], who: str, column: str
) -> NDArray[np.float64]:
    """Codes of a column in the federation's list; values outside it count as missing.

    Such values exist under ``"secure"`` (levels this client held in too few rows and no
    client named) and with declared domains (values outside them): they take the missing
    category's code, with a warning here at the client (it reaches no server).
    """
    codes = encode(raw, categories)
    outside = codes < 0
    if outside.any() and MISSING_CATEGORY in categories:
        codes[outside] = categories.index(MISSING_CATEGORY)
        warnings.warn(
            f"{who}: column {column}: {int(outside.sum())} row(s) hold a level outside the "
            "federation's categories (a level no client holds in min_aggregate_rows rows, "
            "or one outside the declared categories); they count as missing values. Declare "
            "the column's levels (categories={...} on the estimator) to keep them."
            + (_ALL_OUTSIDE if outside.all() else ""),
            UserWarning,
            stacklevel=3,
        )
    return codes


def level_counts(raw: NDArray[Any], categories: list[Any]) -> NDArray[np.float64]:
    """Rows per code of a column in the federation's list.

    Values outside it count as the missing category's, as :func:`encode_levels` codes
    them (its warning comes at the set-up).
    """
    codes = encode(raw, categories)
    if MISSING_CATEGORY in categories:
        codes[codes < 0] = categories.index(MISSING_CATEGORY)
    codes = codes[codes >= 0].astype(np.int64)
    return np.bincount(codes, minlength=len(categories)).astype(np.float64)


def code_counts(cat_raw: dict[int, NDArray[Any]], categories: Any, who: str) -> NDArray[np.float64]:
    """A client's rows per code of each categorical column the server lists.

    Column after column, in the order listed (the federation's lists); the request is
    checked first.
    """
    if not isinstance(categories, dict) or not all(
        isinstance(k, str) and k.isdigit() and int(k) in cat_raw and isinstance(v, list)
        for k, v in categories.items()
    ):
        raise ValueError(
            f"{who}: the server's code_counts is not a list of levels per categorical column "
            "of this client (by column index)."
        )
    counts = [level_counts(cat_raw[int(j)], levels) for j, levels in categories.items()]
    return np.concatenate([np.zeros(0), *counts])


def check_declared_labels(y: NDArray[Any], classes: Any, who: str) -> None:
    """Every label of ``y`` is among the declared ``classes`` (a list per output)."""
    columns = [y] if y.ndim == 1 else [y[:, o] for o in range(y.shape[1])]
    per_output = classes if y.ndim == 2 else [classes]
    # A list per output where y has one (or labels where y has several) was a TypeError
    # inside the handshake ("unhashable type: 'list'"), the server naming no field.
    nested = [isinstance(c, (list, tuple, np.ndarray)) for c in classes]
    wrong = any(nested) if y.ndim == 1 else not all(nested)
    if len(per_output) != len(columns) or wrong:
        raise ValueError(
            f"{who}: the declared classes are not one list per output of y (y has "
            f"{len(columns)} output(s): declare "
            f"{'a list of labels' if y.ndim == 1 else 'a list of labels per output'})."
        )
    for o, (column, labels) in enumerate(zip(columns, per_output, strict=True)):
        known = set(sort_categories(labels))
        found = {v.item() if isinstance(v, np.generic) else v for v in np.unique(column)}
        if not found <= known:
            where = "" if y.ndim == 1 else f" of output {o}"
            raise ValueError(
                f"{who}: {len(found - known)} label(s){where} of y are not among the declared "
                f"classes; declare every label (classes=[...]).{type_hint(found, known)}"
            )


def type_hint(found: set[Any], declared: set[Any]) -> str:
    """Where y's labels are numbers and the declared ones text (or the reverse), say so.

    Labels compare by value within a family (0 equals False and 0.0, never "0"). Names
    the families only, not a label (on Flower the message reaches the server).
    """
    kinds = {"text" if isinstance(v, str) else "numbers" for v in found}
    listed = {"text" if isinstance(v, str) else "numbers" for v in declared}
    if len(kinds) != 1 or len(listed) != 1 or kinds == listed:
        return ""
    ours, theirs = kinds.pop(), listed.pop()
    example = "classes=[0, 1], not ['0', '1']" if ours == "numbers" else "classes=['0', '1']"
    return (
        f" The labels of y are {ours} and the declared classes {theirs}: declare them as y "
        f"holds them ({example}, for example)."
    )


def _name(names: list[str] | None, j: int) -> str:
    return repr(names[j]) if names is not None else str(j)
