"""Guided candidates (server/guides.py): the minimum-rows spacing kept, twins agree."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.federated.server.guides import (
    GUIDES_PER_PAIR,
    Guides,
    guided_candidates,
    guided_candidates_numpy,
    pair_best,
)


def _case(rng: np.random.Generator, n_pairs: int, m: int):
    """Random grids with cumulative rows, quantile candidates m apart, guides on the grid."""
    grids, cums, rows, quants, guides = [], [], [], [], []
    for _ in range(n_pairs):
        n_grid = int(rng.integers(0, 30))
        g = np.sort(rng.choice(np.arange(-500, 500) / 10.0, n_grid, replace=False))
        n = float(rng.integers(2 * m, 12 * m))
        cum = np.sort(rng.integers(0, int(n) + 1, n_grid)).astype(float)
        q, last = [], 0.0  # quantile candidates as the kernel of rules.py leaves them
        for j in range(n_grid):
            if cum[j] - last >= m and n - cum[j] >= m and rng.random() < 0.5:
                q.append(g[j])
                last = cum[j]
        k = int(rng.integers(0, min(n_grid, 6) + 1))
        gd = list(rng.choice(g, k, replace=False)) if k else []
        if rng.random() < 0.3:
            gd.append(1000.5)  # not on the grid: skipped
        grids.append(g)
        cums.append(cum)
        rows.append(n)
        quants.append(np.asarray(q))
        guides.append(np.asarray(gd, dtype=float))

    def cat(parts):
        off = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([p.size for p in parts], out=off[1:])
        return (np.concatenate(parts) if parts else np.zeros(0)), off

    grid, grid_off = cat(grids)
    cum_rows, _ = cat(cums)
    quant, quant_off = cat(quants)
    guide, guide_off = cat(guides)
    return grid, grid_off, cum_rows, np.asarray(rows), quant, quant_off, guide, guide_off


@pytest.mark.parametrize("seed", range(4))
def test_guided_candidates_keep_m_rows_apart_and_match_the_twin(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 12))
    grid, grid_off, cum_rows, rows, quant, quant_off, guide, guide_off = _case(rng, 200, m)
    outs = []
    for kernel in (guided_candidates, guided_candidates_numpy):
        out_off = np.zeros(grid_off.size, dtype=np.int64)
        out = np.empty(quant.size + guide.size)
        kernel(grid, grid_off, cum_rows, rows, quant, quant_off, guide, guide_off, m, out_off, out)
        outs.append((out_off.copy(), out[: out_off[-1]].copy()))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    out_off, out = outs[0]
    n_guided = 0
    for p in range(grid_off.size - 1):
        g = grid[grid_off[p] : grid_off[p + 1]]
        c = out[out_off[p] : out_off[p + 1]]
        assert np.all(np.diff(c) > 0)
        assert np.isin(c, g).all()
        r = cum_rows[grid_off[p] : grid_off[p + 1]][np.searchsorted(g, c)]
        # The rule of every released sum: m rows below the first candidate, above the last,
        # and between consecutive ones.
        assert np.all(np.diff(np.concatenate([[0.0], r, [rows[p]]])) >= m)
        # Without guides the quantile candidates come out as they went in.
        gd = guide[guide_off[p] : guide_off[p + 1]]
        q = quant[quant_off[p] : quant_off[p + 1]]
        if not gd.size:
            np.testing.assert_array_equal(c, q)
            continue
        # The first guide on the grid that passes the rule alone is always kept.
        for x in gd:
            if x in g:
                rx = cum_rows[grid_off[p] + np.searchsorted(g, x)]
                if rx >= m and rows[p] - rx >= m:
                    assert x in c
                    n_guided += 1
                break
    assert n_guided > 10  # the case exercises the guides


def test_pair_best_takes_the_first_largest_positive_gain() -> None:
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 6, 300)
    off = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    cand = rng.normal(size=int(off[-1]))
    gain = rng.choice([-np.inf, -1.0, 0.5, 1.0, 2.0], size=cand.size)
    pairs, thr, g = pair_best(off, cand, gain)
    expected = []
    for p in range(counts.size):
        seg = gain[off[p] : off[p + 1]]
        if seg.size and seg.max() > 0:
            j = int(np.argmax(seg))
            expected.append((p, cand[off[p] + j], seg[j]))
    assert [(int(a), float(b), float(c)) for a, b, c in zip(pairs, thr, g, strict=True)] == [
        (a, float(b), float(c)) for a, b, c in expected
    ]


def test_guides_are_the_trees_own_best_inside_the_bounds() -> None:
    rng = np.random.default_rng(1)
    d = 5
    guides = Guides(d)
    entries = []
    for _ in range(3):  # three levels
        n = 40
        tree, f = rng.integers(0, 4, n), rng.integers(0, d, n)
        thr, gain = rng.normal(size=n), rng.random(n)
        guides.add(tree, f, thr, gain)
        entries += list(zip(tree, f, thr, gain, strict=True))
    q_tree, q_f = rng.integers(0, 4, 60), rng.integers(0, d, 60)
    lo, hi = rng.normal(size=60) - 1.0, rng.normal(size=60) + 1.0
    off, got = guides.find(q_tree, q_f, lo, hi)
    for i in range(60):
        mine = [(g, t) for tr, ff, t, g in entries if tr == q_tree[i] and ff == q_f[i]]
        kept = sorted(mine, reverse=True)[:16]  # what the guides keep per (tree, feature)
        inside = [t for g, t in kept if lo[i] < t < hi[i]][:GUIDES_PER_PAIR]
        np.testing.assert_array_equal(got[off[i] : off[i + 1]], inside)
