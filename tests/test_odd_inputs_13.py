"""Odd inputs, thirteenth round: ONNX labels, a peer's bytes, diagnose, a refusal's client.

Each test failed on m28 (a9fce3b):

- ``to_onnx()`` of a classifier fitted on bytes or dates raised skl2onnx's "Label types
  must be all integers or all strings", naming no field (float64 input: "... holding other
  objects", not saying what to do);
- a swarm ``Peer`` decoded bytes labels to strings, where the estimators (and
  scikit-learn's forests) keep bytes: its ``classes_`` and the swarm's ``predict`` were
  ``str``, and text and bytes mixed in an ``object`` y were one class when equal;
- ``diagnose`` on a multi-output classification y gave an outcome p-value of NaN ("F = nan
  on (0, 0) df"), which ``split_rule="auto"`` read as "not rejected";
- a client's own refusal named the client twice: "Client 'b' failed in round 0
  (handshake): ValueError: Client 'b': regression targets ...", in every transport, and
  a Dask client that could not be built "'a': Client 'a': y has shape ...".
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

import fedforest as ff
from fedforest.federated.federation import ClientDataError, without_client
from fedforest.swarm import Peer, ShareBundle, SwarmForest
from tests.test_privacy_errors import HUGE_TARGET, quoted_values

_DATES = np.array(["2020-01-01", "2021-06-01"], dtype="datetime64[ns]")


def _labelled(labels: np.ndarray, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(13)
    X = rng.normal(size=(n, 3))
    return X, labels[(X[:, 0] > 0).astype(int)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("labels", [np.array([b"no", b"yes"]), _DATES], ids=["bytes", "dates"])
def test_to_onnx_refuses_bytes_and_dates_naming_the_labels_dtype(
    labels: np.ndarray, dtype: Any
) -> None:
    pytest.importorskip("skl2onnx")
    X, y = _labelled(labels)
    model = ff.FedForestClassifier(n_estimators=2, max_depth=3, random_state=0, privacy="none")
    model.fit(X, y)
    with pytest.raises(ValueError) as info:
        model.to_onnx(dtype=dtype)
    text = str(info.value)
    assert f"classes_ has dtype {labels.dtype} (" in text, text
    assert "y.astype(str)" in text and "Label types" not in text, text
    if labels.dtype.kind == "S":  # a multi-output classifier's likewise
        Y = np.stack([y, y[::-1]], axis=1)
        multi = ff.FedForestClassifier(n_estimators=2, max_depth=3, random_state=0).fit(X, Y)
        with pytest.raises(ValueError, match=re.escape(f"classes_ has dtype {labels.dtype} (")):
            multi.to_onnx(dtype=dtype)


def test_to_onnx_still_writes_text_labels() -> None:
    onnxruntime = pytest.importorskip("onnxruntime")
    X, y = _labelled(np.array(["no", "yes"], dtype=object))
    model = ff.FedForestClassifier(n_estimators=2, max_depth=3, random_state=0).fit(X, y)
    session = onnxruntime.InferenceSession(model.to_onnx().SerializeToString())
    label = session.run(["label"], {"X": X.astype(np.float32)})[0]
    np.testing.assert_array_equal(label, model.predict(X))


@pytest.mark.parametrize("engine", ["sklearn", "fedforest"])
def test_a_peer_keeps_bytes_labels_as_the_estimators(engine: str, tmp_path: Path) -> None:
    X, y = _labelled(np.array([b"no", b"yes"]), n=400)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    peers = [
        Peer(name, n_estimators=3, random_state=0, engine=engine).fit(frame[rows], y[rows])
        for name, rows in (("p1", slice(0, 200)), ("p2", slice(200, 400)))
    ]
    reference = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    estimator = ff.FedForestClassifier(n_estimators=3, random_state=0, privacy="none").fit(X, y)
    for peer in peers:
        assert peer.classes_.dtype == reference.classes_.dtype == estimator.classes_.dtype
        np.testing.assert_array_equal(peer.classes_, reference.classes_)
    swarm = SwarmForest([p.share() for p in peers])
    predicted = swarm.predict(frame)
    assert predicted.dtype == estimator.predict(X).dtype
    assert (predicted == y).mean() > 0.9
    # A bundle file refuses them, as a model file does, before anything is written.
    path = tmp_path / "p1.ffb"
    with pytest.raises(ValueError, match=re.escape("classes has dtype |S3, which a bundle")):
        peers[0].share().save(path)
    with pytest.raises(ValueError, match=re.escape("classes_ has dtype |S3, which a model")):
        estimator.save(tmp_path / "m.ffm")
    assert not path.exists()
    # A peer fitted on the labels as text saves, and its bundle loads with them.
    text = Peer("p3", n_estimators=3, random_state=0, engine=engine)
    text.fit(frame[:200], y[:200].astype(str)).share().save(path)
    assert ShareBundle.load(path).classes.tolist() == ["no", "yes"]


def test_a_peer_refuses_text_and_bytes_mixed_in_one_y() -> None:
    X, _ = _labelled(np.array([0, 1]))
    y = np.array(["no", b"no", "yes"] * 70, dtype=object)[: len(X)]
    with pytest.raises(ValueError, match=r"y mixes labels of types bytes, str"):
        Peer("p", n_estimators=2).fit(pd.DataFrame(X, columns=["a", "b", "c"]), y)


def _two_outputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = _labelled(np.array([0, 1]), n=300)
    return X, np.stack([y, (X[:, 1] > 0).astype(int)], axis=1), np.repeat(["a", "b", "c"], 100)


def test_diagnose_refuses_a_multi_output_classification_y_naming_the_client() -> None:
    X, Y, ids = _two_outputs()
    with pytest.raises(ValueError, match=r"client 'a' holds a y of 2 columns; give one column"):
        ff.diagnose(X, Y, ids, task="classification", privacy="none")
    one = ff.diagnose(X, Y[:, 1], ids, task="classification", privacy="none")
    assert 0.0 <= one.outcome_heterogeneity_pvalue <= 1.0  # one column is tested as before


def test_split_rule_auto_on_multi_output_classification_grows_exact_trees() -> None:
    X, Y, ids = _two_outputs()
    params = {"n_estimators": 3, "max_depth": 3, "random_state": 0, "privacy": "none"}
    auto = ff.FedForestClassifier(split_rule="auto", **params).fit(X, Y, client_ids=ids)
    exact = ff.FedForestClassifier(split_rule="exact", **params).fit(X, Y, client_ids=ids)
    assert auto.split_rule_ == "exact" and auto.diagnostics_ is None
    np.testing.assert_array_equal(auto.predict_proba(X)[1], exact.predict_proba(X)[1])


def test_without_client_drops_only_the_client_s_own_naming() -> None:
    assert without_client("Client 'b': y contains NaN.", "b") == "y contains NaN."
    assert without_client("Client 'b' cannot order its columns", "b") == (
        "it cannot order its columns"
    )
    remote = "KeyError at the client: Client 'b': no such key."
    assert without_client(remote, "b") == "KeyError at the client: no such key."
    for kept in ("Client 'bb': y contains NaN.", "round_a failed with KeyError; ...", "Client 'b'"):
        assert without_client(kept, "b") == kept


# ----------------------------------------------------------- a refusal in every transport
def _huge(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["age", "bmi", "dose"])
    y = X["age"].to_numpy() + rng.normal(scale=0.1, size=n)
    if seed == 1:
        y[5] = HUGE_TARGET
    return X, y


def _assert_named_once(text: str, client: str, values: np.ndarray) -> None:
    """The client and the round once, the field, no data value."""
    expected = f"Client {client!r} failed in round 0 (handshake): ValueError: regression "
    assert text.startswith(expected), text
    assert text.count(repr(client)) == 1 and text.count("round 0") == 1, text
    assert "targets must be at most 1e+100" in text, text
    assert quoted_values(text, values) == [], text


def _data() -> tuple[dict[str, tuple[pd.DataFrame, np.ndarray]], np.ndarray]:
    data = {name: _huge(80, k) for k, name in enumerate(["site-a", "site-b", "site-c"])}
    values = np.concatenate([np.r_[X.to_numpy().ravel(), y] for X, y in data.values()])
    return data, values


def test_a_client_s_refusal_names_it_once_in_process() -> None:
    data, values = _data()
    clients = [ff.Client(X, y, name) for name, (X, y) in data.items()]
    model = ff.FedForestRegressor(n_estimators=2, max_depth=2, random_state=0)
    with pytest.raises(ClientDataError) as info:
        model.fit_federated(ff.LocalFederation(clients))
    _assert_named_once(str(info.value), "site-b", values)


def test_a_client_s_refusal_names_it_once_over_flower(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ClientApp, its messages through an in-memory Grid (tests/test_flower.py)."""
    pytest.importorskip("flwr")
    from flwr.supercore.task_identity import TaskIdentity

    from fedforest.transport.flower import FlowerFederation
    from tests.test_flower import MemoryGrid

    for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):  # a ServerApp's
        monkeypatch.setattr(TaskIdentity, name, value)

    data, values = _data()
    paths = {}
    for name, (X, y) in data.items():
        paths[name] = tmp_path / f"{name}.csv"
        X.assign(y=y).to_csv(paths[name], index=False)
    fed = FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001)
    model = ff.FedForestRegressor(n_estimators=2, max_depth=2, random_state=0)
    with pytest.raises(ClientDataError) as info:
        model.fit_federated(fed)
    _assert_named_once(str(info.value), "site-b", values)


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    """Two single-threaded worker processes on 127.0.0.1, closed (and checked gone) after."""
    pytest.importorskip("distributed")
    from tests._loopback import dask_module_client

    yield from dask_module_client(sys.modules[__name__])


def _make_client(X: pd.DataFrame, y: np.ndarray, name: str) -> ff.Client:
    return ff.Client(X, y, name=name)


def test_a_client_s_refusal_names_it_once_on_dask(dask_client: Any) -> None:
    from fedforest.transport.dask import DaskFederation
    from tests._loopback import scaled

    data, values = _data()
    factories = {name: functools.partial(_make_client, X, y, name) for name, (X, y) in data.items()}
    fed = DaskFederation(factories, client=dask_client, timeout=scaled(60))
    model = ff.FedForestRegressor(n_estimators=2, max_depth=2, random_state=0)
    try:
        with pytest.raises(ClientDataError) as info:
            model.fit_federated(fed)
    finally:
        fed.close()
    _assert_named_once(str(info.value), "site-b", values)
    # A client its worker cannot build (y one row short) is named once too.
    X, y = data["site-a"]
    short = {"site-a": functools.partial(_make_client, X, y[1:], "site-a")}
    with pytest.raises(ValueError) as built:
        DaskFederation(short, client=dask_client, timeout=scaled(60))
    text = str(built.value)
    assert "'site-a': y has shape (79,); expected (80,)" in text, text
    assert text.count("'site-a'") == 1, text
