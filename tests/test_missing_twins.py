"""Columns missing on the same or nested rows under ``privacy="secure"``.

A column's "value known | missing" edge releases a node's sum over the rows that know its
value. Another column missing on the same rows knows the same rows: that sum less the
other column's candidate just below them is a sum over the few known rows above it
(``missing.few_known_above`` keeps ``m`` known rows above every candidate). Two columns
missing on nested rows release, at one node, two known-row sums whose difference is the
rows that miss one and not the other (``copies.nested_apart`` spaces their edges ``m``
rows apart, for the pairs the first grid round's order statistics show nested:
``privacy/copies.nested_pairs``). The attack reads every node's releases on the two
columns whose row sets nest with 1 to ``m - 1`` rows between.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.privacy.copies import nested_apart, nested_pairs, order_sums
from fedforest.federated.server import secure_round_b
from fedforest.federated.server.missing import MISSING_SPLIT, few_known_above
from tests._attack_controls import assert_found_at_some_seed
from tests.test_copies import pair_exposure, seen
from tests.test_privacy import _data, _fit


def test_a_candidate_keeps_m_known_rows_above_it() -> None:
    # Two pairs: the first's grid ends at the missing edge (80 known of 100 rows), the
    # second has no missing value.
    grid = np.array([0.0, 1.0, 2.0, MISSING_SPLIT, 0.0, 1.0, 2.0])
    grid_off = np.array([0, 4, 7])
    cum = np.array([30.0, 72.0, 80.0, 80.0, 30.0, 72.0, 95.0])
    cand = np.array([0.0, 1.0, 2.0, MISSING_SPLIT, 1.0, 2.0])
    cand_off = np.array([0, 4, 6])
    below = np.array([30.0, 72.0, 80.0, 80.0, 72.0, 95.0])
    got = few_known_above(grid, grid_off, cum, cand, cand_off, below, 10)
    assert got.tolist() == [False, True, False, False, False, False]


def test_twin_edges_at_one_node_stay_m_rows_apart() -> None:
    twins = np.zeros((4, 4), dtype=np.int8)
    twins[0, 1] = twins[1, 0] = twins[1, 2] = twins[2, 1] = 1
    # Node 0: features 0, 1, 2, 3 with edges at 80, 75, 85, 79 known rows; node 1:
    # features 0 and 1 at 60 and 60 (the same rows: kept).
    node = np.array([0, 0, 0, 0, 1, 1])
    feature = np.array([0, 1, 2, 3, 0, 1])
    cand = np.array([1.0, MISSING_SPLIT, MISSING_SPLIT, MISSING_SPLIT, MISSING_SPLIT,
                     MISSING_SPLIT, MISSING_SPLIT])  # fmt: skip
    cand_off = np.array([0, 2, 3, 4, 5, 6, 7])
    below = np.array([40.0, 80.0, 75.0, 85.0, 79.0, 60.0, 60.0])
    safe = np.ones(7, dtype=bool)
    rows = np.full(7, 100.0)
    got = nested_apart(node, feature, cand, cand_off, below, rows, safe, (twins * 0, twins), 10)
    # 1 (75) is 5 from 0's (80): dropped; 2 (85) twin of 1 only, which was dropped: kept;
    # 3 is no one's twin.
    assert got.tolist() == [False, False, True, False, False, False, False]


def test_the_order_statistics_find_columns_missing_on_nested_rows() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 4))
    gone = rng.random(400) < 0.3
    x[gone, 0] = np.inf
    x[gone | (rng.random(400) < 0.05), 1] = np.inf  # nested in 0's
    x[rng.random(400) < 0.3, 2] = np.inf  # independent
    nested = nested_pairs(order_sums(x, 400), np.arange(4), 4, 0, 400)
    assert nested is not None
    assert np.argwhere(nested[1]).tolist() == [[0, 1], [1, 0]] and not nested[0].any()
    assert nested[1][0, 1] == 1  # missing together: increasing
    assert nested_pairs(order_sums(x[:, 2:], 400), np.arange(2), 2, 0, 400) is None


def twin_exposure(fed: Any, model: Any, X: Any, h: np.ndarray, m: int) -> dict:
    """Per node, releases on columns 2 and 3 whose row sets nest with 1 to m - 1 rows
    between (a missing value: above every threshold; the edge: the known rows)."""
    small, alone = pair_exposure(seen(fed, model, X, h, m), 2, 3, m)
    return {"small": small, "alone": alone}


def _twin_fit(seed: int, extra: float) -> tuple[Any, ...]:
    """x2 missing on a fifth of the rows, x3 on the same and ``extra`` of the others."""
    X, y, h = _data(n_clients=10, n_rows=100, d=6, seed=seed)
    rng = np.random.default_rng(seed + 7)
    both = rng.random(len(X)) < 0.2
    only = ~both & (rng.random(len(X)) < extra)
    X.loc[both, "x2"] = np.nan
    X.loc[both | only, "x3"] = np.nan
    model = ff.FedForestRegressor(n_estimators=10, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fed = _fit(model, X, y + 1.0 * both, h)
    return fed, model, X, h


@pytest.mark.parametrize("extra", [0.0, 0.01])
def test_columns_missing_on_the_same_or_nested_rows_give_no_few_rows(extra: float) -> None:
    for seed in (0, 1, 2):
        got = twin_exposure(*_twin_fit(seed, extra), 10)
        assert got == {"small": 0, "alone": 0}, (seed, got)


@pytest.mark.parametrize("extra", [0.0, 0.01])
def test_the_twin_attack_reads_targets_with_the_fix_off(
    monkeypatch: pytest.MonkeyPatch, extra: float
) -> None:
    monkeypatch.setattr(secure_round_b, "few_known_above", lambda *a: np.zeros(a[3].size, bool))
    monkeypatch.setattr(secure_round_b, "nested_apart", lambda *a: np.zeros(a[2].size, bool))

    def attack(seed: int) -> dict:
        return twin_exposure(*_twin_fit(seed, extra), 10)

    assert_found_at_some_seed(attack, lambda got: got["alone"] > 0, [0, 1, 2, 3])
