"""Round B from Round A's bins (``client_kept``): the same words as binning the candidates.

The kernel, its NumPy twin and today's path (``left_stats_ranked`` on the decoded
candidates) agree bit for bit on random levels with an empty node, a one-row node, ties
among the values and among the edges, missing values (+inf) and NaN, whole and real
weights, an empty grid, a grid without candidates and candidates repeated or out of
order, with the bins kept as uint8 (a grid of 255 edges, a row binned past them all),
uint16 and int32. A candidate past its grid, a grid that descends and a weight that does
not pack are refused as the status says. In whole fits, the kept bins (uint8 as chosen,
uint16 and int32 forced) give the forest of the fallback (a party restored from its state
between the rounds, float candidates).
"""

import numpy as np
import pytest

import fedforest as ff
from fedforest._common import N_FINE_BINS, n_stats
from fedforest.datasets import make_paper_synthetic
from fedforest.federated import client_kept
from fedforest.federated import client_kernels as K
from fedforest.federated.client_kept import (
    KEPT_DONE,
    KEPT_PAST,
    KEPT_UNPACKED,
    KEPT_UNUSABLE,
    bins_dtype,
    keep_bins,
    left_stats_kept,
    left_stats_kept_numpy,
)
from fedforest.federated.client_secure import SecureParty
from fedforest.federated.client_setup import _Fit
from fedforest.federated.client_sketch import fine_codes
from fedforest.federated.grid_wire import sent_candidates
from fedforest.federated.privacy.secagg import FRAC_BITS
from fedforest.federated.protocol import ROUND_A, ROUND_B, Message

#: Pairs per slot; slot 0 holds most rows (Round A's rank table and buckets), slot 1 one
#: row, slot 2 none, slots 3 to 5 a few each.
PAIR_OFF = np.array([0, 4, 6, 8, 10, 13, 15], dtype=np.int64)


def _level(seed: int, n_classes: int, whole: bool, n: int = 900, d: int = 4, longest=700):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, :2] = np.round(X[:, :2] * 4) / 4  # ties among the values
    X[rng.random(X.shape) < 0.08] = np.inf  # missing: a client holds NaN as +inf
    rows = np.sort(rng.choice(n, size=2 * n // 3, replace=False)).astype(np.int32)
    slot = rng.integers(3, 6, rows.size)  # slot 2: no row
    slot[rng.random(rows.size) < 0.1] = -1  # in a finished leaf
    slot[rng.random(rows.size) < 0.6] = 0
    slot[np.flatnonzero(slot != 0)[0]] = 1  # one row
    slot = slot.astype(np.int32)
    assert (slot == 1).sum() == 1 and (slot == 2).sum() == 0 and (slot == 0).sum() > 256
    w = rng.integers(1, 4, rows.size).astype(np.float64)
    if not whole:
        w = w + rng.random(rows.size)
    y = rng.integers(0, n_classes, n).astype(float) if n_classes else rng.normal(size=n)
    pair_feat = rng.integers(0, d, PAIR_OFF[-1]).astype(np.int32)
    grids, ats = [], []
    for p, f in enumerate(pair_feat):
        x = X[np.isfinite(X[:, f]), f]
        kind = p % 5
        size = [40, longest, 9, 60, 3][kind]  # 700 > COUNT_MAX: Round A's binary search
        edges = np.sort(rng.choice(x, size=size))  # ties with the values and each other
        if kind == 3:
            edges = np.append(edges, np.finfo(np.float64).max)  # "known | missing"
        if p == 2:
            edges = np.empty(0)  # a feature whose grid is empty: no candidates either
        grids.append(edges)
        if edges.size == 0 or p == 7:  # p == 7: a grid without candidates
            ats.append(np.empty(0, dtype=np.int64))
        elif kind == 4:  # repeated and out of order
            ats.append(rng.integers(0, edges.size, 5))
        else:
            ats.append(np.sort(rng.choice(edges.size, size=min(12, edges.size), replace=False)))
    grid_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum([g.size for g in grids], out=grid_off[1:])
    cand_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum([a.size for a in ats], out=cand_off[1:])
    grid, at = np.concatenate(grids), np.concatenate(ats).astype(np.int64)
    owner = np.repeat(np.arange(pair_feat.size), np.diff(cand_off))
    cand = grid[grid_off[owner] + at]  # the candidates' edges, as decode_candidates gives
    return X, rows, w, slot, y, pair_feat, grid_off, grid, cand_off, at, cand


def _ranks(X):
    codes, fmin, fmax = fine_codes(X, N_FINE_BINS)
    return X.T.copy(), fmin, fmax, K.ranks_for(X.T, codes, N_FINE_BINS)


def _scale(n_classes: int) -> np.ndarray:
    bits = np.zeros(n_stats("classification" if n_classes else "regression", n_classes))
    if not n_classes:
        bits[2:] = FRAC_BITS
    return np.exp2(bits)


def _round_a(
    X, rows, w, slot, y, n_classes, pair_feat, grid_off, grid, ascending=True, dtype=np.int32
):
    """Round A's counts with the bins kept (as ``dtype``); checks they are the counts without."""
    Xt, fmin, fmax, ranks = _ranks(X)
    kept = np.full(100_000, np.iinfo(dtype).max, dtype=dtype)
    node_rows = np.bincount(slot[slot >= 0], minlength=PAIR_OFF.size - 1)
    kept_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum(np.repeat(node_rows, np.diff(PAIR_OFF)), out=kept_off[1:])
    kept_ok = np.zeros(pair_feat.size, dtype=np.uint8)
    args = (*ranks, rows, w, slot, y, n_classes, PAIR_OFF, pair_feat, grid_off, grid, 0, 6)
    words = [np.zeros((grid.size, 1), dtype=np.uint64) for _ in range(2)]
    ones = np.ones(2)
    assert K.left_stats_ranked(Xt, fmin, fmax, *args, words[0], ones, kept, kept_off, kept_ok)
    assert K.left_stats_ranked(Xt, fmin, fmax, *args, words[1], ones)
    np.testing.assert_array_equal(words[0], words[1])
    if ascending:
        np.testing.assert_array_equal(kept_ok, np.diff(grid_off) > 0)  # the empty grid's not
    return kept[: kept_off[-1]], kept_off, kept_ok


def test_bins_dtype_holds_the_longest_grid():
    for longest, dtype in ((0, np.uint8), (255, np.uint8), (256, np.uint16)):
        assert bins_dtype(np.array([0, 3, 3 + longest, 3 + longest])) == dtype
    assert bins_dtype(np.array([0, 65_535])) == np.uint16
    assert bins_dtype(np.array([0, 65_536, 65_537])) == np.int32
    assert bins_dtype(np.zeros(1, dtype=np.int64)) == np.uint8  # no pair


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n_classes", [0, 3])
@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32])
def test_kernel_twin_and_todays_binning_agree(seed, n_classes, whole, dtype):
    X, rows, w, slot, y, pair_feat, grid_off, grid, cand_off, at, cand = _level(
        seed, n_classes, whole, longest=255 if dtype == np.uint8 else 700
    )
    assert bins_dtype(grid_off) == (np.uint8 if dtype == np.uint8 else np.uint16)
    kept = _round_a(X, rows, w, slot, y, n_classes, pair_feat, grid_off, grid, dtype=dtype)
    written = np.concatenate(
        [kept[0][kept[1][p] : kept[1][p + 1]] for p in np.flatnonzero(kept[2])]
    )
    assert written.max() == np.diff(grid_off).max()  # a row past the longest grid's edges
    Xt, fmin, fmax, ranks = _ranks(X)
    today = (*ranks, rows, w, slot, y, n_classes, PAIR_OFF, pair_feat, cand_off, cand, 0, 6)
    mine = (rows, w, slot, y, n_classes, PAIR_OFF, cand_off, at, grid_off, *kept, 0, 6)
    scale = _scale(n_classes)
    s = scale.size
    # The words a secure answer sends, and the float statistics (scale None).
    for shape, extra in (((cand.size, s - 1), (scale,)), ((cand.size, s), ())):
        dtype = np.uint64 if extra else np.float64
        want = np.zeros(shape, dtype=dtype)
        assert K.left_stats_ranked(Xt, fmin, fmax, *today, want, *extra)
        got = {name: np.zeros(shape, dtype=dtype) for name in ("kernel", "twin")}
        assert left_stats_kept(*mine, got["kernel"], *extra) == KEPT_DONE
        assert left_stats_kept_numpy(*mine, got["twin"], *extra) == KEPT_DONE
        for name, out in got.items():
            np.testing.assert_array_equal(out.view(np.uint64), want.view(np.uint64), name)
    # A block of slots, given its rows only (a client's block of trees), from row 0.
    block = (slot >= 1) & (slot < 4)
    lo, hi = cand_off[PAIR_OFF[1]], cand_off[PAIR_OFF[4]]
    part, whole_out = np.zeros((hi - lo, s - 1), np.uint64), np.zeros((cand.size, s - 1), np.uint64)
    args = (rows[block], w[block], slot[block], *mine[3:12], 1, 4)
    assert left_stats_kept(*args, part, scale) == KEPT_DONE
    assert left_stats_kept(*mine, whole_out, scale) == KEPT_DONE
    np.testing.assert_array_equal(part, whole_out[lo:hi])


def test_refusals_and_unusable_bins():
    """Past the grid: KEPT_PAST; a descending or NaN grid: no bins kept; an unpackable sum."""
    X, rows, w, slot, y, pair_feat, grid_off, grid, cand_off, at, cand = _level(3, 0, True)
    scale = _scale(0)
    out = np.zeros((cand.size, scale.size - 1), dtype=np.uint64)

    def both(*args):
        got = left_stats_kept(*args, out, scale), left_stats_kept_numpy(*args, out, scale)
        assert got[0] == got[1]
        return got[0]

    kept = _round_a(X, rows, w, slot, y, 0, pair_feat, grid_off, grid)
    common = (rows, w, slot, y, 0, PAIR_OFF, cand_off)
    past = at.copy()
    past[cand_off[3]] = grid_off[4] - grid_off[3]  # one past pair 3's grid
    assert both(*common, past, grid_off, *kept, 0, 6) == KEPT_PAST
    past[cand_off[3]] = -1
    assert both(*common, past, grid_off, *kept, 0, 6) == KEPT_PAST
    # Pair 0's grid descends, pair 3's holds a NaN: Round A keeps no bins for them.
    for p, bad in ((0, "swap"), (3, "nan")):
        g = grid.copy()
        a, b = grid_off[p], grid_off[p + 1]
        if bad == "swap":
            g[a], g[b - 1] = g[b - 1], g[a]
        else:
            g[a + 1] = np.nan
        kept_bad = _round_a(X, rows, w, slot, y, 0, pair_feat, grid_off, g, ascending=False)
        assert kept_bad[2][p] == 0 and kept_bad[2].sum() == kept[2].sum() - 1
        assert both(*common, at, grid_off, *kept_bad, 0, 6) == KEPT_UNUSABLE
    # Bins kept for other rows (another node size): not used.
    off = kept[1].copy()
    off[1:] += 1
    assert both(*common, at, grid_off, kept[0], off, kept[2], 0, 6) == KEPT_UNUSABLE
    w_bad = w.copy()
    w_bad[slot == 0] = 2.0**32  # past the packed word's half
    args = (rows, w_bad, *common[2:], at, grid_off, *kept, 0, 6)
    assert both(*args) == KEPT_UNPACKED
    # Whole weights, a w y (2^39) or only a w y^2 (2^40) past 2^62 once scaled.
    assert np.all(w == np.floor(w))
    for big in (2.0**39, 2.0**20):
        y_big = y.copy()
        y_big[rows[slot == 0][0]] = big
        args = (rows, w, slot, y_big, *common[4:], at, grid_off, *kept, 0, 6)
        assert both(*args) == KEPT_UNPACKED


def test_kept_bins_serve_their_own_level_only():
    rng = np.random.default_rng(0)
    rows = np.arange(50, dtype=np.int32)
    slot = rng.integers(-1, 3, 50).astype(np.int32)
    fit = _Fit(1, 0, rng.normal(size=50), 8, rows, np.ones(50), slot, np.array([0, 50]))
    fit.pair_off, fit.pair_feat = np.array([0, 2, 3, 5]), np.array([0, 1, 0, 2, 1], np.int32)
    fit.level_wire = (np.zeros(0),)
    assert keep_bins(fit, np.array([0, 9, 264, 264, 270, 300])).bins.dtype == np.uint8
    kept = keep_bins(fit, np.array([0, 9, 265, 265, 270, 300]))  # a grid of 256 edges
    visits = np.bincount(slot[slot >= 0], minlength=3)[[0, 0, 1, 2, 2]]
    np.testing.assert_array_equal(np.diff(kept.off), visits)
    assert kept.bins.dtype == np.uint16 and kept.bins.size == visits.sum()
    assert isinstance(kept.slot, bytes)  # a digest: no copy of the slots (4 bytes a row)
    assert kept.serves(fit)
    other = _Fit(1, 0, fit.y, 8, rows, fit.w, slot, fit.tree_rows)  # another fit
    other.pair_off, other.pair_feat, other.level_wire = fit.pair_off, fit.pair_feat, fit.level_wire
    assert not kept.serves(other)
    fit.level_wire = (np.zeros(0),)  # another level's Round A
    assert not kept.serves(fit)
    fit.level_wire = kept.wire
    fit.slot[np.flatnonzero(slot >= 0)[0]] = -1  # rows moved in place
    assert not kept.serves(fit)


class _Watched(ff.LocalFederation):
    """The local transport, its clients' parties looked at (or restarted) between rounds.

    ``mode``: "keep" records the kept visits after each Round A and checks they are
    dropped after Round B; "restart" rebuilds each party from its state before Round B
    (as a client restored between messages); "floats" sends Round B's candidates as
    float64 values (``cand``) instead of ``cand_at``.
    """

    def __init__(self, clients, mode, **kw):
        super().__init__(clients, **kw)
        self.mode, self.kept_visits, self.round_a, self.dtypes = mode, [], {}, set()

    def send_and_receive(self, requests, round_index):
        kind = next(iter(requests.values())).kind
        if kind == ROUND_A:
            self.round_a = dict(requests)
        if kind == ROUND_B and self.mode == "restart":
            for c in self.clients.values():
                c._secure = SecureParty.from_state(c, c._secure.to_state())
                assert c._secure.kept is None
        if kind == ROUND_B and self.mode == "floats":
            for name, msg in list(requests.items()):
                arrays = {k: v for k, v in msg.arrays.items() if k != "cand_at"}
                arrays["cand"] = sent_candidates(self.round_a[name], msg)
                requests[name] = Message(ROUND_B, msg.header, arrays)
        answers = super().send_and_receive(requests, round_index)
        parties = [c._secure for c in self.clients.values()]
        if kind == ROUND_A and self.mode == "keep":
            self.kept_visits.append([0 if p.kept is None else p.kept.bins.size for p in parties])
            self.dtypes |= {p.kept.bins.dtype for p in parties if p.kept is not None}
        if kind == ROUND_B:
            assert all(p.kept is None for p in parties)
        return answers


@pytest.mark.parametrize("forced", [None, np.uint16, np.int32])
def test_a_fit_from_kept_bins_is_the_fallbacks_forest(forced, monkeypatch):
    """Bins kept as ``bins_dtype`` says (uint8: these grids hold 26 to 34 edges, even at
    ``n_bins=256``), or as the wider types, forced: the same forest each time."""
    if forced is not None:
        monkeypatch.setattr(client_kept, "bins_dtype", lambda grid_off: forced)
    d = make_paper_synthetic("covariate-shift", n_clients=2, n_per_client=400, random_state=0)
    preds, visits = [], None
    for mode in ("keep", "restart", "floats"):
        clients = [ff.Client(d.X_train[d.h_train == h], d.y_train[d.h_train == h], name=str(h))
                   for h in np.unique(d.h_train)]  # fmt: skip
        fed = _Watched(clients, mode, n_jobs=4)  # two threads a client: blocks of trees
        model = ff.FedForestRegressor(n_estimators=6, max_depth=5, random_state=1)
        model.fit_federated(fed)
        preds.append(model.predict(d.X_test))
        if mode == "keep":
            visits = fed.kept_visits
            assert fed.dtypes == {np.dtype(np.uint8 if forced is None else forced)}
    assert visits and all(v > 0 for level in visits for v in level)
    for p in preds[1:]:
        np.testing.assert_array_equal(p, preds[0])
