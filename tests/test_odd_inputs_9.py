"""Odd inputs, ninth round: warm refits.

Each test failed on main at c5c7be9:

- ``fit`` under ``warm_start=True`` without more trees returned at once, its inputs unread:
  y of NaN, X of infinity, y of another length, sample weights of the wrong shape (or
  negative) and X of other columns were taken silently, where scikit-learn's forest
  refuses all but the last (its ``check_sample_weights_shape`` failed with
  ``warm_start=True``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from fedforest import FedForestClassifier, FedForestRegressor

_N = 120


def _data(n: int = _N) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    return X, X[:, 0] + 0.1 * rng.normal(size=n)


_BAD_REFITS = {
    "y of NaN": lambda X, y: ((X, np.full_like(y, np.nan)), {}),
    "X of infinity": lambda X, y: ((np.full_like(X, np.inf), y), {}),
    "y of another length": lambda X, y: ((X, y[:50]), {}),
    "weights of another length": lambda X, y: ((X, y), {"sample_weight": np.ones(7)}),
    "weights of two columns": lambda X, y: ((X, y), {"sample_weight": np.ones((len(y), 2))}),
}
# fedforest's fit refuses negative weights (scikit-learn's forest takes them): so does a refit.
_REFUSED_BY_FIT = {"negative weights": lambda X, y: ((X, y), {"sample_weight": -np.ones(len(y))})}


@pytest.mark.parametrize("case", sorted(_BAD_REFITS) + sorted(_REFUSED_BY_FIT))
@pytest.mark.parametrize("privacy", ["secure", "none"])
def test_a_warm_refit_without_new_trees_checks_its_inputs_as_scikit_learn(
    case: str, privacy: str
) -> None:
    X, y = _data()
    args, kwargs = {**_BAD_REFITS, **_REFUSED_BY_FIT}[case](X, y)
    # The oracle: scikit-learn's warm forest refuses them, or fedforest's own fit does.
    oracle: Any = RandomForestRegressor(n_estimators=3, warm_start=True, random_state=0)
    if case in _REFUSED_BY_FIT:
        oracle = FedForestRegressor(n_estimators=3, privacy=privacy, random_state=0)
    oracle.fit(X, y)
    with pytest.raises(ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oracle.fit(*args, **kwargs)
    est = FedForestRegressor(n_estimators=3, warm_start=True, privacy=privacy, random_state=0)
    before = est.fit(X, y).predict(X)
    with pytest.raises(ValueError), pytest.warns(UserWarning, match="does not fit new trees"):
        est.fit(*args, **kwargs)
    np.testing.assert_array_equal(est.predict(X), before)  # the forest it had


def test_a_warm_refit_without_new_trees_refuses_other_columns() -> None:
    """scikit-learn takes them (and resets ``n_features_in_`` under its trees); fedforest
    refuses them as a warm fit that adds trees does, the forest kept."""
    X, y = _data()
    est = FedForestClassifier(n_estimators=3, warm_start=True, random_state=0)
    est.fit(X, y > 0)
    with pytest.raises(
        ValueError, match="X has 2 features, but FedForestClassifier is expecting 3"
    ):
        with pytest.warns(UserWarning, match="does not fit new trees"):
            est.fit(X[:, :2], y > 0)
    assert est.n_features_in_ == 3 and len(est.estimators_) == 3


def test_a_warm_refit_without_new_trees_on_good_inputs_changes_nothing() -> None:
    X, y = _data()
    est = FedForestRegressor(n_estimators=3, warm_start=True, random_state=0).fit(X, y)
    trees = [t.threshold.copy() for t in est.trees_]
    with pytest.warns(UserWarning, match="does not fit new trees"):
        assert est.fit(X, y, sample_weight=np.ones(_N), client_ids=np.arange(_N) % 2) is est
    assert all(np.array_equal(a, t.threshold) for a, t in zip(trees, est.trees_, strict=True))
