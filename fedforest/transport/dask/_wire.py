"""fedforest messages as bytes between the server and its Dask actors.

A frame is a fixed preamble, one compact JSON object (the kind, the header and the
layout of the arrays) and the arrays packed into one buffer by
:func:`~fedforest.federated.codec.pack_into` (the Flower transport's codec too: the
same layout, the same checks, and no Flower needed): nothing in a frame needs pickle, and
decoding validates the preamble, the JSON and every array's place in the buffer before
any array is read.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from ...federated.codec import ERROR, HELLO, array_layout, pack_into, unpack_arrays
from ...federated.protocol import Message

__all__ = ["ERROR", "HELLO", "from_bytes", "to_bytes"]

_MAGIC = b"FFDK"
_VERSION = 1
#: magic, version, three bytes of padding, the JSON's length: 12 bytes, then the JSON.
_PREAMBLE = struct.Struct("<4sB3xI")
_ALIGN = 8


def to_bytes(msg: Message) -> bytearray:
    """One message as a frame: preamble, JSON (kind, header, layout), padding, arrays.

    The arrays are written straight into the frame, one allocation of its size (packing
    them first, then joining, held three copies of a reply at once).
    """
    layout, n_bytes = array_layout(msg.arrays)
    meta = json.dumps(
        {"kind": msg.kind, "header": msg.header, "layout": layout}, separators=(",", ":")
    ).encode()
    head = _PREAMBLE.pack(_MAGIC, _VERSION, len(meta)) + meta
    start = len(head) + (-len(head) % _ALIGN)
    frame = bytearray(start + n_bytes)  # zeroed: the padding too
    frame[: len(head)] = head
    pack_into(layout, msg.arrays, np.frombuffer(frame, dtype=np.uint8, offset=start))
    return frame


def from_bytes(frame: Any, sender: str, *, owned: bool = False) -> Message:
    """Inverse of :func:`to_bytes`; the arrays are writable.

    They are copies of the frame's bytes, or with ``owned=True`` and a ``bytearray``
    (what Dask hands over for one) views into it: the caller gives the frame up, and the
    reply is not held twice while it is decoded.

    Raises
    ------
    ValueError
        If ``frame`` is not a fedforest frame (not bytes, another magic or version, a
        malformed JSON part or one with a key it does not write, arrays outside the buffer);
        the message names ``sender``.
    """
    if not isinstance(frame, bytes | bytearray | memoryview):
        raise ValueError(f"Message from {sender!r} is a {type(frame).__name__}, not bytes.")
    data = memoryview(frame).cast("B")
    if data.nbytes < _PREAMBLE.size:
        raise ValueError(f"Message from {sender!r} has {data.nbytes} bytes: too short.")
    magic, version, n_meta = _PREAMBLE.unpack_from(data)
    if magic != _MAGIC or version != _VERSION:
        raise ValueError(
            f"Message from {sender!r} is not a fedforest frame (magic {magic!r}, version "
            f"{version}; expected {_MAGIC!r}, version {_VERSION})."
        )
    end = _PREAMBLE.size + n_meta
    if end > data.nbytes:
        raise ValueError(f"Message from {sender!r}: its JSON part runs past its end.")
    try:
        meta = json.loads(bytes(data[_PREAMBLE.size : end]))
        kind, header, layout = meta["kind"], meta["header"], meta["layout"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"Message from {sender!r} has a malformed JSON part: {exc}.") from exc
    # Only what to_bytes writes: a key it would not read is refused, not ignored (as the
    # Flower codec refuses a record or entry it would not read).
    extra = sorted(set(meta) - {"kind", "header", "layout"})
    if extra:
        raise ValueError(
            f"Message from {sender!r} carries the JSON key {extra[0]!r}, which is not part of "
            "a fedforest frame (its JSON part holds kind, header and layout only)."
        )
    if not isinstance(kind, str) or not isinstance(header, dict):
        raise ValueError(f"Message from {sender!r}: the kind or the header has the wrong type.")
    start = end + (-end % _ALIGN)
    if owned and isinstance(frame, bytearray):
        buffer = np.frombuffer(frame, dtype=np.uint8, offset=min(start, data.nbytes))
    else:
        buffer = np.frombuffer(bytearray(data[start:]), dtype=np.uint8)
    return Message(kind, header, unpack_arrays(layout, buffer, sender))
