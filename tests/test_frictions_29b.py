"""More frictions a user meets, found in session 29 (branch fric29b): each test failed before.

1. Under warm_start, ``n_estimators`` below the fitted trees' count was refused before
   the settings' checks and the class_weight preset's warning that scikit-learn's forest
   gives first.
2. Under ``privacy="dp"`` whether a forest of single leaves warned was decided on the
   roots' noisy counts and impurities: 22 rows at epsilon 5 gave one-leaf trees silently.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.ensemble import RandomForestClassifier

from fedforest import Client, FedForestClassifier
from fedforest.federated import client_secure


def _said(
    fit: Any, here: bool = False
) -> tuple[list[tuple[type[Warning], str]], tuple[type[BaseException], str]]:
    """The warnings ``fit()`` gives and what it raises; ``here``: warned at the caller."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with pytest.raises(Exception) as raised:
            fit()
    assert not here or all(w.filename == __file__ for w in got), [w.filename for w in got]
    return [(w.category, str(w.message)) for w in got], (raised.type, str(raised.value))


# ------------------------------------------- 1. warm_start with fewer trees: the order
@pytest.mark.parametrize("class_weight", ["balanced", "balanced_subsample", None])
@pytest.mark.parametrize("change", [{}, {"max_depth": -1}, {"bootstrap": False, "oob_score": True}])
def test_fewer_trees_under_warm_start_warn_and_refuse_as_scikit_learn_does(
    class_weight: Any, change: dict[str, Any]
) -> None:
    # The oracle: scikit-learn's forest refitted on the same rows with n_estimators 3 -> 2
    # (and a parameter it refuses before anything else; out-of-bag scores without the
    # bootstrap, refused after the preset's warning, before the trees' count).
    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] + rng.normal(0, 0.5, 80) > 0).astype(int)
    theirs = RandomForestClassifier(n_estimators=3, warm_start=True, class_weight=class_weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the preset's, at the first fit
        theirs.fit(X, y)
    theirs.set_params(n_estimators=2, **change)
    expected = _said(lambda: theirs.fit(X, y))
    if not change:
        assert expected[1][1].startswith("n_estimators=2 must be larger or equal")
    params = {"n_estimators": 3, "max_depth": 3, "privacy": "none", "random_state": 0}
    ours = FedForestClassifier(**params, warm_start=True, class_weight=class_weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours.fit(X, y)
    before = ours.predict_proba(X)
    ours.set_params(n_estimators=2, **change)
    (said, (kind, text)) = _said(lambda: ours.fit(X, y), here=True)
    assert said == expected[0]
    assert kind is expected[1][0]
    assert text.startswith(expected[1][1].replace("RandomForest", "FedForest")), text
    clients = [Client(X[:40], y[:40], name="a"), Client(X[40:], y[40:], name="b")]
    (said, (kind, text)) = _said(lambda: ours.fit_federated(clients), here=True)
    assert said == expected[0]
    assert kind is expected[1][0]
    assert text.startswith(expected[1][1].replace("RandomForest", "FedForest")), text
    np.testing.assert_array_equal(ours.predict_proba(X), before)  # the forest kept


# ----------------------------------------------- 2. dp's single-leaf warning: the trees
def _wine(n: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_wine(return_X_y=True)
    rows = np.random.default_rng(0).permutation(len(y))[:n]
    return X[rows], y[rows]


def test_a_dp_forest_of_single_leaves_warns_whatever_its_noisy_roots_say(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The dp noise and bootstrap come from secrets.randbits: fixed here (as
    # tests/test_frictions_29.py), so the fit is reproducible. 22 rows hold about 14
    # distinct in a root, fewer than 2 * 10: no root can split. Its noisy counts read 0 to
    # 106 rows and some noisy impurities 0 ("pure"): no warning came before.
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    X, y = _wine(22)
    est = FedForestClassifier(n_estimators=5, random_state=0, privacy="dp", epsilon=5.0)
    with pytest.warns(UserWarning, match="single leaf") as got:
        est.fit(X, y)
    assert all(t.feature.size == 1 for t in est.trees_)
    (text,) = [str(w.message) for w in got if "single leaf" in str(w.message)]
    largest = max(int(t.n_node_samples[0]) for t in est.trees_)
    assert largest >= 2 * 10  # a noisy count above the rule's 2 m
    # one client of 22 rows: 22 (1 - (1 - 1/22)^22) = 14.2 distinct rows expected
    assert (
        f"the largest root held about {largest} rows (a noisy count, privacy='dp'), and a "
        "tree's bootstrap draws about 14 distinct rows of the 22, fewer than 2 * 10." in text
    )
    assert "min_aggregate_rows = 10" in text


def test_a_dp_forest_that_splits_does_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    X, y = _wine(178)
    est = FedForestClassifier(n_estimators=5, random_state=0, privacy="dp", epsilon=50.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails
        est.fit(X, y)
    assert any(t.feature.size > 1 for t in est.trees_)
