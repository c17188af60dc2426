"""Frictions a user meets, found in session 29 (branch fric29): each test failed before.

1. Under ``privacy="dp"`` the single-leaf warning quoted the largest root's noisy row
   count as if exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_wine

from fedforest import FedForestClassifier
from fedforest.federated import client_secure


def _wine(n: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_wine(return_X_y=True)
    rows = np.random.default_rng(0).permutation(len(y))[:n]
    return X[rows], y[rows]


# ------------------------------------------------------- 1. dp's single-leaf warning
def test_dp_single_leaf_warning_calls_the_root_count_noisy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The dp noise and bootstrap come from secrets.randbits: fixed here, so the fit is
    # reproducible (16 rows: roots of about 10 distinct rows, far below 2 * 10).
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    X, y = _wine(16)
    est = FedForestClassifier(n_estimators=3, random_state=0, privacy="dp", epsilon=1000.0)
    with pytest.warns(UserWarning, match="single leaf") as got:
        est.fit(X, y)
    (text,) = [str(w.message) for w in got if "single leaf" in str(w.message)]
    largest = max(int(t.n_node_samples[0]) for t in est.trees_)
    assert f"the largest root held about {largest} rows (a noisy count, privacy='dp')" in text


def test_secure_single_leaf_warning_keeps_the_exact_count() -> None:
    X, y = _wine(22)
    est = FedForestClassifier(n_estimators=5, random_state=0)
    with pytest.warns(UserWarning, match="single leaf") as got:
        est.fit(X, y)
    (text,) = [str(w.message) for w in got if "single leaf" in str(w.message)]
    largest = max(int(t.n_node_samples[0]) for t in est.trees_)
    assert f"the largest root held {largest}, fewer than 2 * 10." in text
    assert "noisy" not in text
