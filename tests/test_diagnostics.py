"""fedforest.diagnose: one light tree, tests that reject what they should and not their null.

The rates over many draws are in docs/heterogeneity.md (benchmarks/bench_diagnostics.py);
here fixed seeds check each test's verdicts, its arithmetic against scipy, and its cost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import fedforest as ff
from fedforest.datasets import make_paper_synthetic
from fedforest.diagnostics import _f_within_leaves, _merge_bins

pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")


def _review_null(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Strong covariate shift, no outcome heterogeneity: E[Y | X, H] = E[Y | X]."""
    rng = np.random.default_rng(seed)
    n = 2000
    h = np.arange(n) % 4
    x1 = rng.normal(np.where(h % 2 == 0, 3.0, -3.0), 0.5)
    X = np.column_stack([x1, rng.normal(size=(n, 4))])
    return X, 2.0 * (x1 > 0) + 0.5 * X[:, 1] + rng.normal(size=n), h


def test_each_test_rejects_its_shift_only() -> None:
    p = {}
    for setting in ("homogeneous", "covariate-shift", "outcome-shift", "both-shifts"):
        d = make_paper_synthetic(setting, random_state=1)
        r = ff.diagnose(d.X_train, d.y_train, d.h_train, random_state=1, privacy="none")
        p[setting] = (r.covariate_shift_pvalue, r.outcome_heterogeneity_pvalue)
        assert "covariate shift" in str(r) and r.rounds <= 2 * 8 + 2
    assert min(p["homogeneous"]) > 0.05
    assert p["covariate-shift"][0] < 1e-6 and p["covariate-shift"][1] > 0.05
    assert p["outcome-shift"][0] > 0.05 and p["outcome-shift"][1] < 1e-6
    # Under both shifts the outcome test's power is lower (clients share fewer leaves):
    # measured over 200 draws in docs/heterogeneity.md.
    assert p["both-shifts"][0] < 1e-6


def test_the_reviews_null_is_not_rejected() -> None:
    """The old paired with/without-H forests rejected this null in 12 of 12 draws."""
    rejected = 0
    for seed in range(12):
        X, y, h = _review_null(seed)
        r = ff.diagnose(X, y, h, random_state=seed, privacy="none")
        assert r.covariate_shift_pvalue < 1e-6  # the shift itself is plain
        rejected += r.outcome_heterogeneity
    assert rejected <= 2  # 12 draws at alpha = 0.05: 0-2 expected (binomial 98 %)


def test_classification_diagnostics() -> None:
    d = make_paper_synthetic("outcome-shift", random_state=2)
    y = (d.y_train > np.median(d.y_train)).astype(int)
    r = ff.diagnose(d.X_train, y, d.h_train, task="classification", random_state=2, privacy="none")
    assert r.outcome_heterogeneity and not r.covariate_shift


def test_the_diagnostic_is_light() -> None:
    """One tree: a handful of rounds and a few MB (the paper's F.4 root-level step)."""
    d = make_paper_synthetic("homogeneous", random_state=1)
    r = ff.diagnose(d.X_train, d.y_train, d.h_train, random_state=1, privacy="none")
    exact = ff.FedForestRegressor(privacy="none", random_state=1).fit(
        d.X_train, d.y_train, client_ids=d.h_train
    )
    assert r.rounds <= 18 and r.megabytes < 0.25 * exact.communication_.total_megabytes


def test_f_within_leaves_is_fishers_combination_of_per_leaf_anovas() -> None:
    """From cell sums: each leaf's one-way ANOVA of client means (scipy's f_oneway on the
    rows), Fisher-combined; the reported F is the pooled nested-model F from the rows."""
    rng = np.random.default_rng(0)
    leaf = rng.integers(0, 6, 300)
    client = rng.integers(0, 3, 300)
    y = leaf * 0.5 + 0.3 * (client == 1) + rng.normal(size=300) * (1 + leaf)
    n = np.zeros((3, 6))
    s = np.zeros((3, 6))
    q = np.zeros((3, 6))
    np.add.at(n, (client, leaf), 1)
    np.add.at(s, (client, leaf), y)
    np.add.at(q, (client, leaf), y * y)
    p, f, (df1, df2) = _f_within_leaves(n, s, q)
    per_leaf = [
        stats.f_oneway(*(y[(leaf == g) & (client == c)] for c in range(3))).pvalue for g in range(6)
    ]
    assert p == pytest.approx(stats.combine_pvalues(per_leaf, method="fisher").pvalue, rel=1e-9)

    def rss(groups: np.ndarray) -> float:
        return sum(((y[groups == g] - y[groups == g].mean()) ** 2).sum() for g in np.unique(groups))

    rss_leaf, rss_cell = rss(leaf), rss(leaf * 3 + client)
    cells = np.unique(leaf * 3 + client).size
    assert (df1, df2) == (cells - 6, 300 - cells)
    assert f == pytest.approx(((rss_leaf - rss_cell) / df1) / (rss_cell / df2), rel=1e-9)


def test_bins_are_merged_until_expected_counts_reach_five() -> None:
    table = np.array([[1, 2, 30, 1, 0, 40], [2, 1, 28, 2, 1, 39]], dtype=float)
    merged = _merge_bins(table)
    assert merged.sum() == table.sum() and np.array_equal(merged.sum(axis=1), table.sum(axis=1))
    expected = merged.sum(axis=0)[None, :] * merged.sum(axis=1)[:, None] / merged.sum()
    assert expected.min() >= 5


def test_leaf_permutation_p_values_are_uniform_under_exchangeability() -> None:
    """Tables drawn with classes independent of clients within each leaf: the randomized
    per-leaf p-values are uniform, so the Fisher-combined p-value is too."""
    from fedforest.diagnostics import _leaf_permutation_tests

    rng = np.random.default_rng(5)
    combined = []
    for draw in range(300):
        leaves = []
        for _ in range(4):
            clients = rng.integers(0, 3, rng.integers(3, 12))
            labels = rng.random(clients.size) < rng.uniform(0.1, 0.9)
            table = np.zeros((3, 2))
            np.add.at(table, (clients, labels.astype(int)), 1)
            leaves.append(table)
        combined.append(_leaf_permutation_tests(np.stack(leaves), draw)[0])
    p = np.array([v for v in combined if np.isfinite(v)])
    assert p.size > 250
    assert 0.02 <= (p < 0.05).mean() <= 0.09 and stats.kstest(p, "uniform").pvalue > 0.01


def test_text_labels_under_the_regression_default_say_to_use_classification() -> None:
    # ff.diagnose(X, labels, h) said only "Client '0': regression targets must be numeric."
    rng = np.random.default_rng(0)
    X, h = rng.normal(size=(120, 3)), rng.integers(0, 3, 120)
    labels = np.where(X[:, 0] > 0, "yes", "no")
    with pytest.raises(ValueError, match=r"numeric, got y of dtype <U3; .*'classification'"):
        ff.diagnose(X, labels, h, privacy="none")
    clients = [ff.Client(X[h == k], labels[h == k], name=str(k)) for k in range(3)]
    with pytest.raises(ValueError, match="class labels need a classifier"):
        ff.FedForestRegressor(n_estimators=2).fit_federated(ff.LocalFederation(clients))
    report = ff.diagnose(X, labels, h, task="classification", privacy="none")
    assert 0.0 <= report.covariate_shift_pvalue <= 1.0  # what the message says works


def test_a_dataframe_with_a_category_column_is_diagnosed_as_its_clients_would_be() -> None:
    # np.asarray made the category column strings: "Client '0': column 3 is not numeric".
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    frame["k"] = pd.Categorical(rng.choice(["x", "y", "z"], 300))
    h = rng.integers(0, 3, 300)
    y = frame["a"].to_numpy() + h + (frame["k"] == "z").to_numpy()
    report = ff.diagnose(frame, y, h, privacy="none")
    clients = [ff.Client(frame[h == k], y[h == k], str(k)) for k in range(3)]
    direct = ff.diagnose(federation=ff.LocalFederation(clients), privacy="none")
    assert report.feature_pvalues == direct.feature_pvalues and len(report.feature_pvalues) == 4
    assert report.outcome_heterogeneity_pvalue == direct.outcome_heterogeneity_pvalue
    assert report.outcome_heterogeneity  # y shifts by client
