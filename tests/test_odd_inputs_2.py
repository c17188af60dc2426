"""Odd inputs, second round (docs/sklearn.md, "Inputs a user brings"; docs/flower.md).

Each test failed on main at fa3fe7f: a NumPy traceback after a whole warm fit grew (y of
another number of outputs), a client blamed for an invalid reply for its datetime labels,
complex targets cut to their real part with a NumPy warning, ``classes_`` of ``[0, 1]`` for
nullable labels on Dask where ``fit`` gives floats, and a SuperNode's file refused without
its name (or, for a missing target, as "Mix of label input types").
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import Client, FedForestClassifier, FedForestRegressor, LocalFederation
from fedforest.datasets.files import read_client_data
from fedforest.federated.client_errors import error_text
from fedforest.tree.arrays import Tree
from tests._loopback import loopback_cluster, scaled
from tests.test_privacy import RecordingFederation
from tests.test_privacy_errors import quoted_values

#: A client's refusal in the handshake, its name said once (before, twice: "Client 'a'
#: failed in round 0 (handshake): ValueError: Client 'a': ...").
ONCE = r"failed in round 0 \(handshake\): ValueError: "

PRIVACY = ["secure", "none"]


def _data(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(seed).normal(size=(n, 3))
    return X, X[:, 0] + 0.5 * X[:, 1]


def _kw(privacy: str, **extra: Any) -> dict[str, Any]:
    return dict(n_estimators=3, max_depth=3, random_state=0, privacy=privacy, **extra)


def _clients(X: np.ndarray, y: Any) -> list[Client]:
    half = X.shape[0] // 2
    return [Client(X[:half], y[:half], "a"), Client(X[half:], y[half:], "b")]


def assert_same_forest(a: Any, b: Any) -> None:
    assert len(a.trees_) == len(b.trees_)
    for ta, tb in zip(a.trees_, b.trees_, strict=True):
        for name in (*Tree.ARRAYS, *Tree.SET_ARRAYS):
            x, y = getattr(ta, name), getattr(tb, name)
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name


# ------------------------------------------------------------------ warm_start
@pytest.mark.parametrize("privacy", PRIVACY)
@pytest.mark.parametrize("path", ["fit", "fit_federated"])
def test_warm_start_with_y_of_other_outputs_is_refused_before_any_tree(
    privacy: str, path: str
) -> None:
    # Before: the new trees grew, then NumPy's "all the input array dimensions except for
    # the concatenation axis must match exactly" came out of the forest's packing.
    X, y = _data()
    ids = np.repeat(["a", "b"], len(y) // 2)
    model = FedForestRegressor(**_kw(privacy, warm_start=True))
    if path == "fit":
        model.fit(X, y, client_ids=ids)
    else:
        model.fit_federated(_clients(X, y))
    before = model.predict(X)
    Y2 = np.c_[y, X[:, 2]]
    model.set_params(n_estimators=5)
    with pytest.raises(ValueError, match=r"fitted on y of 1 output\(s\), but the clients' y has 2"):
        if path == "fit":
            model.fit(X, Y2, client_ids=ids)
        else:
            model.fit_federated(_clients(X, Y2))
    assert len(model.estimators_) == 3
    np.testing.assert_array_equal(model.predict(X), before)
    # The other way round, from two outputs to one.
    two = FedForestRegressor(**_kw(privacy, warm_start=True)).fit(X, Y2, client_ids=ids)
    two.set_params(n_estimators=5)
    with pytest.raises(ValueError, match=r"fitted on y of 2 output\(s\), but the clients' y has 1"):
        two.fit(X, y, client_ids=ids)
    # The same outputs still add trees.
    two.fit(X, Y2, client_ids=ids)
    assert len(two.estimators_) == 5


# ------------------------------------------------------------------ y's columns at each client
class Tampering(Client):
    """A real client whose handshake reply's ``target_names`` is replaced (a hostile one)."""

    def __init__(self, *args: Any, tamper: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tamper = tamper

    def handle(self, msg: Any) -> Any:
        reply = super().handle(msg)
        if msg.kind == "handshake":
            reply.header["target_names"] = self.tamper
        return reply


@pytest.mark.parametrize("privacy", PRIVACY)
def test_clients_y_columns_in_another_order_are_refused(privacy: str) -> None:
    # Before: the outputs were summed by position, so client b's "t2" was added to client
    # a's "t1": a forest fitted, silently mixing the two targets.
    X, y = _data()
    Y = pd.DataFrame({"t1": y, "t2": X[:, 2]})
    clients = [Client(X[:60], Y[:60], "a"), Client(X[60:], Y[60:][["t2", "t1"]], "b")]
    server = RecordingFederation(LocalFederation(clients))
    with pytest.raises(ValueError, match=r"Client 'b''s y has the columns \['t2', 't1'\] but"):
        FedForestRegressor(**_kw(privacy)).fit_federated(server)
    # What the recording server got: the names (as a DataFrame's feature names), no value.
    headers = {name: reply.header for name, reply in server.rounds[0][1].items()}
    assert headers["a"]["target_names"] == ["t1", "t2"]
    assert headers["b"]["target_names"] == ["t2", "t1"]
    assert quoted_values(json.dumps(headers), np.c_[X, Y]) == []
    # The same order: the forest of the same rows given as arrays.
    named = FedForestRegressor(**_kw(privacy)).fit_federated(_clients(X, Y))
    arrays = FedForestRegressor(**_kw(privacy)).fit_federated(_clients(X, Y.to_numpy()))
    assert_same_forest(named, arrays)
    # Columns without string names, or a name twice, are taken by position, as arrays.
    for columns in ([0, 1], ["t", "t"]):
        clients = _clients(X, Y.set_axis(columns, axis=1))
        assert all(c.target_names is None for c in clients)


@pytest.mark.parametrize("tamper", [["t1"], ["t1", "t1"], "t1,t2", [1, 2]])
def test_a_bad_target_names_field_is_an_invalid_reply(tamper: Any) -> None:
    X, y = _data()
    Y = pd.DataFrame({"t1": y, "t2": X[:, 2]})
    clients = [Client(X[:60], Y[:60], "a"), Tampering(X[60:], Y[60:], "b", tamper=tamper)]
    with pytest.raises(ValueError, match=r"Client 'b'.*'target_names'.*2 distinct strings"):
        FedForestRegressor(**_kw("secure")).fit_federated(clients)


# ------------------------------------------------------------------ label dtypes
DATES = np.array(["2020-01-01", "2021-06-30"], dtype="datetime64[ns]")


@pytest.mark.parametrize("privacy", PRIVACY)
@pytest.mark.parametrize(
    ("labels", "match"),
    [
        (DATES, rf"Client 'a' {ONCE}y has dtype datetime64\[ns\]; a class label under fit_"),
        (DATES - DATES[0], rf"Client 'a' {ONCE}y has dtype timedelta64\[ns\]"),
        (np.array([0j, 1 + 0j]), rf"Client 'a' {ONCE}Complex data not supported in y"),
        (np.array([b"no", b"yes"]), rf"Client 'a' {ONCE}y has dtype \|S3"),
    ],
)
def test_a_clients_labels_of_another_dtype_are_its_own_error(
    privacy: str, labels: np.ndarray, match: str
) -> None:
    # Before: the labels reached the handshake, and the server refused the reply as
    # invalid ("header field 'labels' holds datetime.datetime(...)"), as from a hostile client.
    X, _ = _data()
    y = labels[(X[:, 0] > 0).astype(int)]
    with pytest.raises(ValueError, match=match):
        FedForestClassifier(**_kw(privacy)).fit_federated(_clients(X, y))


def test_fit_takes_datetime_labels_as_scikit_learn() -> None:
    # fit codes the labels before any client sees them: scikit-learn's classes_, dtype too.
    X, _ = _data()
    y = DATES[(X[:, 0] > 0).astype(int)]
    ids = np.repeat(["a", "b"], len(y) // 2)
    model = FedForestClassifier(**_kw("secure")).fit(X, y, client_ids=ids)
    reference = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert model.classes_.dtype == reference.classes_.dtype
    np.testing.assert_array_equal(model.classes_, reference.classes_)
    assert set(model.predict(X).tolist()) <= set(DATES.tolist())


@pytest.mark.parametrize("privacy", PRIVACY)
def test_complex_regression_targets_are_refused_as_scikit_learn(privacy: str) -> None:
    # Before: a client cast them to floats, dropping the imaginary part (a ComplexWarning).
    X, y = _data()
    with pytest.raises(ValueError, match="Complex data not supported"):
        FedForestRegressor(**_kw(privacy)).fit(X, y + 1j, client_ids=np.repeat([0, 1], 60))
    with pytest.raises(ValueError, match=rf"Client 'a' {ONCE}Complex data not supported in y"):
        FedForestRegressor(**_kw(privacy)).fit_federated(_clients(X, y + 1j))


# ------------------------------------------------------------------ numbers written as text
MESSY_CSV = "a,dec,code,y\n" + "\n".join(
    f'{i / 10},"{i % 7},5",{i % 3},{(i % 7) / 2}' for i in range(60)
)


def test_text_that_reads_as_numbers_warns_naming_the_column() -> None:
    # Before: a decimal-comma column of pd.read_csv split as 7 categories without a word
    # (scikit-learn refuses it: "could not convert string to float: '0,5'"), and " 3 " as
    # text where scikit-learn reads 3.
    frame = pd.read_csv(io.StringIO(MESSY_CSV), dtype={"code": str})
    y = frame.pop("y")
    frame["padded"] = [f" {v} " for v in frame["code"]]
    kw = _kw("none")
    with pytest.warns(UserWarning, match=r"^X: column\(s\) \['dec', 'padded'\] hold text") as w:
        model = FedForestRegressor(**kw).fit(frame, y)
    assert len(w) == 1 and "decimal=','" in str(w[0].message)
    # A thousands separator too (the shipped heart-failure CSV's platelets, "265,000").
    with pytest.warns(UserWarning, match=r"^X: column\(s\) \['platelets'\]"):
        Xp = pd.DataFrame({"platelets": ["265,000", "263,358", "162,000"] * 20, "a": y})
        FedForestRegressor(**kw).fit(Xp, y)
    assert sorted(model.categories_) == [1, 2, 3]  # still categorical: the forest unchanged
    # Declared categorical (or plain digits, "code"), nothing to say.
    declared = FedForestRegressor(**kw, categorical_features=["dec", "padded"]).fit(frame, y)
    assert_same_forest(declared, model)
    with pytest.warns(UserWarning, match=r"^Client 'a': column\(s\) \['dec', 'padded'\]"):
        Client(frame, y, "a")


# ------------------------------------------------------------------ files (Flower, the CLI)
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("kind", ["Float64", "Int64", "str"])
def test_a_file_whose_target_has_missing_values_is_named(
    tmp_path: Path, suffix: str, kind: str
) -> None:
    # Before: read, then refused at the handshake without the file ("Client 's1': y
    # contains NaN", or for text labels "Mix of label input types (string and number)").
    X, y = _data(40)
    target = {"Float64": y, "Int64": (y > 0).astype(int), "str": np.where(y > 0, "up", "down")}
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["y"] = pd.array(target[kind], dtype=kind if kind != "str" else object)
    frame.loc[[3, 7], "y"] = None
    path = tmp_path / f"site-a{suffix}"
    frame.to_parquet(path) if suffix == ".parquet" else frame.to_csv(path, index=False)
    with pytest.raises(ValueError) as info:
        read_client_data(path, "y")
    text = str(info.value)
    assert text.startswith(repr(str(path))) and "target column 'y' is missing in some rows" in text
    assert not any(ch.isdigit() for ch in text[len(repr(str(path))) :])  # no row, no count
    assert error_text(info.value, "loading its data", log=False) == text  # what a node sends


def test_a_supernodes_file_refused_by_its_client_names_the_file(tmp_path: Path) -> None:
    pytest.importorskip("flwr")
    from fedforest.transport.flower import client_from_node_config

    X, y = _data(40)
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(
        visit=pd.date_range("2024-01-01", periods=40), y=y
    )
    path = tmp_path / "site-a.parquet"
    frame.to_parquet(path)
    config = {"data-path": str(path), "target": "y", "name": "site-a"}
    with pytest.raises(ValueError) as info:
        client_from_node_config(config)
    text = str(info.value)
    assert text.startswith(repr(str(path)))
    assert "Client 'site-a': column 'visit' has dtype datetime64" in text
    assert error_text(info.value, "loading its data", log=False) == text  # sent as it is
    # Without the column, the same file makes the client.
    frame.drop(columns="visit").to_parquet(path)
    assert client_from_node_config(config).n_samples == 40


# ------------------------------------------------------------------ Dask
@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    """One worker process on 127.0.0.1 (the test's functions travel by value)."""
    cloudpickle = pytest.importorskip("cloudpickle")
    distributed = pytest.importorskip("distributed")
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    timeout = scaled(60)
    with (
        loopback_cluster(1) as cluster,
        distributed.Client(cluster, timeout=timeout) as client,
    ):
        client.wait_for_workers(1, timeout=timeout)
        yield client
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.mark.parametrize("dtype", ["Int64", "boolean"])
def test_nullable_labels_on_dask_give_the_classes_of_rows_in_memory(
    dask_client: Any, dtype: str
) -> None:
    # Before: classes_ [0, 1] (or [False, True]) on Dask, [0.0, 1.0] in memory and in
    # scikit-learn, which read pandas' nullable labels as floats.
    dd = pytest.importorskip("dask.dataframe")
    X, y = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    labels = pd.Series(pd.array(y > 0, dtype=dtype), name="y")
    site = pd.Series(np.repeat(["a", "b"], 60), name="site")
    dX, dy, dsite = (dd.from_pandas(v, npartitions=2) for v in (frame, labels, site))
    on_dask = FedForestClassifier(**_kw("secure")).fit(dX, dy, client_ids=dsite)
    memory = FedForestClassifier(**_kw("secure")).fit(frame, labels, client_ids=site)
    assert memory.classes_.dtype == np.float64
    assert on_dask.classes_.dtype == memory.classes_.dtype
    np.testing.assert_array_equal(on_dask.classes_, memory.classes_)
    assert_same_forest(on_dask, memory)
    np.testing.assert_array_equal(on_dask.predict(dX).compute(), memory.predict(frame))
