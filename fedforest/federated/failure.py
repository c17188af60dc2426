"""The ``on_client_failure="drop"`` policy: a federation that goes on without failed clients."""

from __future__ import annotations

import logging
from typing import Any

from .federation import ClientFailure, Federation, Fold
from .protocol import Message

__all__ = ["DropFailedClients"]

logger = logging.getLogger(__name__)


class DropFailedClients(Federation):
    """Wraps a federation; a client that fails a round is dropped from that round on.

    The round's replies of the other clients are returned as if the failed client had
    never been addressed; later rounds address only the survivors. A client whose reply
    fails the server's checks is dropped the same way (see :mod:`.server.checks`).

    Parameters
    ----------
    inner : Federation
        The transport that does the work.

    Attributes
    ----------
    dropped : list of (str, int)
        Each dropped client's name and the round in which it failed, in order.
    reasons : dict of str to str
        Each dropped client's reason: its exception's type and the step, never the
        exception's text (:func:`~.federation.drop_reason`).
    """

    def __init__(self, inner: Federation) -> None:
        self.inner = inner
        self.dropped: list[tuple[str, int]] = []
        self.reasons: dict[str, str] = {}

    @property
    def client_names(self) -> list[str]:
        """The inner federation's clients that have not been dropped, sorted."""
        gone = {name for name, _ in self.dropped}
        return [name for name in self.inner.client_names if name not in gone]

    @property
    def clients(self) -> dict[str, Any]:
        """In-process client objects of the survivors (empty for remote transports)."""
        alive = set(self.client_names)
        inner: dict[str, Any] = getattr(self.inner, "clients", {})
        return {name: client for name, client in inner.items() if name in alive}

    def send_and_receive(
        self, requests: dict[str, Message], round_index: int
    ) -> dict[str, Message]:
        """The inner federation's replies; failed clients are dropped, not raised.

        Raises
        ------
        ClientFailure
            When every addressed client failed: there is nobody left to train with.
        """
        try:
            return self.inner.send_and_receive(requests, round_index)
        except ClientFailure as failure:
            if not failure.replies:
                raise
            self.drop(failure)
            return failure.replies

    def send_and_fold(
        self, requests: dict[str, Message], round_index: int, fold: Fold
    ) -> dict[str, Message]:
        """As :meth:`send_and_receive`, through the inner federation's ``send_and_fold``."""
        try:
            return self.inner.send_and_fold(requests, round_index, fold)
        except ClientFailure as failure:
            if not failure.replies:
                raise
            self.drop(failure)
            return failure.replies

    def drop(self, failure: ClientFailure) -> None:
        """Drop the clients ``failure`` names (they died, timed out or sent invalid replies)."""
        self.dropped.extend((name, failure.round_index) for name in failure.failed)
        fallback = f"ClientFailure in {failure.kind}"  # a cause this failure does not carry
        self.reasons.update({name: failure.reasons.get(name, fallback) for name in failure.failed})
        said = str(failure)
        logger.warning(
            "%s%s on_client_failure='drop': training goes on without %s, with %d client(s).",
            said,
            "" if said.endswith(".") else ".",  # a cause's message ends with one already
            ", ".join(map(repr, failure.failed)),
            len(failure.replies),
        )
