"""Masked rounds of ``privacy="secure"``: the clients' answers summed, masks removed.

:func:`secure_exchange` sends one round, checks that every reply holds the masked
arrays it should (uint64, the expected shapes), adds them up mod 2^64 and decodes the
sums (fixed point, or the raw words of packed counts); a client that failed is removed
from the sums by a recovery round in which the survivors send the masks they shared with
it (:func:`..privacy.secagg.correction`), or not (:func:`sums_unless_dropped`; in a
batch's set-up the grower then sets the batch up again, :class:`SetUpDropped`). Moved
out of :mod:`.secure` (which re-exports it) to keep that module under the size limit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..federation import Federation
from ..privacy.secagg import add_into, correction, from_fixed
from ..protocol import RECOVER, CommunicationLedger, Message
from .envelope import masked_arrays
from .rounds import exchange

__all__ = ["SetUpDropped", "secure_exchange", "sums_sent_again", "sums_unless_dropped"]


class SetUpDropped(Exception):
    """A client dropped in a batch's set-up (``"secure"``, ``"dp"``): set it up again.

    The round is not recovered: its survivors' sums run over rows the full set's digest
    drew (``batch_setup.py``). The grower catches it and sets the batch up again from
    scratch, under the survivors' digest.
    """


def secure_exchange(
    fed: Federation,
    ledger: CommunicationLedger,
    msg: Message,
    specs: dict[str, tuple[tuple[int, ...], NDArray[np.int64] | int | None]],
    n_threads: int = 1,
) -> dict[str, NDArray[Any]]:
    """One masked round (:func:`sums_unless_dropped`, recovering a drop)."""
    sums = sums_unless_dropped(fed, ledger, msg, specs, n_threads, recover=True)
    assert sums is not None
    return sums


def sums_sent_again(
    fed: Federation,
    ledger: CommunicationLedger,
    msg: Message,
    specs: dict[str, tuple[tuple[int, ...], NDArray[np.int64] | int | None]],
) -> dict[str, NDArray[Any]]:
    """A masked round over every row, sent again to the survivors after a drop.

    Under ``"secure"``: the grid moments (a drop in the coarse counts stops the fit, and
    one in the out-of-bag round releases nothing: red team 18). Its rows weigh secret
    weights bound to the round's clients (``client_secrets.federation_secret``): a drop
    sends it again to the survivors instead of a recovery round, which would leave them
    with the weights of the clients before the drop, so that two fits, one with the
    dropped client's answer and one without, gave the difference of their sums: that
    client's own (docs/privacy-findings.md, "Red team 9"). The survivors' sums are then a
    fit's without that client.
    """
    while True:  # each pass drops a client; with none left the exchange raises
        sums = sums_unless_dropped(fed, ledger, msg, specs)
        if sums is not None:
            return sums


def sums_unless_dropped(
    fed: Federation,
    ledger: CommunicationLedger,
    msg: Message,
    specs: dict[str, tuple[tuple[int, ...], NDArray[np.int64] | int | None]],
    n_threads: int = 1,
    recover: bool = False,
) -> dict[str, NDArray[Any]] | None:
    """One masked round: the decoded sums over the clients of each array in ``specs``.

    ``specs`` maps an array name to its shape and fractional bits (None: the uint64 sum as
    it is, e.g. of packed counts). A client that fails
    (dropped under ``on_client_failure="drop"``) is removed from the sums by a recovery
    round with the survivors; with ``recover=False`` there is none and the result is None
    (the survivors' sums stay masked by their masks with the dropped client: below the
    roots their nodes may hold fewer than ``min_aggregate_rows`` of their rows).
    ``n_threads`` > 1 adds large sums in threads (the same words).
    """
    peers = list(fed.client_names)
    tag = ledger.rounds
    msg = Message(msg.kind, {**msg.header, "secagg": {"tag": tag, "peers": peers}}, msg.arrays)
    # Each reply is added in as it arrives (and let go: a transport that receives them one
    # at a time never holds a round's replies all at once); integer sums mod 2^64 do not
    # depend on the order. The reply's stand-in keeps its sizes for the ledger.
    totals = {name: np.zeros(shape, dtype=np.uint64) for name, (shape, _) in specs.items()}

    def fold(sender: str, reply: Message) -> Message:
        for name, (shape, _) in specs.items():
            add_into(totals[name], _masked_array(reply, name, shape, sender), n_threads)
        return Message(reply.kind, reply.header, {k: _stand_in(a) for k, a in reply.arrays.items()})

    replies = exchange(
        fed, ledger, msg, masked_arrays({k: shape for k, (shape, _) in specs.items()}), fold=fold
    )
    dropped = sorted(set(peers) - {name for name, _ in replies})
    if dropped and not recover:
        return None
    if dropped:
        totals = _recover(fed, ledger, tag, dropped, peers, totals)
    return {
        name: totals[name] if bits is None else from_fixed(totals[name], bits)
        for name, (_, bits) in specs.items()
    }


def _masked_array(msg: Message, name: str, shape: tuple[int, ...], sender: str) -> Any:
    if name not in msg.arrays:
        raise ValueError(f"Message {msg.kind!r} from {sender!r} lacks the array {name!r}.")
    arr = np.asarray(msg.arrays[name])
    if arr.dtype != np.uint64 or arr.shape != shape:
        raise ValueError(
            f"Array {name!r} of message {msg.kind!r} from {sender!r} has dtype {arr.dtype} and "
            f"shape {arr.shape}; expected uint64 and shape {shape} (a masked sum)."
        )
    return arr


def _stand_in(a: NDArray[Any]) -> NDArray[Any]:
    """An array of ``a``'s dtype and shape holding no memory (zeros, read-only)."""
    return np.broadcast_to(np.zeros((), dtype=a.dtype), a.shape)


def _shapes(totals: dict[str, NDArray[np.uint64]]) -> list[tuple[str, tuple[int, ...]]]:
    return [(name, tuple(total.shape)) for name, total in totals.items()]


def _recover(
    fed: Federation,
    ledger: CommunicationLedger,
    tag: int,
    dropped: list[str],
    peers: list[str],
    totals: dict[str, NDArray[np.uint64]],
) -> dict[str, NDArray[np.uint64]]:
    """Remove the survivors' masks with the dropped clients from this round's sums."""
    shapes = {name: list(total.shape) for name, total in totals.items()}
    header = {"tag": tag, "dropped": dropped, "shapes": shapes, "peers": peers}
    request = Message(RECOVER, header)
    # Every survivor must answer: one dropped here (on_client_failure="drop") leaves its
    # pair masks in the sums. fed.client_names no longer lists it after the exchange, so
    # the survivors are taken before (checking against the names after decoded garbage).
    survivors = set(fed.client_names)
    # Every survivor failing raises the exchange's ClientFailure as it is: it names the
    # client, the round and RECOVER already (wrapped again, its text said them twice).
    replies = exchange(fed, ledger, request, masked_arrays(dict(_shapes(totals))))
    missing = sorted(survivors - {name for name, _ in replies})
    if missing:
        raise ValueError(
            f"Client {missing[0]!r} failed while the masks of {dropped} were removed; the "
            "round's sums cannot be recovered."
        )
    return {
        name: correction(
            total,
            (_masked_array(m, name, total.shape, sender) for sender, m in replies),
        )
        for name, total in totals.items()
    }
