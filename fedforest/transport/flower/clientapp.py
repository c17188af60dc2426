"""The Flower ClientApp: a SuperNode answers the protocol from its own data file.

Each SuperNode is started with ``--node-config 'data-path="..." target="..." name="..."'``.
On every message the ClientApp builds (or reuses) the :class:`~fedforest.Client` of that
file and lets it answer. Flower runs the ClientApp in a new process per message, so the
client's per-fit state is checkpointed in ``Context.state`` after every message and
restored before the next (:mod:`._state`); a process that stays alive between messages
(Flower's simulation runtime, tests) reuses the live client instead.

A handler never raises: any exception becomes an ``ERROR`` reply whose text
:mod:`fedforest.federated.client_errors` decides (a refusal of fedforest's own keeps its
text; anything else sends its type name and step, its traceback logged here), not
Flower's error reply, which would carry the exception's text to the server.

The client side of fedforest (numba, pandas, the kernels) is imported when a message
needs it, not with this module: the message that ends a fit answers without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flwr.app import Context
from flwr.app import Message as FlowerMessage
from flwr.clientapp import ClientApp

from ._codec import ERROR, FINISH, HELLO, WAIT, control_records, message_kind
from ._state import clear_state, state_seq

if TYPE_CHECKING:
    from ...federated.client import Client

__all__ = ["app"]

app = ClientApp()

#: Live clients of this process: (run id, node id) -> (message counter, client).
_LIVE: dict[tuple[int, int], tuple[int, Client]] = {}

#: Whether this process answers many messages (``fedforest flower-worker`` sets it): the
#: discovery reply says so, and the server then keeps the SuperNode awake between rounds
#: with ``WAIT`` messages, which cost a long-lived process a few milliseconds each (and a
#: process per message its start-up: it is never sent them unless the server is told to).
LONG_LIVED = False


@app.query("fedforest")
def hello(msg: FlowerMessage, context: Context) -> FlowerMessage:
    """Discovery: report the client's name (and check its data file early).

    A keep-awake message (``WAIT``) is answered at once with its kind, reading nothing.
    """
    if message_kind(msg.content) == WAIT:
        return FlowerMessage(control_records(WAIT), reply_to=msg)
    from ...federated.client_errors import error_header
    from ...federated.protocol import Message
    from ._codec import to_records
    from ._data import client_from_node_config

    try:
        client = client_from_node_config(context.node_config)
        header = {"name": client.name, "n_samples": client.n_samples, "long_lived": LONG_LIVED}
        answer = Message(HELLO, header)
    except Exception as exc:  # noqa: BLE001 - its text decided by client_errors
        name = str(context.node_config.get("name", "")) or None  # the server names the node
        answer = Message(ERROR, error_header(exc, "loading its data", name))
    return FlowerMessage(to_records(answer), reply_to=msg)


@app.train("fedforest")
def train(msg: FlowerMessage, context: Context) -> FlowerMessage:
    """Answer one protocol round (or drop the state when the server says the fit is over)."""
    key = (context.run_id, context.node_id)
    if message_kind(msg.content) == FINISH:
        clear_state(context.state)
        _LIVE.pop(key, None)
        return FlowerMessage(control_records(FINISH), reply_to=msg)
    from ...federated.client_errors import error_header
    from ...federated.protocol import Message
    from ._codec import from_records, to_records
    from ._state import save_state

    step = "reading the request"
    try:
        request = from_records(msg.content, "server")
        step = request.kind
        seq, client = _client(context, key)
        answer = client.handle(request)
        step = "saving its state"
        save_state(client, context.state, seq + 1)
    except Exception as exc:  # noqa: BLE001 - its text decided by client_errors
        # Not Flower's error reply, which quotes the exception's text: fedforest's own
        # refusals keep theirs, anything else sends its type and step (and is logged here).
        name = str(context.node_config.get("name", context.node_id))
        header = error_header(exc, step, name)
        return FlowerMessage(to_records(Message(ERROR, header)), reply_to=msg)
    _remember(key, seq + 1, client)
    return FlowerMessage(to_records(answer), reply_to=msg)


def _client(context: Context, key: tuple[int, int]) -> tuple[int, Client]:
    """The node's client with its state after the last message, and the message count."""
    from ._data import client_from_node_config
    from ._state import load_state

    live = _LIVE.get(key)
    if live is not None and live[0] == state_seq(context.state):
        return live
    client = client_from_node_config(context.node_config)
    return load_state(client, context.state), client


def _remember(key: tuple[int, int], seq: int, client: Client) -> None:
    """Keep the live client of the current run only."""
    for other in [k for k in _LIVE if k[0] != key[0]]:
        del _LIVE[other]
    _LIVE[key] = (seq, client)
