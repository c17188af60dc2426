"""Odd inputs, fourth round (docs/sklearn.md, "Inputs a user brings").

Each test failed on dbbb0e1:

- a DataFrame column of pyarrow booleans (``bool[pyarrow]``, what ``read_parquet`` or
  ``read_csv`` with ``dtype_backend="pyarrow"`` give) was refused as not numeric in
  ``fit``, ``predict`` and a ``Client``, where ``bool`` and ``boolean`` columns are read as
  0/1 and scikit-learn reads it so;
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from fedforest import Client, FedForestClassifier, FedForestRegressor

PRIVACY = ["secure", "none"]


def _frame(n: int = 120, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    flag = rng.random(n) < 0.5
    X = pd.DataFrame({"a": rng.normal(size=n), "flag": flag})
    return X, X["a"].to_numpy() + 2.0 * flag


def _kw(privacy: str, **extra: Any) -> dict[str, Any]:
    return dict(n_estimators=3, max_depth=3, random_state=0, privacy=privacy, **extra)


# ------------------------------------------------------------------ pyarrow booleans
@pytest.mark.parametrize("privacy", PRIVACY)
def test_a_pyarrow_boolean_column_is_read_as_the_nullable_boolean_column(privacy: str) -> None:
    pytest.importorskip("pyarrow")
    X, y = _frame()
    flags = X["flag"].astype(object).where(np.arange(len(X)) % 7 != 0, None)  # some missing
    nullable = X.assign(flag=flags.astype("boolean"))
    arrow = X.assign(flag=flags.astype("bool[pyarrow]"))
    # The oracle: the same column as pandas' nullable booleans, which fedforest reads as
    # 0/1 with NaN (as scikit-learn reads both).
    expected = FedForestRegressor(**_kw(privacy)).fit(nullable, y)
    model = FedForestRegressor(**_kw(privacy)).fit(arrow, y)  # refused: "has dtype bool[pyarrow]"
    np.testing.assert_array_equal(model.predict(arrow), expected.predict(nullable))
    np.testing.assert_array_equal(model.predict(nullable), expected.predict(nullable))
    assert model.feature_importances_[1] > 0  # the flag (a shift of 2 in y) is split on
    clients = [Client(arrow.iloc[:60], y[:60], "a"), Client(arrow.iloc[60:], y[60:], "b")]
    federated = FedForestRegressor(**_kw(privacy)).fit_federated(clients)
    reference = [Client(nullable.iloc[:60], y[:60], "a"), Client(nullable.iloc[60:], y[60:], "b")]
    np.testing.assert_array_equal(
        federated.predict(arrow),
        FedForestRegressor(**_kw(privacy)).fit_federated(reference).predict(nullable),
    )
    # A model fitted on plain booleans predicts pyarrow ones as those.
    plain = FedForestClassifier(**_kw(privacy)).fit(X, y > 1)
    np.testing.assert_array_equal(
        plain.predict_proba(X.assign(flag=X["flag"].astype("bool[pyarrow]"))),
        plain.predict_proba(X),
    )
