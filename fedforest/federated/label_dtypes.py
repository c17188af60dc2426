"""The dtype of a classifier's labels: what scikit-learn's ``classes_`` would have.

scikit-learn's forests give ``classes_`` the dtype of ``np.asarray(y)`` (``np.unique``
keeps it): ``object`` for a pandas column of text, ``<U..`` for a NumPy array of text,
``int32`` for ``int32`` labels. The handshake carries the labels as JSON scalars, which
lose it, so each client also says its ``y``'s dtype (``label_dtype``) and the server gives
``classes_`` the dtype of all the clients' ``y`` put together, as scikit-learn's forest on
the pooled rows would have. The same code keeps the dtype in a model file.

What a code says is the dtype of the client's container, never a label: text is ``"U"``
without its width (a NumPy text array is as wide as its longest label, maybe a label
fewer than ``min_aggregate_rows`` rows hold, which the client does not name); ``"O"`` is
an object array (a pandas column); numbers say their kind and width (``"<i4"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["LABEL_DTYPES", "label_dtype", "label_dtype_problem", "labels_array", "pooled_dtype"]

#: Every code a client may send (and a model file may hold).
LABEL_DTYPES = frozenset(
    {"U", "O"}
    | {np.dtype(c).str for c in ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8")}
    | {np.dtype(c).str for c in ("f2", "f4", "f8")}
)


def label_dtype(labels: NDArray[Any]) -> str | None:
    """The code of an array of labels' dtype (native byte order); None for other kinds."""
    kind = labels.dtype.kind
    if kind in "UO":
        return kind
    code = np.dtype(f"{kind}{labels.dtype.itemsize}").str if kind in "biuf" else None
    return code if code in LABEL_DTYPES else None


def label_dtype_problem(code: Any, labels: list[Any]) -> str | None:
    """Why ``code`` cannot be the dtype of ``labels`` (JSON scalars), or None.

    Text needs ``"U"`` or ``"O"``; numbers a numeric code (or ``"O"``) of their type
    (bools ``b1``, integers ``i``/``u``, floats ``f``) that holds each of them unchanged.
    """
    if not isinstance(code, str) or code not in LABEL_DTYPES:
        return f"is {code!r}, not one of {sorted(LABEL_DTYPES)}"
    if code == "O":
        return None
    text = [v for v in labels if isinstance(v, str)]
    if code == "U":
        return None if len(text) == len(labels) else "is text, but the labels are numbers"
    if text:
        return f"is {code!r} (numbers), but the labels are text"
    kind = np.dtype(code).kind
    wanted = {"b": (bool,), "i": (int,), "u": (int,), "f": (float, int)}[kind]
    if any(isinstance(v, bool) != (kind == "b") or not isinstance(v, wanted) for v in labels):
        return f"is {code!r}, which does not hold the labels' type"
    try:
        same = np.array(labels, dtype=code).tolist() == labels
    except (OverflowError, ValueError):
        same = False
    return None if same else f"is {code!r}, which does not hold every label unchanged"


def pooled_dtype(codes: list[str]) -> str | None:
    """The dtype of the clients' ``y`` put together (``np.concatenate``'s), as a code.

    None when no code came (an older client): ``classes_`` then takes NumPy's dtype of the
    labels.
    """
    if not codes:
        return None
    if "O" in codes:
        return "O"
    if "U" in codes:
        return "U"
    return np.result_type(*[np.dtype(c) for c in codes]).str


def labels_array(labels: list[Any], code: str | None) -> NDArray[Any]:
    """The labels as an array of dtype ``code`` (text: as wide as the longest label)."""
    if code is None:
        return np.asarray(labels)
    if code == "O":
        out = np.empty(len(labels), dtype=object)
        out[:] = labels
        return out
    return np.asarray(labels, dtype=str if code == "U" else np.dtype(code))
