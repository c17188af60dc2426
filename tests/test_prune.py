"""ccp_alpha: minimal cost-complexity pruning of every grown tree, as scikit-learn's."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils._param_validation import InvalidParameterError

import fedforest as ff
from fedforest.tree.apply import apply_forest
from fedforest.tree.arrays import Tree, pack_forest
from fedforest.tree.prune import ccp_prune, prune_tree
from tests._exact import EXACT_TREE

EXACT = {**EXACT_TREE, "max_depth": 6}


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=n)
    return X, y, rng.integers(0, 3, n)


def _alphas(path: np.ndarray) -> list[float]:
    """Midpoints between consecutive effective alphas: no comparison sits on a tie."""
    mid = (path[1:] + path[:-1]) / 2
    return [float(mid[k]) for k in (0, len(mid) // 3, 2 * len(mid) // 3, len(mid) - 1)]


def _as_tree(t) -> Tree:
    """scikit-learn's tree_ (depth-first order) as fedforest's flat arrays."""
    n = t.node_count
    return Tree(
        feature=t.feature.astype(np.int32),
        threshold=t.threshold.astype(np.float64),
        children_left=t.children_left.astype(np.int32),
        children_right=t.children_right.astype(np.int32),
        value=t.value[:, 0, :].astype(np.float64),
        n_node_samples=t.n_node_samples.astype(np.int64),
        weighted_n_node_samples=t.weighted_n_node_samples.astype(np.float64),
        impurity=t.impurity.astype(np.float64),
        missing_go_to_left=np.zeros(n, np.uint8),
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_pruning_a_scikit_learn_tree_gives_scikit_learns_pruned_tree(seed: int) -> None:
    # The kernel against scikit-learn's own pruning, on scikit-learn's trees (depth-first
    # order, deep: no max_depth), at alphas along its pruning path.
    X, y, _ = _data(500, seed)
    full = DecisionTreeRegressor(random_state=seed, min_samples_leaf=2).fit(X, y)
    path = full.cost_complexity_pruning_path(X, y).ccp_alphas
    for alpha in _alphas(path):
        ref = DecisionTreeRegressor(random_state=seed, min_samples_leaf=2, ccp_alpha=alpha)
        ref.fit(X, y)
        ours = prune_tree(_as_tree(full.tree_), alpha)
        assert ours.children_left.size == ref.tree_.node_count
        np.testing.assert_array_equal(ours.feature, ref.tree_.feature)
        np.testing.assert_array_equal(ours.threshold, ref.tree_.threshold)
        np.testing.assert_array_equal(ours.children_left, ref.tree_.children_left)
        np.testing.assert_array_equal(ours.children_right, ref.tree_.children_right)


def test_zero_alpha_and_an_alpha_below_every_link_prune_nothing() -> None:
    X, y, _ = _data(300, 2)
    tree = _as_tree(DecisionTreeRegressor(random_state=0).fit(X, y).tree_)
    assert prune_tree(tree, 0.0) is tree
    assert prune_tree(tree, 1e-300) is tree
    root = prune_tree(tree, 1e9)  # every branch costs less than this: the root alone
    assert root.children_left.tolist() == [-1] and root.feature.tolist() == [-2]
    np.testing.assert_array_equal(root.value, tree.value[:1])


@pytest.mark.parametrize("privacy_kw", [{}, {"sample_weight": True}])
def test_exact_regressor_equals_scikit_learn_with_ccp_alpha(privacy_kw: dict) -> None:
    X, y, h = _data(800, 3)
    w = np.random.default_rng(3).exponential(size=y.size) if privacy_kw else None
    full = DecisionTreeRegressor(max_depth=6, min_samples_leaf=5, random_state=0)
    path = full.cost_complexity_pruning_path(X, y, sample_weight=w).ccp_alphas
    for alpha in _alphas(path):
        ours = ff.FedForestRegressor(ccp_alpha=alpha, **EXACT)
        ours.fit(X, y, client_ids=h, sample_weight=w)
        ref = DecisionTreeRegressor(
            max_depth=6, min_samples_leaf=5, random_state=0, ccp_alpha=alpha
        )
        ref.fit(X, y, sample_weight=w)
        assert ours.trees_[0].children_left.size == ref.tree_.node_count
        np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=1e-12)
        np.testing.assert_allclose(ours.feature_importances_, ref.feature_importances_, atol=1e-12)


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
def test_exact_classifier_equals_scikit_learn_with_ccp_alpha(criterion: str) -> None:
    X, y, h = _data(800, 4)
    labels = np.digitize(y, [-0.5, 0.7])  # three classes
    # Depth 4: deeper, ties between equally good splits of small nodes are broken in
    # scikit-learn's random feature order and in ours differently (tests/test_class_weight.py).
    exact = {**EXACT, "max_depth": 4}
    kw = dict(max_depth=4, min_samples_leaf=5, random_state=0, criterion=criterion)
    unpruned = ff.FedForestClassifier(criterion=criterion, **exact).fit(X, labels, client_ids=h)
    full = DecisionTreeClassifier(**kw).fit(X, labels)
    # Precondition: the grown trees are the same.
    np.testing.assert_array_equal(unpruned.predict_proba(X), full.predict_proba(X))
    path = full.cost_complexity_pruning_path(X, labels).ccp_alphas
    for alpha in _alphas(path):
        ours = ff.FedForestClassifier(ccp_alpha=alpha, criterion=criterion, **exact)
        ours.fit(X, labels, client_ids=h)
        ref = DecisionTreeClassifier(ccp_alpha=alpha, **kw).fit(X, labels)
        assert ours.trees_[0].children_left.size == ref.tree_.node_count
        np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-12)


def _collapsed_predictions(tree: Tree, alpha: float, X: np.ndarray) -> np.ndarray:
    """The unpruned tree's leaves, each walked up to the node pruning made a leaf."""
    keep = np.empty(tree.children_left.size, dtype=np.bool_)
    w = tree.weighted_n_node_samples
    ccp_prune(tree.children_left, tree.children_right, w / w[0] * tree.impurity, alpha, keep)
    parent = np.full(keep.size, -1)
    for i in np.flatnonzero(tree.children_left >= 0):
        parent[tree.children_left[i]] = parent[tree.children_right[i]] = i
    f, thr, left, right, _, offsets = pack_forest([tree])
    leaf = np.empty((X.shape[0], 1), dtype=np.int32)
    apply_forest(X, f, thr, left, right, offsets, leaf)
    out = []
    for node in leaf[:, 0]:
        # the highest kept ancestor whose children were removed, else the leaf itself
        top, j = node, node
        while j >= 0:
            if keep[j] and tree.children_left[j] >= 0 and not keep[tree.children_left[j]]:
                top = j
            j = parent[j]
        out.append(tree.value[top, 0])
    return np.array(out)


def test_pruned_secure_forest_predicts_its_collapsed_trees_and_converts() -> None:
    X, y, h = _data(1500, 5)
    kw = dict(n_estimators=6, random_state=1, max_depth=6)
    full = ff.FedForestRegressor(**kw).fit(X, y, client_ids=h)  # privacy="secure"
    alpha = 2e-3
    pruned = ff.FedForestRegressor(ccp_alpha=alpha, **kw).fit(X, y, client_ids=h)
    n_full = sum(t.children_left.size for t in full.trees_)
    n_pruned = sum(t.children_left.size for t in pruned.trees_)
    assert n_pruned < n_full  # the alpha removes branches
    expected = np.mean([_collapsed_predictions(t, alpha, X) for t in full.trees_], axis=0)
    np.testing.assert_allclose(pruned.predict(X), expected, atol=1e-12)
    # The pruned trees are valid flat trees: scikit-learn predicts them the same.
    np.testing.assert_allclose(pruned.to_sklearn().predict(X), pruned.predict(X), atol=1e-5)


def test_pruning_keeps_set_splits_and_the_model_file(tmp_path) -> None:
    rng = np.random.default_rng(6)
    n = 1200
    cat = rng.integers(0, 6, n)
    X = np.column_stack([rng.normal(size=n), cat])
    y = X[:, 0] + np.array([0.0, 2.0, -1.0, 2.0, 0.5, -1.0])[cat] + 0.3 * rng.normal(size=n)
    h = rng.integers(0, 3, n)
    kw = dict(n_estimators=4, random_state=0, categorical_features=[1], privacy="none")
    full = ff.FedForestRegressor(**kw).fit(X, y, client_ids=h)
    alpha = 5e-3
    pruned = ff.FedForestRegressor(ccp_alpha=alpha, **kw).fit(X, y, client_ids=h)
    assert sum(t.set_size.sum() for t in pruned.trees_) > 0  # set splits survive pruning
    assert sum(t.children_left.size for t in pruned.trees_) < sum(
        t.children_left.size for t in full.trees_
    )
    for before, after in zip(full.trees_, pruned.trees_, strict=True):
        assert after.set_code.size == after.set_size.sum()
        assert after.set_size[after.children_left < 0].sum() == 0  # leaves hold no codes
        assert set(after.impurity) <= set(before.impurity)
    path = tmp_path / "pruned.npz"
    pruned.save(path)
    back = ff.load(path)
    assert back.get_params()["ccp_alpha"] == alpha
    np.testing.assert_array_equal(back.predict(X), pruned.predict(X))


def test_oob_score_is_the_pruned_forests_and_on_par_with_scikit_learn() -> None:
    X, y, h = _data(3000, 7)
    X_test, y_test, _ = _data(3000, 8)
    kw = dict(n_estimators=40, random_state=0, privacy="none", oob_score=True)
    ours = ff.FedForestRegressor(ccp_alpha=0.01, **kw).fit(X, y, client_ids=h)
    plain = ff.FedForestRegressor(**kw).fit(X, y, client_ids=h)
    assert ours.oob_score_ != plain.oob_score_
    ref = RandomForestRegressor(
        n_estimators=40, max_depth=8, min_samples_leaf=5, max_features=1 / 3, ccp_alpha=0.01,
        random_state=0,
    ).fit(X, y)  # fmt: skip
    ours_mse = np.mean((ours.predict(X_test) - y_test) ** 2)
    ref_mse = np.mean((ref.predict(X_test) - y_test) ** 2)
    assert ours_mse <= 1.05 * ref_mse
    assert sum(t.children_left.size for t in ours.trees_) < sum(
        t.children_left.size for t in plain.trees_
    )


def test_negative_ccp_alpha_is_refused_as_scikit_learn() -> None:
    X, y, h = _data(100, 9)
    with pytest.raises(InvalidParameterError, match="ccp_alpha"):
        ff.FedForestRegressor(ccp_alpha=-0.1).fit(X, y, client_ids=h)
