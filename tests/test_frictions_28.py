"""Frictions the session-28 reviews noticed (branch fric28): each test failed before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.swarm import Peer


def _site() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(4)
    X = pd.DataFrame(rng.normal(size=(60, 3)), columns=["age", "bmi", "dose"])
    return X, (X["age"] + X["dose"] > 0).to_numpy().astype(int)


@pytest.mark.parametrize("engine", ["sklearn", "fedforest"])
def test_peer_refuses_n_jobs_zero_in_scikit_learns_words(engine: str) -> None:
    X, y = _site()
    words = r"The 'n_jobs' parameter of Peer must be .* Got 0 instead"
    with pytest.raises(ValueError, match=words):  # was accepted, then joblib's at fit
        Peer("A", n_estimators=3, engine=engine, n_jobs=0)
    peer = Peer("A", n_estimators=3, engine=engine, random_state=0, n_jobs=-1)
    peer.set_params(n_jobs=0)  # set_params does not pass through __init__
    with pytest.raises(ValueError, match=words):
        peer.fit(X, y)
    with pytest.raises(ValueError, match=r"parameter of Peer .* Got 1.5 instead"):
        peer.set_params(n_jobs=1.5).fit(X, y)
    peer.set_params(n_jobs=1).fit(X, y)  # an allowed value still fits
    assert peer.trees_
