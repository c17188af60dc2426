"""criterion="poisson": half Poisson deviance from additive (sum y, sum y log y) statistics.

The split gain needs only each child's (W, S): ``S_L log(S_L/W_L) + S_R log(S_R/W_R) -
S log(S/W)``, a child whose target sum is at most EPSILON being inadmissible, as in
scikit-learn; the node impurity needs ``sum w y log y`` too, which each client adds up.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import mean_poisson_deviance
from sklearn.tree import DecisionTreeRegressor

import fedforest as ff
from fedforest.federated.server.checks import InvalidReply, _check_stats
from tests._exact import EXACT_TREE


def _counts(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    rate = np.exp(0.5 * X[:, 0] - 0.7 * X[:, 1] - 0.5)  # many zero counts
    return X, rng.poisson(rate).astype(float), rate


@pytest.mark.parametrize("weighted", [False, True])
def test_exact_tree_equals_scikit_learn(weighted: bool) -> None:
    X, y, _ = _counts(1000, 0)
    assert np.mean(y == 0) > 0.4
    w = np.random.default_rng(1).uniform(0.3, 3.0, len(y)) if weighted else None
    cid = np.random.default_rng(2).integers(0, 3, len(y))
    ours = ff.FedForestRegressor(**EXACT_TREE, criterion="poisson", max_depth=6)
    ours.fit(X, y, client_ids=cid, sample_weight=w)
    ref = DecisionTreeRegressor(
        criterion="poisson", max_depth=6, min_samples_leaf=5, random_state=0
    )
    ref.fit(X, y, sample_weight=w)
    X_test, _, _ = _counts(500, 3)
    np.testing.assert_allclose(ours.predict(X_test), ref.predict(X_test), rtol=1e-12, atol=1e-12)
    tree, st = ours.trees_[0], ref.tree_
    assert tree.node_count == st.node_count
    # The same node impurities (half Poisson deviance); the trees number their nodes apart.
    np.testing.assert_allclose(np.sort(tree.impurity), np.sort(st.impurity), rtol=1e-9)


def test_forest_is_on_par_with_scikit_learn() -> None:
    ratios = []
    for seed in range(3):
        X, y, _ = _counts(3000, 10 + seed)
        X_test, _, rate = _counts(3000, 20 + seed)
        cid = np.random.default_rng(seed).integers(0, 3, len(y))
        ours = ff.FedForestRegressor(
            criterion="poisson", n_estimators=60, privacy="none", random_state=seed
        ).fit(X, y, client_ids=cid)
        ref = RandomForestRegressor(
            criterion="poisson", n_estimators=60, min_samples_leaf=5, max_features=1 / 3,
            max_depth=8, random_state=seed,
        ).fit(X, y)  # fmt: skip
        dev = [mean_poisson_deviance(rate, m.predict(X_test)) for m in (ours, ref)]
        ratios.append(dev[0] / dev[1])
    assert np.mean(ratios) < 1.05, ratios
    assert np.all(ours.predict(X_test) > 0)  # Poisson leaves are positive means


def test_saved_and_exported_poisson_forests_predict_the_same(tmp_path) -> None:
    X, y, _ = _counts(600, 4)
    model = ff.FedForestRegressor(criterion="poisson", n_estimators=4, privacy="none")
    model.fit(X, y)
    model.save(tmp_path / "m.ffm")
    back = ff.load(tmp_path / "m.ffm")
    assert back.criterion == "poisson"
    np.testing.assert_array_equal(back.predict(X), model.predict(X))


def test_what_poisson_cannot_take_is_refused_saying_why() -> None:
    X, y, _ = _counts(300, 5)
    with pytest.raises(ValueError, match="negative which is not allowed for Poisson"):
        ff.FedForestRegressor(criterion="poisson", privacy="none").fit(X, y - 1)
    with pytest.raises(ValueError, match="Sum of y is not strictly positive"):
        ff.FedForestRegressor(criterion="poisson", privacy="none").fit(X, 0 * y)
    with pytest.raises(ValueError, match="Client 'b'.*negative"):
        clients = [ff.Client(X[:150], y[:150], name="a"), ff.Client(X[150:], -y[150:], name="b")]
        ff.FedForestRegressor(criterion="poisson", privacy="none").fit_federated(
            ff.LocalFederation(clients)
        )
    with pytest.raises(ValueError, match="negative which is not allowed for Poisson"):
        ff.FedForestRegressor(criterion="poisson", privacy="none").fit(X, np.c_[y, y - 1])
    with pytest.raises(ValueError, match="avgimp"):
        ff.FedForestRegressor(criterion="poisson", privacy="none", split_rule="avgimp").fit(X, y)


def test_category_and_client_index_splits_under_poisson() -> None:
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 1200
    X = pd.DataFrame({"a": pd.Categorical(rng.choice(list("pqrs"), n)), "b": rng.normal(size=n)})
    h = np.repeat([0, 1, 2], 400)
    rate = np.exp(0.5 * X["a"].cat.codes.to_numpy() - 1 + 0.5 * h)
    y = rng.poisson(rate).astype(float)
    model = ff.FedForestRegressor(
        criterion="poisson", n_estimators=20, privacy="none", split_on_client=True, random_state=0
    ).fit(X, y, client_ids=h)
    assert model.feature_importances_[0] > model.feature_importances_[1]
    assert model.client_importance_ > 0.05
    pred = model.predict(X, client_ids=h)
    assert np.corrcoef(pred, rate)[0, 1] > 0.9


def test_a_reply_whose_y_log_y_breaks_jensen_is_refused() -> None:
    # sum w y log y >= S log(S / W) for y >= 0: a client claiming less is lying.
    good = np.array([[4.0, 4.0, 6.0, 6.0 * np.log(1.5)]])
    _check_stats("c", "round_a", "array 'summary'", good, 2, "poisson")
    bad = good.copy()
    bad[0, 3] = -1.0
    with pytest.raises(InvalidReply, match="'c'.*y log y"):
        _check_stats("c", "round_a", "array 'summary'", bad, 2, "poisson")
    negative = good.copy()
    negative[0, 2] = -1.0
    with pytest.raises(InvalidReply, match="'c'"):
        _check_stats("c", "round_a", "array 'summary'", negative, 2, "poisson")
