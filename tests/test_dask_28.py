"""A Dask user's inputs that went wrong (session 28), on a real LocalCluster (2 workers).

Each test but the timeouts' failed before its fix: partitions of y that do not line up
with X's, a missing class or client label, one build error said once per partition,
``predict`` inside a closed Dask client's block, ``score`` with a missing target or
weight, mixed Dask / pandas inputs, a partition that cannot be predicted, client labels
beside a Dask Array, and a Client that is not the default. Oracles:
the rows in memory (``fit``'s, ``predict``'s and scikit-learn's ``score``'s own refusal of
the same rows) and Dask's own behaviour for any collection in the same state.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client

import fedforest as ff
from fedforest.transport.dask import DaskFederation
from tests._forests import assert_same_forest
from tests._loopback import dask_module_client, scaled

PARAMS: dict[str, Any] = {"n_estimators": 3, "max_depth": 3, "min_samples_leaf": 3}
N_ROWS = 300


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Client]:
    """Two single-threaded worker processes on 127.0.0.1, closed (and checked gone) after."""
    yield from dask_module_client(sys.modules[__name__])


def frame(seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    """Numeric features and a regression target, N_ROWS rows."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(N_ROWS, 3)), columns=["age", "bmi", "dose"])
    return X, pd.Series(2 * X["age"] + rng.normal(0, 0.3, N_ROWS), name="y")


def test_partitions_of_y_that_do_not_line_up_are_named(dask_client: Client) -> None:
    """X in 3 partitions of 100 rows, y in 3 of 50, 100 and 150. Before: each client
    failed to build with "y has shape (50,); expected (100,), one target per row of X (or
    (100, n_outputs) for multi-output y)", once per client, naming no partition."""
    X, y = frame(1)
    ddf = dd.from_pandas(X, npartitions=3)
    dy = dd.from_pandas(y, npartitions=3).repartition(divisions=[0, 50, 150, N_ROWS - 1])
    assert ddf.map_partitions(len).compute().tolist() == [100, 100, 100]
    said = "Partition 0 of y has 50 rows but partition 0 of X has 100"
    with pytest.raises(ValueError, match=said):
        ff.FedForestRegressor(**PARAMS).fit(ddf, dy)
    # Known chunks are refused before any compute (as before); unknown ones are counted.
    arr, target = ddf.to_dask_array(), dy.to_dask_array()
    assert np.isnan(arr.chunks[0][0])
    with pytest.raises(ValueError, match="Partition 0 of y has 50 rows"):
        ff.FedForestRegressor(**PARAMS).fit(arr, target)
    ids = dd.from_pandas(pd.Series(np.arange(N_ROWS) % 2), npartitions=3)
    ids = ids.repartition(divisions=[0, 100, 250, N_ROWS - 1])
    with pytest.raises(ValueError, match="Partition 1 of client_ids has 150 rows but partition 1"):
        ff.FedForestRegressor(**PARAMS).fit(ddf, dd.from_pandas(y, npartitions=3), client_ids=ids)


def test_a_missing_class_label_is_refused_as_in_memory_naming_its_partition(
    dask_client: Client,
) -> None:
    """A text label missing in the third partition (row 250). Before: NumPy's
    "TypeError: boolean value of NA is ambiguous" from the labels' np.unique on a worker."""
    X, y = frame(2)
    labels = pd.Series(np.where(y > 0, "high", "low"), name="lab").astype(object)
    labels[250] = None
    with pytest.raises(ValueError) as memory:
        ff.FedForestClassifier(**PARAMS).fit(X, labels)
    dy = dd.from_pandas(labels, npartitions=3)  # Dask makes the labels string[pyarrow]
    with pytest.raises(ValueError) as dask_error:
        ff.FedForestClassifier(**PARAMS).fit(dd.from_pandas(X, npartitions=3), dy)
    said, in_memory = str(dask_error.value), str(memory.value)
    assert said.split("(")[0] == in_memory.split("(")[0] == "Mix of label input types ", said
    assert said.endswith("never missing. (Partition 2 of y.)"), said
    assert in_memory.endswith("never missing.")
    # Text in one partition, numbers in another (a Dask Array of objects keeps them).
    mixed = np.where(y > 0, "high", "low").astype(object)
    mixed[200:] = np.where(y[200:] > 0, 1, 0)
    target = da.from_array(mixed, chunks=100)
    with pytest.raises(ValueError, match=r"Mix of label input types \(string and number\)"):
        ff.FedForestClassifier(**PARAMS).fit(da.from_array(X.to_numpy(), chunks=(100, 3)), target)


def test_a_missing_client_label_names_its_partition(dask_client: Client) -> None:
    """Row 205 (the third partition's row 5) has no client label. Before: "client_ids
    contains a missing value (<NA>, row 5, ...)", row 5 of a partition not named."""
    X, y = frame(3)
    sites = pd.Series(np.where(np.arange(N_ROWS) % 3 == 0, "north", "south"), dtype=object)
    sites[205] = None
    with pytest.raises(ValueError, match=r"row 205, 1 row\(s\)"):
        ff.FedForestRegressor(**PARAMS).fit(X, y, client_ids=sites)
    ddf, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    ids = dd.from_pandas(sites, npartitions=3)
    with pytest.raises(ValueError) as info:
        ff.FedForestRegressor(**PARAMS).fit(ddf, dy, client_ids=ids)
    said = str(info.value)
    assert said.startswith("client_ids contains a missing value (<NA>, row 5, 1 row(s) in all)")
    assert said.endswith("label. (Partition 2 of client_ids; rows counted within it.)"), said


def test_one_build_error_of_every_partition_is_said_once(dask_client: Client) -> None:
    """A datetime column in 3 partitions. Before: the same sentence three times, once per
    client (a hundred times for a hundred partitions), and ".." at its end."""
    X, y = frame(4)
    X["when"] = pd.date_range("2026-01-01", periods=N_ROWS, freq="h")
    ddf, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    with pytest.raises(ValueError) as info:
        ff.FedForestRegressor(**PARAMS).fit(ddf, dy)
    said = str(info.value)
    assert said.startswith("Dask clients could not be built: '0', '1', '2': column 'when' has")
    assert said.count("column 'when'") == 1 and not said.endswith(".."), said


def test_predict_in_a_closed_client_s_block_is_lazy_as_dask_is(dask_client: Client) -> None:
    """Inside the block of a Dask client that was closed, predict and score failed with
    "AttributeError: 'NoneType' object has no attribute 'scatter'". Now they build their
    graph as any collection does, and computing it meets Dask's own error there."""
    X, y = frame(5)
    model = ff.FedForestRegressor(**PARAMS, random_state=0).fit(X, y)
    ddf, dy = dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2)
    address = dask_client.scheduler.address
    with Client(address, set_as_default=False, timeout=scaled(60)) as other:
        with other.as_current():
            other.close()
            with pytest.raises(Exception) as dask_own:
                ddf["age"].sum().compute()
            pred = model.predict(ddf)
            assert isinstance(pred, da.Array)
            with pytest.raises(type(dask_own.value), match=str(dask_own.value)):
                pred.compute()
            with pytest.raises(type(dask_own.value)):
                model.score(ddf, dy)
    # The module's client is untouched: predictions on the workers as before.
    assert np.array_equal(model.predict(ddf).compute(), model.predict(X))


def test_timeouts_of_a_fit_on_collections_are_set_through_from_collections(
    dask_client: Client,
) -> None:
    """``fit`` on Dask collections takes no ``timeout``: docs/scale.md sends a user who
    needs another one to ``DaskFederation.from_collections(..., timeout=...)`` and
    ``fit_federated``, which must grow the same forest (text labels, "secure")."""
    X, y = frame(6)
    labels = pd.Series(np.where(y > 0, "high", "low"), name="lab")
    ddf, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(labels, npartitions=3)
    params = {**PARAMS, "random_state": 0, "privacy": "secure"}
    fitted = ff.FedForestClassifier(**params).fit(ddf, dy)
    wait = scaled(1200)
    with DaskFederation.from_collections(ddf, dy, timeout=wait, start_timeout=wait) as fed:
        assert fed.timeout == wait
        federated = ff.FedForestClassifier(**params).fit_federated(fed)
    assert list(federated.classes_) == list(fitted.classes_) == ["high", "low"]
    assert_same_forest(federated, fitted)


# scikit-learn casts the classifier's NaN labels before refusing them (in memory).
@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_score_refuses_a_missing_target_or_weight_as_scikit_learn_does(
    dask_client: Client, task: str
) -> None:
    """A NaN or infinite y or sample_weight at row 250 (partition 2). scikit-learn's score
    refuses each on the rows in memory. Before, on Dask: NaN (the regressor's y, an
    infinite weight), or a number (a NaN weight left its partition out; the classifier
    counted a NaN label as a wrong prediction)."""
    X, y = frame(7)
    if task == "classification":
        y = (y > 0).astype(np.float64)
        model: Any = ff.FedForestClassifier(**PARAMS, random_state=0).fit(X, y)
    else:
        model = ff.FedForestRegressor(**PARAMS, random_state=0).fit(X, y)
    weights = pd.Series(np.random.default_rng(7).uniform(0.5, 2.0, N_ROWS))
    ddf = dd.from_pandas(X, npartitions=3)
    for bad in (np.nan, np.inf):
        for target, weight, name in [
            (y.where(y.index != 250, bad), None, "y"),
            (y, weights.where(weights.index != 250, bad), "sample_weight"),
        ]:
            with pytest.raises(ValueError):
                model.score(X, target, sample_weight=weight)
            dweight = None if weight is None else dd.from_pandas(weight, npartitions=3)
            with pytest.raises(ValueError, match=f"{name} holds 1 missing or infinite value"):
                model.score(ddf, dd.from_pandas(target, npartitions=3), sample_weight=dweight)
    assert model.score(ddf, dd.from_pandas(y, npartitions=3)) == pytest.approx(model.score(X, y))


def test_mixed_inputs_say_which_library_and_a_column_name_says_how(dask_client: Client) -> None:
    """Before: "X is a DataFrame and y a Series: give both as Dask collections" for a Dask
    DataFrame and a pandas Series; client_ids="site" did not say to pass ddf["site"]."""
    X, y = frame(8)
    ddf = dd.from_pandas(X.assign(site=np.arange(N_ROWS) % 2), npartitions=3)
    with pytest.raises(ValueError, match="X is a dask DataFrame and y a pandas Series: "):
        ff.FedForestRegressor(**PARAMS).fit(ddf, y)
    dy = dd.from_pandas(y, npartitions=3)
    with pytest.raises(ValueError, match=r"client_ids=ddf\['site'\], and X=ddf.drop"):
        ff.FedForestRegressor(**PARAMS).fit(ddf, dy, client_ids="site")


def test_a_partition_that_cannot_be_predicted_is_named(dask_client: Client) -> None:
    """An infinity at row 250 (partition 2 of 3), in a DataFrame and in an Array. Before:
    scikit-learn's "Input X contains infinity ..." from one of the partitions, not named."""
    X, y = frame(9)
    model = ff.FedForestRegressor(**PARAMS, random_state=0).fit(X, y)
    broken = X.copy()
    broken.loc[250, "bmi"] = np.inf
    with pytest.raises(ValueError) as memory:
        model.predict(broken)
    for collection in (
        dd.from_pandas(broken, npartitions=3),
        da.from_array(broken.to_numpy(), chunks=(100, 3)),
    ):
        with pytest.raises(ValueError) as on_dask:
            with warnings.catch_warnings():  # an Array has no feature names: sklearn says so
                warnings.simplefilter("ignore", UserWarning)
                model.predict(collection).compute()
        assert str(on_dask.value) == f"{memory.value} (Partition 2 of X.)"


def test_client_labels_beside_a_dask_array_reach_their_own_rows(dask_client: Client) -> None:
    """A forest that splits on the client index predicts a Dask Array with client_ids a
    1-D Dask Array chunked as its rows. Before: map_blocks aligned the labels with X's
    columns, every block got all 300 labels: "client_ids has shape (300,); expected
    (100,)", known chunk sizes or not."""
    X, _ = frame(10)
    sites = np.repeat([0, 1, 2], N_ROWS // 3)
    y = X["age"].to_numpy() + 3.0 * sites
    params = {**PARAMS, "random_state": 0, "privacy": "none", "split_on_client": True}
    model = ff.FedForestRegressor(**params).fit(X, y, client_ids=sites)
    expected = model.predict(X, client_ids=sites)
    assert not np.array_equal(expected, model.predict(X, client_ids=sites[::-1]))
    frame_ = dd.from_pandas(X.assign(site=sites), npartitions=3)
    for lengths in (None, True):  # unknown chunk sizes, then counted
        rows = frame_[list(X.columns)].to_dask_array(lengths=lengths)
        ids = frame_["site"].to_dask_array(lengths=lengths)
        with warnings.catch_warnings():  # an Array has no feature names: sklearn says so
            warnings.simplefilter("ignore", UserWarning)
            assert np.array_equal(model.predict(rows, client_ids=ids).compute(), expected)
            leaves = model.apply(rows, client_ids=ids).compute()
        assert np.array_equal(leaves, model.apply(X, client_ids=sites))


def test_a_client_that_is_not_the_default_is_named_in_the_refusal(tmp_path: Path) -> None:
    """A Dask user with a Client made with set_as_default=False: fit found no client and
    said "start one first", though one was running. The refusal now says to fit inside
    ``with client.as_current():``, which this script then does (a fresh process: the
    module's own client is the default here)."""
    script = tmp_path / "fit.py"
    script.write_text(
        textwrap.dedent(
            """
            import dask.dataframe as dd, numpy as np, pandas as pd
            from distributed import Client
            import fedforest as ff
            from tests._loopback import loopback_cluster

            if __name__ == "__main__":
                X = pd.DataFrame(np.random.default_rng(0).normal(size=(200, 2)), columns=["a", "b"])
                ddf, dy = dd.from_pandas(X, npartitions=2), dd.from_pandas(X["a"], npartitions=2)
                model = ff.FedForestRegressor(n_estimators=2, max_depth=2, random_state=0)
                with loopback_cluster(1) as cluster, Client(cluster, set_as_default=False) as c:
                    try:
                        model.fit(ddf, dy)
                    except ValueError as exc:
                        print("REFUSED", exc)
                    with c.as_current():
                        print("FITTED", list(model.fit(ddf, dy).clients_))
            """
        )
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=scaled(300),
        check=True,
    )
    assert "REFUSED fedforest's Dask transport needs a distributed Client" in done.stdout
    assert "is used inside `with client.as_current():`" in done.stdout, done.stdout
    assert "FITTED ['0', '1']" in done.stdout, done.stdout
