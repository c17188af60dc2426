"""Every numba kernel agrees with its NumPy twin on seeded random data."""

import numpy as np
import pytest

from fedforest._common import N_FINE_BINS, n_stats
from fedforest.federated import client_kernels as K
from fedforest.federated import client_route
from fedforest.federated.client_sketch import fine_codes
from fedforest.federated.server.merge import merge_sketches


def _state(rng, n=400, d=6, n_slots=7, discrete=False):
    X = rng.normal(size=(n, d))
    if discrete:
        X = np.round(X * 2) / 2  # few distinct values: exact fine bins
    rows = np.sort(rng.choice(n, size=n // 2, replace=False)).astype(np.int32)
    w = rng.integers(1, 4, size=rows.size).astype(np.float64)
    slot = rng.integers(-1, n_slots, size=rows.size).astype(np.int32)
    n_feat = rng.integers(1, d + 1, size=n_slots)
    pair_off = np.zeros(n_slots + 1, dtype=np.int64)
    np.cumsum(n_feat, out=pair_off[1:])
    pair_feat = np.concatenate([rng.choice(d, size=k, replace=False) for k in n_feat]).astype(
        np.int32
    )
    return X, rows, w, slot, pair_off, pair_feat


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("sets", [True, False])
def test_route_rows_twins(seed, sets):
    rng = np.random.default_rng(seed)
    X, rows, _, slot, *_ = _state(rng)
    n_prev = 7
    feature = rng.integers(-1, X.shape[1], size=n_prev).astype(np.int32)
    feature[rng.integers(0, n_prev)] = 0 if sets else 1  # a set split, or none at all
    if not sets:
        feature[feature == 0] = 2
    threshold = rng.normal(size=n_prev)
    left = rng.integers(-1, 12, size=n_prev).astype(np.int32)
    right = rng.integers(-1, 12, size=n_prev).astype(np.int32)
    # Column 0 holds codes 0..3 and the slots splitting on it are set splits.
    X[:, 0] = rng.integers(0, 4, X.shape[0])
    sizes = np.where(feature == 0, 4, 0)
    set_off = np.zeros(n_prev + 1, dtype=np.int64)
    np.cumsum(sizes, out=set_off[1:])
    set_code = np.tile(np.arange(4, dtype=np.int32), int((feature == 0).sum()))
    set_side = rng.integers(0, 2, set_code.size).astype(np.int8)
    # Missing values (+inf at the clients) in a numeric column go by missing_left.
    X[rng.random(X.shape[0]) < 0.2, 1] = np.inf
    missing_left = rng.integers(0, 2, n_prev).astype(np.uint8)
    a, b = slot.copy(), slot.copy()
    args = (feature, threshold, left, right, set_off, set_code, set_side, missing_left)
    client_route.route_rows(X.T.copy(), rows, a, *args)
    client_route.route_rows_numpy(X.T.copy(), rows, b, *args)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n_classes", [0, 2, 5])
def test_node_summaries_twins(n_classes):
    rng = np.random.default_rng(n_classes)
    X, rows, w, slot, *_ = _state(rng)
    y = rng.integers(0, n_classes, X.shape[0]).astype(float) if n_classes else rng.normal(size=400)
    s = n_stats("classification" if n_classes else "regression", n_classes)
    a, b = np.zeros((7, s)), np.zeros((7, s))
    K.node_summaries(rows, w, slot, y, n_classes, a)
    K.node_summaries_numpy(rows, w, slot, y, n_classes, b)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # Statistics are sums: the summary of all slots equals the statistics of all active rows.
    active = slot >= 0
    np.testing.assert_allclose(a[:, 0].sum(), active.sum())
    np.testing.assert_allclose(a[:, 1].sum(), w[active].sum())


def _sorted_state(rng, n=600, discrete=False):
    # Slots sized around SMALL_NODE so both kernel paths run.
    X, rows, w, slot, pair_off, pair_feat = _state(rng, n=n, discrete=discrete)
    slot = np.where(rng.random(slot.size) < 0.6, 0, slot).astype(np.int32)
    return X, rows, w, slot, pair_off, pair_feat


def test_group_rows_twins():
    rng = np.random.default_rng(0)
    slot = rng.integers(-1, 9, 500).astype(np.int32)
    a, b = np.empty(500, np.int64), np.empty(500, np.int64)
    sa, sb = np.empty(10, np.int64), np.empty(10, np.int64)
    K.group_rows(slot, 0, a, sa)
    K.group_rows_numpy(slot, 0, b, sb)
    np.testing.assert_array_equal(sa, sb)
    np.testing.assert_array_equal(a[: sa[-1]], b[: sb[-1]])


@pytest.mark.parametrize("discrete", [False, True])
@pytest.mark.parametrize("n_classes", [0, 3])
@pytest.mark.parametrize("n_fine", [16, N_FINE_BINS])
def test_left_stats_twins(discrete, n_classes, n_fine):
    rng = np.random.default_rng(7 + n_classes)
    X, rows, w, slot, pair_off, pair_feat = _sorted_state(rng, discrete=discrete)
    y = rng.integers(0, n_classes, X.shape[0]).astype(float) if n_classes else rng.normal(size=600)
    codes, fmin, fmax = fine_codes(X, n_fine)  # 16 fine bins: many straddle a candidate
    lists = [np.unique(rng.choice(X[:, f], size=rng.integers(0, 9))) for f in pair_feat]
    cand_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum([c.size for c in lists], out=cand_off[1:])
    cand = np.concatenate(lists)
    s = n_stats("classification" if n_classes else "regression", n_classes)
    a = np.empty((cand.size, s))
    b = np.empty_like(a)
    Xt = X.T.copy()
    args = (Xt, codes, fmin, fmax, rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off, cand)
    K.left_stats(*args, 0, pair_off.size - 1, a)
    K.left_stats_numpy(*args, 0, pair_off.size - 1, b)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("discrete", [False, True])
def test_node_sketches_twins(discrete):
    from fedforest.federated.client_sketch import node_sketches, node_sketches_numpy

    rng = np.random.default_rng(3)
    X, rows, w, slot, pair_off, pair_feat = _sorted_state(rng, discrete=discrete)
    codes, _, fmax = fine_codes(X, N_FINE_BINS)
    a = np.empty((pair_feat.size, 8))
    b = np.empty_like(a)
    node_sketches(
        X.T.copy(), codes, fmax, rows, w, slot, pair_off, pair_feat, 0, pair_off.size - 1, a
    )
    node_sketches_numpy(
        X.T.copy(), codes, fmax, rows, w, slot, pair_off, pair_feat, 0, pair_off.size - 1, b
    )
    np.testing.assert_array_equal(a, b)


def test_node_sketch_is_exact_weighted_quantile():
    from fedforest.federated.client_sketch import node_sketches

    x = np.array([[3.0], [1.0], [2.0], [5.0], [4.0]])
    codes, _, fmax = fine_codes(x)
    rows = np.arange(5, dtype=np.int32)
    w = np.array([1.0, 1.0, 1.0, 1.0, 6.0])  # 60 % of the weight on x = 4
    out = np.empty((1, 5))
    node_sketches(
        x.T.copy(),
        codes,
        fmax,
        rows,
        w,
        np.zeros(5, np.int32),
        np.array([0, 1]),
        np.array([0], np.int32),
        0,
        1,
        out,
    )
    # cumulative weight by sorted value 1,2,3,4,5: 1,2,3,9,10 of 10 -> levels .2 .4 .6 .8 1
    np.testing.assert_array_equal(out[0], [2.0, 4.0, 4.0, 4.0, 5.0])


def test_merge_single_client_gives_its_quantiles():
    sk = np.arange(1.0, 9.0)[None, None, :]  # B = 8 levels of one client
    off, cand = merge_sketches(sk, np.array([[80.0]]), 8)
    np.testing.assert_array_equal(off, [0, 7])
    np.testing.assert_array_equal(cand, np.arange(1.0, 8.0))  # the max (8) is dropped


def test_merge_weights_clients_by_node_weight():
    # Client A (weight 3) sits on 0..3, client B (weight 1) on 10..13: the pooled median is in A.
    a = np.array([0.0, 1.0, 2.0, 3.0])
    b = np.array([10.0, 11.0, 12.0, 13.0])
    off, cand = merge_sketches(np.stack([a, b])[:, None, :], np.array([[3.0], [1.0]]), 4)
    # points weigh 0.75 (A) and 0.25 (B); levels 1, 2, 3 of 4 fall on 1, 2, 3
    np.testing.assert_array_equal(cand, [1.0, 2.0, 3.0])


def test_merge_ignores_empty_clients_and_dedups():
    sk = np.array([[[1.0, 1.0, 1.0, 2.0]], [[np.nan] * 4]])
    off, cand = merge_sketches(sk, np.array([[4.0], [0.0]]), 4)
    np.testing.assert_array_equal(cand, [1.0])


@pytest.mark.parametrize("seed", range(4))
def test_mixture_quantiles_twins(seed):
    from fedforest.federated.server.merge import mixture_quantiles, mixture_quantiles_numpy

    rng = np.random.default_rng(seed)
    k, p, b = 5, 40, 8
    sk = np.sort(np.round(rng.normal(size=(k, p, b)), 1), axis=2)
    wt = rng.integers(0, 20, size=(k, p)).astype(float)
    sk[wt == 0] = np.nan
    a, c = np.full((p, b - 1), np.nan), np.zeros(p, np.int64)
    a2, c2 = a.copy(), c.copy()
    mixture_quantiles(sk, wt, a, c)
    mixture_quantiles_numpy(sk, wt, a2, c2)
    np.testing.assert_array_equal(c, c2)
    for i in range(p):
        np.testing.assert_array_equal(a[i, : c[i]], a2[i, : c2[i]])


@pytest.mark.parametrize("seed", range(6))
def test_mixture_quantiles_twins_runs_ties_unsorted(seed):
    """The kernel's merge of sorted rows (runs of equal points, ties across clients, -0.0
    beside 0.0, fractional weights) and its sorting path (unsorted rows, NaN inside a row)
    give the twin's candidates, bit for bit."""
    from fedforest.federated.server.merge import mixture_quantiles, mixture_quantiles_numpy

    rng = np.random.default_rng(seed)
    k, p, b = 9, 60, 32
    sk = np.sort(rng.integers(0, 4, size=(k, p, b)) * 0.5, axis=2)
    sk[:, :20] = np.sort(np.round(rng.normal(size=(k, 20, b)), 1), axis=2)
    sk[:, 20:25] = np.where(sk[:, 20:25] == 0.0, -0.0, sk[:, 20:25])
    sk[:, 25:30] = rng.normal(size=(k, 5, b))  # unsorted rows
    sk[0, 30, 5] = np.nan  # NaN inside a row
    wt = rng.integers(0, 20, size=(k, p)) * (1.0 if seed % 2 else 0.37)
    sk[wt == 0] = np.nan
    a, c = np.full((p, b - 1), np.nan), np.zeros(p, np.int64)
    a2, c2 = a.copy(), c.copy()
    mixture_quantiles(sk, wt, a, c)
    mixture_quantiles_numpy(sk, wt, a2, c2)
    np.testing.assert_array_equal(c, c2)
    assert c.sum() > p  # candidates were found
    for i in range(p):
        np.testing.assert_array_equal(a[i, : c[i]], a2[i, : c2[i]])
        np.testing.assert_array_equal(np.signbit(a[i, : c[i]]), np.signbit(a2[i, : c2[i]]))


def test_merge_sketches_threads_agree():
    rng = np.random.default_rng(5)
    sk = np.sort(rng.normal(size=(4, 9000, 8)), axis=2)
    wt = rng.integers(0, 5, size=(4, 9000)).astype(float)
    sk[wt == 0] = np.nan
    one = merge_sketches(sk, wt, 8, n_threads=1)
    two = merge_sketches(sk, wt, 8, n_threads=2)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])


@pytest.mark.parametrize(("n_counts", "n_sums"), [(3, 0), (3, 2), (2, 2)])  # (2, 2): unrolled
def test_add_rows_and_cumsum_segments_twins(n_counts, n_sums):
    from fedforest.federated.server.level import (
        add_rows,
        add_rows_numpy,
        cumsum_segments,
        cumsum_segments_numpy,
    )

    rng = np.random.default_rng(n_sums)
    pos = np.flatnonzero(rng.random(500) < 0.4)
    counts = rng.integers(0, 50, size=(pos.size, n_counts)).astype(np.int32)
    sums = rng.normal(size=(pos.size, n_sums))
    a = rng.normal(size=(500, n_counts + n_sums))
    b = a.copy()
    add_rows(a, pos, counts, sums)
    add_rows_numpy(b, pos, counts, sums)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    off = np.unique(np.concatenate([[0, 500], rng.integers(0, 500, 40)])).astype(np.int64)
    cumsum_segments(a, off)
    cumsum_segments_numpy(b, off)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("block", [16384, 64])  # 64: many blocks of pairs per thread
def test_sum_increments_in_threads_is_the_sum_in_one(n_threads, block, monkeypatch):
    from fedforest.federated.server import level

    monkeypatch.setattr(level, "PARALLEL_ROWS", 100)  # threads on a small problem
    monkeypatch.setattr(level, "BLOCK_ROWS", block)
    rng = np.random.default_rng(n_threads)
    n = 2000
    off = np.unique(np.concatenate([[0, n], rng.integers(0, n, 150)])).astype(np.int64)
    parts = []
    for _ in range(5):  # clients, each with sparse increasing positions
        pos = np.flatnonzero(rng.random(n) < 0.5)
        counts = rng.integers(0, 9, size=(pos.size, 2)).astype(np.int32)
        parts.append((pos, counts, rng.normal(size=(pos.size, 2)) * 10.0 ** rng.integers(-8, 8)))
    want = np.zeros((n, 4))
    for pos, counts, sums in parts:  # the order of additions of one thread
        level.add_rows(want, pos, counts, sums)
    level.cumsum_segments(want, off)
    got = np.zeros((n, 4))
    level.sum_increments(got, parts, off, n_threads)
    np.testing.assert_array_equal(got, want)  # bit for bit
    one = np.zeros((n, 4))
    level.sum_increments(one, parts, off, 1)
    np.testing.assert_array_equal(one, want)


@pytest.mark.parametrize(
    "n_classes,criterion", [(0, "squared_error"), (3, "gini"), (3, "entropy"), (2, "gini")]
)
@pytest.mark.parametrize("discrete", [False, True])
def test_local_best_thresholds_twins(n_classes, criterion, discrete):
    from fedforest.federated.client_sketch import local_best_thresholds, local_best_thresholds_numpy
    from fedforest.federated.criteria import CRITERION_CODES

    rng = np.random.default_rng(11)
    X, rows, w, slot, pair_off, pair_feat = _sorted_state(rng, discrete=discrete)
    y = rng.integers(0, n_classes, X.shape[0]).astype(float) if n_classes else X[:, 0] ** 2
    codes, _, fmax = fine_codes(X, N_FINE_BINS)
    a, b = np.empty(pair_feat.size), np.empty(pair_feat.size)
    args = (X.T.copy(), codes, fmax, y, n_classes, CRITERION_CODES[criterion], 3)
    rest = (rows, w, slot, pair_off, pair_feat, 0, pair_off.size - 1)
    local_best_thresholds(*args, *rest, a)
    local_best_thresholds_numpy(*args, *rest, b)
    np.testing.assert_array_equal(a, b)
    assert np.isfinite(a).any()


def test_local_best_threshold_is_the_brute_force_best_split():
    from fedforest.federated.client_sketch import local_best_thresholds

    rng = np.random.default_rng(2)
    for n in (30, 200):  # exact path; fine-code path (<= 256 distinct values: exact too)
        x = rng.normal(size=n)
        y = np.where(x > 0.37, 2.0, 0.0) + rng.normal(0, 0.1, n)
        w = rng.integers(1, 3, n).astype(float)
        codes, _, fmax = fine_codes(x[:, None])
        out = np.empty(1)
        local_best_thresholds(
            x[None, :], codes, fmax, y, 0, 0, 5, np.arange(n, dtype=np.int32), w,
            np.zeros(n, np.int32), np.array([0, 1]), np.array([0], np.int32), 0, 1, out,
        )  # fmt: skip
        best, arg = -np.inf, None
        for v in np.unique(x)[:-1]:
            left = x <= v
            if left.sum() < 5 or (~left).sum() < 5:
                continue
            sse = sum(
                (w[m] * (y[m] - np.average(y[m], weights=w[m])) ** 2).sum() for m in (left, ~left)
            )
            if -sse > best + 1e-12:
                best, arg = -sse, v
        assert out[0] == arg
        assert 0.2 < out[0] <= 0.37


def test_local_best_none_for_too_small_nodes():
    from fedforest.federated.client_sketch import local_best_thresholds

    x = np.arange(9.0)
    codes, _, fmax = fine_codes(x[:, None])
    out = np.zeros(1)
    local_best_thresholds(
        x[None, :], codes, fmax, x, 0, 0, 5, np.arange(9, dtype=np.int32), np.ones(9),
        np.zeros(9, np.int32), np.array([0, 1]), np.array([0], np.int32), 0, 1, out,
    )  # fmt: skip
    assert np.isnan(out[0])  # 9 rows cannot leave 5 on each side


@pytest.mark.parametrize("limit", [1, 3, 7])
@pytest.mark.parametrize("k", [12, 20])  # the kernel's insertion sort, and np.sort
def test_merge_local_candidates_twins_and_limit(limit, k):
    from fedforest.federated.server.merge import (
        merge_local_candidates,
        merge_local_candidates_numpy,
    )

    rng = np.random.default_rng(limit)
    n_pairs = 50
    parts, off = [], [0]
    for _ in range(n_pairs):
        u = np.unique(np.round(rng.normal(size=rng.integers(0, 6)), 1))
        parts.append(u)
        off.append(off[-1] + u.size)
    cand_off, cand = np.array(off, np.int64), np.concatenate(parts)
    local = np.round(rng.normal(size=(k, n_pairs)), 1)
    local[rng.random((k, n_pairs)) < 0.3] = np.nan
    oa, ob = np.empty(n_pairs + 1, np.int64), np.empty(n_pairs + 1, np.int64)
    a = np.full(cand.size + n_pairs * limit, np.nan)
    b = a.copy()
    merge_local_candidates(cand_off, cand, local, limit, oa, a)
    merge_local_candidates_numpy(cand_off, cand, local, limit, ob, b)
    np.testing.assert_array_equal(oa, ob)
    np.testing.assert_array_equal(a[: oa[-1]], b[: ob[-1]])
    for p in range(n_pairs):
        got = a[oa[p] : oa[p + 1]]
        old = cand[cand_off[p] : cand_off[p + 1]]
        assert np.all(np.diff(got) > 0)  # sorted, distinct
        assert set(old) <= set(got)  # nothing lost
        assert got.size - old.size <= limit
        assert set(got) <= set(old) | set(local[:, p][~np.isnan(local[:, p])])


@pytest.mark.parametrize("n_classes", [0, 3])
def test_sketch_pairs_gives_both_outputs_of_the_separate_kernels(n_classes):
    from fedforest.federated.client_sketch import local_best_thresholds, node_sketches, sketch_pairs

    rng = np.random.default_rng(7)
    X, rows, w, slot, pair_off, pair_feat = _sorted_state(rng)
    y = rng.integers(0, n_classes, X.shape[0]).astype(float) if n_classes else X[:, 1]
    codes, _, fmax = fine_codes(X, N_FINE_BINS)
    Xt, rest = X.T.copy(), (rows, w, slot, pair_off, pair_feat, 0, pair_off.size - 1)
    sk, loc = np.empty((pair_feat.size, 8)), np.empty(pair_feat.size)
    sketch_pairs(Xt, codes, fmax, y, n_classes, 1, 3, *rest, sk, loc)
    sk2, loc2 = np.empty_like(sk), np.empty_like(loc)
    node_sketches(Xt, codes, fmax, *rest, sk2)
    local_best_thresholds(Xt, codes, fmax, y, n_classes, 1, 3, *rest, loc2)
    np.testing.assert_array_equal(sk, sk2)
    np.testing.assert_array_equal(loc, loc2)


@pytest.mark.parametrize(
    "criterion",
    [
        "squared_error",
        "squared_error/3 outputs",
        "poisson",
        "gini",
        "entropy",
        "gini/2 outputs",
        "entropy/2 outputs",
    ],
)
def test_scan_nodes_twins(criterion):
    from fedforest.federated.criteria import CRITERION_CODES
    from fedforest.federated.server.splitter import scan_nodes, scan_nodes_numpy

    criterion, _, outputs = criterion.partition("/")
    rng = np.random.default_rng(3)
    n_nodes, n_task = 30, 1 if criterion == "squared_error" else 3
    pair_off = np.concatenate([[0], np.cumsum(rng.integers(0, 4, n_nodes))]).astype(np.int64)
    n_pairs = int(pair_off[-1])
    cand_off = np.concatenate([[0], np.cumsum(rng.integers(0, 6, n_pairs))]).astype(np.int64)
    n_cand = int(cand_off[-1])
    counts = np.column_stack([rng.integers(5, 60, n_nodes), rng.integers(60, 120, n_nodes)])
    task = rng.integers(0, 40, size=(n_nodes, n_task)).astype(float)
    if criterion == "squared_error":
        k = 3 if outputs else 1  # multi-output: one (sum, sum of squares) pair per output
        task = np.column_stack(
            [
                c
                for _ in range(k)
                for c in (rng.normal(size=n_nodes) * 30, rng.random(n_nodes) * 900)
            ]
        )
    if criterion == "poisson":  # (sum y >= 0, sum y log y)
        task = np.column_stack([rng.random(n_nodes) * 80, rng.normal(size=n_nodes) * 50])
    n_out = (task.shape[1] // 2) if criterion == "squared_error" else 1
    if outputs and criterion != "squared_error":  # two outputs' class blocks: 3 + 2 classes
        n_out = 2
        weight = counts[:, 1].astype(float)
        share = rng.dirichlet(np.ones(2), n_nodes)
        task = np.column_stack([task, weight[:, None] * share])
        task[:, :3] *= (weight / task[:, :3].sum(axis=1))[:, None]  # each block sums to W
    parent = np.column_stack([counts, task]).astype(float)
    cand_node = np.repeat(np.repeat(np.arange(n_nodes), np.diff(pair_off)), np.diff(cand_off))
    left = parent[cand_node] * rng.random((n_cand, 1))
    left[:, :2] = np.round(left[:, :2])  # integer rows and weights, some below the minimum
    if criterion == "poisson":  # children without positive targets: inadmissible
        left[rng.random(n_cand) < 0.15, 2] = 0.0
    code = CRITERION_CODES[criterion]
    runs = []
    every = np.zeros(0, np.uint8)  # no candidate refused by monotonic_cst
    # min_weight_fraction_leaf: no least weight, then a least weight per node that refuses
    # some candidates the first run admits.
    for min_weight in (np.zeros(n_nodes), parent[:, 1] * rng.uniform(0.0, 0.4, n_nodes)):
        outs = []
        for fn in (scan_nodes, scan_nodes_numpy):
            gain, best = np.empty(n_cand), np.empty(n_nodes)
            chosen = np.empty(n_nodes, np.int64)
            fn(
                parent, pair_off, cand_off, left, code, n_out, 3, min_weight, every, 1e-12,
                gain, best, chosen,
            )  # fmt: skip
            outs.append((gain, best, chosen))
        np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-12)
        np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-12)
        np.testing.assert_array_equal(outs[0][2], outs[1][2])
        assert (outs[0][2] >= 0).sum() > 5
        runs.append(outs[0][0])
    light = np.isfinite(runs[0]) & ~np.isfinite(runs[1])
    assert light.any() and not (np.isfinite(runs[1]) & ~np.isfinite(runs[0])).any()
    w_left = left[:, 1]
    w_right = parent[cand_node, 1] - w_left
    assert np.all(np.minimum(w_left, w_right)[light] < min_weight[cand_node][light])
    # monotonic_cst: candidates refused one by one (0 in ``allowed``) are never chosen.
    allowed = (rng.random(n_cand) < 0.6).astype(np.uint8)
    outs = []
    for fn in (scan_nodes, scan_nodes_numpy):
        gain, best, chosen = np.empty(n_cand), np.empty(n_nodes), np.empty(n_nodes, np.int64)
        fn(
            parent, pair_off, cand_off, left, code, n_out, 3, np.zeros(n_nodes), allowed,
            1e-12, gain, best, chosen,
        )  # fmt: skip
        outs.append((gain, best, chosen))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-12)
    np.testing.assert_array_equal(outs[0][2], outs[1][2])
    assert np.all(outs[0][0][allowed == 0] == -np.inf)
    np.testing.assert_array_equal(np.isfinite(outs[0][0]), np.isfinite(runs[0]) & (allowed == 1))
    picked = outs[0][2][outs[0][2] >= 0]
    assert picked.size > 3 and np.all(allowed[picked] == 1)


def test_merge_sketch_rows_equals_the_dense_merge():
    from fedforest.federated.server.merge import merge_sketch_rows

    rng = np.random.default_rng(4)
    k, p, b = 4, 300, 8
    sk = np.sort(np.round(rng.normal(size=(k, p, b)), 1), axis=2)
    wt = rng.integers(0, 5, size=(k, p)).astype(float)
    sk[wt == 0] = np.nan
    dense = merge_sketches(sk, wt, b)
    # Only the sketches that exist, stacked in another order, with -1 for the others.
    live = np.argwhere(wt > 0)[::-1]
    index = np.full((k, p), -1, dtype=np.int64)
    index[live[:, 0], live[:, 1]] = np.arange(len(live))
    rows = merge_sketch_rows(sk[live[:, 0], live[:, 1]], index, wt, b)
    np.testing.assert_array_equal(dense[0], rows[0])
    np.testing.assert_array_equal(dense[1], rows[1])


def test_merge_sketch_rows_in_threads_is_the_same_merge(monkeypatch):
    from fedforest.federated.server import merge

    rng = np.random.default_rng(8)
    k, p, b = 5, 700, 8
    sk = np.sort(np.round(rng.normal(size=(k, p, b)), 1), axis=2).reshape(k * p, b)
    wt = rng.integers(0, 4, size=(k, p)).astype(float)
    index = np.arange(k * p, dtype=np.int64).reshape(k, p)
    one = merge.merge_sketch_rows(sk, index, wt, b, n_threads=1)
    monkeypatch.setattr(merge, "PARALLEL_PAIRS", 100)  # threads on a small problem
    calls = []
    real = merge.mixture_quantiles_runs
    monkeypatch.setattr(merge, "mixture_quantiles_runs", lambda *a: calls.append(1) or real(*a))
    three = merge.merge_sketch_rows(sk, index, wt, b, n_threads=3)
    assert len(calls) == 3  # three ranges of pairs
    np.testing.assert_array_equal(one[0], three[0])
    np.testing.assert_array_equal(one[1], three[1])


def test_narrow_node_sketches_its_sorted_values_in_both_kernels():
    # A node of 300 rows whose values fall in 2 of the client's 256 fine bins: the sketch
    # is the node's exact weighted quantiles (an oracle computed here), in both twins.
    from fedforest.federated.client_sketch import node_sketches, node_sketches_numpy

    rng = np.random.default_rng(5)
    x = rng.uniform(size=(5000, 1))
    rows = np.flatnonzero(x[:, 0] < 0.006).astype(np.int32)  # about 30 rows in ~2 fine bins
    w = rng.integers(1, 4, size=rows.size).astype(float)
    slot = np.zeros(rows.size, dtype=np.int32)
    codes, _, fmax = fine_codes(x, N_FINE_BINS)
    assert np.unique(codes[0, rows]).size < 2 * 8
    pair_off, pair_feat = np.array([0, 1]), np.array([0], dtype=np.int32)
    a, b = np.empty((1, 8)), np.empty((1, 8))
    node_sketches(x.T.copy(), codes, fmax, rows, w, slot, pair_off, pair_feat, 0, 1, a)
    node_sketches_numpy(x.T.copy(), codes, fmax, rows, w, slot, pair_off, pair_feat, 0, 1, b)
    np.testing.assert_array_equal(a, b)
    v = x[rows, 0]
    order = np.argsort(v)
    cum = np.cumsum(w[order])
    levels = cum[-1] * np.arange(1, 9) / 8 * (1 - 1e-12)
    np.testing.assert_array_equal(a[0], v[order][np.searchsorted(cum, levels)])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_increasing_positions_twins_and_oracle(dtype):
    """A sparse answer's positions: converted to int64 and checked strictly increasing
    within [0, n), by the kernel, its twin and a plain loop, on valid and broken lists."""
    from fedforest.federated.protocol import increasing_positions, increasing_positions_numpy

    rng = np.random.default_rng(7)
    n = 60
    valid = np.flatnonzero(rng.random(n) < 0.5).astype(dtype)
    cases = [valid, valid[:0], valid[:1], np.arange(n, dtype=dtype)]
    for edit in range(5):  # broken: a repeat, a step back, a negative, n, beyond n
        bad = valid.copy()
        if edit == 0:
            bad[3] = bad[2]
        elif edit == 1:
            bad[[3, 4]] = bad[[4, 3]]
        elif edit == 2:
            bad[0] = -1
        else:
            bad[-1] = n + edit - 3
        cases.append(bad)
    verdicts = set()
    for pos in cases:
        want = all(0 <= p < n for p in pos.tolist()) and all(np.diff(pos.astype(np.int64)) > 0)
        for kernel in (increasing_positions, increasing_positions_numpy):
            out = np.full(pos.size, -7, dtype=np.int64)
            assert kernel(pos, n, out) == want
            np.testing.assert_array_equal(out, pos)
        verdicts.add(want)
    assert verdicts == {False, True}
