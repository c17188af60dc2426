"""The one-pass kernels of the server's reply checks agree with their NumPy twins."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.federated.server import check_kernels as ck
from fedforest.federated.server.sketch_runs import dense_runs, runs_problem


def _stats(rng: np.random.Generator, m: int, n_out: int, weighted: bool):
    """Valid regression statistics of m nodes, split as (counts, sums)."""
    rows = rng.integers(0, 6, m)
    weight = (
        rows * rng.uniform(0.5, 3.0, m) if weighted else rows + rng.integers(0, 4, m) * (rows > 0)
    )
    y = rng.normal(size=(m, n_out))
    s1 = weight[:, None] * y
    s2 = weight[:, None] * y * y + rng.uniform(0, 1, (m, n_out)) * (rows > 0)[:, None]
    sums = np.empty((m, 2 * n_out))
    sums[:, ::2], sums[:, 1::2] = s1, s2
    if weighted:
        return rows[:, None].astype(np.int32), np.column_stack([weight, sums])
    return np.column_stack([rows, weight]).astype(np.int32), sums


@pytest.mark.parametrize("seed", range(30))
def test_regression_stats_problem_twins(seed: int) -> None:
    rng = np.random.default_rng(seed)
    weighted, n_out = bool(seed % 2), 1 + seed % 3
    counts, sums = _stats(rng, 50, n_out, weighted)
    assert ck.regression_stats_problem(counts, sums) == 0
    found = set()
    for _ in range(12):  # one to three faults of any kind
        c, s = counts.copy(), sums.copy()
        for _ in range(rng.integers(1, 4)):
            i, fault = rng.integers(50), rng.integers(6)
            if fault == 0:
                s[i, rng.integers(s.shape[1])] = rng.choice([np.nan, np.inf, -np.inf])
            elif fault == 1:
                c[i, 0] = -1
            elif fault == 2:
                s[i, -1] = -0.5  # a negative sum of squares
            elif fault == 3:
                s[i, -2] = 1e3  # Cauchy-Schwarz
            elif fault == 4 and not weighted:
                c[i, 1] = c[i, 0] - 1  # weight below rows
            elif fault == 5 and weighted:
                s[i, 0] = -1.0  # a negative weight
        for cc in (c, c.astype(np.float64)):
            got = ck.regression_stats_problem(cc, s)
            assert got == ck.regression_stats_problem_numpy(cc, s)
            found.add(got)
    assert len(found - {0}) >= 3  # several kinds of fault were met


@pytest.mark.parametrize("seed", range(20))
def test_counts_above_nodes_twins(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_pairs, n_nodes = 30, 10
    n_cand = rng.integers(0, 5, n_pairs)
    cand_off = np.concatenate([[0], np.cumsum(n_cand)]).astype(np.int64)
    node_of_pair = np.sort(rng.integers(0, n_nodes, n_pairs)).astype(np.int64)
    node_stats = rng.integers(3, 12, (n_nodes, 4)).astype(np.float64)
    sent = np.flatnonzero(rng.random(int(cand_off[-1])) < 0.6).astype(np.int64)
    counts = rng.integers(0, 4, (sent.size, 2)).astype(np.int32)
    want = ck.counts_above_nodes_numpy(cand_off, sent, counts, node_of_pair, node_stats)
    assert ck.counts_above_nodes(cand_off, sent, counts, node_of_pair, node_stats) == want
    big = counts.copy()
    if big.size:
        big[-1, seed % 2] = 100  # the last pair now holds more than any node
        assert ck.counts_above_nodes(cand_off, sent, big, node_of_pair, node_stats)
        assert ck.counts_above_nodes_numpy(cand_off, sent, big, node_of_pair, node_stats)


@pytest.mark.parametrize("seed", range(24))
def test_sums_above_nodes_twins(seed: int) -> None:
    """The one-pass kernel and the segmented NumPy sum: the same verdict with each node's
    sums set to its pair's total (summed in order: not above) and with one node's sums
    2^-40 below it (beyond the slack of a one-row node: above, where that pair sent any)."""
    rng = np.random.default_rng(seed)
    task = ("regression", "poisson", "classification")[seed % 3]
    n_count = 1 + seed % 2
    n_pairs, n_stats = 12, 6
    n_cand = rng.integers(0, 40, n_pairs)
    cand_off = np.concatenate([[0], np.cumsum(n_cand)]).astype(np.int64)
    node_of_pair = np.arange(n_pairs, dtype=np.int64)  # one node a pair: totals set below
    sent = np.flatnonzero(rng.random(int(cand_off[-1])) < 0.7).astype(np.int64)
    sums = rng.uniform(0.0, 1.0, (sent.size, n_stats - n_count)) * 10.0 ** rng.integers(
        -3, 4, (sent.size, 1)
    )
    pair = np.searchsorted(cand_off, sent, side="right") - 1
    node_stats = np.zeros((n_pairs, n_stats))
    for r in range(sent.size):  # the totals in order of the increments
        node_stats[pair[r], n_count:] += sums[r]
    node_stats[:, 0] = 1.0  # one row: a slack of 8 units of roundoff
    args = (cand_off, sent, sums, n_count, task)
    assert not ck.sums_above_nodes(*args, node_of_pair, node_stats)
    assert not ck.sums_above_nodes_numpy(*args, node_of_pair, node_stats)
    for k in range(n_pairs):
        low = node_stats.copy()
        low[k, n_count:] *= 1.0 - 2.0**-40  # beyond the slack, in every column
        want = ck.sums_above_nodes_numpy(*args, node_of_pair, low)
        assert ck.sums_above_nodes(*args, node_of_pair, low) == want
        assert want == bool(np.any(pair == k) and np.any(low[k, n_count:] > 0))


@pytest.mark.parametrize("seed", range(20))
def test_sketch_check_over_runs_is_the_dense_check(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sk = np.sort(np.round(rng.normal(size=(40, 8)), 1), axis=1)
    sk[1:][rng.random(39) < 0.2] = np.nan  # features missing in the node: allowed
    i = rng.choice(np.flatnonzero(~np.isnan(sk[:, 0])))  # a row with values
    if seed % 4 == 1:
        sk[i, rng.integers(8)] = np.inf
    if seed % 4 == 2:
        sk[i] = np.arange(8.0)[::-1]  # unsorted
    if seed % 4 == 3:
        sk[i, 3] = np.nan  # NaN inside a row
    g1, g2 = np.zeros(40, bool), np.ones(40, bool)
    runs = dense_runs(sk)
    got = runs_problem(runs.values, runs.row_off, g1)
    assert got == ck.dense_sketch_problem(sk, g2)
    assert (got == 0) == (seed % 4 == 0)
    if got == 0:
        np.testing.assert_array_equal(g1, g2)


@pytest.mark.parametrize("count_dtype", [np.int8, np.int32, np.int64, np.float16, np.float32])
@pytest.mark.parametrize("sum_dtype", [np.float16, np.float32, np.float64])
def test_checks_take_the_dtypes_a_client_may_send(count_dtype, sum_dtype) -> None:
    """A reply's arrays keep their dtype (a client picks it): the kernels still check them."""
    from fedforest.federated.server.checks import InvalidReply, _check_stats_parts

    counts = np.array([[2, 3], [1, 1]], dtype=count_dtype)
    sums = np.array([[1.0, 2.0], [0.5, 0.3]], dtype=sum_dtype)
    _check_stats_parts("c", "round_b", "the left statistics", counts, sums, "regression")
    sums[0, 1] = -1.0
    with pytest.raises(InvalidReply, match="sums of y\\^2 smaller"):
        _check_stats_parts("c", "round_b", "the left statistics", counts, sums, "regression")


def test_cumulative_problem_matches_its_twin() -> None:
    # The pooled cumulative counts' check (secure_checks.check_pooled_cumulative): the
    # first failing edge, kernel against the NumPy formulation, on honest and broken sums.
    rng = np.random.default_rng(11)
    for trial in range(300):
        n_seg = int(rng.integers(1, 8))
        sizes = rng.integers(0, 6, size=n_seg)
        off = np.zeros(n_seg + 1, dtype=np.int64)
        np.cumsum(sizes, out=off[1:])
        n_cols = 1 + trial % 2
        steps = rng.integers(0, 4, size=(int(off[-1]), n_cols)).astype(np.float64)
        cum = np.zeros_like(steps)
        edges = np.sort(rng.normal(size=int(off[-1])))
        total = np.zeros((n_seg, n_cols))
        for g in range(n_seg):
            seg = slice(off[g], off[g + 1])
            cum[seg] = np.cumsum(steps[seg], axis=0)
            total[g] = cum[off[g + 1] - 1] + rng.integers(0, 2) if sizes[g] else 3.0
        tol = np.zeros(n_cols)
        tol[1:] = 1e-7 if trial % 4 == 1 else 0.0
        if trial % 3 and cum.size:  # break one value
            i, c = int(rng.integers(cum.shape[0])), int(rng.integers(n_cols))
            cum[i, c] = [np.nan, -1.0, 0.5, cum[i, c] + 10.0, cum[i, c] - 2.0, np.inf][trial % 6]
        if trial % 5 == 0 and edges.size:
            edges[::3] = edges[0]  # ties and decreasing edges: no fall is checked there
        want = ck.cumulative_problem_numpy(cum, off, edges, total, tol)
        assert ck.cumulative_problem(cum, off, edges, total, tol) == want


def _tree_summaries(rng: np.random.Generator, n_count: int, bootstrap: bool):
    """Valid node summaries of a level (pairs of children) and their parents' rows."""
    n_pairs, n_stats = 30, n_count + 2
    parent = np.zeros((2 * n_pairs + 4, n_stats))
    summary = np.zeros_like(parent)
    root = np.zeros(parent.shape[0], dtype=bool)
    root[-4:] = True  # new roots: weight 0 or the draws
    siblings = np.full(parent.shape[0], -1, dtype=np.int64)
    for k in range(n_pairs):
        a, b = 2 * k, 2 * k + 1
        siblings[a], siblings[b] = b, a
        rows = rng.integers(0, 20)
        left = rng.integers(0, rows + 1)
        weight = rows + rng.integers(0, 5) * (rows > 0) if bootstrap else rows
        w_left = min(weight, left + (weight - rows) // 2) if left else 0
        if left == rows:
            w_left = weight
        for i, (r, w) in ((a, (left, w_left)), (b, (rows - left, weight - w_left))):
            summary[i, 0], summary[i, 1] = r, w
            summary[i, n_count:] = (w * 0.5, w * 1.0)
        parent[a, :2] = parent[b, :2] = (rows, weight)
        parent[a, n_count:] = parent[b, n_count:] = (weight * 0.5, weight * 1.0)
    n_draws = 40.0
    summary[-4:, 0] = summary[-4:, 1] = (0, n_draws, 0, n_draws) if bootstrap else 0
    if not bootstrap:
        summary[-3, :2] = summary[-1, :2] = n_draws
    parent[-4:] = np.nan
    return summary, root, parent, siblings, n_draws


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("bootstrap", [True, False])
def test_summary_problem_twins(seed: int, bootstrap: bool) -> None:
    """Every fault the node-summary checks know, injected alone or with others, is the
    same first fault for the kernel and its twin (and valid summaries pass both)."""
    rng = np.random.default_rng(seed)
    n_count = 2
    summary, root, parent, siblings, n_draws = _tree_summaries(rng, n_count, bootstrap)
    faults = {
        ck.TOO_MANY_ROWS: lambda s, p: s.__setitem__((3, 0), 1000.0),
        ck.ROOT_WEIGHT: lambda s, p: s.__setitem__((-3, 1), n_draws - 1),
        ck.ABOVE_PARENT: lambda s, p: s.__setitem__((5, 1), p[5, 1] + 1),
        ck.NOT_ADDING: lambda s, p: p.__setitem__((8, 0), p[8, 0] + 1),
    }
    cases = [()] + [(c,) for c in faults] + [tuple(faults)] + [(ck.ABOVE_PARENT, ck.NOT_ADDING)]
    cases.append(("last",))
    for case in cases:
        s, p = summary.copy(), parent.copy()
        for code in case:
            if code == "last":  # the last column above the parent's (regression only)
                s[10, -1] = p[10, -1] * 1.01 + 1.0
            else:
                faults[code](s, p)
        for regression in (True, False):
            for par, sib in ((p, siblings), (p, siblings[:0]), (p[:0], siblings)):
                args = (s, n_count, 60.0, root, n_draws, bootstrap, regression, 1e-9, par, sib)
                got = ck.summary_problem(*args)
                assert got == ck.summary_problem_numpy(*args)
                if case == () or not par.size:
                    assert got in ((0, ck.TOO_MANY_ROWS, ck.ROOT_WEIGHT) if case else (0,))
                elif case != ("last",):
                    assert got == min(case) or (min(case) == ck.NOT_ADDING and not sib.size)
                else:
                    assert got == (ck.ABOVE_PARENT if regression else 0)


def test_regression_reply_problems_is_the_three_checks() -> None:
    """Round B's fused regression check returns what the three one-check kernels (and so
    their NumPy twins, tested above) return, on clean replies and faults of each kind:
    unweighted one-output rows (the unrolled path) and weighted or two-output ones."""
    found = set()
    for seed in range(80):
        rng = np.random.default_rng(seed)
        weighted, n_out = seed % 2 == 1, 1 + seed % 3 // 2
        n_pairs, n_nodes = 25, 8
        n_cand = rng.integers(0, 6, n_pairs)
        cand_off = np.concatenate([[0], np.cumsum(n_cand)]).astype(np.int64)
        node_of_pair = np.sort(rng.integers(0, n_nodes, n_pairs)).astype(np.int64)
        sent = np.flatnonzero(rng.random(int(cand_off[-1])) < 0.6).astype(np.int64)
        counts, sums = _stats(rng, sent.size, n_out, weighted)
        n_count = counts.shape[1]
        pair = np.searchsorted(cand_off, sent, side="right") - 1
        node_stats = np.zeros((n_nodes, n_count + sums.shape[1]))
        np.add.at(node_stats, node_of_pair[pair], np.column_stack([counts, sums]))
        # Nodes hold their pairs' totals or more; on some seeds one node a little less.
        node_stats *= rng.choice([1.0, 1.5], n_nodes)[:, None]
        if seed % 5 == 0:
            node_stats[rng.integers(n_nodes)] *= 0.9
        fault = seed % 4
        if sent.size and fault == 1:
            sums[rng.integers(sent.size), 0] = np.nan
        if sent.size and fault == 2:
            counts = counts.astype(np.float64)
            counts[rng.integers(sent.size), 0] = 0.5
        if sent.size and fault == 3:
            sums[rng.integers(sent.size), -1] = -1.0  # a negative sum of y^2
        cols = ck.sum_columns(n_count, "regression", node_stats.shape[1])
        want = (
            int(ck.regression_stats_problem(counts, sums)),
            bool(ck.counts_above_nodes(cand_off, sent, counts, node_of_pair, node_stats)),
            bool(
                ck.sums_above_kernel(cand_off, sent, sums, cols, n_count, node_of_pair, node_stats)
            ),
        )
        got = ck.regression_reply_problems(
            counts, sums, cand_off, sent, cols, node_of_pair, node_stats
        )
        assert (int(got[0]), bool(got[1]), bool(got[2])) == want, seed
        found.add(want)
    problems = {w[0] for w in found}
    assert len(problems - {0}) >= 3 and 0 in problems
    assert {w[1] for w in found} == {w[2] for w in found} == {False, True}
