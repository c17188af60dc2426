"""Hostile clients under privacy="dp": noisy counts no noise explains are refused.

Under "dp" the pooled sums carry Gaussian noise of a standard deviation the server chose,
so exact bounds do not hold, but a count more than ``NOISE_SIGMAS`` (10) deviations outside
what any rows give has a probability below 1e-22 for honest clients. Before, a saturated
masked word was post-processed like noise: in the targets' histogram it gave leaf values
of -38,520 for targets in [-3, 3] (the scale came out near 3e4), elsewhere single leaves.
Leaf values are also clipped to where the noisy histogram of asinh(y) shows the targets
(post-processing of a released sum: no privacy cost).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from fedforest import FedForestRegressor
from fedforest.federated.client import Client
from fedforest.federated.client_secure import target_grid
from fedforest.federated.protocol import GRID, OOB, ROUND_A, ROUND_B
from fedforest.federated.server.dp_checks import (
    NOISE_SIGMAS,
    check_noisy_counts,
    clip_leaf_values,
    target_range,
)
from fedforest.transport.local import LocalFederation
from fedforest.tree.arrays import Tree
from tests._lying import Lying

pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")


def _saturate(a: np.ndarray) -> None:
    a[...] = np.iinfo(np.uint64).max


def _shift(a: np.ndarray) -> None:
    a[...] += np.uint64(2**40)  # every masked word: the sum moves by 2^40 units


def _fit(kind: str, array: str, edit: Any, y_of: Any = None, **kw: Any) -> FedForestRegressor:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4))
    X[:, 3] = rng.integers(0, 5, size=3000)
    y = np.clip(X[:, 0] + 0.1 * rng.normal(size=3000), -3, 3) if y_of is None else y_of(X, rng)
    cat = {"categorical_features": [3]}
    clients = [
        Client(X[:1000], y[:1000], "c0", **cat),
        Lying(X[1000:2000], y[1000:2000], "c1", kind, lambda _, a: edit(a[array]), array, **cat),
        Client(X[2000:], y[2000:], "c2", **cat),
    ]
    params = {"n_estimators": 3, "max_depth": 3, "max_features": 1.0, "random_state": 0}
    params["categories"] = {3: [0.0, 1.0, 2.0, 3.0, 4.0]}  # declared under "dp"
    model = FedForestRegressor(privacy="dp", epsilon=50.0, **{**params, **kw})
    return model.fit_federated(LocalFederation(clients))


FIELDS = [
    (GRID, "y_hist", "the grid round's histogram of asinh\\(y\\)"),
    (GRID, "moments", "the grid round's moments of asinh\\(x\\)"),
    (GRID, "hist", "the second grid round's histograms"),
    (ROUND_A, "summary", "Round A's node summaries"),
    (ROUND_A, "hist", "Round A's histograms"),
    (ROUND_B, "left", "Round B's left statistics"),
    (ROUND_B, "group_stats", "Round B's category groups"),
    (OOB, "oob_sums", "the out-of-bag sums"),  # the score was NaN
]


@pytest.mark.parametrize("edit", [_saturate, _shift], ids=["saturated", "+2^40"])
@pytest.mark.parametrize(("kind", "array", "what"), FIELDS, ids=[f[1] for f in FIELDS])
def test_noisy_counts_no_noise_explains_are_refused(
    kind: str, array: str, what: str, edit: Any
) -> None:
    with pytest.raises(ValueError, match=f"noisy counts of {what}.*some client's reply is incon"):
        _fit(kind, array, edit, oob_score=kind == OOB)


def test_leaves_stay_within_the_targets_range() -> None:
    # Targets in [0, 1]: the noisy histogram of asinh(y) puts them in [0, sinh(1.0)] (its
    # bins are 0.25 wide). A client adding 2^40 to its masked sums of z (not to its row
    # counts, which are checked) pushed every mean to the clip, center + 2 scale, about
    # 1.24 here; the leaves now stay within the targets' range.
    def lie(a: np.ndarray) -> None:
        a[:, 2] += np.uint64(2**40)

    def uniform(X: np.ndarray, rng: Any) -> np.ndarray:
        return rng.uniform(0.0, 1.0, size=X.shape[0])

    model = _fit(ROUND_A, "summary", lie, uniform)
    values = np.concatenate([t.value.ravel() for t in model.trees_])
    assert values.min() >= 0.0 and values.max() <= math.sinh(1.0)
    assert values.max() > 1.0  # the lie is there, bounded by the range (it can fail)


def test_honest_dp_fit_passes_the_checks() -> None:
    model = _fit(ROUND_A, "summary", lambda a: None)
    X = np.random.default_rng(5).normal(size=(200, 4))
    X[:, 3] = 1
    assert np.all(np.abs(model.predict(X)) <= 3.7)  # sinh of the last bin edge over 3


def test_check_noisy_counts_bounds() -> None:
    sigma = 2.0
    k = NOISE_SIGMAS * sigma
    counts = np.array([-k + 0.5, 3.0, 100.0 + k - 0.5, 5.0])
    check_noisy_counts(counts, sigma, 100.0, "x")
    off = np.array([0, 2, 4])
    totals = (np.zeros(2), np.array([3.0 - k, 105.0]))
    check_noisy_counts(counts, sigma, 100.0, "x", off, totals)  # within sqrt(3) k
    for i, value in [(0, -k - 0.5), (2, 100.0 + k + 0.5), (1, np.nan)]:
        bad = counts.copy()
        bad[i] = value
        with pytest.raises(ValueError, match=f"noisy counts of x.*entry {i}"):
            check_noisy_counts(bad, sigma, 100.0, "x")
    with pytest.raises(ValueError, match="segment 1"):
        check_noisy_counts(counts, sigma, 100.0, "x", off, (np.zeros(2), np.array([0.0, 50.0])))


def test_target_range_and_leaf_clip() -> None:
    edges = target_grid()
    counts = np.zeros(edges.size - 1)
    at = np.searchsorted(edges, [0.0, 0.75])  # rows in [0, 0.25) and [0.75, 1.0) of asinh(y)
    counts[at] = [40.0, 30.0]
    counts[5] = 4.0  # below 4.37 deviations of the noise (sigma 1): noise
    lo, hi = target_range(counts, edges, 1.0)
    assert lo == 0.0 and hi == pytest.approx(math.sinh(1.0))
    assert target_range(np.zeros(edges.size - 1), edges, 1.0) == (-math.inf, math.inf)
    tree = Tree(
        feature=np.array([0, -2, -2], dtype=np.int32),
        threshold=np.array([0.0, -2.0, -2.0]),
        children_left=np.array([1, -1, -1], dtype=np.int32),
        children_right=np.array([2, -1, -1], dtype=np.int32),
        value=np.array([[0.5], [-3.0], [7.0]]),
        n_node_samples=np.array([20, 10, 10], dtype=np.int64),
        weighted_n_node_samples=np.array([20.0, 10.0, 10.0]),
        impurity=np.zeros(3),
    )
    clipped = clip_leaf_values(tree, np.array([lo]), np.array([hi]))
    np.testing.assert_allclose(clipped.value[:, 0], [0.5, 0.0, math.sinh(1.0)])
