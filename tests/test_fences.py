"""``privacy/fences.py``: node grid edges fenced by an ancestor's counts.

Hand-worked cases (the rule read off the counts by hand) and the kernel against its NumPy
twin on seeded random histograms.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.federated.privacy.fences import fenced_edges, fenced_edges_numpy

M = 10.0


def _fence(grid, edges, rows, lo=-np.inf, hi=np.inf, fn=fenced_edges):  # noqa: ANN001, ANN202
    grid, edges, rows = (np.asarray(a, dtype=np.float64) for a in (grid, edges, rows))
    out = np.empty_like(grid)
    fn(
        grid, np.array([0, grid.size]), np.array([0]), edges, np.array([0, edges.size]),
        rows, np.array([0, rows.size]), np.array([lo]), np.array([hi]), M, True, out,
    )  # fmt: skip
    return out.tolist()


def test_a_row_above_a_tie_gets_no_edge_between_them() -> None:
    """The ancestor's bins: 50 rows in (-2, -1], 300 in (-1, 0.02] (a tie at 0), none in
    (0.02, 0.04], one in (0.04, 0.1]. Below -1 fewer than 10 rows lie at or below any
    edge (the 50 may tie at -1), above it fewer than 10 above any edge (the 300 may tie
    at 0.02 with the row alone above): every edge moves onto -1 (the caller keeps one)."""
    got = _fence([-1.5, -0.5, 0.01, 0.03], [-2, -1, 0.02, 0.04, 0.1], [50, 300, 0, 1])
    assert got == [-1.0, -1.0, -1.0, -1.0]


def test_a_bin_of_few_rows_joins_the_fewer_rows_beside_it() -> None:
    """Bins (0, 1] 20 rows, (1, 2] 1 row, (2, 3] 12, (3, 4] 30: edges within [1, 3] (the
    first edge with 10 rows below, the last with 10 above), and the one row joins the 12
    above (13 rows against 21 below): no edge in (1, 3); 1.5 goes to 1, 2.6 to 3."""
    got = _fence([0.5, 1.5, 2.6, 3.5], [0, 1, 2, 3, 4], [20, 1, 12, 30])
    assert got == [1.0, 1.0, 3.0, 3.0]
    # Joined downwards when fewer rows lie below: no edge in (0, 2), 1.5 goes to 2.
    got = _fence([1.5, 2.5], [0, 1, 2, 3, 4], [12, 1, 20, 30])
    assert got == [2.0, 2.5]


def test_the_node_range_counts_only_the_ancestor_rows_inside_it() -> None:
    """The node holds (2, 4] of an ancestor over (0, 4]: 25 rows in (2, 3], 30 in (3, 4];
    the 40 below 2 do not count: the first edge with 10 of its rows below is 3, and the
    last with 10 above is 3. With 5 and 4 rows there, no edge has 10 on either side: none
    stays (NaN)."""
    got = _fence([2.5, 3.5], [0, 2, 3, 4], [40, 25, 30], lo=2.0, hi=4.0)
    assert got == [3.0, 3.0]
    got = _fence([2.5], [0, 2, 3, 4], [40, 5, 4], lo=2.0, hi=4.0)
    assert np.isnan(got).all()


def test_a_pair_without_an_ancestor_histogram_keeps_its_edges() -> None:
    out = np.empty(2)
    fenced_edges(
        np.array([1.0, 2.0]), np.array([0, 2]), np.array([-1]), np.zeros(0), np.zeros(1, np.int64),
        np.zeros(0), np.zeros(1, np.int64), np.array([-np.inf]), np.array([np.inf]), M, True, out,
    )  # fmt: skip
    assert out.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("join", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_fenced_edges_twins(seed: int, join: bool) -> None:
    rng = np.random.default_rng(seed)
    n_src, n_pairs = 5, 40
    e_list, r_list = [], []
    for _ in range(n_src):
        nb = int(rng.integers(1, 12))
        e_list.append(np.sort(rng.choice(np.arange(50.0), size=nb + 1, replace=False)))
        r_list.append(rng.choice([0.0, 1.0, 3.0, 9.0, 10.0, 25.0], size=nb))
    p_edges, p_rows = np.concatenate(e_list), np.concatenate(r_list)
    p_eoff = np.concatenate([[0], np.cumsum([e.size for e in e_list])])
    p_roff = np.concatenate([[0], np.cumsum([r.size for r in r_list])])
    src = rng.integers(-1, n_src, size=n_pairs)
    sizes = rng.integers(0, 8, size=n_pairs)
    grid_off = np.concatenate([[0], np.cumsum(sizes)])
    grid = np.concatenate([np.sort(rng.uniform(-5, 55, size=k)) for k in sizes])
    lo = np.where(rng.random(n_pairs) < 0.5, -np.inf, rng.integers(0, 25, n_pairs).astype(float))
    hi = np.where(rng.random(n_pairs) < 0.5, np.inf, rng.integers(25, 50, n_pairs).astype(float))
    got, want = np.empty_like(grid), np.empty_like(grid)
    args = (grid, grid_off, src, p_edges, p_eoff, p_rows, p_roff, lo, hi, M, join)
    fenced_edges(*args, got)
    fenced_edges_numpy(*args, want)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got).any() and (got != grid).any()  # the data exercise both
