"""Files written by fedforest 0.1.0 load and predict identically today."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.swarm import ShareBundle, SwarmForest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def expected() -> dict[str, np.ndarray]:
    with np.load(DATA / "v0.1.0-expected.npz", allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


@pytest.fixture(scope="module")
def X() -> pd.DataFrame:
    frame = pd.read_csv(DATA / "v0.1.0-X.csv")
    frame["ward"] = pd.Categorical(frame["ward"])
    return frame


def test_v010_regressor_predicts_identically(X: pd.DataFrame, expected: dict) -> None:
    model = ff.load(DATA / "v0.1.0-regressor.ffm")
    assert isinstance(model, ff.FedForestRegressor) and model.split_on_client
    assert model.privacy == "none"  # 0.1.0 had the paper's protocol only
    h = np.repeat(["s0", "s1", "s2"], len(X) // 3)
    np.testing.assert_array_equal(model.predict(X, client_ids=h), expected["reg_predict"])
    np.testing.assert_array_equal(model.apply(X, client_ids=h), expected["reg_apply"])


def test_v010_classifier_predicts_identically(X: pd.DataFrame, expected: dict) -> None:
    model = ff.load(DATA / "v0.1.0-classifier.ffm")
    assert isinstance(model, ff.FedForestClassifier)
    assert model.classes_.tolist() == ["hi", "lo"]
    np.testing.assert_array_equal(model.predict_proba(X), expected["cls_proba"])
    np.testing.assert_array_equal(model.apply(X), expected["cls_apply"])


@pytest.mark.parametrize("strategy", ["local", "park", "fpv", "pr", "mi", "ipr", "mp", "ss"])
def test_v010_share_bundles_predict_identically(strategy: str, expected: dict) -> None:
    bundles = [ShareBundle.load(DATA / f"v0.1.0-peer{k}.ffb") for k in (0, 1)]
    site = pd.read_csv(DATA / "v0.1.0-site.csv")
    proba = SwarmForest(bundles).predict_proba(site, strategy=strategy, site="P0", random_state=3)
    np.testing.assert_array_equal(proba, expected[f"swarm_{strategy}"])
