"""Values few rows of the federation hold, under ``privacy="secure"`` (branch ``tracer``).

Red team 8's tracers (``tests/test_privacy_red8.py``) are closed by three parts: category
codes held by 1 to ``m - 1`` rows merged before any Round A (``server/rare_codes.py``), no
"value known | missing" edge for a column missing in 1 to ``m - 1`` rows
(``server/sparse_columns.py``), and no node grid edge with fewer than ``m`` rows of the
federation on one side (``secure_grids._within``). Here: the merge rule on hand-worked
counts, the checks of the new fields on both sides, and what the forest does with them.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
import tests.test_privacy_red8 as red8
from fedforest.federated.client_setup import merge_codes
from fedforest.federated.domains import code_counts
from fedforest.federated.server import secure_setup
from fedforest.federated.server.grid_bounds import outside, within_numpy
from fedforest.federated.server.missing import MISSING_SPLIT
from fedforest.federated.server.rare_codes import check_code_counts, code_maps
from fedforest.federated.server.secure_grids import _within
from fedforest.federated.server.secure_setup import grid_ends
from tests.test_privacy import _data, _fit
from tests.test_privacy_red8 import _tracer_fit, tracer_fix_off

LEVELS = {"0": ["a", "b", "c", None]}  # None: the missing category (its code 3)


@pytest.mark.parametrize(
    ("counts", "merged"),
    [
        ([50, 30, 20, 0], None),  # every code 0 or m rows and more: no map
        ([50, 30, 1, 0], [0, 1, 0, 0]),  # one row: with the empty missing category, < m
        ([50, 30, 6, 5], [0, 1, 3, 3]),  # 6 and 5 rows: together m (11 >= 10), missing
        ([50, 30, 20, 3], [0, 1, 2, 0]),  # a rare missing category joins the most frequent
        ([4, 30, 50, 9], [3, 1, 2, 3]),  # 4 + 9 rows: the missing category keeps them
        ([20, 30, 0, 0], None),  # a declared level no row holds stays (nothing to follow)
    ],
)
def test_codes_few_rows_hold_are_merged(counts: list[int], merged: list[int] | None) -> None:
    """Hand-worked: codes of 1 to m - 1 rows (m = 10), and the missing category when it is
    itself that rare or empty, join the missing category when they reach m rows together,
    else the most frequent other code; every code then holds 0 or m rows or more."""
    maps = code_maps(np.array(counts, dtype=float), [0], LEVELS, 10)
    assert (maps[0].tolist() if 0 in maps else None) == merged
    if merged is not None:
        after = np.bincount(maps[0], weights=counts, minlength=4)
        assert np.all((after == 0) | (after >= 10))


def test_pooled_code_counts_no_rows_have_are_refused() -> None:
    check_code_counts(np.array([3.0, 5, 2, 0, 10, 0]), [4, 2], 10.0)
    for bad in ([3.0, 5, 2, 1, 10, 0], [3.5, 4.5, 2, 0, 10, 0], [12.0, -2, 0, 0, 10, 0]):
        with pytest.raises(ValueError, match="some client sent counts that no rows have"):
            check_code_counts(np.array(bad), [4, 2], 10.0)


def _client() -> ff.Client:
    X = pd.DataFrame({"ward": ["a", "b", "a", "zz"], "x": [0.1, 0.2, 0.3, 0.4]})
    return ff.Client(X, np.zeros(4), "site0", categorical_features=["ward"])


def test_a_client_counts_its_codes_and_refuses_a_malformed_request() -> None:
    client = _client()
    levels = {"0": ["a", "b", None]}  # "zz" is outside: the missing category's row
    assert code_counts(client._cat_raw, levels, "c").tolist() == [2.0, 1.0, 1.0]
    for bad in ({"1": ["a", None]}, {"0": "a"}, ["a"], {0: ["a", None]}):
        with pytest.raises(ValueError, match="code_counts"):
            code_counts(client._cat_raw, bad, "Client 'site0'")


def test_a_client_merges_codes_and_refuses_a_malformed_map() -> None:
    client = _client()
    levels = {"0": ["a", "b", None]}
    client.X[:, 0] = [0.0, 1.0, 0.0, 2.0]  # the codes encode_categories gives
    merge_codes(client, {"0": [0, 0, 0]}, levels)
    assert client.X[:, 0].tolist() == client.Xt[0].tolist() == [0.0, 0.0, 0.0, 0.0]
    for bad in ({"0": [0, 3, 0]}, {"0": [0, 0]}, {"1": [0, 0, 0]}, {"0": [0, 0.0, 0]}, [0]):
        with pytest.raises(ValueError, match="code_map"):
            merge_codes(client, bad, levels)


def test_within_moves_edges_outside_the_bounds_onto_them() -> None:
    """Pair 0: bounds [1.5, 3]: 1 moves onto 1.5, 3 stays, 3.5 moves onto 3 (a repeat,
    gone). Pair 1: 0.5 onto 1.5, inside the node's (1, 5); 4 onto 3. Pair 2: ``lo > hi``,
    no edge. Pair 3: 0.2 moves onto 1.5, outside the node's (0, 1): gone."""
    grid = np.array([1.0, 3.0, 3.5, 0.5, 4.0, 2.0, 0.2])
    off = np.array([0, 3, 5, 6, 7])
    lo, hi = np.array([1.5, 1.5, 2.5, 1.5]), np.array([3.0, 3.0, 2.0, 3.0])
    node_lo, node_hi = np.array([-np.inf, 1.0, -np.inf, 0.0]), np.array([np.inf, 5.0, np.inf, 1.0])
    out, out_off = _within(grid, off, lo, hi, node_lo, node_hi)
    assert out.tolist() == [1.5, 3.0, 1.5, 3.0] and out_off.tolist() == [0, 2, 4, 4, 4]


@pytest.mark.parametrize("seed", range(4))
def test_within_kernel_matches_its_twin(seed: int) -> None:
    # Sorted grids with repeats and signed zeros, bounds on edges (0.0 against -0.0), in
    # and around them, lo > hi, NaN and infinite bounds, empty pairs; and grids with every
    # edge inside (the grid itself, uncopied, as the twin gives it).
    rng = np.random.default_rng(seed)
    values = np.array([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0])
    n = 300
    sizes = rng.integers(0, 9, n)
    off = np.concatenate([[0], np.cumsum(sizes)])
    grid = np.concatenate([np.sort(rng.choice(values, k)) for k in sizes])
    pick = np.append(values, [np.nan, -np.inf, np.inf])
    lo, hi = rng.choice(pick, n), rng.choice(pick, n)
    node_lo, node_hi = rng.choice(pick, n), rng.choice(pick, n)
    got, got_off = _within(grid, off, lo, hi, node_lo, node_hi)
    want, want_off = within_numpy(grid, off, lo, hi, node_lo, node_hi)
    np.testing.assert_array_equal(got_off, want_off)
    assert got.tobytes() == want.tobytes()  # bit for bit: the signs of zeros too
    assert np.signbit(got[got == 0]).any() and not np.signbit(got[got == 0]).all()
    assert 0 < got.size < grid.size
    inside = (np.full(n, -np.inf), np.full(n, np.inf), node_lo, node_hi)
    assert _within(grid, off, *inside)[0] is grid and within_numpy(grid, off, *inside)[0] is grid


def test_outside_moves_edges_out_of_gaps_only_of_the_pairs_features() -> None:
    # Feature 0 has the gap (1, 3): 1.5 moves onto 1 (a repeat of 1: gone), 2.5 onto 3;
    # feature 1's gap is never a pair's feature here; feature 2 has none: the grid itself.
    gaps = [np.array([[1.0, 3.0]]), np.array([[0.0, 9.0]]), np.zeros((0, 2))]
    grid, off = np.array([1.0, 1.5, 2.5, 4.0, 5.0]), np.array([0, 4, 5])
    inf = np.full(2, np.inf)
    out, out_off = outside(grid, off, np.array([0, 2]), gaps, -inf, inf)
    assert out.tolist() == [1.0, 3.0, 4.0, 5.0] and out_off.tolist() == [0, 3, 4]
    out, out_off = outside(grid, off, np.array([2, 2]), gaps, -inf, inf)
    assert out is grid and out_off is off


@pytest.mark.parametrize(
    ("cum", "bounds"),
    [
        # 999 zeros in the bin (2, 3], one row apart above (an empty bin between): no edge
        # above 2 (below, nothing lies beyond the zeros' bin: no bound); no edge inside the
        # data (it starts above 2)
        ([0, 0, 0, 999, 999, 1000], (-np.inf, 2.0)),
        # a tail: 3 rows in the bin next to (1, 2], where rows reach m = 10: edges from 1
        ([0, 3, 40, 900, 990, 1000], (1.0, np.inf)),
        # the same 3 rows apart (the bin (0, 1] empty): edges from 2; above, 5 rows in the
        # bin next to (3, 4]: edges up to 4
        ([3, 3, 40, 900, 995, 1000], (2.0, 4.0)),
        # nothing beyond either end's bin: no bound
        ([0, 0, 500, 1000, 1000, 1000], (-np.inf, np.inf)),
        # 5 rows apart above 995 tied ones in (0, 1]: edges up to 0, where the data start
        ([0, 995, 995, 995, 1000, 1000], (-np.inf, 0.0)),
    ],
)
def test_grid_ends_on_hand_worked_counts(cum: list[int], bounds: tuple[float, float]) -> None:
    """Coarse edges 0 to 5 (of 1,000 rows), m = 10."""
    edges = np.arange(6, dtype=float)
    assert grid_ends(edges, np.array(cum, dtype=float), 1000.0, 10) == bounds


def test_grid_ends_keep_missing_rows_apart() -> None:
    """A column's 1 to m - 1 missing rows lie above every value: the top bound is the
    lower edge of the bin where the known rows above fall below m, as for a group apart
    (without them: no bound above)."""
    edges, cum = np.arange(6, dtype=float), np.array([0, 0, 500, 1000, 1000, 1000.0])
    assert grid_ends(edges, cum, 1000.0, 10, missing=1.0) == (-np.inf, 2.0)


def _capped(**kw):  # noqa: ANN003, ANN202
    """The suite's data with ``x2`` capped at 0.3 (a tie at its top: about 38 % of rows)."""
    X, y, h = _data(**kw)
    X["x2"] = np.minimum(X["x2"], 0.3)
    return X, y, h


def _above_the_cap(grid: np.ndarray, cum: np.ndarray, rows: float) -> float | None:
    """A pair's rows above its last finite edge at or above the cap: the missing ones."""
    at = np.flatnonzero((grid >= 0.3) & (grid < MISSING_SPLIT))
    return rows - cum[at[-1], 0] if at.size else None


def test_a_missing_row_above_a_capped_column_is_not_followed(monkeypatch) -> None:  # noqa: ANN001
    """``x2`` capped at 0.3 and missing in one row: without a missing edge the row sits
    above every value, and node grid edges above the cap's tie had it alone above them
    (the server sees the tie in the coarse counts). With its missing rows counted as a
    group apart (``grid_ends``'s ``missing``) nothing is followed; without, the row is
    followed down the trees and singled out (data seeds 0 and 2, 50 trees, measured)."""
    monkeypatch.setattr(red8, "_data", _capped)
    X, row, model, levels, *_ = red8._tracer_fit(monkeypatch, 0, 50, "missing")
    assert red8.followed_nodes(model, levels, 2, _above_the_cap) == {}
    ends = secure_setup.grid_ends
    monkeypatch.setattr(secure_setup, "grid_ends", lambda e, c, n, m, missing=0.0: ends(e, c, n, m))
    X, row, model, levels, *_ = red8._tracer_fit(monkeypatch, 0, 50, "missing")
    held = red8.followed_nodes(model, levels, 2, _above_the_cap)
    assert len(held) >= 10
    assert red8.rows_in_the_boxes(X, model, held, 2).tolist() == [row]


def test_a_merged_level_is_predicted_as_the_rows_it_joined() -> None:
    """A declared level one row holds is merged into the most frequent level (``c`` here):
    the set splits send it where that level's rows went, so the model predicts the row as
    if it held ``c``; the level's code holds no row in any node."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=1, categorical=True)
    X["ward"] = X["ward"].astype(object)
    X.loc[317, "ward"] = "z"
    model = ff.FedForestRegressor(
        n_estimators=10, random_state=0, categories={"ward": list("abcdefghz")}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _fit(model, X, y, h)
    top = X["ward"].value_counts().idxmax()
    as_top = X.iloc[[317]].copy()
    as_top["ward"] = top
    split = 0
    for tree in model.trees_:
        for node in np.flatnonzero(tree.feature == 8):
            left, right = tree.split_set(int(node))
            z, t = model.categories_[8].index("z"), model.categories_[8].index(top)
            assert (z in left.tolist()) == (t in left.tolist())
            assert (z in right.tolist()) == (t in right.tolist())
            split += 1
    assert split > 0
    np.testing.assert_array_equal(model.predict(X.iloc[[317]]), model.predict(as_top))


def test_a_column_missing_in_one_row_has_no_missing_edge(monkeypatch) -> None:  # noqa: ANN001
    """One row misses ``x2``: no node grid of it ends with the "known | missing" edge, so
    Round A counts no node's missing rows; the row stays right at every split on ``x2``
    (as before: that edge's candidate needs ``m`` missing rows). With the missing-edge
    part of the fix off the edge is back (the test can fail)."""
    for off in (False, True):
        if off:
            tracer_fix_off(monkeypatch)
        _, _, model, levels, *_ = _tracer_fit(monkeypatch, seed=0, n_trees=5, tracer="missing")
        ends = [
            lv["grid"][lv["grid_off"][p + 1] - 1] == MISSING_SPLIT
            for lv in levels
            for p in np.flatnonzero(lv["pair_feat"] == 2)
            if lv["grid_off"][p + 1] > lv["grid_off"][p]
        ]
        assert len(ends) > 10 and any(ends) == off
        if not off:
            assert all(t.missing_go_to_left[t.feature == 2].sum() == 0 for t in model.trees_)


def test_a_sparse_column_with_m_nonzero_rows_still_splits() -> None:
    """``x2`` 0 in all rows but 30 (of 1,000) and the target's step there: 30 rows apart
    from the zeros are ``m`` rows and more, so the grid-end bounds leave ``x2`` its edges
    between 0 and them and it splits there (bounds set a bin too far would leave none)."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=0)
    rng = np.random.default_rng(0)
    nonzero = rng.choice(len(X), 30, replace=False)
    X["x2"] = 0.0
    X.loc[nonzero, "x2"] = rng.uniform(1.0, 3.0, 30)
    y = y + 6.0 * (X["x2"].to_numpy() > 0)
    model = ff.FedForestRegressor(n_estimators=10, random_state=0)
    _fit(model, X, y, h)
    thresholds = np.concatenate([t.threshold[t.feature == 2] for t in model.trees_])
    assert thresholds.size > 0
    assert np.all((thresholds >= 0.0) & (thresholds < 3.0))
