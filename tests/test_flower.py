"""Tests of the Flower transport and of the client-failure policy.

Fast tests drive the ServerApp's federation and the ClientApp in this process through an
in-memory Grid. The end-to-end tests start a real SuperLink and three SuperNodes on
127.0.0.1 (ports below the ephemeral range, one FLWR_HOME each, telemetry, update checks
and runtime dependency installation off), run the example app with ``flwr run``, and
compare the saved forest with the local simulation's; every process they start is killed
by its process group when the test ends, passed or failed.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from flwr.app import Context, RecordDict
from flwr.app import Message as FlowerMessage
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

import fedforest as ff
from fedforest.federated.federation import ClientFailure
from fedforest.federated.protocol import PROTOCOL_VERSION, Message
from fedforest.transport.flower import (
    FlowerFederation,
    RunSettings,
    client_from_node_config,
    read_client_data,
)
from fedforest.transport.flower import clientapp as clientapp_module
from fedforest.transport.flower._codec import (
    control_records,
    from_records,
    message_kind,
    pack_arrays,
    to_records,
    unpack_arrays,
)
from fedforest.transport.flower._deployment import flower_env, free_ports, listening
from fedforest.transport.flower._state import load_state, save_state
from fedforest.transport.flower.serverapp import parse_classes, train
from tests._forests import assert_same_forest
from tests._loopback import scaled

# Small forests with oob_score=True: some rows are in every bag (expected here).
pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "examples" / "flower"
SITES = ("site-a", "site-b", "site-c")
PARAMS: dict[str, Any] = {"n_estimators": 6, "max_depth": 2, "min_samples_leaf": 3}
SEED = 7


# ---------------------------------------------------------------------------- data
def write_site_files(folder: Path, task: str = "regression", text: bool = False) -> dict[str, Path]:
    """Three CSV files with different row counts and shifted features; ``text``: a text
    column ``ward`` too (a categorical feature: "cardio", "neuro", "onco")."""
    rng = np.random.default_rng(0)
    paths = {}
    for k, name in enumerate(SITES):
        n = 120 + 25 * k
        X = rng.normal(size=(n, 4)) + 0.4 * k
        signal_ = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + rng.normal(scale=0.2, size=n)
        frame = pd.DataFrame(X, columns=["age", "bmi", "dose", "score"])
        if text:
            frame["ward"] = rng.choice(["cardio", "neuro", "onco"], size=n)
            signal_ += 1.5 * (frame["ward"] == "neuro").to_numpy()
        frame["y"] = signal_ if task == "regression" else (signal_ > 1).astype(int)
        paths[name] = folder / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


def local_clients(paths: dict[str, Path]) -> list[ff.Client]:
    """The clients the SuperNodes build, in this process, from the same files."""
    return [
        client_from_node_config({"data-path": str(p), "target": "y", "name": name})
        for name, p in paths.items()
    ]


class FailingClient(ff.Client):
    """A client whose process dies at its ``fail_at``-th message (0 = the handshake)."""

    def __init__(self, X: Any, y: Any, name: str, fail_at: int) -> None:
        super().__init__(X, y, name)
        self.fail_at = fail_at
        self.seen = 0

    def handle(self, msg: Message) -> Message:
        self.seen += 1
        if self.seen - 1 >= self.fail_at:
            raise ConnectionResetError(f"site {self.name} went down")
        return super().handle(msg)


def dying(client: ff.Client, fail_at: int) -> FailingClient:
    X = pd.DataFrame(client.X, columns=client.feature_names)
    return FailingClient(X, client.y_raw, client.name, fail_at)


def assert_dropped_like_local(dep: Deployment, output: str, name: str, fail_at: int) -> None:
    """The run's saved forest dropped ``name`` at round ``fail_at`` and equals the local
    transport's with a client that fails at the same round (forest and ledger)."""
    model_path = dep.root / "model.ffm"
    assert model_path.exists(), f"no model written\n{output}\n{dep.logs()}"
    remote = ff.load(model_path)
    assert remote.dropped_clients_ == [(name, fail_at)]
    clients = failing(local_clients(dep.paths), name, fail_at)
    local = ff.FedForestRegressor(**PARAMS, random_state=SEED, on_client_failure="drop")
    local.fit_federated(ff.LocalFederation(clients))
    assert_same_forest(remote, local)
    assert remote.communication_.to_dict() == local.communication_.to_dict()


def failing(clients: list[ff.Client], name: str, fail_at: int) -> list[ff.Client]:
    return [dying(c, fail_at) if c.name == name else c for c in clients]


@pytest.fixture
def site_files(tmp_path: Path) -> dict[str, Path]:
    return write_site_files(tmp_path)


@pytest.fixture(autouse=True)
def task_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a ServerApp process knows about itself (Flower sets it before ``main``)."""
    for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, name, value)


# ---------------------------------------------------------------------------- codec
def test_pack_arrays_round_trip_keeps_dtype_shape_and_values() -> None:
    arrays = {
        "f": np.arange(12, dtype=np.float64).reshape(3, 4),
        "i": np.array([-1, 5, 7], dtype=np.int32),
        "u": np.array([1, 2, 3], dtype=np.uint8),
        "b": np.array([True, False]),
        "empty": np.zeros((0, 5)),
        "scalar": np.array(3.5),
        "big": np.array([1, 2], dtype=">i8"),
    }
    layout, buffer = pack_arrays(arrays)
    assert buffer.dtype == np.uint8 and buffer.ndim == 1
    assert all(entry["offset"] % 8 == 0 for entry in layout)
    out = unpack_arrays(json.loads(json.dumps(layout)), buffer, "test")
    assert list(out) == list(arrays)
    for name, arr in arrays.items():  # another byte order arrives in this machine's
        native = arr.dtype.newbyteorder("=")
        assert out[name].dtype == native and out[name].shape == arr.shape
        assert np.array_equal(out[name], arr)
    assert out["big"].dtype.isnative


def test_message_travels_as_one_config_record_and_one_array() -> None:
    msg = Message(
        "round_a",
        {"setup": {"seed": 3, "classes": None}, "n_prev_slots": 0},
        {f"a{k}": np.arange(k + 1, dtype=np.float64) for k in range(20)},
    )
    content = to_records(msg)
    assert len(content.array_records) == 1
    assert len(next(iter(content.array_records.values()))) == 1
    back = from_records(content, "server")
    assert back.kind == msg.kind and back.header == msg.header
    assert all(np.array_equal(back.arrays[k], v) for k, v in msg.arrays.items())
    assert from_records(to_records(Message("hello", {"x": 1})), "s").arrays == {}


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"name": "x", "dtype": "|O", "shape": [1], "offset": 0}, "numeric dtype"),
        ({"name": "x", "dtype": "<f8", "shape": [100], "offset": 0}, "does not fit"),
        ({"name": "x", "dtype": "<f8", "shape": [-1], "offset": 0}, "non-negative"),
        ({"name": "x", "dtype": "<f8", "shape": [1], "offset": 4}, "does not fit"),
        ({"name": "x"}, "malformed"),
    ],
)
def test_unpack_refuses_a_layout_that_does_not_match_the_buffer(
    entry: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        unpack_arrays([entry], np.zeros(16, dtype=np.uint8), "site-x")


def test_pack_refuses_object_arrays() -> None:
    with pytest.raises(TypeError, match="only numeric"):
        pack_arrays({"x": np.array(["a"], dtype=object)})


def test_control_records_are_an_empty_message_of_that_kind() -> None:
    content = control_records("finish")
    assert content.config_records == to_records(Message("finish")).config_records
    assert message_kind(content) == "finish" and not content.array_records
    back = from_records(content, "site-a")
    assert back.kind == "finish" and back.header == {} and back.arrays == {}
    assert message_kind(RecordDict()) is None


def test_clientapp_modules_import_the_client_side_on_use() -> None:
    """A SuperNode starts a process per message: the ClientApp module, its codec and its
    state import fedforest's client side (numba, pandas, the kernels) inside the handlers,
    so the end-of-fit message answers without it (once the packages above load lazily)."""
    import ast

    folder = REPO / "fedforest" / "transport" / "flower"
    for name in ("clientapp.py", "_codec.py", "_state.py"):
        tree = ast.parse((folder / name).read_text(encoding="utf-8"))
        eager = [
            node.module
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.level > 1  # fedforest, not flower/
        ]
        assert eager == [], f"{name} imports {eager} at module level"


# ---------------------------------------------------------------------------- client state
def test_client_state_survives_a_new_process(site_files: dict[str, Path]) -> None:
    """A client rebuilt from its file and the saved state answers like the live one."""
    config = {"data-path": str(site_files["site-a"]), "target": "y", "name": "site-a"}
    live = client_from_node_config(config)
    slots = np.array([0, 1], dtype=np.int64)
    setup = {
        "classes": None, "first_tree": 0, "n_trees": 1, "seed": 1, "bootstrap": True,
        "n_bins": 8, "binning": "quantile", "clients": ["site-a"],
    }  # fmt: skip
    live.handle(Message("handshake", {"protocol": PROTOCOL_VERSION, "task": "regression"}))
    live.handle(
        Message(
            "round_a",
            {"setup": setup, "n_prev_slots": 0},
            {"slot_tree_off": slots, "pair_off": np.array([0, 2]), "pair_feat": np.array([0, 2])},
        )
    )
    state = RecordDict()
    save_state(live, state, seq=2)
    restored = client_from_node_config(config)
    assert load_state(restored, state) == 2
    cand = np.array([0.0, 0.5, -0.5, 1.0])
    request = Message("round_b", {}, {"cand_off": np.array([0, 2, 4]), "cand": cand})
    a, b = live.handle(request), restored.handle(request)
    assert a.arrays.keys() == b.arrays.keys() and "left_counts" in a.arrays
    for key in a.arrays:
        assert np.array_equal(a.arrays[key], b.arrays[key])


def test_client_state_from_other_data_is_refused(site_files: dict[str, Path]) -> None:
    a = client_from_node_config({"data-path": str(site_files["site-a"]), "target": "y"})
    b = client_from_node_config({"data-path": str(site_files["site-b"]), "target": "y"})
    state = RecordDict()
    save_state(a, state, seq=1)
    with pytest.raises(ValueError, match="data file changed"):
        load_state(b, state)


def test_node_config_errors_name_the_fix(tmp_path: Path, site_files: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="data-path"):
        client_from_node_config({"target": "y"})
    with pytest.raises(ValueError, match="is not a file"):
        client_from_node_config({"data-path": str(tmp_path / "nope.csv"), "target": "y"})
    with pytest.raises(ValueError, match="no target column 'label'"):
        client_from_node_config({"data-path": str(site_files["site-a"]), "target": "label"})


def test_parquet_and_csv_give_the_same_client(tmp_path: Path, site_files: dict[str, Path]) -> None:
    pq = tmp_path / "a.parquet"
    pd.read_csv(site_files["site-a"]).to_parquet(pq)
    Xc, yc = read_client_data(site_files["site-a"], "y")
    Xp, yp = read_client_data(pq, "y")
    pd.testing.assert_frame_equal(Xc, Xp)
    pd.testing.assert_series_equal(yc, yp)


# ---------------------------------------------------------------------------- run config
def test_run_settings_map_dashes_none_and_default(tmp_path: Path) -> None:
    settings = RunSettings.from_run_config(
        {
            "task": "classification",
            "n-estimators": 7,
            "max-depth": "none",
            "criterion": "default",
            "seed": 3,
            "on-client-failure": "drop",
            "model-path": str(tmp_path / "m.ffm"),
            "metrics-path": "",
            "min-nodes": 2,
            "round-timeout": scaled(30.0),
        }
    )
    model = settings.estimator()
    assert isinstance(model, ff.FedForestClassifier)
    assert (model.n_estimators, model.max_depth, model.random_state) == (7, None, 3)
    assert model.criterion == "gini" and model.on_client_failure == "drop"
    assert settings.metrics_path is None and settings.min_nodes == 2
    assert model.privacy == "secure"  # the default
    paper = RunSettings.from_run_config(
        {"privacy": "none", "min-aggregate-rows": 20, "model-path": str(tmp_path / "m.ffm")}
    ).estimator()
    assert paper.privacy == "none" and paper.min_aggregate_rows == 20  # "none": a string here


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"n-trees": 5}, r"Unknown run config key\(s\) \['n-trees'\]"),
        ({"model-path": "model.ffm"}, "relative"),
        ({"model-path": "/nonexistent-dir/model.ffm"}, "does not exist"),
        ({"task": "ranking"}, "task='ranking'"),
    ],
)
def test_run_settings_errors_name_the_key(config: dict[str, Any], match: str) -> None:
    base = {"model-path": "/tmp/m.ffm", **config}
    with pytest.raises(ValueError, match=match):
        RunSettings.from_run_config(base)


def test_run_settings_invalid_hyperparameter_fails_before_training(tmp_path: Path) -> None:
    settings = RunSettings.from_run_config(
        {"n-estimators": 0, "model-path": str(tmp_path / "m.ffm")}
    )
    with pytest.raises(ValueError, match="n_estimators"):
        settings.estimator()


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("sick, well", ["sick", "well"]),
        ("0,1,2", [0, 1, 2]),
        ("1.5,2", [1.5, 2.0]),
        ("True,false", [True, False]),
        ("1,2,x", ["1", "2", "x"]),  # not all numbers: text, as read_csv reads such a column
        ('["1", "2"]', ["1", "2"]),  # JSON: text that reads as numbers (a Parquet column)
        ("[0, 1.5, true]", [0, 1.5, True]),
    ],
)
def test_run_config_classes_are_typed_like_the_files(text: str, labels: list[Any]) -> None:
    parsed = parse_classes(text)
    assert parsed == labels and [type(v) for v in parsed] == [type(v) for v in labels]


def test_run_config_declares_classes_and_categories(tmp_path: Path) -> None:
    config = {"task": "classification", "model-path": str(tmp_path / "m.ffm")}
    model = RunSettings.from_run_config(
        {**config, "classes": "well,sick", "categories": "region=north, south;city=a,b"}
    ).estimator()
    assert model.classes == ["well", "sick"]
    assert model.categories == {"region": ["north", "south"], "city": ["a", "b"]}
    dtype = RunSettings.from_run_config({**config, "categories": "from_dtype"}).estimator()
    assert dtype.categories == "from_dtype"
    undeclared = RunSettings.from_run_config({**config, "classes": "default"}).estimator()
    assert undeclared.classes is None and undeclared.categories is None


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"classes": "a,b"}, r"classes='a,b': class labels go with task = \"classification\""),
        ({"task": "classification", "classes": 3}, r"classes=3: give the labels as one string"),
        ({"task": "classification", "classes": "a,,b"}, "classes='a,,b'.*non-empty and distinct"),
        ({"task": "classification", "classes": "1,01"}, "classes='1,01'.*not distinct"),
        ({"task": "classification", "classes": '["a", '}, "not a JSON list"),
        ({"task": "classification", "classes": '["a", "a"]'}, "a JSON list of distinct labels"),
        ({"task": "classification", "classes": "[[1]]"}, "a JSON list of distinct labels"),
        ({"categories": "region"}, r"categories='region': 'region' is not categories = "),
        ({"categories": "r=a;r=b"}, "categories='r=a;r=b': column 'r' is given twice"),
        ({"categories": "r=a,a"}, "levels of column 'r' must be non-empty and distinct"),
    ],
)
def test_run_config_declarations_errors_name_the_key(config: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RunSettings.from_run_config({"model-path": "/tmp/m.ffm", **config}).estimator()


# ---------------------------------------------------------------------------- in-memory grid
class MemoryGrid(Grid):
    """A Grid whose nodes run the ClientApp in this process when their replies are pulled.

    ``fresh_process=True`` forgets the live clients before every message, as a SuperNode
    that starts the ClientApp in a new process does; ``dead`` nodes never answer.
    """

    def __init__(self, paths: dict[str, Path], fresh_process: bool = True) -> None:
        self.contexts = {
            1000 + k: Context(
                run_id=1,
                node_id=1000 + k,
                node_config={"data-path": str(p), "target": "y", "name": name},
                state=RecordDict(),
                run_config={},
            )
            for k, (name, p) in enumerate(paths.items())
        }
        self.fresh_process = fresh_process
        self.dead: set[int] = set()
        self.inbox: dict[str, FlowerMessage] = {}
        self.pushed: list[FlowerMessage] = []

    def set_run(self, run: Any) -> None:  # pragma: no cover - not used
        pass

    @property
    def run(self) -> Any:  # pragma: no cover - not used
        return None

    def create_message(self, *args: Any, **kwargs: Any) -> FlowerMessage:  # pragma: no cover
        raise NotImplementedError

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[FlowerMessage]) -> Iterable[str]:
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            self.inbox[msg.metadata.message_id] = msg
            self.pushed.append(msg)
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[FlowerMessage]:
        replies = []
        for mid in message_ids:
            msg = self.inbox.get(mid)
            if msg is None or msg.metadata.dst_node_id in self.dead:
                continue
            del self.inbox[mid]
            if self.fresh_process:
                clientapp_module._LIVE.clear()
            replies.append(
                clientapp_module.app(message=msg, context=self.contexts[msg.metadata.dst_node_id])
            )
        return replies

    def send_and_receive(
        self, messages: Iterable[FlowerMessage], *, timeout: float | None = None
    ) -> Iterable[FlowerMessage]:  # pragma: no cover - FlowerFederation pushes and pulls
        return self.pull_messages(self.push_messages(messages))


@pytest.mark.parametrize("fresh_process", [True, False])
def test_flower_federation_gives_the_local_forest(
    site_files: dict[str, Path], fresh_process: bool
) -> None:
    grid = MemoryGrid(site_files, fresh_process=fresh_process)
    fed = FlowerFederation(grid, min_nodes=3, round_timeout=5.0, poll_interval=0.001)
    assert fed.client_names == list(SITES)
    remote = ff.FedForestRegressor(**PARAMS, oob_score=True, random_state=SEED)
    remote.fit_federated(fed)
    local = ff.FedForestRegressor(**PARAMS, oob_score=True, random_state=SEED)
    local.fit_federated(ff.LocalFederation(local_clients(site_files)))
    assert_same_forest(remote, local)
    assert remote.oob_score_ == local.oob_score_
    assert remote.communication_.to_dict() == local.communication_.to_dict()
    # Exactly one Flower message per node per round, each with at most one array.
    rounds = [m for m in grid.pushed if m.metadata.message_type == "train.fedforest"]
    assert len(rounds) == 3 * remote.communication_.rounds
    assert all(len(m.content.array_records) <= 1 for m in grid.pushed)
    fed.close()
    assert all(len(c.state) == 0 for c in grid.contexts.values())
    assert fed.discovery_seconds > 0 and fed.finish_seconds is not None


def test_flower_federation_one_round_grid_in_fresh_processes(site_files: dict[str, Path]) -> None:
    """binning="global": the client's bins of the grid are a cache, remade in a new process."""
    grid = MemoryGrid(site_files, fresh_process=True)
    fed = FlowerFederation(grid, min_nodes=3, round_timeout=5.0, poll_interval=0.001)
    kw = {**PARAMS, "privacy": "none", "binning": "global", "random_state": SEED}
    remote = ff.FedForestRegressor(**kw).fit_federated(fed)
    local = ff.FedForestRegressor(**kw).fit_federated(ff.LocalFederation(local_clients(site_files)))
    assert_same_forest(remote, local)
    assert remote.communication_.to_dict() == local.communication_.to_dict()
    fed.close()


def test_flower_federation_classifier_with_string_labels(tmp_path: Path) -> None:
    paths = write_site_files(tmp_path, task="classification")
    for p in paths.values():
        frame = pd.read_csv(p)
        frame["y"] = np.where(frame["y"] == 1, "sick", "well")
        frame.to_csv(p, index=False)
    remote = ff.FedForestClassifier(**PARAMS, random_state=SEED)
    remote.fit_federated(FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001))
    local = ff.FedForestClassifier(**PARAMS, random_state=SEED)
    local.fit_federated(ff.LocalFederation(local_clients(paths)))
    assert_same_forest(remote, local)
    assert list(remote.classes_) == ["sick", "well"]
    # fit's forest on the same rows: its clients hold the class indices, which the ClientApp's
    # bootstrap secret reads too (it read the labels' text: another forest until 2026-12-05)
    frames = [pd.read_csv(p) for p in paths.values()]
    rows = pd.concat(frames, ignore_index=True)
    ids = np.repeat(list(paths), [len(f) for f in frames])
    fit = ff.FedForestClassifier(**PARAMS, random_state=SEED)
    assert_same_forest(remote, fit.fit(rows.drop(columns="y"), rows["y"], client_ids=ids))


def test_flower_clientapp_reads_labels_as_fit_reads_the_frame(tmp_path: Path) -> None:
    # A Parquet file's nullable Int64 target: fit reads it as floats, as scikit-learn; the
    # ClientApp passed y.to_numpy() to its Client, which gave int classes.
    paths = write_site_files(tmp_path, task="classification")
    frames = []
    for name, p in list(paths.items()):
        frame = pd.read_csv(p)
        frame["y"] = frame["y"].astype("Int64")
        paths[name] = p.with_suffix(".parquet")
        frame.to_parquet(paths[name])
        frames.append(frame)
    remote = ff.FedForestClassifier(**PARAMS, random_state=SEED)
    remote.fit_federated(FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001))
    rows = pd.concat(frames, ignore_index=True)
    ids = np.repeat(list(paths), [len(f) for f in frames])
    fit = ff.FedForestClassifier(**PARAMS, random_state=SEED)
    fit.fit(rows.drop(columns="y"), rows["y"], client_ids=ids)
    assert remote.classes_.dtype == fit.classes_.dtype == np.float64
    assert remote.classes_.tolist() == fit.classes_.tolist()
    local = ff.FedForestClassifier(**PARAMS, random_state=SEED)
    assert_same_forest(remote, local.fit_federated(ff.LocalFederation(local_clients(paths))))


@pytest.mark.parametrize("levels", [None, {"ward": ["cardio", "neuro", "onco", "surgery"]}])
@pytest.mark.parametrize("fresh_process", [True, False])
def test_flower_federation_text_column_in_fresh_processes(
    tmp_path: Path, fresh_process: bool, levels: dict[str, list[str]] | None
) -> None:
    """A text column under "secure", its levels declared or not: a ClientApp process per
    message rebuilds the client from its file, whose column holds the levels, not the
    set-up's codes; the state carries the codes (before, the server refused the first
    Round B: "Round B's category groups count 280 rows ... Round A's ... give 85")."""
    paths = write_site_files(tmp_path, task="classification", text=True)
    kw: dict[str, Any] = {**PARAMS, "random_state": SEED, "categories": levels}
    grid = MemoryGrid(paths, fresh_process=fresh_process)
    remote = ff.FedForestClassifier(**kw)
    remote.fit_federated(FlowerFederation(grid, min_nodes=3, poll_interval=0.001))
    local = ff.FedForestClassifier(**kw).fit_federated(ff.LocalFederation(local_clients(paths)))
    assert_same_forest(remote, local)
    assert remote.categories_ == local.categories_
    ward = list(remote.feature_names_in_).index("ward")
    assert any((t.feature == ward).any() for t in remote.trees_)  # the text column splits


@pytest.mark.parametrize("declared", [False, True])
def test_flower_federation_rare_level_in_fresh_processes(tmp_path: Path, declared: bool) -> None:
    """A level one row holds (declared, or undeclared and so the missing category's) is
    merged by the set-up's ``code_map`` (``server/rare_codes.py``): a ClientApp process
    per message counts it from its file and keeps the merged codes in its state, so the
    forest is the local one."""
    paths = write_site_files(tmp_path, task="classification", text=True)
    frame = pd.read_csv(paths[SITES[0]])
    frame.loc[0, "ward"] = "zz"
    frame.to_csv(paths[SITES[0]], index=False)
    levels = {"ward": ["cardio", "neuro", "onco", "zz"]} if declared else None
    kw: dict[str, Any] = {**PARAMS, "random_state": SEED, "categories": levels}
    grid = MemoryGrid(paths, fresh_process=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the client's own warning of its rare level
        remote = ff.FedForestClassifier(**kw)
        remote.fit_federated(FlowerFederation(grid, min_nodes=3, poll_interval=0.001))
        local = ff.FedForestClassifier(**kw)
        local.fit_federated(ff.LocalFederation(local_clients(paths)))
    assert_same_forest(remote, local)
    assert any("code_map" in str(m.content) for m in grid.pushed)


def test_flower_federation_split_on_client_in_fresh_processes(site_files: dict[str, Path]) -> None:
    """split_on_client reads each client's index (set by the set-up) as a last column; a
    ClientApp process per message rebuilt the client with -1 there, and the forest was not
    the local one (tree 3's features) before the state carried the index."""
    kw: dict[str, Any] = {**PARAMS, "random_state": SEED, "split_on_client": True}
    kw["privacy"] = "none"  # split_on_client is refused under "secure"
    grid = MemoryGrid(site_files, fresh_process=True)
    remote = ff.FedForestRegressor(**kw)
    remote.fit_federated(FlowerFederation(grid, min_nodes=3, poll_interval=0.001))
    local = ff.FedForestRegressor(**kw).fit_federated(ff.LocalFederation(local_clients(site_files)))
    assert_same_forest(remote, local)
    assert any((t.feature == remote.n_features_in_).any() for t in remote.trees_)  # H splits


def test_run_config_classes_declare_a_rare_label(tmp_path: Path) -> None:
    """Under "secure" a label one row holds stops the fit, and the error names the run
    config's classes key; declared there, the deployment grows the local forest."""
    paths = write_site_files(tmp_path, task="classification")
    for name, p in paths.items():
        frame = pd.read_csv(p)
        frame["y"] = np.where(frame["y"] == 1, "sick", "well")
        if name == "site-a":
            frame.loc[0, "y"] = "rare"  # one row: under min_aggregate_rows, named by no one
        frame.to_csv(p, index=False)
    config = {"task": "classification", "model-path": str(tmp_path / "m.ffm"), "seed": SEED}
    config.update({k.replace("_", "-"): v for k, v in PARAMS.items()})
    fed = FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001)
    with pytest.raises(ValueError, match=r"classes=\[\.\.\.\].*run config: classes = \"LABEL"):
        train(RunSettings.from_run_config(config).estimator(), fed)
    settings = RunSettings.from_run_config({**config, "classes": "well,sick,rare"})
    remote = settings.estimator()
    train(remote, FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001))
    local = ff.FedForestClassifier(**PARAMS, random_state=SEED, classes=["well", "sick", "rare"])
    local.fit_federated(ff.LocalFederation(local_clients(paths)))
    assert_same_forest(remote, local)
    assert list(remote.classes_) == ["rare", "sick", "well"]


def test_run_config_declarations_under_dp(tmp_path: Path) -> None:
    """Under "dp" the labels and a text column's levels are declared in the run config;
    integer labels read as integers (text "0" and "1" would not be the files' labels)."""
    paths = write_site_files(tmp_path, task="classification")
    for k, p in enumerate(paths.values()):
        frame = pd.read_csv(p)
        frame["region"] = np.where(np.arange(len(frame)) % 2 == k % 2, "north", "south")
        frame.to_csv(p, index=False)
    config = {"task": "classification", "model-path": str(tmp_path / "m.ffm"), "seed": SEED}
    config.update({k.replace("_", "-"): v for k, v in PARAMS.items()})
    config.update({"privacy": "dp", "epsilon": 8.0})

    def fit(**more: Any) -> Any:
        model = RunSettings.from_run_config({**config, **more}).estimator()
        train(model, FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001))
        return model

    with pytest.raises(ValueError, match=r"classes=\[\.\.\.\].*run config: classes = "):
        fit()
    with pytest.raises(ValueError, match=r"levels of .*'region'.*run config: categories = "):
        fit(classes="0,1")
    with pytest.raises(ValueError, match=r"needs a privacy budget.*run config: epsilon;"):
        fit(classes="1,0", categories="region=south,north", epsilon="default")
    model = fit(classes="1,0", categories="region=south,north")
    assert model.classes_.tolist() == [0, 1] and model.classes_.dtype.kind == "i"
    assert model.privacy_report_["epsilon"] == pytest.approx(8.0)


def test_run_config_dp_colluders_and_a_sites_floor(tmp_path: Path) -> None:
    """The run config's ``dp-colluders`` reaches every client's noise (the report states
    it); a SuperNode whose node config asks ``min-dp-colluders = 2`` refuses a run at 1,
    naming itself and both numbers, and takes part at 2. A floor that is no whole number
    is refused, naming the key."""
    paths = write_site_files(tmp_path)
    config = {"model-path": str(tmp_path / "m.ffm"), "seed": SEED, "privacy": "dp"}
    config.update({k.replace("_", "-"): v for k, v in PARAMS.items()})
    config["epsilon"] = 8.0
    grid = MemoryGrid(paths)
    floored = SITES[2]
    grid.contexts[1002].node_config["min-dp-colluders"] = 2

    def fit(t: int) -> Any:
        model = RunSettings.from_run_config({**config, "dp-colluders": t}).estimator()
        train(model, FlowerFederation(grid, min_nodes=3, poll_interval=0.001))
        return model

    with pytest.raises(ValueError, match=rf"'{floored}'.* against 1 colluding .* at least 2"):
        fit(1)
    assert fit(2).privacy_report_["colluders"] == 2
    node = {**grid.contexts[1002].node_config, "min-dp-colluders": 1.5}
    with pytest.raises(ValueError, match=r"min-dp-colluders=1\.5: a whole number >= 0"):
        client_from_node_config(node)


def test_flower_federation_silent_node_is_a_client_failure(site_files: dict[str, Path]) -> None:
    grid = MemoryGrid(site_files)
    fed = FlowerFederation(grid, min_nodes=3, round_timeout=0.2, poll_interval=0.01)
    grid.dead.add(fed.node_id("site-b"))
    model = ff.FedForestRegressor(**PARAMS, random_state=SEED)
    with pytest.raises(ClientFailure, match=r"Client 'site-b' failed in round 0 \(handshake\)"):
        model.fit_federated(fed)
    assert not hasattr(model, "trees_")


def test_flower_federation_invalid_data_is_a_value_error(tmp_path: Path) -> None:
    paths = write_site_files(tmp_path)
    frame = pd.read_csv(paths["site-c"]).rename(columns={"dose": "dosage"})
    frame.to_csv(paths["site-c"], index=False)
    fed = FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001)
    with pytest.raises(ValueError, match="'site-c'.*dosage"):
        ff.FedForestRegressor(**PARAMS, on_client_failure="drop").fit_federated(fed)


def test_flower_federation_discovery_leaves_out_silent_nodes(
    site_files: dict[str, Path],
) -> None:
    grid = MemoryGrid(site_files)
    grid.dead.add(1002)
    fed = FlowerFederation(grid, min_nodes=2, discovery_timeout=0.2, poll_interval=0.01)
    assert fed.client_names == ["site-a", "site-b"]
    with pytest.raises(RuntimeError, match="Only 2 SuperNode"):
        FlowerFederation(grid, min_nodes=3, discovery_timeout=0.2, poll_interval=0.01)


def test_flower_federation_refuses_two_nodes_with_one_name(site_files: dict[str, Path]) -> None:
    grid = MemoryGrid(site_files)
    grid.contexts[1001].node_config["name"] = "site-a"
    with pytest.raises(ValueError, match="both hold client 'site-a'"):
        FlowerFederation(grid, poll_interval=0.001)


# ---------------------------------------------------------------------------- failure policy
@pytest.mark.parametrize("fail_at", [1, 2, 4])
def test_local_failure_raises_by_default_naming_client_and_round(
    site_files: dict[str, Path], fail_at: int
) -> None:
    fed = ff.LocalFederation(failing(local_clients(site_files), "site-b", fail_at))
    model = ff.FedForestRegressor(**PARAMS, random_state=SEED)
    with pytest.raises(ClientFailure, match=f"Client 'site-b' failed in round {fail_at} ") as err:
        model.fit_federated(fed)
    assert err.value.failed == ["site-b"] and set(err.value.replies) == {"site-a", "site-c"}
    assert not hasattr(model, "trees_") and not hasattr(model, "dropped_clients_")


def test_local_drop_at_handshake_equals_training_without_the_client(
    site_files: dict[str, Path],
) -> None:
    clients = local_clients(site_files)
    dropped = ff.FedForestRegressor(**PARAMS, random_state=SEED, on_client_failure="drop")
    dropped.fit_federated(ff.LocalFederation(failing(clients, "site-c", 0)))
    without = ff.FedForestRegressor(**PARAMS, random_state=SEED)
    without.fit_federated(ff.LocalFederation(clients[:2]))
    assert dropped.dropped_clients_ == [("site-c", 0)]
    assert_same_forest(dropped, without)


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4])
def test_local_drop_mid_training_goes_on_with_the_others(
    site_files: dict[str, Path], fail_at: int, tmp_path: Path
) -> None:
    """Rounds 1-4 are Round A, Round B, Round A, Round B: both drop paths are covered.

    The paper's protocol's round numbering; ``tests/test_secure.py`` covers drops under
    ``privacy="secure"`` (where the survivors also remove the dropped client's masks).
    """
    clients = local_clients(site_files)
    model = ff.FedForestRegressor(
        **PARAMS, random_state=SEED, oob_score=True, on_client_failure="drop", privacy="none"
    )
    model.fit_federated(ff.LocalFederation(failing(clients, "site-b", fail_at)))
    assert model.dropped_clients_ == [("site-b", fail_at)]
    per_round = model.communication_.per_round
    assert (per_round["n_clients"][:fail_at] == 3).all()
    assert (per_round["n_clients"][fail_at + 1 :] == 2).all()
    full = ff.FedForestRegressor(**PARAMS, random_state=SEED, privacy="none").fit_federated(
        ff.LocalFederation(clients)
    )
    for tree, ref in zip(model.trees_, full.trees_, strict=True):
        # Levels grown before the failure are the full federation's.
        if fail_at > 2:
            assert tree.feature[0] == ref.feature[0] and tree.threshold[0] == ref.threshold[0]
        leaves = tree.children_left == -1
        assert np.all(np.isfinite(tree.value[leaves])) and np.all(tree.n_node_samples > 0)
    X, _ = read_client_data(site_files["site-a"], "y")
    assert np.all(np.isfinite(model.predict(X)))
    model.save(tmp_path / "m.ffm")
    assert ff.load(tmp_path / "m.ffm").dropped_clients_ == [("site-b", fail_at)]


def test_local_drop_of_every_client_still_raises(site_files: dict[str, Path]) -> None:
    clients: list[ff.Client] = [dying(c, 1) for c in local_clients(site_files)]
    model = ff.FedForestRegressor(**PARAMS, on_client_failure="drop")
    with pytest.raises(ClientFailure, match="also failed"):
        model.fit_federated(ff.LocalFederation(clients))


def test_invalid_data_is_not_dropped(site_files: dict[str, Path]) -> None:
    a, b, c = local_clients(site_files)
    odd = ff.Client(pd.DataFrame(c.X[:, :3], columns=c.feature_names[:3]), c.y_raw, "site-c")
    model = ff.FedForestRegressor(**PARAMS, on_client_failure="drop")
    with pytest.raises(ValueError, match="'site-c' has 3 features"):
        model.fit_federated(ff.LocalFederation([a, b, odd]))


def test_on_client_failure_is_validated() -> None:
    with pytest.raises(ValueError, match="on_client_failure"):
        ff.FedForestRegressor(on_client_failure="retry").fit(np.ones((4, 1)), np.ones(4))


def test_dropped_clients_is_empty_without_failure(site_files: dict[str, Path]) -> None:
    model = ff.FedForestRegressor(**PARAMS).fit_federated(
        ff.LocalFederation(local_clients(site_files))
    )
    assert model.dropped_clients_ == []


# ---------------------------------------------------------------------------- real deployment
class Deployment:
    """A SuperLink and SuperNodes on 127.0.0.1, each process in its own process group.

    ``isolation="worker"``: each SuperNode runs with ``--isolation process`` and a
    ``fedforest flower-worker`` (its own process group, key ``"<name>-worker"``) serves its
    ClientApp tasks, instead of Flower's SuperExec and a process per message.
    """

    def __init__(
        self, root: Path, tls: bool, paths: dict[str, Path], isolation: str = "subprocess"
    ) -> None:
        root.mkdir()
        self.root = root
        self.tls = tls
        self.isolation = isolation
        self.paths = paths
        self.port, *self.node_ports = free_ports(1 + len(SITES))
        self.procs: dict[str, subprocess.Popen[Any]] = {}
        #: Each listening process's arguments ("{port}" for its port), home and port.
        self.listeners: dict[str, tuple[list[str], Path, int]] = {}
        self.certs = _make_certificates(root / "certs") if tls else {}
        self.cli_home = root / "cli-home"
        self.cli_home.mkdir()

    def env(self, home: Path) -> dict[str, str]:
        return flower_env(home, REPO)

    def _spawn(self, key: str, args: list[str], home: Path) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{key}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            args,
            env=self.env(home),
            cwd=self.root,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs[key] = proc
        return proc

    def _listen(self, key: str, args: list[str], home: Path, port: int) -> None:
        """Spawn ``key`` with ``{port}`` in ``args`` made ``port``; ``listening`` waits."""
        self.listeners[key] = (args, home, port)
        self._spawn(key, [a.replace("{port}", str(port)) for a in args], home)

    def listening(self, key: str, tls: bool = False) -> int:
        """The port ``key`` listens on, once it does; started again on another port (four
        times at most) while its port was taken."""
        args, home, port = self.listeners[key]

        def restart(new_port: int) -> subprocess.Popen[Any]:
            self.kill(key)
            self._listen(key, args, home, new_port)
            return self.procs[key]

        log = self.root / f"{key}.log"
        try:
            port, _ = listening(self.procs[key], port, log, restart, tls=tls, timeout=scaled(60))
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}:\n{self.logs()}") from exc
        return port

    def start_superlink(self) -> None:
        args = [
            "flower-superlink",
            "--port",
            "{port}",
            "--disable-runtime-dependency-installation",
        ]
        if self.tls:
            args += [
                "--ssl-ca-certfile", self.certs["ca"],
                "--ssl-certfile", self.certs["server_cert"],
                "--ssl-keyfile", self.certs["server_key"],
                "--enable-supernode-auth",
            ]  # fmt: skip
        else:
            args.append("--insecure")
        self._listen("superlink", args, self.root / "superlink-home", self.port)
        self.port = self.listening("superlink", self.tls)
        connection = f'root-certificates = "{self.certs["ca"]}"' if self.tls else "insecure = true"
        (self.cli_home / "config.toml").write_text(
            '[superlink]\ndefault = "test"\n\n[superlink.test]\n'
            f'address = "127.0.0.1:{self.port}"\n{connection}\n'
        )

    def start_node(self, name: str, data: Path, port: int, register: bool = True) -> None:
        """A SuperNode on ``data``; with TLS, its key is registered first unless told not.

        ``node_listening`` waits until it listens (and starts its worker, if any)."""
        args = [
            "flower-supernode",
            "--superlink", f"127.0.0.1:{self.port}",
            "--port", "{port}",
            "--node-config", f'data-path="{data}" target="y" name="{name}"',
        ]  # fmt: skip
        if self.tls:
            key = _make_node_key(self.root / "keys", name)
            if register:
                self.flwr("supernode", "register", str(key.with_suffix(".pub")), "test")
            else:
                args += ["--max-retries", "1", "--max-wait-time", "10"]
            args += [
                "--root-certificates",
                self.certs["ca"],
                "--auth-supernode-private-key",
                str(key),
            ]
        else:
            args.append("--insecure")
        if self.isolation == "worker":
            args += ["--isolation", "process"]
        self._listen(name, args, self.root / f"{name}-home", port)

    def node_listening(self, name: str) -> None:
        """Wait until SuperNode ``name``'s runtime API listens; then start its worker."""
        port = self.listening(name)  # served over HTTP, with or without TLS to the SuperLink
        if self.isolation == "worker":
            worker = [
                sys.executable, "-m", "fedforest", "flower-worker", "--insecure",
                "--runtime-api-address", f"127.0.0.1:{port}",
            ]  # fmt: skip
            self._spawn(f"{name}-worker", worker, self.root / f"{name}-home")

    def flwr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["flwr", *args],
            env=self.env(self.cli_home),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )

    def run_app(
        self, config: dict[str, Any], app: Path = APP, log_name: str = "run.log"
    ) -> subprocess.Popen[str]:
        """``flwr run --stream`` of ``app`` (the example app); its output goes to run.log."""
        overrides = " ".join(f"{k}={json.dumps(v)}" for k, v in config.items())
        self.run_log = self.root / log_name
        log = open(self.run_log, "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            ["flwr", "run", str(app), "test", "--stream", "--run-config", overrides],
            env=self.env(self.cli_home),
            cwd=self.root,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        log.close()
        self.procs["flwr-run"] = proc
        return proc

    def kill(self, key: str) -> None:
        """SIGKILL a process group (a SuperNode with its SuperExec and ClientApp; its worker)."""
        if f"{key}-worker" in self.procs:
            self.kill(f"{key}-worker")
        proc = self.procs.pop(key)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def stop(self) -> None:
        """Terminate every process group this deployment started, then kill what is left."""
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        for key in list(self.procs):
            if key not in self.procs:  # a worker killed with its SuperNode
                continue
            proc = self.procs[key]
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            self.kill(key)

    def logs(self) -> str:
        return "\n".join(
            f"===== {p.name}\n{p.read_text(errors='replace')[-4000:]}"
            for p in sorted(self.root.glob("*.log"))
        )


def _make_certificates(folder: Path) -> dict[str, str]:
    """A CA and a server certificate for 127.0.0.1 / localhost, signed by it."""
    folder.mkdir()
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedforest test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = {
        "ca": ca.public_bytes(serialization.Encoding.PEM),
        "server_cert": server.public_bytes(serialization.Encoding.PEM),
        "server_key": key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return {name: str(folder / name) for name in files}


def _make_node_key(folder: Path, name: str) -> Path:
    """A SuperNode's authentication key pair (EC P-384, OpenSSH format)."""
    folder.mkdir(exist_ok=True)
    key = ec.generate_private_key(ec.SECP384R1())
    private = folder / name
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    private.chmod(0o600)
    private.with_suffix(".pub").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
    )
    return private


@pytest.fixture
def deploy(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Deployment]]:
    """Start a SuperLink and three SuperNodes; everything is torn down at the end.

    Under pytest-xdist the deployments of this session run one at a time (a file lock in
    the session's temporary root): three SuperNodes per deployment are enough for two
    cores, and a round that waits for CPU must not look like a dead node.
    """
    started: list[Deployment] = []

    def start(tls: bool, isolation: str = "subprocess", **data: Any) -> Deployment:
        paths = write_site_files(tmp_path, **data)  # data: write_site_files's task and text
        dep = Deployment(tmp_path / "deployment", tls, paths, isolation)
        started.append(dep)
        dep.start_superlink()
        for (name, path), port in zip(dep.paths.items(), dep.node_ports, strict=True):
            dep.start_node(name, path, port)
        for name in dep.paths:  # started together, waited for one by one
            dep.node_listening(name)
        return dep

    with contextlib.ExitStack() as stack:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            lock = stack.enter_context(
                open(tmp_path_factory.getbasetemp().parent / "flower-e2e.lock", "w")
            )
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield start
        finally:
            for dep in started:
                dep.stop()


def _run_config(dep: Deployment, **extra: Any) -> dict[str, Any]:
    return {
        "n-estimators": PARAMS["n_estimators"],
        "max-depth": PARAMS["max_depth"],
        "min-samples-leaf": PARAMS["min_samples_leaf"],
        "seed": SEED,
        "model-path": str(dep.root / "model.ffm"),
        "metrics-path": str(dep.root / "metrics.json"),
        "min-nodes": 3,
        "discovery-timeout": scaled(120.0),
        **extra,
    }


def _wait(proc: subprocess.Popen[str], dep: Deployment, timeout: float) -> str:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"flwr run did not finish in {timeout} s\n{dep.logs()}")
    return dep.run_log.read_text(errors="replace")


def _wait_for_line(path: Path, text: str, proc: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path.name}")


def test_flower_deployment_with_tls_and_node_auth_equals_local(
    deploy: Callable[..., Deployment],
) -> None:
    """A classifier on files with a text column, its labels and levels declared in the run
    config (docs/flower.md: ``classes``, ``categories``; each with one value no file holds):
    the deployment's forest, classes and categories are the local transport's."""
    dep = deploy(True, task="classification", text=True)
    declared = {"classes": "0,1,2", "categories": "ward=cardio,neuro,onco,surgery"}
    config = {"round-timeout": 300.0, "task": "classification", **declared}
    run = dep.run_app(_run_config(dep, **config))
    # A SuperNode whose key was not registered is turned away (and never joins the run).
    intruder = dep.root / "intruder.csv"
    intruder.write_text(dep.paths["site-a"].read_text())
    dep.start_node("intruder", intruder, free_ports(1)[0], register=False)
    assert dep.procs["intruder"].wait(timeout=scaled(120)) != 0
    assert "Failed to initialize the connection" in (dep.root / "intruder.log").read_text()
    output = _wait(run, dep, timeout=scaled(600))
    assert "running on https://127.0.0.1" in (dep.root / "superlink.log").read_text()
    model_path = dep.root / "model.ffm"
    assert model_path.exists(), f"no model written\n{output}\n{dep.logs()}"
    remote = ff.load(model_path)
    levels = {"ward": ["cardio", "neuro", "onco", "surgery"]}
    local = ff.FedForestClassifier(
        **PARAMS, random_state=SEED, classes=[0, 1, 2], categories=levels
    )
    local.fit_federated(ff.LocalFederation(local_clients(dep.paths)))
    assert_same_forest(remote, local)
    assert remote.communication_.to_dict() == local.communication_.to_dict()
    assert remote.classes_.tolist() == local.classes_.tolist() == [0, 1, 2]  # typed as the files
    assert remote.classes_.dtype == local.classes_.dtype and remote.classes_.dtype.kind == "i"
    assert remote.categories_ == local.categories_
    assert remote.categories_[list(remote.feature_names_in_).index("ward")][:4] == levels["ward"]
    rows = pd.read_csv(dep.paths["site-b"]).drop(columns="y")
    assert np.array_equal(remote.predict_proba(rows), local.predict_proba(rows))
    metrics = json.loads((dep.root / "metrics.json").read_text())
    assert metrics["clients"] == list(SITES) and metrics["dropped_clients"] == []
    assert len(metrics["round_seconds"]) == remote.communication_.rounds
    assert 0 < metrics["finish_seconds"] < metrics["fit_seconds"]
    assert "fedforest: model written" in output


@pytest.mark.parametrize(("policy", "kill_at", "kind"), [("raise", 1, "grid"), ("drop", 5, "")])
def test_flower_deployment_survives_or_reports_a_killed_supernode(
    deploy: Callable[[bool], Deployment], policy: str, kill_at: int, kind: str
) -> None:
    """Under privacy="secure" (the default) rounds 1-2 are the grid rounds, 3-4 the root's
    Round A and B, round 5 Round A of level 1: the survivors' masks there cannot be removed
    without reading sums below the roots, so that level's nodes stay leaves and the fit goes
    on without the client; the forest equals the local transport's with the same drop."""
    dep = deploy(False)
    run = dep.run_app(
        _run_config(dep, **{"on-client-failure": policy, "round-timeout": scaled(45.0)})
    )
    # Kill site-c (SuperNode, SuperExec and ClientApp) as the round's message reaches it.
    _wait_for_line(dep.root / "site-c.log", f", ROUND {kill_at}]", run, timeout=scaled(300))
    dep.kill("site-c")
    output = _wait(run, dep, timeout=scaled(600))
    if policy == "raise":
        assert f"Client 'site-c' failed in round {kill_at} ({kind})" in output, dep.logs()
        # Flower reports a killed node by its missing heartbeats or by the round's
        # time-to-live, whichever comes first (with a long round timeout, the heartbeats).
        reasons = ("time-to-live", "no reply within", "stopped sending heartbeats")
        assert any(reason in output for reason in reasons), output
        assert run.returncode != 0 or "ClientFailure" in output
        assert not [p.name for p in dep.root.iterdir() if "model" in p.name or "metrics" in p.name]
        return
    assert_dropped_like_local(dep, output, "site-c", kill_at)
