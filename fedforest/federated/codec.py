"""A protocol message's arrays as one byte buffer, for the transports that carry bytes.

Both remote transports send a message's arrays packed into a single ``uint8`` buffer
with a JSON layout saying where each one lives: Flower (whose records would otherwise
send every array as its own object) and Dask (whose frames are bytes, so that nothing
needs pickle). Unpacking checks the layout against the buffer (dtype kinds, shapes,
bounds) before anything reads it: the buffer comes from another machine.

This module imports NumPy only (no Flower, no Dask, no numba or pandas), so either
transport can use it without the other installed, and a Flower ClientApp process that
loads it loads nothing else of fedforest's.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._common import is_int_in
from .client_errors import with_client_type

__all__ = [
    "ERROR",
    "FINISH",
    "HELLO",
    "MAX_ERROR_TEXT",
    "array_layout",
    "error_from_header",
    "pack_arrays",
    "pack_into",
    "unpack_arrays",
]

# Transport-level message kinds, besides the protocol's (which the Client answers):
HELLO = "hello"  # discovery: a remote client reports its name (and row count)
FINISH = "finish"  # the fit is over: drop the per-fit state
ERROR = "error"  # the client failed: its text (federated/client_errors.py) and its type

#: An error message's ``type``: a class name; its ``error`` at most this many characters.
_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
MAX_ERROR_TEXT = 10_000

_ALIGN = 8
_KINDS = "biuf"  # numeric dtypes only: nothing that needs pickle


def error_from_header(header: dict[str, Any], sender: str) -> Exception:
    """A remote client's ``ERROR`` message as the exception its failure reports.

    ``type`` ``"ValueError"`` (or none: a client before 2026-12-04 sent only its
    ``ValueError``) is invalid data, a ``ValueError`` (the server raises a
    ``ClientDataError``); any other class name a ``RuntimeError`` naming it. A ``type``
    that is not a class name, or an ``error`` that is not a string of at most
    :data:`MAX_ERROR_TEXT` characters, is refused as malformed, naming the sender.
    """
    text, kind = header.get("error", "failed"), header.get("type", "ValueError")
    if not isinstance(text, str) or len(text) > MAX_ERROR_TEXT:
        return ValueError(
            f"Message from {sender!r}: its error text is not a string of at most "
            f"{MAX_ERROR_TEXT} characters (a {type(text).__name__})."
        )
    if not isinstance(kind, str) or _CLASS_NAME.fullmatch(kind) is None:
        return ValueError(f"Message from {sender!r}: its error's 'type' is not a class name.")
    if kind == "ValueError":
        return ValueError(text)
    return with_client_type(RuntimeError(f"{kind} at the client: {text}"), kind)


def pack_arrays(arrays: dict[str, NDArray[Any]]) -> tuple[list[dict[str, Any]], NDArray[np.uint8]]:
    """Pack numeric arrays into one byte buffer.

    Returns
    -------
    layout : list of dict
        Per array: ``name``, ``dtype`` (NumPy's ``dtype.str``, byte order included),
        ``shape`` and byte ``offset`` (a multiple of 8, so views stay aligned).
    buffer : ndarray of uint8, shape (n_bytes,)
    """
    layout, n_bytes = array_layout(arrays)
    buffer = np.zeros(n_bytes, dtype=np.uint8)
    pack_into(layout, arrays, buffer)
    return layout, buffer


def array_layout(arrays: dict[str, NDArray[Any]]) -> tuple[list[dict[str, Any]], int]:
    """Where :func:`pack_into` puts each array, and the bytes they take in all.

    Raises
    ------
    TypeError
        If an array is not numeric (only numeric arrays travel).
    """
    layout: list[dict[str, Any]] = []
    offset = 0
    for name, arr in arrays.items():
        a = np.asarray(arr)
        if a.dtype.kind not in _KINDS:
            raise TypeError(f"Array {name!r} has dtype {a.dtype}; only numeric arrays travel.")
        layout.append(
            {"name": name, "dtype": a.dtype.str, "shape": list(a.shape), "offset": offset}
        )
        offset += -(-a.nbytes // _ALIGN) * _ALIGN
    return layout, offset


def pack_into(
    layout: list[dict[str, Any]], arrays: dict[str, NDArray[Any]], out: NDArray[np.uint8]
) -> None:
    """Copy ``arrays`` into ``out`` (uint8, zeroed, ``array_layout``'s bytes) at ``layout``.

    The transports that send one frame write its arrays straight into it (no packed
    buffer copied into the frame afterwards).
    """
    for entry, arr in zip(layout, arrays.values(), strict=True):
        raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        out[entry["offset"] : entry["offset"] + raw.size] = raw


def unpack_arrays(layout: Any, buffer: NDArray[np.uint8], sender: str) -> dict[str, NDArray[Any]]:
    """Inverse of :func:`pack_arrays`; every entry is validated against the buffer.

    Raises
    ------
    ValueError
        If the layout is malformed, names a non-numeric dtype, or points outside the
        buffer; the message names ``sender``.
    """
    if not isinstance(layout, list):
        raise ValueError(f"Message from {sender!r}: the array layout is not a list.")
    out: dict[str, NDArray[Any]] = {}
    for entry in layout:
        name, dtype, shape, offset = _check_entry(entry, sender)
        if name in out:
            raise ValueError(f"Message from {sender!r}: the array {name!r} appears twice.")
        # Python integers: a forged shape's product must not wrap around (int64 would, to
        # a size that fits the buffer).
        nbytes = math.prod(shape) * dtype.itemsize
        if offset % _ALIGN or offset + nbytes > buffer.size:
            raise ValueError(
                f"Message from {sender!r}: array {name!r} ({nbytes} bytes at offset {offset}) "
                f"does not fit the {buffer.size}-byte buffer."
            )
        arr = buffer[offset : offset + nbytes].view(dtype).reshape(shape)
        # Another machine's byte order, turned into this one's (the kernels take no other).
        out[name] = arr if dtype.isnative else arr.astype(dtype.newbyteorder("="))
    return out


def _check_entry(entry: Any, sender: str) -> tuple[str, np.dtype[Any], tuple[int, ...], int]:
    """One layout entry as (name, dtype, shape, offset), or a ValueError naming the sender."""
    try:
        name, offset = str(entry["name"]), entry["offset"]
        dtype = np.dtype(str(entry["dtype"]))
        shape = tuple(entry["shape"])
    except (KeyError, TypeError) as exc:
        raise ValueError(
            f"Message from {sender!r}: malformed array layout entry {entry!r}."
        ) from exc
    ints = [offset, *shape]
    if dtype.kind not in _KINDS or not all(is_int_in(v) for v in ints):
        raise ValueError(
            f"Message from {sender!r}: array {name!r} has dtype {dtype} and shape {shape} at "
            f"offset {offset}; expected a numeric dtype and non-negative integers."
        )
    return name, dtype, shape, offset
