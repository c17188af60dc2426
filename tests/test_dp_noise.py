"""privacy="dp": the clients' noise shares are discrete Gaussians on the fixed-point grid."""

from __future__ import annotations

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.client_secure import SecureParty
from fedforest.federated.privacy.dp import discrete_gaussian
from fedforest.federated.protocol import ROUND_A, Message


@pytest.mark.parametrize("sigma", [0.4, 1.0, 2.5])
def test_discrete_gaussian_has_the_exact_probabilities(sigma: float) -> None:
    rng = np.random.default_rng(0)
    draws = discrete_gaussian(np.full(200_000, sigma), rng)
    assert draws.dtype == np.int64
    support = np.arange(-12, 13)
    pmf = np.exp(-(support**2) / (2 * sigma**2))
    pmf /= pmf.sum()
    freq = np.array([np.mean(draws == x) for x in support])
    # Each frequency within 5 standard errors of its probability (can fail: 25 cells).
    se = np.sqrt(pmf * (1 - pmf) / draws.size)
    assert np.all(np.abs(freq - pmf) <= 5 * se + 1e-12), (freq, pmf)


def test_discrete_gaussian_scale_and_zero() -> None:
    rng = np.random.default_rng(1)
    sigma = np.array([0.0, 3e6] * 20_000)
    draws = discrete_gaussian(sigma, rng)
    assert np.all(draws[::2] == 0)
    big = draws[1::2]
    assert abs(big.mean()) < 5 * 3e6 / np.sqrt(big.size)
    assert big.std() == pytest.approx(3e6, rel=0.02)


def test_a_clients_share_lies_on_the_fixed_point_grid() -> None:
    rng = np.random.default_rng(2)
    client = ff.Client(rng.normal(size=(50, 2)), rng.normal(size=50), name="a")
    party = SecureParty(client, dp=True)
    party.dp = {"sigma": 2.0}
    msg = Message(ROUND_A, {"secagg": {"peers": ["a", "b", "c", "d"]}})
    values = np.tile([[3.0, 0.3]], (20_000, 1))
    out = party.noisy(msg, values, [1.0, 1.0], frac_bits=np.array([0, 4]))
    noise = (out - values) * [1.0, 16.0]  # in grid units: counts, then 2^-4
    np.testing.assert_allclose(noise, np.round(noise), atol=1e-6)
    # A share of sigma / sqrt(4 clients) = 1 per entry (in the values' units).
    assert (out - values).std(axis=0) == pytest.approx([1.0, 1.0], rel=0.03)


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("n", [360, 3000])
def test_a_level_whose_only_candidates_are_category_sets_trains(task: str, n: int) -> None:
    # With one sampled feature per node, a categorical one leaves Round B without any
    # threshold interval: the noisy running sums of nothing must be nothing (on 360 rows
    # this crashed once).
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": pd.Categorical(rng.choice(list("pqrs"), n)), "b": rng.normal(size=n)})
    y = 3.0 * X["a"].cat.codes.to_numpy() + rng.normal(size=n)
    est = ff.FedForestRegressor if task == "regression" else ff.FedForestClassifier
    target = y if task == "regression" else (y > 4.5).astype(int)
    models = [
        est(
            n_estimators=3,
            max_depth=3,
            max_features=1,
            privacy="dp",
            epsilon=20.0,
            random_state=seed,
        ).fit(X, target, client_ids=np.repeat(np.arange(3), n // 3))
        for seed in range(3)
    ]
    for model in models:
        assert np.isfinite(model.predict(X).astype(float)).all()
    if n == 3000:  # enough rows for the budget: the category column is split on
        assert any(0 in t.feature for m in models for t in m.trees_)


@pytest.mark.parametrize("privacy", ["secure", "none"])
@pytest.mark.parametrize("budget", [{"epsilon": 1.0}, {"delta": 1e-6}])
def test_a_budget_without_dp_is_refused(privacy: str, budget: dict) -> None:
    # FedForestRegressor(epsilon=1.0) trained a forest without noise (privacy defaults to
    # "secure"), silently: the user asked for a differential-privacy budget.
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 2)), rng.normal(size=60)
    est = ff.FedForestRegressor(n_estimators=2, privacy=privacy, **budget)
    with pytest.raises(ValueError, match=f'used only under privacy="dp"; privacy="{privacy}"'):
        est.fit(X, y)
    assert not hasattr(est, "trees_")
    clients = [ff.Client(X[:30], y[:30], name="a"), ff.Client(X[30:], y[30:], name="b")]
    with pytest.raises(ValueError, match="is a privacy budget"):
        est.fit_federated(ff.LocalFederation(clients))
