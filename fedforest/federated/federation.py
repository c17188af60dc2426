"""The transport interface the grower talks to (after Flower's ``Grid``)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping

from .protocol import Message

__all__ = [
    "ClientDataError",
    "ClientFailure",
    "Federation",
    "Fold",
    "drop_reason",
    "replies_or_failure",
    "without_client",
]

#: ``Federation.send_and_fold``'s ``fold``: (client name, its reply) -> what stands for it.
Fold = Callable[[str, Message], Message]


def drop_reason(cause: BaseException, kind: str) -> str:
    """Why a client failed, for the fitted model: its exception's type and the step.

    Never the exception's text (a library's text can quote a data value): the type name
    and the protocol message kind, e.g. ``"TimeoutError in round_a"``; for a stand-in
    (``client_errors.with_client_type``) the client's own exception's. A type whose name
    is not an ASCII identifier of at most 100 characters (model files refuse others) is
    ``"Exception"``.
    """
    name = getattr(cause, "client_type", None) or type(cause).__name__
    ok = isinstance(name, str) and name.isascii() and name.isidentifier() and len(name) <= 100
    return f"{name if ok else 'Exception'} in {kind}"


def without_client(text: str, client: str) -> str:
    """A client's refusal without its own leading naming of ``client`` (the caller names it).

    fedforest's refusals at a client start "Client 'b': y contains NaN ..." or "Client 'b'
    cannot order ..." (also behind a remote client's "KeyError at the client: "): they
    read "y contains NaN ..." and "it cannot order ...". Other texts are kept whole.
    """
    who = re.escape(f"Client {client!r}")
    found = re.match(rf"(\w+ at the client: )?{who}(: | )(.)", text, flags=re.DOTALL)
    if found is None:
        return text
    head, sep, first = found.group(1) or "", found.group(2), found.group(3)
    rest = text[found.end(3) :]
    return head + (first + rest if sep == ": " else "it " + first + rest)


class ClientFailure(RuntimeError):
    """A client did not answer a round; names the client and the round.

    Parameters
    ----------
    client : str
        The first failed client (in name order); named in the message.
    kind : str
        The protocol message kind of the round.
    round_index : int
        The round, counted from 0 as in the ledger.
    cause : BaseException
        Why ``client`` failed (its exception, a timeout, a transport error).
    replies : dict of str to Message, optional
        The replies of the clients that did answer this round, so that a caller that
        drops the failed clients (``on_client_failure="drop"``) can go on with them.
    failed : list of str, optional
        Every client that failed this round; defaults to ``[client]``.
    reasons : dict of str to str, optional
        Each failed client's :func:`drop_reason`; ``client``'s defaults to ``cause``'s.
    """

    def __init__(
        self,
        client: str,
        kind: str,
        round_index: int,
        cause: BaseException,
        *,
        replies: dict[str, Message] | None = None,
        failed: list[str] | None = None,
        reasons: dict[str, str] | None = None,
    ) -> None:
        self.failed = sorted(failed) if failed else [client]
        self.reasons = {client: drop_reason(cause, kind), **(reasons or {})}
        others = [name for name in self.failed if name != client]
        also = f" (also failed: {', '.join(map(repr, others))})" if others else ""
        # A cause that names this client and round itself (the server's InvalidReply) is
        # the text: "Client 'c' failed in round 1 (...): InvalidReply: Client 'c' sent an
        # invalid reply in round 1 (...)" said both twice. A client's own refusal names
        # it at its start ("Client 'c': y contains NaN"): said once, here.
        named = getattr(cause, "client", None) == client
        if named and getattr(cause, "round_index", None) == round_index:
            text = f"{cause}"
        else:
            text = f"Client {client!r} failed in round {round_index} ({kind}): "
            text += f"{type(cause).__name__}: {without_client(str(cause), client)}"
        super().__init__(f"{text}{also}")
        self.client = client
        self.kind = kind
        self.round_index = round_index
        self.replies: dict[str, Message] = dict(replies or {})


class ClientDataError(ClientFailure, ValueError):
    """A client reported that its data or a request is invalid (it raised ``ValueError``).

    A :class:`ClientFailure` (it names the client and the round; ``on_client_failure="drop"``
    drops the client) that is also a ``ValueError``, as invalid data is in scikit-learn.
    """


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
        """Deliver one request to each named client and return their replies by name.

        Raises
        ------
        ClientFailure
            When clients died, timed out, raised or answered something that is not a
            message; it names every failed client and carries the replies of the others
            (a :class:`ClientDataError` when the first failed client raised ``ValueError``).
        """

    def send_and_fold(
        self, requests: dict[str, Message], round_index: int, fold: Fold
    ) -> dict[str, Message]:
        """:meth:`send_and_receive`, each reply replaced by ``fold(name, reply)``.

        ``fold`` consumes a reply (the server adds a masked one into its sums) and returns
        what stands for it from then on. Here it runs once every reply is in; a transport
        that receives replies one at a time (Dask's) runs it as each arrives and lets the
        reply go, so that the server never holds a round's replies all at once. It runs in
        the caller's thread, one reply at a time, on the replies only (never on a failed
        client's exception); a :class:`ClientFailure` carries the folded replies.
        """
        try:
            replies = self.send_and_receive(requests, round_index)
        except ClientFailure as failure:
            failure.replies = {name: fold(name, r) for name, r in failure.replies.items()}
            raise
        return {name: fold(name, reply) for name, reply in replies.items()}


def replies_or_failure(
    answers: Mapping[str, object],
    requests: dict[str, Message],
    round_index: int,
) -> dict[str, Message]:
    """The replies, or a ClientFailure naming every client that raised.

    An answer that is neither a message nor an exception (a handler returning ``None``)
    is a failure too. The failure carries the replies of the others, for
    ``on_client_failure="drop"``.
    """
    replies = {name: a for name, a in answers.items() if isinstance(a, Message)}
    failed = sorted(name for name in answers if name not in replies)
    if not failed:
        return replies
    first = answers[failed[0]]
    if not isinstance(first, BaseException):
        first = TypeError(f"it answered a {type(first).__name__}, not a Message")
    cls = ClientDataError if isinstance(first, ValueError) else ClientFailure
    causes = {name: answers[name] for name in failed}  # not an exception: a TypeError
    reasons = {
        name: drop_reason(a if isinstance(a, BaseException) else TypeError(), requests[name].kind)
        for name, a in causes.items()
    }
    raise cls(
        failed[0], requests[failed[0]].kind, round_index, first, replies=replies, failed=failed,
        reasons=reasons,
    ) from first  # fmt: skip
