"""Kernels against independent references (brute force from the definitions), not twins.

Each kernel's NumPy twin (tests/test_kernels.py) shares its author's reading of the
definition; here the reference is the definition written row by row: sums over the rows
of a node with ``x <= t``, impurity decreases enumerated split by split, quantiles of the
sorted values.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedforest._common import N_FINE_BINS, n_stats
from fedforest.federated import client_kernels as K
from fedforest.federated.client_sketch import fine_codes, node_sketches
from fedforest.federated.server.splitter import best_splits


def _stats_row(y: np.ndarray, w: np.ndarray, n_classes: int) -> np.ndarray:
    """[distinct rows, weight, sum wy, sum wy^2] or [rows, weight, class weights...]."""
    out = [float((w > 0).sum()), float(w.sum())]
    if n_classes:
        out += [float(w[y == c].sum()) for c in range(n_classes)]
    else:
        out += [float((w * y).sum()), float((w * y * y).sum())]
    return np.array(out)


def _problem(seed: int, n_classes: int, discrete: bool, n: int = 500, d: int = 4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if discrete:
        X = np.round(X * 3) / 3
    rows = np.sort(rng.choice(n, size=n // 2, replace=False)).astype(np.int32)
    w = rng.integers(1, 4, size=rows.size).astype(np.float64)
    slot = rng.integers(-1, 3, size=rows.size).astype(np.int32)
    y = rng.integers(0, n_classes, n).astype(float) if n_classes else rng.normal(size=n)
    return rng, X, rows, w, slot, y


@pytest.mark.parametrize("n_classes", [0, 3])
def test_node_summaries_are_the_sums_of_each_nodes_rows(n_classes: int) -> None:
    _, X, rows, w, slot, y = _problem(0, n_classes, False)
    s = n_stats("classification" if n_classes else "regression", n_classes)
    out = np.zeros((3, s))
    K.node_summaries(rows, w, slot, y, n_classes, out)
    for node in range(3):
        mine = slot == node
        expect = _stats_row(y[rows[mine]], w[mine], n_classes)
        np.testing.assert_allclose(out[node], expect, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("n_classes", [0, 2])
@pytest.mark.parametrize("discrete", [False, True])
@pytest.mark.parametrize("n_fine", [8, N_FINE_BINS])
def test_left_stats_are_the_sums_of_the_rows_below_each_candidate(
    n_classes: int, discrete: bool, n_fine: int
) -> None:
    """Brute force: for every (node, feature, candidate t), sum the node's rows with x <= t;
    few fine bins (8) put many candidates inside a bin (the binary-search path)."""
    rng, X, rows, w, slot, y = _problem(1, n_classes, discrete)
    pair_off = np.array([0, 2, 3, 5], dtype=np.int64)
    pair_feat = np.array([0, 3, 1, 2, 0], dtype=np.int32)
    lists = [np.unique(rng.choice(X[:, f], size=6)) for f in pair_feat]
    lists[2] = np.append(lists[2], X[:, 1].max() + 1.0)  # above every row: all rows left
    cand_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum([c.size for c in lists], out=cand_off[1:])
    cand = np.concatenate(lists)
    codes, fmin, fmax = fine_codes(X, n_fine)
    s = n_stats("classification" if n_classes else "regression", n_classes)
    out = np.empty((cand.size, s))
    K.left_stats(
        X.T.copy(), codes, fmin, fmax, rows, w, slot, y, n_classes,
        pair_off, pair_feat, cand_off, cand, 0, 3, out,
    )  # fmt: skip
    for node in range(3):
        mine = slot == node
        for p in range(pair_off[node], pair_off[node + 1]):
            f = pair_feat[p]
            for c in range(cand_off[p], cand_off[p + 1]):
                below = mine & (X[rows, f] <= cand[c])
                expect = _stats_row(y[rows[below]], w[below], n_classes)
                np.testing.assert_allclose(out[c], expect, rtol=1e-12, atol=1e-9)


def _impurity(stats: np.ndarray, criterion: str) -> float:
    """W * Psi(s) from the definition (variance; Gini; entropy in bits)."""
    weight = stats[1]
    if weight <= 0:
        return 0.0
    if criterion == "squared_error":
        return float(stats[3] - stats[2] ** 2 / weight)
    p = stats[2:] / weight
    if criterion == "gini":
        return float(weight * (1.0 - (p * p).sum()))
    p = p[p > 0]
    return float(-weight * (p * np.log2(p)).sum())


@pytest.mark.parametrize("criterion", ["squared_error", "gini", "entropy"])
def test_best_split_is_the_brute_force_maximum(criterion: str) -> None:
    """Every candidate of every node scored from the definition of the impurity decrease,
    with min_samples_leaf distinct rows per side; the kernel's choice has the maximal gain."""
    n_classes = 0 if criterion == "squared_error" else 3
    rng, X, rows, w, slot, y = _problem(2, n_classes, False)
    pair_off = np.array([0, 3, 5, 6], dtype=np.int64)
    pair_feat = np.array([0, 1, 2, 3, 0, 1], dtype=np.int32)
    lists = [np.sort(rng.choice(X[:, f], size=10, replace=False)) for f in pair_feat]
    cand_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum([c.size for c in lists], out=cand_off[1:])
    cand = np.concatenate(lists)
    parent = np.stack([_stats_row(y[rows[slot == k]], w[slot == k], n_classes) for k in range(3)])
    left = np.empty((cand.size, parent.shape[1]))
    for node in range(3):
        mine = slot == node
        for p in range(pair_off[node], pair_off[node + 1]):
            for c in range(cand_off[p], cand_off[p + 1]):
                below = mine & (X[rows, pair_feat[p]] <= cand[c])
                left[c] = _stats_row(y[rows[below]], w[below], n_classes)
    msl = 7
    best = best_splits(
        parent, pair_off, pair_feat, cand_off, cand, left,
        criterion=criterion, min_samples_leaf=msl, min_impurity_decrease=0.0,
        root_weight=parent[:, 1],
    )  # fmt: skip
    for node in range(3):
        scores = []
        for p in range(pair_off[node], pair_off[node + 1]):
            for c in range(cand_off[p], cand_off[p + 1]):
                lt, rt = left[c], parent[node] - left[c]
                if lt[0] < msl or rt[0] < msl:
                    continue
                gain = (
                    _impurity(parent[node], criterion)
                    - _impurity(lt, criterion)
                    - _impurity(rt, criterion)
                )
                scores.append((gain, pair_feat[p], cand[c]))
        top = max(scores)
        assert best.feature[node] >= 0
        assert best.gain[node] == pytest.approx(top[0], rel=1e-9, abs=1e-9)
        chosen = [s for s in scores if s[1] == best.feature[node] and s[2] == best.threshold[node]]
        assert chosen and chosen[0][0] == pytest.approx(top[0], rel=1e-9, abs=1e-9)


def test_sketch_error_is_bounded_by_one_fine_bin_on_many_distinct_values() -> None:
    """With more distinct values than fine bins (here 5000 > 256), a node's sketch reads its
    quantiles off the fine-code histogram: each level's value is the largest value of the
    fine bin holding the exact weighted quantile, so it is at least the exact quantile and
    the node's weight between the two is at most one fine bin's."""
    rng = np.random.default_rng(4)
    n, b = 20000, 32
    x = rng.normal(size=(n, 1))
    codes, _, fmax = fine_codes(x, N_FINE_BINS)
    rows = np.arange(n, dtype=np.int32)
    w = rng.integers(1, 4, size=n).astype(np.float64)
    slot = (x[:, 0] > -0.5).astype(np.int32)  # node 1 holds ~70 % of the rows: > 4096
    out = np.empty((2, b))
    node_sketches(
        x.T.copy(), codes, fmax, rows, w, slot,
        np.array([0, 1, 2]), np.array([0, 0], np.int32), 0, 2, out,
    )  # fmt: skip
    bin_weight = np.bincount(codes[0], weights=w, minlength=N_FINE_BINS)
    for node in range(2):
        mine = slot == node
        v, ww = x[mine, 0], w[mine]
        order = np.argsort(v)
        v, cw = v[order], np.cumsum(ww[order])
        total = cw[-1]
        for level in range(b):
            target = total * (level + 1) / b
            exact = v[np.searchsorted(cw, target * (1 - 1e-12))]
            got = out[node, level]
            assert got >= exact - 1e-12
            # the weight of the node's rows in (exact, got] is at most one fine bin's
            between = ww[(x[mine, 0] > exact) & (x[mine, 0] <= got)].sum()
            assert between <= bin_weight.max() + 1e-9
            # exactly: the largest value of the fine bin that holds the exact quantile (it
            # may belong to a row of another node when the bin straddles the node's bound)
            code = codes[0][np.flatnonzero(x[:, 0] == exact)[0]]
            assert got == fmax[0, code]
