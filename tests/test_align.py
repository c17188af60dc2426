"""Clients whose DataFrames have the same columns in different orders: aligned by name.

The federation takes the first client's order (clients in sorted name order); the others
put their columns in it at a second handshake, so the forest is the one trained with the
columns in the same order everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.federated.protocol import PROTOCOL_VERSION, Message

PARAMS: dict[str, Any] = {"n_estimators": 4, "max_depth": 4, "random_state": 0}


def _data() -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(3)
    n = 240
    X = pd.DataFrame(
        {
            "age": rng.normal(50, 10, n),
            "ward": rng.choice(["north", "south", "east"], n),
            "bmi": rng.normal(25, 4, n),
            "sbp": rng.normal(120, 15, n),
        }
    )
    X.loc[::9, "bmi"] = np.nan  # a column with missing values moves too
    y = X["age"] / 10 + (X["ward"] == "south") + rng.normal(0, 0.3, n)
    return X, y


def _fit(
    parts: list[tuple[pd.DataFrame, Any]], privacy: str, classify: bool = False
) -> ff.FedForestRegressor | ff.FedForestClassifier:
    clients = [ff.Client(X, y, f"site-{i}") for i, (X, y) in enumerate(parts)]
    cls = ff.FedForestClassifier if classify else ff.FedForestRegressor
    return cls(privacy=privacy, **PARAMS).fit_federated(ff.LocalFederation(clients))


@pytest.mark.parametrize("privacy", ["none", "secure"])
@pytest.mark.parametrize("classify", [False, True])
def test_same_columns_in_another_order_give_the_same_forest(privacy: str, classify: bool) -> None:
    X, y = _data()
    target = (y > y.median()).astype(int) if classify else y
    cuts = [slice(0, 80), slice(80, 160), slice(160, 240)]
    ordered = [(X.iloc[c], target.iloc[c]) for c in cuts]
    shuffled = [
        ordered[0],
        (X.iloc[cuts[1]][["sbp", "ward", "age", "bmi"]], target.iloc[cuts[1]]),
        (X.iloc[cuts[2]][["bmi", "sbp", "age", "ward"]], target.iloc[cuts[2]]),
    ]
    same = _fit(ordered, privacy, classify)
    aligned = _fit(shuffled, privacy, classify)
    assert list(aligned.feature_names_in_) == ["age", "ward", "bmi", "sbp"]
    got, want = aligned.predict(X), same.predict(X)
    assert np.array_equal(got, want)
    if classify:
        assert np.array_equal(aligned.predict_proba(X), same.predict_proba(X))
    assert np.array_equal(aligned.feature_importances_, same.feature_importances_)
    # One more handshake round, only when the orders differ.
    assert aligned.communication_.rounds == same.communication_.rounds + 1


def test_the_first_client_in_name_order_sets_the_order() -> None:
    X, y = _data()
    b = X.iloc[120:][["sbp", "bmi", "ward", "age"]]
    clients = [ff.Client(b, y.iloc[120:], "b"), ff.Client(X.iloc[:120], y.iloc[:120], "a")]
    model = ff.FedForestRegressor(privacy="none", **PARAMS)
    model.fit_federated(ff.LocalFederation(clients))
    assert list(model.feature_names_in_) == ["age", "ward", "bmi", "sbp"]
    assert list(clients[0].feature_names or []) == ["age", "ward", "bmi", "sbp"]


def test_different_names_are_an_error_naming_client_and_columns() -> None:
    X, y = _data()
    a = X.iloc[:120]
    b = X.iloc[120:].rename(columns={"bmi": "BMI", "sbp": "SBP"})[["SBP", "age", "BMI", "ward"]]
    fed = ff.LocalFederation([ff.Client(a, y.iloc[:120], "a"), ff.Client(b, y.iloc[120:], "b")])
    model = ff.FedForestRegressor(privacy="none", **PARAMS)
    with pytest.raises(ValueError) as err:
        model.fit_federated(fed)
    text = str(err.value)
    assert "Client 'b'" in text and "client 'a'" in text
    assert "lacks features 'bmi' and 'sbp'" in text
    assert "has the extra features 'SBP' and 'BMI'" in text
    assert not hasattr(model, "trees_")


def test_one_missing_column_is_named() -> None:
    X, y = _data()
    a, b = X.iloc[:120], X.iloc[120:][["sbp", "age", "ward"]]
    fed = ff.LocalFederation([ff.Client(a, y.iloc[:120], "a"), ff.Client(b, y.iloc[120:], "b")])
    with pytest.raises(ValueError, match="client 'b' lacks feature 'bmi'"):
        ff.FedForestRegressor(privacy="none", **PARAMS).fit_federated(fed)


def test_client_align_columns_checks_the_names() -> None:
    X, y = _data()
    client = ff.Client(X, y, "a")
    with pytest.raises(ValueError, match=r"Client 'a' cannot order .*lacks \['pulse'\]"):
        client.align_columns(["age", "ward", "bmi", "pulse"])
    unnamed = ff.Client(X.drop(columns="ward").to_numpy(), y, "u")
    with pytest.raises(ValueError, match="no column names"):
        unnamed.align_columns(["age", "bmi", "sbp"])
    client.align_columns(["sbp", "bmi", "ward", "age"])
    reference = ff.Client(X[["sbp", "bmi", "ward", "age"]], y, "a")
    assert client.feature_names == reference.feature_names
    assert np.array_equal(client.X, reference.X, equal_nan=True)
    assert np.array_equal(client.Xt, reference.Xt, equal_nan=True)
    assert np.array_equal(client.missing, reference.missing)
    assert client._cat_raw.keys() == reference._cat_raw.keys()


def test_flower_state_keeps_the_column_order() -> None:
    """A ClientApp rebuilt from its file for the next message takes the handshake's order."""
    pytest.importorskip("flwr")
    from flwr.app import RecordDict

    from fedforest.transport.flower._state import load_state, save_state

    X, y = _data()
    live = ff.Client(X[["sbp", "bmi", "ward", "age"]], y, "b")
    order = ["age", "ward", "bmi", "sbp"]
    live.handle(
        Message(
            "handshake",
            {"protocol": PROTOCOL_VERSION, "task": "regression", "feature_order": order},
        )
    )
    assert live.feature_names == order
    setup = {
        "classes": None, "first_tree": 0, "n_trees": 1, "seed": 1, "bootstrap": True,
        "n_bins": 8, "binning": "quantile", "clients": ["b"],
        "categories": {"1": ["east", "north", "south"]},
    }  # fmt: skip
    arrays = {
        "slot_tree_off": np.array([0, 1]),
        "pair_off": np.array([0, 2]),
        "pair_feat": np.array([0, 3]),
    }
    round_a = Message("round_a", {"setup": setup, "n_prev_slots": 0}, arrays)
    live.handle(round_a)
    state = RecordDict()
    save_state(live, state, seq=2)
    restored = ff.Client(X[["sbp", "bmi", "ward", "age"]], y, "b")  # the file's order again
    assert load_state(restored, state) == 2
    assert restored.feature_names == order
    cand = np.array([40.0, 50.0, 110.0, 125.0])
    request = Message("round_b", {}, {"cand_off": np.array([0, 2, 4]), "cand": cand})
    a, b = live.handle(request), restored.handle(request)
    assert a.arrays.keys() == b.arrays.keys()
    for key in a.arrays:
        assert np.array_equal(a.arrays[key], b.arrays[key])


def test_flower_clients_with_columns_in_another_order(tmp_path, monkeypatch) -> None:
    """SuperNodes whose files order the columns differently, each message a new process."""
    pytest.importorskip("flwr")
    from flwr.supercore.task_identity import TaskIdentity

    from fedforest.transport.flower import FlowerFederation
    from tests.test_flower import PARAMS as FLOWER_PARAMS
    from tests.test_flower import SEED, MemoryGrid, assert_same_forest, write_site_files

    for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, name, value)
    same = write_site_files(tmp_path)
    shuffled_dir = tmp_path / "shuffled"
    shuffled_dir.mkdir()
    shuffled = {}
    for k, (name, path) in enumerate(same.items()):
        frame = pd.read_csv(path)
        if k == 1:
            frame = frame[["score", "y", "dose", "age", "bmi"]]
        shuffled[name] = shuffled_dir / path.name
        frame.to_csv(shuffled[name], index=False)
    forests = []
    for paths in (same, shuffled):
        fed = FlowerFederation(
            MemoryGrid(paths, fresh_process=True), min_nodes=3, round_timeout=5.0,
            poll_interval=0.001,
        )  # fmt: skip
        model = ff.FedForestRegressor(**FLOWER_PARAMS, random_state=SEED).fit_federated(fed)
        fed.close()
        forests.append(model)
    assert list(forests[1].feature_names_in_) == ["age", "bmi", "dose", "score"]
    assert_same_forest(forests[0], forests[1])
