"""Odd inputs, second round (docs/sklearn.md, "Inputs a user brings"; docs/flower.md).

Each test failed on main at fa3fe7f: a NumPy traceback after a whole warm fit grew (y of
another number of outputs), a client blamed for an invalid reply for its datetime labels,
complex targets cut to their real part with a NumPy warning, ``classes_`` of ``[0, 1]`` for
nullable labels on Dask where ``fit`` gives floats, and a SuperNode's file refused without
its name (or, for a missing target, as "Mix of label input types").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fedforest import Client, FedForestRegressor
from fedforest.tree.arrays import Tree

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
