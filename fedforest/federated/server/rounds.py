"""One round of the protocol: requests out, replies back in canonical order, counted."""

from __future__ import annotations

from ..federation import Federation
from ..protocol import CommunicationLedger, Message

__all__ = ["broadcast", "exchange"]


def broadcast(fed: Federation, msg: Message) -> dict[str, Message]:
    """The same request to every client of the federation."""
    return {name: msg for name in fed.client_names}


def exchange(
    fed: Federation, ledger: CommunicationLedger, msg: Message | dict[str, Message]
) -> list[tuple[str, Message]]:
    """One round: the same request to every client, or one per client (by name).

    Replies come back in canonical (sorted) order.
    """
    requests = broadcast(fed, msg) if isinstance(msg, Message) else msg
    kind = next(iter(requests.values())).kind
    replies = fed.send_and_receive(requests, ledger.rounds)
    # Clients dropped in this round (on_client_failure="drop") are no longer expected.
    missing = sorted(set(fed.client_names) - set(replies))
    if missing:
        raise ValueError(f"Client {missing[0]!r} did not answer round {ledger.rounds} ({kind}).")
    ledger.record(kind, requests, replies)
    return [(name, replies[name]) for name in sorted(replies)]
