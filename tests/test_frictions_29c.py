"""More frictions a user meets, found in session 29 (branch fric29c): each test failed before.

1. Under warm_start, ``fit`` with ``n_estimators`` below the fitted trees' count refused
   before reading X and y: y of NaN, X of infinity, sample weights of the wrong shape got
   the trees' count refusal, and a column-vector y no DataConversionWarning, where
   scikit-learn's forest checks its inputs first.
2. ``max_samples`` set with ``bootstrap=False`` was refused in other words than
   scikit-learn's.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from fedforest import Client, FedForestClassifier, FedForestRegressor


def _said(fit: Any) -> tuple[list[tuple[type[Warning], str]], tuple[type[BaseException], str]]:
    """The warnings ``fit()`` gives and what it raises."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with pytest.raises(Exception) as raised:
            fit()
    return [(w.category, str(w.message)) for w in got], (raised.type, str(raised.value))


# --------------------------------- 1. warm_start with fewer trees: the inputs checked first
def _rows() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 2))
    return X, (X[:, 0] + rng.normal(0, 0.5, 80) > 0).astype(int)


def _bad(case: str) -> tuple[Any, Any, Any]:
    X, y = _rows()
    if case == "y of NaN":
        return X, np.where(np.arange(80) == 3, np.nan, y), None
    if case == "X of infinity":
        return np.where(np.arange(160).reshape(80, 2) == 5, np.inf, X), y, None
    if case == "weights of the wrong shape":
        return X, y, np.ones(79)
    if case == "y a column":  # scikit-learn warns, then refuses the trees' count
        return X, y[:, None], None
    if case == "X of one dimension":
        return X[:, 0], y, None
    if case == "y of no column":
        return X, np.empty((80, 0)), None
    assert case == "X of text"
    return np.full((80, 2), "a", dtype=object), y, None


CASES = [
    "y of NaN",
    "X of infinity",
    "weights of the wrong shape",
    "y a column",
    "X of one dimension",
    "y of no column",
    "X of text",
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(
    "theirs, ours, class_weight",
    [
        (RandomForestClassifier, FedForestClassifier, None),
        (RandomForestClassifier, FedForestClassifier, "balanced"),
        (RandomForestRegressor, FedForestRegressor, None),
    ],
)
def test_fewer_trees_under_warm_start_check_the_inputs_first_as_scikit_learn(
    case: str, theirs: Any, ours: Any, class_weight: Any
) -> None:
    # The oracle: scikit-learn's forest, fitted with 3 trees, refitted with n_estimators=2
    # on the same bad inputs: it raises what its input checks raise, before the preset's
    # warning and the trees' count refusal.
    X, y = _rows()
    kw = {} if class_weight is None else {"class_weight": class_weight}
    sk = theirs(n_estimators=3, warm_start=True, **kw)
    ff = ours(n_estimators=3, warm_start=True, max_depth=3, privacy="none", random_state=0, **kw)
    for est in (sk, ff):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the preset's, at the first fit
            est.fit(X, y)
        est.set_params(n_estimators=2)
    before = ff.predict(X)
    Xb, yb, weights = _bad(case)
    expected, (kind, text) = _said(lambda: sk.fit(Xb, yb, sample_weight=weights))
    said, (got_kind, got) = _said(lambda: ff.fit(Xb, yb, sample_weight=weights))
    assert [c for c, _ in said] == [c for c, _ in expected]
    assert [m[:60] for _, m in said] == [m[:60] for _, m in expected]
    assert got_kind is kind
    # scikit-learn's words, but for its estimator's name, its float32 and its own rounding
    # of a 1-D X's values (shown only in its first line); fedforest names a text column.
    first = text.split("\n")[0].replace("RandomForest", "FedForest").replace("32", "64")
    assert first in got, (first, got)
    assert (case == "y a column") == got.startswith("n_estimators=2 must be larger or equal")
    np.testing.assert_array_equal(ff.predict(X), before)  # the forest kept


def test_fewer_trees_with_other_columns_are_refused_as_other_columns() -> None:
    # Where fedforest checks more than scikit-learn (whose refit takes X of other columns
    # and then refuses the trees' count), the same refit without fewer trees says the same.
    X, y = _rows()
    est = FedForestRegressor(n_estimators=3, warm_start=True, privacy="none", random_state=0)
    est.fit(X, y)
    est.set_params(n_estimators=2)
    with pytest.raises(ValueError, match="X has 1 features, but FedForestRegressor is expecting 2"):
        est.fit(X[:, :1], y)
    est.set_params(n_estimators=3)
    with pytest.raises(ValueError, match="X has 1 features, but FedForestRegressor is expecting 2"):
        with pytest.warns(UserWarning, match="does not fit new trees"):
            est.fit(X[:, :1], y)


# ------------------------------------ 2. max_samples without the bootstrap: sklearn's words
@pytest.mark.parametrize(
    "theirs, ours",
    [(RandomForestRegressor, FedForestRegressor), (RandomForestClassifier, FedForestClassifier)],
)
def test_max_samples_without_the_bootstrap_is_refused_in_scikit_learns_words(
    theirs: Any, ours: Any
) -> None:
    # The oracle: scikit-learn's own refusal of the same settings on the same rows.
    X, y = _rows()
    with pytest.raises(ValueError) as expected:
        theirs(max_samples=0.5, bootstrap=False).fit(X, y)
    est = ours(max_samples=0.5, bootstrap=False, privacy="none", random_state=0)
    with pytest.raises(ValueError) as got:
        est.fit(X, y)
    assert str(got.value) == str(expected.value)
    clients = [Client(X[:40], y[:40], name="a"), Client(X[40:], y[40:], name="b")]
    with pytest.raises(ValueError) as got:
        est.fit_federated(clients)
    assert str(got.value) == str(expected.value)
