"""Set splits (categories, the client index H) with multi-output y.

The rule (``server/splitter.py::best_set_splits``): while a node has at most
``MAX_EXHAUSTIVE`` categories, every partition is tried and the gain is the mean over the
outputs, as for numeric splits; beyond, the categories are ordered along the first
principal axis of their row-weighted mean vectors (``principal_keys``) and contiguous cuts
scanned. The oracles here: brute force over partitions on raw rows (the impurities
computed from the rows, not from the statistics), a hand-worked projection, scikit-learn
on one-hot columns, and fitting each output separately.
"""

from __future__ import annotations

from itertools import product

import numpy as np
import pandas as pd
import pytest
from scipy.special import xlogy
from sklearn.metrics import mean_squared_error

import fedforest as ff
from fedforest.federated.server.splitter import MAX_EXHAUSTIVE, best_set_splits, principal_keys
from tests._exact import EXACT_TREE


# --------------------------------------------------------------------------- brute force
def _impurity_rows(y: np.ndarray, w: np.ndarray, criterion: str, sizes: tuple[int, ...]) -> float:
    """W * Psi of a set of rows, from the rows (the mean over the outputs)."""
    if w.sum() == 0:
        return 0.0
    per_output = []
    if criterion == "squared_error":
        for o in range(y.shape[1]):
            mean = np.average(y[:, o], weights=w)
            per_output.append(np.sum(w * (y[:, o] - mean) ** 2))
    elif criterion == "poisson":  # half deviance: sum w (y log(y / mean) - y + mean)
        for o in range(y.shape[1]):
            mean = np.average(y[:, o], weights=w)
            per_output.append(np.sum(w * (xlogy(y[:, o], y[:, o] / mean) - y[:, o] + mean)))
    else:
        for o, k in enumerate(sizes):
            p = np.array([w[y[:, o] == c].sum() for c in range(k)]) / w.sum()
            if criterion == "gini":
                per_output.append(w.sum() * (1 - np.sum(p**2)))
            else:
                per_output.append(-w.sum() * np.sum(xlogy(p, p) / np.log(2)))
    return float(np.mean(per_output))


def _brute_force(cat, y, w, criterion, sizes, msl):
    """Best gain over every two-way partition of the present categories, and its left set."""
    present = np.unique(cat[w > 0])
    parent = _impurity_rows(y, w, criterion, sizes)
    best, best_left = -np.inf, None
    for bits in product([0, 1], repeat=present.size - 1):  # the last category stays right
        left = set(present[:-1][np.array(bits, dtype=bool)].tolist())
        if not left:
            continue
        on_left = np.isin(cat, list(left)) & (w > 0)
        on_right = ~np.isin(cat, list(left)) & (w > 0)
        if on_left.sum() < msl or on_right.sum() < msl:
            continue
        if criterion == "poisson" and (
            np.any((w[on_left, None] * y[on_left]).sum(axis=0) <= 1e-12)
            or np.any((w[on_right, None] * y[on_right]).sum(axis=0) <= 1e-12)
        ):
            continue  # scikit-learn's rule: a child with a zero target sum on any output
        gain = (
            parent
            - _impurity_rows(y[on_left], w[on_left], criterion, sizes)
            - _impurity_rows(y[on_right], w[on_right], criterion, sizes)
        )
        if gain > best:
            best, best_left = gain, left
    return best, best_left


def _stats(cat, y, w, m, criterion, sizes):
    """Per-category additive statistics, (1, m, n_stats), in the package's column layout."""
    rows = [np.bincount(cat, weights=(w > 0).astype(float), minlength=m), np.bincount(cat, w, m)]
    for o in range(y.shape[1]):
        if criterion in ("squared_error", "poisson"):
            second = y[:, o] ** 2 if criterion == "squared_error" else xlogy(y[:, o], y[:, o])
            rows += [np.bincount(cat, w * y[:, o], m), np.bincount(cat, w * second, m)]
        else:
            rows += [np.bincount(cat, w * (y[:, o] == c), m) for c in range(sizes[o])]
    return np.stack(rows, axis=1)[None]


def _targets(criterion: str, n: int, m: int, rng: np.random.Generator):
    cat = rng.integers(0, m, n)
    cat[cat == 2] = 3  # an absent category
    if criterion == "squared_error":
        effect = rng.normal(size=(m, 3)) * [1.0, 5.0, 0.3]  # outputs of different scales
        return cat, effect[cat] + rng.normal(size=(n, 3)), ()
    if criterion == "poisson":
        rate = np.exp(rng.normal(size=(m, 2)))
        y = rng.poisson(rate[cat]).astype(float)
        y[cat == 0, 1] = 0.0  # a category without any count on the second output
        return cat, y, ()
    sizes = (3, 2)
    share = [rng.dirichlet(np.ones(k), size=m) for k in sizes]
    y = np.column_stack(
        [[rng.choice(k, p=share[o][c]) for c in cat] for o, k in enumerate(sizes)]
    ).astype(float)
    return cat, y, sizes


@pytest.mark.parametrize("criterion", ["squared_error", "poisson", "gini", "entropy"])
@pytest.mark.parametrize("msl", [1, 15])
def test_exhaustive_search_finds_the_best_partition(criterion: str, msl: int) -> None:
    for seed in range(5):
        rng = np.random.default_rng(seed)
        m = MAX_EXHAUSTIVE if seed % 2 else 7
        cat, y, sizes = _targets(criterion, 300, m, rng)
        w = rng.integers(0, 3, cat.size).astype(float)  # bootstrap-like weights, some 0
        stats = _stats(cat, y, w, m, criterion, sizes)
        best = best_set_splits(
            stats,
            criterion=criterion,
            n_classes=sum(sizes),
            min_samples_leaf=msl,
            n_outputs=max(len(sizes), 1),
        )
        gain, left = _brute_force(cat, y, w, criterion, sizes, msl)
        assert best.gain[0] == pytest.approx(gain, rel=1e-9, abs=1e-9)
        found = set(np.flatnonzero(best.left[0]).tolist())
        present = set(np.unique(cat[w > 0]).tolist())
        assert found in (left, present - left)  # the same partition, either side left
        assert set(np.flatnonzero(best.present[0]).tolist()) == present


def test_the_principal_axis_key_by_hand() -> None:
    # Three categories of one row each, two outputs; means (0, 0), (1, 2), (3, 6): on the
    # line through them, axis (1, 2) / sqrt(5) (its larger component positive), center
    # (4/3, 8/3); keys (m_c - center) . axis.
    stats = np.array([[[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 2, 4], [1, 1, 3, 9, 6, 36]]], float)
    keys = principal_keys(stats, "squared_error", np.ones((1, 3), bool))
    want = np.array([-20 / 3, -5 / 3, 25 / 3]) / np.sqrt(5)
    np.testing.assert_allclose(keys[0], want, rtol=1e-12)
    # The axis weighs categories by rows: three rows at (3, -6) turn it towards them.
    stats[0, 2] = [3, 3, 9, 27, -18, 108]
    keys = principal_keys(stats, "squared_error", np.ones((1, 3), bool))
    assert np.argsort(keys[0]).tolist() == [2, 0, 1]  # ordered along (1, -2), not (1, 2)
    # Classification: the class shares of every output side by side.
    counts = np.array([[[4, 4, 4, 0, 2, 2], [4, 4, 0, 4, 1, 3], [4, 4, 2, 2, 0, 4]]], float)
    keys = principal_keys(counts, "gini", np.ones((1, 3), bool))
    assert np.argsort(keys[0]).tolist() in ([0, 2, 1], [1, 2, 0])


def test_with_one_output_the_principal_axis_orders_by_the_mean() -> None:
    rng = np.random.default_rng(0)
    cat, y, _ = _targets("squared_error", 400, 12, rng)
    stats = _stats(cat, y[:, :1], np.ones(cat.size), 12, "squared_error", ())
    present = stats[..., 1] > 0
    keys = principal_keys(stats, "squared_error", present)[0, present[0]]
    means = (stats[0, :, 2] / np.maximum(stats[0, :, 1], 1))[present[0]]
    assert np.argsort(keys).tolist() == np.argsort(means).tolist()


def _all_partition_gains(stats: np.ndarray, order: np.ndarray | None = None) -> float:
    """Brute force on the statistics: the best squared-error gain of any partition.

    With ``order``: of the contiguous cuts of that ordering of the categories only.
    """
    m = stats.shape[1]
    masks = ((np.arange(1, 2 ** (m - 1))[:, None] >> np.arange(m)) & 1).astype(float)
    if order is not None:
        masks = (np.argsort(order)[None, :] <= np.arange(m - 1)[:, None]).astype(float)
    left = masks @ stats[0]
    right = stats[0].sum(axis=0) - left
    s = slice(2, None, 2)
    gain = (
        (left[:, s] ** 2 / left[:, 1:2]).sum(axis=1)
        + (right[:, s] ** 2 / right[:, 1:2]).sum(axis=1)
        - (stats[0].sum(axis=0)[s] ** 2 / stats[0].sum(axis=0)[1]).sum()
    ) / (stats.shape[2] // 2 - 1)
    return float(gain.max())


def test_beyond_max_exhaustive_the_ordering_is_optimal_for_collinear_means() -> None:
    # Means on a line (m_c = a + t_c v): every partition's gain is the one-output gain of
    # t, for which sorted contiguous cuts are optimal (Fisher): the ordering must find the
    # best of all 2^13 - 1 partitions although 14 > MAX_EXHAUSTIVE categories are present.
    rng = np.random.default_rng(3)
    m = 14
    assert m > MAX_EXHAUSTIVE
    t = rng.normal(size=m)
    cat = np.repeat(np.arange(m), rng.integers(5, 40, m))
    y = np.array([1.0, -4.0, 0.5])[None, :] * t[cat, None] + np.array([2.0, 0.0, 7.0])
    stats = _stats(cat, y, np.ones(cat.size), m, "squared_error", ())
    best = best_set_splits(stats, criterion="squared_error", n_classes=0, min_samples_leaf=1)
    assert best.gain[0] == pytest.approx(_all_partition_gains(stats), rel=1e-12)
    # Not collinear (three outputs of equal spread): the ordering is a heuristic, never
    # above the best partition. Measured over these 20 seeds: it finds the best in 17,
    # mean ratio 0.994 (worst 0.90); one output's mean as the key (the single-output
    # Fisher ordering) reaches 0.81 on average.
    ratios, first_output = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        cat = rng.integers(0, m, 600)
        y = rng.normal(size=(m, 3))[cat] + rng.normal(size=(600, 3))
        stats = _stats(cat, y, np.ones(cat.size), m, "squared_error", ())
        best = best_set_splits(stats, criterion="squared_error", n_classes=0, min_samples_leaf=1)
        brute = _all_partition_gains(stats)
        assert best.gain[0] <= brute * (1 + 1e-12)
        ratios.append(best.gain[0] / brute)
        order = np.argsort(stats[0, :, 2] / stats[0, :, 1])
        first_output.append(_all_partition_gains(stats, order) / brute)
    assert np.mean(ratios) > 0.98 and np.mean(first_output) < 0.9, (ratios, first_output)


# --------------------------------------------------------------------------- through the protocol
def test_an_exact_stump_on_a_category_and_on_h_is_the_brute_force_best() -> None:
    # Everything through the federation: Round B's per-category statistics, the per-client
    # summaries (H), the server's set split, against brute force on the raw rows.
    rng = np.random.default_rng(0)
    n = 900
    h = rng.integers(0, 6, n)
    cat = rng.integers(0, 7, n)
    effect = rng.normal(size=(7, 3)) * [1.0, 4.0, 0.2]
    shift = rng.normal(size=(6, 3)) * [2.0, 0.5, 1.0]
    Y = effect[cat] + rng.normal(size=(n, 3))
    X = pd.DataFrame({"k": pd.Categorical(cat), "c": np.zeros(n)})
    stump = {**EXACT_TREE, "max_depth": 1}
    tree = ff.FedForestRegressor(**stump).fit(X, Y, client_ids=h).trees_[0]
    _, want = _brute_force(cat, Y, np.ones(n), "squared_error", (), 5)
    left, right = tree.split_set(0)
    assert tree.feature[0] == 0 and {int(c) for c in left} in (want, set(range(7)) - want)
    # The client index: the only informative "feature" (x is constant).
    Y = shift[h] + rng.normal(size=(n, 3))
    model = ff.FedForestRegressor(**stump, split_on_client=True).fit(X[["c"]], Y, client_ids=h)
    tree = model.trees_[0]
    _, want = _brute_force(h, Y, np.ones(n), "squared_error", (), 5)
    left, right = tree.split_set(0)
    names = [model.clients_[int(c)] for c in left]
    assert tree.feature[0] == 1 and {int(c) for c in names} in (want, set(range(6)) - want)


def _shifted(n: int, seed: int, n_levels: int = 14):
    """Three outputs driven by one categorical column (differently) and two numbers."""
    rng = np.random.default_rng(seed)
    cat = rng.integers(0, n_levels, n)
    effect = np.random.default_rng(99).normal(size=(n_levels, 3)) * [2.0, 1.0, 3.0]
    x = rng.normal(size=(n, 2))
    Y = effect[cat] + np.column_stack([x[:, 0], x[:, 1] ** 2, x[:, 0] * x[:, 1]])
    Y += rng.normal(size=(n, 3)) * 0.5
    X = pd.DataFrame({"k": pd.Categorical(cat, categories=range(n_levels)), "a": x[:, 0]})
    X["b"] = x[:, 1]
    return X, Y


def _one_hot(X: pd.DataFrame) -> pd.DataFrame:
    return pd.get_dummies(X, columns=["k"], dtype=float)


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_a_categorical_multi_output_forest_is_on_par_with_one_hot_and_each_output(
    privacy: str,
) -> None:
    # 14 levels: the ordering at the root, the exhaustive search deeper. The outputs differ
    # in structure, so one forest for all three pays against a forest per output whatever
    # the columns (scikit-learn on one-hot columns: 1.55x); the set splits must not add to
    # that, and must beat the same forest on one-hot columns. Measured test MSE ratios
    # (seeds 0, 1): none: categorical / one-hot 0.57, 0.57; multi / each, categorical
    # 1.40, 1.32 against one-hot 1.54, 1.55. secure: 0.74, 0.72; 1.40, 1.30 against 1.52,
    # 1.55; with the rule across levels for category groups (docs/privacy-findings.md) 0.79,
    # 0.77.
    over_hot, cat_cost, hot_cost = [], [], []
    for seed in range(2):
        X, Y = _shifted(4000, seed)
        cid = np.random.default_rng(seed).integers(0, 4, 2000)
        kw = {"n_estimators": 30, "privacy": privacy, "random_state": seed}
        tr, te = slice(0, 2000), slice(2000, None)
        mse = {}
        for name, columns in (("cat", X), ("hot", _one_hot(X))):
            multi = ff.FedForestRegressor(**kw).fit(columns[tr], Y[tr], client_ids=cid)
            each = [
                ff.FedForestRegressor(**kw)
                .fit(columns[tr], Y[tr, o], client_ids=cid)
                .predict(columns[te])
                for o in range(3)
            ]
            mse[name] = (
                mean_squared_error(Y[te], multi.predict(columns[te])),
                mean_squared_error(Y[te], np.column_stack(each)),
            )
        over_hot.append(mse["cat"][0] / mse["hot"][0])
        cat_cost.append(mse["cat"][0] / mse["cat"][1])
        hot_cost.append(mse["hot"][0] / mse["hot"][1])
    assert np.mean(over_hot) < 0.8, over_hot
    assert np.mean(cat_cost) < np.mean(hot_cost), (cat_cost, hot_cost)


def test_split_on_client_with_multi_output_finds_the_client_shift() -> None:
    # Each of 8 clients shifts the three outputs differently. With H (8 clients: every
    # partition tried) the forest learns the shifts; without, it cannot; a centralised
    # analyst's baseline adds the client index as one-hot columns. Measured test MSE
    # ratios (seeds 0, 1, 2): H / one-hot 0.72, 0.63, 0.67; H / without 0.16, 0.15, 0.17.
    ratios = []
    for seed in range(2):
        rng = np.random.default_rng(seed)
        n = 3000
        h = rng.integers(0, 8, n)
        X = rng.normal(size=(n, 3))
        shift = np.random.default_rng(7).normal(size=(8, 3)) * [3.0, 1.0, 2.0]
        Y = shift[h] + np.column_stack([X[:, 0], np.sin(X[:, 1]), X[:, 2] ** 2])
        Y += rng.normal(size=(n, 3)) * 0.3
        tr, te = slice(0, 2000), slice(2000, None)
        kw = {"n_estimators": 30, "privacy": "none", "random_state": 0}
        with_h = ff.FedForestRegressor(**kw, split_on_client=True)
        with_h.fit(X[tr], Y[tr], client_ids=h[tr])
        without = ff.FedForestRegressor(**kw).fit(X[tr], Y[tr], client_ids=h[tr])
        X_hot = np.column_stack([X, np.eye(8)[h]])
        hot = ff.FedForestRegressor(**kw).fit(X_hot[tr], Y[tr], client_ids=h[tr])
        mse = mean_squared_error(Y[te], with_h.predict(X[te], client_ids=h[te]))
        assert mse < 0.25 * mean_squared_error(Y[te], without.predict(X[te]))
        ratios.append(mse / mean_squared_error(Y[te], hot.predict(X_hot[te])))
        assert with_h.client_importance_ > 0.3
    assert np.mean(ratios) < 0.8, ratios


def test_a_categorical_multi_output_classifier_is_on_par_with_one_hot() -> None:
    # Per-output accuracy on held-out rows (measured, seeds 5 and 6: 0.874 against 0.820
    # on one-hot columns, 0.867 against 0.831).
    X, Y = _shifted(4000, 5)
    labels = (Y > np.median(Y, axis=0)).astype(int)
    labels[:, 2] += Y[:, 2] > np.quantile(Y[:, 2], 0.8)  # three classes on the last output
    cid = np.random.default_rng(5).integers(0, 4, 2000)
    tr, te = slice(0, 2000), slice(2000, None)
    kw = {"n_estimators": 30, "privacy": "none", "random_state": 0}
    multi = ff.FedForestClassifier(**kw).fit(X[tr], labels[tr], client_ids=cid)
    hot = ff.FedForestClassifier(**kw).fit(_one_hot(X)[tr], labels[tr], client_ids=cid)
    acc = (multi.predict(X[te]) == labels[te]).mean()
    assert acc > (hot.predict(_one_hot(X)[te]) == labels[te]).mean() + 0.02
