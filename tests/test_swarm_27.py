"""Swarm forests reviewed as a user would use them (session 27): each test failed before.

Hand-built bundles give answers computed by hand: a row's available features are its own
(the paper's ``F_x``), whatever the other rows of the batch hold.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import NotFittedError

from fedforest.swarm import Imputer, Peer, ShareBundle, SwarmForest
from fedforest.tree.arrays import Tree


def _tree(feature: list[int], threshold: list[float], left: list[int], right: list[int],
          counts: list[list[float]]) -> Tree:  # fmt: skip
    c = np.asarray(counts, dtype=np.float64)
    w = c.sum(axis=1)
    leaf = np.asarray(left) == -1
    return Tree(
        feature=np.where(leaf, -2, feature).astype(np.int32),
        threshold=np.where(leaf, -2.0, threshold).astype(np.float64),
        children_left=np.asarray(left, dtype=np.int32),
        children_right=np.asarray(right, dtype=np.int32),
        value=c / w[:, None],
        n_node_samples=w.astype(np.int64),
        weighted_n_node_samples=w,
        impurity=np.zeros(len(w)),
    )


def _bundle(name: str, names: tuple[str, ...], kinds: tuple[str, ...], trees: list[Tree],
            imputers: tuple[Imputer, ...] = (), std: float = 1.0,
            n_train: int = 10) -> ShareBundle:  # fmt: skip
    counts = np.concatenate([t.value * t.weighted_n_node_samples[:, None] for t in trees])
    n = counts.shape[0]
    return ShareBundle(
        name=name, feature_names=names, feature_kinds=kinds, classes=np.array([0, 1]),
        trees=trees, class_counts=counts, surr_feature=np.full((n, 1), -1, np.int32),
        surr_threshold=np.zeros((n, 1)), surr_flip=np.zeros((n, 1), bool),
        surr_agreement=np.zeros((n, 1)), imputers=imputers,
        feature_std=np.full(len(names), std), n_train=n_train,
    )  # fmt: skip


# --------------------------------------------------------------------------- Park, per row
def test_park_keeps_for_each_row_the_trees_whose_features_that_row_has() -> None:
    # tree 0: a <= 0.5 ? (b <= 1 ? [2,0] : [0,2]) : [1,3]   (uses a and b)
    # tree 1: a <= 0.0 ? [3,1] : [1,3]                       (uses a only)
    t0 = _tree([0, 1, -2, -2, -2], [0.5, 1.0, 0, 0, 0], [1, 3, -1, -1, -1], [2, 4, -1, -1, -1],
               [[3, 5], [2, 2], [1, 3], [2, 0], [0, 2]])  # fmt: skip
    t1 = _tree([0, -2, -2], [0.0, 0, 0], [1, -1, -1], [2, -1, -1], [[4, 4], [3, 1], [1, 3]])
    swarm = SwarmForest([_bundle("A", ("a", "b"), ("numeric", "numeric"), [t0, t1])])
    X = np.array([[1.0, np.nan], [1.0, 2.0]])  # row 0 lacks b; row 1 has both
    # Park's rule with F_x: row 0 may use tree 1 only (leaf [1, 3]); row 1 both trees.
    expected = np.array([[0.25, 0.75], [0.25, 0.75]])
    batch = swarm.predict_proba(X, "park")
    np.testing.assert_allclose(batch, expected)
    assert swarm.trees_used(X, "park").tolist() == [1, 2]
    # ... and row 0 gets the same answer alone (before: tree 0 voted for it in the batch,
    # since another row had b, but not alone) and as a DataFrame with b missing
    np.testing.assert_array_equal(swarm.predict_proba(X[:1], "park"), batch[:1])
    frame = pd.DataFrame({"a": [1.0, 1.0], "b": [np.nan, 2.0]})
    np.testing.assert_array_equal(swarm.predict_proba(frame, "park"), batch)


# --------------------------------------------------------------------------- imputers, per row
def _stump_on_b(kind: str, threshold: float) -> Tree:
    """b <= threshold ? [3, 1] : [1, 3]."""
    return _tree([1, -2, -2], [threshold, 0, 0], [1, -1, -1], [2, -1, -1],
                 [[4, 4], [3, 1], [1, 3]])  # fmt: skip


def test_each_row_uses_the_best_imputer_whose_inputs_it_has() -> None:
    # A's imputer of b reads c (quality 0.9): b_hat = c. B's reads a (quality 0.5): a - 1.
    best = Imputer("b", "numeric", ("c",), np.array([0.0]), np.array([[1.0]]), np.zeros(0),
                   0.9, 10)  # fmt: skip
    second = Imputer("b", "numeric", ("a",), np.array([-1.0]), np.array([[1.0]]), np.zeros(0),
                     0.5, 10)  # fmt: skip
    swarm = SwarmForest([
        _bundle("A", ("a", "b", "c"), ("numeric",) * 3, [_stump_on_b("numeric", 1.0)], (best,)),
        _bundle("B", ("a", "b"), ("numeric",) * 2, [_stump_on_b("numeric", 1.0)], (second,)),
    ])  # fmt: skip
    site = pd.DataFrame({"a": [3.0, 3.0], "c": [np.nan, 0.0]})
    # row 0 has no c: B's imputer, b_hat = 3 - 1 = 2 > 1, right in both trees: [1, 3] / 4.
    # row 1: A's imputer, b_hat = 0 <= 1, left: [3, 1] / 4. (Before, row 0's imputation
    # failed, as c is a column of the site, and MI discarded both trees: the prior.)
    mi = swarm.predict_proba(site, "mi")
    np.testing.assert_allclose(mi, [[0.25, 0.75], [0.75, 0.25]])
    # the same rows as an ndarray, alone or together, give the same answers
    X = site.reindex(columns=list(swarm.feature_names_)).to_numpy()
    np.testing.assert_array_equal(swarm.predict_proba(X, "mi"), mi)
    np.testing.assert_array_equal(swarm.predict_proba(X[:1], "mi"), mi[:1])


def test_categorical_imputers_of_different_category_lists_mix_by_row() -> None:
    # b is categorical; node: b <= 1.5 goes left. A's imputer (reads c) knows codes 0..2,
    # B's (reads a) 0..3; their probabilities do not depend on the inputs (coef 0).
    pa, pb = np.array([0.5, 0.25, 0.25]), np.array([0.1, 0.2, 0.3, 0.4])
    imp_a = Imputer("b", "categorical", ("c",), np.log(pa), np.zeros((3, 1)),
                    np.array([0.0, 1, 2]), 0.9, 10)  # fmt: skip
    imp_b = Imputer("b", "categorical", ("a",), np.log(pb), np.zeros((4, 1)),
                    np.array([0.0, 1, 2, 3]), 0.5, 10)  # fmt: skip
    cat = ("numeric", "categorical", "numeric")
    swarm = SwarmForest([
        _bundle("A", ("a", "b", "c"), cat, [_stump_on_b("categorical", 1.5)], (imp_a,)),
        _bundle("B", ("a", "b"), cat[:2], [_stump_on_b("categorical", 1.5)], (imp_b,)),
    ])  # fmt: skip
    site = pd.DataFrame({"a": [0.0, 0.0], "c": [np.nan, 0.0]})
    left, right = np.array([0.75, 0.25]), np.array([0.25, 0.75])
    p_left = [pb[:2].sum(), pa[:2].sum()]  # eq. 16a: mass of the codes <= 1.5
    mp = swarm.predict_proba(site, "mp")  # eq. 19 in both trees
    np.testing.assert_allclose(mp[0], p_left[0] * left + (1 - p_left[0]) * right)
    np.testing.assert_allclose(mp[1], p_left[1] * left + (1 - p_left[1]) * right)
    mi = swarm.predict_proba(site, "mi")  # eq. 10: row 0's code 3 > 1.5, row 1's 0 <= 1.5
    np.testing.assert_allclose(mi, [right, left])


# --------------------------------------------------------------------------- sigma (eq. 13)
def test_a_peer_of_one_row_does_not_enter_the_averaged_spread() -> None:
    imp = Imputer("b", "numeric", ("a",), np.array([0.0]), np.array([[1.0]]), np.zeros(0),
                  0.5, 10)  # fmt: skip
    tree = _stump_on_b("numeric", 1.0)
    big = _bundle("A", ("a", "b"), ("numeric",) * 2, [tree], (imp,), std=2.0, n_train=40)
    one = _bundle("B", ("a", "b"), ("numeric",) * 2, [tree], std=0.0, n_train=1)
    swarm = SwarmForest([big, one])
    p_right = 1.0 / (1.0 + np.exp(-(2.0 - 1.0) / 2.0))  # sigma of A alone (before: (2+0)/2)
    expected = (1 - p_right) * np.array([0.75, 0.25]) + p_right * np.array([0.25, 0.75])
    np.testing.assert_allclose(swarm.predict_proba(pd.DataFrame({"a": [2.0]}), "mp")[0], expected)


# --------------------------------------------------------------------------- trees_used
def test_trees_used_checks_its_options_as_predict_proba_does() -> None:
    tree = _stump_on_b("numeric", 1.0)
    swarm = SwarmForest([_bundle("A", ("a", "b"), ("numeric",) * 2, [tree])])
    site = pd.DataFrame({"b": [0.0]})
    assert swarm.trees_used(site, "fpv", d_thresh=1, voting="hard").tolist() == [1]
    with pytest.raises(ValueError, match="strategy must be one of"):  # was a KeyError
        swarm.trees_used(site, "fvp")
    with pytest.raises(ValueError, match="d_thresh must be an int >= 0"):  # was accepted
        swarm.trees_used(site, "pr", d_thresh=-1)
    with pytest.raises(TypeError, match="d_treshold"):  # a misspelt option was ignored
        swarm.trees_used(site, "pr", d_treshold=1)  # type: ignore[call-arg]


# --------------------------------------------------------------------------- Peer as an estimator
def _frame(n: int = 80) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    return X, (X["a"] + 0.5 * X["b"] > 0).to_numpy().astype(int)


def test_from_fitted_refuses_columns_in_another_order_than_the_forests() -> None:
    X, y = _frame()
    rf = RandomForestClassifier(5, random_state=0).fit(X[["c", "a", "b"]], y)
    with pytest.raises(ValueError, match=r"X\[list\(estimator.feature_names_in_\)\]"):
        Peer.from_fitted("A", rf, X, y)  # before: its trees read a for c, b for a, c for b
    peer = Peer.from_fitted("A", rf, X[["c", "a", "b"]], y)
    swarm = SwarmForest([peer.share()])
    np.testing.assert_allclose(swarm.predict_proba(X, "fpv"), rf.predict_proba(X[["c", "a", "b"]]))


def test_peer_has_scikit_learn_params_and_not_fitted_error() -> None:
    peer = Peer("A", n_estimators=7, random_state=3, max_depth=4, n_surrogates=2)
    params = peer.get_params()
    assert params["name"] == "A" and params["n_estimators"] == 7 and params["max_depth"] == 4
    twin = clone(peer)
    assert twin is not peer and twin.get_params() == params
    with pytest.raises(NotFittedError, match="not fitted"):
        peer.share()
    X, y = _frame()
    fitted = peer.set_params(max_depth=2).fit(X, y)
    assert max(int(t.children_left.shape[0]) for t in fitted.trees_) <= 7  # depth 2: <= 7 nodes
    assert not hasattr(clone(fitted), "trees_")


# --------------------------------------------------------------------------- an independent oracle
def _imputed(x: dict[str, float], f: str, imputers: list[tuple[int, Imputer]]) -> float:
    """The paper's imputation of ``f`` (eq. 7): the best usable imputer, by quality then size."""
    usable = [
        (imp.quality, imp.n_train, -k, imp)
        for k, imp in imputers
        if imp.feature == f and all(not np.isnan(x.get(c, np.nan)) for c in imp.inputs)
    ]
    if not usable:
        return np.nan
    imp = max(usable, key=lambda u: u[:3])[3]
    terms = [imp.coef[0, i] * x[c] for i, c in enumerate(imp.inputs)]
    return float(imp.intercept[0] + sum(terms))


def _walk(node: int, t: Any, cols: list[str], cmap: np.ndarray, n_classes: int,
          x: dict[str, float], strategy: str, imputers: list[tuple[int, Imputer]],
          sigma: dict[str, float]) -> np.ndarray | None:  # fmt: skip
    """One scikit-learn tree's class distribution for ``x`` (None: the tree is discarded)."""
    if t.children_left[node] == -1:
        d = np.zeros(n_classes)
        d[cmap] = t.value[node, 0] / t.value[node, 0].sum()  # eq. 18
        return d
    f, thr = cols[t.feature[node]], t.threshold[node]
    left, right = t.children_left[node], t.children_right[node]
    rest = (t, cols, cmap, n_classes, x, strategy, imputers, sigma)
    v = x.get(f, np.nan)
    if not np.isnan(v):
        return _walk(left if v <= thr else right, *rest)
    if strategy == "fpv":  # eq. 1
        return None
    xhat = _imputed(x, f, imputers)
    if strategy == "mi":  # eq. 11: no imputer, no tree
        return None if np.isnan(xhat) else _walk(left if xhat <= thr else right, *rest)
    w = t.weighted_n_node_samples  # eq. 19 with eq. 14, or N_R / N without an imputer
    p = w[right] / w[node] if np.isnan(xhat) else 1 / (1 + np.exp(-(xhat - thr) / sigma[f]))
    dl, dr = _walk(left, *rest), _walk(right, *rest)
    assert dl is not None and dr is not None
    return (1 - p) * dl + p * dr


def _oracle(models: list[Any], frames: list[pd.DataFrame], site: pd.DataFrame,
            swarm: SwarmForest, strategy: str) -> np.ndarray:  # fmt: skip
    """FPV, MI and MP (eq. 1-2, 7-11, 12-14 and 18-20) walked node by node on the peers'
    own scikit-learn trees, their columns in their own orders, their classes mapped by
    name onto the union; sigma from the training frames, imputers from the bundles."""
    classes = np.unique(np.concatenate([m.classes_ for m in models]))
    names = {c for fr in frames for c in fr.columns}
    sigma = {f: np.mean([fr[f].std(ddof=1) for fr in frames if f in fr.columns]) for f in names}
    imputers = [(k, imp) for k, b in enumerate(swarm.bundles_) for imp in b.imputers]
    out = np.zeros((len(site), classes.size))
    for i, (_, row) in enumerate(site.iterrows()):
        x = {str(c): float(v) for c, v in row.items()}
        total, kept = np.zeros(classes.size), 0
        for model, frame in zip(models, frames, strict=True):
            cmap = np.searchsorted(classes, model.classes_)
            for est in model.estimators_:
                d = _walk(0, est.tree_, list(frame.columns), cmap, classes.size, x, strategy,
                          imputers, sigma)  # fmt: skip
                if d is not None:
                    total, kept = total + d, kept + 1
        out[i] = total / kept if kept else np.nan
    return out


def test_strategies_equal_an_independent_walk_of_the_peers_own_trees() -> None:
    rng = np.random.default_rng(4)
    n = 240
    X = pd.DataFrame(rng.normal(size=(n, 5)), columns=["a", "b", "c", "d", "e"])
    X["b"] += X["a"]
    X["d"] -= X["c"]
    y = np.digitize(X["a"] + X["b"] - X["d"] + 0.3 * X["e"], [-1.0, 1.0])  # classes 0, 1, 2
    shared = ["a", "c"]
    orders = [["b", "a", "c"], ["c", "d", "a"], ["e", "c", "a", "b"]]  # own column orders
    rows = [np.arange(0, 80), np.arange(80, 160), np.arange(160, 240)]
    rows[1] = rows[1][y[rows[1]] != 2]  # class 2 only at peers 0 and 2
    models, frames, bundles = [], [], []
    for k, (cols, idx) in enumerate(zip(orders, rows, strict=True)):
        frame = X.iloc[idx][cols].reset_index(drop=True)
        rf = RandomForestClassifier(6, max_depth=4, random_state=k).fit(frame, y[idx])
        models.append(rf)
        frames.append(frame)
        bundles.append(Peer.from_fitted(f"P{k}", rf, frame, y[idx], random_state=k)
                       .share(shared_features=shared))  # fmt: skip
    swarm = SwarmForest(bundles)
    site = X.iloc[:25][["c", "a", "b"]].reset_index(drop=True)  # peer 0's columns, reordered
    site.loc[3, "b"] = np.nan  # one value missing as well
    for strategy in ("fpv", "mi", "mp"):
        expected = _oracle(models, frames, site, swarm, strategy)
        got = swarm.predict_proba(site, strategy)
        no_tree = np.isnan(expected[:, 0])
        expected[no_tree] = got[no_tree]  # the prior, checked in test_routing.py
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12, err_msg=strategy)


def test_share_refuses_a_string_or_a_repeated_name_as_shared_features() -> None:
    X, y = _frame()
    peer = Peer("A", n_estimators=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"got the string 'ab'; give \['ab'\]"):
        peer.share(shared_features="ab")  # was ["a", "b"], silently
    with pytest.raises(ValueError, match=r"names \['a'\] more than once"):
        peer.share(shared_features=["a", "c", "a"])
    assert peer.share(shared_features=("a",)).shared_features == ("a",)


def test_a_frame_with_none_of_the_swarms_columns_is_refused_naming_both() -> None:
    tree = _stump_on_b("numeric", 1.0)
    swarm = SwarmForest([_bundle("A", ("age", "bmi"), ("numeric",) * 2, [tree])])
    with pytest.raises(ValueError, match=r"none of the swarm's features \['age', 'bmi'\].*"
                                         r"\['Age', 'BMI'\]"):  # fmt: skip
        swarm.predict_proba(pd.DataFrame({"Age": [50.0], "BMI": [27.0]}), "mp")  # was the prior
    ok = swarm.predict_proba(pd.DataFrame({"age": [50.0], "BMI": [27.0]}), "mp")  # one known
    assert ok.shape == (1, 2)


def test_set_params_is_checked_when_the_peer_fits_or_shares() -> None:
    X, y = _frame()
    with pytest.raises(ValueError, match="engine must be one of"):  # fitted fedforest's forest
        Peer("A", n_estimators=3).set_params(engine="skl").fit(X, y)
    with pytest.raises(ValueError, match="applies to engine='fedforest'"):
        Peer("A", n_estimators=3).set_params(min_aggregate_rows=20).fit(X, y)
    peer = Peer("A", n_estimators=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="n_surrogates must be an int >= 0"):
        peer.set_params(n_surrogates=-1).share()
