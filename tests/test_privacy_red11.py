"""The eleventh red team on ``privacy="secure"`` (issue 11, branch ``red11``).

See docs/privacy-findings.md, "Red team 11". The server records everything (the suite's
``RecordingFederation`` around ``LocalFederation``, and each level's Round A as it decoded
it: ``tests/test_privacy_red8.record_round_a``).

*Found and fixed*: a level of an integer column that 1 to ``m - 1`` rows hold, between
levels many rows tie at (a score of 0-9 whose 5 one row holds). The grid rounds' coarse
counts show one row between the ties, and the root distribution spreads each tie's rows
evenly over its coarse bin, so node grids put edges just above the level below and just
below the level above: between them, only the rare level's rows. Each node's count there
is 0 or 1; red team 8's attack (follow the nodes whose count is 1, intersect the deepest
ones' boxes) singled the row out at 6 of 10 data seeds (2 rows at 2 more), 50 trees, with
its exact value (the level) known. The red team 8 fix bounded the grids only at a
column's ends; ``secure_setup.grid_gaps`` now keeps node grid edges off a group of fewer
than ``m`` rows beside an empty coarse bin inside a column, up to ``m`` rows of the
federation. *Open* (strict xfail): such a level among levels no empty coarse bin
separates (a score of 100 levels).

*Nothing found*: clients of 1 to 13 rows beside four of 250 under
``class_weight="balanced_subsample"``, Poisson and ``max_features=1``: red team 5's attacks
(raw values, decoded sums, model nodes against the clients' in-bag rows, differencing,
thresholds at training values).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
import tests.test_privacy_red8 as red8
from fedforest.federated.server import secure_setup
from tests import test_privacy_shapes as shapes
from tests.test_privacy import _data, _fit
from tests.test_privacy_red10 import deepest

M = 10  # min_aggregate_rows at the defaults


# --------------------------------------------------------------------------- interior level
def interior_level(
    seed: int, rows: int = 1, levels: int = 10, effect: float = 3.0
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """The suite's data (10 clients x 100 rows, 8 features and ``ward``) with ``x2`` an
    integer score ``0 .. levels - 1`` that moves the target by up to ``effect``, whose middle level
    (``levels // 2``) only ``rows`` rows of ``site3`` hold (the others' moved one level
    down). Returns X, y, the client ids and the marked rows."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed, categorical=True)
    rng = np.random.default_rng(seed + 7)
    score = rng.integers(0, levels, size=len(y)).astype(float)
    score[score == levels // 2] = levels // 2 - 1
    marked = rng.choice(np.flatnonzero(h == 3), size=rows, replace=False)
    score[marked] = levels // 2
    X["x2"] = score
    return X, y + (effect / levels) * score, h, marked


def count_of_level(level: float):  # noqa: ANN201
    """A pair's rows holding ``level`` of an integer column: between its grid's last edge
    in ``[level - 1, level)`` and its first in ``[level, level + 1)``, where no other value
    lies (the server knows the column is integer, as a schema says)."""

    def count(grid: np.ndarray, cum: np.ndarray, rows: float) -> float | None:
        below = np.flatnonzero((grid >= level - 1) & (grid < level))
        above = np.flatnonzero((grid >= level) & (grid < level + 1))
        if not below.size or not above.size:
            return None
        return float(cum[above[0], 0] - cum[below[-1], 0])

    return count


def level_exposure(
    monkeypatch,  # noqa: ANN001
    seed: int,
    n_trees: int,
    rows: int = 1,
    levels: int = 10,
    effect: float = 3.0,
) -> dict[str, Any]:
    """The attack on one default secure fit: trees with a node whose count of the level
    is 1, the training rows inside every deepest such node's box (1000: no box), and
    whether the marked rows are among them."""
    X, y, h, marked = interior_level(seed, rows, levels, effect)
    grids = red8.record_round_a(monkeypatch)
    model = ff.FedForestRegressor(n_estimators=n_trees, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _fit(model, X, y, h)
    held = red8.followed_nodes(model, grids, 2, count_of_level(float(levels // 2)))
    numeric = [f for f in range(X.shape[1]) if pd.api.types.is_float_dtype(X.dtypes.iloc[f])]
    values = X.iloc[:, numeric].to_numpy(dtype=np.float64)
    inside = np.ones(len(X), dtype=bool)
    for t, nd in deepest(model, held):
        lo, hi = red8._box(model.trees_[t], nd)
        for i, f in enumerate(numeric):
            inside &= (values[:, i] > lo.get(f, -np.inf)) & (values[:, i] <= hi.get(f, np.inf))
    marked_inside = bool(inside[marked].all())
    return {"followed": len(held), "inside": int(inside.sum()), "marked": marked_inside}


def gaps_off(monkeypatch) -> None:  # noqa: ANN001
    """The fix switched off (the control): no interval kept free of node grid edges."""
    monkeypatch.setattr(secure_setup, "grid_gaps", lambda *a: np.zeros((0, 2)))


def test_round_a_follows_an_interior_level_without_the_gaps(monkeypatch) -> None:  # noqa: ANN001
    """The control: without ``grid_gaps`` the nodes' counts follow the row holding the
    score's 5 down 20 of 50 trees at data seed 0, and the boxes hold it alone."""
    gaps_off(monkeypatch)
    got = level_exposure(monkeypatch, 0, 50)
    assert got["followed"] >= 10 and got["marked"], got
    assert got["inside"] == 1, got


@pytest.mark.parametrize("rows", [1, 3])
def test_a_level_few_rows_hold_inside_an_integer_column_is_not_followed(
    monkeypatch,  # noqa: ANN001
    rows: int,
) -> None:
    """With the fix no node's count of the level says 1 (data seeds 0 and 1, 50 trees:
    before it, one row alone in the boxes at both), so the boxes hold every row."""
    for seed in (0, 1):
        with monkeypatch.context() as patch:
            got = level_exposure(patch, seed, 50, rows)
        assert got == {"followed": 0, "inside": 1000, "marked": True}, (seed, got)


@pytest.mark.xfail(
    strict=True,
    reason="a score of 100 levels (about 10 rows each) that moves the target by up to 30, "
    "its 50 held by one row: coarse bins wider than a level hold it beside the levels next "
    "to it, with no empty bin, so grid_gaps cannot tell it apart and node grids keep edges "
    "between the levels; the count between them follows the row, alone in the boxes at "
    "data seeds 0, 2 and 3 (2 rows at 1 and 4), 50 trees (docs/privacy-findings.md, "
    "'Red team 11')",
)
def test_a_level_one_row_holds_among_many_levels_is_not_singled_out(monkeypatch) -> None:  # noqa: ANN001
    for seed in (0, 2):
        with monkeypatch.context() as patch:
            got = level_exposure(patch, seed, 50, levels=100, effect=30.0)
        assert got["marked"], got  # every box followed holds the row (a fix that follows
        # nothing passes: 1000 rows in the boxes)
        assert got["inside"] > 1, f"seed {seed}: the row alone"


def test_grid_gaps_keep_edges_off_a_group_apart_inside_a_column() -> None:
    """Hand-worked: 100 rows tie at 4, one row at 5, 100 at 6, 5 at 7.5, 100 at 9 (coarse
    edges every 0.5 from 3.5): the row at 5 lies beside the empty bin (4.5, 5], the 5 rows
    at 7.5 between two empty bins. No edge from the empty bins' tops until ``m`` rows:
    (4.5, 6.0) and (7.0, 9.0) (as many rows either way: upwards); the ends are
    ``grid_ends``'."""
    edges = np.arange(3.5, 10.01, 0.5)
    values = np.repeat([4.0, 5.0, 6.0, 7.5, 9.0], [100, 1, 100, 5, 100])
    cum = (values[None, :] <= edges[:, None]).sum(axis=1).astype(float)
    got = secure_setup.grid_gaps(edges, cum, float(values.size), M)
    assert got.tolist() == [[4.5, 6.0], [7.0, 9.0]]
    # With only the bin above empty, the group joins the rows below; else the fewer rows.
    values = np.repeat([4.0, 4.4, 6.0, 8.0], [100, 1, 100, 100])
    cum = (values[None, :] <= edges[:, None]).sum(axis=1).astype(float)
    assert secure_setup.grid_gaps(edges, cum, float(values.size), M).tolist() == [[3.5, 4.5]]
    values = np.repeat([4.0, 4.4, 6.0, 8.0], [100, 1, 20, 100])
    cum = (values[None, :] <= edges[:, None]).sum(axis=1).astype(float)
    assert secure_setup.grid_gaps(edges, cum, float(values.size), M).tolist() == [[4.0, 6.0]]
    # A group of m rows or more, or at the column's end, is not one.
    values = np.repeat([4.0, 5.0, 6.0], [100, 10, 100])
    cum = (values[None, :] <= edges[:, None]).sum(axis=1).astype(float)
    assert secure_setup.grid_gaps(edges, cum, float(values.size), M).shape == (0, 2)
    values = np.repeat([4.0, 6.0, 8.0], [1, 100, 100])
    cum = (values[None, :] <= edges[:, None]).sum(axis=1).astype(float)
    assert secure_setup.grid_gaps(edges, cum, float(values.size), M).shape == (0, 2)


# --------------------------------------------------------------------------- tiny clients
def tiny_clients(seed: int, n: int = 100, task: str = "regression", **kw: Any) -> shapes.Shape:
    """Clients of 1, 2, 3, 5, 8 and 13 rows beside four of ``2.5 n`` (6 features)."""
    big = int(2.5 * n)
    X, h = shapes._base(seed, [big, 1, 2, big, 3, 5, big, 8, 13, big])
    y = shapes._y(X, np.random.default_rng(seed + 1))
    if task == "classification":
        y = np.digitize(y, np.quantile(y, [0.4, 0.8]))
    elif kw.get("criterion") == "poisson":
        y = np.random.default_rng(seed + 2).poisson(np.exp(0.5 * np.tanh(y))).astype(float)
    return shapes._frame(X), y, h, {"task": task, **kw}


TINY = {
    "balanced_subsample": {"task": "classification", "class_weight": "balanced_subsample"},
    "poisson": {"criterion": "poisson"},
    "one_feature": {"max_features": 1},
}


@pytest.mark.parametrize("case", list(TINY))
def test_tiny_clients_beside_large_ones_give_nothing(monkeypatch, case: str) -> None:  # noqa: ANN001
    """Red team 5's attacks on three default secure trees: no raw value, no decoded sum
    and no model node under ``m`` rows, no differencing pair, no threshold at a value."""
    data = lambda s, n: tiny_clients(s, n, **TINY[case])  # noqa: E731
    monkeypatch.setitem(shapes.SHAPES, "tiny_clients", data)
    got = shapes.measure("tiny_clients", 0, trees=3, n=60)
    assert got["raw"] == 0.0 and set(got["dtypes"]) <= {"<u8", "|u1"}, got
    assert min(got["fewest"].values()) >= M, got
    assert got["nodes"] > 20 and got["small"] == 0 and got["wrong"] in (0, None), got
    assert got["thr"] == 0, got
    assert got["differencing"] == {"parent": 0, "further": 0, "partition": 0, "rows": 0.0}, got
    assert got.get("individuals", 0.0) == 0.0, got


def test_tiny_clients_under_none_give_their_values_away(monkeypatch) -> None:  # noqa: ANN001
    """The control: the same data under ``"none"`` put the rows' values in the replies."""
    monkeypatch.setitem(shapes.SHAPES, "tiny_clients", lambda s, n: tiny_clients(s, n))
    assert shapes.measure("tiny_clients", 0, trees=3, n=60, privacy="none")["raw"] > 0.9
