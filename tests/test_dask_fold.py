"""The secure sums fold each Dask reply as it arrives: the server never holds a round's replies.

On a real LocalCluster (two worker processes, no mock): every masked reply is added into
the sums and let go before the next is folded, and the forest is the in-process one, bit
for bit. Without Dask: ``Federation.send_and_fold``'s default folds once every reply is in,
and a failure carries the folded replies (``on_client_failure="drop"`` goes on with them).
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from distributed import Client

import fedforest as ff
from fedforest.federated.failure import DropFailedClients
from fedforest.federated.federation import ClientFailure
from fedforest.federated.protocol import HANDSHAKE, PROTOCOL_VERSION, Message
from fedforest.transport.dask import DaskFederation
from tests._forests import assert_same_forest
from tests._loopback import dask_module_client, scaled

PARAMS: dict[str, Any] = {"n_estimators": 4, "max_depth": 4, "min_samples_leaf": 3}


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Client]:
    """Two single-threaded worker processes on 127.0.0.1, closed (and checked gone) after."""
    yield from dask_module_client(sys.modules[__name__])


def make_client(X: np.ndarray, y: np.ndarray, name: str) -> ff.Client:
    """A factory's body: what a worker would read from its own file."""
    return ff.Client(X, y, name=name)


def shards(n: int = 600, k: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 5))
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + rng.normal(0, 0.2, n)
    return X, y, np.arange(n) % k


def test_secure_sums_let_each_dask_reply_go_before_the_next(dask_client: Client) -> None:
    X, y, h = shards()
    factories = {
        str(c): functools.partial(make_client, X[h == c], y[h == c], str(c)) for c in range(4)
    }
    alive: list[int] = []  # at each fold: how many earlier replies of its round are alive
    with DaskFederation(factories, timeout=scaled(120)) as fed:
        fold_replies = fed.send_and_fold

        def watched(requests: dict[str, Message], round_index: int, fold: Any) -> Any:
            seen: list[weakref.ref[Any]] = []

            def watch(name: str, reply: Message) -> Message:
                alive.append(sum(ref() is not None for ref in seen))
                seen.extend(weakref.ref(a) for a in reply.arrays.values())
                return fold(name, reply)

            return fold_replies(requests, round_index, watch)

        fed.send_and_fold = watched  # type: ignore[method-assign]
        remote = ff.FedForestRegressor(**PARAMS, random_state=4).fit_federated(fed)
    local = ff.FedForestRegressor(**PARAMS, random_state=4).fit(X, y, client_ids=h)
    assert_same_forest(remote, local)
    # Every masked round of the fit (grids, Rounds A and B of 4 levels) folded 4 replies.
    assert len(alive) >= 4 * (2 + 2 * PARAMS["max_depth"])
    assert max(alive) == 0


class _Counting(DaskFederation):
    """A subclass that watches every round through its own ``send_and_receive``."""

    calls = 0

    def send_and_receive(self, requests: dict[str, Message], round_index: int) -> Any:
        self.calls += 1
        return super().send_and_receive(requests, round_index)


def test_a_subclass_s_send_and_receive_sees_every_round(dask_client: Client) -> None:
    X, y, h = shards()
    factories = {
        str(c): functools.partial(make_client, X[h == c], y[h == c], str(c)) for c in range(4)
    }
    with _Counting(factories, timeout=scaled(120)) as fed:
        model = ff.FedForestRegressor(**PARAMS, random_state=4).fit_federated(fed)
        assert fed.calls == model.communication_.rounds > 2 * PARAMS["max_depth"]


class _Refuses(ff.Client):
    """Fails the handshake (its rows stay fine): a client that is down."""

    def handle(self, msg: Message) -> Message:
        if msg.kind == HANDSHAKE:
            raise RuntimeError("down")
        return super().handle(msg)


def test_default_fold_runs_once_every_reply_is_in_and_failures_carry_folded_replies() -> None:
    X, y, h = shards(k=3)
    clients = [ff.Client(X[h == c], y[h == c], name=str(c)) for c in range(2)]
    hello = Message(HANDSHAKE, {"protocol": PROTOCOL_VERSION})
    folded: list[str] = []

    def fold(name: str, reply: Message) -> Message:
        assert reply.kind == HANDSHAKE and reply.header["name"] == name  # the reply itself
        folded.append(name)
        return Message(reply.kind, {"folded": name})

    fed = ff.LocalFederation(clients)
    replies = fed.send_and_fold({n: hello for n in fed.client_names}, 0, fold)
    assert folded == ["0", "1"] and {n: r.header for n, r in replies.items()} == {
        "0": {"folded": "0"},
        "1": {"folded": "1"},
    }
    # A failure carries the others' folded replies (folded once), never the failed one's.
    folded.clear()
    fed = ff.LocalFederation([*clients, _Refuses(X[h == 2], y[h == 2], name="2")])
    with pytest.raises(ClientFailure) as failed:
        fed.send_and_fold({n: hello for n in fed.client_names}, 0, fold)
    assert failed.value.failed == ["2"] and folded == ["0", "1"]
    assert {n: r.header for n, r in failed.value.replies.items()} == {
        "0": {"folded": "0"},
        "1": {"folded": "1"},
    }
    # on_client_failure="drop" goes on with exactly those.
    folded.clear()
    dropping = DropFailedClients(fed)
    survivors = dropping.send_and_fold({n: hello for n in fed.client_names}, 0, fold)
    assert folded == ["0", "1"] and sorted(survivors) == ["0", "1"]
    assert dropping.client_names == ["0", "1"]
