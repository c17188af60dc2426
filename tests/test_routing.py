"""Routing kernels of the swarm strategies: hand-computed cases and NumPy twins."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest.swarm import ShareBundle, SwarmForest
from fedforest.swarm import routing as R
from fedforest.swarm.train import (
    Imputer,
    forest_surrogates,
    tree_surrogates,
    tree_surrogates_numpy,
    trees_from_sklearn,
)
from fedforest.tree.arrays import Tree, pack_forest

# --------------------------------------------------------------------------- a two-level tree
#
#            node 0: a <= 0.5      (w = 10, counts [4, 6])
#           /                \
#   node 1: b <= 1.0        node 2: leaf (w = 4, counts [1, 3])
#     /          \
# node 3: leaf   node 4: leaf
# (w = 2, [2, 0]) (w = 4, [1, 3])

COUNTS = np.array([[4, 6], [3, 3], [1, 3], [2, 0], [1, 3]], dtype=np.float64)


def two_level_tree() -> Tree:
    w = COUNTS.sum(axis=1)
    return Tree(
        feature=np.array([0, 1, -2, -2, -2], dtype=np.int32),
        threshold=np.array([0.5, 1.0, -2, -2, -2], dtype=np.float64),
        children_left=np.array([1, 3, -1, -1, -1], dtype=np.int32),
        children_right=np.array([2, 4, -1, -1, -1], dtype=np.int32),
        value=COUNTS / w[:, None],
        n_node_samples=w.astype(np.int64),
        weighted_n_node_samples=w,
        impurity=np.zeros(5),
    )


def bundle(
    imputers: tuple[Imputer, ...] = (),
    kinds: tuple[str, str] = ("numeric", "numeric"),
    surrogate: tuple[int, float, bool] | None = None,
    std: tuple[float, float] = (1.0, 2.0),
    name: str = "A",
) -> ShareBundle:
    surr_feature = np.full((5, 1), -1, dtype=np.int32)
    surr_threshold = np.zeros((5, 1))
    surr_flip = np.zeros((5, 1), dtype=bool)
    surr_adj = np.zeros((5, 1))
    if surrogate is not None:  # a surrogate for node 1 (split on b)
        surr_feature[1, 0], surr_threshold[1, 0], surr_flip[1, 0] = surrogate
        surr_adj[1, 0] = 0.5
    return ShareBundle(
        name=name,
        feature_names=("a", "b"),
        feature_kinds=kinds,
        classes=np.array([0, 1]),
        trees=[two_level_tree()],
        class_counts=COUNTS.copy(),
        surr_feature=surr_feature,
        surr_threshold=surr_threshold,
        surr_flip=surr_flip,
        surr_agreement=surr_adj,
        imputers=imputers,
        feature_std=np.array(std),
        n_train=10,
    )


def numeric_b_imputer(quality: float = 0.5, n_train: int = 10) -> Imputer:
    """b_hat = 1 + 2 a."""
    return Imputer(
        "b", "numeric", ("a",), np.array([1.0]), np.array([[2.0]]), np.zeros(0), quality, n_train
    )


def site(a: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"a": a})


def sigmoid(d: float) -> float:
    return 1.0 / (1.0 + np.exp(-d))


# --------------------------------------------------------------------------- strategies by hand
def test_fpv_discards_trees_whose_path_needs_a_missing_feature() -> None:
    swarm = SwarmForest([bundle()])
    proba = swarm.predict_proba(site([0.0, 1.0]), strategy="fpv")
    # row 0 reaches node 1 (b missing): no tree left, so the pooled root distribution
    np.testing.assert_allclose(proba[0], [0.4, 0.6])
    np.testing.assert_allclose(proba[1], [0.25, 0.75])  # row 1 never needs b
    assert swarm.trees_used(site([0.0, 1.0]), "fpv").tolist() == [0, 1]


def test_pr_draws_right_with_the_training_fraction_and_respects_d_thresh() -> None:
    swarm = SwarmForest([bundle()])
    n = 4000
    X = site([0.0] * n)
    # node 1 is at depth 1: d_thresh=2 discards it, d_thresh=1 routes it at random
    assert swarm.trees_used(X, "pr", d_thresh=2).max() == 0
    proba = swarm.predict_proba(X, strategy="pr", d_thresh=1, random_state=7)
    p_right = 4 / 6  # eq. 3: N_R / N at node 1
    went_right = proba[:, 1] > 0.5
    assert abs(went_right.mean() - p_right) < 0.03
    # the draw is the counter-based hash: reproduce it exactly
    seed = int(np.random.default_rng(7).integers(0, 2**62))
    u = R.hash_uniform_numpy(seed, np.arange(n), np.full(n, 1))
    np.testing.assert_array_equal(went_right, u < p_right)
    again = swarm.predict_proba(X, strategy="pr", d_thresh=1, random_state=7)
    np.testing.assert_array_equal(proba, again)


def test_mi_compares_the_imputed_value_with_the_threshold() -> None:
    swarm = SwarmForest([bundle(imputers=(numeric_b_imputer(),))])
    proba = swarm.predict_proba(site([0.0, 0.25]), strategy="mi")
    np.testing.assert_allclose(proba[0], [1.0, 0.0])  # b_hat = 1 <= 1: left
    np.testing.assert_allclose(proba[1], [0.25, 0.75])  # b_hat = 1.5: right


def test_ipr_uses_the_sigmoid_of_the_standardised_distance() -> None:
    swarm = SwarmForest([bundle(imputers=(numeric_b_imputer(),))])
    n = 4000
    proba = swarm.predict_proba(site([0.25] * n), strategy="ipr", d_thresh=5, random_state=1)
    p_right = sigmoid((1.5 - 1.0) / 2.0)  # eq. 13-14: (b_hat - t) / sigma_b
    assert abs((proba[:, 1] > 0.5).mean() - p_right) < 0.03
    seed = int(np.random.default_rng(1).integers(0, 2**62))
    u = R.hash_uniform_numpy(seed, np.arange(n), np.full(n, 1))
    np.testing.assert_array_equal(proba[:, 1] > 0.5, u < p_right)


def test_mp_is_the_exact_mixture_of_eq_19() -> None:
    swarm = SwarmForest([bundle(imputers=(numeric_b_imputer(),))])
    p = sigmoid(0.25)
    proba = swarm.predict_proba(site([0.25, 0.0]), strategy="mp")
    np.testing.assert_allclose(
        proba[0], (1 - p) * np.array([1.0, 0.0]) + p * np.array([0.25, 0.75])
    )
    np.testing.assert_allclose(proba[1], [0.625, 0.375])  # sigmoid(0) = 1/2
    # without an imputer MP weighs the branches by the training fractions
    plain = SwarmForest([bundle()]).predict_proba(site([0.0]), strategy="mp")
    np.testing.assert_allclose(
        plain[0], 2 / 6 * np.array([1.0, 0]) + 4 / 6 * np.array([0.25, 0.75])
    )
    # root missing (a), b present: 0.6 * leaf reached through b + 0.4 * leaf 2
    root = SwarmForest([bundle()]).predict_proba(pd.DataFrame({"b": [0.0]}), strategy="mp")
    np.testing.assert_allclose(root[0], 0.6 * np.array([1.0, 0]) + 0.4 * np.array([0.25, 0.75]))


def test_categorical_imputer_sums_the_category_mass_on_each_side() -> None:
    probs = np.array([0.1, 0.2, 0.7])  # categories 0, 1, 2; node 1 sends b <= 1 left
    imp = Imputer(
        "b", "categorical", ("a",), np.log(probs), np.zeros((3, 1)), np.array([0.0, 1, 2]), 0.9, 10
    )
    swarm = SwarmForest([bundle(imputers=(imp,), kinds=("numeric", "categorical"))])
    mp = swarm.predict_proba(site([0.0]), strategy="mp")
    np.testing.assert_allclose(mp[0], 0.3 * np.array([1.0, 0]) + 0.7 * np.array([0.25, 0.75]))
    mi = swarm.predict_proba(site([0.0]), strategy="mi")  # most probable category 2 > 1
    np.testing.assert_allclose(mi[0], [0.25, 0.75])


def test_ss_follows_the_surrogate_and_falls_back_to_pr() -> None:
    for flip, expected in ((False, [0.25, 0.75]), (True, [1.0, 0.0])):
        swarm = SwarmForest([bundle(surrogate=(0, -1.0, flip))])  # a <= -1 goes left
        np.testing.assert_allclose(swarm.predict_proba(site([0.0]), strategy="ss")[0], expected)
    no_surrogate = SwarmForest([bundle()])
    assert no_surrogate.trees_used(site([0.0]), "ss", d_thresh=2)[0] == 0  # PR rule discards
    assert no_surrogate.trees_used(site([0.0]), "ss", d_thresh=1)[0] == 1


def test_imputer_selection_prefers_quality_then_training_size() -> None:
    worse = numeric_b_imputer(quality=0.2, n_train=99)
    swarm = SwarmForest([bundle(imputers=(numeric_b_imputer(0.5, 10),))])
    assert swarm._select_imputer(1, np.array([True, False])) is not None
    b2 = bundle(imputers=(worse,), name="B")
    pooled = SwarmForest([bundle(imputers=(numeric_b_imputer(0.5, 10),)), b2])
    assert pooled._select_imputer(1, np.array([True, False])).quality == 0.5  # type: ignore[union-attr]
    tie = numeric_b_imputer(quality=0.5, n_train=50)
    b3 = bundle(imputers=(tie,), name="C")
    pooled = SwarmForest([bundle(imputers=(numeric_b_imputer(0.5, 10),)), b3])
    assert pooled._select_imputer(1, np.array([True, False])).n_train == 50  # type: ignore[union-attr]


# --------------------------------------------------------------------------- surrogates by hand
def test_adjusted_agreement_by_hand() -> None:
    # primary p <= 6.5 sends rows 0..6 left (7) and 7..9 right (3): n_maj = 7
    p = np.arange(10.0)
    s = np.array([0, 1, 2, 3, 4, 5, 8, 6, 7, 9], dtype=np.float64)  # best cut s <= 5.5 agrees on 9
    weak = np.array([0, 1, 2, 3, 4, 9, 8, 6, 7, 5], dtype=np.float64)  # best: 8 at 4.5
    const = np.zeros(10)
    X = np.column_stack([p, s, weak, const])
    tree = Tree(
        feature=np.array([0, -2, -2], dtype=np.int32),
        threshold=np.array([6.5, -2, -2]),
        children_left=np.array([1, -1, -1], dtype=np.int32),
        children_right=np.array([2, -1, -1], dtype=np.int32),
        value=np.full((3, 2), 0.5),
        n_node_samples=np.array([10, 7, 3]),
        weighted_n_node_samples=np.array([10.0, 7, 3]),
        impurity=np.zeros(3),
    )
    feat, thr, flip, adj = forest_surrogates(X, [tree], np.array([0, 1, 2, 3]), 3)
    assert feat[0].tolist() == [1, 2, -1]  # the constant feature is no better than majority
    np.testing.assert_allclose(adj[0, :2], [(9 - 7) / (10 - 7), (8 - 7) / (10 - 7)])
    assert thr[0, 0] == 5.5 and not flip[0, 0]
    # reversed direction: -s mimics the split with "x <= t goes right"
    feat, thr, flip, adj = forest_surrogates(np.column_stack([p, -s]), [tree], np.array([1]), 1)
    assert feat[0, 0] == 1 and flip[0, 0] and adj[0, 0] == pytest.approx(2 / 3)


# --------------------------------------------------------------------------- twins
@pytest.fixture(scope="module")
def random_forest() -> tuple[list[Tree], np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    X[:, 5] = np.round(X[:, 5])
    y = (X[:, 0] + X[:, 1] - X[:, 2] + 0.3 * rng.normal(size=300) > 0).astype(int)
    rf = RandomForestClassifier(12, max_depth=6, random_state=0).fit(X, y)
    return trees_from_sklearn(rf)[0], X


def test_hash_uniform_twin() -> None:
    rows = np.arange(50, dtype=np.int64)
    nodes = (rows * 7919) % 101
    expected = np.array(
        [R.hash_uniform(123, int(r), int(n)) for r, n in zip(rows, nodes, strict=True)]
    )
    got = R.hash_uniform_numpy(123, rows, nodes)
    np.testing.assert_array_equal(got, expected)
    assert ((got >= 0) & (got < 1)).all() and abs(got.mean() - 0.5) < 0.15


def test_surrogate_kernel_matches_numpy_twin(random_forest: tuple[list[Tree], np.ndarray]) -> None:
    trees, X = random_forest
    for tree in trees:
        shape = (tree.node_count, 3)
        out = (
            np.full(shape, -1, np.int32),
            np.zeros(shape),
            np.zeros(shape, bool),
            np.zeros(shape),
        )
        cand = np.arange(6, dtype=np.int64)
        tree_surrogates(
            X, tree.feature, tree.threshold, tree.children_left, tree.children_right, cand, *out
        )
        for got, want in zip(out, tree_surrogates_numpy(X, tree, cand, 3), strict=True):
            np.testing.assert_array_equal(got, want)


def _kernel_inputs(trees: list[Tree], n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    feature, threshold, left, right, value, offsets = pack_forest(trees)
    m = feature.shape[0]
    depth = np.zeros(m, np.int32)
    for node in np.flatnonzero(left >= 0):
        depth[left[node]] = depth[right[node]] = depth[node] + 1
    w = np.concatenate([t.weighted_n_node_samples for t in trees])
    p_right = np.where(left >= 0, w[np.maximum(right, 0)] / w, 0.5)
    surr_feature = np.full((m, 2), -1, np.int32)
    surr_feature[::2, 0], surr_feature[::4, 1] = 3, 1
    imp_kind = np.zeros(6, np.int8)
    imp_kind[2], imp_kind[1] = R.KIND_NUMERIC, R.KIND_CATEGORICAL
    xhat = np.full((n, 6), np.nan)
    xhat[:, 2] = rng.normal(size=n)
    xhat[::5, 2] = np.nan
    xhat[:, 1] = rng.integers(-1, 2, n)
    cat_prob = rng.dirichlet(np.ones(3), size=n)[:, None, :]
    cat_prob[::7] = np.nan
    sigma = np.ones(6)
    sigma[2] = 0.7
    return dict(
        feature=feature, threshold=threshold, left=left, right=right, value=value,
        offsets=offsets, active=np.arange(len(trees)) % 4 != 1, p_right=p_right, depth=depth,
        surr_feature=surr_feature, surr_threshold=rng.normal(size=(m, 2)),
        surr_flip=rng.integers(0, 2, (m, 2)).astype(bool), imp_kind=imp_kind, xhat=xhat,
        sigma=sigma, cat_slot=np.zeros(6, np.int32), cat_values=np.array([[-1.0, 0.0, 1.0]]),
        cat_prob=cat_prob,
    )  # fmt: skip


MODES = [  # (use_surrogate, impute_mode, use_pr): fpv, pr, mi, ipr, ss
    (False, R.IMPUTE_NONE, False),
    (False, R.IMPUTE_NONE, True),
    (False, R.IMPUTE_HARD, False),
    (False, R.IMPUTE_SOFT, True),
    (True, R.IMPUTE_NONE, True),
]


@pytest.mark.parametrize("mode", MODES)
def test_route_single_matches_numpy_twin(
    random_forest: tuple[list[Tree], np.ndarray], mode: tuple[bool, int, bool]
) -> None:
    trees, _ = random_forest
    rng = np.random.default_rng(1)
    n = 150
    X = rng.normal(size=(n, 6))
    X[:, 2] = np.nan
    X[::3, 1] = np.nan
    X[::4, 3] = np.nan
    F = _kernel_inputs(trees, n, rng)
    use_surr, impute, use_pr = mode
    got = np.empty((len(trees), n), np.int32)
    want = np.empty((len(trees), n), np.int32)
    R.route_single(
        X, F["feature"], F["threshold"], F["left"], F["right"], F["offsets"], F["active"],
        F["p_right"], F["depth"], F["surr_feature"], F["surr_threshold"], F["surr_flip"],
        F["imp_kind"], F["xhat"], F["sigma"], F["cat_slot"], F["cat_values"], F["cat_prob"],
        use_surr, impute, use_pr, 2, 99, 5, got,
    )  # fmt: skip
    R.route_single_numpy(X, F, use_surr, impute, use_pr, 2, 99, 5, want)
    np.testing.assert_array_equal(got, want)
    assert (got == R.DISCARDED).any() and (got >= 0).any()


def test_marginal_proba_matches_numpy_twin(random_forest: tuple[list[Tree], np.ndarray]) -> None:
    trees, _ = random_forest
    rng = np.random.default_rng(2)
    n = 120
    X = rng.normal(size=(n, 6))
    X[:, 2] = np.nan
    X[::3, 1] = np.nan
    F = _kernel_inputs(trees, n, rng)
    got = np.empty((n, 2))
    want = np.empty((n, 2))
    R.marginal_proba(
        X, F["feature"], F["threshold"], F["left"], F["right"], F["value"], F["offsets"],
        F["active"], F["p_right"], F["imp_kind"], F["xhat"], F["sigma"], F["cat_slot"],
        F["cat_values"], F["cat_prob"], max(t.max_depth for t in trees), got,
    )  # fmt: skip
    R.marginal_proba_numpy(X, F, want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    n_active = int(F["active"].sum())
    np.testing.assert_allclose(got.sum(axis=1), n_active)  # every tree contributes a distribution


def test_marginal_equals_plain_prediction_when_nothing_is_missing(
    random_forest: tuple[list[Tree], np.ndarray],
) -> None:
    trees, X = random_forest
    F = _kernel_inputs(trees, X.shape[0], np.random.default_rng(3))
    F["active"][:] = True
    got = np.empty((X.shape[0], 2))
    R.marginal_proba_numpy(X, F, got)
    leaves = np.empty((len(trees), X.shape[0]), np.int32)
    R.route_single_numpy(X, F, False, R.IMPUTE_NONE, False, 0, 0, 0, leaves)
    np.testing.assert_allclose(got, F["value"][leaves].sum(axis=0))
