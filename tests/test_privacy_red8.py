"""The eighth red team on ``privacy="secure"`` (issue 11, branch ``red8``).

See docs/privacy-findings.md, "Red team 8".

*Found, fixed (branch ``tracer``)*: a value that one row of the federation holds was a
tracer. Round A releases, per node and sampled feature, pooled counts at every edge of the
node's grid: a categorical feature's grid is its codes (each code's rows in the node), and
a numeric feature with missing values ends with the edge "value known | missing" (the
node's known rows: its rows less it are its missing ones); a feature 0 in every row but
one had edges between 0 and that value (the node's rows less the count at the last of
them: the row holding it). Where a code (a declared level, or the missing category that a
rare undeclared level is sent as), a missing value or such a value belonged to one row,
the server followed that row down every tree that drew it (each node whose count says 1),
and the boxes of those nodes (their path bounds), intersected over the trees, held that
row alone among the training rows. Now codes held by 1 to ``m - 1`` rows are merged
before any Round A (``server/rare_codes.py``), a column missing in 1 to ``m - 1`` rows gets
no missing edge (``server/sparse_columns.py``), and node grids keep no edge with fewer than
``m`` rows of the federation on one side (``secure_grids._within``): the attack follows
nothing; with the three switched off it follows the row as before (the control). No value
was rebuilt exactly: the row was singled out, as a class one row holds is
(``tests/test_privacy_values.py``).

A sample weight is a tracer too, in the model alone: a tree draws as many times as there
are rows, so a node's ``weighted_n_node_samples`` less its rows' draws shows where a row
weighing 10 times the others is; its leaves' boxes hold it alone (a strict xfail: the
weights' band below leaves a 10-times weight as it is).

*Measured, fixed* (a limit the docs listed without a test): one row weighing 1e6 times the
others gave its target from the model's node means alone (the floor counts rows, not
their weight). Under ``"secure"`` the clients now trim their weights to within 10 times
the pooled geometric mean (``privacy/weight_band.py``): no claim, and with the band off
every heavy row's target again.

*Nothing found*: thresholds of the model, its file and its exports (``to_sklearn()``'s
and the ONNX exports' float32 thresholds, each the largest float32 at or below the
threshold) at a training value, on binary, low-cardinality, integer and site-constant
columns, small data and leaves of one row.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest._common import STAT_ROWS
from fedforest.federated.privacy import weight_band
from fedforest.federated.server import secure as secure_server
from fedforest.federated.server import secure_grids, secure_setup
from fedforest.federated.server.missing import MISSING_SPLIT
from fedforest.tree.export import float32_floor
from tests._attack_controls import assert_found_at_some_seed
from tests.test_privacy import _data, _fit, _match_rows
from tests.test_privacy_weights import _depths


# --------------------------------------------------------------------------- missing tracer
def _box(tree: Any, node: int) -> tuple[dict[int, float], dict[int, float]]:
    """The node's path bounds, per feature: ``lo < x <= hi`` (the server's, from the model)."""
    parent = {}
    for i in range(tree.node_count):
        for side, c in ((0, tree.children_left[i]), (1, tree.children_right[i])):
            if c >= 0:
                parent[c] = (i, side)
    lo: dict[int, float] = {}
    hi: dict[int, float] = {}
    while node in parent:
        node, side = parent[node]
        f, t = int(tree.feature[node]), float(tree.threshold[node])
        if side == 0:
            hi[f] = min(hi.get(f, np.inf), t)
        else:
            lo[f] = max(lo.get(f, -np.inf), t)
    return lo, hi


def record_round_a(monkeypatch) -> list[dict[str, np.ndarray]]:  # noqa: ANN001
    """Each level's Round A as the server decoded it, appended to the list returned: every
    node's pooled rows and the counts at every edge of its grid (the server's own view)."""
    levels: list[dict[str, np.ndarray]] = []
    round_a = secure_server.round_a

    def recorded(fed, ledger, cfg, ctx, header, arrays, n_slots, node_stats):  # noqa: ANN001, ANN202
        out = round_a(fed, ledger, cfg, ctx, header, arrays, n_slots, node_stats)
        levels.append(
            {
                "pair_off": arrays["pair_off"].copy(),
                "pair_feat": arrays["pair_feat"].copy(),
                "slot_tree_off": arrays["slot_tree_off"].copy(),
                "grid_off": out.grid_off.copy(),
                "grid": out.grid.copy(),
                "cum": out.cum.copy(),  # a scratch buffer reused at the next level
                "rows": out.pooled[:, STAT_ROWS].copy(),
            }
        )
        return out

    monkeypatch.setattr(secure_server, "round_a", recorded)
    return levels


def _tracer_fit(
    monkeypatch, seed: int, n_trees: int, tracer: str | None = "missing", **settings: Any
):  # noqa: ANN001, ANN201
    """A default secure fit of the suite's data (10 clients x 100 rows, 8 features, and its
    categorical ``ward`` of 8 levels) with one row of ``site3`` marked by ``tracer``:
    ``"missing"`` (its ``x2`` missing), ``"sparse"`` (``x2`` 0 in every other row),
    ``"declared"`` (its ``ward`` a level no other row holds, among the declared
    ``categories``), ``"rare"`` (the same level undeclared: its client sends it as the
    missing category), or None; and each level's Round A as the
    server decoded it (its own view: every node's pooled rows, the counts at every edge).

    Returns (X, the marked row, the model, the levels, the federation, the traced
    column, its count per pair).
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed, categorical=True)
    row = int(np.random.default_rng(seed + 100).choice(np.flatnonzero(h == 3)))
    j, count = 2, missing_count
    if tracer == "missing":
        X.iloc[row, 2] = np.nan
    elif tracer == "sparse":
        X["x2"] = 0.0
        X.loc[row, "x2"] = SPARSE
        count = count_above(SPARSE)
    elif tracer is not None:
        j, count = 8, code_count(8)  # "z": the declared list's ninth; else the missing one
        X["ward"] = X["ward"].astype(object)
        X.loc[row, "ward"] = "z"
        if tracer == "declared":
            settings["categories"] = {"ward": list("abcdefghz")}
    levels = record_round_a(monkeypatch)
    model = ff.FedForestRegressor(n_estimators=n_trees, random_state=0, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the client's own warning of its rare level
        fed = _fit(model, X, y, h)
    return X, row, model, levels, fed, j, count


def missing_count(grid: np.ndarray, cum: np.ndarray, rows: float) -> float | None:
    """A pair's rows missing its feature: the node's rows less the count at its grid's last
    edge, :data:`MISSING_SPLIT` (the node's known rows); None where there is no such edge."""
    return rows - cum[-1, 0] if grid.size and grid[-1] == MISSING_SPLIT else None


#: The one nonzero value of the sparse marker: the grid round's moments give it to 1e-15
#: (``tests/test_privacy_values.py::test_a_sparse_feature_keeps_its_one_value``).
SPARSE = 3.7


def count_above(value: float):  # noqa: ANN201
    """A pair's rows above its largest edge in ``[0, value)``: the rows holding ``value``
    where every other row holds 0; None where no edge lies there."""

    def count(grid: np.ndarray, cum: np.ndarray, rows: float) -> float | None:
        at = np.flatnonzero((grid >= 0.0) & (grid < value))
        return rows - cum[at[-1], 0] if at.size else None

    return count


def code_count(code: int):  # noqa: ANN201
    """A categorical pair's rows holding ``code``: its grid is its codes, the counts
    cumulative; a code beyond the last edge (the missing category) is the rest."""

    def count(grid: np.ndarray, cum: np.ndarray, rows: float) -> float | None:
        at = np.flatnonzero(grid == code)
        if at.size:
            return cum[at[0], 0] - (cum[at[0] - 1, 0] if at[0] else 0.0)
        return rows - cum[-1, 0] if grid.size and code > grid[-1] else None

    return count


def followed_nodes(model: Any, levels: list[dict[str, np.ndarray]], j: int, count, m: int = 10):  # noqa: ANN001
    """Per tree, the nodes in which ``count`` (the tracer's rows of a pair) says 1.

    A level's slots are matched to the model's nodes of that depth by their rows (as
    ``tests/test_privacy._round_b_pairs`` does); a level whose slots do not match is
    skipped for that tree.
    """
    depth = [_depths(tree) for tree in model.trees_]
    held: dict[int, list[tuple[int, int]]] = {}
    for level, lv in enumerate(levels):
        off = lv["slot_tree_off"]
        for t, tree in enumerate(model.trees_):
            nodes = [nd for nd, dd in sorted(depth[t].items()) if dd == level]
            sure = {nd for nd in nodes if tree.children_left[nd] >= 0}
            maybe = [nd for nd in nodes if nd in sure or tree.n_node_samples[nd] >= 2 * m]
            slots = _match_rows(maybe, sure, tree, lv["rows"][off[t] : off[t + 1]].astype(int))
            for s, nd in zip(range(off[t], off[t + 1]), slots or [], strict=False):
                for p in range(lv["pair_off"][s], lv["pair_off"][s + 1]):
                    if lv["pair_feat"][p] != j:
                        continue
                    g = slice(lv["grid_off"][p], lv["grid_off"][p + 1])
                    n = count(lv["grid"][g], lv["cum"][g], lv["rows"][s])
                    if n is not None and round(n) == 1:
                        held.setdefault(t, []).append((level, nd))
    return held


def rows_in_the_boxes(X: pd.DataFrame, model: Any, held: dict, j: int) -> np.ndarray:
    """The training rows inside every followed tree's deepest box (numeric features but
    ``j``: a set split's codes are left out, which can only keep more rows inside)."""
    numeric = [
        f for f in range(X.shape[1]) if f != j and pd.api.types.is_float_dtype(X.dtypes.iloc[f])
    ]
    inside = np.ones(len(X), dtype=bool)
    for t, nodes in held.items():
        lo, hi = _box(model.trees_[t], max(nodes)[1])
        for f in numeric:
            x = X.iloc[:, f].to_numpy(dtype=np.float64)
            inside &= (x > lo.get(f, -np.inf)) & (x <= hi.get(f, np.inf))
    return np.flatnonzero(inside)


def tracer_exposure(monkeypatch, seed: int, n_trees: int, tracer: str, **settings: Any):  # noqa: ANN001, ANN201
    """The attack on one fit: (trees followed, training rows in every box, whether the
    marked row is one of them, its numeric features bounded on both sides by the boxes)."""
    X, row, model, levels, _, j, count = _tracer_fit(monkeypatch, seed, n_trees, tracer, **settings)
    held = followed_nodes(model, levels, j, count)
    inside = rows_in_the_boxes(X, model, held, j)
    bounded = 0
    for f in range(X.shape[1]):
        if f != j and pd.api.types.is_float_dtype(X.dtypes.iloc[f]):
            boxes = [_box(model.trees_[t], max(nodes)[1]) for t, nodes in held.items()]
            lo = max((b[0].get(f, -np.inf) for b in boxes), default=-np.inf)
            hi = min((b[1].get(f, np.inf) for b in boxes), default=np.inf)
            bounded += bool(np.isfinite(lo) and np.isfinite(hi))
    return len(held), inside.size, bool(row in inside), bounded


TRACERS = ["missing", "sparse", "rare", "declared"]


def tracer_fix_off(monkeypatch) -> None:  # noqa: ANN001
    """The three parts of the fix switched off (the control): no code merged, a missing
    edge for any column with missing values, every quantile edge kept in the node grids."""
    known_enough = secure_setup.known_enough

    def every_missing_edge(*a):  # noqa: ANN002, ANN202
        keep, few = known_enough(*a)
        return keep, np.zeros_like(few)

    monkeypatch.setattr(secure_setup, "known_enough", every_missing_edge)
    monkeypatch.setattr(secure_setup, "code_maps", lambda *a: {})
    monkeypatch.setattr(secure_grids, "_within", lambda grid, off, *a: (grid, off))


@pytest.mark.parametrize("tracer", TRACERS)
def test_round_a_follows_a_row_that_one_count_marks_without_the_fix(
    monkeypatch, tracer: str
) -> None:
    """The control, with the fix switched off: Round A's counts follow the marked row down
    the trees that drew it, and every box followed holds it (the claims are right). The
    handshake names the missing column at ``site3`` alone, and names no rare level (the
    level rule holds: the row is followed all the same). Without a marked row no node is
    followed. The data seeds 2, 0 and 1 are read in turn until one follows the row."""

    def follow(seed: int) -> tuple[int, bool]:
        with monkeypatch.context() as patch:
            tracer_fix_off(patch)
            X, row, model, levels, fed, j, count = _tracer_fit(patch, seed, 30, tracer)
        handshake = fed.rounds[0][1]
        if tracer == "missing":
            named = {name: r.header.get("missing_features") for name, r in handshake.items()}
            assert named == {f"site{k}": ([2] if k == 3 else None) for k in range(10)}
        if tracer == "rare":
            assert all("z" not in str(r.header.get("categories")) for r in handshake.values())
        held = followed_nodes(model, levels, j, count)
        return len(held), row in rows_in_the_boxes(X, model, held, j)

    # Of 30 trees at least 10 followed (about 63 % drew the row; the column not always).
    assert_found_at_some_seed(follow, lambda got: got[0] >= 10 and got[1], (2, 0, 1))
    tracer_fix_off(monkeypatch)
    _, _, model, levels, *_ = _tracer_fit(monkeypatch, seed=2, n_trees=30, tracer=None)
    assert followed_nodes(model, levels, 2, missing_count) == {}
    assert followed_nodes(model, levels, 8, code_count(8)) == {}


@pytest.mark.parametrize("tracer", TRACERS)
def test_a_row_that_one_count_marks_is_not_followed(monkeypatch, tracer: str) -> None:
    """With the fix (as shipped) no node's count says 1 for the marked value, at data
    seeds 0 and 1 with the default 50 trees (before it: the row alone in the boxes at
    both seeds, for each of the four), so the boxes hold every training row. The merged
    code holds no row in any node; the set splits send it where its rows went."""
    for seed in (0, 1):
        followed, inside, _, _ = tracer_exposure(monkeypatch, seed, 50, tracer)
        assert followed == 0, f"seed {seed}: {followed} trees followed"
        assert inside == 1000


# --------------------------------------------------------------------------- heavy weights
def heavy_row_claims(model: Any, light: float = 5.0, share: float = 1e-3) -> list[float]:
    """Targets claimed from the model alone where one row holds nearly all of a node's weight.

    The server knows some client weighs its rows (the handshake's ``weighted``) and what an
    ordinary node weighs per row; here every other row of a node weighs at most ``light``
    (its draws times a weight of 1). A node whose rows could hold at most ``share`` of its
    ``weighted_n_node_samples`` besides one heavy row has about that row's target as its
    mean. Such means that recur in two trees or more to 1e-4 are one row's (a node of two
    heavy rows moves with their draws); of each group the mean of the node where the
    others' share is smallest is the claim.
    """
    found = []
    for t, tree in enumerate(model.trees_):
        bound = light * tree.n_node_samples / tree.weighted_n_node_samples
        for i in np.flatnonzero(bound < share):
            found.append((float(tree.value[i].ravel()[0]), float(bound[i]), t))
    found.sort()
    claims: list[float] = []
    group: list[tuple[float, float, int]] = []
    for value, bound, t in [*found, (np.inf, 0.0, -1)]:
        if group and value - group[-1][0] > 1e-4:
            if len({tree for _, _, tree in group}) > 1:
                claims.append(min(group, key=lambda g: g[1])[0])
            group = []
        group.append((value, bound, t))
    return claims


def heavy_weight_exposure(seed: int, weight: float, n_trees: int = 10) -> tuple[int, int]:
    """A default secure fit of the suite's data (10 clients x 100 rows, 8 features), one row
    per client (its eighth) weighing ``weight``, the others 1. Returns (training rows whose
    target a claim gives to 1e-4, the only row that close: of them, the heavy ones)."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    w = np.ones(len(y))
    heavy = np.arange(10) * 100 + 7
    w[heavy] = weight
    model = ff.FedForestRegressor(n_estimators=n_trees, random_state=0)
    _fit(model, X, y, h, sample_weight=w)
    rebuilt = set()
    for claim in heavy_row_claims(model):
        near = np.flatnonzero(np.abs(y - claim) < 1e-4)
        rebuilt.update(near.tolist() if near.size == 1 else [])
    return len(rebuilt), len(rebuilt & set(heavy.tolist()))


def test_the_heavy_weight_attack_claims_nothing_without_heavy_weights() -> None:
    """Weights of 1 and 1e3 (the light rows' share above 1e-3 in every node): no claim."""
    assert heavy_weight_exposure(seed=0, weight=1.0) == (0, 0)
    assert heavy_weight_exposure(seed=0, weight=1e3) == (0, 0)


def test_a_row_weighing_1e6_times_the_others_keeps_its_target(monkeypatch) -> None:  # noqa: ANN001
    """Under "secure" the clients trim their weights to within ``WEIGHT_RATIO`` of the
    pooled geometric mean (``privacy/weight_band.py``): one row per client weighing 1e6
    then weighs about 10 times the others, and no claim gives a target. With the band made
    unbounded (the weights as given) every heavy row's target comes back: the test can fail.
    """
    rebuilt, heavy = heavy_weight_exposure(seed=0, weight=1e6)
    assert (rebuilt, heavy) == (0, 0)
    monkeypatch.setattr(weight_band, "WEIGHT_RATIO", 1e100)  # the band off (as wide as can be)
    rebuilt, heavy = heavy_weight_exposure(seed=0, weight=1e6)
    assert rebuilt == heavy == 10  # every claim a heavy row's, all 10 of them


def heavy_leaves(model: Any, n_rows: int, weight: float) -> list[tuple[int, int]]:
    """Per tree that drew the one row weighing ``weight`` (the others 1), its leaf.

    From the model alone: a tree's draws number its rows (``n_rows``), so its root's
    ``weighted_n_node_samples`` less them is ``(weight - 1) c`` for the row's draws ``c``;
    a leaf's weight less its rows times the tree's draws per other row is about that where
    the row is and about 0 elsewhere (a few draws either way). The leaf of the largest
    excess, where no other leaf's reaches half of it.
    """
    out = []
    for t, tree in enumerate(model.trees_):
        w, n = tree.weighted_n_node_samples, tree.n_node_samples
        draws = round((w[0] - n_rows) / (weight - 1))
        if draws < 1:
            continue
        per_row = (w[0] - weight * draws) / (n[0] - 1)
        leaves = np.flatnonzero(tree.children_left < 0)
        excess = w[leaves] - per_row * n[leaves]
        first, second = np.argsort(excess)[::-1][:2]
        half = (weight - 1) * draws / 2
        if excess[first] > half > excess[second]:
            out.append((t, int(leaves[first])))
    return out


def weight_trace_exposure(seed: int, weight: float, n_trees: int = 50) -> tuple[int, int, bool]:
    """A default secure fit of the suite's data (10 clients x 100 rows, 8 features), row 317
    (at ``site3``) weighing ``weight``, the others 1. Returns (trees whose leaf of the row
    the model gives, training rows inside every such leaf's box, whether row 317 is)."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    w = np.ones(len(y))
    w[317] = weight
    model = ff.FedForestRegressor(n_estimators=n_trees, random_state=0)
    _fit(model, X, y, h, sample_weight=w)
    found = heavy_leaves(model, len(y), weight) if weight > 1 else []
    held = {t: [(0, leaf)] for t, leaf in found}
    inside = rows_in_the_boxes(X, model, held, j=-1)
    return len(found), inside.size, bool(317 in inside)


def test_the_model_follows_a_row_weighing_10_times_the_others() -> None:
    """From the model alone the leaves found hold the row (no wrong claim); with every
    weight 1 the roots weigh their rows and no leaf is found."""
    found, _, right = weight_trace_exposure(seed=2, weight=10.0)
    assert found >= 5 and right
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=2)
    model = ff.FedForestRegressor(n_estimators=10, random_state=0)
    _fit(model, X, y, h, sample_weight=np.ones(len(y)))
    assert all(t.weighted_n_node_samples[0] == len(y) for t in model.trees_)


@pytest.mark.xfail(
    strict=True,
    reason="a node's weighted_n_node_samples less its rows' draws shows where one row "
    "weighing 10 times the others is: the leaves it is in, from the model alone, hold that "
    "row alone at data seeds 0 and 1 (and 2 to 4), 50 trees; the server needs each node's "
    "exact weight and the weights' band keeps 10 times (docs/privacy-findings.md, "
    "'Red team 8', 'Sample weights under secure')",
)
def test_a_row_weighing_10_times_the_others_is_not_singled_out() -> None:
    for seed in (0, 1):
        _, inside, right = weight_trace_exposure(seed, 10.0)
        assert right  # the attack is right where it claims
        assert inside > 1, f"seed {seed}: the row alone among the training rows"


# --------------------------------------------------------------------------- thresholds
def _low_cardinality(seed: int, n_clients: int = 10, n: int = 60):
    """Binary flags (one rare), a count, ages, three levels, a column constant at one client,
    a normal feature, and flags at 1e-3 and 1e6 scales."""
    rng = np.random.default_rng(seed)
    size = n_clients * n
    h = np.repeat(np.arange(n_clients), n)
    X = pd.DataFrame(
        {
            "flag": rng.integers(0, 2, size).astype(float),
            "rare_flag": (rng.random(size) < 0.1).astype(float),
            "count": rng.poisson(1.0, size).astype(float),
            "age": rng.integers(18, 91, size).astype(float),
            "level": rng.integers(0, 3, size).astype(float),
            "site_constant": np.where(h == 3, 7.0, rng.normal(size=size)),
            "x": rng.normal(size=size),
            "small": rng.integers(0, 2, size) * 1e-3,
            "big": rng.integers(0, 4, size) * 1e6,
        }
    )
    y = X["flag"] + 0.1 * X["count"] + 0.02 * X["age"] + X["level"] + X["x"]
    return X, (y + rng.normal(scale=0.3, size=size)).to_numpy(), h


def thresholds_at_values(trees: list[Any], X: pd.DataFrame) -> tuple[int, int, int]:
    """(splits, thresholds at a training value, float32-floored ones at a training value)."""
    values = [np.unique(X.iloc[:, j].to_numpy(dtype=np.float64)) for j in range(X.shape[1])]
    splits = hits = hits32 = 0
    for tree in trees:
        inner = np.flatnonzero(tree.children_left >= 0)
        for i, t32 in zip(inner, float32_floor(tree.threshold[inner]), strict=True):
            column = values[int(tree.feature[i])]
            splits += 1
            hits += bool(np.isin(tree.threshold[i], column))
            hits32 += bool(np.isin(t32, column))
    return splits, hits, hits32


@pytest.mark.parametrize(
    ("estimator", "settings"),
    [
        (ff.FedForestRegressor, {}),
        (ff.FedForestRegressor, {"min_samples_leaf": 1, "max_depth": None}),
        (ff.FedForestClassifier, {"max_features": 1.0}),
    ],
    ids=["regression", "leaf-1", "classification-all-features"],
)
def test_no_threshold_or_export_is_a_value_of_a_low_cardinality_column(
    tmp_path, estimator, settings
) -> None:
    """Measured 2026-12-04 (5 trees, seeds 0 to 2, also 10 trees on 3 clients x 40 rows):
    0 of 97 to 141 splits per fit at a training value, in float64 or floored to float32
    (what ``to_sklearn()`` and the ONNX exports compare with). Under ``"none"`` every
    threshold is a sketch point, a row's value, so the test can fail."""
    X, y, h = _low_cardinality(seed=0)
    target = y if estimator is ff.FedForestRegressor else (y > np.median(y)).astype(int)
    model = estimator(n_estimators=5, random_state=0, **settings)
    _fit(model, X, target, h)
    splits, hits, hits32 = thresholds_at_values(model.trees_, X)
    assert splits > 50 and hits == hits32 == 0
    model.save(tmp_path / "m.ffm")
    assert thresholds_at_values(ff.load(tmp_path / "m.ffm").trees_, X) == (splits, 0, 0)
    exported = [e.tree_ for e in model.to_sklearn().estimators_]
    assert sum(int((t.children_left >= 0).sum()) for t in exported) == splits
    assert thresholds_at_values(exported, X)[1:] == (0, 0)
    none = estimator(n_estimators=5, random_state=0, privacy="none", **settings)
    _fit(none, X, target, h)
    splits, hits, _ = thresholds_at_values(none.trees_, X)
    assert hits == splits > 50
