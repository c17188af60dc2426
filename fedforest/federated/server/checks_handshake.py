"""The server's checks of a client's handshake reply (its schema, labels, keys).

Moved out of ``checks.py``, which re-exports its names.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._common import is_int_in
from ..label_dtypes import label_dtype_problem
from ..privacy.secagg import valid_public_key
from ..protocol import Message, expect_array, protocol_mismatch
from .checks_base import Check, InvalidReply

#: JSON scalar types a class label may have.
_LABEL_TYPES = (str, int, float, bool)


# --------------------------------------------------------------------------- handshake
def label_type(label: Any) -> str:
    """Labels compare within a type family: numbers (bool included) or text."""
    return "text" if isinstance(label, str) else "number"


def check_handshake(task: str, privacy: str, ranges: bool) -> Check:
    """The handshake's header fields: types, sizes and ranges."""

    def check(name: str, request: Message, reply: Message) -> None:
        h, kind = reply.header, request.kind
        if (why := protocol_mismatch(h.get("protocol"))) is not None:
            raise InvalidReply(name, kind, "header field 'protocol'", why)
        for key in ("n_samples", "n_features", "feature_names"):
            if key not in h:
                raise InvalidReply(name, kind, f"header field {key!r}", "is missing")
        d, n = h["n_features"], h["n_samples"]
        # Split features are int32 in the trees; rows are counted exactly in float64.
        for key, value, low, high in (("n_features", d, 1, 2**31 - 1), ("n_samples", n, 0, 2**53)):
            if not is_int_in(value, low, high):
                raise InvalidReply(
                    name,
                    kind,
                    f"header field {key!r}",
                    f"is {value!r}, not an integer in [{low}, {high})",
                )
        n_out = h.get("n_outputs", 1)
        if not is_int_in(n_out, 1, 10_001):
            raise InvalidReply(
                name, kind, "header field 'n_outputs'", f"is {n_out!r}, not an integer >= 1"
            )
        names = h["feature_names"]
        if names is not None and (
            not isinstance(names, list)
            or len(names) != d
            or not all(isinstance(f, str) for f in names)
            or len(set(names)) != d
        ):
            raise InvalidReply(
                name, kind, "header field 'feature_names'", f"is not null or {d} distinct strings"
            )
        # Each categorical column's levels; "declared": pandas-declared ones (from_dtype).
        cats = h.get("categories", {})
        for field, table in (("categories", cats), ("declared", h.get("declared", {}))):
            if not isinstance(table, dict) or not all(
                isinstance(j, str) and j.isdigit() and int(j) < d and isinstance(v, list)
                for j, v in table.items()
            ):
                raise InvalidReply(name, kind, f"header field {field!r}", "is not a column map")
            for j, values in table.items():
                where = f"header field {field!r}[{j!r}]"
                _check_scalars(name, kind, where, values, allow_null=True)
                if field == "declared" and (j not in cats or not values):
                    raise InvalidReply(name, kind, where, "is not a categorical column's levels")
        if not isinstance(h.get("weighted", False), bool):
            raise InvalidReply(name, kind, "header field 'weighted'", "is not a boolean")
        poisson = request.header.get("criterion") == "poisson" and privacy == "none"
        if poisson and not isinstance(h.get("targets_positive"), bool):
            raise InvalidReply(name, kind, "header field 'targets_positive'", "is not a boolean")
        missing = h.get("missing_features", [])
        if (
            not isinstance(missing, list)
            or not all(is_int_in(j, 0, d) for j in missing)
            or sorted(set(missing)) != missing
            or any(j < 0 or j >= d or str(j) in cats for j in missing)
        ):
            raise InvalidReply(
                name,
                kind,
                "header field 'missing_features'",
                f"is not a sorted list of distinct numeric column indices below {d}",
            )
        # Declared classes (or "dp"): no labels travel, outside "none".
        quiet = privacy == "dp" or (privacy != "none" and request.header.get("classes") is not None)
        if task == "classification" and not (quiet and h.get("labels") is None):
            labels: Any = h.get("labels")
            counts: Any = h.get("label_counts")
            if n_out > 1 and (not isinstance(labels, list) or len(labels) != n_out):
                raise InvalidReply(name, kind, "header field 'labels'", f"is not {n_out} lists")
            if n_out > 1 and privacy == "none" and not isinstance(counts, list):
                raise InvalidReply(name, kind, "header field 'label_counts'", "is not a list")
            # Under "secure" a client names the labels it holds in m rows (maybe none).
            most = n // max(int(request.header.get("min_level_rows", 1)), 1)
            for o, own in enumerate(labels if n_out > 1 else [labels]):
                field = "header field 'labels'" + (f"[{o}]" if n_out > 1 else "")
                if privacy == "secure" and isinstance(own, list) and len(own) > most:
                    raise InvalidReply(name, kind, field, f"names more than {most} labels")
                if not isinstance(own, list) or not (own or privacy == "secure"):
                    raise InvalidReply(name, kind, field, "is not a non-empty list")
                _check_scalars(name, kind, field, own)
                if privacy == "none":
                    own_counts = counts if n_out == 1 else (counts[o:] or [None])[0]
                    _check_label_counts(name, kind, own_counts, len(own), n)
            found = labels if n_out == 1 else [v for own in labels for v in own]
            if (code := h.get("label_dtype")) is not None:  # y's dtype, for classes_
                if (why := label_dtype_problem(code, found)) is not None:
                    raise InvalidReply(name, kind, "header field 'label_dtype'", why)
        if ranges:
            lo = expect_array(reply, "feature_min", "f", (d,), name)
            hi = expect_array(reply, "feature_max", "f", (d,), name)
            num = np.setdiff1d(np.arange(d), [int(j) for j in cats])  # codes come later
            lo, hi = lo[num], hi[num]
            if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
                raise InvalidReply(
                    name, kind, "arrays 'feature_min'/'feature_max'", "are not finite with min<=max"
                )
        if privacy != "none":
            _check_public_key(name, kind, reply.arrays.get("public_key"))

    return check


def _check_public_key(name: str, kind: str, raw: Any) -> None:
    """Under "secure"/"dp": 32 uint8 bytes, not a low-order X25519 point."""
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.shape != (32,):
        got = "is missing" if raw is None else f"has dtype {raw.dtype}, shape {raw.shape}"
        raise InvalidReply(name, kind, "array 'public_key'", f"{got}, not 32 bytes as uint8")
    if not valid_public_key(raw.tobytes()):
        raise InvalidReply(
            name, kind, "array 'public_key'", "is not a valid X25519 key (low order)"
        )


def _check_scalars(
    name: str, kind: str, field: str, values: list[Any], allow_null: bool = False
) -> None:
    """Distinct JSON scalars of one type family (labels, categories).

    ``allow_null``: one null may stand beside them (a categorical column's missing values).
    """
    if allow_null and None in values:
        if values.count(None) > 1:
            raise InvalidReply(name, kind, field, "repeats null")
        values = [v for v in values if v is not None]
    if not all(isinstance(v, _LABEL_TYPES) for v in values):
        bad = next(v for v in values if not isinstance(v, _LABEL_TYPES))
        raise InvalidReply(name, kind, field, f"holds {bad!r}, not a string or number")
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        raise InvalidReply(name, kind, field, "holds NaN or infinity")
    if len({label_type(v) for v in values}) > 1:
        raise InvalidReply(name, kind, field, "mixes strings and numbers")
    if len(set(values)) != len(values):
        raise InvalidReply(name, kind, field, "repeats a value")


def _check_label_counts(name: str, kind: str, counts: Any, n_labels: int, n: int) -> None:
    """Under "none": each claimed label has rows, and the counts add up to the client's rows."""
    field = "header field 'label_counts'"
    if not isinstance(counts, list) or len(counts) != n_labels:
        raise InvalidReply(name, kind, field, f"is not a list of {n_labels} counts")
    if not all(is_int_in(c, 1) for c in counts):
        raise InvalidReply(name, kind, field, "holds a count < 1 (a label without rows)")
    if sum(counts) != n:
        raise InvalidReply(name, kind, field, f"adds up to {sum(counts)}, not n_samples = {n}")
