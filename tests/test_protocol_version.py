"""The server and every client state the messages' version at the handshake.

A client of another fedforest release (another cipher for the masks, counts packed
otherwise) would not fail: its masked answers would decode to garbage sums. Both sides
now refuse a peer whose version differs, naming it, before anything is sent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fedforest import FedForestRegressor
from fedforest.federated.client import Client
from fedforest.federated.protocol import HANDSHAKE, PROTOCOL_VERSION, Message, protocol_mismatch
from fedforest.federated.server.checks import InvalidReply
from fedforest.transport.local import LocalFederation


class OtherRelease(Client):
    """A real client whose handshake reply states ``version`` (None: states none)."""

    def __init__(self, X: Any, y: Any, name: str, version: object) -> None:
        super().__init__(X, y, name)
        self.version = version

    def handle(self, msg: Message) -> Any:
        reply = super().handle(msg)
        if msg.kind == HANDSHAKE and isinstance(reply, Message):
            header = dict(reply.header)
            header.pop("protocol")
            if self.version is not None:
                header["protocol"] = self.version
            return Message(reply.kind, header, reply.arrays)
        return reply


def _clients(version: object) -> list[Client]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=300)
    clients: list[Client] = [Client(X[:100], y[:100], "a"), Client(X[100:200], y[100:200], "b")]
    return [*clients, OtherRelease(X[200:], y[200:], "c", version)]


def test_both_sides_state_the_version_and_a_fit_works() -> None:
    client = _clients(PROTOCOL_VERSION)[0]
    reply = client.handle(Message(HANDSHAKE, {"protocol": PROTOCOL_VERSION, "task": "regression"}))
    assert reply.header["protocol"] == PROTOCOL_VERSION
    model = FedForestRegressor(n_estimators=2, max_depth=2, random_state=0)
    model.fit_federated(LocalFederation(_clients(PROTOCOL_VERSION)))
    assert model.trees_[0].node_count >= 3


@pytest.mark.parametrize("privacy", ["secure", "none"])
@pytest.mark.parametrize("version", [None, PROTOCOL_VERSION - 1, PROTOCOL_VERSION + 1, "2", True])
def test_the_server_refuses_a_client_of_another_version(privacy: str, version: object) -> None:
    model = FedForestRegressor(n_estimators=2, max_depth=2, random_state=0, privacy=privacy)
    with pytest.raises(InvalidReply, match=r"'c'.*'protocol'.*same fedforest release"):
        model.fit_federated(LocalFederation(_clients(version)))


@pytest.mark.parametrize("version", [None, PROTOCOL_VERSION - 1, PROTOCOL_VERSION + 1])
def test_a_client_refuses_a_server_of_another_version(version: object) -> None:
    client = _clients(PROTOCOL_VERSION)[0]
    header: dict[str, Any] = {"task": "regression", "privacy": "secure"}
    if version is not None:
        header["protocol"] = version
    with pytest.raises(ValueError, match=r"Client 'a': the server .*same fedforest release"):
        client.handle(Message(HANDSHAKE, header))


def test_the_mismatch_says_what_to_do() -> None:
    assert protocol_mismatch(PROTOCOL_VERSION) is None
    assert "states no protocol version" in str(protocol_mismatch(None))
    assert f"version {PROTOCOL_VERSION - 1!r}" in str(protocol_mismatch(PROTOCOL_VERSION - 1))
    assert protocol_mismatch(True) is not None  # a bool is not a version, even if == 1
