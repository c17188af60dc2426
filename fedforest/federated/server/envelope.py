"""The envelope of every reply: a Message of the request's kind, holding only its arrays.

Checked for every reply of every transport (local, Flower, Dask) in
:func:`~.rounds.exchange`, before the round's own checks (:mod:`.checks`). An array the
protocol does not define for the round (:data:`~..protocol.REPLY_ARRAYS`; under
``privacy="secure"`` exactly the round's masked sums) is refused, naming the client and the
array: the server would otherwise ignore it silently. So is an array in another byte order
than the machine's (the remote transports' codec turns one into native order on arrival):
numba's kernels cannot take one, and a fit died of it with numba's typing error. Real
numbers travel as float64 only: float32 or float16 values were accepted and rounded the
client's statistics, a silently different forest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..protocol import HANDSHAKE, RECOVER, REPLY_ARRAYS, Message
from .checks import Check, InvalidReply

__all__ = ["check_envelope", "masked_arrays"]


def check_envelope(name: str, request: Message, reply: Any) -> None:
    """A reply is a Message of the request's kind with a dict header and numeric arrays."""
    if not isinstance(reply, Message):
        raise InvalidReply(
            name, request.kind, "the reply", f"is a {type(reply).__name__}, not a Message"
        )
    if reply.kind != request.kind:
        raise InvalidReply(name, request.kind, "kind", f"is {reply.kind!r}")
    if not isinstance(reply.header, dict):
        raise InvalidReply(name, request.kind, "the header", "is not a JSON object")
    if not isinstance(reply.arrays, dict):
        raise InvalidReply(name, request.kind, "the arrays", "are not a mapping of names")
    allowed = _expected_arrays(request)
    for key, arr in reply.arrays.items():
        if allowed is not None and key not in allowed:
            raise InvalidReply(
                name,
                request.kind,
                f"array {key!r}",
                f"is not part of the protocol's {request.kind} reply (expected only "
                f"{sorted(allowed)})",
            )
        if not isinstance(key, str) or not isinstance(arr, np.ndarray):
            raise InvalidReply(name, request.kind, f"array {key!r}", "is not a numpy array")
        if arr.dtype.kind not in "biuf":
            raise InvalidReply(
                name, request.kind, f"array {key!r}", f"has dtype {arr.dtype} (not numeric)"
            )
        if arr.dtype.kind == "f" and arr.dtype.itemsize != 8:  # float32 would round them
            raise InvalidReply(
                name,
                request.kind,
                f"array {key!r}",
                f"has dtype {arr.dtype} (the protocol's real numbers are float64)",
            )
        if not arr.dtype.isnative:  # numba's kernels take native byte order only
            raise InvalidReply(
                name,
                request.kind,
                f"array {key!r}",
                f"has dtype {arr.dtype.str} (not in this machine's byte order)",
            )


def _expected_arrays(request: Message) -> frozenset[str] | None:
    """The array names a reply to ``request`` may hold (None: a kind the protocol lacks)."""
    if request.kind == RECOVER:  # the masks of the sums it recovers
        shapes = request.header.get("shapes")
        return frozenset(str(k) for k in shapes) if isinstance(shapes, dict) else frozenset()
    if request.kind == HANDSHAKE and request.header.get("privacy", "none") != "none":
        return frozenset(("public_key",))
    return REPLY_ARRAYS.get(request.kind)


def masked_arrays(specs: dict[str, tuple[int, ...]]) -> Check:
    """Under "secure": each masked array is uint64 of its sum's shape (values are masked)."""

    def check(name: str, request: Message, reply: Message) -> None:
        extra = sorted(set(reply.arrays) - set(specs))
        if extra:  # a masked round's reply is its masked sums, no more
            raise InvalidReply(
                name,
                reply.kind,
                f"array {extra[0]!r}",
                f"is not one of the masked sums {sorted(specs)}",
            )
        for key, shape in specs.items():
            arr = reply.arrays.get(key)
            if arr is None:
                raise InvalidReply(name, reply.kind, f"array {key!r}", "is missing")
            if arr.dtype != np.uint64 or arr.shape != shape:
                raise InvalidReply(
                    name,
                    reply.kind,
                    f"array {key!r}",
                    f"has dtype {arr.dtype} and shape {arr.shape}, not uint64 {shape}",
                )

    return check
