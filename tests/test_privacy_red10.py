"""The tenth red team on ``privacy="secure"`` (issue 11, branch ``red10``).

See docs/privacy-findings.md, "Red team 10". The tracer fix (branch ``tracer``: rare codes
merged, no missing edge for a column missing in 1 to ``m - 1`` rows, node grid edges kept
off a group of fewer than ``m`` rows at a feature's end) listed four cases it left
unmeasured. Each is measured here with red team 8's attack (``tests/test_privacy_red8.py``):
the server follows the nodes whose Round A count of the marked value is 1 and intersects
the boxes (path bounds) of the deepest such nodes.

Where several rows hold the marked value, a count of 1 is one of them; the attack here is
given the grouping (which marked row each followed node holds, from the data): an upper
bound on what the server could do, which must group the boxes itself.

- ``adjacent``: ``x2`` capped at 0 (half the rows tie there) and 1 to 3 rows of ``site3``
  holding small distinct values just above it, in the coarse bin beside the tie.
- ``two``: two columns (``ward`` and a second, ``unit``) each with a level one row holds,
  undeclared, in the same row or in two rows.
- ``warm``: a warm start (more trees) after a client's data changed so the code map
  differs: ``ward``'s declared level ``z`` held by 10 rows of ``site3`` in the first fit, by one of
  them in the second (the other nine back to ``a``), so merged in the second fit only.
- ``bucket``: a merged code of ``m`` rows: ``ward`` declared with ``z``, one row holding
  ``z`` and nine missing ``ward`` (the missing category, 9 rows): merged together (10 rows);
  a deep node's count of 1 is one of those ten.
- ``tail`` (beside the four, for ``adjacent``): ``x2`` as drawn, the row of its largest
  value followed by the nodes' edges between the two largest values.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
import tests.test_privacy_red8 as red8
from fedforest.federated.server import secure_setup
from tests._attack_controls import assert_found_at_some_seed
from tests.test_privacy import _data, _fit

CASES = ["adjacent", "two", "warm", "bucket", "tail"]


def deepest(model: Any, nodes: dict[int, list[tuple[int, int]]]) -> list[tuple[int, int]]:
    """The followed nodes none of whose descendants is followed: (tree, node)."""
    out = []
    for t, held in nodes.items():
        tree, parent = model.trees_[t], {}
        for i in range(tree.node_count):
            for c in (tree.children_left[i], tree.children_right[i]):
                if c >= 0:
                    parent[c] = i
        ancestors = set()
        for _, nd in held:
            while nd in parent:
                nd = parent[nd]
                ancestors.add(nd)
        out += [(t, nd) for _, nd in held if nd not in ancestors]
    return out


def _case_data(case: str, seed: int, k: int = 1):  # noqa: ANN202
    """The suite's data (10 clients x 100 rows, 8 features, ``ward``) with the case's
    marked rows: (X, y, h, marked rows, [(column, count function), ...], settings, second
    fit's X or None)."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed, categorical=True)
    rng = np.random.default_rng(seed + 100)
    site3 = np.flatnonzero(h == 3)
    settings: dict[str, Any] = {}
    second = None
    if case == "adjacent":
        rows = rng.choice(site3, size=k, replace=False)
        X["x2"] = np.minimum(X["x2"], 0.0)  # about half the rows tie at 0, the column's top
        values = 0.05 * (1 + np.arange(k))
        X.loc[rows, "x2"] = values
        counts = [(2, red8.count_above(float(values.min())))]
    elif case == "tail":  # no tie: the federation's largest x2, an ordinary tail
        x = X["x2"].to_numpy()
        top, second_top = np.sort(x)[-1], np.sort(x)[-2]
        rows = np.flatnonzero(x == top)

        def above(grid: np.ndarray, cum: np.ndarray, n: float) -> float | None:
            at = np.flatnonzero((grid >= second_top) & (grid < top))
            return n - cum[at[-1], 0] if at.size else None

        counts = [(2, above)]
    elif case == "two":  # k = 1: one row holds both levels; k = 2: one row each
        rows = rng.choice(site3, size=k, replace=False)
        X["unit"] = pd.Categorical(np.random.default_rng(seed + 7).choice(list("pqrs"), len(X)))
        for col in ("ward", "unit"):
            X[col] = X[col].astype(object)
        X.loc[rows[0], "ward"] = "z"
        X.loc[rows[-1], "unit"] = "y"
        counts = [(8, red8.code_count(8)), (9, red8.code_count(4))]  # the missing codes
    elif case == "warm":
        rows = rng.choice(site3, size=10, replace=False)
        X["ward"] = X["ward"].astype(object)
        second = X.copy()
        X.loc[rows, "ward"] = "z"
        second.loc[rows[0], "ward"] = "z"
        second.loc[rows[1:], "ward"] = "a"
        rows = rows[:1]
        settings["categories"] = {"ward": list("abcdefghz")}  # one list in both fits
        counts = [(8, red8.code_count(8))]
    elif case == "bucket":
        rows = rng.choice(len(X), size=10, replace=False)
        X["ward"] = X["ward"].astype(object)
        X.loc[rows[0], "ward"] = "z"
        X.loc[rows[1:], "ward"] = np.nan
        settings["categories"] = {"ward": list("abcdefghz")}
        counts = [(8, red8.code_count(8)), (8, red8.code_count(9))]  # z, the missing one
    else:
        raise ValueError(case)
    return X, y, h, [int(r) for r in rows], counts, settings, second


def residual_exposure(
    monkeypatch,  # noqa: ANN001
    case: str,
    seed: int,
    n_trees: int,
    k: int = 1,
    fix_off: bool = False,
) -> dict[str, Any]:
    """The attack on one fit of ``case``: trees followed (a count of 1 of a marked value),
    and per marked row the training rows inside every deepest followed box that holds it
    (and no other marked row), 1000 where no box holds it; also the deepest followed boxes
    that hold no marked row (``wrong``: the count said 1 of another row) and the server's
    own grouping (:func:`grouped_claims`)."""
    if fix_off:
        red8.tracer_fix_off(monkeypatch)
    X, y, h, marked, counts, settings, second = _case_data(case, seed, k)
    ends: list[tuple[float, float]] = []
    grid_ends = secure_setup.grid_ends

    def seen(*a: Any) -> tuple[float, float]:
        out = grid_ends(*a)
        ends.append(out)
        return out

    monkeypatch.setattr(secure_setup, "grid_ends", seen)
    levels = red8.record_round_a(monkeypatch)
    model = ff.FedForestRegressor(n_estimators=n_trees, random_state=0, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the clients' own warnings of their rare levels
        _fit(model, X, y, h)
        grown = model
        if second is not None:  # the warm start on the changed data: its trees alone
            levels.clear()
            model.set_params(warm_start=True, n_estimators=2 * n_trees)
            _fit(model, second, y, h)
            X, grown = second, SimpleNamespace(trees_=model.trees_[n_trees:])
    numeric = [f for f in range(X.shape[1]) if pd.api.types.is_float_dtype(X.dtypes.iloc[f])]
    values = X.iloc[:, numeric].to_numpy(dtype=np.float64)
    boxes, bounds = [], []
    followed: set[int] = set()
    for j, count in counts:
        held = red8.followed_nodes(grown, levels, j, count)
        followed |= set(held)
        for t, nd in deepest(grown, held):
            lo, hi = red8._box(grown.trees_[t], nd)
            inside = np.ones(len(X), dtype=bool)
            for i, f in enumerate(numeric):
                inside &= (values[:, i] > lo.get(f, -np.inf)) & (values[:, i] <= hi.get(f, np.inf))
            boxes.append(inside)
            bounds.append((int(grown.trees_[t].n_node_samples[nd]), lo, hi))
    alone = {}
    for r in marked:
        mine = [b for b in boxes if b[r] and not any(b[o] for o in marked if o != r)]
        alone[r] = int(np.logical_and.reduce(mine).sum()) if mine else len(X)
    claims = grouped_claims(bounds, numeric, values, marked)
    return {
        "followed": len(followed),
        "wrong": sum(not b[marked].any() for b in boxes),
        "alone": alone,
        "claims": claims,
        "ends": ends[2] if len(ends) > 2 else None,
    }


def grouped_claims(
    bounds: list[tuple[int, dict[int, float], dict[int, float]]],
    numeric: list[int],
    values: np.ndarray,
    marked: list[int],
) -> tuple[int, int]:
    """The server's own grouping of the followed boxes, without the data: smallest node
    first, each box joins the first group whose intersection it meets (a region of
    positive width in every bounded feature), else starts one. Returns (groups of two
    boxes or more whose intersection holds one training row, a marked one; those whose
    one row is not marked)."""
    groups: list[list[Any]] = []
    for _, lo, hi in sorted(bounds, key=lambda b: b[0]):
        for g in groups:
            a = {f: max(g[0].get(f, -np.inf), lo.get(f, -np.inf)) for f in numeric}
            b = {f: min(g[1].get(f, np.inf), hi.get(f, np.inf)) for f in numeric}
            if all(a[f] < b[f] for f in numeric):
                g[0], g[1], g[2] = a, b, g[2] + 1
                break
        else:
            groups.append([dict(lo), dict(hi), 1])
    right = wrong = 0
    for lo, hi, n in groups:
        if n < 2:
            continue
        inside = np.ones(len(values), dtype=bool)
        for i, f in enumerate(numeric):
            inside &= (values[:, i] > lo.get(f, -np.inf)) & (values[:, i] <= hi.get(f, np.inf))
        if inside.sum() == 1:
            right += int(np.flatnonzero(inside)[0] in marked)
            wrong += int(np.flatnonzero(inside)[0] not in marked)
    return right, wrong


# --------------------------------------------------------------------------- the four cases
@pytest.mark.xfail(
    strict=True,
    reason="a tie at a column's top (x2 capped at 0) with one row just above it, in the "
    "adjacent coarse bin: grid_ends cannot tell the tie from a tail and keeps node grid "
    "edges up to that bin's top, above the tie with the one row alone above them; Round A's "
    "count above them follows the row: alone in the boxes at data seeds 2 and 4 (and 2 "
    "rows at 0, 1, 3), 50 trees (docs/privacy-findings.md, 'Red team 10')",
)
def test_a_row_just_above_a_tie_in_the_adjacent_coarse_bin_is_not_singled_out(
    monkeypatch,  # noqa: ANN001
) -> None:
    for seed in (2, 4):
        with monkeypatch.context() as patch:
            out = residual_exposure(patch, "adjacent", seed, 50)
        assert out["wrong"] == 0  # every box followed holds the row (a fix that follows
        # nothing passes: no row alone, 1000 in the boxes)
        assert min(out["alone"].values()) > 1, f"seed {seed}: the row alone"


@pytest.mark.parametrize("k", [1, 2], ids=["same-row", "two-rows"])
def test_levels_one_row_holds_in_two_columns_are_not_followed(monkeypatch, k: int) -> None:  # noqa: ANN001
    """``ward`` and ``unit`` each with a level one row holds (the same row, or one row
    each): both merged, so no node's count of either says 1. The control, the fix
    switched off: the boxes hold one of the rows alone (seed 0 with one row, seed 1 with
    two; seeds 2 and 3 as well, 2026-12-05: the control reads them in turn), so the test
    can fail."""
    seed = k - 1
    out = residual_exposure(monkeypatch, "two", seed, 50, k)
    assert out["followed"] == 0 and set(out["alone"].values()) == {1000}

    def fix_off(s: int) -> dict[str, Any]:
        with monkeypatch.context() as patch:
            return residual_exposure(patch, "two", s, 50, k, fix_off=True)

    assert_found_at_some_seed(
        fix_off,
        lambda off: off["followed"] >= 20 and off["wrong"] == 0 and min(off["alone"].values()) == 1,
        (seed, 2, 3),
    )


def test_a_warm_start_after_the_code_map_changed_follows_nothing(monkeypatch) -> None:  # noqa: ANN001
    """``z`` held by 10 rows in the first fit (a code of its own), by one of them in the
    warm start's (merged there): the warm start's trees follow nothing. With the fix off
    they follow the row, alone in their boxes (seeds 0 to 2 alike, read in turn)."""
    out = residual_exposure(monkeypatch, "warm", 0, 50)
    assert out["followed"] == 0

    def fix_off(seed: int) -> dict[str, Any]:
        with monkeypatch.context() as patch:
            return residual_exposure(patch, "warm", seed, 50, fix_off=True)

    assert_found_at_some_seed(
        fix_off,
        lambda off: (
            off["followed"] >= 20
            and off["wrong"] == 0
            and off["alone"] == {int(next(iter(off["alone"]))): 1}
        ),
        (0, 1, 2),
    )


@pytest.mark.xfail(
    strict=True,
    reason="a merged code of m = 10 rows (a declared level one row holds with nine missing "
    "values): a deep node's count of 1 is one of the ten, and given which one (the grouping "
    "of the followed nodes) the boxes hold it alone for all ten rows at data seed 2 (6 to "
    "10 of the ten at seeds 0 to 4), fix on or off alike; the server's own greedy grouping "
    "found 1 row and claimed 3 wrong ones over seeds 0 to 4 (docs/privacy-findings.md, "
    "'Red team 10')",
)
def test_the_rows_of_a_merged_code_of_m_rows_are_not_singled_out(monkeypatch) -> None:  # noqa: ANN001
    out = residual_exposure(monkeypatch, "bucket", 2, 50)
    assert out["wrong"] == 0 and len(out["alone"]) == 10
    assert min(out["alone"].values()) > 1, "a row of the ten alone, given the grouping"
