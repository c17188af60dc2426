"""Small frictions session 28's reviewers noticed; each test failed before its fix.

A Dask client closed during ``fit`` on Dask collections (a real LocalCluster of two
workers, as tests/test_dask_28.py).
"""

from __future__ import annotations

import sys
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
