"""More frictions a user meets, found in session 29 (branch fric29c): each test failed before.

1. Under warm_start, ``fit`` with ``n_estimators`` below the fitted trees' count refused
   before reading X and y: y of NaN, X of infinity, sample weights of the wrong shape got
   the trees' count refusal, and a column-vector y no DataConversionWarning, where
   scikit-learn's forest checks its inputs first.
2. ``max_samples`` set with ``bootstrap=False`` was refused in other words than
   scikit-learn's.
3. Under ``privacy="dp"`` a forest whose every tree stayed one leaf because no split stood
   out of the noise (1,200 rows at epsilon 1) gave no warning; the minimum-rows rule's
   warning stays its own, never both.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from fedforest import Client, FedForestClassifier, FedForestRegressor
from fedforest.federated import client_secure


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


# ------------------------------- 3. dp: every tree one leaf because of the noise, said so
def _signal(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 5))
    y = X[:, 0] + 0.5 * X[:, 1] + rng.normal(0, 0.5, n)
    return X, y, np.arange(n) % 3  # three clients


def _dp(est: Any, n: int, y: Any = None) -> tuple[Any, list[warnings.WarningMessage]]:
    X, signal, clients = _signal(n)
    if y is None:
        y = signal if isinstance(est, FedForestRegressor) else (signal > 0).astype(int)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        est.fit(X, y, client_ids=clients)
    return est, list(got)


@pytest.mark.parametrize(
    "est, n",
    [
        (FedForestRegressor(n_estimators=10, max_depth=4, epsilon=1.0), 1200),
        (FedForestClassifier(n_estimators=10, max_depth=4, epsilon=0.5), 1200),
    ],
)
def test_a_dp_forest_whose_noise_stopped_every_split_warns(
    est: Any, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The dp noise and bootstrap come from secrets.randbits: fixed here (as
    # tests/test_frictions_29b.py), so the fit is reproducible. 1,200 rows with a signal
    # (R^2 0.8 without noise), far above the minimum-rows rule's 2 * 10 a node: the noise of
    # the released sums (hundreds of rows on a count) left every tree one leaf, silently.
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    est.set_params(privacy="dp", random_state=0)
    est, got = _dp(est, n)
    assert all(t.feature.size == 1 for t in est.trees_)
    assert len(got) == 1, [str(w.message) for w in got]  # this one, not the rule's
    (w,) = got
    assert w.category is UserWarning and w.filename == __file__  # at the user's line
    text, report = str(w.message), est.privacy_report_
    assert text.startswith("every tree of this forest is a single leaf")
    assert f"under privacy='dp' with epsilon={est.epsilon:g} no split stood out of the " in text
    assert f"a standard deviation of {report['sigma']:.3g} rows on each row count" in text
    assert f"for {n} rows in all" in text
    assert "Use a larger epsilon, more rows, or fewer trees or a smaller max_depth" in text
    assert "n_estimators=10 x max_depth=4" in text
    assert "min_aggregate_rows" not in text


def test_a_dp_forest_that_splits_does_not_warn_of_its_noise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same rows at epsilon 5: the trees split (about 3 to 7 nodes each), no warning.
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    for est in (
        FedForestRegressor(n_estimators=10, max_depth=4, epsilon=5.0),
        FedForestClassifier(n_estimators=10, max_depth=4, epsilon=5.0),
    ):
        est.set_params(privacy="dp", random_state=0)
        est, got = _dp(est, 1200)
        assert any(t.feature.size > 1 for t in est.trees_)
        assert got == [], [str(w.message) for w in got]


def test_the_minimum_rows_rule_keeps_its_own_warning_and_only_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 22 rows: about 14 distinct in a tree's bootstrap, fewer than 2 * 10: the rule's
    # warning (tests/test_frictions_29b.py), never the noise's beside it.
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    est = FedForestRegressor(n_estimators=5, max_depth=4, epsilon=1.0, privacy="dp")
    est, got = _dp(est.set_params(random_state=0), 22)
    assert all(t.feature.size == 1 for t in est.trees_)
    leaves = [str(w.message) for w in got if "single leaf" in str(w.message)]
    assert len(leaves) == 1, leaves  # (beside dp's warning on its targets' scale)
    assert "min_aggregate_rows = 10" in leaves[0]
    assert "no split stood out of the noise" not in leaves[0]


def test_one_class_gives_single_leaves_without_the_noise_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nothing to split (one class, public at the handshake): the noise is not the cause.
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    est = FedForestClassifier(n_estimators=10, max_depth=4, epsilon=0.5, privacy="dp")
    est, got = _dp(est.set_params(random_state=0), 1200, y=np.zeros(1200, dtype=int))
    assert all(t.feature.size == 1 for t in est.trees_)
    assert got == [], [str(w.message) for w in got]
