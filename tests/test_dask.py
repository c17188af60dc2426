"""The Dask transport on a real LocalCluster: two worker processes started here, no mock.

The oracle is the in-process transport: the same shards, seed and privacy level must grow
the same forest (every tree array, bit for bit) through Dask actors as through
``LocalFederation``, and the estimators' ``fit`` on Dask collections the same forest as on
the rows in memory. Timeouts are generous and scale with the machine's load: a round that
waits for a busy CPU is not a dead worker.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import psutil
import pytest
from distributed import Client

import fedforest as ff
from fedforest.federated.federation import ClientDataError, ClientFailure
from fedforest.federated.protocol import GRID, PROTOCOL_VERSION, RECOVER, Message
from fedforest.transport.dask import DaskFederation
from fedforest.transport.dask._wire import from_bytes, to_bytes
from tests._forests import assert_same_forest
from tests._loopback import dask_module_client, loopback_cluster, scaled

# Small forests with oob_score=True: some rows are in every bag (expected here).
pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")

PARAMS: dict[str, Any] = {"n_estimators": 4, "max_depth": 3, "min_samples_leaf": 3}
N_ROWS = 360


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Client]:
    """Two single-threaded worker processes on 127.0.0.1, closed (and checked gone) after."""
    yield from dask_module_client(sys.modules[__name__])


# ---------------------------------------------------------------------------- data
def frame(seed: int = 0, n: int = N_ROWS) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Features (one a category), a regression target and a site label per row."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["age", "bmi", "dose", "score"])
    X["region"] = pd.Categorical(rng.choice(["north", "south", "east"], size=n))
    y = 2 * X["age"] + np.sin(3 * X["bmi"]) + (X["region"] == "north") + rng.normal(0, 0.2, n)
    site = pd.Series(rng.choice(["site-a", "site-b", "site-c"], size=n), name="site")
    return X, y.rename("y"), site


def partitions(dX: Any, dy: Any) -> list[ff.Client]:
    """The clients DaskFederation builds from the partitions, built here in memory."""
    return [
        ff.Client(dX.partitions[i].compute(), np.asarray(dy.partitions[i].compute()), name=str(i))
        for i in range(dX.npartitions)
    ]


def make_client(X: pd.DataFrame, y: np.ndarray, name: str) -> ff.Client:
    """A factory's body: what a worker would read from its own file."""
    return ff.Client(X, y, name=name)


class SlowClient(ff.Client):
    """Answers the handshake, then holds every later answer until the file ``release``
    exists (at most a minute): past any timeout of the test, however busy the machine."""

    def __init__(self, *args: Any, release: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = release

    def handle(self, msg: Message) -> Message:
        if msg.kind != "handshake":
            deadline = time.monotonic() + 60.0
            while not os.path.exists(self.release) and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().handle(msg)


def slow_to_build(X: pd.DataFrame, y: np.ndarray, name: str) -> ff.Client:
    """A factory that takes 2 s (a slow read)."""
    time.sleep(2.0)
    return make_client(X, y, name)


# ---------------------------------------------------------------------------- no cluster
def test_importing_fedforest_does_not_import_dask() -> None:
    code = (
        "import sys, fedforest, fedforest.transport, fedforest.forest\n"
        "assert 'dask' not in sys.modules and 'distributed' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=scaled(120))


NO_FLOWER = """
import importlib.abc, sys
tried = []

class NoFlower(importlib.abc.MetaPathFinder):  # as if Flower were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "flwr":
            tried.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoFlower())
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster

import fedforest as ff
from fedforest.transport.dask import DaskFederation
from fedforest.transport.dask import federation, _wire

rng = np.random.default_rng(0)
X = rng.normal(size=(400, 3))
y = X[:, 0] + rng.normal(0, 0.1, 400)
with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                  dashboard_address=None) as cluster, Client(cluster):
    with DaskFederation.from_collections(da.from_array(X, chunks=200),
                                         da.from_array(y, chunks=200)) as fed:
        model = ff.FedForestRegressor(n_estimators=2, max_depth=2, privacy="none",
                                      random_state=0).fit_federated(fed)
        assert fed.bytes_received > 0 and fed.client_names == ["0", "1"]
assert np.isfinite(model.predict(X)).all()
assert not tried, tried
assert not [m for m in sys.modules if m.split(".")[0] == "flwr"]
assert "fedforest.transport.flower" not in sys.modules
print("ok")
"""


def test_the_dask_transport_needs_no_flower() -> None:
    """``fedforest[dask]`` alone: the frames' codec is the engine's, not Flower's."""
    done = subprocess.run(
        [sys.executable, "-c", NO_FLOWER], capture_output=True, text=True, timeout=scaled(300)
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def _with_meta_key(frame: bytes, key: str) -> bytes:
    """``frame`` rebuilt with one more key in its JSON part (what to_bytes never writes)."""
    from fedforest.transport.dask import _wire

    _, _, n_meta = _wire._PREAMBLE.unpack_from(frame)
    end = _wire._PREAMBLE.size + n_meta
    meta = json.loads(frame[_wire._PREAMBLE.size : end])
    meta[key] = 1
    body = json.dumps(meta, separators=(",", ":")).encode()
    head = _wire._PREAMBLE.pack(_wire._MAGIC, _wire._VERSION, len(body)) + body
    head += b"\0" * (-len(head) % _wire._ALIGN)
    return head + frame[end + (-end % _wire._ALIGN) :]


def test_frames_round_trip_and_refuse_what_is_not_a_frame() -> None:
    msg = Message("round_b", {"n": 3, "nested": {"a": [1, 2]}}, {"x": np.arange(5.0)})
    back = from_bytes(to_bytes(msg), "site-a")
    assert back.kind == msg.kind and back.header == msg.header
    assert np.array_equal(back.arrays["x"], msg.arrays["x"]) and back.arrays["x"].flags.writeable
    import pickle

    from fedforest.federated.codec import pack_arrays
    from fedforest.transport.dask import _wire

    # One allocation, the same bytes as the packed buffer appended to the padded head.
    msg = Message("round_b", {"n": 3}, {"x": np.arange(5.0), "c": np.arange(3, dtype=np.int32)})
    frame = to_bytes(msg)
    layout, buffer = pack_arrays(msg.arrays)
    meta = json.dumps(
        {"kind": msg.kind, "header": msg.header, "layout": layout}, separators=(",", ":")
    )
    head = _wire._PREAMBLE.pack(_wire._MAGIC, _wire._VERSION, len(meta)) + meta.encode()
    assert frame == head + b"\0" * (-len(head) % 8) + buffer.tobytes()
    # owned=True decodes a bytearray in place (its arrays are views of it, writable); the
    # default, and bytes or a memoryview, copy.
    owned = from_bytes(frame, "site-a", owned=True).arrays["x"]
    assert np.shares_memory(owned, np.frombuffer(frame, np.uint8)) and owned.flags.writeable
    for given, how in [
        (frame, {}),
        (bytes(frame), {"owned": True}),
        (memoryview(frame), {"owned": True}),
    ]:
        copied = from_bytes(given, "site-a", **how).arrays["x"]
        assert not np.shares_memory(copied, np.frombuffer(frame, np.uint8))
        assert np.array_equal(copied, owned) and copied.flags.writeable

    for junk, match in [
        (pickle.dumps(msg), "not a fedforest frame"),
        (b"FF", "too short"),
        (to_bytes(msg)[:20], "runs past its end|malformed"),
        ("text", "not bytes"),
        (to_bytes(msg)[:-8], "does not fit"),
        (_with_meta_key(to_bytes(msg), "extra"), "JSON key 'extra'"),
    ]:
        with pytest.raises(ValueError, match=match) as info:
            from_bytes(junk, "site-a")
        assert "site-a" in str(info.value)


# ---------------------------------------------------------------------------- transport
@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_same_forest_as_local_federation(dask_client: Client, privacy: str) -> None:
    X, y, _ = frame()
    dX, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    params = {**PARAMS, "random_state": 3, "privacy": privacy, "oob_score": True}
    with DaskFederation.from_collections(dX, dy, timeout=scaled(120)) as fed:
        assert fed.client_names == ["0", "1", "2"]
        assert sum(fed.n_samples.values()) == N_ROWS
        assert set(fed.placement.values()) <= set(dask_client.scheduler_info()["workers"])
        remote = ff.FedForestRegressor(**params).fit_federated(fed)
        sent, received, rounds = fed.bytes_sent, fed.bytes_received, len(fed.round_seconds)
    local = ff.FedForestRegressor(**params).fit_federated(ff.LocalFederation(partitions(dX, dy)))
    assert_same_forest(remote, local)
    assert np.array_equal(remote.predict(X), local.predict(X))
    assert remote.oob_score_ == local.oob_score_
    assert remote.communication_.rounds == local.communication_.rounds == rounds
    assert remote.communication_.upload_bytes == local.communication_.upload_bytes
    # The frames carry the ledger's bytes plus their layout: never less.
    assert received >= remote.communication_.upload_bytes
    assert sent >= remote.communication_.download_bytes


def test_a_node_drawing_on_passes_its_rows_through_on_the_actors(dask_client: Client) -> None:
    """Verification mode, one-hot columns: a node whose drawn column proved constant stays
    in the frontier, its rows routed to one slot by both sides (docs/architecture.md,
    Round A); the actors route them so, and the forest is the local one (8 leaves a tree,
    one a cell, which needs the drawing on: tests/test_constant_features.py)."""
    rng = np.random.default_rng(0)
    cat, b = rng.integers(0, 4, N_ROWS), rng.integers(0, 2, N_ROWS)
    X = pd.DataFrame(np.column_stack([np.eye(4)[cat], b]), columns=list("abcde"))
    y = pd.Series(np.array([0.0, 1.0, 3.0, 7.0])[cat] + 2.0 * b + rng.normal(0, 0.5, N_ROWS))
    dX, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    params = {
        "n_estimators": 3, "bootstrap": False, "max_features": 1, "n_bins": None,
        "privacy": "none", "min_samples_leaf": 1, "random_state": 0,
    }  # fmt: skip
    with DaskFederation.from_collections(dX, dy, timeout=scaled(120)) as fed:
        remote = ff.FedForestRegressor(**params).fit_federated(fed)
    local = ff.FedForestRegressor(**params).fit_federated(ff.LocalFederation(partitions(dX, dy)))
    assert_same_forest(remote, local)
    assert [t.tree_.n_leaves for t in remote.estimators_] == [8, 8, 8]


def test_dp_runs_on_actors_and_reports_its_budget(dask_client: Client) -> None:
    # Depth 2 on 800 rows. (Smaller nodes once crashed the dp grower where a level sent no
    # threshold interval, in denoise.cumulative; fixed in b946d92, tests/test_dp_noise.py.)
    X, y, _ = frame(1, n=800)
    dX, dy = dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2)
    params = {"n_estimators": 4, "max_depth": 2, "min_samples_leaf": 5, "random_state": 0}
    # Under "dp" a categorical column's levels are declared (the levels a worker holds
    # would change with one row); undeclared, the fit is refused before any message.
    with pytest.raises(ValueError, match="levels of categorical column 'region' declared"):
        ff.FedForestRegressor(**params, privacy="dp", epsilon=8.0).fit(dX, dy)
    levels = {"region": ["east", "north", "south"]}
    model = ff.FedForestRegressor(**params, privacy="dp", epsilon=8.0, categories=levels)
    model.fit(dX, dy)
    assert model.privacy_report_["epsilon"] == pytest.approx(8.0)
    assert np.isfinite(model.predict(X)).all()


def test_dp_classification_with_declared_classes(dask_client: Client) -> None:
    """Under "dp" a classifier's labels are declared; on Dask the workers code their rows
    into them (nothing of y reaches this process), as fit on rows in memory does."""
    X, _, _ = frame(4, n=800)
    y = pd.Series(np.where(X["age"] > 0, "sick", "well"), name="y")
    dX, dy = dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2)
    levels = {"region": ["east", "north", "south"]}
    params = {"n_estimators": 4, "max_depth": 2, "min_samples_leaf": 5, "random_state": 0}
    declared = ["well", "sick", "unseen"]  # any order; a label no row holds is a class too
    model = ff.FedForestClassifier(
        **params, privacy="dp", epsilon=8.0, categories=levels, classes=declared
    ).fit(dX, dy)
    assert list(model.classes_) == ["sick", "unseen", "well"]
    assert model.privacy_report_["epsilon"] == pytest.approx(8.0)
    assert model.predict_proba(dX).compute().shape == (800, 3)
    assert set(model.predict(X)) <= set(declared)
    # The noise differs from fit to fit: "secure" shows the same coding as in memory.
    secure = {**params, "categories": levels, "classes": declared}
    remote = ff.FedForestClassifier(**secure).fit(dX, dy)
    memory = ff.FedForestClassifier(**secure).fit(X, y, client_ids=np.repeat(["0", "1"], 400))
    assert_same_forest(remote, memory)
    assert list(remote.classes_) == list(memory.classes_)
    with pytest.raises(ValueError, match=r"label\(s\) of y are not among the declared classes"):
        ff.FedForestClassifier(**params, privacy="dp", epsilon=8.0, categories=levels,
                               classes=["sick"]).fit(dX, dy)  # fmt: skip


def test_declared_labels_are_coded_by_distinct_value_not_row_by_row() -> None:
    """A worker codes its partition into the declared classes with one lookup per distinct
    label (pandas' factorize codes the rows): counted by the profiler's calls of a dict's
    ``get``, which were one a row (10,000 here) before; the codes are the dict's."""
    from fedforest.transport.dask._estimators import _encode_declared

    rng = np.random.default_rng(0)
    labels = np.array(["sick", "well", "unsure"], dtype=object)[rng.integers(0, 3, 10_000)]
    part = pd.Series(labels, index=np.arange(10_000) + 7, name="y")
    classes = np.asarray(["sick", "unseen", "unsure", "well"])
    gets = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal gets
        gets += (
            event == "c_call"
            and getattr(arg, "__name__", "") == "get"
            and isinstance(getattr(arg, "__self__", None), dict)
        )

    sys.setprofile(count)
    try:
        codes = _encode_declared(part, classes)
    finally:
        sys.setprofile(None)
    assert gets <= 3, gets
    index = {label: k for k, label in enumerate(classes.tolist())}
    assert codes.tolist() == [index[v] for v in labels.tolist()]
    assert codes.index.equals(part.index) and codes.name == "y"
    # Python's equality, as the dict's: 1.0 and True are the label 1; NaN is no label.
    numbers = np.array([1.0, 0.0, True, 2, np.nan], dtype=object)
    with pytest.raises(ValueError, match=r"^y on Dask: label\(s\) of y are not among") as no:
        _encode_declared(numbers, np.asarray([0, 1]))
    assert not any(ch.isdigit() for ch in str(no.value))  # no count, no label (as Flower's)
    assert _encode_declared(numbers[:3], np.asarray([0, 1])).tolist() == [1, 0, 1]


def test_declared_labels_on_a_cluster_equal_the_rows_in_memory(dask_client: Client) -> None:
    """Integer labels declared as integers, coded on the workers (partitions of unequal
    labels): the forest and classes of the rows in memory; a label outside them is refused
    in a Flower client's words, by neither its value nor a count of rows."""
    X, _, _ = frame(6, n=600)
    y = pd.Series(np.digitize(X["age"], [-0.5, 0.5]) * 10, name="y")  # 0, 10, 20
    dX, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    params = {**PARAMS, "random_state": 2, "classes": [20, 0, 10, 30]}
    remote = ff.FedForestClassifier(**params).fit(dX, dy)
    memory = ff.FedForestClassifier(**params).fit(X, y, client_ids=np.repeat(["0", "1", "2"], 200))
    assert_same_forest(remote, memory)
    assert remote.classes_.tolist() == memory.classes_.tolist() == [0, 10, 20, 30]
    y[[5, 6, 7]] = 7  # three rows of the first partition
    with pytest.raises(ValueError, match=r"label\(s\) of y are not among the") as refused:
        ff.FedForestClassifier(**params).fit(dX, dd.from_pandas(y, npartitions=3))
    assert "7" not in str(refused.value) and "3" not in str(refused.value)


def test_factories_run_on_the_workers_they_name(dask_client: Client) -> None:
    X, y, site = frame(2)
    workers = sorted(dask_client.scheduler_info()["workers"])
    names = ["site-a", "site-b", "site-c"]
    shards = {n: (X[site == n], y[site == n].to_numpy()) for n in names}
    factories = {n: functools.partial(make_client, *shards[n], n) for n in names}
    where = {"site-a": workers[0], "site-b": workers[1], "site-c": workers[1]}
    params = {**PARAMS, "random_state": 5}
    with DaskFederation(factories, workers=where, timeout=scaled(120)) as fed:
        assert fed.placement == where
        remote = ff.FedForestRegressor(**params).fit_federated(fed)
    local = ff.FedForestRegressor(**params).fit(X, y, client_ids=site)
    assert_same_forest(remote, local)


# ---------------------------------------------------------------------------- estimators
def test_fit_and_predict_on_dask_equal_the_rows_in_memory(dask_client: Client) -> None:
    X, y, site = frame(3)
    dX, dy, dsite = (dd.from_pandas(v, npartitions=3) for v in (X, y, site))
    params = {**PARAMS, "random_state": 1}
    model = ff.FedForestRegressor(**params).fit(dX, dy, client_ids=dsite)
    memory = ff.FedForestRegressor(**params).fit(X, y, client_ids=site)
    assert_same_forest(model, memory)
    assert list(model.clients_) == ["site-a", "site-b", "site-c"]
    assert list(model.feature_names_in_) == list(X.columns)
    pred = model.predict(dX)
    assert isinstance(pred, da.Array)
    # The model travels once to each worker: one scattered key for every partition's task
    # (broadcast=True: Dask copies it to the workers running at that instant; on a busy
    # machine one was not, once in a rehearsal of 2026-12-06, so where it lies is Dask's).
    shipped = [k for k in dask_client.who_has() if str(k).startswith("FedForestRegressor")]
    assert len(shipped) == 1
    assert len(dask_client.who_has()[shipped[0]]) >= 1
    assert np.array_equal(pred.compute(), memory.predict(X))
    assert [k for k in dask_client.who_has() if str(k).startswith("FedForestRegressor")] == shipped
    assert np.array_equal(model.apply(dX).compute(), memory.apply(X))

    labels = pd.Series(np.where(y > y.median(), "high", "low"), name="label")
    labels[3] = "one"  # a label one row holds: declared by the fit (no handshake names it)
    dlabels = dd.from_pandas(labels, npartitions=3)
    clf = ff.FedForestClassifier(**params).fit(dX, dlabels, client_ids=dsite)
    clf_memory = ff.FedForestClassifier(**params).fit(X, labels, client_ids=site)
    assert_same_forest(clf, clf_memory)
    assert list(clf.classes_) == ["high", "low", "one"]
    proba = clf.predict_proba(dX)
    assert proba.shape[1] == 3 and isinstance(proba, da.Array)
    assert np.array_equal(proba.compute(), clf_memory.predict_proba(X))
    assert np.array_equal(clf.predict(dX).compute(), clf_memory.predict(X))
    log = clf.predict_log_proba(dX).compute()
    assert np.array_equal(log, clf_memory.predict_log_proba(X))


def test_client_ids_make_the_clients_they_make_in_memory(dask_client: Client) -> None:
    """Labels become clients through the estimators' own helper: the same clients, names
    (sorted names: "10" before "2"), the same forest and the same errors."""
    X, y, _ = frame(8)
    labels = pd.Series(np.random.default_rng(8).choice([10, 2, 7], size=N_ROWS), name="h")
    dX, dy, dh = (dd.from_pandas(v, npartitions=3) for v in (X, y, labels))
    params = {**PARAMS, "random_state": 4, "privacy": "none"}
    model = ff.FedForestRegressor(**params).fit(dX, dy, client_ids=dh)
    memory = ff.FedForestRegressor(**params).fit(X, y, client_ids=labels)
    assert list(model.clients_) == list(memory.clients_) == ["10", "2", "7"]
    assert_same_forest(model, memory)
    with DaskFederation.from_collections(dX, dy, client_ids=dh, timeout=scaled(120)) as fed:
        counts = labels.value_counts()
        assert fed.n_samples == {str(k): int(v) for k, v in counts.items()}
    # Ints in the first partition, text in the others (a Dask Array keeps object labels
    # as they are; a DataFrame would make them strings): only the partitions' labels
    # pooled show that they do not sort together.
    mixed = np.array([*labels[:120], *(f"s{v}" for v in labels[120:])], dtype=object)
    bad = {
        "NaN": (labels.astype(float).where(labels != 7), 120),
        "one sortable type": (mixed, 120),
        "one sortable type (all": (mixed, 90),  # ints and text in one partition too
    }
    for match, (ids, chunk) in bad.items():
        with pytest.raises(ValueError, match=re.escape(match)) as in_memory:
            ff.FedForestRegressor(**params).fit(X, y, client_ids=ids)
        on_dask_ids = da.from_array(np.asarray(ids), chunks=chunk)
        with pytest.raises(ValueError, match=re.escape(match)) as on_dask:
            ff.FedForestRegressor(**params).fit(
                da.from_array(X.drop(columns="region").to_numpy(), chunks=(chunk, 4)),
                da.from_array(y.to_numpy(), chunks=chunk),
                client_ids=on_dask_ids,
            )
        # The same sentence, then the partition it is about when it is one partition's.
        partition = r" \(Partition \d of client_ids; rows counted within it\.\)$"
        said = re.sub(partition, "", str(on_dask.value))
        assert said.split(":")[0] == str(in_memory.value).split(":")[0]


def test_dask_arrays_one_client_per_partition_or_per_worker(dask_client: Client) -> None:
    X, y, _ = frame(4)
    values = X.drop(columns="region").to_numpy()
    aX, ay = da.from_array(values, chunks=(120, 2)), da.from_array(y.to_numpy(), chunks=120)
    params = {**PARAMS, "random_state": 2, "privacy": "none"}
    model = ff.FedForestRegressor(**params).fit(aX, ay)  # the default: a client per partition
    part = np.repeat(np.arange(3), 120)
    memory = ff.FedForestRegressor(**params).fit(values, y, client_ids=part)
    assert_same_forest(model, memory)
    pred = model.predict(aX)
    assert pred.chunks == ((120, 120, 120),)
    assert np.array_equal(pred.compute(), memory.predict(values))
    per_worker = ff.FedForestRegressor(**params).fit(aX, ay, client_ids="worker")
    assert all(str(name).startswith("worker-") for name in per_worker.clients_)
    assert 1 <= per_worker.n_clients_ <= 2


def _keys_held(dask_worker: Any) -> list[str]:
    return [str(key) for key in dask_worker.data]


def test_the_workers_let_the_partitions_go_once_the_clients_are_built(
    dask_client: Client,
) -> None:
    # Each client copies its partition; Dask kept the partitions too, for the actor's life
    # (an actor task's inputs), until the clients were built by plain tasks.
    X, y, _ = frame(5)
    aX = da.from_array(X.drop(columns="region").to_numpy(), chunks=(120, 2))
    ay = da.from_array(y.to_numpy(), chunks=120)
    with DaskFederation.from_collections(aX, ay, timeout=scaled(120)) as fed:
        assert fed.client_names == ["0", "1", "2"]
        # Garbage collected first: a reference cycle elsewhere may hold futures until then
        # (seen once in the whole file's run at load 20), which is not what is checked here.
        gc.collect()
        deadline = time.monotonic() + scaled(30)  # the scheduler's release reaching them
        while partitions := [
            key
            for keys in dask_client.run(_keys_held).values()
            for key in keys
            if aX.name in key or ay.name in key
        ]:
            assert time.monotonic() < deadline, partitions
            time.sleep(0.05)
        model = ff.FedForestRegressor(**PARAMS, random_state=1).fit_federated(fed)
    values = X.drop(columns="region").to_numpy()
    memory = ff.FedForestRegressor(**PARAMS, random_state=1)
    memory.fit(values, y, client_ids=np.repeat(np.arange(3), 120))
    assert_same_forest(model, memory)


def test_invalid_input_raises_a_value_error_naming_it(dask_client: Client) -> None:
    X, y, site = frame(5)
    dX, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    model = ff.FedForestRegressor(**PARAMS)
    with pytest.raises(ValueError, match="both as Dask collections"):
        model.fit(dX, y)
    with pytest.raises(ValueError, match="y has 2 partitions but X has 3"):
        model.fit(dX, dd.from_pandas(y, npartitions=2))
    with pytest.raises(ValueError, match="client_ids='rows'"):
        model.fit(dX, dy, client_ids="rows")
    with pytest.raises(ValueError, match="client_ids is a Series"):
        model.fit(dX, dy, client_ids=site)
    with pytest.raises(ValueError, match="expected one value per row"):
        model.fit(dX, dd.from_pandas(X[["age", "bmi"]], npartitions=3))
    with pytest.raises(ValueError, match="n_estimators"):
        ff.FedForestRegressor(n_estimators=0).fit(dX, dy)
    with pytest.raises(ValueError, match="distributed.Client"):
        DaskFederation({"a": functools.partial(make_client, X, y, "a")}, client="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Unknown label type"):
        ff.FedForestClassifier(**PARAMS).fit(dX, dy)
    with pytest.raises(ValueError, match="partitions_as"):
        DaskFederation.from_collections(dX, dy, partitions_as="row")
    # A client the worker cannot build (its y is one row short) is named before any round.
    short = {"a": functools.partial(make_client, X, y.to_numpy()[1:], "a")}
    with pytest.raises(ValueError, match=r"'a': y has shape"):
        DaskFederation(short, timeout=scaled(60))
    renamed = {"a": functools.partial(make_client, X, y.to_numpy(), "b")}
    with pytest.raises(ValueError, match="named 'b'"):
        DaskFederation(renamed, timeout=scaled(60))


class LostIn(ff.Client):
    """A client whose node is lost at its ``nth`` message of ``kind``."""

    def __init__(self, X: pd.DataFrame, y: np.ndarray, name: str, kind: str, nth: int) -> None:
        super().__init__(X, y, name=name)
        self.kind, self.left = kind, nth

    def handle(self, msg: Message) -> Message:
        self.left -= msg.kind == self.kind
        if self.left == 0:
            raise RuntimeError("node lost")
        return super().handle(msg)


def test_a_failed_recovery_names_its_client_and_round_once(dask_client: Client) -> None:
    """Client c lost in the second grid round (the coarse counts: recovered under "dp";
    a secure fit stops there since red team 18, tests/test_privacy_red18.py), a and b in
    the round that removes its masks.
    Before, the recovery's ClientFailure was wrapped in another: "Client 'a' failed in
    round 3 (recover): ClientFailure: Client 'a' failed in round 3 (recover): ..."
    (tests/test_odd_inputs_11.py, the same on LocalFederation)."""
    X, y, site = frame(7)
    kinds = {"a": (RECOVER, 1), "b": (RECOVER, 1), "c": (GRID, 2)}
    factories = {
        name: functools.partial(LostIn, X[rows], y[rows].to_numpy(), name, *kind)
        for name, kind in kinds.items()
        for rows in [site == f"site-{name}"]
    }
    regions = {"region": ["north", "south", "east"]}  # declared: "dp" needs them
    model = ff.FedForestRegressor(
        **PARAMS, on_client_failure="drop", privacy="dp", epsilon=5.0, categories=regions
    )
    with (
        DaskFederation(factories, timeout=scaled(120)) as fed,
        pytest.raises(ClientFailure) as info,
    ):
        model.fit_federated(fed)
    text = str(info.value)
    assert re.match(r"Client 'a' failed in round \d+ \(recover\): RuntimeError: ", text), text
    assert text.count("failed in round") == 1 and text.endswith("(also failed: 'b')"), text


def test_a_client_that_refuses_its_data_is_a_client_data_error(dask_client: Client) -> None:
    X, y, _ = frame(6)
    words = np.where(y > 0, "up", "down")  # text targets for a regressor
    factories = {"a": functools.partial(make_client, X, words, "a")}
    with (
        DaskFederation(factories, timeout=scaled(60)) as fed,
        pytest.raises(ClientDataError, match="'a' failed in round 0.*must be numeric"),
    ):
        ff.FedForestRegressor(**PARAMS).fit_federated(fed)


def test_an_actor_s_error_frames_quote_no_value(dask_client: Client) -> None:
    """Every exception of an actor reaches the server as text: no value of the client's
    data in it (tests/test_privacy_errors.py; NumPy's text quoted a feature's string, the
    secure encoder the largest scaled sum, a heavy sample weight times 2^24)."""
    from tests.test_privacy_errors import HEAVY_WEIGHT, SECRET_TEXT, quoted_values

    X, y, _ = frame(8)
    values = X.drop(columns="region").to_numpy(dtype=np.float64)
    text = X.drop(columns="region").to_numpy().astype(object)
    text[7, 1] = SECRET_TEXT
    built = {"a": functools.partial(ff.Client, text, y.to_numpy(), "a")}
    said = r"'a'.*column 1 mixes text and numbers \(float, str"
    with pytest.raises(ValueError, match=said) as info:
        DaskFederation(built, timeout=scaled(60))
    assert quoted_values(str(info.value), values, (SECRET_TEXT,)) == [], str(info.value)
    w = np.full(len(y), HEAVY_WEIGHT)  # every row: one heavy row is trimmed (weight_band.py)
    heavy = {
        name: functools.partial(ff.Client, X[part], y.to_numpy()[part], name, sample_weight=w[part])
        for name, part in (("a", slice(0, 180)), ("b", slice(180, None)))
    }
    with (
        DaskFederation(heavy, timeout=scaled(60)) as fed,
        pytest.raises(ClientDataError, match="'a' failed in round .*fixed-point sums") as info,
    ):
        ff.FedForestRegressor(**PARAMS).fit_federated(fed)
    assert quoted_values(str(info.value), np.r_[values.ravel(), w], ()) == [], str(info.value)


def site_loader(path: str, name: str) -> ff.Client:
    """A site's own loader, run on its worker: pandas parses the file's ``bmi`` as numbers."""
    frame = pd.read_csv(path, dtype={"bmi": "float64"})
    return ff.Client(frame.drop(columns="y"), frame["y"].to_numpy(), name)


class PatientClient(ff.Client):
    """A site's client that looks its patients' ids up when Round B comes: one id is
    missing from its table (a bug), and Python's ``KeyError`` quotes it."""

    def handle(self, msg: Message) -> Message:
        if msg.kind == "round_b":
            ids = [f"patient {k}" for k in range(self.n_samples)]
            table = {i: k for k, i in enumerate(ids[:17] + ids[18:])}
            [table[i] for i in ids]  # KeyError('patient 17')
        return super().handle(msg)


def test_an_actor_sends_a_library_s_error_as_its_type_and_step(
    dask_client: Client, tmp_path: Any
) -> None:
    """An exception fedforest does not raise itself (pandas' in a site's loader, a bug's
    KeyError in a round) reaches the server as its type and step, not its text (until
    2026-12-04 its text did: "could not convert string to float: 'HIV+ 7.31'")."""
    from tests.test_privacy_errors import SECRET_TEXT, quoted_values

    X, y, _ = frame(9)
    values = X.drop(columns="region").to_numpy(dtype=np.float64).ravel()
    rows = X.drop(columns="region").assign(y=y)
    rows["bmi"] = rows["bmi"].astype(object)
    rows.loc[7, "bmi"] = SECRET_TEXT
    rows.to_csv(tmp_path / "a.csv", index=False)
    loaders = {"a": functools.partial(site_loader, str(tmp_path / "a.csv"), "a")}
    with pytest.raises(ValueError, match="Dask clients could not be built: 'a'") as info:
        DaskFederation(loaders, timeout=scaled(60))
    assert quoted_values(str(info.value), values, (SECRET_TEXT,)) == [], str(info.value)
    assert "'a': building its client failed with ValueError;" in str(info.value)

    parts = {"a": slice(0, 180), "b": slice(180, None)}
    built = {
        name: functools.partial(
            PatientClient if name == "a" else ff.Client, X[part], y.to_numpy()[part], name
        )
        for name, part in parts.items()
    }
    with DaskFederation(built, timeout=scaled(60)) as fed:
        with pytest.raises(ClientFailure) as failed:
            ff.FedForestRegressor(**PARAMS).fit_federated(fed)
        text = str(failed.value)
        assert "patient" not in text and "17" not in text, text
        assert re.search(r"'a' failed in round \d+ \(round_b\)", text), text
        assert not isinstance(failed.value, ValueError)
        assert "KeyError at the client: round_b failed with KeyError;" in text, text
        model = ff.FedForestRegressor(**PARAMS, on_client_failure="drop").fit_federated(fed)
    assert [name for name, _ in model.dropped_clients_] == ["a"]


def test_an_actor_past_the_timeout_fails_its_round(dask_client: Client, tmp_path: Path) -> None:
    X, y, _ = frame(7)
    release = tmp_path / "release"
    factories = {
        "fast": functools.partial(make_client, X, y.to_numpy(), "fast"),
        "slow": functools.partial(SlowClient, X, y.to_numpy(), name="slow", release=str(release)),
    }
    # One worker each: a worker runs its actors' calls in one thread, so "fast" on the
    # worker of "slow" answers only if its call runs first (it did in 10 of 10 runs forced
    # there, by the order of sending; the scheduler decides where unpinned actors go).
    where = dict(zip(factories, sorted(dask_client.scheduler_info()["workers"]), strict=True))
    with DaskFederation(factories, workers=where, start_timeout=scaled(60)) as fed:
        # The timeout bounds the round whatever the load: "slow" answers only once released.
        fed.timeout = scaled(2.0)
        requests = {
            name: Message("handshake", {"protocol": PROTOCOL_VERSION, "task": "regression"})
            for name in fed.client_names
        }
        timed_out = "'slow' failed in round 1.*TimeoutError"
        try:
            assert set(fed.send_and_receive(requests, 0)) == {"fast", "slow"}
            with pytest.raises(ClientFailure, match=timed_out) as info:
                fed.send_and_receive(requests | {"slow": Message("round_a")}, 1)
            assert info.value.failed == ["slow"] and set(info.value.replies) == {"fast"}
        finally:
            release.touch()  # the actor's thread is free again for the next test


def test_empty_partitions_of_a_filtered_frame_make_no_client(dask_client: Client) -> None:
    # Was "Dask clients could not be built: '3': Client '3' has no rows; remove it from the
    # federation", which a caller of fit(ddf, dy) cannot do.
    X, y, _ = frame(10)
    order = np.argsort(X["age"].to_numpy(), kind="stable")
    X, y = X.iloc[order].reset_index(drop=True), y.iloc[order].reset_index(drop=True)
    dX, dy = dd.from_pandas(X, npartitions=4), dd.from_pandas(y, npartitions=4)
    keep = dX["age"] < 0  # about half the rows: the last partitions hold none
    fX, fy = dX[keep], dy[keep]
    sizes = [len(part) for part in fX.partitions]
    assert 0 in sizes and sum(sizes) > 0
    model = ff.FedForestRegressor(**PARAMS, random_state=2).fit(fX, fy)
    assert list(model.clients_) == [str(i) for i, size in enumerate(sizes) if size]
    rows = X["age"] < 0
    memory = ff.FedForestRegressor(**PARAMS, random_state=2)
    memory.fit(X[rows], y[rows], client_ids=np.repeat(np.arange(4), sizes))
    assert_same_forest(model, memory)
    by_worker = ff.FedForestRegressor(**PARAMS).fit(fX, fy, client_ids="worker")
    assert all(name.startswith("worker-") for name in by_worker.clients_)
    with pytest.raises(ValueError, match="X has no rows: all of its 4 partitions are empty"):
        ff.FedForestRegressor(**PARAMS).fit(dX[dX["age"] > 100], dy[dX["age"] > 100])


def test_a_cluster_without_workers_or_an_unknown_worker_fails_at_once(
    dask_client: Client,
) -> None:
    # Both used to wait out start_timeout (600 s by default) and raise an empty TimeoutError.
    X, y, _ = frame(8)
    factories = {"a": functools.partial(make_client, X, y.to_numpy(), "a")}
    with pytest.raises(ValueError, match=r"pinned to worker 'tcp://127.0.0.1:1'.*not in"):
        DaskFederation(factories, workers={"a": "tcp://127.0.0.1:1"}, start_timeout=scaled(60))
    with (
        loopback_cluster(0) as empty,
        Client(empty, timeout=scaled(60), set_as_default=False) as idle,
    ):
        start = time.monotonic()
        with pytest.raises(ValueError, match="has no workers"):
            DaskFederation(factories, client=idle, start_timeout=scaled(60))
        assert time.monotonic() - start < scaled(10)


def test_actors_not_built_in_start_timeout_are_named(dask_client: Client) -> None:
    # Was distributed's TimeoutError with no message (and start_timeout=0 the same).
    X, y, _ = frame(11)
    factories = {"slow": functools.partial(slow_to_build, X, y.to_numpy(), "slow")}
    with pytest.raises(TimeoutError, match=r"clients \['slow'\] were not built within"):
        DaskFederation(factories, start_timeout=0.2)
    with pytest.raises(ValueError, match="start_timeout must be positive"):
        DaskFederation(factories, start_timeout=0)


def test_a_closed_federation_says_so(dask_client: Client) -> None:
    X, y, _ = frame(9)
    fed = DaskFederation({"a": functools.partial(make_client, X, y.to_numpy(), "a")})
    keys = {future.key for future in fed._futures.values()}
    fed.close()
    # close() returns once the scheduler forgot the keys: its report of the cancellation
    # reached a client connected right after with its first message, which distributed's
    # Client asserts is alone (seen once at 13:47 on 2026-12-05, when close() did not wait).
    # The scheduler runs in this process (LocalCluster): read at once, as a connecting
    # client would meet it (a call to the scheduler would come after the cancellation).
    assert not keys & set(dask_client.cluster.scheduler.tasks)
    fed.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="DaskFederation is closed"):  # was StopIteration
        ff.FedForestRegressor(**PARAMS).fit_federated(fed)
    # The Dask client closed first: the fit said "the Dask worker holding client 'a' was
    # lost" and close() raised distributed's ClosedClientError.
    own = Client(dask_client.scheduler.address, timeout=scaled(60), set_as_default=False)
    fed = DaskFederation({"a": functools.partial(make_client, X, y.to_numpy(), "a")}, client=own)
    own.close()
    with pytest.raises(RuntimeError, match="Dask client was closed while fedforest was using"):
        ff.FedForestRegressor(**PARAMS).fit_federated(fed)
    fed.close()


def test_a_lost_worker_is_dropped_and_the_forest_equals_the_local_one(
    dask_client: Client,
) -> None:
    """The worker holding one client is killed at round 3 under on_client_failure="drop".

    The oracle: LocalFederation where that client fails from its fourth message on.
    """
    X, y, site = frame(8)
    workers = sorted(dask_client.scheduler_info()["workers"])
    names = ["site-a", "site-b", "site-c"]
    shards = {n: (X[site == n], y[site == n].to_numpy()) for n in names}
    factories = {n: functools.partial(make_client, *shards[n], n) for n in names}
    where = {"site-a": workers[0], "site-b": workers[0], "site-c": workers[1]}
    victim = dask_client.run(os.getpid, workers=[workers[1]])[workers[1]]
    params = {**PARAMS, "random_state": 4, "on_client_failure": "drop", "privacy": "secure"}

    class KillAtRound3(DaskFederation):
        def send_and_receive(
            self, requests: dict[str, Message], round_index: int
        ) -> dict[str, Message]:
            if round_index == 3:
                os.kill(victim, signal.SIGKILL)
                psutil.Process(victim).wait(timeout=scaled(30))
            return super().send_and_receive(requests, round_index)

    with KillAtRound3(factories, workers=where, timeout=scaled(120)) as fed:
        remote = ff.FedForestRegressor(**params).fit_federated(fed)
    assert remote.dropped_clients_ == [("site-c", 3)]

    class FailFrom3(ff.Client):
        seen = 0

        def handle(self, msg: Message) -> Message:
            self.seen += 1
            if self.seen > 3:
                raise ConnectionResetError("worker lost")
            return super().handle(msg)

    clients = [(FailFrom3 if n == "site-c" else ff.Client)(*shards[n], name=n) for n in names]
    local = ff.FedForestRegressor(**params).fit_federated(ff.LocalFederation(clients))
    assert local.dropped_clients_ == [("site-c", 3)]
    assert_same_forest(remote, local)
    # The nanny restarts the worker. Wait until the scheduler has let the dead one go and
    # the new one is running: counting two at once could count the dead one (it is listed
    # until the scheduler notices), and a later test's broadcast then reached one worker.
    deadline = time.monotonic() + scaled(60)
    while time.monotonic() < deadline:
        now = dask_client.scheduler_info()["workers"]
        if workers[1] not in now and len(now) == 2:
            break
        time.sleep(0.2)
    dask_client.wait_for_workers(2, timeout=scaled(60))
