"""Copies of a column under ``privacy="secure"`` (``privacy/copies.py``).

A column and its copy (or any monotone transform of it) cut a node's rows into nested
sets: the node's sums on the two at thresholds the rules keep ``m`` rows apart on each
column differ by the rows between them, one row at times (its exact target). The attack
(:func:`copy_exposure`) reads every node's Round B releases on both columns; it finds
rows with the fix off (the control) and nothing with it on, where no sum on the copy is
released at all.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

import fedforest as ff
from fedforest.federated.privacy import copies
from fedforest.federated.privacy.copies import (
    check_rank_corr,
    fitted_as_one,
    rank_corr_sums,
    representatives,
)
from tests._attack_controls import assert_found_at_some_seed
from tests.test_privacy import (
    _data,
    _fit,
    _in_bag_weights,
    _members,
    _releases,
    _round_b_pairs,
    client_values,
)

TRANSFORMS = {
    "copy": lambda x: x,
    "affine": lambda x: 2.0 * x + 3.0,  # a change of unit
    "exp": np.exp,  # any increasing transform
    "negated": lambda x: -x,  # decreasing: its sums below are the column's above
}


# --------------------------------------------------------------------- the statistic
def test_a_clients_sums_are_its_rows_times_spearmans_rho() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4))
    x[:, 1] = np.round(x[:, 0] + 0.3 * rng.normal(size=300), 1)  # ties
    x[:, 3] = -np.exp(x[:, 2])
    got = rank_corr_sums(x, 1000)
    want = spearmanr(x).statistic[np.triu_indices(4, 1)] * 1000
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    assert got[5] == pytest.approx(-1000.0)  # columns 2 and 3: (i, j) = (2, 3), the last


def test_missing_values_take_the_mean_rank_and_a_constant_column_correlates_zero() -> None:
    x = np.array([[1.0, 5.0, 2.0], [2.0, np.inf, 2.0], [3.0, 7.0, 2.0], [4.0, 8.0, 2.0]])
    got = rank_corr_sums(x, 4)
    # Column 1's ranks 1, (mean 2), 2, 3 against 1, 2, 3, 4: rho of the centred ranks.
    a, b = np.array([-1.5, -0.5, 0.5, 1.5]), np.array([-1.0, 0.0, 0.0, 1.0])
    assert got[0] == pytest.approx(4 * a @ b / np.sqrt((a @ a) * (b @ b)))
    assert got[1] == got[2] == 0.0


def test_many_rows_are_ranked_evenly_spaced() -> None:
    n = copies.RANK_ROWS * 3
    x = np.column_stack([np.arange(n, dtype=float), np.arange(n, dtype=float) % 7])
    sample = x[np.linspace(0, n - 1, copies.RANK_ROWS).astype(np.int64)]
    assert rank_corr_sums(x, n)[0] == pytest.approx(spearmanr(sample).statistic * n)


def test_representatives_keep_the_first_column_and_chains_every_few() -> None:
    # Columns 0..4: 1 and 2 copies of 0 (2 negated), 3 close to 2 but not to 0, 4 alone.
    rho = np.eye(5)
    for (i, j), r in {(0, 1): 0.99, (0, 2): -0.95, (1, 2): -0.96, (2, 3): 0.93}.items():
        rho[i, j] = rho[j, i] = r
    rho[0, 3] = rho[3, 0] = 0.85
    n = 200.0
    feats = np.array([0, 2, 3, 5, 6])  # the grid's columns (1 and 4 categorical)
    rep = representatives(rho[np.triu_indices(5, 1)] * n, feats, 7, n)
    assert rep is not None
    assert rep.tolist() == [0, 1, 0, 0, 4, 5, 6]  # 3 (feats[2]) keeps its own: 0.85 to 0
    assert representatives(np.zeros(10), feats, 7, n) is None


def test_a_drawn_copy_is_asked_as_its_column_once_and_not_where_constant() -> None:
    rep = np.array([0, 0, 2, 2])
    pair_off = np.array([0, 2, 4, 5])
    pair_feat = np.array([1, 0, 3, 1, 3], dtype=np.int32)
    off, feat = fitted_as_one(pair_off, pair_feat, rep)
    assert off.tolist() == [0, 1, 3, 4] and feat.tolist() == [0, 2, 0, 2]
    constant = np.zeros((3, 4), dtype=bool)
    constant[1, 2] = True
    off, feat = fitted_as_one(pair_off, pair_feat, rep, constant)
    assert off.tolist() == [0, 1, 2, 3] and feat.tolist() == [0, 0, 2]


def test_pooled_sums_beyond_the_rows_are_refused_naming_the_field() -> None:
    check_rank_corr(np.array([100.0, -100.0, 3.5]), 100.0, 3)
    for bad in ([100.01, 0.0, 0.0], [0.0, np.nan, 0.0], [-np.inf, 0.0, 0.0]):
        with pytest.raises(ValueError, match="'rank_corr'.*some client"):
            check_rank_corr(np.array(bad), 100.0, 3)


# ------------------------------------------------------------------------ the attack
def copy_exposure(fed: Any, model: Any, X: pd.DataFrame, h: np.ndarray, m: int) -> dict:
    """Per node, its releases on columns 0 and 1 whose row sets nest with 1 to ``m - 1``
    rows between (the difference of the two sums is a sum over those rows; a decreasing
    copy's sums below are the column's above, its complement's); and the rows alone."""
    clients = [fed.clients[f"site{k}"] for k in np.unique(h)]
    w = _in_bag_weights(model, clients, h, len(model.trees_), model.random_state)
    V = client_values(fed, X, h)
    released = _releases(fed, model, m)
    member = _members(model, V, w)
    small, alone = 0, 0
    for (t, nd, f), cand in released.items():
        if f != 0 or (t, nd, 1) not in released:
            continue
        r = member[t][nd]
        for e in cand[np.isfinite(cand)]:
            a = V[r, 0] <= e
            for e1 in released[(t, nd, 1)]:
                b = V[r, 1] <= e1
                for side in (b, ~b):
                    ab, ba = int((a & ~side).sum()), int((side & ~a).sum())
                    if min(ab, ba) == 0 and 0 < ab + ba < m:
                        small += 1
                        alone += ab + ba == 1
    return {"small": small, "alone": alone, "on_copy": _asked_on(fed, model, m, 1)}


def _asked_on(fed: Any, model: Any, m: int, column: int) -> int:
    """Round B pairs (node, feature) of ``column``."""
    return sum(f == column for _, _, _, f, _, _ in _round_b_pairs(fed, model, m))


def _copy_fit(seed: int, transform: str, trees: int = 10) -> tuple[Any, ...]:
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    X["x1"] = TRANSFORMS[transform](X["x0"].to_numpy())
    model = ff.FedForestRegressor(n_estimators=trees, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fed = _fit(model, X, y, h)
    return fed, model, X, h


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_no_sum_on_a_copy_of_a_column_is_released(transform: str) -> None:
    fed, model, X, h = _copy_fit(0, transform)
    got = copy_exposure(fed, model, X, h, 10)
    assert got == {"small": 0, "alone": 0, "on_copy": 0}, got
    assert _asked_on(fed, model, 10, 0) > 0  # the column itself is fitted
    assert model.feature_importances_[1] == 0.0 < model.feature_importances_[0]


def test_the_copy_attack_reads_targets_with_the_fix_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copies, "COPY_RHO", 2.0)  # no column is ever a copy

    def attack(seed: int) -> dict:
        fed, model, X, h = _copy_fit(seed, "copy")
        return copy_exposure(fed, model, X, h, 10)

    assert_found_at_some_seed(attack, lambda got: got["alone"] > 0, [0, 1, 2])


def test_under_none_a_copy_is_fitted_as_before() -> None:
    X, y, h = _data(n_clients=4, n_rows=100, d=4, seed=0)
    X["x1"] = X["x0"]
    model = ff.FedForestRegressor(n_estimators=5, random_state=0, privacy="none")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _fit(model, X, y, h)
    assert model.feature_importances_[1] > 0.0
