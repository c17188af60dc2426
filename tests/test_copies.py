"""Copies of a column under ``privacy="secure"`` (``privacy/copies.py``).

A column and its copy (or any monotone transform of it) cut a node's rows into nested
sets: the node's sums on the two at thresholds the rules keep ``m`` rows apart on each
column differ by the rows between them, one row at times (its exact target). The attack
(:func:`copy_exposure`) reads every node's Round B releases on both columns; it finds
rows with the fix off (the control) and nothing with it on, where no sum on the copy is
released at all.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

import fedforest as ff
from fedforest.federated.privacy import copies
from fedforest.federated.privacy.copies import (
    check_order_sums,
    dependent_categories,
    fitted_as_one,
    nested_apart,
    nested_pairs,
    one_of_each,
    order_categories,
    order_sums,
    representatives,
)
from fedforest.federated.privacy.rules import MISSING_SPLIT
from fedforest.federated.server import grow_level, secure_round_b
from tests._attack_controls import assert_found_at_some_seed
from tests.test_privacy import (
    _data,
    _fit,
    _group_releases,
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
    "flag": lambda x: (x > 0.3).astype(float),  # a coarsening: one threshold, nested
    "rounded": lambda x: np.round(x, 1),
}


# --------------------------------------------------------------------- the statistic
def _brute(x: np.ndarray) -> np.ndarray:
    """:func:`order_sums` by counting every pair of rows (a missing value orders none)."""
    n, p = x.shape
    c, d = np.zeros((p, p)), np.zeros((p, p))
    cm, dm = np.zeros((p, p)), np.zeros((p, p))  # the missing indicators'
    for i in range(n):
        for j in range(i + 1, n):
            both = np.isfinite(x[i]) & np.isfinite(x[j])
            s = np.where(both, np.sign(np.where(both, x[j], 0) - np.where(both, x[i], 0)), 0)
            prod = np.outer(s, s)
            c += prod > 0
            d += prod < 0
            sm = np.sign((~np.isfinite(x[j])).astype(float) - (~np.isfinite(x[i])))
            prod = np.outer(sm, sm)
            cm += prod > 0
            dm += prod < 0
    upper = np.triu_indices(p, 1)
    pairs = n * (n - 1) / 2
    signed, signed_m = (c - d)[upper] / pairs, (cm - dm)[upper] / pairs
    return np.concatenate(
        [signed, (c + d)[upper] / pairs, np.diag(c) / pairs, signed_m, (cm + dm)[upper] / pairs]
    )


def test_a_clients_sums_count_its_discordant_and_ordered_pairs() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4))
    x[:, 1] = np.round(x[:, 0] + 0.3 * rng.normal(size=60), 1)  # ties
    x[:, 2] = (x[:, 0] > 0.2).astype(float)  # a flag of column 0: no discordant pair
    x[:, 3] = -np.exp(x[:, 0])  # decreasing: no concordant pair
    x[rng.random(x.shape) < 0.1] = np.inf  # missing values
    got = order_sums(x, 500)
    np.testing.assert_allclose(got, 500 * _brute(x), rtol=1e-12, atol=1e-9)
    for k in (1, 2, 5):  # pairs (0, 2), (0, 3), (2, 3): nested (C or D is 0)
        assert abs(got[k]) == got[6 + k] > 0


def test_without_ties_the_rates_give_kendalls_tau() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 2))
    x[:, 1] += x[:, 0]
    signed, ordered = order_sums(x, 1)[:2]
    tau = kendalltau(x[:, 0], x[:, 1]).statistic
    assert ordered == pytest.approx(1.0)
    assert signed / ordered == pytest.approx(tau)


def test_a_categorical_column_is_ordered_by_its_categories_mean() -> None:
    rng = np.random.default_rng(2)
    a = rng.normal(size=300)
    x = np.column_stack([a, rng.normal(size=300)])
    bands = np.array(["low", "mid", "high", "top"], dtype=object)[np.searchsorted([-1, 0, 1], a)]
    bands[:3] = None  # missing: in no pair
    unrelated = rng.choice(list("abcde"), size=300).astype(object)
    single = np.array([f"id{i}" for i in range(300)], dtype=object)  # one row each
    got = order_sums(x, 300, [bands, unrelated, single])
    cat_signed, cat_ordered, cat_own = (got[4 + 6 * k : 10 + 6 * k].reshape(3, 2) for k in range(3))
    cat_fewer = (cat_ordered - np.abs(cat_signed)) / 2  # min(C, D)
    assert cat_fewer[0, 0] == 0.0 < cat_ordered[0, 0]  # bands of column 0: in order
    assert cat_fewer[0, 1] > 0.3 * cat_ordered[0, 1]  # not of column 1
    assert cat_fewer[1, 0] > 0.3 * cat_ordered[1, 0]
    assert cat_ordered[2].tolist() == cat_own[2].tolist() == [0.0, 0.0]  # one row each
    # The pair's rates as counted pair by pair, the categories in order of their mean.
    means = {b: a[bands == b].mean() for b in ("low", "mid", "high", "top")}
    place = np.array(
        [np.inf if b is None else sorted(means.values()).index(means[b]) for b in bands]
    )
    brute = 300 * _brute(np.column_stack([a, place]))
    assert cat_signed[0, 0] == pytest.approx(brute[0])
    assert cat_ordered[0, 0] == pytest.approx(brute[1])
    assert cat_own[0, 0] == pytest.approx(brute[3])  # pairs in different bands
    assert cat_own[0, 0] == pytest.approx(cat_ordered[0, 0])  # column 0 orders them all


def test_many_rows_compare_an_evenly_spaced_sample() -> None:
    n = copies.ORDER_ROWS * 3
    x = np.column_stack([np.arange(n, dtype=float), np.arange(n, dtype=float) % 7])
    sample = x[np.linspace(0, n - 1, copies.ORDER_ROWS).astype(np.int64)]
    np.testing.assert_allclose(order_sums(x, n), order_sums(sample, n))
    assert order_sums(x[:1], 1).tolist() == [0.0] * 6  # one row: no pair


def _pooled(fewer: dict, ordered: dict, own: list[float], p: int, cats: tuple = ()) -> np.ndarray:
    """:func:`order_sums`' sums from each pair's disorder (``fewer``, increasing pairs)."""
    upper = list(zip(*np.triu_indices(p, 1), strict=True))
    ords = [ordered.get(k, 0.9) for k in upper]
    return np.array(
        [o - 2 * fewer.get(k, 0.3) for k, o in zip(upper, ords, strict=True)]
        + ords
        + own
        + [o - 2 * f for c in cats for f, o in zip(c[0], c[1], strict=True)]
        + [v for c in cats for v in c[1]]
        + [v for c in cats for v in c[2]]
        + [0.3] * len(upper)  # the missing indicators: not in order
        + [0.9] * len(upper)
    )


def test_representatives_keep_the_finest_column_of_those_alike() -> None:
    # Columns 0..4 (features 0, 2, 3, 5, 6): 0 a flag of 1 (ordering few pairs), 2 a
    # negated copy of 1, 3 alike with 2 but not with 1, 4 alike with 0 on no ordered pair.
    near = copies.COPY_MERGE / 2  # a copy's few discordant pairs (ties broken otherwise)
    fewer = {(0, 1): 0.0, (1, 2): near, (0, 2): 0.0, (2, 3): near, (1, 3): 0.2, (0, 4): 0.0}
    ordered = {(0, 1): 0.5, (1, 2): 1.0, (0, 2): 0.5, (2, 3): 1.0, (1, 3): 1.0, (0, 4): 0.0}
    own = [0.5, 1.0, 0.99, 1.0, 1.0]
    feats = np.array([0, 2, 3, 5, 6])  # the grid's columns (1 and 4 categorical)
    rep = representatives(_pooled(fewer, ordered, own, 5), feats, 7)
    assert rep is not None
    assert rep.tolist() == [2, 1, 2, 2, 4, 5, 6]  # 3 (features[2]) and the flag as 2
    # Loosely in order (Kendall's tau 0.9, not a copy): each keeps its splits, and the two
    # are in order for nested_apart (candidates m rows apart at a node).
    loose = _pooled({(0, 1): 0.05}, {(0, 1): 1.0}, [1.0, 1.0], 2)
    assert representatives(loose, np.array([0, 1]), 2) is None
    in_order = nested_pairs(loose, np.array([0, 1]), 2, 0)
    assert in_order is not None and in_order[0].tolist() == [[0, 1], [1, 0]]
    loose = _pooled({(0, 1): 2 * copies.COPY_MERGE}, {(0, 1): 1.0}, [1.0, 1.0], 2)
    assert representatives(loose, np.array([0, 1]), 2) is None
    # Column 3 (feature 5) kept: it is alike with 2, not with the kept column 1.
    fewer[(0, 1)] = fewer[(1, 2)] = fewer[(0, 2)] = fewer[(2, 3)] = 0.3
    assert representatives(_pooled(fewer, ordered, own, 5), feats, 7) is None
    # Two one-hot columns of one category: disjoint, so in order (no concordant pair),
    # but neither explains the other's order (pairs one orders, the other ties): kept.
    one_hot = _pooled({(0, 1): 0.0}, {(0, 1): 0.25}, [0.5, 0.5], 2)
    assert representatives(one_hot, np.array([0, 1]), 2) is None
    flag = _pooled({(0, 1): 0.0}, {(0, 1): 0.5}, [1.0, 0.5], 2)  # 1 a flag of 0
    assert representatives(flag, np.array([0, 1]), 2).tolist() == [0, 0]
    # Categorical columns 1 and 4: 1 alike with columns 2 and 3 (features 3, 5: 3 the
    # finer, taken first), 4 with column 0 on no ordered pair (not alike).
    cats = (([0.3, 0.3, 0.02, 0.01, 0.3], [0.9] * 5, [0.9] * 5), ([0.0] * 5,) * 3)
    rep = representatives(_pooled(fewer, ordered, own, 5, cats), feats, 7, [1, 4])
    assert rep is not None and rep.tolist() == [0, 5, 2, 3, 4, 5, 6]


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


def test_pooled_sums_out_of_bounds_are_refused_naming_the_field() -> None:
    # Two numeric columns and one categorical: signed, ordered, own (2), then per
    # numeric column the categorical pair's signed (2), ordered (2) and own (2)...
    # ..., then the missing indicators' signed (1) and ordered (1).
    good = [-100.0, 100.0, 100.0, 0.0, 10.0, 0.0, 30.0, 0.0, 40.0, 0.0, -20.0, 20.0]
    check_order_sums(np.array(good), 2, 1, 100.0, 3)
    bad_ones = ((0, -100.1), (2, 100.5), (3, -1.0), (1, np.nan), (4, 30.5), (10, -20.5))
    for at, value in bad_ones:
        bad = np.array(good)
        bad[at] = value
        with pytest.raises(ValueError, match="'order_sums'.*some client"):
            check_order_sums(bad, 2, 1, 100.0, 3)


def test_a_client_refuses_a_malformed_list_of_categorical_columns() -> None:
    raw = {2: np.array(["a", "b"], dtype=object)}
    assert order_categories(raw, [2], "c")[0].tolist() == ["a", "b"]
    for bad in ([3], [True], "2", [2.0], None):
        with pytest.raises(ValueError, match="Client 'c1'.*order_sums"):
            order_categories(raw, bad, "Client 'c1'")


# ------------------------------------------------------------------------ the attack
class Seen(NamedTuple):
    """What an attack reads of a recorded fit, and the in-bag rows that count its finds."""

    values: np.ndarray  # the columns as the clients route them
    member: list  # per tree, each node's in-bag rows (the test knows them; the server not)
    numeric: dict  # Round B's candidates per (tree, node, feature)
    groups: dict  # Round B's category groups per (tree, node, feature)


def seen(fed: Any, model: Any, X: pd.DataFrame, h: np.ndarray, m: int) -> Seen:
    clients = [fed.clients[f"site{k}"] for k in np.unique(h)]
    w = _in_bag_weights(model, clients, h, len(model.trees_), model.random_state)
    V = client_values(fed, X, h)
    return Seen(V, _members(model, V, w), _releases(fed, model, m), _group_releases(fed, model, m))


def below(at: Seen, key: tuple, column: int) -> list[np.ndarray]:
    """A node's rows (``key``: tree, node) below each threshold released on ``column``."""
    r = at.member[key[0]][key[1]]
    return [at.values[r, column] <= e for e in at.numeric.get((*key, column), [])]


def unions(at: Seen, key: tuple, column: int) -> list[np.ndarray]:
    """A node's rows in each union of the category groups released on ``column``."""
    r = at.member[key[0]][key[1]]
    group_of = at.groups.get((*key, column))
    if group_of is None:
        return []
    names = np.unique(group_of)
    return [
        np.isin(at.values[r, column], np.flatnonzero(np.isin(group_of, list(u))))
        for k in range(1, names.size)
        for u in itertools.combinations(names, k)
    ]


def nested(sets_a: list, sets_b: list, m: int) -> tuple[int, int]:
    """Pairs of one set of each (or the complement of the second) that nest with 1 to
    ``m - 1`` rows between (the difference of their sums is a sum over those rows), and
    how many of them by one row (its exact target)."""
    small = alone = 0
    for a, b in itertools.product(sets_a, sets_b):
        for side in (b, ~b):
            ab, ba = int((a & ~side).sum()), int((side & ~a).sum())
            if min(ab, ba) == 0 and 0 < ab + ba < m:
                small += 1
                alone += ab + ba == 1
    return small, alone


def pair_exposure(at: Seen, a: int, b: int, m: int) -> tuple[int, int]:
    """:func:`nested` over every node that released both columns ``a`` and ``b``."""
    found = [
        nested(below(at, (t, nd), a), below(at, (t, nd), b), m) for t, nd, f in at.numeric if f == a
    ]
    return sum(f[0] for f in found), sum(f[1] for f in found)


def copy_exposure(fed: Any, model: Any, X: pd.DataFrame, h: np.ndarray, m: int) -> dict:
    """Per node, its releases on columns 0 and 1 whose row sets nest with 1 to ``m - 1``
    rows between (a decreasing copy's sums below are the column's above); and the rows
    alone."""
    small, alone = pair_exposure(seen(fed, model, X, h, m), 0, 1, m)
    return {"small": small, "alone": alone, "on_copy": _asked_on(fed, model, m, 1)}


def _asked_on(fed: Any, model: Any, m: int, column: int) -> int:
    """Round B pairs (node, feature) of ``column``."""
    return sum(f == column for _, _, _, f, _, _ in _round_b_pairs(fed, model, m))


def _quiet_fit(model: Any, X: pd.DataFrame, y: np.ndarray, h: np.ndarray) -> Any:
    """``_fit`` without the warnings of small federations (the recording federation)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _fit(model, X, y, h)


def _copy_fit(
    seed: int, transform: str, trees: int = 10, classifier: bool = False
) -> tuple[Any, ...]:
    """The red team's data with ``x1`` a transform of ``x0``; a classifier's labels are
    ``y``'s terciles (a nested difference of its sums gives a row's label)."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    X["x1"] = TRANSFORMS[transform](X["x0"].to_numpy())
    if classifier:
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    kind = ff.FedForestClassifier if classifier else ff.FedForestRegressor
    model = kind(n_estimators=trees, random_state=seed)
    fed = _quiet_fit(model, X, y, h)
    return fed, model, X, h


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_no_sum_on_a_copy_of_a_column_is_released(transform: str) -> None:
    fed, model, X, h = _copy_fit(0, transform)
    got = copy_exposure(fed, model, X, h, 10)
    assert got == {"small": 0, "alone": 0, "on_copy": 0}, got
    assert _asked_on(fed, model, 10, 0) > 0  # the column itself is fitted
    assert model.feature_importances_[1] == 0.0 < model.feature_importances_[0]


def test_a_classifiers_copy_is_fitted_as_its_column_and_gives_no_few_rows() -> None:
    fed, model, X, h = _copy_fit(1, "copy", classifier=True)
    assert copy_exposure(fed, model, X, h, 10) == {"small": 0, "alone": 0, "on_copy": 0}
    assert model.feature_importances_[1] == 0.0 < model.feature_importances_[0]


def test_the_classifiers_copy_attack_reads_labels_with_the_fix_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(copies, "COPY_DISORDER", -1.0)

    def attack(seed: int) -> dict:
        fed, model, X, h = _copy_fit(seed, "copy", classifier=True)
        return copy_exposure(fed, model, X, h, 10)

    assert_found_at_some_seed(attack, lambda got: got["alone"] > 0, [1, 0, 2])


def test_the_copy_attack_reads_targets_with_the_fix_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copies, "COPY_DISORDER", -1.0)  # no column is ever a copy

    def attack(seed: int) -> dict:
        fed, model, X, h = _copy_fit(seed, "copy")
        return copy_exposure(fed, model, X, h, 10)

    assert_found_at_some_seed(attack, lambda got: got["alone"] > 0, [0, 1, 2])


def _near_copy_fit(seed: int, sigma: float = 0.01) -> tuple[Any, ...]:
    """The red team's data with ``x1 = x0 + N(0, sigma^2)``: Kendall's tau about 0.996, a
    few hundred discordant pairs among the federation's, so not fitted as ``x0``."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    x0 = X["x0"].to_numpy()
    X["x1"] = x0 + np.random.default_rng(100 + seed).normal(0.0, sigma, x0.size)
    model = ff.FedForestRegressor(n_estimators=10, random_state=seed)
    fed = _quiet_fit(model, X, y, h)
    return fed, model, X, h


def test_a_near_copy_keeps_its_splits_and_gives_no_few_rows() -> None:
    """Merged, a column loosely in order with another lost its own splits (breast cancer's
    and digits' accuracy, docs/benchmarks-breadth.md); kept, its candidates stay m rows
    from the other's at each node, and no release nests with 1 to m - 1 rows between."""
    fed, model, X, h = _near_copy_fit(0)
    got = copy_exposure(fed, model, X, h, 10)
    assert got["small"] == 0 and got["alone"] == 0, got
    assert got["on_copy"] > 0 and model.feature_importances_[1] > 0.0  # fitted as given


def test_the_near_copy_attack_reads_targets_with_the_fix_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(copies, "COPY_DISORDER", -1.0)  # not in order: nothing kept apart

    def attack(seed: int) -> dict:
        return copy_exposure(*_near_copy_fit(seed), 10)

    assert_found_at_some_seed(attack, lambda got: got["alone"] > 0, [0, 1, 2])


def test_under_none_a_copy_is_fitted_as_before() -> None:
    X, y, h = _data(n_clients=4, n_rows=100, d=4, seed=0)
    X["x1"] = X["x0"]
    model = ff.FedForestRegressor(n_estimators=5, random_state=0, privacy="none")
    _quiet_fit(model, X, y, h)
    assert model.feature_importances_[1] > 0.0


# ------------------------------------------------------------- a column's bands
def band_exposure(fed: Any, model: Any, X: pd.DataFrame, h: np.ndarray, m: int) -> dict:
    """Per node, the releases on column 0 against every union of the released groups of
    the categorical column ``band`` (its bands): nested with 1 to ``m - 1`` rows between."""
    at = seen(fed, model, X, h, m)
    band = X.columns.get_loc("band")
    small = alone = asked = 0
    for t, nd, f in at.groups:
        if f == band:
            asked += 1
            got = nested(below(at, (t, nd), 0), unions(at, (t, nd), band), m)
            small, alone = small + got[0], alone + got[1]
    return {"small": small, "alone": alone, "asked": asked}


def _band_fit(seed: int) -> tuple[Any, ...]:
    X, y, h = _data(n_clients=10, n_rows=100, d=7, seed=seed)
    labels = np.array(["low", "mid", "high", "top"])
    X["band"] = pd.Categorical(labels[np.searchsorted([-1.0, 0.0, 1.0], X["x0"].to_numpy())])
    model = ff.FedForestRegressor(n_estimators=10, random_state=seed)
    fed = _quiet_fit(model, X, y, h)
    return fed, model, X, h


def test_a_categorical_column_of_a_columns_bands_is_fitted_as_the_column() -> None:
    fed, model, X, h = _band_fit(0)
    assert band_exposure(fed, model, X, h, 10) == {"small": 0, "alone": 0, "asked": 0}
    assert model.feature_importances_[X.columns.get_loc("band")] == 0.0


def test_the_band_attack_reads_targets_with_the_fix_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copies, "COPY_DISORDER", -1.0)

    def attack(seed: int) -> dict:
        fed, model, X, h = _band_fit(seed)
        return band_exposure(fed, model, X, h, 10)

    assert_found_at_some_seed(attack, lambda got: got["alone"] > 0, [0, 1, 2])


def test_a_category_unrelated_to_the_columns_is_fitted_as_given() -> None:
    X, y, h = _data(n_clients=10, n_rows=100, d=6, seed=0, categorical=True)
    model = ff.FedForestRegressor(n_estimators=5, random_state=0)
    fed = _quiet_fit(model, X, y, h)
    assert fed.rounds  # the ward column: a category effect on y, no column's bands
    assert model.feature_importances_[X.columns.get_loc("ward")] > 0.0


# -------------------------------------------------------------- one-hot columns
def onehot_exposure(fed: Any, model: Any, X: pd.DataFrame, h: np.ndarray, m: int) -> dict:
    """Per node, releases on two one-hot columns whose row sets nest with 1 to ``m - 1``
    rows between (disjoint columns: one's sums below are in the other's above)."""
    at = seen(fed, model, X, h, m)
    cols = [X.columns.get_loc(c) for c in X.columns if c.startswith("oh")]
    small = 0
    for t, nd, f in at.numeric:
        for g in cols:
            if f in cols and g > f:
                small += nested(below(at, (t, nd), f), below(at, (t, nd), g), m)[0]
    return {"small": small, "columns": [model.feature_importances_[c] > 0 for c in cols]}


def _onehot_fit(seed: int) -> tuple[Any, ...]:
    """A category of four levels (55/25/15/5 %) one-hot, with an effect on y."""
    X, y, h = _data(n_clients=10, n_rows=100, d=5, seed=seed)
    cat = np.random.default_rng(seed + 50).choice(4, size=len(X), p=[0.55, 0.25, 0.15, 0.05])
    for k in range(4):
        X[f"oh{k}"] = (cat == k).astype(float)
    model = ff.FedForestRegressor(n_estimators=10, random_state=seed)
    fed = _quiet_fit(model, X, y + 1.5 * (cat == 1) - (cat == 2) + 2 * (cat == 3), h)
    return fed, model, X, h


def test_one_hot_columns_are_fitted_as_given_and_give_no_few_rows() -> None:
    for seed in (0, 1):
        got = onehot_exposure(*_onehot_fit(seed), 10)
        assert got["small"] == 0, (seed, got)
        assert sum(got["columns"]) >= 3, got  # not merged: the categories' splits stay


def test_the_one_hot_attack_reads_few_rows_with_the_fix_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(secure_round_b, "nested_apart", lambda *a: np.zeros(a[2].size, bool))

    def attack(seed: int) -> dict:
        return onehot_exposure(*_onehot_fit(seed), 10)

    assert_found_at_some_seed(attack, lambda got: got["small"] > 0, [0, 1, 2, 3])


# ----------------------------------------------- a categorical column of another's
def test_a_clients_category_pairs_count_rows_equal_on_one_and_not_the_other() -> None:
    rng = np.random.default_rng(4)
    code = rng.choice(9, size=200)
    raw = [
        np.array([f"c{c}" for c in code], dtype=object),
        np.array([f"h{c // 3}" for c in code], dtype=object),  # a function of the first
        rng.choice(list("xyz"), size=200).astype(object),
    ]
    raw[1][:4] = None  # missing: a level of its own
    got = order_sums(np.zeros((200, 0)), 200, raw)
    assert got.shape == (12,)
    codes = [pd.factorize(pd.Series(r, dtype=object))[0] for r in raw]
    pairs = 200 * 199 / 2
    for k, (i, j) in enumerate([(0, 1), (0, 2), (1, 2)]):
        eq_i = codes[i][:, None] == codes[i][None, :]
        eq_j = codes[j][:, None] == codes[j][None, :]
        upper = np.triu(np.ones((200, 200), dtype=bool), 1)
        want = [(eq_i & ~eq_j & upper).sum(), (eq_i & upper).sum()]
        want += [(eq_j & ~eq_i & upper).sum(), (eq_j & upper).sum()]
        np.testing.assert_allclose(got[4 * k : 4 * k + 4], 200 * np.array(want) / pairs)
    assert 0 < got[0] < copies.COPY_UNEXPLAINED * got[1]  # a function of the code but for 4


def test_a_category_grouping_anothers_levels_is_never_asked_with_it_at_a_node() -> None:
    rng = np.random.default_rng(5)
    code = rng.choice(12, size=600)
    raw = [
        np.array([f"c{c}" for c in code], dtype=object),
        np.array([f"h{c // 4}" for c in code], dtype=object),
        rng.choice(list("xyz"), size=600).astype(object),
        np.array([f"id{i}" for i in range(600)], dtype=object),  # one row a level
    ]
    pooled = order_sums(np.zeros((600, 0)), 600, raw)
    exclusive = dependent_categories(pooled, 0, [1, 2, 4, 5], 6, 600.0, 1)
    assert exclusive is not None
    assert np.argwhere(exclusive).tolist() == [[1, 2], [2, 1]]  # not the identifiers
    # Slots drawing (2, 1, 0), (1, 4), (4, 2, 1): the later of 1 and 2 is dropped.
    off, feat = one_of_each(np.array([0, 3, 5, 8]), np.array([2, 1, 0, 1, 4, 4, 2, 1]), exclusive)
    assert off.tolist() == [0, 2, 4, 6] and feat.tolist() == [2, 0, 1, 4, 4, 2]
    assert dependent_categories(pooled[:0], 0, [], 6, 600.0, 1) is None


def catcat_exposure(fed: Any, model: Any, X: pd.DataFrame, h: np.ndarray, m: int) -> int:
    """Per node, unions of the released groups of ``code`` and of its ``chapter`` whose
    row sets nest with 1 to ``m - 1`` rows between."""
    at = seen(fed, model, X, h, m)
    a, b = X.columns.get_loc("code"), X.columns.get_loc("chapter")
    return sum(
        nested(unions(at, (t, nd), a), unions(at, (t, nd), b), m)[0]
        for t, nd, f in at.groups
        if f == a
    )


def _catcat_fit(seed: int) -> tuple[Any, ...]:
    X, y, h = _data(n_clients=10, n_rows=100, d=5, seed=seed)
    code = np.random.default_rng(seed + 9).choice(12, size=len(X))
    X["code"] = pd.Categorical([f"c{c}" for c in code])
    X["chapter"] = pd.Categorical([f"h{c // 4}" for c in code])
    model = ff.FedForestRegressor(n_estimators=10, random_state=seed)
    fed = _quiet_fit(model, X, y + 0.3 * code, h)
    return fed, model, X, h


def test_a_code_and_its_chapter_give_no_few_rows_at_a_node() -> None:
    fed, model, X, h = _catcat_fit(0)
    assert catcat_exposure(fed, model, X, h, 10) == 0
    imp = model.feature_importances_
    assert imp[X.columns.get_loc("code")] > 0 and imp[X.columns.get_loc("chapter")] >= 0


def test_the_code_and_chapter_attack_reads_few_rows_with_the_fix_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(grow_level, "one_of_each", lambda off, feat, _: (off, feat))

    def attack(seed: int) -> int:
        fed, model, X, h = _catcat_fit(seed)
        return catcat_exposure(fed, model, X, h, 10)

    assert_found_at_some_seed(attack, lambda got: got > 0, [0, 1, 2])


@pytest.mark.parametrize("seed", range(6))
def test_nested_apart_kernel_equals_its_numpy_twin(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d, n_pairs = 6, 40
    node = np.sort(rng.integers(0, 5, n_pairs)).astype(np.int64)
    feature = rng.integers(0, d, n_pairs).astype(np.int64)
    sizes = rng.integers(0, 6, n_pairs)
    cand_off = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    cand = rng.random(cand_off[-1])
    cand[rng.random(cand.size) < 0.15] = MISSING_SPLIT
    node_rows = rng.integers(20, 200, n_pairs).astype(np.float64)
    pair = np.repeat(np.arange(n_pairs), sizes)
    below = np.floor(rng.random(cand.size) * node_rows[pair])
    safe = rng.random(cand.size) < 0.9
    nested = []
    for _ in range(2):
        rel = np.zeros((d, d), dtype=np.int8)
        i, j = np.triu_indices(d, 1)
        pick = rng.random(i.size) < 0.4
        rel[i[pick], j[pick]] = rng.choice(np.array([-1, 1], dtype=np.int8), pick.sum())
        nested.append(rel + rel.T)
    args = (node, feature, cand, cand_off, below, node_rows, safe, tuple(nested), 10)
    got = nested_apart(*args)
    walk = copies._apart_walk(*args)
    assert walk is not None
    twin = np.zeros_like(got)
    copies._apart_kernel_numpy(*walk, twin)
    assert got.tolist() == twin.tolist()
    assert got.any() and not got.all()  # the draw exercises both outcomes
