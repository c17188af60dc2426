"""A categorical column whose levels each one client holds (a hospital's own wards).

Under ``privacy="secure"`` a node's category groups hold ``m`` rows each
(``privacy/rules.group_categories``): 12 levels of 10 rows, about 6 distinct rows of each
in a tree's bootstrap, form no two groups at any node. A root that drew only that column
(``max_features=1/3`` of 3 columns) was a leaf: the tree was one leaf (1 of 5 trees here;
the reviewer's data 3 of 5). The server sees it from Round A's pooled rows per code,
released anyway, and from them alone that no node below has two groups either; the
column then counts as constant there, and the node draws on at the next level as
scikit-learn draws past a constant feature (``constants.deferred_slots``). A column
whose codes hold fewer than ``m`` rows in the whole federation (the first grid round's
pooled rows per code) counts as constant from the roots (``rare_codes.groupless_columns``).
The tests named ``..._draws_on`` and ``..._as_a_constant_column`` failed at m30 (fc97cf4).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.federated.privacy.rules import group_categories
from fedforest.federated.protocol import ROUND_A
from fedforest.federated.server.rare_codes import groupless_columns
from fedforest.federated.server.secure_grids import SecureState, _with_parents_releases
from fedforest.federated.server.secure_segments import PairSegments
from tests._attack_union import all_claims, union
from tests.test_privacy import _fit, _passed_through


def site_data(
    n_clients: int, per_client: int, rows: int, seed: int = 0
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """``ward``: ``n_clients * per_client`` levels of ``rows`` rows, each level one client's."""
    rng = np.random.default_rng(seed)
    n_levels = n_clients * per_client
    level = np.repeat(np.arange(n_levels), rows)
    effect = np.random.default_rng(1000).normal(0, 2, n_levels)
    x1, x2 = rng.normal(size=level.size), rng.normal(size=level.size)
    y = effect[level] + x1 + 0.3 * rng.normal(size=level.size)
    names = [f"w{k}" for k in range(n_levels)]
    ward = pd.Categorical([names[k] for k in level], categories=names)
    return pd.DataFrame({"ward": ward, "x1": x1, "x2": x2}), y, level // per_client


def _single_leaf_trees(model: Any) -> int:
    return sum(t.feature.size == 1 for t in model.trees_)


@pytest.mark.parametrize(("n_clients", "per_client"), [(12, 1), (6, 2)])
def test_a_root_that_drew_only_a_site_column_draws_on(n_clients: int, per_client: int) -> None:
    X, y, h = site_data(n_clients, per_client, rows=10)
    model = ff.FedForestRegressor(n_estimators=5, random_state=0).fit(X, y, client_ids=h)
    assert model.privacy == "secure"
    # At m30 tree 4's root drew only "ward" and was the whole tree.
    assert _single_leaf_trees(model) == 0
    assert all(int(t.feature[0]) in (1, 2) for t in model.trees_)
    # "none" grows the same trees' roots from the same draws: the fifth splits on "ward".
    plain = ff.FedForestRegressor(n_estimators=5, random_state=0, privacy="none")
    assert int(plain.fit(X, y, client_ids=h).trees_[4].feature[0]) == 0


def test_a_site_column_of_levels_under_m_rows_grows_as_a_constant_column() -> None:
    """Declared levels of 8 rows each (< m = 10): the first grid round's pooled rows per
    code form no two groups, so no node can; the column is constant from the roots: never
    sent in a Round A, no node passed through, no tree a single leaf."""
    X, y, h = site_data(12, 1, rows=8)
    levels = list(X["ward"].cat.categories)
    model = ff.FedForestRegressor(n_estimators=5, random_state=0, categories={"ward": levels})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fed = _fit(model, X, y, h)
    assert _single_leaf_trees(model) == 0
    rounds_a = [next(iter(r.values())) for r, _ in fed.rounds]
    rounds_a = [a for a in rounds_a if a.kind == ROUND_A]
    assert len(rounds_a) > 2
    assert all(0 not in a.arrays["pair_feat"] for a in rounds_a)
    assert not any(_passed_through(a) for a in rounds_a)


def test_no_node_below_counts_that_form_no_groups_forms_two() -> None:
    """The rule the draws rely on: rows per code at most those of a node (or of the whole
    federation) whose counts form fewer than two groups form fewer than two groups too."""
    rng = np.random.default_rng(27)
    m, checked = 10, 0
    for _ in range(4000):
        upper = rng.integers(0, 3 * m, rng.integers(2, 9)).astype(np.float64)
        if (group_categories(upper, m) >= 0).any():
            continue
        checked += 1
        for _ in range(5):
            below = np.floor(upper * rng.random(upper.size))
            assert not (group_categories(below, m) >= 0).any(), (upper, below)
    assert checked > 100


def test_groupless_columns_reads_the_merged_codes() -> None:
    categories = {"0": ["a", "b", "c"], "1": ["a", "b", "c"], "2": ["a", "b", "c"]}
    counts = np.array([9.0, 9, 9, 30, 4, 5, 30, 30, 0])
    # column 1: "b" and "c" (4 and 5 rows) merged into "a": one code; column 2: two codes
    maps = {1: np.array([0, 0, 0])}
    assert groupless_columns(counts, [0, 1, 2], categories, maps, 10) == [0, 1]


def test_the_site_column_fit_gives_the_attacks_no_row() -> None:
    """The passed-through roots' second Round A (the same node summary, the drawn column's
    counts) and the splits below them: the suite's attacks, ward groups included."""
    X, y, h = site_data(6, 2, rows=10)
    model = ff.FedForestRegressor(n_estimators=5, random_state=0, min_samples_leaf=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fed = _fit(model, X, y, h)
    assert _single_leaf_trees(model) == 0
    claims = all_claims(fed, model, X, y, h)
    assert {k: int(t.sum()) for k, (t, _) in claims.items() if t.any()} == {}
    assert union(claims)["rebuilt"] == 0.0


def test_a_passed_through_slot_meets_its_parents_releases_as_a_parents() -> None:
    """The rules check a node's candidates against its parent's releases all and strictly
    (``near``), its further ancestors' only at their tails: a node passed through keeps
    its parent's releases as a parent's, copied to the slot it passed through."""
    d = 3
    state = SecureState(10, np.arange(d), [np.zeros(0)] * d, [np.zeros(0)] * d, *np.zeros((2, d)))
    # The level above: slot 0 released on feature 1 (two thresholds), slot 1 on feature 2.
    prev_values = np.array([[0.5, 30.0, 60.0], [0.9, 45.0, 60.0], [0.1, 20.0, 50.0]])
    prev = PairSegments(np.array([0 * d + 1, 1 * d + 2]), np.array([0, 2, 3]), prev_values)
    state.history = [(np.array([-1, -1]), prev, {})]
    # This level: slots 0 and 1 under slot 0, slot 2 under slot 1 (passed through below).
    state.parent = np.array([0, 0, 1])
    mine = np.array([[0.2, 10.0, 30.0]])
    state.released = PairSegments(np.array([0 * d + 1]), np.array([0, 1]), mine)
    out, copied = _with_parents_releases(state, np.array([2]), d)
    assert copied.tolist() == [2]  # the row of the parents' level it repeats
    seg = out.find(np.array([2 * d + 2, 2 * d + 1, 0 * d + 1, 1 * d + 2]))
    assert seg[1] == -1 and seg[3] == -1
    assert out.take(seg[:1])[1].tolist() == [[0.1, 20.0, 50.0]]
    assert out.take(seg[2:3])[1].tolist() == mine.tolist()
    # A root passed through has no parent: nothing to copy.
    state.parent = np.array([0, 0, -1])
    out, copied = _with_parents_releases(state, np.array([2]), d)
    assert out is state.released and copied.size == 0
