"""One round of the protocol: requests out, replies back checked, in canonical order, counted."""

from __future__ import annotations

import logging

from ..failure import DropFailedClients
from ..federation import ClientFailure, Federation, Fold, drop_reason
from ..protocol import CommunicationLedger, Message
from ..threads import thread_map
from .checks import Check, InvalidReply, as_invalid
from .envelope import check_envelope

__all__ = ["broadcast", "exchange"]

logger = logging.getLogger(__name__)


def broadcast(fed: Federation, msg: Message) -> dict[str, Message]:
    """The same request to every client of the federation."""
    return {name: msg for name in fed.client_names}


def exchange(
    fed: Federation,
    ledger: CommunicationLedger,
    msg: Message | dict[str, Message],
    check: Check | None = None,
    n_threads: int = 1,
    fold: Fold | None = None,
) -> list[tuple[str, Message]]:
    """One round: the same request to every client, or one per client (by name).

    Every reply is checked (:mod:`.checks`: its envelope, then ``check``) before anyone
    uses it. A client whose reply fails is an :class:`~.checks.InvalidReply` naming it, the
    round and the field; under ``on_client_failure="drop"`` (``fed`` is a
    :class:`~..failure.DropFailedClients`) it is dropped instead, as a client that died.
    Replies come back in canonical (sorted) order. ``n_threads`` > 1 checks the replies in
    that many threads (their kernels drop the GIL; each check touches its client's records
    only), with the same outcome.

    ``fold(name, reply)`` consumes each reply that passes its checks as it arrives
    (:meth:`~..federation.Federation.send_and_fold`; the masked sums add it up) and
    returns what stands for it in the list returned (and in the ledger: it must keep the
    reply's header, array names, dtypes and shapes); a reply that fails is not folded.
    """
    requests = broadcast(fed, msg) if isinstance(msg, Message) else msg
    kind = next(iter(requests.values())).kind
    round_index = ledger.rounds

    def problem_of(name: str, reply: Message) -> ValueError | None:
        try:
            check_envelope(name, requests[name], reply)
            if check is not None:
                check(name, requests[name], reply)
        except ValueError as exc:  # a check's own, or a decoding error of the payload
            return exc
        return None

    checked: dict[str, ValueError | None] = {}

    def checked_fold(name: str, reply: Message) -> Message:
        checked[name] = problem_of(name, reply)
        return reply if checked[name] is not None or fold is None else fold(name, reply)

    if fold is None:
        replies = fed.send_and_receive(requests, round_index)
    else:  # each reply checked, then folded, as it arrives
        replies = fed.send_and_fold(requests, round_index, checked_fold)
    # Clients dropped in this round (on_client_failure="drop") are no longer expected.
    missing = sorted(set(fed.client_names) - set(replies))
    if missing:
        raise ValueError(f"Client {missing[0]!r} did not answer round {round_index} ({kind}).")

    def problem(name: str) -> ValueError | None:
        return checked[name] if name in checked else problem_of(name, replies[name])

    names = sorted(replies)
    found = thread_map(problem, names, n_threads)
    bad = {
        name: as_invalid(name, kind, exc).in_round(round_index)
        for name, exc in zip(names, found, strict=True)
        if exc is not None
    }
    good = {name: reply for name, reply in replies.items() if name not in bad}
    ledger.record(kind, requests, good)
    if bad:
        _reject(fed, bad, good, kind, round_index)
    return [(name, good[name]) for name in sorted(good)]


def _reject(
    fed: Federation,
    bad: dict[str, InvalidReply],
    good: dict[str, Message],
    kind: str,
    round_index: int,
) -> None:
    """Raise for invalid replies, or drop their senders under ``on_client_failure="drop"``."""
    first = bad[min(bad)]
    if not isinstance(fed, DropFailedClients) or not good:
        raise first
    reasons = {name: drop_reason(exc, kind) for name, exc in bad.items()}
    failure = ClientFailure(
        first.client, kind, round_index, first, replies=good, failed=list(bad), reasons=reasons
    )
    fed.drop(failure)
