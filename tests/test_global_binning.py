"""binning="global": per-feature pooled quantiles fixed at the handshake, one round a level.

The candidates of every node are known before Round A, so they travel with it and each
client answers its left statistics beside its node summaries. The forest equals the one
grown with the same fixed grid in two rounds a level.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.federated.protocol import HANDSHAKE


class _TwoRounds(ff.FedForestRegressor):
    def _config(self) -> Any:
        return replace(super()._config(), one_round=False)


class _TwoRoundsClassifier(ff.FedForestClassifier):
    def _config(self) -> Any:
        return replace(super()._config(), one_round=False)


def _data(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 6)), columns=[f"x{j}" for j in range(6)])
    X.iloc[rng.random(n) < 0.1, 2] = np.nan  # missing values in one column
    X["ward"] = pd.Categorical(rng.choice(["a", "b", "c"], n))
    y = 2 * X["x0"] + np.sin(X["x1"]) + (X["ward"] == "b") + rng.normal(size=n) * 0.3
    return X, y.to_numpy(), rng.integers(0, 4, n)


@pytest.mark.parametrize(
    ("task", "split_on_client"),
    [("regression", False), ("classification", False), ("regression", True)],
)
def test_one_round_grows_the_forest_of_two_rounds_on_the_same_grid(
    task: str, split_on_client: bool
) -> None:
    X, y, cid = _data(1500, 0)
    kw = dict(
        n_estimators=8,
        max_depth=5,
        privacy="none",
        binning="global",
        random_state=0,
        split_on_client=split_on_client,
    )
    if task == "regression":
        one, two = ff.FedForestRegressor(**kw), _TwoRounds(**kw)
    else:
        y = (y > np.median(y)).astype(int)
        one, two = ff.FedForestClassifier(**kw), _TwoRoundsClassifier(**kw)
    one.fit(X, y, client_ids=cid)
    two.fit(X, y, client_ids=cid)
    if task == "regression":
        np.testing.assert_array_equal(one.predict(X), two.predict(X))
    else:
        np.testing.assert_array_equal(one.predict_proba(X), two.predict_proba(X))
    np.testing.assert_array_equal(one.feature_importances_, two.feature_importances_)
    # A level is one round: the handshake, five levels (and nothing else here).
    assert one.communication_.rounds <= kw["max_depth"] + 2 < two.communication_.rounds
    # The candidates travel once per column, not once per (node, feature) pair.
    assert one.communication_.download_bytes < two.communication_.download_bytes / 2


def test_global_grid_costs_little_accuracy_with_enough_bins() -> None:
    # The forests' own randomness moves one forest's MSE by 10-15 % here: a mean over seeds.
    ratios = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(6000, 10))
        y = 2 * X[:, 0] + np.sin(X[:, 1]) + rng.normal(size=6000) * 0.3
        X_test = rng.normal(size=(3000, 10))
        y_test = 2 * X_test[:, 0] + np.sin(X_test[:, 1])
        cid = rng.integers(0, 5, 6000)
        mse = []
        for binning, n_bins in (("quantile", 32), ("global", 256)):
            model = ff.FedForestRegressor(
                n_estimators=30, privacy="none", binning=binning, n_bins=n_bins,
                local_candidates=False, random_state=0,
            ).fit(X, y, client_ids=cid)  # fmt: skip
            mse.append(np.mean((model.predict(X_test) - y_test) ** 2))
        ratios.append(mse[1] / mse[0])
    assert np.mean(ratios) < 1.05, ratios


def test_global_binning_is_refused_where_it_would_leak_or_cannot_work() -> None:
    X, y, cid = _data(300, 2)
    with pytest.raises(ValueError, match="per-feature quantiles"):
        ff.FedForestRegressor(binning="global").fit(X, y, client_ids=cid)  # privacy="secure"
    with pytest.raises(ValueError, match="top_l"):
        ff.FedForestRegressor(binning="global", privacy="none", top_l=1).fit(X, y)


def test_a_bad_feature_sketch_is_refused_naming_the_client() -> None:
    X, y, _ = _data(300, 3)

    class Liar(ff.Client):
        def handle(self, msg: Any) -> Any:
            reply = super().handle(msg)
            if msg.kind == HANDSHAKE:
                reply.arrays["feature_sketch"] = reply.arrays["feature_sketch"][:, ::-1].copy()
            return reply

    clients = [ff.Client(X[:150], y[:150], name="a"), Liar(X[150:], y[150:], name="b")]
    model = ff.FedForestRegressor(n_estimators=2, privacy="none", binning="global")
    with pytest.raises(ValueError, match="'b'.*feature_sketch"):
        model.fit_federated(ff.LocalFederation(clients))


@pytest.mark.parametrize("n_jobs", [1, 2])  # 2: the replies are checked in two threads
def test_left_statistics_above_the_node_are_refused_naming_the_client(n_jobs: int) -> None:
    X, y, _ = _data(600, 4)

    class Inflater(ff.Client):
        def handle(self, msg: Any) -> Any:
            reply = super().handle(msg)
            if "left_counts" in reply.arrays and "route_feature" in msg.arrays:
                reply.arrays["left_counts"] = reply.arrays["left_counts"] * 3
            return reply

    parts = np.array_split(np.arange(600), 4)
    clients = [
        (Inflater if k == 2 else ff.Client)(X.iloc[r], y[r], name=f"site{k}")
        for k, r in enumerate(parts)
    ]
    model = ff.FedForestRegressor(
        n_estimators=3, max_depth=4, privacy="none", binning="global", n_jobs=n_jobs
    )
    with pytest.raises(ValueError, match="'site2'.*left statistics"):
        model.fit_federated(ff.LocalFederation(clients, n_jobs=n_jobs))
