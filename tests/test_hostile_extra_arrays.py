"""Hostile clients: a reply holding an array the protocol does not define is refused.

Before, the server read the arrays it expected and silently ignored any other: a client
could attach anything (at any privacy level) and the fit went on. Now every reply's array
names are checked in ``rounds.exchange``, which every transport's replies go through
(local, Flower, Dask: their codecs keep every array they decode, so the check sees it):
an InvalidReply naming the client, the round and the array. Under ``"secure"`` a masked
round's reply must be exactly its masked sums, so a name the protocol uses elsewhere (a
sketch, data values) is refused there too. Flower's codec also refuses records and
entries a fedforest message does not have.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.federated.client import Client
from fedforest.federated.protocol import (
    GRID,
    HANDSHAKE,
    OOB,
    RECOVER,
    REPLY_ARRAYS,
    ROUND_A,
    ROUND_B,
    Message,
)
from fedforest.federated.server.checks import InvalidReply
from fedforest.federated.server.envelope import check_envelope
from fedforest.transport.local import LocalFederation

pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")


class Attaching(Client):
    """A real client that attaches ``extra`` to its first reply of ``kind``."""

    def __init__(self, X: Any, y: Any, name: str, kind: str, extra: dict[str, Any]) -> None:
        super().__init__(X, y, name)
        self.kind, self.extra, self.done = kind, extra, False

    def handle(self, msg: Message) -> Any:
        reply = super().handle(msg)
        if msg.kind == self.kind and not self.done and isinstance(reply, Message):
            self.done = True
            return Message(reply.kind, dict(reply.header), {**reply.arrays, **self.extra})
        return reply


def _data(task: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(360, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=360)
    return X, ((y > 0).astype(int) if task == "classification" else y)


def _fit(task: str, privacy: str, kind: str, extra: dict[str, Any], **kw: Any) -> Any:
    X, y = _data(task)
    clients = [
        Client(X[:120], y[:120], "c0"),
        Attaching(X[120:240], y[120:240], "c1", kind, extra),
        Client(X[240:], y[240:], "c2"),
    ]
    cls = FedForestClassifier if task == "classification" else FedForestRegressor
    params = {"n_estimators": 2, "max_depth": 2, "random_state": 0, "oob_score": True}
    model = cls(privacy=privacy, **{**params, **kw})
    return model.fit_federated(LocalFederation(clients))


CASES = [
    ("none", HANDSHAKE),
    ("none", ROUND_A),
    ("none", ROUND_B),
    ("none", OOB),
    ("secure", HANDSHAKE),
    ("secure", GRID),
    ("secure", ROUND_A),
    ("secure", ROUND_B),
    ("secure", OOB),
    ("dp", ROUND_A),
]


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize(("privacy", "kind"), CASES, ids=[f"{p}-{k}" for p, k in CASES])
def test_an_array_the_protocol_lacks_is_refused_naming_client_and_array(
    task: str, privacy: str, kind: str
) -> None:
    dp: dict[str, Any] = {"epsilon": 5.0} if privacy == "dp" else {}
    if dp and task == "classification":
        dp["classes"] = sorted(set(_data(task)[1].tolist()))  # declared under "dp"
    extra = {"extra": np.zeros(3, dtype=np.uint64)}
    with pytest.raises(InvalidReply, match=rf"Client 'c1'.*\({kind}\).*array 'extra'") as err:
        _fit(task, privacy, kind, extra, **dp)
    assert err.value.client == "c1" and err.value.field == "array 'extra'"


def test_a_client_dropped_for_an_extra_array_leaves_the_others_forest() -> None:
    X, y = _data("regression")
    kept = _fit("regression", "secure", HANDSHAKE, {"extra": np.zeros(1)}, on_client_failure="drop")
    others = FedForestRegressor(n_estimators=2, max_depth=2, random_state=0, oob_score=True)
    others.fit_federated(
        LocalFederation([Client(X[:120], y[:120], "c0"), Client(X[240:], y[240:], "c2")])
    )
    np.testing.assert_array_equal(kept.predict(X), others.predict(X))


@pytest.mark.parametrize(
    ("kind", "name"), [(ROUND_A, "sketch"), (ROUND_A, "local_best"), (HANDSHAKE, "feature_min")]
)
def test_under_secure_a_name_of_another_mode_is_refused(kind: str, name: str) -> None:
    # Names "none" uses carry data values: under "secure" a reply is its masked sums only.
    with pytest.raises(InvalidReply, match=rf"Client 'c1'.*array '{name}'"):
        _fit("regression", "secure", kind, {name: np.zeros(4)})


def test_every_reply_name_a_client_sends_is_allowed() -> None:
    # The fits above pass with the honest clients' replies (every mode of these tests);
    # the table must also hold each name the packing functions make.
    assert {"left_counts", "left_sums", "left_index", "avg_index"} <= REPLY_ARRAYS[ROUND_B]
    assert {"sketch", "sketch_runs", "sketch_off", "summary", "hist"} <= REPLY_ARRAYS[ROUND_A]


def test_a_recovery_reply_holds_only_the_masks_it_was_asked_for() -> None:
    request = Message(RECOVER, {"shapes": {"summary": [2, 3]}, "dropped": ["c2"], "tag": 1})
    check_envelope("c0", request, Message(RECOVER, {}, {"summary": np.zeros((2, 3), np.uint64)}))
    bad = Message(RECOVER, {}, {"summary": np.zeros((2, 3), np.uint64), "x": np.zeros(1)})
    with pytest.raises(InvalidReply, match="Client 'c0'.*array 'x'"):
        check_envelope("c0", request, bad)


def test_the_transports_codecs_keep_extra_arrays_for_the_check() -> None:
    # Flower's and Dask's replies are decoded into Messages and then go through the same
    # rounds.exchange as local ones: their codecs must not drop an unknown array.
    pytest.importorskip("flwr")
    from fedforest.transport.flower._codec import from_records, to_records

    msg = Message(OOB, {"name": "c1"}, {"oob_sums": np.zeros(4), "extra": np.ones(2)})
    request = Message(OOB, {})
    decoded = [from_records(to_records(msg), "c1")]
    try:
        from fedforest.transport.dask._wire import from_bytes, to_bytes
    except ImportError:  # pragma: no cover - dask missing
        pass
    else:
        decoded.append(from_bytes(to_bytes(msg), "c1"))
    for back in decoded:
        assert sorted(back.arrays) == ["extra", "oob_sums"]
        with pytest.raises(InvalidReply, match="Client 'c1'.*array 'extra'"):
            check_envelope("c1", request, back)


def test_flower_codec_refuses_records_a_fedforest_message_lacks() -> None:
    pytest.importorskip("flwr")
    from flwr.app import Array, ArrayRecord, MetricRecord

    from fedforest.transport.flower._codec import ARRAYS, CONFIG, from_records, to_records

    msg = Message(OOB, {"name": "c1"}, {"oob_sums": np.zeros(4)})
    from_records(to_records(msg), "c1")  # passes
    edits = {
        "the record 'other'": lambda r: r.__setitem__(
            "other", ArrayRecord({"x": Array(np.ones(2))})
        ),
        "the record 'm'": lambda r: r.__setitem__("m", MetricRecord({"a": 1.0})),
        f"the entry {CONFIG}\\['sneak'\\]": lambda r: r[CONFIG].__setitem__("sneak", "x"),
        f"the array {ARRAYS}\\['x'\\]": lambda r: r[ARRAYS].__setitem__("x", Array(np.ones(2))),
    }
    for what, edit in edits.items():
        records = to_records(msg)
        edit(records)
        with pytest.raises(ValueError, match=f"from 'c1' carries {what}, which is not part"):
            from_records(records, "c1")
