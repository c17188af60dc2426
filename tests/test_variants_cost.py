"""AvgImp and Top-L cost less than exact split finding, and choose the paper's splits."""

from __future__ import annotations

import numpy as np

import fedforest as ff
from fedforest.datasets import make_paper_synthetic


def _mse(pred, y):
    return float(np.mean((pred - y) ** 2))


def test_avgimp_and_top_l_upload_less_than_exact():
    data = make_paper_synthetic("homogeneous", n_per_client=60, random_state=0)
    kw = dict(n_estimators=5, max_depth=6, privacy="none", random_state=0)
    up = {}
    for name, extra in (
        ("exact", {}),
        ("avgimp", dict(split_rule="avgimp")),
        ("top_l", dict(top_l=3)),
        ("both", dict(split_rule="avgimp", top_l=3)),
    ):
        m = ff.FedForestRegressor(**kw, **extra).fit(
            data.X_train, data.y_train, client_ids=data.h_train
        )
        up[name] = m.communication_.upload_bytes
    assert up["avgimp"] < up["exact"], up
    assert up["top_l"] < up["exact"], up
    assert up["both"] < up["avgimp"], up


def test_variants_cheaper_at_the_accuracy_the_existing_tests_require():
    # Same data and bounds as test_heterogeneity's sensible-forest test.
    data = make_paper_synthetic("homogeneous", random_state=0)
    ref = ff.FedForestRegressor(privacy="none", n_estimators=20, random_state=0)
    ref.fit(data.X_train, data.y_train, client_ids=data.h_train)
    base = _mse(ref.predict(data.X_test), data.y_test)
    for kw, bound in ((dict(top_l=3), 1.03), (dict(split_rule="avgimp", top_l=3), 1.12)):
        m = ff.FedForestRegressor(privacy="none", n_estimators=20, random_state=0, **kw)
        m.fit(data.X_train, data.y_train, client_ids=data.h_train)
        assert _mse(m.predict(data.X_test), data.y_test) < bound * base, kw
        assert m.communication_.upload_bytes < 0.8 * ref.communication_.upload_bytes, kw
        assert m.communication_.rounds <= 2 * 8 + 3


# A tiny federation: two clients, four rows each, three features.
X_A = np.array([[0.0, 3.0, 0.5], [1.0, 1.0, 0.1], [2.0, 2.0, 0.9], [3.0, 0.0, 0.3]])
Y_A = np.array([0.0, 0.2, 1.0, 1.1])
X_B = np.array([[10.0, 0.0, 0.2], [11.0, 2.0, 0.8], [12.0, 1.0, 0.4], [13.0, 3.0, 0.6]])
Y_B = np.array([5.0, 5.9, 5.1, 6.0])


def _sse_decrease(x, y, t):
    """Local weighted decrease of x <= t: n Var(y) - n_L Var(y_L) - n_R Var(y_R)."""
    left, right = y[x <= t], y[x > t]

    def sse(v):
        return float(((v - v.mean()) ** 2).sum()) if v.size else 0.0

    return sse(y) - sse(left) - sse(right)


def _fit_root(**kw):
    fed = ff.LocalFederation([ff.Client(X_A, Y_A, "a"), ff.Client(X_B, Y_B, "b")])
    m = ff.FedForestRegressor(
        n_estimators=1,
        max_depth=1,
        bootstrap=False,
        max_features=None,
        min_samples_leaf=1,
        n_bins=64,
        privacy="none",
        random_state=0,
        **kw,
    ).fit_federated(fed)
    tree = m.trees_[0]
    return int(tree.feature[0]), float(tree.threshold[0])


def _candidates(j):
    values = np.unique(np.concatenate([X_A[:, j], X_B[:, j]]))
    return values[:-1]  # x <= t with t a node value below the maximum


def _brute_force(features, objective):
    best = (-np.inf, None, None)
    for j in features:
        for t in _candidates(j):
            g = objective(j, t)
            if g > best[0] + 1e-12:
                best = (g, j, t)
    return best[1], best[2]


def _avgimp(j, t):
    # Paper: sum_k n_k / n * local decrease; times n, the sum of the local weighted gains.
    return sum(_sse_decrease(X[:, j], Y, t) for X, Y in ((X_A, Y_A), (X_B, Y_B)))


def _pooled(j, t):
    X, Y = np.vstack([X_A, X_B]), np.concatenate([Y_A, Y_B])
    return _sse_decrease(X[:, j], Y, t)


def _same_partition(j, t, feature, threshold):
    X = np.vstack([X_A, X_B])
    return feature == j and np.array_equal(X[:, j] <= t, X[:, feature] <= threshold)


def test_avgimp_tiny_case_matches_the_papers_definition():
    j, t = _brute_force(range(3), _avgimp)
    # The pooled optimum cuts between the clients (x0 <= 3), where no client's own rows
    # split: its AvgImp gain is 0, and AvgImp cuts within client a instead.
    assert _brute_force(range(3), _pooled)[:1] == (0,) and _pooled(0, 3.0) > _pooled(j, t)
    assert _avgimp(0, 3.0) == 0.0
    feature, threshold = _fit_root(split_rule="avgimp")
    assert _same_partition(j, t, feature, threshold), (j, t, feature, threshold)


def _local_best(X, Y, j):
    return max(_sse_decrease(X[:, j], Y, t) for t in np.unique(X[:, j])[:-1])


def test_top_l_tiny_case_shortlists_and_splits_as_defined():
    # Each client's best local gain per feature M_k(j); with L = 1 the shortlist is the
    # feature with the largest summed M_k(j) and any feature both clients rank first.
    m = {
        k: [_local_best(X, Y, j) for j in range(3)]
        for k, (X, Y) in {"a": (X_A, Y_A), "b": (X_B, Y_B)}.items()
    }
    tops = {k: int(np.argmax(v)) for k, v in m.items()}
    summed = {j: sum(m[k][j] for k in m if tops[k] == j) for j in set(tops.values())}
    shortlist = {max(summed, key=lambda j: (summed[j], -j))}
    shortlist |= {j for j in tops.values() if list(tops.values()).count(j) == 2}
    for kw, objective in ((dict(), _pooled), (dict(split_rule="avgimp"), _avgimp)):
        j, t = _brute_force(sorted(shortlist), objective)
        feature, threshold = _fit_root(top_l=1, **kw)
        assert _same_partition(j, t, feature, threshold), (kw, j, t, feature, threshold)
