"""scikit-learn parity: the ensemble protocol, scikit-learn tree objects, criteria names."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import RandomForestRegressor
from sklearn.exceptions import NotFittedError
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import fedforest as ff

pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")


def _data(n: int, seed: int, float32: bool = True) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    if float32:
        X = X.astype(np.float32).astype(np.float64)
    return X, X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_to_sklearn_predicts_and_applies_as_fedforest(task: str) -> None:
    X, y = _data(900, 0)
    Xt, _ = _data(3000, 1)
    if task == "classification":
        y = np.digitize(y, [-0.5, 0.5, 1.5])  # four classes
        model = ff.FedForestClassifier(n_estimators=6, privacy="none", random_state=0)
    else:
        model = ff.FedForestRegressor(n_estimators=6, privacy="none", random_state=0)
    model.fit(X, y, client_ids=np.arange(900) % 3)
    sk = model.to_sklearn()
    np.testing.assert_array_equal(sk.apply(Xt), model.apply(Xt))
    if task == "classification":
        np.testing.assert_allclose(sk.predict_proba(Xt), model.predict_proba(Xt), rtol=1e-12)
        np.testing.assert_array_equal(sk.predict(Xt), model.predict(Xt))
        assert list(sk.classes_) == list(model.classes_)
    else:
        np.testing.assert_allclose(sk.predict(Xt), model.predict(Xt), rtol=1e-12)
    tree = model[0]
    assert isinstance(
        tree, DecisionTreeClassifier if task == "classification" else DecisionTreeRegressor
    )
    assert tree.tree_.node_count == model.trees_[0].node_count
    assert tree.get_depth() == model.trees_[0].max_depth
    np.testing.assert_array_equal(tree.tree_.children_left, model.trees_[0].children_left)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_to_sklearn_keeps_the_feature_names(task: str) -> None:
    # Without them scikit-learn warned "X has feature names, but RandomForest... was
    # fitted without feature names" on every DataFrame and checked no column.
    X, y = _data(300, 0)
    frame = pd.DataFrame(X, columns=["age", "dose", "weight", "height"])
    cls = ff.FedForestClassifier if task == "classification" else ff.FedForestRegressor
    model = cls(n_estimators=3, max_depth=3, random_state=0)
    model.fit(frame, y > 0.5 if task == "classification" else y)
    sk = model.to_sklearn()
    np.testing.assert_array_equal(sk.feature_names_in_, model.feature_names_in_)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(sk.predict(frame), model.predict(frame))
    with pytest.raises(ValueError, match="same order"):
        sk.predict(frame[frame.columns[::-1]])
    assert not hasattr(cls(n_estimators=2).fit(X, y > 0).to_sklearn(), "feature_names_in_")


@pytest.mark.filterwarnings("ignore:Some inputs do not have OOB scores:UserWarning")
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_to_sklearn_carries_the_parameters_it_was_grown_with(task: str) -> None:
    X, y = _data(600, 4)
    common = dict(
        n_estimators=5, max_depth=5, min_samples_split=6, min_samples_leaf=3,
        min_weight_fraction_leaf=0.01, max_features=0.75, max_samples=0.8, ccp_alpha=1e-3,
        min_impurity_decrease=1e-4, monotonic_cst=[1, 0, -1, 0], oob_score=True,
        privacy="none", random_state=7,
    )  # fmt: skip
    if task == "classification":
        y = (y > np.median(y)).astype(int)  # binary: scikit-learn's monotonic_cst needs it
        kw = dict(criterion="entropy", class_weight={0: 1.0, 1: 2.5})
        model = ff.FedForestClassifier(**common, **kw)
    else:
        y = y - y.min() + 0.1  # positive: criterion="poisson"
        model = ff.FedForestRegressor(**common, criterion="poisson")
    model.fit(X, y, client_ids=np.arange(600) % 3)
    sk = model.to_sklearn()
    mine, theirs = model.get_params(), sk.get_params()
    assert set(theirs) <= set(mine)  # every scikit-learn parameter has fedforest's name
    for name in theirs:
        assert theirs[name] == mine[name], name
    tree_names = set(sk.estimator_params) - {"random_state"}
    assert {"ccp_alpha", "monotonic_cst", "criterion", "min_weight_fraction_leaf"} <= tree_names
    for tree in sk.estimators_:
        params = tree.get_params()
        for name in tree_names:
            assert params[name] == mine[name], name
    # The parameters are scikit-learn's to use: its clone grows a forest with them.
    refit = clone(sk).fit(X, y)
    assert len(refit.estimators_) == 5
    # Each tree's resolved max_features_ is what scikit-learn's own fit resolves.
    assert {t.max_features_ for t in sk.estimators_} == {refit.estimators_[0].max_features_}
    assert refit.estimators_[0].get_params()["monotonic_cst"] == [1, 0, -1, 0]


@pytest.mark.parametrize("max_features", [None, "sqrt", "log2", 3, 0.4, 1.0])
def test_to_sklearn_trees_resolve_max_features_as_scikit_learn(max_features) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 7))
    y = X[:, 0] + 0.1 * rng.normal(size=200)
    model = ff.FedForestRegressor(
        n_estimators=2, max_depth=2, max_features=max_features, privacy="none", random_state=0
    ).fit(X, y, client_ids=np.arange(200) % 2)
    theirs = RandomForestRegressor(n_estimators=1, max_depth=2, max_features=max_features)
    expected = theirs.fit(X, y).estimators_[0].max_features_
    assert [t.max_features_ for t in model.to_sklearn().estimators_] == [expected] * 2


def test_ensemble_protocol() -> None:
    X, y = _data(400, 2)
    model = ff.FedForestRegressor(n_estimators=4, privacy="none", random_state=0)
    assert model  # truthy before fit (len would raise)
    with pytest.raises(NotFittedError):
        model.feature_importances_  # noqa: B018
    with pytest.raises(NotFittedError):
        len(model)
    model.fit(X, y)
    assert len(model) == 4 and len(list(model)) == 4 and len(model.estimators_) == 4
    assert model.feature_importances_.shape == (4,)
    assert clone(model).get_params() == model.get_params()


def test_set_splits_cannot_convert() -> None:
    X, y = _data(600, 3)
    h = np.arange(600) % 3
    y = y + 2.0 * h  # outcome shift: the forest splits on H
    model = ff.FedForestRegressor(
        n_estimators=3, privacy="none", split_on_client=True, random_state=0
    ).fit(X, y, client_ids=h)
    assert any((t.feature == X.shape[1]).any() for t in model.trees_)
    with pytest.raises(ValueError, match="client index H"):
        model.to_sklearn()
    with pytest.raises(ValueError, match="client index H"):
        model.estimators_  # noqa: B018
    # Such a forest has no estimators_: dir() (tab completion) and hasattr pass over it.
    assert not hasattr(model, "estimators_")
    assert "predict" in dir(model)


def test_log_loss_is_entropy_and_log_proba_is_the_log() -> None:
    X, y = _data(500, 4)
    labels = (y > np.median(y)).astype(int)
    kw = dict(n_estimators=4, privacy="none", random_state=0)
    a = ff.FedForestClassifier(criterion="log_loss", **kw).fit(X, labels)
    b = ff.FedForestClassifier(criterion="entropy", **kw).fit(X, labels)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(a.predict_log_proba(X), np.log(a.predict_proba(X)))


def test_fractional_min_samples_are_fractions_of_the_pooled_rows() -> None:
    """Verification mode (exact candidates, no bootstrap, every feature) equals
    scikit-learn's tree with the same fractions, over three clients."""
    X, y = _data(600, 5, float32=False)
    kw = dict(min_samples_leaf=0.02, min_samples_split=0.1)
    ours = ff.FedForestRegressor(
        n_estimators=1, n_bins=None, bootstrap=False, max_features=None, max_depth=None,
        privacy="none", random_state=0, **kw,
    ).fit(X, y, client_ids=np.arange(600) % 3)  # fmt: skip
    ref = DecisionTreeRegressor(random_state=0, **kw).fit(X, y)
    assert ours.trees_[0].node_count == ref.tree_.node_count
    assert ours.trees_[0].n_node_samples.min() >= 12  # ceil(0.02 * 600)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-12)
    with pytest.raises(ValueError, match="min_samples_leaf"):
        ff.FedForestRegressor(min_samples_leaf=1.5).fit(X, y)


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_max_samples_sizes_each_trees_bootstrap(privacy: str) -> None:
    X, y = _data(1200, 6)
    h = np.arange(1200) % 4
    kw = dict(n_estimators=10, random_state=0, privacy=privacy)
    half = ff.FedForestRegressor(max_samples=0.5, **kw).fit(X, y, client_ids=h)
    # The root's bootstrap weight is the draws: round(0.5 * 300) per client.
    assert all(t.weighted_n_node_samples[0] == 600 for t in half.trees_)
    n300 = ff.FedForestRegressor(max_samples=600, **kw).fit(X, y, client_ids=h)
    np.testing.assert_array_equal(n300.predict(X), half.predict(X))  # the same draws
    full = ff.FedForestRegressor(**kw).fit(X, y, client_ids=h)
    assert all(t.weighted_n_node_samples[0] == 1200 for t in full.trees_)
    # Smaller bags, a slightly weaker forest. One secure forest of 10 trees moves by 20 %
    # with its random_state on these 1,200 rows (the ratio below: 0.99 to 1.53 over
    # random_state 0 to 3 on 2026-12-03), so the test's MSEs are of 30-tree forests,
    # summed over four random states.
    Xt, yt = _data(3000, 7)
    mse = {"half": 0.0, "full": 0.0}
    for rs in range(4):
        for name, bag in (("half", 0.5), ("full", None)):
            kw = dict(n_estimators=30, random_state=rs, privacy=privacy, max_samples=bag)
            forest = ff.FedForestRegressor(**kw).fit(X, y, client_ids=h)
            mse[name] += np.mean((forest.predict(Xt) - yt) ** 2)
    assert mse["half"] < 1.25 * mse["full"]


def test_max_samples_is_validated() -> None:
    X, y = _data(200, 8)
    with pytest.raises(ValueError, match="`max_sample` cannot be set if `bootstrap=False`"):
        ff.FedForestRegressor(max_samples=0.5, bootstrap=False, privacy="none").fit(X, y)
    with pytest.raises(ValueError, match="max_samples must be <= n_samples=200"):
        ff.FedForestRegressor(max_samples=500, privacy="none").fit(X, y)
    with pytest.raises(ValueError, match="max_samples"):
        ff.FedForestRegressor(max_samples=1.5, privacy="none").fit(X, y)


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_warm_start_equals_one_fit(privacy: str) -> None:
    X, y = _data(800, 9)
    h = np.arange(800) % 4
    kw = dict(random_state=3, privacy=privacy, oob_score=True)
    once = ff.FedForestRegressor(n_estimators=12, **kw).fit(X, y, client_ids=h)
    warm = ff.FedForestRegressor(n_estimators=5, warm_start=True, **kw).fit(X, y, client_ids=h)
    first = list(warm.trees_)
    warm.set_params(n_estimators=12).fit(X, y, client_ids=h)
    assert len(warm) == 12 and warm.trees_[:5] == first
    np.testing.assert_array_equal(warm.predict(X), once.predict(X))
    np.testing.assert_allclose(warm.feature_importances_, once.feature_importances_, rtol=1e-12)
    assert warm.oob_score_ == pytest.approx(once.oob_score_, rel=1e-12)
    with pytest.warns(UserWarning, match="without increasing n_estimators"):
        warm.fit(X, y, client_ids=h)
    with pytest.raises(ValueError, match="must be larger or equal"):
        warm.set_params(n_estimators=3).fit(X, y, client_ids=h)
    assert len(warm) == 12  # a refused warm start keeps the forest
    cold = ff.FedForestRegressor(n_estimators=4, warm_start=False, **kw).fit(X, y, client_ids=h)
    assert len(cold.fit(X, y, client_ids=h)) == 4


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_warm_start_refuses_other_columns_or_categories(privacy: str) -> None:
    # The trees read columns by position and categories by code: reordered or renamed
    # columns and a new category level gave the earlier trees other features or
    # categories, silently; fewer columns under "secure" crashed ("provided out is the
    # wrong size for the accumulation").
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    frame["k"] = pd.Categorical(rng.choice(["x", "y", "z"], 200))
    y = frame["a"].to_numpy() + (frame["k"] == "z").to_numpy()
    kw = dict(n_estimators=3, max_depth=3, warm_start=True, random_state=0, privacy=privacy)
    model = ff.FedForestRegressor(**kw).fit(frame, y)
    first = list(model.trees_)
    new_level = frame.assign(k=frame["k"].cat.add_categories("w").where(frame.index > 9, "w"))
    for other in (
        frame[["c", "b", "a", "k"]],
        frame.rename(columns={"a": "z"}),
        frame[["a", "b", "k"]],
        new_level,
    ):
        model.set_params(n_estimators=5)
        with pytest.raises(ValueError, match="differ from the first fit's"):
            model.fit(other, y)
        assert [id(t) for t in model.trees_] == [id(t) for t in first]  # the forest it had
        with pytest.raises(ValueError, match="differ from the first fit's"):
            model.fit_federated(ff.LocalFederation([ff.Client(other, y, "a")]))
        assert [id(t) for t in model.trees_] == [id(t) for t in first]  # it cleared them
    assert len(model.set_params(n_estimators=5).fit(frame, y).trees_) == 5


def test_warm_start_on_a_loaded_model_is_refused(tmp_path) -> None:
    X, y = _data(300, 10)
    model = ff.FedForestRegressor(n_estimators=3, privacy="none", random_state=0).fit(X, y)
    model.save(tmp_path / "m.ffm")
    loaded = ff.load(tmp_path / "m.ffm").set_params(warm_start=True, n_estimators=5)
    with pytest.raises(ValueError, match="loaded model file"):
        loaded.fit(X, y)
    assert len(loaded) == 3


def test_warm_start_under_dp_adds_up_the_budgets(tmp_path) -> None:
    # Each call is its own mechanism spending its own epsilon; over the forest they compose
    # (basic composition): privacy_report_ keeps the last call's and the totals.
    X, y = _data(1200, 11)
    h = np.arange(1200) % 4
    kw = dict(privacy="dp", epsilon=5.0, max_depth=3, random_state=0, warm_start=True)
    model = ff.FedForestRegressor(n_estimators=3, **kw).fit(X, y, client_ids=h)
    first = dict(model.privacy_report_)
    # The totals add up each call's guarantee (5.0), not its ex-post epsilon_spent, which
    # is no bound by itself (the trees' stops depend on earlier noisy releases).
    assert first["fits"] == 1 and first["epsilon_total"] == first["epsilon_guarantee"] == 5.0
    model.set_params(n_estimators=6).fit(X, y, client_ids=h)
    report = model.privacy_report_
    assert len(model) == 6 and report["fits"] == 2
    assert report["epsilon_total"] == pytest.approx(10.0)
    assert report["delta_total"] == pytest.approx(first["delta"] + report["delta"])
    model.save(tmp_path / "dp.ffm")
    assert ff.load(tmp_path / "dp.ffm").privacy_report_["epsilon_total"] == report["epsilon_total"]


def test_decision_path_equals_scikit_learns() -> None:
    X, y = _data(500, 11)
    model = ff.FedForestRegressor(n_estimators=4, privacy="none", random_state=0).fit(X, y)
    ours, ptr = model.decision_path(X[:50])
    theirs, ptr_sk = model.to_sklearn().decision_path(X[:50])
    np.testing.assert_array_equal(ptr, ptr_sk)
    assert (ours != theirs).nnz == 0
    # every path runs from the root to the row's leaf
    leaves = model.apply(X[:50])
    assert all(ours[i, ptr[t] + leaves[i, t]] == 1 for i in range(50) for t in range(4))
    assert np.all(np.asarray(ours[:, ptr[:-1]].todense()) == 1)


def test_what_cannot_be_federated_says_why() -> None:
    X, y = _data(100, 12)
    with pytest.raises(ValueError, match="median, which is not a sum"):
        ff.FedForestRegressor(criterion="absolute_error").fit(X, y)
    with pytest.raises(ValueError, match="best-first"):
        ff.FedForestRegressor(max_leaf_nodes=8).fit(X, y)
    assert ff.FedForestRegressor().get_params()["max_leaf_nodes"] is None


def test_callable_oob_score_as_scikit_learn() -> None:
    from sklearn.metrics import balanced_accuracy_score, mean_absolute_error

    X, y = _data(600, 13)
    h = np.arange(600) % 3
    reg = ff.FedForestRegressor(
        n_estimators=20, oob_score=mean_absolute_error, privacy="none", random_state=0
    ).fit(X, y, client_ids=h)
    ok = ~np.isnan(reg.oob_prediction_)
    assert reg.oob_score_ == pytest.approx(mean_absolute_error(y[ok], reg.oob_prediction_[ok]))
    labels = np.where(y > np.median(y), "high", "low")
    clf = ff.FedForestClassifier(
        n_estimators=20, oob_score=balanced_accuracy_score, privacy="none", random_state=0
    ).fit(X, labels, client_ids=h)
    proba = clf.oob_decision_function_
    ok = ~np.isnan(proba).any(axis=1)
    encoded = np.searchsorted(clf.classes_, labels)
    expect = balanced_accuracy_score(encoded[ok], np.argmax(proba[ok], axis=1))
    assert clf.oob_score_ == pytest.approx(expect) and 0.7 < clf.oob_score_ <= 1.0
    fed = ff.LocalFederation([ff.Client(X[h == k], y[h == k], str(k)) for k in range(3)])
    with pytest.raises(ValueError, match="callable oob_score needs every row"):
        ff.FedForestRegressor(oob_score=mean_absolute_error).fit_federated(fed)


def test_callable_oob_score_survives_save_and_load(tmp_path) -> None:
    from sklearn.metrics import mean_absolute_error

    X, y = _data(300, 14)
    model = ff.FedForestRegressor(
        n_estimators=20, oob_score=mean_absolute_error, privacy="none", random_state=0
    ).fit(X, y)
    model.save(tmp_path / "m.ffm")
    back = ff.load(tmp_path / "m.ffm")
    assert back.oob_score is True and back.oob_score_ == model.oob_score_
