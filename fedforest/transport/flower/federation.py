"""The Flower transport: the grower's rounds as Flower messages through a ServerApp's Grid."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from logging import INFO, WARNING

from flwr.app import Message as FlowerMessage
from flwr.app import RecordDict
from flwr.common import log
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid

from ...federated.codec import error_from_header
from ...federated.federation import Federation, replies_or_failure
from ...federated.protocol import Message
from ._codec import (
    ERROR,
    FINISH,
    HELLO,
    QUERY_TYPE,
    TRAIN_TYPE,
    WAIT,
    control_records,
    from_records,
    to_records,
)

__all__ = ["FlowerFederation"]

_Answers = dict[str, Message | Exception]

#: Seconds into a round after which a node that has answered gets no more keep-awake
#: messages: each costs about 0.5 s of the node's and one message through the SuperLink,
#: while the 3 s sleep they spare weighs little in a long round (a node then sleeps as
#: Flower has it, and still finds the one queued behind the round's message).
KEEP_AWAKE_SECONDS = 10.0


class FlowerFederation(Federation):
    """The SuperNodes connected to a Flower SuperLink, as a fedforest federation.

    On construction it waits until ``min_nodes`` SuperNodes are connected and asks each
    for its client name (a discovery query, outside the protocol and the ledger); nodes
    that do not answer within ``discovery_timeout`` are left out with a warning. Each
    round then sends exactly one Flower message per node: the protocol message's header
    as JSON in a config record and all its arrays packed into one array.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The Grid a ServerApp's main function receives.
    min_nodes : int, default=1
        SuperNodes that must be connected (and answer the discovery) before training.
    round_timeout : float or None, default=600.0
        Seconds to wait for a round's replies; a node that has not answered by then has
        failed the round (``ClientFailure``). None waits until Flower reports the node
        unavailable (after two missed heartbeats, about a minute).
    discovery_timeout : float, default=60.0
        Seconds to wait for ``min_nodes`` nodes to connect, and then for their names.
    poll_interval : float, default=0.1
        Seconds between two pulls of the replies.
    keep_awake : bool or None, default=None
        Whether to keep the nodes pulling between rounds with keep-awake messages
        (``WAIT`` queries outside the protocol and the ledger, answered at once with
        nothing). A Flower 1.42 SuperNode that finds no message sleeps 3 s, and the node
        that answers a round last always finds none (the next round cannot exist before
        its reply): every round waited those 3 s. One keep-awake message follows each
        round's message to a node, and a node that has answered while others still work
        gets one more at its answer and one per keep-awake answer, so that it always
        finds one queued (about 0.5 s each, the SuperNode's reply poll) until the next
        round's message is there. None (the default) sends them to the nodes whose
        ClientApp said at discovery that it serves many messages in one process
        (``fedforest flower-worker``), where one costs milliseconds; True to every node
        (a node that starts a process per message pays its start-up for each); False to
        none (docs/flower.md, "Keeping the SuperNodes awake").

    Attributes
    ----------
    round_seconds : list of float
        Wall-clock duration of each protocol round, from sending to the last reply.
    discovery_seconds : float
        Wall-clock duration of the discovery (waiting for the nodes, then their names).
    finish_seconds : float or None
        Wall-clock duration of the end-of-fit notice (:meth:`close`); None before it.
    awake_nodes : list of str
        The clients whose nodes get keep-awake messages (see ``keep_awake``), sorted.
    wait_messages : int
        Keep-awake messages sent so far.
    """

    def __init__(
        self,
        grid: Grid,
        *,
        min_nodes: int = 1,
        round_timeout: float | None = 600.0,
        discovery_timeout: float = 60.0,
        poll_interval: float = 0.1,
        keep_awake: bool | None = None,
    ) -> None:
        if min_nodes < 1:
            raise ValueError(f"min_nodes must be at least 1, got {min_nodes}.")
        if round_timeout is not None and round_timeout <= 0:
            raise ValueError(f"round_timeout must be positive or None, got {round_timeout}.")
        self.grid = grid
        self.min_nodes = min_nodes
        self.round_timeout = round_timeout
        self.discovery_timeout = discovery_timeout
        self.poll_interval = poll_interval
        self.round_seconds: list[float] = []
        self.finish_seconds: float | None = None
        self._failed: set[str] = set()
        self._long_lived: set[str] = set()
        self._waits: dict[str, str] = {}  # keep-awake messages not yet answered: id -> name
        self.wait_messages = 0
        start = time.perf_counter()
        self._nodes = self._discover()
        self.discovery_seconds = time.perf_counter() - start
        self.awake_nodes = sorted(
            name
            for name in self._nodes
            if keep_awake or (keep_awake is None and name in self._long_lived)
        )

    @property
    def client_names(self) -> list[str]:
        """Client names reported by the SuperNodes, sorted."""
        return sorted(self._nodes)

    def node_id(self, name: str) -> int:
        """The Flower node id of the SuperNode holding client ``name``."""
        return self._nodes[name]

    def send_and_receive(
        self, requests: dict[str, Message], round_index: int
    ) -> dict[str, Message]:
        """One Flower message to each named client's node; their replies by name."""
        start = time.perf_counter()
        nodes = {name: self._nodes[name] for name in requests}
        answers = self._exchange(
            requests, nodes, TRAIN_TYPE, str(round_index), self.round_timeout, awake=True
        )
        self.round_seconds.append(time.perf_counter() - start)
        self._failed.update(name for name, a in answers.items() if isinstance(a, Exception))
        return replies_or_failure(answers, requests, round_index)

    def close(self, timeout: float = 30.0) -> None:
        """Tell the nodes that the fit is over, so they drop its state (best effort)."""
        start = time.perf_counter()
        names = [name for name in self._nodes if name not in self._failed]
        requests = {name: Message(FINISH) for name in names}
        nodes = {name: self._nodes[name] for name in names}
        answers = self._exchange(requests, nodes, TRAIN_TYPE, "finish", timeout)
        self.finish_seconds = time.perf_counter() - start
        for name, answer in answers.items():
            if isinstance(answer, Exception):
                log(WARNING, "fedforest: client %r did not confirm the end: %s", name, answer)

    # ------------------------------------------------------------------ discovery
    def _discover(self) -> dict[str, int]:
        """Client name -> node id of every connected SuperNode that answers."""
        node_ids = self._wait_for_nodes()
        labels = {f"SuperNode {node_id}": node_id for node_id in node_ids}
        requests = {label: Message(HELLO) for label in labels}
        answers = self._exchange(requests, labels, QUERY_TYPE, "discovery", self.discovery_timeout)
        nodes: dict[str, int] = {}
        for label, answer in sorted(answers.items()):
            if isinstance(answer, Exception):
                log(WARNING, "fedforest: %s left out: %s", label, _left_out(answer, label))
                continue
            name = str(answer.header["name"])
            if name in nodes:
                raise ValueError(
                    f"SuperNodes {nodes[name]} and {labels[label]} both hold client {name!r}; "
                    "give each SuperNode its own name=... in --node-config."
                )
            nodes[name] = labels[label]
            if answer.header.get("long_lived") is True:
                self._long_lived.add(name)
        if len(nodes) < self.min_nodes:
            raise RuntimeError(
                f"Only {len(nodes)} SuperNode(s) answered the discovery within "
                f"{self.discovery_timeout:g} s; min-nodes is {self.min_nodes}."
            )
        log(INFO, "fedforest: clients %s", ", ".join(f"{n!r}" for n in sorted(nodes)))
        return nodes

    def _wait_for_nodes(self) -> list[int]:
        """Node ids once at least ``min_nodes`` are connected."""
        deadline = time.monotonic() + self.discovery_timeout
        while True:
            node_ids = sorted(self.grid.get_node_ids())
            if len(node_ids) >= self.min_nodes:
                return node_ids
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"Only {len(node_ids)} SuperNode(s) connected within "
                    f"{self.discovery_timeout:g} s; min-nodes is {self.min_nodes}."
                )
            time.sleep(min(1.0, self.poll_interval * 10))

    # ------------------------------------------------------------------ messaging
    def _exchange(
        self,
        requests: dict[str, Message],
        nodes: dict[str, int],
        message_type: str,
        group: str,
        timeout: float | None,
        awake: bool = False,
    ) -> _Answers:
        """Push one message per name and pull the replies until all came or ``timeout``.

        With ``awake``, each node of :attr:`awake_nodes` gets a keep-awake message behind
        its request, and while the round waits for others (for at most
        :data:`KEEP_AWAKE_SECONDS`), one more when it answers and one for each keep-awake
        message it answers (it pulls the next one the moment it sends an answer, before
        the server can push one: one must already be queued).
        Their answers, and those of earlier rounds' still queued, are pulled and dropped.
        Never raises for a node: a failed node's answer is the exception that says why.
        """
        started = time.monotonic()
        ids = self._push(requests, nodes, message_type, group, timeout)
        awake_names = set(self.awake_nodes) if awake else set()
        self._push_waits([n for n, mid in ids.items() if mid and n in awake_names])
        answers: _Answers = {
            name: ConnectionError("the SuperLink did not accept the message")
            for name, mid in ids.items()
            if not mid
        }
        pending = {mid: name for name, mid in ids.items() if mid}
        deadline = None if timeout is None else time.monotonic() + timeout
        while pending:
            for reply in pull_replies(self.grid, [*pending, *self._waits]):
                mid = reply.metadata.reply_to_message_id
                name = self._waits.pop(mid, None)  # a keep-awake message's answer: unread
                if name is None:
                    name = pending.pop(mid, None)
                    if name is None:
                        continue
                    answers[name] = _decode(reply, name)
                if (
                    pending
                    and name in awake_names
                    and isinstance(answers.get(name), Message)
                    and time.monotonic() - started < KEEP_AWAKE_SECONDS
                ):
                    self._push_waits([name])  # it waits for the others: keep it pulling
            if not pending or (deadline is not None and time.monotonic() >= deadline):
                break
            time.sleep(self.poll_interval)
        for name in pending.values():
            answers[name] = TimeoutError(f"no reply within {timeout:g} s")
        return answers

    def _push_waits(self, names: list[str]) -> None:
        """A keep-awake message to each named node (none to a node that failed)."""
        names = [name for name in names if name not in self._failed]
        if not names:
            return
        # Its time-to-live bounds how long one left unanswered (a node gone) stays queued.
        ttl = self.round_timeout if self.round_timeout is not None else 600.0
        content = control_records(WAIT)
        outgoing = [
            FlowerMessage(
                content,
                dst_node_id=self._nodes[name],
                message_type=QUERY_TYPE,
                group_id=WAIT,
                ttl=ttl,
            )
            for name in names
        ]
        for name, mid in zip(names, self.grid.push_messages(outgoing), strict=True):
            if mid:
                self._waits[mid] = name
                self.wait_messages += 1

    def _push(
        self,
        requests: dict[str, Message],
        nodes: dict[str, int],
        message_type: str,
        group: str,
        timeout: float | None,
    ) -> dict[str, str | None]:
        """Push the requests; the Flower message id of each (None if not accepted)."""
        contents: dict[int, RecordDict] = {}
        for msg in requests.values():
            if id(msg) not in contents:  # a broadcast is encoded once
                contents[id(msg)] = to_records(msg)
        outgoing = [
            FlowerMessage(
                contents[id(msg)],
                dst_node_id=nodes[name],
                message_type=message_type,
                group_id=group,
                ttl=timeout,
            )
            for name, msg in requests.items()
        ]
        ids: Iterable[str | None] = self.grid.push_messages(outgoing)
        return dict(zip(requests, ids, strict=True))


#: How a reply's objects still being uploaded are pulled again: after 0.02 s, doubling to
#: 0.5 s, until Flower's own deadline (``PULL_MAX_TIME``). Flower 1.42's ``HttpGrid``
#: waits 1 s first, doubling to 10 s, and its poll often finds a reply whose objects the
#: SuperNode is still pushing: measured 2026-12-06, a round's replies reached the server
#: up to 1.7 s after the ClientApp made them, against 0.5 to 0.8 s this way
#: (``examples/flower/measure.py --rows 1000 --isolation worker``, docs/flower.md).
OBJECT_PULL_BACKOFF = {"initial_backoff": 0.02, "backoff_cap": 0.5, "max_tries_per_object": None}


def pull_replies(grid: Grid, message_ids: list[str]) -> list[FlowerMessage]:
    """``grid.pull_messages(message_ids)``, objects pulled again sooner (``OBJECT_PULL_BACKOFF``).

    On Flower's ``HttpGrid`` (the Grid of a deployed ServerApp) its module's
    ``pull_objects`` is given those retry times for the duration of the call (the
    ServerApp pulls from one thread); any other Grid is called as it is.
    """
    try:
        from flwr.superlink.grid import http_grid
    except ImportError:  # pragma: no cover - another Flower layout
        return list(grid.pull_messages(message_ids))
    original = getattr(http_grid, "pull_objects", None)
    if original is None or not isinstance(grid, http_grid.HttpGrid):
        return list(grid.pull_messages(message_ids))
    http_grid.pull_objects = functools.partial(original, **OBJECT_PULL_BACKOFF)
    try:
        return list(grid.pull_messages(message_ids))
    finally:
        http_grid.pull_objects = original


def _left_out(answer: Exception, label: str) -> str:
    """Why a node is left out of the discovery, naming it no more (the caller names it)."""
    if isinstance(answer, TimeoutError | ConnectionError):
        return f"it did not answer ({answer})"
    text = str(answer)  # its refusal (the ClientApp names no node), or a malformed reply's
    mine = f"Message from {label!r} "
    return "its message " + text[len(mine) :] if text.startswith(mine) else text


def _decode(reply: FlowerMessage, name: str) -> Message | Exception:
    """A reply as a protocol message, or the exception that says why there is none.

    A client that reported invalid data (its handler raised ``ValueError``) answers that
    ``ValueError``, as on the local transport (a :class:`ClientDataError` for the server);
    any other exception of its handler a ``RuntimeError`` naming its type
    (``codec.error_from_header``; the text is the one ``federated/client_errors.py`` chose).
    """
    if reply.has_error():
        return _flower_error(reply.error.code, reply.error.reason)
    try:
        msg = from_records(reply.content, name)
    except ValueError as exc:  # a malformed reply: this client's failure, not the server's
        return exc
    if msg.kind == ERROR:
        return error_from_header(msg.header, name)
    return msg


def _flower_error(code: int, reason: str | None) -> Exception:
    """Flower's error reply as the exception a ClientFailure reports."""
    if code in (ErrorCode.MESSAGE_UNAVAILABLE, ErrorCode.REPLY_MESSAGE_UNAVAILABLE):
        return TimeoutError(
            "no reply before the message's time-to-live (the round timeout) ran out"
        )
    if code == ErrorCode.NODE_UNAVAILABLE:
        return ConnectionError(f"the SuperNode stopped sending heartbeats ({reason})")
    return RuntimeError(f"the ClientApp failed (Flower error {code}): {reason}")
