"""fedforest messages as Flower records: one JSON config entry and at most one array.

Flower sends every array of a record as its own object (and request), so the arrays of
a protocol message travel packed into a single ``uint8`` buffer by
:func:`fedforest.federated.codec.pack_arrays` (the Dask transport's codec too); a JSON
layout says where each one lives, and unpacking checks it against the buffer before
anything reads it. ``pack_arrays``, ``unpack_arrays`` and the transport-level kinds
``HELLO``, ``FINISH``, ``ERROR`` are re-exported here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

# Absolute, so that it reads as what it is: NumPy-only (no numba, no pandas, no
# fedforest client side), unlike the relative imports of fedforest this module defers.
from fedforest.federated.codec import ERROR, FINISH, HELLO, pack_arrays, unpack_arrays

if TYPE_CHECKING:  # imported on use: a ClientApp process that only ends a fit needs neither
    from ...federated.protocol import Message  # numba nor pandas, which protocol loads

__all__ = [
    "ERROR",
    "FINISH",
    "HELLO",
    "WAIT",
    "control_records",
    "from_records",
    "message_kind",
    "pack_arrays",
    "to_records",
    "unpack_arrays",
]

# Flower message types: discovery is a query; protocol rounds change client state.
QUERY_TYPE = "query.fedforest"
TRAIN_TYPE = "train.fedforest"

#: A keep-awake message (a query, outside the protocol): answered at once with its kind,
#: it keeps a SuperNode pulling while the server prepares the next round (federation.py).
WAIT = "wait"

CONFIG = "fedforest"
ARRAYS = "fedforest.arrays"
PACKED = "packed"


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
    # Only what to_records makes: a record or entry it would not read is refused, not ignored.
    extra = [f"the record {k!r}" for k in sorted(set(content.config_records) - {CONFIG})]
    extra += [f"the record {k!r}" for k in sorted(set(content.array_records) - {ARRAYS})]
    extra += [f"the record {k!r}" for k in sorted(content.metric_records)]
    extra += [
        f"the entry {CONFIG}[{k!r}]" for k in sorted(set(config) - {"kind", "header", "layout"})
    ]
    if ARRAYS in content.array_records:
        extra += [
            f"the array {ARRAYS}[{k!r}]"
            for k in sorted(set(content.array_records[ARRAYS]) - {PACKED})
        ]
    if extra:
        raise ValueError(
            f"Message from {sender!r} carries {extra[0]}, which is not part of a fedforest "
            f"message (a {CONFIG!r} config record with kind, header and layout, and at most "
            f"the array record {ARRAYS!r} with the array {PACKED!r})."
        )
    try:
        kind = str(config["kind"])
        header = json.loads(str(config["header"]))
        layout = json.loads(str(config["layout"]))
    except (KeyError, json.JSONDecodeError, RecursionError) as exc:  # nested too deep too
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
