"""Hostile clients under privacy="secure": pooled grid moments no data has are refused.

Secure aggregation hides which client sent what, so a lie is caught in the decoded sum:
the grid round's moments of asinh(x) and asinh(y) must count exactly the rows the
clients declared at the handshake (fewer only in a column with declared missing values)
and stay within what values of ``|asinh| <= asinh(max float)`` add up to. Before this
check a saturated masked word overflowed ``math.sinh`` (an ``OverflowError`` from deep in
the set-up) or silently set the grids, and a client lying about ``n_samples`` was never
noticed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.federated.client import Client
from fedforest.federated.privacy.secagg import MaskingKeys, valid_public_key
from fedforest.federated.protocol import GRID, HANDSHAKE, OOB, ROUND_A, ROUND_B
from fedforest.federated.server.checks import InvalidReply
from fedforest.federated.server.oob import check_pooled_oob
from fedforest.federated.server.secure_checks import (
    ASINH_MAX,
    check_pooled_cumulative,
    check_pooled_groups,
    check_pooled_moments,
    check_pooled_rows,
    check_rounds_agree,
)
from fedforest.transport.local import LocalFederation
from tests._lying import Lying

pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")


def _saturate(name: str) -> Any:
    def edit(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        arrays[name] = np.full_like(arrays[name], np.iinfo(np.uint64).max)

    return edit


def _claim_rows(n: int) -> Any:
    return lambda header, arrays: header.update(n_samples=n)


def _fit(task: str, kind: str, edit: Any, **kw: Any) -> Any:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(360, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=360)
    if task == "classification":
        y = (y > 0).astype(int)
    cls = FedForestClassifier if task == "classification" else FedForestRegressor
    clients = [
        Client(X[:120], y[:120], "c0"),
        Lying(X[120:240], y[120:240], "c1", kind, edit),
        Client(X[240:], y[240:], "c2"),
    ]
    params = {"n_estimators": 2, "max_depth": 2, "privacy": "secure", "random_state": 0, **kw}
    model = cls(**params)
    return model.fit_federated(LocalFederation(clients))


@pytest.mark.parametrize(
    ("task", "kind", "edit", "what"),
    [
        ("regression", GRID, _saturate("y_moments_lo"), "asinh\\(y\\)"),  # was OverflowError
        ("regression", GRID, _saturate("moments"), "asinh\\(x\\)"),  # was a silent forest
        ("regression", GRID, _saturate("y_moments"), "asinh\\(y\\)"),
        # was accepted; 1e30 is refused by the handshake's own check now (n_samples < 2^53)
        ("regression", HANDSHAKE, _claim_rows(10**15), "asinh\\(x\\)"),
        ("classification", HANDSHAKE, _claim_rows(10**6), "asinh\\(x\\)"),
        ("regression", HANDSHAKE, _claim_rows(0), "asinh\\(x\\)"),
    ],
    ids=["y_moments_lo", "moments", "y_moments", "rows 1e15", "rows 1e6", "rows 0"],
)
def test_pooled_moments_no_data_has_are_refused(task: str, kind: str, edit: Any, what: str) -> None:
    with pytest.raises(ValueError, match=f"pooled moments of {what}.*some client"):
        _fit(task, kind, edit)


def test_a_classifier_claiming_no_rows_is_refused_by_its_labels() -> None:
    # Under "secure" a client names only labels it holds in m rows: one claiming 0 rows
    # and naming a label lies in the handshake itself (before: caught by the moments).
    with pytest.raises(InvalidReply, match="'c1'.*'labels' names more than 0 labels"):
        _fit("classification", HANDSHAKE, _claim_rows(0))


def test_honest_moments_pass_and_each_bound_is_enforced() -> None:
    rng = np.random.default_rng(1)
    a = np.arcsinh(rng.normal(scale=100.0, size=(50, 3)))
    honest = np.array([[50.0, c.sum(), (c * c).sum()] for c in a.T])
    exact = np.ones(3, dtype=bool)
    check_pooled_moments(honest, 50.0, exact, "x")  # passes
    check_pooled_moments(honest, 60.0, ~exact, "x")  # missing values: fewer rows allowed
    extreme = np.array([[2.0, 2 * ASINH_MAX, 2 * ASINH_MAX**2]])  # two values at max float
    check_pooled_moments(extreme, 2.0, np.ones(1, dtype=bool), "x")
    for row, col, value in [
        (0, 0, 49.5),  # a fractional count
        (0, 0, 51.0),  # more rows than declared
        (1, 0, 40.0),  # fewer rows in a column without missing values
        (2, 1, ASINH_MAX * 50 * 1.01),  # a sum beyond asinh(max float) per row
        (2, 2, -1.0),  # a negative sum of squares
        (2, 2, ASINH_MAX**2 * 51),
        (0, 1, np.nan),
    ]:
        bad = honest.copy()
        bad[row, col] = value
        with pytest.raises(ValueError, match=f"row {row}: count"):
            check_pooled_moments(bad, 50.0, exact, "x")


# Out-of-bag sums: under "secure" a saturated masked word gave an accuracy of 1.56 (and an
# R^2 of 1.0); under "dp" (noisy sums, not checkable) an accuracy of 5e18.


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_pooled_oob_sums_no_rows_have_are_refused(task: str) -> None:
    with pytest.raises(ValueError, match="pooled out-of-bag sums.*some client lied"):
        _fit(task, OOB, _saturate("oob_sums"), oob_score=True)
    honest = _fit(task, OOB, lambda header, arrays: None, oob_score=True)
    assert np.isfinite(honest.oob_score_) and honest.oob_score_ <= 1.0


def _inflate_correct(rows: int) -> Any:
    def edit(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        arrays["oob_sums"][1:2] += np.uint64(rows)  # more correct rows (wraps: mod 2^64)

    return edit


def test_dp_oob_accuracy_stays_a_fraction() -> None:
    # 2^62 more correct rows: no noise explains it (tests/test_hostile_dp_sums.py), refused.
    dp = {"oob_score": True, "privacy": "dp", "epsilon": 5.0, "classes": [0, 1]}
    with pytest.raises(ValueError, match="noisy counts of the out-of-bag sums"):
        _fit("classification", OOB, _inflate_correct(2**62), **dp)
    # 200 more (within the 10 deviations of noise, 227 rows here): the noisy correct count
    # is cut at the scored count, so the accuracy stays a fraction.
    model = _fit("classification", OOB, _inflate_correct(200), **dp)
    assert 0.0 <= model.oob_score_ <= 1.0


def test_check_pooled_oob_bounds() -> None:
    check_pooled_oob(np.array([100.0, 80.0]), "classification", 100)
    check_pooled_oob(np.array([100.0, 5.0, -3.0, 40.0]), "regression", 100)  # sum y may be < 0
    for sums, task in [
        ([101.0, 80.0], "classification"),  # more scored than rows
        ([100.0, 101.0], "classification"),  # more correct than scored
        ([99.5, 80.0], "classification"),
        ([100.0, -0.5], "classification"),
        ([100.0, -1.0, 0.0, 40.0], "regression"),  # negative squared error
        ([100.0, 5.0, 0.0, -1.0], "regression"),  # negative sum of squares
        ([100.0, np.nan, 0.0, 1.0], "regression"),
    ]:
        with pytest.raises(ValueError, match="some client lied"):
            check_pooled_oob(np.array(sums), task, 100)


# Round A and B: a saturated summary or left statistic made negative or astronomic counts,
# and the trees single leaves (constant predictions), silently.
@pytest.mark.parametrize(("kind", "name"), [(ROUND_A, "summary"), (ROUND_B, "left")])
def test_pooled_statistics_no_rows_have_are_refused(kind: str, name: str) -> None:
    with pytest.raises(ValueError, match="pooled sums of Round [AB].*some client lied"):
        _fit("regression", kind, _saturate(name))


def test_check_pooled_rows_bounds() -> None:
    stats = np.array([[10.0, 10.0, 3.0, 5.0], [0.0, 0.0, 0.0, 0.0]])
    check_pooled_rows(stats, 10.0, "x")
    for col, value in [(0, 11.0), (0, -1.0), (0, 2.5), (1, -0.5), (2, np.inf)]:
        bad = stats.copy()
        bad[1, col] = value
        with pytest.raises(ValueError, match="row 1.*some client lied"):
            check_pooled_rows(bad, 10.0, "x")


# A low-order X25519 key (all zeros, or 1) made every *honest* client fail the grid round
# ("Error computing shared key"): the error named 'c0' and 'c2', and under "drop" they
# were dropped and the forest grown from the hostile client alone.
@pytest.mark.parametrize("low_order", [0, 1])
def test_low_order_public_key_is_refused_at_the_handshake(low_order: int) -> None:
    def edit(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        arrays["public_key"] = np.zeros(32, dtype=np.uint8)
        arrays["public_key"][0] = low_order

    with pytest.raises(ValueError, match=r"Client 'c1'.*handshake.*'public_key'.*X25519"):
        _fit("regression", HANDSHAKE, edit)
    kept = _fit("regression", HANDSHAKE, edit, on_client_failure="drop")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(360, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=360)
    others = FedForestRegressor(n_estimators=2, max_depth=2, random_state=0).fit_federated(
        LocalFederation([Client(X[:120], y[:120], "c0"), Client(X[240:], y[240:], "c2")])
    )
    np.testing.assert_array_equal(kept.predict(X), others.predict(X))


def test_valid_public_key() -> None:
    assert valid_public_key(MaskingKeys("a").public_bytes)
    assert not valid_public_key(bytes(32))
    assert not valid_public_key(b"\x01" + bytes(31))


# Round A's pooled histograms, the second grid round's and Round B's category groups: a
# saturated masked word (or a count a client added to its masked word) set the candidates,
# the grids and the minimum-rows rule, and the forest silently became single leaves (Round
# A: every prediction 0.00215; the grid round: the same). Round B's groups passed when each
# count stayed within the rows of all clients but beyond its node's.
def _add(name: str, index: int, value: int) -> Any:
    def edit(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        flat = arrays[name].reshape(-1)
        flat[index] = (int(flat[index]) + value) % 2**64  # on the masked word: the sum moves

    return edit


def _fit_categorical(
    task: str, kind: str, edit: Any, array: str, weights: bool = False, **kw: Any
) -> Any:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    X[:, 3] = rng.integers(0, 5, size=600)
    y = X[:, 0] + X[:, 3] + 0.1 * rng.normal(size=600)
    if task == "classification":
        y = (y > 1).astype(int)
    # Real-valued weights travel in fixed point, rounded by each client: the checks allow it.
    w = rng.uniform(0.1, 3.0, size=600) if weights else np.ones(600)
    cls = FedForestClassifier if task == "classification" else FedForestRegressor
    cat: dict[str, Any] = {"categorical_features": [3]}
    parts = [slice(0, 200), slice(200, 400), slice(400, 600)]
    if weights:
        cat = [{**cat, "sample_weight": w[p]} for p in parts]
    else:
        cat = [cat] * 3
    clients = [
        Client(X[parts[0]], y[parts[0]], "c0", **cat[0]),
        Lying(X[parts[1]], y[parts[1]], "c1", kind, edit, array, **cat[1]),
        Client(X[parts[2]], y[parts[2]], "c2", **cat[2]),
    ]
    params = {"n_estimators": 2, "max_depth": 3, "max_features": 1.0, "random_state": 0, **kw}
    return cls(**params).fit_federated(LocalFederation(clients))


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize(
    ("kind", "array", "edit", "what"),
    [
        (ROUND_A, "hist", _saturate("hist"), "pooled counts of Round A's histograms"),
        (ROUND_A, "hist", _add("hist", 0, 10**6), "pooled counts of Round A's histograms"),
        (ROUND_A, "hist", _add("hist", 0, -(10**6)), "pooled counts of Round A's histograms"),
        (GRID, "hist", _saturate("hist"), "pooled counts of the second grid round's"),
        (GRID, "hist", _add("hist", 3, 10**6), "pooled counts of the second grid round's"),
        (ROUND_B, "group_stats", _saturate("group_stats"), "pooled sums of Round B's category"),
        (ROUND_B, "group_stats", _add("group_stats", 0, 500), "pooled sums of Round B's category"),
    ],
    ids=["A sat", "A +1e6", "A -1e6", "grid sat", "grid +1e6", "groups sat", "groups +500"],
)
def test_pooled_histograms_and_groups_no_rows_have_are_refused(
    task: str, kind: str, array: str, edit: Any, what: str
) -> None:
    with pytest.raises(ValueError, match=f"{what}.*secure aggregation hides which"):
        _fit_categorical(task, kind, edit, array)


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("weights", [False, True], ids=["counts", "sample weights"])
def test_honest_histograms_and_groups_pass(task: str, weights: bool) -> None:
    honest = _fit_categorical(task, ROUND_B, lambda h, a: None, "group_stats", weights)
    assert any(t.set_size.sum() > 0 for t in honest.trees_)  # the groups were released
    assert all(t.feature.max() >= 0 for t in honest.trees_)  # and the trees split


def test_check_pooled_cumulative_bounds() -> None:
    cum = np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 4.0], [7.0, 9.0], [1.0, 1.0], [2.0, 2.0]])
    edges = np.array([0.0, 1.0, 1.0, 2.0, -5.0, 5.0])
    off = np.array([0, 4, 6])
    total = np.array([[7.0, 9.0], [2.0, 3.0]])
    check_pooled_cumulative(cum, off, edges, total, "x")
    check_pooled_cumulative(cum[:, 0].copy(), off, edges, total[:, 0].copy(), "x")  # rows only
    for i, col, value in [
        (1, 0, 2.5),  # a fractional count
        (1, 0, -1.0),  # a negative one
        (3, 0, 8.0),  # more rows than the node's
        (3, 1, 9.5),  # more weight than the node's
        (2, 0, 2.0),  # falling along increasing edges
        (5, 0, 0.0),  # in the second segment
        (0, 1, np.nan),
    ]:
        bad = cum.copy()
        bad[i, col] = value
        with pytest.raises(ValueError, match="pooled counts of x.*some client"):
            check_pooled_cumulative(bad, off, edges, total, "x")
    # Falling between segments is not a fall; rounding of weights within the tolerance passes.
    check_pooled_cumulative(cum[[3, 4]], np.array([0, 1, 2]), edges[[3, 4]], total, "x")
    soft = cum.copy()
    soft[3, 1] = 9.0 + 1e-8
    check_pooled_cumulative(soft, off, edges, total, "x", weight_tol=1e-7)


def test_check_pooled_groups_bounds() -> None:
    node_stats = np.array([[10.0, 12.0, 0.0, 0.0], [6.0, 6.0, 0.0, 0.0]])
    groups = np.array([[4.0, 5.0], [6.0, 7.0], [2.0, 2.0], [4.0, 4.0]])
    stats = np.column_stack([groups, np.zeros((4, 2))])
    node, pair = np.array([0, 0, 1, 1]), np.array([0, 0, 3, 3])
    check_pooled_groups(stats, node, pair, node_stats, "x")
    for i, col, value in [(0, 0, 5.0), (3, 1, 4.5), (1, 0, 11.0)]:
        bad = stats.copy()
        bad[i, col] = value
        with pytest.raises(ValueError, match="pooled sums of x.*some client"):
            check_pooled_groups(bad, node, pair, node_stats, "x")


# Round B against Round A: one row more in a left statistic or a category group, within
# every bound above, was accepted: the gains and the children's sizes then came from rows
# the minimum-rows rule never saw.
@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize(
    ("array", "what"),
    [("left", "Round B's left statistics"), ("group_stats", "Round B's category groups")],
)
@pytest.mark.parametrize("rows", [1, -1])
def test_round_b_rows_other_than_round_a_are_refused(
    task: str, array: str, what: str, rows: int
) -> None:
    # The first entry is a count (under sample weights or not: packed or not, it is first).
    edit = _add(array, 0, rows)
    with pytest.raises(ValueError, match=f"{what} count .* Round A's pooled counts give"):
        _fit_categorical(task, ROUND_B, edit, array)


def test_check_rounds_agree() -> None:
    check_rounds_agree(np.array([3.0, 7.0]), np.array([3.0, 7.0]), "x")
    check_rounds_agree(np.zeros(0), np.zeros(0), "x")
    with pytest.raises(ValueError, match="x count 8 rows at entry 1, where Round A's .* 7"):
        check_rounds_agree(np.array([3.0, 8.0]), np.array([3.0, 7.0]), "x")
