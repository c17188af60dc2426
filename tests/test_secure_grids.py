"""The secure server's per-pair segments (server/secure_grids.py): gathers against slices."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.federated.privacy.intervals import interval_checks
from fedforest.federated.server import secure_grids
from fedforest.federated.server.secure_ancestors import ReleasePool, _merge_segments
from fedforest.federated.server.secure_grids import (
    PairSegments,
    ancestors_kept,
    ancestors_releases_numpy,
    gather_rows,
    gather_rows_numpy,
    near_tails,
    offsets,
)


def _segments(rng: np.random.Generator, n: int, width: int) -> PairSegments:
    sizes = rng.integers(0, 4, size=n)
    shape = (int(sizes.sum()),) + ((width,) if width else ())
    return PairSegments(np.arange(n, dtype=np.int64) * 3, offsets(sizes), rng.normal(size=shape))


@pytest.mark.parametrize("spread", [3, 10**6, -1])
def test_find_is_each_keys_segment_by_table_or_sorted_search(spread: int) -> None:
    # spread 3: keys dense enough for the table; 10**6: too few in their range; -1: a
    # negative key (sorted search). Queries hit, miss, repeat, and fall outside the range.
    rng = np.random.default_rng(abs(spread))
    n = 5000
    key = rng.permutation(np.arange(n, dtype=np.int64) * abs(spread))
    if spread < 0:
        key[0] = -7
    segs = PairSegments(key, offsets(np.ones(n, dtype=np.int64)), np.zeros(n))
    top = int(key.max())
    for _ in range(2):  # the second find reuses what the first made
        queries = np.concatenate([rng.choice(key, 300), rng.integers(-10, top + 10, 300)])
        queries = np.concatenate([queries, [-1, top, top + 1, 0]]).astype(np.int64)
        where = {int(k): i for i, k in enumerate(key)}
        expect = np.array([where.get(int(q), -1) for q in queries], dtype=np.int64)
        got = segs.find(queries)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expect)
    assert (segs._table is not None) == (spread == 3)
    assert (PairSegments.empty().find(np.arange(3, dtype=np.int64)) == -1).all()


def test_find_of_a_repeated_key_is_its_first_segment() -> None:
    # Dense keys with a repeat: the table would keep whichever write numpy did last, so
    # find searches the sorted keys (stable order: the first segment), as it always did.
    key = np.array([4, 1, 4, 2], dtype=np.int64)
    segs = PairSegments(key, offsets(np.ones(4, dtype=np.int64)), np.zeros(4))
    np.testing.assert_array_equal(segs.find(np.array([4, 1, 2, 3], dtype=np.int64)), [0, 1, 3, -1])
    assert segs._table is None


@pytest.mark.parametrize("width", [0, 1, 3, 4])
def test_take_is_the_segments_one_after_the_other(width: int) -> None:
    rng = np.random.default_rng(width)
    segs = _segments(rng, 40, width)
    seg = rng.integers(-1, 40, size=60)
    off, values = segs.take(seg)
    parts = [segs.values[segs.off[s] : segs.off[s + 1]] if s >= 0 else segs.values[:0] for s in seg]
    np.testing.assert_array_equal(off, offsets([p.shape[0] for p in parts]))
    np.testing.assert_array_equal(values, np.concatenate(parts))
    assert values.shape[1:] == segs.values.shape[1:]
    none_off, none = segs.take(np.full(5, -1))
    assert none.shape == (0,) + segs.values.shape[1:] and not none_off.any()


@pytest.mark.parametrize("order", ["C", "F"])
def test_take_of_every_segment_in_order_is_the_values_uncopied(order: str) -> None:
    # Round B asks for every pair's releases in order (empty and missing segments
    # anywhere): the values themselves, not a copy. Any other request gathers them, from
    # rows (C order) or columns kept apart (F: the ancestors' releases, secure_ancestors).
    rng = np.random.default_rng(9)
    segs = _segments(rng, 40, 4)
    segs.values = np.asarray(segs.values, order=order)
    every = np.arange(40)
    every = np.insert(every, [0, 7, 7, 40], -1)  # unknown keys take no rows
    for seg, whole in [(every, True), (every[::-1], False), (every[every != 5], False)]:
        off, values = segs.take(seg)
        parts = [segs.values[segs.off[s] : segs.off[s + 1]] for s in seg if s >= 0]
        sizes = [segs.off[s + 1] - segs.off[s] if s >= 0 else 0 for s in seg]
        np.testing.assert_array_equal(off, offsets(sizes))
        np.testing.assert_array_equal(values, np.concatenate(parts))
        assert (values is segs.values) == whole, seg
    assert np.diff(segs.off)[5] > 0  # dropping segment 5 drops rows: a gather


def test_merge_segments_takes_each_pair_from_its_source() -> None:
    rng = np.random.default_rng(7)
    old, new = _segments(rng, 30, 3), _segments(rng, 30, 3)
    take_new = rng.random(30) < 0.4
    off, values = _merge_segments(old.off, old.values, new.off, new.values, take_new)
    parts = [
        (new if t else old).values[(new if t else old).off[i] : (new if t else old).off[i + 1]]
        for i, t in enumerate(take_new)
    ]
    np.testing.assert_array_equal(off, offsets([p.shape[0] for p in parts]))
    np.testing.assert_array_equal(values, np.concatenate(parts))


def test_gather_rows_matches_its_twin() -> None:
    rng = np.random.default_rng(3)
    src = rng.normal(size=(50, 3))
    start = rng.integers(0, 50, size=20)
    end = np.minimum(start + rng.integers(-2, 5, size=20), 50)  # some empty (end <= start)
    out_off = offsets(np.maximum(end - start, 0))
    got, want = np.full((int(out_off[-1]), 3), np.nan), np.full((int(out_off[-1]), 3), np.nan)
    gather_rows(src, start, end, out_off, got)
    gather_rows_numpy(src, start, end, out_off, want)
    np.testing.assert_array_equal(got, want)
    assert not np.isnan(got).any()


@pytest.mark.parametrize("rounded", [False, True])
def test_ancestors_kept_matches_its_twin_level_by_level_in_secure_fits(
    rounded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every call of a secure fit (deep trees: up to 7 levels of ancestors) compared with
    # the NumPy twin on the same state; the fits must keep some rows above the parent and
    # leave some out, or the comparison would not test the rules' filtering.
    kernel, seen = secure_grids._ancestors_releases, {"calls": 0, "above": 0, "left_out": 0}

    def both(state, node, f, rows, n_threads=1):  # type: ignore[no-untyped-def]
        owner, rel = kernel(state, node, f, rows, n_threads)
        want_owner, want_rel = ancestors_releases_numpy(state, node, f, rows)
        np.testing.assert_array_equal(owner, want_owner)
        np.testing.assert_array_equal(rel, want_rel)
        assert rel.dtype == want_rel.dtype and owner.dtype == want_owner.dtype
        # The pool the kernel reads: the batch's levels' releases, in the history's order.
        levels = [np.zeros((0, 3))] + [released.values for _, released, _ in state.history]
        np.testing.assert_array_equal(state.pool.rows(), np.concatenate(levels))
        m, state.min_rows = state.min_rows, 10**9  # every release is near a tail: all kept
        every = ancestors_releases_numpy(state, node, f, rows)[1].shape[0]
        state.min_rows = m
        seen["calls"] += 1
        seen["above"] += int((rel[:, 3] == 0).sum())
        seen["left_out"] += every - rel.shape[0]
        return owner, rel

    monkeypatch.setattr(secure_grids, "_ancestors_releases", both)
    rng = np.random.default_rng(11)
    X = rng.random((1500, 5))
    X = np.round(X, 2) if rounded else X
    y = X[:, 0] + 2 * X[:, 1] ** 2 + rng.normal(scale=0.1, size=1500)
    kw = dict(n_estimators=3, max_depth=8, min_samples_leaf=3, random_state=1, n_jobs=1)
    FedForestRegressor(**kw).fit(X, y, client_ids=rng.integers(0, 4, 1500))
    FedForestClassifier(**kw).fit(X, y > np.median(y), client_ids=rng.integers(0, 3, 1500))
    assert seen["calls"] >= 10 and seen["above"] > 0 and seen["left_out"] > 0


def test_release_pool_appends_levels_and_keeps_its_array_across_batches() -> None:
    rng = np.random.default_rng(3)
    pool = ReleasePool()
    for _ in range(2):  # two batches
        levels = [rng.normal(size=(n, 3)) for n in (0, 700, 5, 3000)]
        for level in levels:
            pool.append(level)
        assert pool.base == list(offsets([lev.shape[0] for lev in levels])[:-1])
        np.testing.assert_array_equal(pool.rows(), np.concatenate(levels))
        kept = pool.values
        pool.clear()
        assert pool.n == 0 and pool.base == [] and pool.values is kept


@pytest.mark.parametrize("ordered", [True, False])
def test_ancestors_kept_is_near_tails_and_interval_checks_level_by_level(ordered: bool) -> None:
    # Random releases (increasing as a fit's are, or shuffled: the kernel's pointers give
    # way to interval_checks' scans), each pair's levels walked as the NumPy twin does.
    rng = np.random.default_rng(5 if ordered else 6)
    n_lev, n_pairs, m = 4, 60, 5
    pool = np.zeros((0, 3))
    start = np.zeros((n_lev, n_pairs), dtype=np.int64)
    end = np.zeros((n_lev, n_pairs), dtype=np.int64)
    for lev in range(n_lev):
        for p in range(n_pairs):
            k = int(rng.integers(0, 9)) * (rng.random() < 0.8)
            thr = rng.choice(np.arange(40) / 4, size=k, replace=False)
            below = rng.choice(np.arange(200.0), size=k, replace=False)
            thr, below = (np.sort(thr), np.sort(below)) if ordered else (thr, below)
            seg = np.column_stack([thr, below, np.full(k, 200.0 + 10 * lev)])
            start[lev, p], end[lev, p] = pool.shape[0], pool.shape[0] + k
            pool = np.vstack([pool, seg])
    rows = rng.integers(10, 120, size=n_pairs).astype(float)
    n_kept = np.zeros(n_pairs, dtype=np.int64)
    out = np.full((int((end - start).sum()), 4), np.nan)
    total = ancestors_kept(pool, start, end, rows, m, n_kept, out)
    want = []
    for p in range(n_pairs):
        b = np.zeros((0, 3))
        for lev in range(n_lev):
            rel = pool[start[lev, p] : end[lev, p]]
            if not rel.shape[0]:
                continue
            rel = np.column_stack([rel, np.full(rel.shape[0], float(lev == 0))])
            keep = near_tails(rel, np.full(rel.shape[0], rows[p]), m)
            off, b_off = np.array([0, rel.shape[0]]), np.array([0, b.shape[0]])
            interval_checks(
                rel[:, 1].copy(), rel[:, 2].copy(), off, b[:, 0].copy(), b[:, 1].copy(),
                b[:, 2].copy(), b_off, rel[:, 0].copy(), rows[p : p + 1], m, keep,
            )  # fmt: skip
            want.append(rel[keep])
            b = rel[:, :3] if not b.shape[0] else b
        assert n_kept[p] == sum(w.shape[0] for w in want) - int(n_kept[:p].sum())
    np.testing.assert_array_equal(out[:total], np.vstack(want))
    dropped = int((end - start)[1:].sum()) - int((out[:total, 3] == 0).sum())
    assert dropped > 0 and (out[:total, 3] == 0).any()


def test_displaced_edges_by_hand() -> None:
    # Pair 0: edges 10 apart; 4 displaces 0 (4 < 5), 16 displaces 20, 25 (half way) none,
    # 34 displaces the last edge (its step: the gap before it), 36 is too far. Pair 1: a
    # lone edge has no step, never displaced. Pair 2: edges near float64's largest value
    # (the gaps overflow unless halved first). Pair 3: no thresholds.
    big = np.finfo(np.float64).max
    grid = np.array([0.0, 10, 20, 30, 5.0, -big, 0.0, big, 1.0, 2.0])
    grid_off = np.array([0, 4, 5, 8, 10])
    thr = np.array([4.0, 16, 25, 36, 5.0, 5.5, 1e308, -big / 2])
    thr_off = np.array([0, 4, 6, 8, 8])
    got = secure_grids.displaced(grid, grid_off, thr, thr_off)
    want = [True, False, True, False, False, False, False, True, False, False]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(
        secure_grids.displaced(grid, grid_off, np.array([34.0]), np.array([0, 1, 1, 1, 1])),
        [False, False, False, True, False, False, False, False, False, False],
    )
    # An infinite edge (an unresolved column's grid): no gap to it, nothing displaced
    # beside it, and no warning (inf - inf).
    inf = np.array([-np.inf, 0.0, 1.0, np.inf])
    with np.errstate(invalid="raise"):
        got = secure_grids.displaced(
            inf, np.array([0, 4]), np.array([-5.0, 0.2, 9.0]), np.array([0, 3])
        )
    np.testing.assert_array_equal(got, [False, True, False, False])


def test_displaced_edges_are_those_a_threshold_lies_half_a_step_from() -> None:
    # Brute force on random sorted grids: an edge is displaced when a threshold of its pair
    # lies less than half the gap to its neighbour on the threshold's side away (at the
    # ends, the gap on the other side); after the merge every threshold is an edge and no
    # gap within the grid's span is wider than two of its own widest (half a gap each side).
    rng = np.random.default_rng(0)
    sizes, n_thr = rng.integers(0, 12, 300), rng.integers(0, 6, 300)
    grid = np.concatenate([np.sort(rng.choice(200, s, replace=False)) * 1.0 for s in sizes])
    thr = np.concatenate([rng.uniform(-20, 220, k) for k in n_thr])
    grid_off, thr_off = offsets(sizes), offsets(n_thr)
    got = secure_grids.displaced(grid, grid_off, thr, thr_off)
    for p in range(sizes.size):
        q, t = grid[grid_off[p] : grid_off[p + 1]], thr[thr_off[p] : thr_off[p + 1]]
        gaps = np.diff(q)
        want = np.zeros(q.size, dtype=bool)
        for k in range(q.size if q.size >= 2 else 0):
            below = gaps[k - 1] if k > 0 else gaps[0]
            above = gaps[k] if k < q.size - 1 else gaps[-1]
            want[k] = bool(np.any((t <= q[k]) & (q[k] - t < below / 2)))
            want[k] |= bool(np.any((t > q[k]) & (t - q[k] < above / 2)))
        np.testing.assert_array_equal(got[grid_off[p] : grid_off[p + 1]], want)
        kept = np.unique(np.concatenate([q[~want], t]))
        assert np.isin(t, kept).all() and want.sum() <= t.size
        if q.size >= 2:
            inner = kept[(kept >= q[0]) & (kept <= q[-1])]
            assert np.diff(inner).max(initial=0) <= 2 * gaps.max()
    assert got.sum() > 100 and (~got).sum() > 100


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_displaced_kernel_matches_its_twin(seed: int) -> None:
    # Random grids with empty pairs, lone edges, ties between thresholds and edges (values
    # on a coarse lattice), thresholds outside the grid and unsorted, edges at +-inf and
    # near float64's largest value, and NaN thresholds.
    rng = np.random.default_rng(seed)
    big = np.finfo(np.float64).max
    sizes, n_thr = rng.integers(0, 8, 400), rng.integers(0, 5, 400)
    grids = []
    for s in sizes:
        q = np.sort(rng.choice(40, s, replace=False)) * 0.5
        if s >= 2 and rng.random() < 0.1:
            q[0], q[-1] = (-np.inf, np.inf) if rng.random() < 0.5 else (-big, big)
        grids.append(q)
    grid = np.concatenate(grids)
    thr = np.round(rng.uniform(-3, 23, int(n_thr.sum())) * 2) / 2
    thr[rng.random(thr.size) < 0.03] = np.nan
    grid_off, thr_off = offsets(sizes), offsets(n_thr)
    with np.errstate(invalid="ignore"):
        want = secure_grids.displaced_numpy(grid, grid_off, thr, thr_off)
    got = secure_grids.displaced(grid, grid_off, thr, thr_off)
    np.testing.assert_array_equal(got, want)
    parts = [(0, 90), (90, 91), (91, 91), (91, 400)]  # ranges of pairs (one empty) in threads
    np.testing.assert_array_equal(
        secure_grids.displaced(grid, grid_off, thr, thr_off, parts, 3), want
    )
    assert want.sum() > 50 and (~want).sum() > 50
    assert np.isin(thr, grid).any()  # ties


def test_round_b_takes_the_levels_guides_as_node_grids_found_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every Round B of a secure fit: the guides of its pairs equal a fresh search, and
    # come from node_grids' search of the level (no second one); a query that differs
    # (other path bounds) is searched again.
    from fedforest.federated.server import guides as guides_module
    from fedforest.federated.server import secure_round_b

    seen = {"find": 0, "calls": 0, "taken": 0, "other": 0}
    find = guides_module.Guides.find

    def counted(self, *query):  # type: ignore[no-untyped-def]
        seen["find"] += 1
        return find(self, *query)

    def checked(state, pairs, query):  # type: ignore[no-untyped-def]
        before = seen["find"]
        got = level(state, pairs, query)
        seen["taken"] += seen["find"] == before
        seen["calls"] += 1
        for a, b in zip(got, find(state.guides, *query), strict=True):
            np.testing.assert_array_equal(a, b)
        if pairs.size:  # bounds moved: not what node_grids asked, searched again
            other = (query[0], query[1], query[2] - 1.0, query[3])
            before = seen["find"]
            for a, b in zip(level(state, pairs, other), find(state.guides, *other), strict=True):
                np.testing.assert_array_equal(a, b)
            seen["other"] += seen["find"] == before + 1
        return got

    level = secure_round_b.level_guides
    monkeypatch.setattr(guides_module.Guides, "find", counted)
    monkeypatch.setattr(secure_round_b, "level_guides", checked)
    rng = np.random.default_rng(12)
    X = rng.random((2000, 5))
    y = X[:, 0] + 2 * X[:, 1] ** 2 + rng.normal(scale=0.1, size=2000)
    kw = dict(n_estimators=4, max_depth=6, min_samples_leaf=3, random_state=3, n_jobs=1)
    FedForestRegressor(**kw).fit(X, y, client_ids=rng.integers(0, 4, 2000))
    assert seen["calls"] >= 4 and seen["taken"] == seen["calls"]
    assert seen["other"] >= 4
