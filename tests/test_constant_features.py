"""max_features and constant features: scikit-learn's rule (review of the code, issue 12)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.federated.server.grower import _sample_features


def _one_signal(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[:, 1:] = 0.0  # every feature but the first is constant
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=n)


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_constant_features_do_not_make_leaves(privacy: str) -> None:
    """18 of 20 trees were single leaves (train MSE 0.92) when constants used up the draw."""
    X, y = _one_signal(1200, 0)
    Xt, yt = _one_signal(2000, 1)
    model = FedForestRegressor(
        n_estimators=20, max_features=1, privacy=privacy, random_state=0
    ).fit(X, y, client_ids=np.arange(1200) % 4)
    assert all(t.node_count > 1 for t in model.trees_)
    sk = RandomForestRegressor(n_estimators=20, max_features=1, random_state=0).fit(X, y)
    ours = np.mean((model.predict(Xt) - yt) ** 2)
    theirs = np.mean((sk.predict(Xt) - yt) ** 2)
    assert ours < 0.03 and theirs < 0.03  # noise variance 0.01; a single leaf gives ~0.45
    assert ours < 2.0 * theirs


def test_draw_is_unchanged_without_constants_and_extended_when_all_are() -> None:
    d, k = 8, 2
    plain = _sample_features([np.random.default_rng(3)], np.zeros(5, np.int64), d, k)
    none_known = _sample_features(
        [np.random.default_rng(3)], np.zeros(5, np.int64), d, k, np.zeros((5, d), bool)
    )
    assert np.array_equal(plain[1], none_known[1]) and np.array_equal(plain[0], none_known[0])
    constant = np.ones((5, d), bool)
    constant[:, 5] = False  # only feature 5 varies
    off, feats = _sample_features([np.random.default_rng(3)], np.zeros(5, np.int64), d, k, constant)
    assert np.array_equal(np.diff(off), np.ones(5)) and np.all(feats == 5)
    constant[:, :] = True  # nothing varies: no feature to send, the node is a leaf
    off, feats = _sample_features([np.random.default_rng(3)], np.zeros(5, np.int64), d, k, constant)
    assert feats.size == 0 and off[-1] == 0


def test_some_constant_draws_send_only_the_others() -> None:
    d, k = 6, 3
    constant = np.zeros((1, d), bool)
    constant[0, [0, 1, 2]] = True
    draws = []
    for seed in range(30):
        off, feats = _sample_features(
            [np.random.default_rng(seed)], np.zeros(1, np.int64), d, k, constant
        )
        drawn = np.random.default_rng(seed).choice(d, size=k, replace=False)
        expect = [f for f in drawn if f >= 3] or None
        if expect is not None:
            assert feats.tolist() == expect  # the non-constant ones of the same draw
        else:
            assert feats.size == 1 and feats[0] >= 3  # all constant: drawing went on
        draws.append(feats.size)
    assert max(draws) > 1


@pytest.mark.parametrize("privacy", ["none", "secure"])
@pytest.mark.parametrize("task", ["regression", "binary", "multiclass"])
def test_a_category_column_with_one_category_is_constant(privacy: str, task: str) -> None:
    """A level whose only categorical pairs had one category crashed under "none" (a reshape
    of no node in ``best_set_splits``): the column is constant and the trees use the other."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"num": rng.normal(size=200), "cat": pd.Categorical(["x"] * 200)})
    signal = X["num"].to_numpy()
    y: np.ndarray = {
        "regression": signal,
        "binary": signal > 0,
        "multiclass": np.digitize(signal, [-0.5, 0.5]),
    }[task]
    cls = FedForestRegressor if task == "regression" else FedForestClassifier
    model = cls(n_estimators=3, max_depth=3, privacy=privacy, random_state=0)
    model.fit(X, y, client_ids=np.arange(200) % 3)
    assert model.feature_importances_.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("privacy", ["none", "secure", "dp"])
def test_a_one_category_column_does_not_make_leaves(privacy: str) -> None:
    """Like a constant numeric column: 2 of 3 trees were single leaves when it was drawn.

    600 rows: at 200 the "dp" noise alone left a tree a single leaf in about one fit of six.
    """
    rng = np.random.default_rng(0)
    n = 600
    num = rng.normal(size=n)
    y = np.sin(2 * num)
    trees = {}
    for kind, column in [("category", pd.Categorical(["x"] * n)), ("numeric", np.zeros(n))]:
        X = pd.DataFrame({"num": num, "c": column})
        kw = {"epsilon": 50.0} if privacy == "dp" else {}
        model = FedForestRegressor(
            n_estimators=3, max_depth=3, max_features=1, privacy=privacy, random_state=0, **kw
        ).fit(X, y, client_ids=np.arange(n) % 3)
        trees[kind] = [t.node_count for t in model.trees_]
    if privacy != "dp":
        # Under "dp" neither is known constant: a numeric column's histograms are noisy, and
        # a categorical column's domain is declared (here by fit, from its rows) with the
        # missing category, which one row could add (docs/privacy.md).
        assert all(n > 1 for n in trees["category"])
        assert trees["category"] == trees["numeric"]


def _cells(k: int) -> np.ndarray:
    """Every combination of ``k`` 0/1 values, one a row."""
    return np.array(np.meshgrid(*[[0.0, 1.0]] * k, indexing="ij")).reshape(k, -1).T


@pytest.mark.parametrize("max_features", [1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_binary_columns_grow_scikit_learns_trees_in_verification_mode(
    seed: int, max_features: int
) -> None:
    """A 0/1 column is constant in both children of a split on it (the server knows: its
    sketches are every node value), so a child that draws it draws on, as scikit-learn.

    Fully grown on 0/1 columns, every tree cuts the rows into the cells of the columns
    whatever the order of the draws: each tree must then predict scikit-learn's values at
    every cell, with its node count. Before, a child drawing its parent's column became a
    leaf (9 nodes of 15, on average, and predictions off by up to 3.4).
    """
    rng = np.random.default_rng(seed)
    n, k = 400, 3
    X = rng.integers(0, 2, (n, k)).astype(np.float64)
    y = X @ np.array([1.0, 2.0, 4.0]) + rng.normal(0, 0.5, n)
    model = FedForestRegressor(
        n_estimators=5, bootstrap=False, max_features=max_features, n_bins=None,
        privacy="none", min_samples_leaf=1, random_state=seed,
    ).fit(X, y, client_ids=np.arange(n) % 3)  # fmt: skip
    ref = DecisionTreeRegressor(max_features=max_features, random_state=seed).fit(X, y)
    assert ref.tree_.node_count == 2 ** (k + 1) - 1  # every cell a leaf
    for tree in model.estimators_:
        assert tree.tree_.node_count == ref.tree_.node_count
        np.testing.assert_allclose(
            tree.predict(_cells(k)), ref.predict(_cells(k)), rtol=0, atol=1e-12
        )


@pytest.mark.parametrize("seed", [0, 1])
def test_binary_columns_in_a_classifier_in_verification_mode(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, k = 600, 3
    X = rng.integers(0, 2, (n, k)).astype(np.float64)
    p = 1 / (1 + np.exp(-(X @ np.array([1.0, -2.0, 1.5]) - 0.5)))
    labels = (rng.random(n) < p).astype(int)
    model = FedForestClassifier(
        n_estimators=5, bootstrap=False, max_features=1, n_bins=None, privacy="none",
        min_samples_leaf=1, random_state=seed,
    ).fit(X, labels, client_ids=np.arange(n) % 4)  # fmt: skip
    ref = DecisionTreeClassifier(max_features=1, random_state=seed).fit(X, labels)
    assert ref.tree_.n_leaves == 2**k  # no cell is pure: every cell a leaf
    for tree in model.estimators_:
        assert tree.tree_.n_leaves == ref.tree_.n_leaves
        np.testing.assert_allclose(
            tree.predict_proba(_cells(k)), ref.predict_proba(_cells(k)), rtol=0, atol=1e-12
        )


def _one_hot_and_binary(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four one-hot columns, one 0/1 column; the target, and every cell of the columns."""
    rng = np.random.default_rng(seed)
    cat, b = rng.integers(0, 4, n), rng.integers(0, 2, n)
    X = np.column_stack([np.eye(4)[cat], b])
    y = np.array([0.0, 1.0, 3.0, 7.0])[cat] + 2.0 * b + rng.normal(0, 0.5, n)
    cells = np.array([np.r_[np.eye(4)[c], v] for c in range(4) for v in (0.0, 1.0)])
    return X, y, cells


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_hot_columns_grow_scikit_learns_trees_in_verification_mode(seed: int) -> None:
    """Below a split on one one-hot column its siblings can be constant (all 0), which the
    server learns only from the node's Round A: the node then stays in the frontier and
    draws on at the next level (scikit-learn's continued draw), where it was a leaf (5 to
    8 leaves of 8, predictions off by up to 1.1)."""
    X, y, cells = _one_hot_and_binary(600, seed)
    model = FedForestRegressor(
        n_estimators=5, bootstrap=False, max_features=1, n_bins=None, privacy="none",
        min_samples_leaf=1, random_state=seed,
    ).fit(X, y, client_ids=np.arange(600) % 3)  # fmt: skip
    ref = DecisionTreeRegressor(max_features=1, random_state=seed).fit(X, y)
    assert ref.tree_.n_leaves == 8  # every cell a leaf
    for tree in model.estimators_:
        assert tree.tree_.n_leaves == 8
        np.testing.assert_allclose(tree.predict(cells), ref.predict(cells), rtol=0, atol=1e-12)


@pytest.mark.parametrize("max_depth", [2, 3, 4])
def test_drawing_on_keeps_the_rounds_and_max_depth(max_depth: int) -> None:
    """A node drawing on takes the next level's rounds: never more rounds than without it
    (2 max_depth + 2 here), never a node deeper than max_depth (at the last level it stays
    a leaf)."""
    X, y, _ = _one_hot_and_binary(600, 0)
    model = FedForestRegressor(
        n_estimators=8, bootstrap=False, max_features=1, n_bins=None, privacy="none",
        min_samples_leaf=1, max_depth=max_depth, random_state=0,
    ).fit(X, y, client_ids=np.arange(600) % 3)  # fmt: skip
    assert model.communication_.rounds <= 2 * max_depth + 3
    assert max(t.tree_.max_depth for t in model.estimators_) <= max_depth
    assert all(t.tree_.n_leaves <= 2**max_depth for t in model.estimators_)
    # each root holds every row (the pass-through moved no row elsewhere)
    assert all(t.tree_.n_node_samples[0] == 600 for t in model.estimators_)
