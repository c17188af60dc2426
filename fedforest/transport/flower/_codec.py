"""fedforest messages as Flower records: one JSON config entry and at most one array.

Flower sends every array of a record as its own object (and request), so the arrays of
a protocol message travel packed into a single ``uint8`` buffer; a JSON layout says
where each one lives. Unpacking checks the layout against the buffer (dtype kinds,
shapes, bounds) before anything reads it: the buffer comes from another machine.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from numpy.typing import NDArray

if TYPE_CHECKING:  # imported on use: a ClientApp process that only ends a fit needs neither
    from ...federated.protocol import Message  # numba nor pandas, which protocol loads

__all__ = [
    "control_records",
    "from_records",
    "message_kind",
    "pack_arrays",
    "to_records",
    "unpack_arrays",
]

# Transport-level message kinds, besides the protocol's (which the Client answers):
HELLO = "hello"  # discovery: a SuperNode reports its client name
FINISH = "finish"  # the fit is over: drop the per-fit state
ERROR = "error"  # the client's data is invalid (a ValueError on the client)
# Flower message types: discovery is a query; protocol rounds change client state.
QUERY_TYPE = "query.fedforest"
TRAIN_TYPE = "train.fedforest"

CONFIG = "fedforest"
ARRAYS = "fedforest.arrays"
PACKED = "packed"
_ALIGN = 8
_KINDS = "biuf"  # numeric dtypes only: nothing that needs pickle


def pack_arrays(arrays: dict[str, NDArray[Any]]) -> tuple[list[dict[str, Any]], NDArray[np.uint8]]:
    """Pack numeric arrays into one byte buffer.

    Returns
    -------
    layout : list of dict
        Per array: ``name``, ``dtype`` (NumPy's ``dtype.str``, byte order included),
        ``shape`` and byte ``offset`` (a multiple of 8, so views stay aligned).
    buffer : ndarray of uint8, shape (n_bytes,)
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
    buffer = np.zeros(offset, dtype=np.uint8)
    for entry, arr in zip(layout, arrays.values(), strict=True):
        raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        buffer[entry["offset"] : entry["offset"] + raw.size] = raw
    return layout, buffer


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
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if offset % _ALIGN or offset + nbytes > buffer.size:
            raise ValueError(
                f"Message from {sender!r}: array {name!r} ({nbytes} bytes at offset {offset}) "
                f"does not fit the {buffer.size}-byte buffer."
            )
        out[name] = buffer[offset : offset + nbytes].view(dtype).reshape(shape)
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
    if dtype.kind not in _KINDS or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints
    ):
        raise ValueError(
            f"Message from {sender!r}: array {name!r} has dtype {dtype} and shape {shape} at "
            f"offset {offset}; expected a numeric dtype and non-negative integers."
        )
    return name, dtype, shape, offset


def to_records(msg: Message) -> RecordDict:
    """A protocol message as Flower content: a config record and at most one array."""
    layout, buffer = pack_arrays(msg.arrays)
    config = ConfigRecord(
        {
            "kind": msg.kind,
            "header": json.dumps(msg.header, separators=(",", ":")),
            "layout": json.dumps(layout, separators=(",", ":")),
        }
    )
    records: dict[str, Any] = {CONFIG: config}
    if buffer.size:
        records[ARRAYS] = ArrayRecord({PACKED: Array(buffer)})
    return RecordDict(records)


def control_records(kind: str) -> RecordDict:
    """What :func:`to_records` makes of a ``Message(kind)`` (no header, no arrays)."""
    config = ConfigRecord({"kind": kind, "header": "{}", "layout": "[]"})
    return RecordDict({CONFIG: config})


def message_kind(content: RecordDict) -> str | None:
    """The kind of a fedforest message, read without decoding it (None if there is none)."""
    config = content.config_records.get(CONFIG)
    kind = None if config is None else config.get("kind")
    return kind if isinstance(kind, str) else None


def from_records(content: RecordDict, sender: str) -> Message:
    """Inverse of :func:`to_records`.

    Raises
    ------
    ValueError
        If the content is not a fedforest message (names ``sender``).
    """
    from ...federated.protocol import Message

    config = content.config_records.get(CONFIG)
    if config is None:
        raise ValueError(f"Message from {sender!r} carries no {CONFIG!r} config record.")
    try:
        kind = str(config["kind"])
        header = json.loads(str(config["header"]))
        layout = json.loads(str(config["layout"]))
    except (KeyError, json.JSONDecodeError) as exc:
        raise ValueError(f"Message from {sender!r} has a malformed header: {exc}.") from exc
    if not isinstance(header, dict):
        raise ValueError(f"Message from {sender!r}: the header is not a JSON object.")
    buffer = np.zeros(0, dtype=np.uint8)
    if ARRAYS in content.array_records:
        packed = content.array_records[ARRAYS][PACKED].numpy()
        if packed.dtype != np.uint8 or packed.ndim != 1:
            raise ValueError(f"Message from {sender!r}: the packed arrays are not a byte vector.")
        buffer = packed
    return Message(kind, header, unpack_arrays(layout, buffer, sender))
