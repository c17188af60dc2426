"""Odd inputs, fifteenth round.

``test_too_few_rows_refused_alike_by_fit_and_fit_federated`` (its classifier cases) and
``test_class_weight_key_of_another_type_refused_saying_so`` failed at the branch's start
(f7b9388); the other two pin what did not change. The two refusals:

- under ``privacy="secure"`` a classifier of too few rows in all (6 clients of 1 row) was
  refused by ``fit`` for its rows ("6 rows in all, fewer than min_aggregate_rows") but by
  ``fit_federated`` for its labels ("No client holds any class label in
  min_aggregate_rows rows"): the handshake settled the class list before the row minimum
  was checked, and declaring the labels, as that refusal advised, led to the other one;
- a ``class_weight`` key of another type than y's labels (``1`` for the class ``"1"``, or
  ``"1"`` for ``1``) was refused without saying that the type was the trouble.
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


# ------------------------------------------------------------ class_weight keys' type
def _labelled(kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(15)
    X = rng.normal(size=(90, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=90) > 0).astype(int)
    return X, (y.astype(str) if kind == "text" else y), np.repeat(np.arange(3), 30)


@pytest.mark.parametrize("privacy", ["secure", "none"])
@pytest.mark.parametrize(
    ("kind", "class_weight", "hint"),
    [
        (
            "text",
            {1: 2.0},
            "the key 1 is of type int, the class '1' of type str: write the "
            "keys as y's labels ('1').",
        ),
        (
            "numbers",
            {"0": 1.0, "1": 2.0},
            "the key '0' is of type str, the class 0 of type "
            "int: write the keys as y's labels (0).",
        ),
        (
            "text",
            [{0: 1.0}, {"1": 2.0}],
            "the key 0 is of type int, the class '0' of type "
            "str: write the keys as y's labels ('0').",
        ),
    ],
)
def test_class_weight_key_of_another_type_refused_saying_so(
    kind: str, class_weight: Any, hint: str, privacy: str
) -> None:
    """A key is a label equal to it (a dict's lookup, scikit-learn's rule until 1.9): 1 is
    not "1". scikit-learn 1.9.1 reads each label as ``int(label)`` where it can, so it
    weighs "1" by a key 1 but refuses {"0": w, "1": w} for labels "0"/"1", and
    class_weight="balanced" for labels "1"/"2" (its issue 34883, a regression from 1.8):
    fedforest keeps the rule by value (docs/sklearn.md). The refusal is scikit-learn's
    text, plus which key and why, by ``fit`` and ``fit_federated`` alike."""
    X, y, ids = _labelled(kind)
    if isinstance(class_weight, list):
        y = np.c_[y, y]
    est = ff.FedForestClassifier(n_estimators=2, privacy=privacy, class_weight=class_weight)
    by_fit, by_clients = _both_paths(est, X, y, ids)
    assert by_fit.startswith("The classes, ") and " are not in class_weight " in by_fit, by_fit
    assert by_fit.endswith(hint), by_fit
    assert by_clients == by_fit


def test_class_weight_by_value_whatever_the_labels_type() -> None:
    """Labels "0"/"1" weighed by keys "0"/"1" grow the forest labels 0/1 weighed by keys
    0/1 grow (scikit-learn 1.9.1 refuses the former), by ``fit`` and ``fit_federated``."""
    X, y, ids = _labelled("numbers")
    weights = {0: 1.0, 1: 3.0}
    text_weights = {str(k): w for k, w in weights.items()}
    numbers = ff.FedForestClassifier(n_estimators=3, random_state=0, class_weight=weights)
    numbers.fit(X, y, client_ids=ids)
    text = ff.FedForestClassifier(n_estimators=3, random_state=0, class_weight=text_weights)
    text.fit(X, y.astype(str), client_ids=ids)
    assert text.classes_.tolist() == ["0", "1"]
    np.testing.assert_array_equal(text.predict_proba(X), numbers.predict_proba(X))
    clients = [ff.Client(X[ids == k], y[ids == k].astype(str), name=str(k)) for k in range(3)]
    federated = ff.FedForestClassifier(n_estimators=3, random_state=0, class_weight=text_weights)
    federated.fit_federated(ff.LocalFederation(clients))
    np.testing.assert_array_equal(federated.predict_proba(X), numbers.predict_proba(X))
    unweighted = ff.FedForestClassifier(n_estimators=3, random_state=0).fit(X, y, client_ids=ids)
    assert not np.array_equal(unweighted.predict_proba(X), numbers.predict_proba(X))
