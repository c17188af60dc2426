"""Why a client was dropped: ``dropped_reasons_`` (its failure's type and step, no text).

Before, the fitted model (and its file) kept who was dropped and in which round, and the
reason lived only in a log line. The reason is the exception's type name and the protocol
step, never its text: a library's text can quote a data value (``"patient 17 ..."``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_file_hardening import edit_header, refused
from test_flower import (
    PARAMS,
    SEED,
    FlowerFederation,
    MemoryGrid,
    assert_same_forest,
    local_clients,
    task_identity,  # noqa: F401 - autouse: what a ServerApp process knows about itself
    write_site_files,
)
from test_hostile_clients import Hostile, _header

import fedforest as ff
from fedforest.federated.protocol import HANDSHAKE, ROUND_A, ROUND_B, Message

SECRET = "patient 17 HIV+ 7.31"  # a data value an exception's text may quote


class Raising(ff.Client):
    """A real client that raises ``error`` (its text quoting a value) at message ``at``."""

    def __init__(self, X: Any, y: Any, name: str, at: int, error: type[Exception]) -> None:
        super().__init__(X, y, name)
        self.at, self.error, self.seen = at, error, 0

    def handle(self, msg: Message) -> Message:
        self.seen += 1
        if self.seen - 1 == self.at:
            raise self.error(f"could not read {SECRET!r}")
        return super().handle(msg)


def _data(n: int = 3, rows: int = 120) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(3)
    out = []
    for _ in range(n):
        X = rng.normal(size=(rows, 4))
        out.append((X, X[:, 0] + np.sin(X[:, 1]) + rng.normal(0, 0.1, rows)))
    return out


def _fit(clients: list[ff.Client], **kw: Any) -> ff.FedForestRegressor:
    model = ff.FedForestRegressor(
        n_estimators=3, max_depth=3, random_state=0, on_client_failure="drop", **kw
    )
    return model.fit_federated(ff.LocalFederation(clients))


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_the_model_and_its_file_keep_each_drops_type_and_step_never_its_text(
    privacy: str, tmp_path: Path
) -> None:
    (X0, y0), (X1, y1), (X2, y2) = _data()
    clients = [
        ff.Client(X0, y0, "c0"),
        Raising(X1, y1, "c1", 1, RuntimeError),  # its second message
        Raising(X2, y2, "c2", 1, KeyError),  # the same round: both dropped together
    ]
    model = _fit(clients, privacy=privacy)
    ((_, at), (_, at2)) = model.dropped_clients_
    assert at == at2 and [name for name, _ in model.dropped_clients_] == ["c1", "c2"]
    kind = model.communication_.per_round["kind"].iloc[at]
    assert kind in (ROUND_A, "grid")
    assert model.dropped_reasons_ == {"c1": f"RuntimeError in {kind}", "c2": f"KeyError in {kind}"}
    model.save(tmp_path / "m.ffm")
    assert SECRET not in (tmp_path / "m.ffm").read_bytes().decode("latin-1")
    loaded = ff.load(tmp_path / "m.ffm")
    assert loaded.dropped_reasons_ == model.dropped_reasons_
    assert loaded.dropped_clients_ == model.dropped_clients_


def test_a_reply_the_server_refuses_is_an_invalid_reply_in_its_step() -> None:
    (X0, y0), (X1, y1), (X2, y2) = _data()

    def corrupt(header: dict[str, Any]) -> None:
        header["n_samples"] = -1

    clients = [
        ff.Client(X0, y0, "c0"),
        ff.Client(X1, y1, "c1"),
        Hostile(X2, y2, "c2", HANDSHAKE, _header(corrupt)),
    ]
    model = _fit(clients, privacy="none")
    assert model.dropped_clients_ == [("c2", 0)]
    assert model.dropped_reasons_ == {"c2": "InvalidReply in handshake"}
    assert _fit(clients[:2], privacy="none").dropped_reasons_ == {}


class DyingGrid(MemoryGrid):
    """Flower's in-memory grid running the real ClientApp; ``node`` stops answering after
    ``answers`` replies (a SuperNode that went away: the round times out)."""

    def __init__(self, paths: dict[str, Path], node: int, answers: int) -> None:
        super().__init__(paths)
        self.node, self.answers = node, answers

    def pull_messages(self, message_ids: Any) -> Any:
        replies = list(super().pull_messages(message_ids))
        mine = [r for r in replies if r.metadata.src_node_id == self.node]
        if mine:
            self.answers -= len(mine)
            if self.answers <= 0:
                self.dead.add(self.node)
        return replies


def test_a_flower_node_that_goes_silent_is_dropped_with_its_reason(tmp_path: Path) -> None:
    paths = write_site_files(tmp_path)
    grid = DyingGrid(paths, node=1002, answers=3)  # site-c: discovery, handshake, Round A
    fed = FlowerFederation(grid, min_nodes=3, round_timeout=1.0, poll_interval=0.001)
    kw = {**PARAMS, "random_state": SEED, "on_client_failure": "drop", "privacy": "none"}
    remote = ff.FedForestRegressor(**kw).fit_federated(fed)
    ((name, at),) = remote.dropped_clients_
    kind = remote.communication_.per_round["kind"].iloc[at]
    assert (name, kind) == ("site-c", ROUND_B)
    (reason,) = remote.dropped_reasons_.values()
    assert remote.dropped_reasons_ == {"site-c": reason} and reason.endswith(" in round_b")
    assert reason.split(" ")[0].isidentifier()
    fed.close()
    # The forest the survivors grow is the local transport's with that client failing there.
    clients = local_clients(paths)
    X, y = pd.DataFrame(clients[2].X, columns=clients[2].feature_names), clients[2].y_raw
    clients[2] = Raising(X, y, "site-c", 2, TimeoutError)
    local = ff.FedForestRegressor(**kw).fit_federated(ff.LocalFederation(clients))
    assert_same_forest(remote, local)
    assert local.dropped_reasons_ == {"site-c": "TimeoutError in round_b"}


@pytest.mark.parametrize(
    "reasons",
    [
        {"c1": f"RuntimeError: {SECRET}"},  # a text beyond type and step
        {"c1": "RuntimeError in lunch"},  # no protocol step
        {"c0": "RuntimeError in round_a"},  # a client that was not dropped
        {"c1": 3},
        ["c1"],
    ],
)
def test_model_files_check_the_reasons_and_older_files_load(reasons: Any, tmp_path: Path) -> None:
    (X0, y0), (X1, y1), _ = _data()
    model = _fit([ff.Client(X0, y0, "c0"), Raising(X1, y1, "c1", 0, RuntimeError)])
    assert model.dropped_reasons_ == {"c1": "RuntimeError in handshake"}
    model.save(tmp_path / "m.ffm")

    def older(meta: dict[str, Any]) -> None:
        del meta["header"]["dropped_reasons"]

    def wrong(meta: dict[str, Any]) -> None:
        meta["header"]["dropped_reasons"] = reasons

    old = ff.load(edit_header(tmp_path / "m.ffm", tmp_path / "old.ffm", older))
    assert old.dropped_clients_ == [("c1", 0)] and old.dropped_reasons_ == {}
    bad = edit_header(tmp_path / "m.ffm", tmp_path / "bad.ffm", wrong)
    refused(ff.load, bad, "dropped_reasons")


def test_a_type_name_a_model_file_would_refuse_is_exception() -> None:
    from fedforest.federated.federation import drop_reason

    odd = type("Fehler é 17", (RuntimeError,), {})
    assert drop_reason(odd("x"), ROUND_A) == "Exception in round_a"
    assert drop_reason(KeyError("patient 17"), "oob") == "KeyError in oob"
