"""The small fits whose trees tests/test_fixed_seed_forests.py compares with a saved copy.

Shared by the test and by ``tests/data/make_fixed_forests.py``, which wrote the saved copy
(``tests/data/fixed-forests.npz``) with the code of commit e034068, before the server's
per-node overhead was removed (issue 14): a later change that alters any tree of a fixed
seed fails the test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

import fedforest as ff

#: Tree fields compared, each concatenated over the trees of a fit.
FIELDS = (
    "feature",
    "threshold",
    "children_left",
    "children_right",
    "value",
    "n_node_samples",
    "weighted_n_node_samples",
    "impurity",
    "missing_go_to_left",
    "set_size",
    "set_code",
    "set_side",
)


def _friedman(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """benchmarks/bench_forest.py's data: a Friedman #1 signal in 20 uniform features."""
    X = rng.random((n, 20))
    y = (
        10.0 * np.sin(np.pi * X[:, 0] * X[:, 1])
        + 20.0 * (X[:, 2] - 0.5) ** 2
        + 10.0 * X[:, 3]
        + 5.0 * X[:, 4]
        + rng.normal(0.0, 1.0, n)
    )
    return X, y


def _bench(privacy: str) -> tuple[Any, Any, Any, np.ndarray]:
    """bench_forest.py's settings (a smaller forest): 10 clients, depth 8, 32 bins."""
    rng = np.random.default_rng(11)
    X, y = _friedman(700, rng)
    h = rng.permutation(np.arange(700) % 10)
    model = ff.FedForestRegressor(
        n_estimators=12,
        max_depth=8,
        min_samples_leaf=5,
        max_features=1 / 3,
        n_bins=32,
        n_jobs=2,
        random_state=3,
        privacy=privacy,
    )
    return model, X, y, h


def _awkward() -> tuple[Any, Any, Any, np.ndarray]:
    """A classifier on columns mostly constant (the feature draw's fallback), a categorical
    column, missing values, unequal clients and one split on the client."""
    rng = np.random.default_rng(5)
    n = 600
    X = pd.DataFrame({f"c{j}": np.full(n, float(j)) for j in range(5)})
    X["a"] = rng.normal(size=n)
    X["b"] = np.where(rng.random(n) < 0.15, np.nan, rng.random(n))
    X["ward"] = pd.Categorical(rng.choice(["x", "y", "z", "w"], size=n))
    h = rng.choice(["s0", "s1", "s2", "s3"], p=[0.4, 0.3, 0.2, 0.1], size=n)
    score = X["a"] + (X["ward"] == "y") + np.nan_to_num(X["b"].to_numpy()) + (h == "s2")
    y = np.digitize(score + rng.normal(scale=0.3, size=n), [0.2, 1.2])
    model = ff.FedForestClassifier(
        n_estimators=10,
        max_depth=6,
        min_samples_leaf=3,
        max_features=2,
        split_on_client=True,
        n_jobs=2,
        random_state=1,
        privacy="none",
    )
    return model, X, y, h


CASES = {
    "bench_none": lambda: _bench("none"),
    "bench_secure": lambda: _bench("secure"),
    "awkward_none": _awkward,
}


def fit_case(name: str) -> dict[str, np.ndarray]:
    """Fit case ``name`` and return its trees' arrays (and the importances)."""
    model, X, y, h = CASES[name]()
    model.fit(X, y, client_ids=h)
    out = {f: np.concatenate([getattr(t, f) for t in model.trees_]) for f in FIELDS}
    out["n_nodes"] = np.array([t.feature.size for t in model.trees_])
    out["importances"] = model.feature_importances_
    return {f"{name}/{k}": v for k, v in out.items()}
