"""Small frictions session 28's reviewers noticed; each test failed before its fix.

A Dask client closed during ``fit`` on Dask collections (a real LocalCluster of two
workers, as tests/test_dask_28.py); a column mixing numbers and text; a class_weight
preset under warm_start (scikit-learn's warning).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from typing import Any

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client

import fedforest as ff
from tests._loopback import dask_module_client, scaled

PARAMS: dict[str, Any] = {"n_estimators": 3, "max_depth": 3, "min_samples_leaf": 3}


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Client]:
    """Two single-threaded worker processes on 127.0.0.1, closed (and checked gone) after."""
    yield from dask_module_client(sys.modules[__name__])


class _ClosesItsDaskClient(ff.FedForestRegressor):
    """Closes the Dask client of the federation ``fit`` built, before the first round:
    a user's ``client.close()`` (another thread, a notebook cell) at a fixed moment."""

    def fit_federated(self, federation: Any) -> Any:
        federation.dask_client.close()
        return super().fit_federated(federation)


def test_a_dask_client_closed_during_fit_on_collections_is_not_blamed_on_a_federation(
    dask_client: Client,
) -> None:
    """Before: "close the federation before the Dask client, and build a new one to
    train", to a ``fit`` user who built no federation. Now the sentence serves both."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(120, 2)), columns=["age", "bmi"])
    y = pd.Series(X["age"] + rng.normal(0, 0.3, 120), name="y")
    ddf, dy = dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2)
    own = Client(dask_client.scheduler.address, set_as_default=False, timeout=scaled(60))
    with own.as_current(), pytest.raises(RuntimeError) as closed:
        _ClosesItsDaskClient(**PARAMS, random_state=0).fit(ddf, dy)
    said = str(closed.value)
    assert said.startswith("The Dask client was closed while fedforest was using it"), said
    assert "until `fit` on Dask collections returns" in said, said
    assert "a DaskFederation you built" in said, said
    assert "close the federation before" not in said, said
    # The module's client is untouched: a fit on the same collections still works.
    assert ff.FedForestRegressor(**PARAMS, random_state=0).fit(ddf, dy).n_features_in_ == 2


@pytest.mark.parametrize("as_array", [False, True])
def test_a_column_mixing_numbers_and_text_is_refused_as_a_mix_in_fit_and_by_a_client(
    as_array: bool,
) -> None:
    """[1, "a", 2.5] in an object column: docs/sklearn.md promises it refused, naming the
    column. Before, ``fit`` said "has dtype object" (an array: "could not convert string
    to float: 'a'", quoting a value) and a ``Client`` "has dtype object" or "holds str
    values", both sending the user to categorical_features, where the same column is
    refused as a mix. Now both say the mix and the two fixes, quoting no value."""
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"age": rng.normal(size=60), "m": pd.Series([1, "a", 2.5] * 20)})
    y = rng.normal(size=60)
    data, column = (X.to_numpy(), "1") if as_array else (X, "'m'")
    mix = "mixes text and numbers (float, int, str values), which is neither a numeric nor"
    with pytest.raises(ValueError) as in_memory:
        ff.FedForestRegressor(**PARAMS).fit(data, y, client_ids=np.repeat(["s", "t"], 30))
    assert str(in_memory.value).startswith(f"Column {column} of X {mix}"), in_memory.value
    with pytest.raises(ValueError) as by_a_client:
        ff.Client(data, y, name="s")
    assert str(by_a_client.value).startswith(f"Client 's': column {column} {mix}")
    for said in (str(in_memory.value), str(by_a_client.value)):
        assert "'a'" not in said and "categorical_features" not in said, said
    # Declared categorical, it is refused as a mix as before (scikit-learn's encoders).
    with pytest.raises(ValueError, match=f"categorical column {column} mixes text and numbers"):
        ff.FedForestRegressor(**PARAMS, categorical_features=[1]).fit(data, y)


@pytest.mark.parametrize("preset", ["balanced", "balanced_subsample"])
def test_a_class_weight_preset_under_warm_start_warns_as_scikit_learn_does(preset: str) -> None:
    """scikit-learn's forests warn (UserWarning, 1.9.1) at every fit with warm_start and a
    class_weight preset; fedforest did not. The oracle: scikit-learn's own warning, caught
    on the same rows, in ``fit`` and ``fit_federated`` alike; without warm_start, or with
    weights given as a dict, neither warns."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] + rng.normal(0, 0.5, 80) > 0).astype(int)
    with pytest.warns(UserWarning, match="not recommended for warm_start") as theirs:
        RandomForestClassifier(n_estimators=2, warm_start=True, class_weight=preset).fit(X, y)
    (expected,) = [str(w.message) for w in theirs]
    model = ff.FedForestClassifier(**PARAMS, warm_start=True, class_weight=preset)
    for fit in (
        lambda: model.fit(X, y),
        lambda: model.set_params(n_estimators=5).fit_federated([ff.Client(X, y, name="s")]),
    ):
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            fit()
        assert [str(w.message) for w in ours] == [expected]
        assert ours[0].category is UserWarning and ours[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ff.FedForestClassifier(**PARAMS, class_weight=preset).fit(X, y)
        ff.FedForestClassifier(**PARAMS, warm_start=True, class_weight={0: 1, 1: 2}).fit(X, y)
        RandomForestClassifier(n_estimators=2, class_weight=preset).fit(X, y)
