"""Rows, draws and noise: what the released counts cover (branch ``red4``, docs/privacy.md).

- *Distinct rows, not draws.* A node of ``m`` bootstrap draws can hold fewer than ``m``
  rows (a row drawn three times). The minimum-rows rule counts a node's distinct in-bag
  rows (``STAT_ROWS``; the draws are the weight column). The test takes each client's
  in-bag rows and draws from its own set-up (ground truth the server never sees), routes
  them through the fitted trees and checks every node's ``n_node_samples`` and
  ``weighted_n_node_samples`` against them, and that no node covers fewer than ``m``
  distinct rows. With the clients counting every draw as a row (the protection off) the
  same check finds nodes of 3 to 9 distinct rows, so it can fail.
- *The fitted model adds no sum.* Every node's statistics rebuilt from the model
  (``value``, ``impurity``, ``weighted_n_node_samples``, ``n_node_samples``) equal its
  two children's added up: no difference of a parent and its children is a sum the
  rules did not see.
- *Under "dp" every whole count carries its noise.* Each of ``K`` clients adds a discrete
  Gaussian share of scale ``sigma / sqrt(K)``; below about 0.5 rows such a share is
  almost always 0. The targets' histogram (noise ``sigma / 20``) came out exact at
  epsilon 50 (measured: every one of its 160 bins equal to the data's). Every share of a
  whole count is now at least ``dp.MIN_SHARE`` rows; the recording server reads the
  noise it carries. And the noise does not follow the fit's ``random_state``: two fits
  with the same seed release different noisy sums (with each client's generator seeded
  from a constant and its name, the same).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.client import Client
from fedforest.federated.client_secure import SecureParty, target_grid
from fedforest.federated.privacy import dp
from fedforest.federated.privacy.dp import ASINH_CLIP, MIN_SHARE, TARGET_NOISE_RATIO
from fedforest.federated.privacy.grids import libm_arcsinh
from fedforest.federated.privacy.secagg import add_in_order, from_fixed
from fedforest.federated.protocol import GRID, Message
from tests.test_privacy import RecordingFederation, _data, _fit

M = 10  # min_aggregate_rows at the defaults (max(10, 2 * min_samples_leaf))


def _capture_in_bag(monkeypatch: pytest.MonkeyPatch, draws_as_rows: bool) -> dict:
    """Each client's in-bag rows and draws per tree, from its set-up (ground truth)."""
    captured: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    setup = Client._setup

    def recording_setup(self: Client, msg: Message) -> Any:
        fit = setup(self, msg)
        if draws_as_rows:  # the protection off: a row drawn c times is c rows
            w = np.rint(fit.w).astype(np.int64)
            bounds = zip(fit.tree_rows[:-1], fit.tree_rows[1:], strict=True)
            per_tree = [int(w[a:b].sum()) for a, b in bounds]
            fit.rows, fit.slot = np.repeat(fit.rows, w), np.repeat(fit.slot, w)
            fit.tree_rows = np.concatenate([[0], np.cumsum(per_tree)]).astype(np.int64)
            fit.w = np.ones(fit.rows.size)
        captured[self.name] = (fit.rows.copy(), fit.w.copy(), fit.tree_rows.copy())
        return fit

    monkeypatch.setattr(Client, "_setup", recording_setup)
    return captured


def _nodes_against_ground_truth(model, X, h, captured) -> tuple[int, int, list[int]]:
    """(nodes, nodes whose counts differ from the clients' rows, distinct rows of nodes < M)."""
    values = X.to_numpy(dtype=np.float64)
    first = {f"site{k}": int(np.flatnonzero(h == k)[0]) for k in np.unique(h)}
    nodes = wrong = 0
    small: list[int] = []
    for t, tree in enumerate(model.trees_):
        draws = np.zeros(len(values), dtype=np.int64)
        for name, (rows, w, tree_rows) in captured.items():
            lo, hi = tree_rows[t], tree_rows[t + 1]
            np.add.at(draws, rows[lo:hi] + first[name], np.rint(w[lo:hi]).astype(np.int64))
        members = {0: np.flatnonzero(draws)}
        for i in range(tree.children_left.size):  # parents come before their children
            left, right = tree.children_left[i], tree.children_right[i]
            if left >= 0:
                go = values[members[i], tree.feature[i]] <= tree.threshold[i]
                members[left], members[right] = members[i][go], members[i][~go]
        for i, rows in members.items():
            nodes += 1
            wrong += rows.size != tree.n_node_samples[i]
            wrong += int(draws[rows].sum()) != round(tree.weighted_n_node_samples[i])
            if rows.size < M:
                small.append(int(rows.size))
    return nodes, wrong, small


def test_every_node_covers_m_distinct_rows_not_only_m_draws(monkeypatch) -> None:
    """Measured 2026-12-04 (``benchmarks/attack_counts.py draws``, the paper's settings: 10
    clients x 200 rows x 20 features, 50 trees): 8,418 and 6,814 nodes (regression,
    classification), none under 10 distinct rows, every count the clients' own; counting
    draws as rows, 3,164 and 2,145 nodes of 3 to 9 distinct rows."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8)
    captured = _capture_in_bag(monkeypatch, draws_as_rows=False)
    model = ff.FedForestRegressor(n_estimators=5, random_state=0)
    _fit(model, X, y, h)
    nodes, wrong, small = _nodes_against_ground_truth(model, X, h, captured)
    assert nodes > 300 and wrong == 0 and small == []
    # Draws counted as rows: the rule then holds nodes to M draws, not M rows.
    captured = _capture_in_bag(monkeypatch, draws_as_rows=True)
    model = ff.FedForestRegressor(n_estimators=5, random_state=0)
    _fit(model, X, y, h)
    nodes, _, small = _nodes_against_ground_truth(model, X, h, captured)
    assert len(small) > 20 and min(small) < M // 2


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_the_fitted_model_adds_no_sum_to_the_releases(task: str) -> None:
    """A parent less its two children leaves nothing: rows exactly, sums to rounding."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8)
    est = ff.FedForestRegressor if task == "regression" else ff.FedForestClassifier
    target = y if task == "regression" else (y > np.median(y)).astype(int)
    model = est(n_estimators=5, random_state=0)
    _fit(model, X, target, h)
    inner_nodes = 0
    for tree in model.trees_:
        w = tree.weighted_n_node_samples
        v = tree.value.reshape(w.size, -1)
        sums = v * w[:, None]
        if task == "regression":  # sum w y and sum w y^2 from the mean and the variance
            sums = np.column_stack([sums, w * (tree.impurity + v[:, 0] ** 2)])
        stats = np.column_stack([tree.n_node_samples, w, sums])
        inner = np.flatnonzero(tree.children_left >= 0)
        inner_nodes += inner.size
        rest = stats[inner] - stats[tree.children_left[inner]] - stats[tree.children_right[inner]]
        assert np.all(rest[:, 0] == 0)
        scale = np.abs(stats[inner]).max(axis=0) + 1.0
        assert np.abs(rest / scale).max() < 1e-8
        assert tree.n_node_samples.min() >= M
    assert inner_nodes > 100


def _dp_fit(n_clients: int = 10, epsilon: float = 50.0):
    rng = np.random.default_rng(0)
    n = 140
    X = rng.normal(size=(n_clients * n, 4))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=X.shape[0])
    h = np.repeat(np.arange(n_clients), n)
    clients = [ff.Client(X[h == k], y[h == k], name=f"c{k}") for k in range(n_clients)]
    fed = RecordingFederation(ff.LocalFederation(clients))
    model = ff.FedForestRegressor(
        n_estimators=3, max_depth=3, max_features=2, privacy="dp", epsilon=epsilon, random_state=0
    ).fit_federated(fed)
    return fed, model, X, y


def _grid_releases(fed: RecordingFederation) -> tuple[np.ndarray, ...]:
    """The decoded targets' histogram, the second grid round's counts, edges and features."""
    y_hist = hist = edges = feats = None
    for requests, replies in fed.rounds:
        request = next(iter(requests.values()))
        if request.kind != GRID or not replies:
            continue
        first = next(iter(replies.values()))
        for name in ("y_hist", "hist"):
            if name in first.arrays:
                shape = first.arrays[name].shape
                total = add_in_order((m.arrays[name] for m in replies.values()), shape)
                if name == "y_hist":
                    y_hist = from_fixed(total, 0)[0]
                else:
                    hist, edges = from_fixed(total, 0), request.arrays["edges"]
                    feats = request.arrays["features"]
    assert y_hist is not None and hist is not None and edges is not None
    return y_hist, hist, edges, feats


def test_whole_counts_under_dp_carry_at_least_their_planned_noise() -> None:
    """Measured on main (fa3fe7f), this fit (10 clients, epsilon 50): the targets'
    histogram's planned noise 0.394 rows (shares of 0.125), 0 in all 160 bins; now about
    ``sqrt(10) MIN_SHARE`` = 3.2 rows. The grid round's counts (shares of 0.83 rows) had
    2.5 rows where 2.6 were planned."""
    fed, model, X, y = _dp_fit()
    plan = model.privacy_report_
    y_hist, hist, edges, feats = _grid_releases(fed)
    exact = np.histogram(np.clip(libm_arcsinh(y), -ASINH_CLIP, ASINH_CLIP), bins=target_grid())[0]
    noise = y_hist - exact
    assert plan["min_sigma"] == pytest.approx(MIN_SHARE * np.sqrt(10))
    # The trees' noise is the least that spends epsilon with the lifted noises.
    assert plan["sigma"] < 0.6 * plan["noise_multiplier"] * plan["sensitivity"]
    assert plan["epsilon_spent"] <= plan["epsilon"] * (1 + 1e-9)
    planned = plan["sigma"] / TARGET_NOISE_RATIO
    assert planned < 0.5  # the shares of this plan alone are almost always 0
    least = max(planned, MIN_SHARE * np.sqrt(10))
    assert np.count_nonzero(noise) > 100  # of 160 bins
    assert 0.7 * least < noise.std() < 1.5 * least
    columns = [np.sort(X[:, j]) for j in feats]
    counts = np.array(
        [np.searchsorted(c, e, side="right") for c, e in zip(columns, edges, strict=True)]
    )
    noise = hist - np.diff(counts, axis=1, prepend=0)
    assert noise.std() > 0.7 * max(plan["sigma"] / 3.0, MIN_SHARE * np.sqrt(10))


def test_the_noise_is_not_drawn_from_the_fits_random_state(monkeypatch) -> None:
    """Two fits with the same data and ``random_state`` release other noise: a server that
    picks the seed cannot recompute it. With every client's generator seeded from a
    constant and its name (what a seed-derived noise would be) both fits release the
    same sums."""
    first, second = (_grid_releases(_dp_fit()[0])[0] for _ in range(2))
    assert np.count_nonzero(first - second) > 100
    init = SecureParty.__init__

    def seeded(
        party: SecureParty, client: ff.Client, dp: bool = False, regression: bool = False
    ) -> None:
        init(party, client, dp, regression)
        party._rng = np.random.default_rng([0x5EED, zlib.crc32(client.name.encode())])

    monkeypatch.setattr(SecureParty, "__init__", seeded)
    first, second = (_grid_releases(_dp_fit()[0])[0] for _ in range(2))
    assert np.array_equal(first, second)


def test_where_the_least_share_lifts_a_noise_the_trees_noise_is_less_for_the_same_epsilon() -> None:
    """The composed Gaussian mechanism (squared sensitivity over squared noise, added up
    over the kinds, each with the noise it gets) has the multiplier epsilon asks for: the
    trees' noise falls where the targets' histogram's rose. With one client nothing is
    lifted and the plan is the unfloored one."""
    import dp_accounting

    entries, grid, target = 600, 16, 1
    lifted = dp.plan_noise(50.0, 1e-5, entries, grid, target, n_clients=10)
    assert lifted.target_sigma == pytest.approx(np.sqrt(10))
    assert lifted.target_sigma > lifted.sigma / TARGET_NOISE_RATIO
    assert lifted.sigma < lifted.noise_multiplier * lifted.sensitivity
    sigmas = [lifted.tree_sigma, lifted.grid_sigma, lifted.target_sigma]
    counts = [entries - grid - target, grid, target]
    mu = np.sqrt(sum(4.0 * c / s**2 for c, s in zip(counts, sigmas, strict=True)))
    assert dp_accounting.get_epsilon_gaussian(1.0 / mu, 1e-5) == pytest.approx(50.0, rel=1e-6)
    assert dp.spent_epsilon(lifted, entries, grid, target) == pytest.approx(50.0, rel=1e-6)
    # Fewer entries released (trees that stopped early) spend less.
    assert dp.spent_epsilon(lifted, entries // 2, grid, target) < 40.0
    alone = dp.plan_noise(5.0, 1e-5, entries, grid, target, n_clients=1)
    assert alone.min_sigma < alone.sigma / TARGET_NOISE_RATIO
    assert alone.sigma == alone.noise_multiplier * alone.sensitivity
    assert dp.spent_epsilon(alone, entries, grid, target) == 5.0
