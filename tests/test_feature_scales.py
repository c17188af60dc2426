"""Secure grids for features of any scale: both signs and huge, timestamps, float64's ends.

Under "secure" a feature's root distribution is a coarse grid from the pooled moments of
``asinh(x)`` and the pooled counts on it. A feature of both signs and a huge scale
(``z * 1e100``) falls into two of its bins, each spanning orders of magnitude; a bin taken
as uniform in ``x`` then put every refined edge far above the rows (test R^2 near 0 where
``"none"`` has 0.98). A bin wider than ``WIDE_BIN`` in ``asinh(x)`` is now taken as uniform
in that scale. A feature whose spread the pooled moments cannot resolve (``1.7e9 + z``,
``(5 + z) * 1e-9``) gets a probe grid around its mean instead of one coarse bin
(docs/privacy.md, "Guarantees and their limits").
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.privacy.grids import (
    WIDE_BIN,
    libm_sinh,
    moment_grid,
    outer_bounds,
    quantile_grids,
    quantile_grids_numpy,
    unresolved,
    wide_bin,
)


def _rows(n: int, seed: int, transform):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 2))
    y = Z[:, 0] + 0.1 * rng.normal(size=n)
    return np.column_stack([transform(Z[:, 0]), Z[:, 1]]), y


@pytest.mark.parametrize(
    "transform",
    [
        lambda z: z * 1e100,
        lambda z: z * 1e300,  # mean +- 6 deviations of asinh(x) overflowed float64
        lambda z: 1.7e9 + 3e7 * z,  # epoch seconds over about two years
        lambda z: 1.7e9 + z,  # epoch seconds over seconds: the moments cannot resolve it
        lambda z: (5 + z) * 1e-9,  # nanometres, in metres
        lambda z: z * 1e-14,
    ],
    ids=["both signs 1e100", "both signs 1e300", "timestamps", "seconds", "nanometres", "1e-14"],
)
def test_secure_follows_features_of_any_scale_as_none_does(transform) -> None:
    # Before (main at 19a21fe): secure R^2 -0.04 at 1e100 and 1e300, -0.05 for seconds,
    # 0.63 for nanometres, 0.94 at 1e-14; 0.97 for timestamps; none 0.98.
    X, y = _rows(400, 0, transform)
    X_test, y_test = _rows(2000, 1, transform)
    score = {}
    for privacy in ("secure", "none"):
        model = ff.FedForestRegressor(
            n_estimators=10, max_features=None, random_state=0, privacy=privacy
        ).fit(X, y, client_ids=np.arange(400) % 2)
        score[privacy] = model.score(X_test, y_test)
    assert score["none"] > 0.95
    assert score["secure"] > score["none"] - 0.03, score


def _wide_sources(rng, n_src: int):
    """Sources whose bins span orders of magnitude of both signs (and some narrow ones)."""
    edges, e_off, mass, m_off = [], [0], [], [0]
    for _ in range(n_src):
        g = int(rng.integers(1, 12))
        u = np.sort(rng.uniform(-700, 700, size=g + 1))  # asinh(x) up to float64's end
        if rng.random() < 0.3:  # a narrow source: uniform in x, as before
            u = np.sort(rng.normal(size=g + 1))
        edges += list(np.sinh(u))
        mass += list(rng.integers(0, 5, size=g).astype(float))
        e_off.append(len(edges))
        m_off.append(len(mass))
    return np.array(edges), np.array(e_off), np.array(mass), np.array(m_off)


def test_quantile_kernel_matches_its_twin_in_wide_bins() -> None:
    rng = np.random.default_rng(11)
    n = 80
    edges, e_off, mass, m_off = _wide_sources(rng, n)
    lo = np.array([edges[e_off[q]] for q in range(n)])
    hi = np.array([edges[e_off[q + 1] - 1] for q in range(n)])
    cut = rng.random(n) < 0.5  # truncated to a narrower range inside
    lo[cut] = np.sinh(np.arcsinh(lo[cut]) + rng.uniform(0, 50, cut.sum()))
    hi = np.maximum(hi, lo)
    n_out = rng.integers(0, 12, size=n)
    shift = 1.0 - rng.random(n)
    off = np.zeros(n + 1, np.int64)
    np.cumsum(np.maximum(n_out - 1, 0), out=off[1:])
    a, b = np.empty(off[-1]), np.empty(off[-1])
    args = (edges, e_off, mass, m_off, lo, hi, n_out, shift, off)
    quantile_grids(*args, a)
    quantile_grids_numpy(*args, b)
    assert np.all(np.isfinite(a))
    # The twin sums the masses in another order: the same levels to a few ulps, the same
    # points to that relative error through sinh (a few ulps of asinh(x) up to 710).
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=0)
    for q in range(n):  # increasing inside [lo, hi]
        g = a[off[q] : off[q + 1]]
        assert np.all(np.diff(g) >= 0) and np.all((g >= lo[q]) & (g <= hi[q])), q


def test_a_wide_bin_spreads_its_quantiles_in_asinh_and_a_narrow_one_in_x() -> None:
    # One bin from 0 to sinh(8): its quartiles are sinh(2), sinh(4), sinh(6) (uniform in
    # x they were 373, 745 and 1118, all above sinh(6) = 202).
    for kernel in (quantile_grids, quantile_grids_numpy):
        out = np.empty(3)
        kernel(
            np.array([0.0, math.sinh(8.0)]), np.array([0, 2]), np.array([4.0]), np.array([0, 1]),
            np.array([0.0]), np.array([math.sinh(8.0)]), np.array([4]), np.array([1.0]),
            np.array([0, 3]), out,
        )  # fmt: skip
        np.testing.assert_allclose(out, np.sinh([2.0, 4.0, 6.0]), rtol=1e-12)
        # Truncated to [sinh(4), sinh(8)]: the mass left is half, its midpoint sinh(6).
        mid = np.empty(1)
        kernel(
            np.array([0.0, math.sinh(8.0)]), np.array([0, 2]), np.array([4.0]), np.array([0, 1]),
            np.array([math.sinh(4.0)]), np.array([math.sinh(8.0)]), np.array([2]),
            np.array([1.0]), np.array([0, 1]), mid,
        )  # fmt: skip
        np.testing.assert_allclose(mid, [math.sinh(6.0)], rtol=1e-12)
    # The rule: wider than WIDE_BIN in asinh(x), whatever the signs.
    assert not wide_bin(-1.0, 1.0) and not wide_bin(100.0, 100.0 * math.exp(WIDE_BIN) * 0.99)
    assert wide_bin(100.0, 100.0 * math.exp(WIDE_BIN) * 1.01)
    assert wide_bin(-1e100, -1e90) and wide_bin(-1e-3, 1e9) and not wide_bin(-1e90, -1e89)
    assert not wide_bin(-math.sinh(1.4), math.sinh(1.4)) and wide_bin(-5.0, 5.0)


def test_moment_grids_stay_finite_at_float64s_end() -> None:
    # z * 1e300: asinh(x) has a deviation near 690; mean +- 6 (or 8) of them overflowed
    # to infinite edges. They now end at the largest float64.
    big = np.finfo(np.float64).max
    n, s1, s2 = np.array([100.0, 100.0]), np.array([0.0, 5.0]), np.array([100 * 690.0**2, 30.0])
    grid = moment_grid(n, s1, s2, 9)
    lo, hi = outer_bounds(n, s1, s2)
    assert np.all(np.isfinite(grid)) and np.all(np.diff(grid, axis=1) >= 0)
    # sinh(asinh(big)) rounds a few ulps below big.
    assert grid[0, 0] < -0.999 * big and grid[0, -1] > 0.999 * big
    assert lo[0] < -0.999 * big and hi[0] > 0.999 * big
    # An ordinary feature's grid is what it was: sinh of mean +- 6 deviations.
    mean = 5.0 / 100.0
    std = np.sqrt(30.0 / 100.0 - mean**2)
    np.testing.assert_array_equal(grid[1], libm_sinh(mean + std * np.linspace(-6, 6, 9)))


def test_probe_grids_only_where_the_moments_cannot_resolve_the_spread() -> None:
    # Rows of asinh(x): an ordinary feature, 1e9 + z (spread 1e-9 of asinh: lost in the
    # difference of the sums), values near 1e-9 (their squares below the fixed point).
    rng = np.random.default_rng(3)
    z = rng.normal(size=500)
    cols = [z, 1e9 + z, (5 + z) * 1e-9]
    a = np.arcsinh(np.column_stack(cols))
    step = 2.0**-48
    n = np.full(3, 500.0)
    s1 = np.round(a.sum(axis=0) / step) * step  # the fixed point's sums
    s2 = np.round((a * a).sum(axis=0) / step) * step
    bad, floor = unresolved(n, s1, s2, step)
    assert bad.tolist() == [False, True, True]
    grid = moment_grid(n, s1, s2, 40, step)
    np.testing.assert_array_equal(grid[0], moment_grid(n, s1, s2, 40)[0])  # unchanged
    lo, hi = outer_bounds(n, s1, s2, step)
    for j in (1, 2):  # the probe: increasing, around the mean, and the rows inside it
        x = cols[j]
        assert np.all(np.diff(grid[j]) >= 0) and lo[j] < x.min() and hi[j] > x.max()
        counts = np.searchsorted(np.sort(x), grid[j], side="right")
        assert np.count_nonzero(np.diff(counts)) >= 4  # the rows span several of its bins
    # A constant column stays one bin (every edge has all rows or none at or below it).
    c = np.full(500, 1e13)
    ac = np.arcsinh(c)
    s1c, s2c = np.array([ac.sum()]), np.array([(ac * ac).sum()])
    g = moment_grid(np.array([500.0]), s1c, s2c, 40, step)[0]
    assert set(np.searchsorted(c, g, side="right").tolist()) <= {0, 500}


def test_the_wide_rules_shortcuts_agree_with_its_definition() -> None:
    # wide_bin settles most bins by bounds; each answer must be asinh(r) - asinh(l) > 3.
    rng = np.random.default_rng(4)
    u = rng.uniform(-40, 40, size=(20000, 2))
    near = rng.random(20000) < 0.5  # many near the threshold: ends WIDE_BIN +- 0.4 apart
    u[near, 1] = u[near, 0] + WIDE_BIN + rng.uniform(-0.4, 0.4, near.sum())
    ends = np.sort(np.sinh(u), axis=1)
    ends[::7] *= 1e-3  # and small bins across zero
    for left, right in ends:
        want = math.asinh(right) - math.asinh(left) > WIDE_BIN
        assert wide_bin(left, right) == want == wide_bin.py_func(left, right), (left, right)


@pytest.mark.parametrize("value", [1.7e308, np.finfo(np.float64).max, -np.finfo(np.float64).max])
def test_a_probe_at_float64s_end_stays_finite_without_warnings(value: float) -> None:
    # A constant column near the largest float64: unresolved, its probe's ends clipped
    # (warnings are errors in the tests: no overflow in cosh or in c + d).
    a = np.arcsinh(np.full(10, value))
    n, s1, s2 = np.array([10.0]), np.array([a.sum()]), np.array([(a * a).sum()])
    grid = moment_grid(n, s1, s2, 6, 2.0**-48)
    lo, hi = outer_bounds(n, s1, s2, 2.0**-48)
    assert np.all(np.isfinite(grid)) and np.all(np.diff(grid) >= 0)
    assert np.isfinite(lo).all() and np.isfinite(hi).all() and lo[0] <= grid[0, 0]
