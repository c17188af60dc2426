"""Odd inputs, fifteenth round.

``test_too_few_rows_refused_alike_by_fit_and_fit_federated`` (its classifier cases)
failed at the branch's start (f7b9388); the other test pins what did not change:

- under ``privacy="secure"`` a classifier of too few rows in all (6 clients of 1 row) was
  refused by ``fit`` for its rows ("6 rows in all, fewer than min_aggregate_rows") but by
  ``fit_federated`` for its labels ("No client holds any class label in
  min_aggregate_rows rows"): the handshake settled the class list before the row minimum
  was checked, and declaring the labels, as that refusal advised, led to the other one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fedforest as ff


# --------------------------------------------------------- too few rows, before the labels
def _both_paths(est: Any, X: np.ndarray, y: np.ndarray, ids: np.ndarray) -> list[str]:
    """The refusal of ``fit`` and of ``fit_federated`` on the same clients' rows."""
    said = []
    with pytest.raises(ValueError) as by_fit:
        est.fit(X, y, client_ids=ids)
    said.append(str(by_fit.value))
    clients = [ff.Client(X[ids == k], y[ids == k], name=str(k)) for k in np.unique(ids)]
    with pytest.raises(ValueError) as by_clients:
        est.fit_federated(ff.LocalFederation(clients))
    said.append(str(by_clients.value))
    return said


@pytest.mark.parametrize(
    ("rows", "params", "expected"),
    [
        (1, {}, "hold n_samples = 6 rows in all, fewer than min_aggregate_rows = 10 "),
        # m = max(10, 2 * ceil(0.6 * 30)): the fraction counted in the handshake's rows
        (5, {"min_samples_leaf": 0.6}, "30 rows in all, fewer than min_aggregate_rows = 36 "),
        # each client draws round(0.2 * 5) = 1 row: 6 draws in all
        (5, {"max_samples": 0.2}, "bootstrap draws 6 rows in all (max_samples), fewer than"),
    ],
)
@pytest.mark.parametrize("task", ["classification", "regression"])
def test_too_few_rows_refused_alike_by_fit_and_fit_federated(
    rows: int, params: dict[str, Any], expected: str, task: str
) -> None:
    """Every label of these clients is held by fewer than m rows, so no client names one;
    the cause is the federation's size, which ``fit`` reported and ``fit_federated`` did
    not (for the classifier; the regressor has no labels to settle first)."""
    rng = np.random.default_rng(15)
    ids = np.repeat(np.arange(6), rows)
    X = rng.normal(size=(ids.size, 3))
    y = np.arange(ids.size) % 2
    est = (ff.FedForestClassifier if task == "classification" else ff.FedForestRegressor)(
        n_estimators=2, random_state=0, **params
    )
    by_fit, by_clients = _both_paths(est, X, y if task == "classification" else y * 1.5, ids)
    assert expected in by_fit, by_fit
    assert by_clients == by_fit


def test_labels_refusal_still_names_the_labels_when_rows_suffice() -> None:
    """Enough rows in all, no label in m rows at any client: the labels' refusal stands
    (declaring the classes is then the fix, and ``fit``, which declares them, fits)."""
    rng = np.random.default_rng(15)
    ids = np.repeat(np.arange(6), 5)
    X, y = rng.normal(size=(30, 3)), np.arange(30) % 2
    clients = [ff.Client(X[ids == k], y[ids == k], name=str(k)) for k in range(6)]
    with pytest.raises(ValueError, match=r"^No client holds any class label in min_aggregate"):
        ff.FedForestClassifier(n_estimators=2).fit_federated(ff.LocalFederation(clients))
    model = ff.FedForestClassifier(n_estimators=2, classes=[0, 1], random_state=0)
    assert model.fit_federated(ff.LocalFederation(clients)).classes_.tolist() == [0, 1]
