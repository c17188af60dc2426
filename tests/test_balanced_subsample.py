"""class_weight="balanced_subsample" with one output: each tree's weights from its draws.

scikit-learn (``_parallel_build_trees``) weighs a row of tree ``t`` by its sample weight
times its bootstrap count times ``compute_sample_weight("balanced", y, indices=...)``:
``n / (n_present * n_c)`` with ``n_c`` the tree's draws of class ``c`` (sample weights
left out) and ``n_present`` the classes drawn. Without sample weights the server reads
the draws off each tree's pooled root; with them (the root's class columns then weighted
sums) the bootstrap round of multi-output y gives them (tests/test_multi_output_
balanced_subsample.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.class_weight import compute_sample_weight

import fedforest as ff
from fedforest.federated.client import bootstrap_counts
from fedforest.federated.protocol import BOOTSTRAP

EXACT_FOREST = dict(
    bootstrap=True, max_features=None, n_bins=None, privacy="none", min_samples_leaf=5,
    max_depth=5, random_state=0,
)  # fmt: skip


def _data(seed: int = 2, n: int = 600) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three classes and a fourth of three rows (absent from some bootstraps); weights.

    Seed 2: no two cuts of a node tie in these trees (class counts are whole, so cuts can
    tie exactly, and scikit-learn then picks by its random feature order).
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = np.digitize(X[:, 0] + X[:, 1] + 0.5 * rng.normal(size=n), [-1.0, 0.5])
    y[[5, 40, 44]] = 3
    return X, y, rng.uniform(0.5, 2.0, n)


@pytest.mark.parametrize("weighted", [False, True])
def test_exact_trees_equal_scikit_learns_on_the_same_bootstrap(weighted: bool) -> None:
    X, y, w = _data()
    sample_weight = w if weighted else None
    cid = np.repeat(np.arange(3), 200)
    ours = ff.FedForestClassifier(n_estimators=6, class_weight="balanced_subsample", **EXACT_FOREST)
    ours.fit(X, y, client_ids=cid, sample_weight=sample_weight)
    absent = 0
    for t, tree in enumerate(ours.trees_):
        counts = np.concatenate([bootstrap_counts(ours._seed, t, str(k), 200) for k in range(3)])
        absent += int(counts[[5, 40, 44]].sum() == 0)
        indices = np.repeat(np.arange(len(y)), counts)
        weight = (
            (w if weighted else 1.0)
            * counts
            * compute_sample_weight("balanced", y, indices=indices)
        )
        ref = DecisionTreeClassifier(max_depth=5, min_samples_leaf=5, random_state=0)
        ref.fit(X, y, sample_weight=weight)
        # The weights themselves, not only their ratios: the root weighs what scikit-learn's
        # does (a tree without the rare class weighed 3/4 of it when the weights counted
        # every class, not the classes drawn). Leaves are not compared one by one:
        # scikit-learn splits some pure nodes whose Gini rounds above its epsilon (5.6e-16)
        # into pure children, which changes no prediction.
        assert tree.weighted_n_node_samples[0] == pytest.approx(weight.sum(), rel=1e-12)
        np.testing.assert_allclose(
            ours.estimators_[t].predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-12
        )
    assert absent == 2  # trees 0 and 4 drew none of the rare class's rows
    kinds = ours.communication_.per_round["kind"].tolist()
    assert kinds.count(BOOTSTRAP) == int(weighted)  # draws counted without the weights
    # fit_federated: the clients' own labels and weights give the same forest.
    clients = [
        ff.Client(
            X[cid == k], y[cid == k], name=str(k), sample_weight=w[cid == k] if weighted else None
        )
        for k in range(3)
    ]
    fed = ff.FedForestClassifier(n_estimators=6, class_weight="balanced_subsample", **EXACT_FOREST)
    fed.fit_federated(ff.LocalFederation(clients))
    np.testing.assert_array_equal(fed.predict_proba(X), ours.predict_proba(X))


def test_without_the_bootstrap_it_is_balanced_on_unweighted_counts() -> None:
    # scikit-learn: "balanced_subsample" without the bootstrap is "balanced", whose class
    # counts leave the sample weights out.
    X, y, w = _data()
    kw = dict(EXACT_FOREST, bootstrap=False, n_estimators=1)
    ours = ff.FedForestClassifier(class_weight="balanced_subsample", **kw)
    ours.fit(X, y, client_ids=np.repeat(np.arange(3), 200), sample_weight=w)
    weight = w * compute_sample_weight("balanced", y)
    ref = DecisionTreeClassifier(max_depth=5, min_samples_leaf=5, random_state=0)
    ref.fit(X, y, sample_weight=weight)
    assert ours.trees_[0].weighted_n_node_samples[0] == pytest.approx(weight.sum(), rel=1e-12)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-12)


def test_sample_weights_under_secure_take_the_bootstrap_round() -> None:
    # Under "secure" the bootstrap round's masked counts give scikit-learn's weights: each
    # tree's root weighs what its recipe gives on the tree's draws (the clients' secret;
    # the test reads them off the clients after the fit).
    X, y, w = _data(n=1500)
    parts = [slice(0, 500), slice(500, 1000), slice(1000, 1500)]
    clients = [ff.Client(X[p], y[p], name=f"c{k}", sample_weight=w[p]) for k, p in enumerate(parts)]
    kw = dict(n_estimators=4, max_depth=4, class_weight="balanced_subsample", random_state=0)
    # Class 3's three rows are at c0 alone, too few to name under "secure": declared.
    declared = ff.FedForestClassifier(**kw, classes=[0, 1, 2, 3])
    model = declared.fit_federated(ff.LocalFederation(clients))
    assert model.communication_.per_round["kind"].tolist().count(BOOTSTRAP) == 1
    for t, tree in enumerate(model.trees_):
        counts = np.concatenate(
            [
                bootstrap_counts(model._seed, t, c.name, 500, c._secure.bootstrap_secret())
                for c in clients
            ]
        )
        indices = np.repeat(np.arange(len(y)), counts)
        weight = w * counts * compute_sample_weight("balanced", y, indices=indices)
        shares = np.bincount(y, weights=weight, minlength=4) / weight.sum()
        # fixed point: weights to 2^-24 or so per row
        assert tree.weighted_n_node_samples[0] == pytest.approx(weight.sum(), rel=1e-6)
        np.testing.assert_allclose(tree.value[0], shares, rtol=0, atol=1e-6)
    plain = ff.FedForestClassifier(**kw).fit(X, y, client_ids=np.repeat(np.arange(3), 500))
    assert plain.communication_.per_round["kind"].tolist().count(BOOTSTRAP) == 0
