"""The Dask transport as a Dask user runs it, on a real LocalCluster (2 worker processes).

What a user naturally tries beyond ``fit`` / ``predict``: ``score`` on Dask collections,
rows held as futures, ``n_jobs`` on the workers, and a worker killed mid-fit with the
clients placed as Dask places partitions. Oracles: scikit-learn's metrics on the rows in
memory, the mask graph's documented rule (docs/privacy.md), the scheduler's task table.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
import warnings
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
from sklearn.metrics import accuracy_score, r2_score

import fedforest as ff
from fedforest.federated.federation import ClientFailure
from fedforest.federated.protocol import Message
from fedforest.transport.dask import DaskFederation, _estimators
from tests._forests import assert_same_forest
from tests._loopback import dask_module_client, scaled

PARAMS: dict[str, Any] = {"n_estimators": 4, "max_depth": 3, "min_samples_leaf": 3}
N_ROWS = 400


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Client]:
    """Two single-threaded worker processes on 127.0.0.1, closed (and checked gone) after."""
    yield from dask_module_client(sys.modules[__name__])


def frame(seed: int = 0) -> tuple[pd.DataFrame, pd.Series, pd.Series, pd.Series]:
    """Numeric features, a regression target, text labels and row weights."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(N_ROWS, 4)), columns=["age", "bmi", "dose", "score"])
    y = pd.Series(2 * X["age"] + np.sin(3 * X["bmi"]) + rng.normal(0, 0.3, N_ROWS), name="y")
    labels = pd.Series(np.where(y > 0.5, "high", np.where(y < -0.5, "low", "mid")), name="lab")
    weights = pd.Series(rng.uniform(0.0, 2.0, N_ROWS), name="w")
    return X, y, labels, weights


def make_client(X: pd.DataFrame, y: np.ndarray, name: str) -> ff.Client:
    return ff.Client(X, y, name=name)


def fedforest_tasks(client: Client) -> list[str]:
    """The scheduler's fedforest actor tasks still alive (none once a federation closed)."""

    def keys(dask_scheduler: Any) -> list[str]:
        return [str(k) for k in dask_scheduler.tasks if str(k).startswith("fedforest-client")]

    return list(client.run_on_scheduler(keys))


# ---------------------------------------------------------------------------- fit
@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_text_labels_a_category_and_oob_grow_the_forest_in_memory(
    dask_client: Client, privacy: str
) -> None:
    """A classifier of text labels with a categorical column and oob_score=True, one
    client per partition: the forest, probabilities and OOB score of the rows in memory
    with the partition number as client id."""
    X, _, labels, _ = frame(6)
    X["region"] = pd.Categorical(np.random.default_rng(6).choice(["n", "s", "e"], N_ROWS))
    dX, dl = dd.from_pandas(X, npartitions=3), dd.from_pandas(labels, npartitions=3)
    ids = np.repeat(np.arange(3), [len(part) for part in dX.partitions])
    params = {**PARAMS, "random_state": 5, "privacy": privacy, "oob_score": True}
    remote = ff.FedForestClassifier(**params).fit(dX, dl)
    memory = ff.FedForestClassifier(**params).fit(X, labels, client_ids=ids)
    assert_same_forest(remote, memory)
    assert list(remote.classes_) == ["high", "low", "mid"]
    assert np.array_equal(remote.predict_proba(dX).compute(), memory.predict_proba(X))
    assert remote.oob_score_ == memory.oob_score_
    # Per-row OOB predictions stay on the workers (docs/scale.md), as with fit_federated.
    assert not hasattr(remote, "oob_decision_function_")


# ---------------------------------------------------------------------------- score
def test_score_on_dask_is_scikit_learn_s_metric_on_the_rows(dask_client: Client) -> None:
    """Before: the regressor's score failed ("Cannot call len() on object with unknown
    chunk size") and the classifier's gathered every prediction into this process."""
    X, y, labels, w = frame(1)
    dX, dy, dl, dw = (dd.from_pandas(v, npartitions=3) for v in (X, y, labels, w))
    reg = ff.FedForestRegressor(**PARAMS, random_state=0).fit(X, y)
    pred = reg.predict(X)
    # Sums pooled per partition: scikit-learn's value up to the order of the additions.
    assert reg.score(dX, dy) == pytest.approx(r2_score(y, pred), rel=1e-12, abs=0)
    weighted = r2_score(y, pred, sample_weight=w)
    assert reg.score(dX, dy, sample_weight=dw) == pytest.approx(weighted, rel=1e-12, abs=0)
    aX = da.from_array(X.to_numpy(), chunks=(100, 4))
    ay = da.from_array(y.to_numpy(), chunks=100)
    with pytest.warns(UserWarning, match="valid feature names"):  # once, at the call
        on_array = reg.score(aX, ay)
    assert on_array == pytest.approx(r2_score(y, pred), rel=1e-12, abs=0)
    clf = ff.FedForestClassifier(**PARAMS, random_state=0).fit(X, labels)
    right = clf.predict(X)
    assert clf.score(dX, dl) == accuracy_score(labels, right)  # counts: exact
    with_w = accuracy_score(labels, right, sample_weight=w)
    assert clf.score(dX, dl, sample_weight=dw) == pytest.approx(with_w, rel=1e-12, abs=0)
    with pytest.raises(ValueError, match="y has 2 partitions but X has 3"):
        reg.score(dX, dd.from_pandas(y, npartitions=2))


# ---------------------------------------------------------------------------- futures
def test_futures_are_refused_with_the_collection_that_keeps_them_on_the_workers(
    dask_client: Client,
) -> None:
    """Before: fit and predict read a Future as rows in memory and failed in NumPy
    ("float() argument must be a string or a real number, not 'Future'")."""
    X, y, _, _ = frame(2)
    fx, fy = dask_client.scatter(X), dask_client.scatter(y)
    model = ff.FedForestRegressor(**PARAMS, random_state=0)
    for call in (
        lambda: model.fit(fx, fy),
        lambda: model.fit([fx], [fy]),
    ):
        with pytest.raises(ValueError, match="X is a distributed Future.*from_delayed"):
            call()
    # What the message says to do: the rows stay on the workers and train one client.
    dX = dd.from_delayed([fx], meta=X.iloc[:0])
    dy = dd.from_delayed([fy], meta=y.iloc[:0])
    model.fit(dX, dy)
    memory = ff.FedForestRegressor(**PARAMS, random_state=0).fit(X, y, client_ids=["0"] * N_ROWS)
    assert_same_forest(model, memory)
    for call in (lambda: model.predict(fx), lambda: model.score(fx, fy)):
        with pytest.raises(ValueError, match="X is a distributed Future"):
            call()


# ---------------------------------------------------------------------------- n_jobs
def predict_recording(part: pd.DataFrame, model: Any) -> tuple[list[str], Any]:
    """Run on a worker: the partition's prediction as ``predict`` on Dask runs it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _estimators._run(part, model, "predict")
    return [str(c.message) for c in caught], model.n_jobs


def test_prediction_on_the_workers_runs_one_thread_per_partition(dask_client: Client) -> None:
    """Before: a model of n_jobs=-1 made joblib warn on every partition, on the worker's
    stderr, that inside a Dask worker it sets n_jobs=1."""
    X, y, _, _ = frame(3)
    model = ff.FedForestRegressor(**PARAMS, random_state=0, n_jobs=-1).fit(X, y)
    shipped = _estimators._shipped(model)
    caught, n_jobs = dask_client.submit(predict_recording, X, shipped, pure=False).result()
    assert caught == [] and n_jobs == 1
    assert model.n_jobs == -1  # the user's estimator is left as it was
    pred = model.predict(dd.from_pandas(X, npartitions=2)).compute()
    assert np.array_equal(pred, model.predict(X))


# ---------------------------------------------------------------------------- lost worker
def kill_at_round(victim: int, at: int) -> type[DaskFederation]:
    """A DaskFederation that SIGKILLs the worker process ``victim`` before round ``at``."""

    class Killing(DaskFederation):
        def send_and_receive(
            self, requests: dict[str, Message], round_index: int
        ) -> dict[str, Message]:
            if round_index == at and psutil.pid_exists(victim):
                os.kill(victim, signal.SIGKILL)
                psutil.Process(victim).wait(timeout=scaled(30))
            return super().send_and_receive(requests, round_index)

    return Killing


def wait_for_restart(client: Client, dead: str) -> None:
    """Until the scheduler let the dead worker go and the nanny's new one runs."""
    deadline = time.monotonic() + scaled(60)
    while time.monotonic() < deadline:
        now = client.scheduler_info()["workers"]
        if dead not in now and len(now) == 2:
            break
        time.sleep(0.2)
    client.wait_for_workers(2, timeout=scaled(60))


def alternating(
    client: Client, privacy: str, on_failure: str, at: int, missing: bool = False
) -> tuple[Any, str]:
    """Clients a, c on the first worker, b, d on the second, as Dask places 4 partitions
    on 2 workers; the second worker is killed at round ``at``. The fit's error or None.
    ``missing``: a tenth of ``dose`` missing (a secure fit's known values' round first)."""
    X, y, _, _ = frame(4)
    if missing:
        X = X.copy()
        X.loc[X.index[::10], "dose"] = np.nan
    workers = sorted(client.scheduler_info()["workers"])
    names = ["a", "b", "c", "d"]
    shards = {n: (X.iloc[k::4], y.iloc[k::4].to_numpy()) for k, n in enumerate(names)}
    factories = {n: functools.partial(make_client, *shards[n], n) for n in names}
    where = {n: workers[k % 2] for k, n in enumerate(names)}
    victim = client.run(os.getpid, workers=[workers[1]])[workers[1]]
    params = {**PARAMS, "random_state": 0, "privacy": privacy, "on_client_failure": on_failure}
    error = None
    with kill_at_round(victim, at)(factories, workers=where, timeout=scaled(120)) as fed:
        try:
            ff.FedForestRegressor(**params).fit_federated(fed)
        except ClientFailure as exc:
            error = exc
    wait_for_restart(client, workers[1])
    return error, str(error)


def test_a_lost_worker_under_raise_names_its_clients_and_leaves_no_actor(
    dask_client: Client,
) -> None:
    error, text = alternating(dask_client, "none", "raise", 3)
    assert isinstance(error, ClientFailure)
    assert "Client 'b' failed in round 3" in text and "(also failed: 'd')" in text
    assert "Dask worker holding client 'b' was lost" in text
    assert fedforest_tasks(dask_client) == []


def test_a_lost_worker_of_two_opposite_secure_clients_is_dropped(dask_client: Client) -> None:
    """Under "secure" a lost worker drops clients b and d at once in the known values'
    round (round 1; a column with missing values), whose masks the survivors a, c then
    remove. Before: 4 clients formed a mask ring a-b-c-d-a, a and c shared no mask, so
    they refused to recover and the fit failed under on_client_failure="drop" too; now 4
    clients mask with every other (docs/privacy.md, "Secure aggregation"), and the fit
    trains on a and c. (It killed the worker in the coarse counts, round 2, which a secure
    fit no longer recovers: red team 18.)"""
    error, text = alternating(dask_client, "secure", "drop", 1, missing=True)
    assert error is None, text
    assert fedforest_tasks(dask_client) == []


def built_slowly(X: pd.DataFrame, y: np.ndarray, name: str, flag: str) -> ff.Client:
    """A factory that says it started (the file ``flag``), then takes a minute."""
    Path(flag).touch()
    time.sleep(60.0)
    return make_client(X, y, name)


def test_a_worker_lost_while_building_its_client_fails_at_once(
    dask_client: Client, tmp_path: Path
) -> None:
    """Before: the actor, pinned to an address that no worker has any more, waited out
    start_timeout (600 s by default) and the error was a TimeoutError."""
    X, y, _, _ = frame(5)
    workers = sorted(dask_client.scheduler_info()["workers"])
    victim = dask_client.run(os.getpid, workers=[workers[1]])[workers[1]]
    flag = str(tmp_path / "started")
    factories = {
        "a": functools.partial(make_client, X.iloc[::2], y.iloc[::2].to_numpy(), "a"),
        "b": functools.partial(built_slowly, X.iloc[1::2], y.iloc[1::2].to_numpy(), "b", flag),
    }

    def kill_when_started() -> None:
        deadline = time.monotonic() + scaled(120)
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_started, daemon=True)
    killer.start()
    where = {"a": workers[0], "b": workers[1]}
    with pytest.raises(ConnectionError, match=rf"worker {workers[1]} that must build client 'b'"):
        DaskFederation(factories, workers=where, start_timeout=scaled(300))
    killer.join()
    wait_for_restart(dask_client, workers[1])
    assert fedforest_tasks(dask_client) == []
