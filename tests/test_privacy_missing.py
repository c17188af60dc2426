"""Differencing across levels with missing values (held as +inf by the clients).

A feature with missing values ends every node grid with ``MISSING_SPLIT``, whose count
leaves the missing rows out. The rules across levels counted a node's rows below an
ancestor's threshold above the node's path bound as all of its rows, missing ones too:
in a child that took a split's missing rows, the parent's "value known | missing" sum
(or a threshold above the split) less the child's sums isolated a few rows. Measured on
main before the fix (20 % of the values missing, 10 clients, the defaults): 9 to 61
isolating pairs with the parent, 1 to 14 further up, 0 to 34 partitions and 30 to 137
interval combinations per forest, 0.05 % to 0.36 % of the rows alone (the cases below
and three more shapes, regression and classification).
"""

from __future__ import annotations

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.privacy.rules import (
    MISSING_SPLIT,
    _rows_below,
    ancestor_safe,
    ancestor_safe_numpy,
)
from tests._attack_controls import assert_found_at_some_seed, rules_across_levels_off
from tests.test_privacy import (
    RecordingFederation,
    _data,
    _in_bag_weights,
    ancestor_exposure,
)
from tests.test_privacy_combinations import interval_exposure


def _attack(task: str, n_rows: int, d: int, n_trees: int, seed: int) -> dict[str, float]:
    X, y, h = _data(n_clients=10, n_rows=n_rows, d=d, seed=seed, missing=0.2)
    if task == "classification":
        y = (y > np.median(y)).astype(int)
    clients = [
        ff.Client(X[h == k].reset_index(drop=True), np.asarray(y)[h == k], f"site{k}")
        for k in np.unique(h)
    ]
    fed = RecordingFederation(ff.LocalFederation(clients))
    est = ff.FedForestClassifier if task == "classification" else ff.FedForestRegressor
    model = est(n_estimators=n_trees, random_state=seed).fit_federated(fed)
    w = _in_bag_weights(model, clients, h, n_trees, random_state=seed)
    held = X.fillna(np.inf)  # as the clients hold them: right of every finite candidate
    return {
        **ancestor_exposure(fed, model, held, w, 10),
        **interval_exposure(fed, model, held, w, 10),
    }


@pytest.mark.parametrize(
    ("task", "n_rows", "d", "n_trees", "seed"),
    [("regression", 100, 8, 10, 1), ("classification", 140, 12, 20, 3)],
)
def test_missing_values_isolate_no_row_across_levels(task, n_rows, d, n_trees, seed) -> None:
    got = _attack(task, n_rows, d, n_trees, seed)
    assert got == {"parent": 0, "further": 0, "partition": 0, "rows": 0.0, "combinations": 0}


def test_the_attack_finds_rows_with_missing_values_when_the_rules_are_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rules_across_levels_off(monkeypatch)
    assert_found_at_some_seed(
        lambda seed: _attack("regression", 100, 8, 10, seed),
        lambda got: got["parent"] > 0 and got["rows"] > 0,
        (1, 2, 3),
    )


def test_rows_above_the_path_bound_leave_the_missing_rows_out() -> None:
    """The count both rules take above a node's bound: its known rows, not all of them."""
    grid = np.array([-1.0, 0.0, 0.5, MISSING_SPLIT])
    rows = np.array([4.0, 9.0, 20.0, 25.0])  # 25 known rows; 40 with the missing ones
    lo, hi, total = -np.inf, 0.7, 40.0
    for x in (0.7, 3.0, MISSING_SPLIT):
        assert _rows_below(grid, rows, 0, grid.size, x, lo, hi, total) == 25.0
    assert _rows_below(grid[:3], rows[:3], 0, 3, 3.0, lo, hi, 20.0) == 20.0  # no missing
    # The kernel and its NumPy twin agree on such a pair (a parent's release at
    # MISSING_SPLIT and one above the bound; candidates of the node below them).
    cands, cand_off = np.array([-1.0, 0.0, 0.5]), np.array([0, 3])
    anc = np.array([[0.7, 30.0, 48.0, 1.0], [MISSING_SPLIT, 33.0, 48.0, 1.0]])
    outs = []
    columns = [np.ascontiguousarray(anc[:, j]) for j in range(4)]
    for fn in (ancestor_safe, ancestor_safe_numpy):
        out = np.zeros(3, dtype=bool)
        fn(
            cands, cand_off, grid, np.array([0, 4]), rows, *columns,
            np.array([0, 2]), np.array([lo]), np.array([hi]), np.array([total]), 10, out,
        )  # fmt: skip
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    # 0.5 leaves 5 of the node's known rows above it, under the parent's two releases.
    assert not outs[0][2]
