"""What every reply check raises, and what a check is.

:class:`InvalidReply` names the client, the round and the field; a round's check takes
(client name, its request, its reply). Moved out of ``checks.py``, which re-exports the
names.
"""

from __future__ import annotations

from collections.abc import Callable

from ..protocol import Message

#: A round's check: (client name, its request, its reply) -> None or InvalidReply.
Check = Callable[[str, Message, Message], None]


class InvalidReply(ValueError):
    """A client's reply failed a check; names the client, the round and the field.

    Parameters
    ----------
    client : str
        The client that sent it.
    kind : str
        The message kind of the round.
    field : str
        The header field or array at fault.
    problem : str
        What is wrong with it.
    round_index : int or None
        The round, counted from 0 as in the ledger (filled in by the exchange).
    """

    def __init__(
        self, client: str, kind: str, field: str, problem: str, round_index: int | None = None
    ) -> None:
        self.client, self.kind, self.field, self.problem = client, kind, field, problem
        self.round_index = round_index
        where = f"round {round_index} ({kind})" if round_index is not None else f"a {kind} round"
        super().__init__(f"Client {client!r} sent an invalid reply in {where}: {field} {problem}.")

    def in_round(self, round_index: int) -> InvalidReply:
        """The same failure, with the round named."""
        return InvalidReply(self.client, self.kind, self.field, self.problem, round_index)


def as_invalid(name: str, kind: str, exc: ValueError) -> InvalidReply:
    """A check's error as an InvalidReply (a decoding error of ``expect_array`` & co.)."""
    if isinstance(exc, InvalidReply):
        return exc
    return InvalidReply(name, kind, "a payload", f"is malformed ({exc})")
