"""The rank-code left statistics (issue 14): kernel, NumPy twin and the exact-value twin agree.

The nodes are sized so that every path of ``left_stats_ranked`` runs: the equal buckets
between the first and last candidate (``BUCKET_*``), and where a bucket holds too many
candidates (``clustered``) the table over value ranks (nodes of at least ``RANK_ROWS``
rows), the candidate count (candidate by candidate for short lists, row by row for long
ones or small nodes: ``ROW_WISE_*``) and the binary search (more than ``COUNT_MAX``
candidates), the largest float ("known | missing") and missing values (+inf).
"""

import numpy as np
import pytest

from fedforest._common import N_FINE_BINS, count_columns, n_stats
from fedforest.federated import client_buckets as B
from fedforest.federated import client_kernels as K
from fedforest.federated.client_grid import (
    SHORT_GRID,
    SPARSE_ROWS,
    GridCodes,
    answer_rows,
    answer_rows_numpy,
    grid_codes,
    grid_codes_numpy,
    left_stats_coded,
    left_stats_coded_numpy,
    pack_coded,
    pack_coded_numpy,
)
from fedforest.federated.client_sketch import fine_codes
from fedforest.federated.protocol import expand_candidates, pack_increments


def _problem(seed: int, discrete: bool, missing: bool, n: int = 3000, d: int = 4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if discrete:
        X = np.round(X * 4) / 4
    if missing:
        X[rng.random(X.shape) < 0.1] = np.inf
    rows = np.sort(rng.choice(n, size=2 * n // 3, replace=False)).astype(np.int32)
    w = rng.integers(1, 4, size=rows.size).astype(np.float64)
    # Slot 0 holds most rows (the rank table), slots 1-4 a few each, slot 5 none.
    slot = np.where(rng.random(rows.size) < 0.7, 0, rng.integers(-1, 5, rows.size))
    slot = slot.astype(np.int32)
    pair_off = np.array([0, 3, 5, 7, 9, 11, 12], dtype=np.int64)
    pair_feat = rng.integers(0, d, pair_off[-1]).astype(np.int32)
    return rng, X, rows, w, slot, pair_off, pair_feat


def _candidates(rng, X, pair_feat, clustered=False):
    # Every path below runs: 5 < ROW_WISE_MIN <= 31 (row-wise in small slots only) and
    # 64, 120 >= ROW_WISE_LONG (row-wise everywhere); 700 > COUNT_MAX (binary search).
    assert 5 < K.ROW_WISE_MIN <= 31 < K.ROW_WISE_LONG <= 64 < 120 <= K.COUNT_MAX < 700
    lists = []
    for p, f in enumerate(pair_feat):
        x = X[np.isfinite(X[:, f]), f]
        # 700 > COUNT_MAX: the binary search; 120 and 64: the row-wise count
        size = [31, 700, 5, 0, 120, 64][p % 6]
        c = np.unique(rng.choice(x, size=size)) if size else np.empty(0)
        if p % 5 == 1:
            c = np.append(c, np.float64(np.finfo(np.float64).max))  # "known | missing"
        if clustered and c.size:  # more than BUCKET_AMB in the first candidate's bucket
            c = np.unique(np.append(c, c[0] + np.arange(1, B.BUCKET_AMB + 2) * 1e-9))
        lists.append(c)
    cand_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum([c.size for c in lists], out=cand_off[1:])
    return np.concatenate(lists), cand_off


@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("discrete", [False, True])
@pytest.mark.parametrize("n_classes", [0, 3])
@pytest.mark.parametrize("n_fine", [16, N_FINE_BINS])
@pytest.mark.parametrize("clustered", [False, True])
def test_left_stats_ranked_twins(missing, discrete, n_classes, n_fine, clustered):
    rng, X, rows, w, slot, pair_off, pair_feat = _problem(n_classes + 2 * n_fine, discrete, missing)
    y = rng.integers(0, n_classes, X.shape[0]).astype(float) if n_classes else rng.normal(size=3000)
    cand, cand_off = _candidates(rng, X, pair_feat, clustered)
    codes, fmin, fmax = fine_codes(X, n_fine)
    ranks = K.ranks_for(X.T, codes, n_fine)
    # fine_codes registered the same rank codes as value_ranks makes.
    for got, want in zip(ranks, K.value_ranks(X, codes, n_fine), strict=True):
        np.testing.assert_array_equal(got, want)
    s = n_stats("classification" if n_classes else "regression", n_classes)
    Xt = X.T.copy()
    common = (rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off, cand)
    n_slots = pair_off.size - 1
    out = {name: np.full((cand.size, s), np.nan) for name in ("kernel", "twin", "values")}
    K.left_stats_ranked(Xt, fmin, fmax, *ranks, *common, 0, n_slots, out["kernel"])
    K.left_stats_ranked_numpy(Xt, fmin, fmax, *ranks, *common, 0, n_slots, out["twin"])
    K.left_stats_numpy(Xt, codes, fmin, fmax, *common, 0, n_slots, out["values"])
    np.testing.assert_array_equal(out["kernel"], out["twin"])
    np.testing.assert_array_equal(out["kernel"], out["values"])
    # Two columns: the rows and the weight alone (the grid counts under "secure").
    two = {name: np.full((cand.size, 2), np.nan) for name in ("kernel", "twin", "values")}
    K.left_stats_ranked(Xt, fmin, fmax, *ranks, *common, 0, n_slots, two["kernel"])
    K.left_stats_ranked_numpy(Xt, fmin, fmax, *ranks, *common, 0, n_slots, two["twin"])
    K.left_stats_numpy(Xt, codes, fmin, fmax, *common, 0, n_slots, two["values"])
    for name in two:
        np.testing.assert_array_equal(two[name], out["kernel"][:, :2])
    # A block of slots (given the rows of its slots only, as a client's block of trees)
    # writes its candidates only, from row 0 of its output.
    lo, hi = cand_off[pair_off[1]], cand_off[pair_off[4]]
    part = np.full((hi - lo, s), np.nan)
    block = (slot >= 1) & (slot < 4)
    K.left_stats(Xt, codes, fmin, fmax, rows[block], w[block], slot[block], *common[3:], 1, 4, part)
    np.testing.assert_array_equal(part, out["values"][lo:hi])


@pytest.mark.parametrize("seed", range(4))
def test_bucket_bins_count_the_candidates_below_or_decline(seed):
    # pair_bins' equal buckets: #{j: cs[j] < x} for every row, or False (bins unwritten)
    # where a bucket holds more than BUCKET_AMB candidates or the span is empty or infinite.
    rng = np.random.default_rng(seed)
    xx = np.concatenate([rng.normal(size=400), [np.inf, -np.inf, 0.0, -0.0]])
    xx[rng.random(xx.size) < 0.1] = np.inf
    nc = [2, 3, 17, 60, 300][seed % 5] + seed
    cs_all = {
        "spread": np.sort(rng.normal(size=nc)),
        "grid": np.linspace(-2, 2, nc),
        "ties": np.sort(rng.choice(np.round(rng.normal(size=nc), 1), nc)),
        "data": np.sort(rng.choice(xx[np.isfinite(xx)], nc)),
        "cluster": np.sort(
            np.append(rng.normal(size=nc), 0.5 + np.arange(B.BUCKET_AMB + 1) * 1e-9)
        ),
        "equal": np.full(nc, 0.25),
        # two and three candidates in one bucket (ties): the unrolled compares of each
        "pair": np.sort(np.append(np.linspace(-2, 2, nc), [0.1, 0.1])),
        "triple": np.sort(np.append(np.linspace(-2, 2, nc), [0.1, 0.1, 0.1])),
        "huge": np.append(np.sort(rng.normal(size=nc)), np.finfo(np.float64).max),
        "infinite": np.append(np.sort(rng.normal(size=nc)), np.inf),
    }
    ran, shared = set(), set()
    for name, cs in cs_all.items():
        n = cs.size
        lut = np.zeros(B.BUCKETS_PER_CAND * n + B.BUCKETS_MIN, dtype=np.int32)
        gc = np.zeros(n, dtype=np.int64)
        padded = np.zeros(n + B.BUCKET_AMB + 1)
        bins = np.full(xx.size, -1, dtype=np.int64)
        ok = B.bucket_bins(cs, xx.size, xx, lut, gc, padded, bins)
        if ok:
            ran.add(name)
            np.testing.assert_array_equal(bins, np.searchsorted(cs, xx, side="left"))
            # the most candidates sharing a bucket, as the kernel finds them
            n_b = max(B.BUCKETS_PER_CAND * n, B.BUCKETS_MIN)
            g = np.minimum((cs - cs[0]) * (n_b / (cs[-1] - cs[0])), n_b - 1).astype(np.int64)
            shared.add(int(np.bincount(g).max()))
        else:
            assert (bins == -1).all()
        if name in ("cluster", "equal", "infinite") or (name == "huge" and n > B.BUCKET_AMB + 2):
            assert not ok, name
    assert {"spread", "grid"} <= ran
    assert shared == set(range(1, B.BUCKET_AMB + 1))  # every unrolled case ran


def test_rank_codes_follow_the_fine_codes_they_were_made_with():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    codes, _, _ = fine_codes(X, 8)
    other = codes.copy()  # the same codes in another array: ranks made from Xt on demand
    a, b = K.ranks_for(X.T, codes, 8), K.ranks_for(X.T, other, 8)
    assert a is not b
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert K.ranks_for(X.T, other, 8) is b  # and kept with them
    key = id(other)
    del other
    assert key not in K._RANKS


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("n_classes", [0, 2])
def test_sketch_pairs_ranked_twins(whole, missing, n_classes):
    """Sketches and local best thresholds of nodes of 10 to 2,000 rows, some of them narrow
    (their values in few fine bins: the exact quantiles, by rank histogram when the
    weights are whole, else by sorting), against the twin that sorts every node."""
    from fedforest.federated.client_sketch import sketch_pairs_ranked, sketch_pairs_ranked_numpy

    rng = np.random.default_rng(5 + n_classes + 2 * missing + 4 * whole)
    n, d = 4000, 3
    X = rng.normal(size=(n, d))
    X[:, 1] = np.round(X[:, 1] * 8) / 8  # few distinct values
    if missing:
        X[rng.random(X.shape) < 0.1] = np.inf
    rows = np.arange(n, dtype=np.int32)
    w = rng.integers(1, 4, n).astype(np.float64)
    if not whole:
        w *= rng.uniform(0.5, 2.0, n)
    # Slots: 0 wide (2,000 rows), 1 narrow in feature 0, 2-9 small (about 75 rows: under
    # SORT_ROWS, client_sorted.sorted_sketch's nodes when the weights are whole), some out.
    slot = np.full(n, -1, dtype=np.int32)
    slot[:2000] = 0
    narrow = np.flatnonzero((X[:, 0] > 0.1) & (X[:, 0] < 0.3))
    slot[narrow[narrow >= 2000]] = 1
    small = np.flatnonzero(slot < 0)[:600]
    slot[small] = 2 + rng.integers(0, 8, small.size)
    # Slots 10-17: 28 rows each, fewer than 2 B (sorted_sketch: the exact quantiles).
    tiny = np.flatnonzero(slot < 0)[:224]
    slot[tiny] = 10 + np.arange(tiny.size) % 8
    pair_off = np.arange(19, dtype=np.int64) * d
    pair_feat = np.tile(np.arange(d, dtype=np.int32), 18)
    y = rng.integers(0, n_classes, n).astype(float) if n_classes else rng.normal(size=n)
    codes, _, fmax = fine_codes(X, N_FINE_BINS)
    ranks_t, uniq, uniq_off, _ = K.ranks_for(X.T, codes, N_FINE_BINS)
    Xt = X.T.copy()
    out = [np.full((pair_feat.size, 16), -1.0) for _ in range(2)]
    local = [np.full(pair_feat.size, -1.0) for _ in range(2)]
    head = (Xt, codes, fmax, ranks_t, uniq, uniq_off, y, n_classes, 0, 5)
    tail = (rows, w, slot, pair_off, pair_feat, 0, 18)
    sketch_pairs_ranked(*head, *tail, out[0], local[0])
    sketch_pairs_ranked_numpy(*head, *tail, out[1], local[1])
    np.testing.assert_array_equal(out[0], out[1])
    if not missing:  # the twin's local thresholds do not model missing values
        np.testing.assert_array_equal(local[0], local[1])


def _column_lists(rng, X, d, size):
    """One candidate list per column (binning="global"), some with "known | missing"."""
    lists = []
    for f in range(d):
        x = X[np.isfinite(X[:, f]), f]
        c = np.unique(rng.choice(x, size=size)) if f != 1 else np.empty(0)
        if f % 2 == 0:
            c = np.append(c, np.float64(np.finfo(np.float64).max))
        lists.append(c)
    off = np.zeros(d + 2, dtype=np.int64)  # the client index column has none
    np.cumsum([c.size for c in lists] + [0], out=off[1:])
    return off, np.concatenate(lists)


@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("n_classes", [0, 3])
@pytest.mark.parametrize("size", [31, 300])
def test_left_stats_coded_equals_left_stats_bit_for_bit(missing, n_classes, size):
    rng, X, rows, w, slot, pair_off, pair_feat = _problem(7 * size + n_classes, True, missing)
    d = X.shape[1]
    y = rng.integers(0, n_classes, X.shape[0]).astype(float) if n_classes else rng.normal(size=3000)
    f_off, f_cand = _column_lists(rng, X, d, size)
    cand_off, cand = expand_candidates(f_off, f_cand, pair_feat)
    for p, f in enumerate(pair_feat):  # every pair lists its column's candidates
        np.testing.assert_array_equal(
            cand[cand_off[p] : cand_off[p + 1]], f_cand[f_off[f] : f_off[f + 1]]
        )
    Xt = np.vstack([X.T, np.zeros((1, X.shape[0]))])  # + the client index row
    grid = GridCodes(Xt)
    grid.update(f_off, f_cand, "site")
    codes, fmin, fmax = fine_codes(X, N_FINE_BINS)
    s = n_stats("classification" if n_classes else "regression", n_classes)
    n_slots = pair_off.size - 1
    common = (rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off)
    want = np.full((cand.size, s), np.nan)
    K.left_stats(Xt[:d], codes, fmin, fmax, *common, cand, 0, n_slots, want)
    for kernel in (left_stats_coded, left_stats_coded_numpy):
        got = np.full((cand.size, s), np.nan)
        kernel(grid.codes, *common, 0, n_slots, got)
        np.testing.assert_array_equal(got, want)
        two = np.full((cand.size, 2), np.nan)
        kernel(grid.codes, *common, 0, n_slots, two)
        np.testing.assert_array_equal(two, want[:, :2])


@pytest.mark.parametrize("n", [0, 1, 2, 7, 31, SHORT_GRID, SHORT_GRID + 1, 700])
def test_grid_codes_twins(n):
    # Counted (short lists) or binary-searched (long ones): NumPy's searchsorted, with
    # ties, repeated candidates, +-inf and NaN among the values and +inf as a candidate.
    rng = np.random.default_rng(n)
    grid = np.sort(rng.choice(np.round(rng.normal(size=2 * n + 2), 1), size=n))
    if n > 2:
        grid[-1] = np.inf
    x = np.concatenate(
        [np.round(rng.normal(size=3000), 1), grid, [np.inf, -np.inf, np.nan, -0.0, 0.0]]
    )
    want = np.full(x.size, 9999, dtype=np.uint16)
    grid_codes_numpy(grid, x, want)
    np.testing.assert_array_equal(want, np.searchsorted(grid, x, side="left"))
    got = np.full(x.size, 9999, dtype=np.uint16)
    grid_codes(grid, x, got)
    np.testing.assert_array_equal(got, want)


def test_grid_codes_remake_a_changed_column_and_refuse_a_bad_list():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 2))
    grid = GridCodes(X.T.copy())
    off = np.array([0, 3, 5], dtype=np.int64)
    grid.update(off, np.array([-1.0, 0.0, 1.0, 0.5, 2.0]), "site")
    np.testing.assert_array_equal(grid.codes[0], np.searchsorted([-1.0, 0.0, 1.0], X[:, 0]))
    grid.update(off, np.array([-0.5, 0.0, 0.5, 0.5, 2.0]), "site")  # column 0 changed
    np.testing.assert_array_equal(grid.codes[0], np.searchsorted([-0.5, 0.0, 0.5], X[:, 0]))
    np.testing.assert_array_equal(grid.codes[1], np.searchsorted([0.5, 2.0], X[:, 1]))
    with pytest.raises(ValueError, match="'site'.*'feat_cand' of column 1 is not ascending"):
        grid.update(off, np.array([-1.0, 0.0, 1.0, 2.0, 0.5]), "site")
    for _ in range(2):  # refused again: a refused list is not taken as the last one
        with pytest.raises(ValueError, match="'site'.*'feat_cand' of column 0 is not ascen"):
            grid.update(off, np.array([-1.0, np.nan, 1.0, 0.5, 2.0]), "site")
    grid.update(off, np.array([-0.5, 0.0, 0.5, 0.5, 2.0]), "site")  # as last taken
    np.testing.assert_array_equal(grid.codes[0], np.searchsorted([-0.5, 0.0, 0.5], X[:, 0]))
    grid.update(off, np.array([-1.0, 0.0, 1.0, 0.5, 2.0]), "site")  # back to the first
    np.testing.assert_array_equal(grid.codes[0], np.searchsorted([-1.0, 0.0, 1.0], X[:, 0]))
    with pytest.raises(ValueError, match="'site'.*'feat_cand_off' is not offsets"):
        grid.update(np.array([0, 4, 3], dtype=np.int64), np.zeros(3), "site")


@pytest.mark.parametrize("n_classes", [0, 3])
@pytest.mark.parametrize("size", [6, 31, 700])  # 6: most bins hold rows, the answer is dense
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("huge", [False, True])  # counts beyond int32: sent as int64
def test_pack_coded_sends_what_pack_increments_sends(n_classes, size, weighted, huge):
    rng, X, rows, w, slot, pair_off, pair_feat = _problem(size + n_classes, False, True)
    if weighted:
        w = w * rng.uniform(0.1, 2.0, w.size)
    if huge:  # whole weights (a count column), some of their sums beyond int32
        w = (np.rint(w) + 1.0) * 2.0**30
    d = X.shape[1]
    y = rng.integers(0, n_classes, X.shape[0]).astype(float) if n_classes else rng.normal(size=3000)
    f_off, f_cand = _column_lists(rng, X, d, size)
    cand_off, cand = expand_candidates(f_off, f_cand, pair_feat)
    Xt = np.vstack([X.T, np.zeros((1, X.shape[0]))])
    grid = GridCodes(Xt)
    grid.update(f_off, f_cand, "site")
    s = n_stats("classification" if n_classes else "regression", n_classes)
    n_slots = pair_off.size - 1
    node_rows = np.bincount(slot[slot >= 0], minlength=n_slots)
    present = np.repeat(node_rows > 0, np.diff(pair_off))
    present[1] = False  # a pair that does not travel, in a node that does
    # Both ways of reading a node's bins run: at 700 candidates its few rows' filled bins
    # listed (slots 1-4), at 6 and 31 every bin (and slot 0 at 700).
    few = node_rows * SPARSE_ROWS <= np.diff(f_off).max()
    assert few[1:5].all() == (size == 700) and not few[0]
    left = np.full((cand.size, s), np.nan)
    common = (rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off)
    left_stats_coded(grid.codes, *common, 0, n_slots, left)
    first = np.zeros(cand.size, dtype=bool)
    first[cand_off[:-1][np.diff(cand_off) > 0]] = True
    n_counts = count_columns(n_classes, weighted and not huge)
    want = pack_increments(left, first, n_counts, "left", np.repeat(present, np.diff(cand_off)))
    # Two blocks of slots, each given its own rows (as a client's blocks of trees), and
    # one block of all.
    mine = (slot >= 0) & (slot < 3)
    order = np.concatenate([np.flatnonzero(mine), np.flatnonzero(~mine)])
    rows, w, slot = rows[order], w[order], slot[order]
    n1 = int(mine.sum())
    split = [(0, 3, slice(0, n1)), (3, n_slots, slice(n1, rows.size))]
    args = (grid.codes, rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off, present)
    for blocks in (split, [(0, n_slots, slice(0, rows.size))]):
        most = 0  # the answer's rows, at most (the arrays' size)
        for lo, hi, r in blocks:
            block = answer_rows_numpy(slot[r], pair_off, cand_off, present, lo, hi)
            assert answer_rows(slot[r], pair_off, cand_off, present, lo, hi) == block
            most += block
        assert most >= (want["left_counts"].shape[0] if "left_index" in want else 0)
        for pack in (pack_coded, pack_coded_numpy):
            got = pack(*args, s, n_counts, blocks)
            assert got.keys() == want.keys()
            if size in (6, 700) and not huge:  # both ways of sending are covered
                assert ("left_index" in want) == (size == 700)
            for key in want:
                assert got[key].dtype == want[key].dtype, key
                np.testing.assert_array_equal(got[key], want[key])
    assert want["left_counts"].dtype == (np.int64 if huge else np.int32)


@pytest.mark.parametrize("columns", ["counts", "all"])
@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("n_classes", [0, 3])
def test_left_words_are_the_packed_encoding_of_the_statistics(columns, missing, n_classes):
    """The secure answers' words (client_packed): Round A's two counts or Round B's every
    column, fixed point included; the kernel, its twin and ``to_fixed_packed`` of
    ``left_stats`` agree word for word, per block of slots too; a weight the encoding
    refuses makes both return False."""
    from fedforest.federated.client_packed import left_words, left_words_ranked_numpy
    from fedforest.federated.privacy.secagg import FRAC_BITS, to_fixed_packed

    rng, X, rows, w, slot, pair_off, pair_feat = _problem(7 + n_classes, False, missing)
    y = rng.integers(0, n_classes, X.shape[0]).astype(float) if n_classes else rng.normal(size=3000)
    cand, cand_off = _candidates(rng, X, pair_feat)
    codes, fmin, fmax = fine_codes(X, N_FINE_BINS)
    ranks = K.ranks_for(X.T, codes, N_FINE_BINS)
    Xt = X.T.copy()
    common = (rows, w, slot, y, n_classes, pair_off, pair_feat, cand_off, cand)
    n_slots = pair_off.size - 1
    s = (
        2
        if columns == "counts"
        else n_stats("classification" if n_classes else "regression", n_classes)
    )
    bits = np.zeros(s, dtype=np.int64)
    if s > 2 and not n_classes:
        bits[2:] = FRAC_BITS
    scale = np.exp2(bits.astype(np.float64))
    stats = np.empty((cand.size, s))
    K.left_stats_numpy(Xt, codes, fmin, fmax, *common, 0, n_slots, stats)
    want = to_fixed_packed(stats, bits, "test")
    assert np.any(want[:, 0] >> np.uint64(32))  # weights reach the high half-word
    got = {
        name: np.zeros((cand.size, s - 1), dtype=np.uint64) for name in ("kernel", "twin", "call")
    }
    assert K.left_stats_ranked(Xt, fmin, fmax, *ranks, *common, 0, n_slots, got["kernel"], scale)
    assert left_words_ranked_numpy(Xt, fmin, fmax, *ranks, *common, 0, n_slots, got["twin"], scale)
    assert left_words(Xt, codes, fmin, fmax, *common, 0, n_slots, scale, got["call"])
    for name in got:
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    lo, hi = cand_off[pair_off[1]], cand_off[pair_off[4]]
    part = np.zeros((hi - lo, s - 1), dtype=np.uint64)
    block = (slot >= 1) & (slot < 4)
    args = (rows[block], w[block], slot[block], *common[3:])
    assert left_words(Xt, codes, fmin, fmax, *args, 1, 4, scale, part)
    np.testing.assert_array_equal(part, want[lo:hi])
    for bad in (2.0**32, np.nan, -1.0):  # a weight past the half-word, not finite, negative
        w_bad = w.copy()
        w_bad[slot == 0] = bad  # every row of slot 0: some left sum holds it
        worse = (rows, w_bad, *common[2:], 0, n_slots)
        out = np.zeros((cand.size, s - 1), dtype=np.uint64)
        assert not K.left_stats_ranked(Xt, fmin, fmax, *ranks, *worse, out, scale)
        assert not left_words_ranked_numpy(Xt, fmin, fmax, *ranks, *worse, out, scale)
    if s == 4:  # whole weights, a w y (2^39) or only a w y^2 (2^40) past 2^62 once scaled
        for big in (2.0**39, 2.0**20):
            y_big = y.copy()
            y_big[rows[slot == 0][0]] = big
            worse = (rows, w, slot, y_big, *common[4:], 0, n_slots)
            out = np.zeros((cand.size, s - 1), dtype=np.uint64)
            assert not K.left_stats_ranked(Xt, fmin, fmax, *ranks, *worse, out, scale)
            assert not left_words_ranked_numpy(Xt, fmin, fmax, *ranks, *worse, out, scale)


@pytest.mark.parametrize("n", [300, 5000])
def test_fine_codes_edges_are_numpys_lower_quantiles(n: int) -> None:
    """fine_codes reads the quantiles off its sorted values: np.quantile's "lower" ones."""
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, 3))
    X[:, 1] = np.round(X[:, 1] * 20)  # ties
    X[rng.random(n) < 0.1, 2] = np.inf  # missing values: the last code alone
    n_fine = 64
    codes, _, _ = fine_codes(X, n_fine)
    for j in range(3):
        known = np.isfinite(X[:, j])
        xk = X[known, j]
        n_known = n_fine if known.all() else n_fine - 1
        levels = np.linspace(0, 1, n_known + 1)[1:-1]
        edges = np.unique(np.quantile(xk, levels, method="lower"))
        want = np.searchsorted(edges, xk, side="left")
        np.testing.assert_array_equal(codes[j][known], want)
        assert (codes[j][~known] == n_fine - 1).all()
