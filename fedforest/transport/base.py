"""The transport interface the grower talks to (after Flower's ``Grid``)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from ..protocol import Message

__all__ = ["Federation", "ClientFailure"]


class ClientFailure(RuntimeError):
    """A client did not answer a round; names the client and the round."""

    def __init__(self, client: str, kind: str, round_index: int, cause: BaseException) -> None:
        super().__init__(
            f"Client {client!r} failed in round {round_index} ({kind}): "
            f"{type(cause).__name__}: {cause}"
        )
        self.client = client
        self.kind = kind
        self.round_index = round_index


class Federation(ABC):
    """A set of named clients the server can message, one request per client per round."""

    @property
    @abstractmethod
    def client_names(self) -> list[str]:
        """Names of the clients, in a canonical (sorted) order."""

    @abstractmethod
    def send_and_receive(
        self, requests: dict[str, Message], round_index: int
    ) -> dict[str, Message]:
        """Deliver one request to each named client and return their replies by name."""
