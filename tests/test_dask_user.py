"""The Dask transport as a Dask user runs it, on a real LocalCluster (2 worker processes).

What a user naturally tries beyond ``fit`` / ``predict``: ``score`` on Dask collections,
rows held as futures, ``n_jobs`` on the workers, and a worker killed mid-fit with the
clients placed as Dask places partitions. Oracles: scikit-learn's metrics on the rows in
memory, the mask graph's documented rule (docs/privacy.md), the scheduler's task table.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

import cloudpickle
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import psutil
import pytest
from distributed import Client
from sklearn.metrics import accuracy_score, r2_score

import fedforest as ff
from fedforest.transport.dask import _estimators
from tests._forests import assert_same_forest
from tests._loopback import loopback_cluster, scaled

PARAMS: dict[str, Any] = {"n_estimators": 4, "max_depth": 3, "min_samples_leaf": 3}
N_ROWS = 400


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Client]:
    """Two single-threaded worker processes on 127.0.0.1, closed (and checked gone) after."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with (
        loopback_cluster(2) as cluster,
        Client(cluster, timeout=scaled(60)) as client,
    ):
        client.wait_for_workers(2, timeout=scaled(60))
        yield client
        pids = list(client.run(os.getpid).values())
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    deadline = time.monotonic() + scaled(10)
    while any(psutil.pid_exists(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if psutil.pid_exists(p)], "worker processes outlived the cluster"


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
