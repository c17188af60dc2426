"""Data shapes a hospital or bank brings: the suite's attacks on them (issue 11, branch ``red5``).

The other attack tests run on Gaussian-like features and targets. Here the same attacks
run on integer and binary features, ties, duplicated rows, rounded and heavy-tailed
targets, very unequal clients (one of 5 rows; one of 8 rows all of one class, also under
``class_weight="balanced_subsample"``), features at 1e-9 and 3e9, a constant column, a
feature equal to the target, a row id, two and seven classes, ``class_weight="balanced"``
and a few large sample weights. For each fit under
``"secure"`` (the default), :func:`measure` takes:

- ``raw``: the share of rows with a feature value or target among the floats of any reply,
  and every reply array's dtype (``tests/test_privacy.py``);
- ``fewest``: the fewest rows of any sum the server decodes (node summaries, Round B
  intervals, category groups);
- ``small``, ``wrong``: model nodes whose distinct in-bag rows, from the clients' own set-ups
  (ground truth the server never sees, ``tests/test_privacy_counts.py``), number fewer
  than ``m``, and nodes whose row counts differ from them;
- ``differencing``: a node's sums against any ancestor's and partitions
  (``ancestor_exposure``), pairs that isolate 1 to ``m - 1`` rows;
- ``thr``: numeric splits whose threshold is a training value;
- ``individuals``: the share of rows whose exact target the node-value attack claims (from
  the model and from the decoded sums, ``tests/test_privacy_values.py``) where that
  target belongs to one individual (every row holding it has the same features): a
  rounded target's levels are claimed from pure nodes, but each is held by many people.

Two shapes give something: a row entered ``m`` times or more (the same patient at every
visit) and one huge target; both are limits of the floor, which counts rows, not rows
that differ (strict xfails below; docs/privacy.md, "Sums whose other rows are known").
``benchmarks/attack_shapes.py`` runs the same at the default 50 trees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from tests._attack_controls import assert_found_at_some_seed, rules_across_levels_off
from tests.test_privacy import (
    _fit,
    _in_bag_weights,
    ancestor_exposure,
    pooled_view,
    raw_value_exposure,
)
from tests.test_privacy_counts import _capture_in_bag, _nodes_against_ground_truth
from tests.test_privacy_model import thresholds_at_training_values
from tests.test_privacy_values import claimed_rows, node_values, pooled_values

Shape = tuple[pd.DataFrame, np.ndarray, np.ndarray, dict[str, Any]]


def _base(seed: int, sizes: list[int], d: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(sum(sizes), d)) + np.repeat(rng.normal(size=len(sizes)), sizes)[:, None]
    return X, np.repeat(np.arange(len(sizes)), sizes)


def _frame(X: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])


def _y(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return X[:, 0] + np.sin(2 * X[:, 1]) + rng.normal(scale=0.3, size=len(X))


def _rows(X: np.ndarray, y: np.ndarray, h: np.ndarray, rows: np.ndarray) -> Shape:
    return _frame(X[rows]), y[rows], h[rows], {}


def ordinal(seed: int, n: int = 100) -> Shape:
    """Age in years, a count 0-5, a binary flag, a 10 % flag, two Gaussians."""
    X, h = _base(seed, [n] * 10)
    rng = np.random.default_rng(seed + 1)
    X[:, 2] = rng.integers(18, 91, size=len(X))
    X[:, 3] = rng.poisson(1.5, size=len(X)).clip(0, 5)
    X[:, 4] = rng.integers(0, 2, size=len(X))
    X[:, 5] = (rng.random(len(X)) < 0.1).astype(float)
    y = _y(X, rng) + 0.02 * X[:, 2] + 0.5 * X[:, 3] + X[:, 4]
    return _frame(X), y, h, {}


def ties(seed: int, n: int = 100) -> Shape:
    """Every feature and the target rounded to one decimal: many ties."""
    X, h = _base(seed, [n] * 10)
    y = _y(X, np.random.default_rng(seed + 1))
    return _frame(np.round(X, 1)), np.round(y, 1), h, {}


def duplicated(seed: int, n: int = 100, copies: int = 2, share: float = 0.25) -> Shape:
    """A share of each client's rows entered ``copies`` times (the same patient)."""
    X, h = _base(seed, [n] * 10)
    y = _y(X, np.random.default_rng(seed + 1))
    again = np.flatnonzero(np.random.default_rng(seed + 2).random(len(y)) < share)
    rows = np.sort(np.concatenate([np.arange(len(y)), np.repeat(again, copies - 1)]))
    return _rows(X, y, h, rows)


def repeated(seed: int, n: int = 100, copies: int = 15, patients: int = 5) -> Shape:
    """A few rows entered ``copies`` times, ``m`` or more (a patient's identical visits)."""
    X, h = _base(seed, [n] * 10)
    y = _y(X, np.random.default_rng(seed + 1))
    again = np.random.default_rng(seed + 7).choice(len(y), patients, replace=False)
    rows = np.sort(np.concatenate([np.arange(len(y)), np.repeat(again, copies - 1)]))
    return _rows(X, y, h, rows)


def rounded_target(seed: int, n: int = 100) -> Shape:
    """An integer target of 5 distinct values (a score 0-4)."""
    X, h = _base(seed, [n] * 10)
    y = np.clip(np.round(_y(X, np.random.default_rng(seed + 1)) + 2), 0, 4)
    return _frame(X), y, h, {}


def heavy_tail(seed: int, n: int = 100, factor: float = 1000.0) -> Shape:
    """A lognormal cost, its largest value made ``factor`` times the next."""
    X, h = _base(seed, [n] * 10)
    rng = np.random.default_rng(seed + 1)
    y = np.exp(rng.normal(5 + 0.5 * X[:, 0], 1.0))
    y[int(np.argmax(y))] = factor * np.sort(y)[-2]
    return _frame(X), y, h, {}


def tiny_client(seed: int, n: int = 100) -> Shape:
    """A client of 5 rows among four of ``2.5 n``."""
    big = int(2.5 * n)
    X, h = _base(seed, [big, big, 5, big, big])
    return _frame(X), _y(X, np.random.default_rng(seed + 1)), h, {}


def tiny_client_one_class(seed: int, n: int = 100) -> Shape:
    """Classification: a client of 8 rows all of class 1 among four of ``2.5 n``."""
    big = int(2.5 * n)
    X, h = _base(seed, [big, big, 8, big, big])
    y = (_y(X, np.random.default_rng(seed + 1)) > 0.5).astype(int)
    y[h == 2] = 1
    return _frame(X), y, h, {"task": "classification"}


def tiny_client_subsample(seed: int, n: int = 100) -> Shape:
    """The same under ``class_weight="balanced_subsample"`` (each tree's class weights)."""
    X, y, h, kw = tiny_client_one_class(seed, n)
    return X, y, h, {**kw, "class_weight": "balanced_subsample"}


def scales(seed: int, n: int = 100) -> Shape:
    """Features at 1e-9 and about 3e9, a constant column, a feature equal to the target."""
    X, h = _base(seed, [n] * 10)
    y = _y(X, np.random.default_rng(seed + 1))
    X[:, 2] *= 1e-9
    X[:, 3] = X[:, 3] * 1e9 + 3e9
    X[:, 4] = 7.25
    X[:, 5] = y
    return _frame(X), y, h, {}


def row_id(seed: int, n: int = 100) -> Shape:
    """A feature that is the row's id (unique, increasing over the clients)."""
    X, h = _base(seed, [n] * 10)
    y = _y(X, np.random.default_rng(seed + 1))
    X[:, 5] = 100000 + np.arange(len(y))
    return _frame(X), y, h, {}


def binary_classes(seed: int, n: int = 100) -> Shape:
    """Two classes (one of 15 %), binary and integer features, ``class_weight="balanced"``."""
    X, h = _base(seed, [n] * 10)
    rng = np.random.default_rng(seed + 1)
    X[:, 2] = rng.integers(0, 2, size=len(X))
    X[:, 3] = rng.integers(0, 6, size=len(X))
    score = _y(X, rng) + X[:, 2]
    y = (score > np.quantile(score, 0.85)).astype(int)
    return _frame(X), y, h, {"task": "classification", "class_weight": "balanced"}


def many_classes(seed: int, n: int = 100) -> Shape:
    """Seven classes of unequal sizes (the smallest 2 %, fewer than ``m`` rows at any
    client: declared, as a secure fit asks)."""
    X, h = _base(seed, [n] * 10)
    score = _y(X, np.random.default_rng(seed + 1))
    y = np.digitize(score, np.quantile(score, [0.3, 0.55, 0.75, 0.88, 0.95, 0.98]))
    return _frame(X), y, h, {"task": "classification", "classes": list(range(7))}


def heavy_weights(seed: int, n: int = 100) -> Shape:
    """Regression, sample weights 1 but 2 % of the rows at 50."""
    X, h = _base(seed, [n] * 10)
    y = _y(X, np.random.default_rng(seed + 1))
    w = np.ones(len(y))
    w[np.random.default_rng(seed + 2).choice(len(y), len(y) // 50, replace=False)] = 50.0
    return _frame(X), y, h, {"sample_weight": w}


SHAPES: dict[str, Callable[..., Shape]] = {
    f.__name__: f
    for f in (
        ordinal,
        ties,
        duplicated,
        repeated,
        rounded_target,
        heavy_tail,
        tiny_client,
        tiny_client_one_class,
        tiny_client_subsample,
        scales,
        row_id,
        binary_classes,
        many_classes,
        heavy_weights,
    )
}
#: Shapes on which every attack below finds nothing (measured at 50 trees too).
NOTHING = [s for s in SHAPES if s not in ("repeated", "heavy_tail")]


def claimed_individuals(values: np.ndarray, X: pd.DataFrame, y: np.ndarray) -> float:
    """The share of rows whose exact target is claimed and belongs to one individual: every
    training row with that target has the same features (a lone row, or one row entered
    several times); a level many people share is not a row rebuilt."""
    hit = claimed_rows(values, y)
    V = X.to_numpy(dtype=np.float64)
    alone = np.zeros(len(y), dtype=bool)
    for value in np.unique(y[hit]):
        same = np.flatnonzero(y == value)
        alone[same] = bool(np.all(V[same] == V[same[0]]))
    return float((hit & alone).mean())


def measure(
    shape: str, seed: int, trees: int, n: int = 100, copies: int | None = None, **settings: Any
) -> dict[str, Any]:
    """One fit on ``shape``'s data (``copies``: ``repeated``'s), recorded, and what each
    attack finds (module docstring); ``settings`` go to the estimator."""
    data = SHAPES[shape]
    X, y, h, kw = data(seed, n) if copies is None else data(seed, n, copies=copies)
    kw = {**kw, **settings}
    task = kw.pop("task", "regression")
    weights = kw.pop("sample_weight", None)
    est = ff.FedForestClassifier if task == "classification" else ff.FedForestRegressor
    model = est(n_estimators=trees, random_state=seed, **kw)
    with pytest.MonkeyPatch.context() as mp:
        captured = _capture_in_bag(mp, draws_as_rows=False)
        fed = _fit(model, X, y, h, weights)
    m = model.min_aggregate_rows or max(10, 2 * model.min_samples_leaf)
    weighted = weights is not None or "class_weight" in kw
    arrays = [a for _, replies in fed.rounds for r in replies.values() for a in r.arrays.values()]
    out: dict[str, Any] = {"raw": raw_value_exposure(fed, X, y), "m": m}
    out["dtypes"] = sorted({a.dtype.str for a in arrays})
    if model.privacy == "none":
        return out
    n_classes = len(np.unique(y)) if task == "classification" else 0
    out["fewest"] = {k: float(v) for k, v in pooled_view(fed, n_classes, 1, weighted).items()}
    nodes, wrong, small = _nodes_against_ground_truth(model, X, h, captured)
    out |= {"nodes": nodes, "wrong": None if weighted else wrong, "small": len(small)}
    out["thr"] = thresholds_at_training_values(model, X)[0]
    clients = [fed.clients[f"site{k}"] for k in np.unique(h)]
    w = _in_bag_weights(model, clients, h, trees, seed)
    out["differencing"] = ancestor_exposure(fed, model, X, w, m)
    if task == "regression" and weights is None:
        found = np.concatenate([node_values(model), pooled_values(fed)])
        out["individuals"] = claimed_individuals(found, X, y)
    return out


@pytest.mark.parametrize("shape", NOTHING)
def test_the_attacks_find_nothing_on_this_shape(shape: str) -> None:
    """Three default secure trees on 10 clients x 60 rows (600 rows, 6 features)."""
    got = measure(shape, 0, trees=3, n=60)
    m = got["m"]
    assert got["raw"] == 0.0 and set(got["dtypes"]) <= {"<u8", "|u1"}, got
    assert min(got["fewest"].values()) >= m, got
    assert got["nodes"] > 50 and got["small"] == 0 and got["wrong"] in (0, None), got
    assert got["thr"] == 0, got
    assert got["differencing"] == {"parent": 0, "further": 0, "partition": 0, "rows": 0.0}, got
    assert got.get("individuals", 0.0) == 0.0, got


@pytest.mark.parametrize("shape", ["ordinal", "scales", "tiny_client_one_class", "row_id"])
def test_the_raw_value_attack_finds_these_shapes_under_none(shape: str) -> None:
    """The same data under ``"none"``: the replies carry the values (so the test can fail)."""
    got = measure(shape, 0, trees=3, n=60, privacy="none")
    assert got["raw"] > 0.9, got


def test_the_differencing_attack_finds_rows_on_integer_features_without_the_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the rules across levels off, the differencing attack isolates rows of the
    ordinal shape (ties at every level of an integer feature do not hide them)."""
    rules_across_levels_off(monkeypatch, partitions=True)
    assert_found_at_some_seed(
        lambda seed: measure("ordinal", seed, trees=3, n=60),
        lambda got: got["differencing"]["parent"] + got["differencing"]["further"] > 0,
        (0, 1, 2),
    )


def huge_target_error(seed: int, trees: int, factor: float = 1000.0) -> tuple[float, float]:
    """The huge target of ``heavy_tail``: the best relative error of ``E[y^2] / E[y]`` over
    the model's nodes and over the sums the server decodes (every node summary and Round B
    interval), against that target."""
    X, y, h, _ = heavy_tail(seed, 100, factor)
    model = ff.FedForestRegressor(n_estimators=trees, random_state=seed)
    fed = _fit(model, X, y, h)
    big = y.max()
    model_err = np.abs(node_values(model)[:, 0] / big - 1).min()
    pooled_err = np.abs(pooled_values(fed, whole=False)[:, 0] / big - 1).min()
    return float(model_err), float(pooled_err)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="limit: a row entered m times or more fills a node alone, whose mean and impurity "
    "are that row's target (docs/privacy.md, 'Sums whose other rows are known')",
)
def test_a_row_entered_m_times_keeps_its_target() -> None:
    """Five of 600 rows entered 25 times each (the same patient at every visit), 20
    default secure trees: measured 2026-12-04 (d13ea5a), 6.9 % of all rows' exact target
    claimed for one individual (two of the five; 3.5 % at data seed 2, none at seed 1).
    Data seed 2 since the node grids no denser than the rules need (2026-12-05): 3.5 % at
    seed 2, none at seeds 0, 1 and 3 (main 9d844cc before them: 3.5 % at 0, 2 and 3)."""
    got = measure("repeated", 2, 20, n=60, copies=25)
    assert got["small"] == 0 and min(got["fewest"].values()) >= got["m"]  # the floor holds
    assert got["individuals"] < 0.01, got


def test_a_floor_above_the_copies_keeps_the_repeated_rows_target() -> None:
    """The same fit with ``min_aggregate_rows=30``, more than the 25 copies: every node
    holds 30 distinct rows, so no node holds one person alone; the attack claims none."""
    got = measure("repeated", 0, 20, n=60, copies=25, min_aggregate_rows=30)
    assert got["m"] == 30 and got["small"] == 0 and min(got["fewest"].values()) >= 30, got
    assert got["individuals"] == 0.0, got


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="limit: a sum over m rows one of which is huge is about that row's target "
    "(docs/privacy.md, 'Sums whose other rows are known')",
)
def test_one_huge_target_stays_hidden() -> None:
    """A lognormal cost whose largest value is 1,000 times the next (10 clients x 100 rows,
    10 default secure trees): measured 2026-12-04 (d13ea5a), ``E[y^2] / E[y]`` of some
    decoded sum within 1.4e-4 of it at data seed 1 (the model's nodes: 3.4e-4; seeds 0 and
    2: 1.3e-4 and 4.3e-4); not exact to 1e-6, and a 1e4-fold value is refused (the fixed
    point's bound: its client's error)."""
    model_err, pooled_err = huge_target_error(1, 10)
    assert min(model_err, pooled_err) > 0.01, (model_err, pooled_err)
