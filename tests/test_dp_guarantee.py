"""``privacy_report_["epsilon_guarantee"]``: the fit's guarantee is its plan, not its spend.

A fit under ``privacy="dp"`` whose trees stop early releases fewer entries than planned,
and ``epsilon_spent`` accounts for those releases alone. Which trees stop, and where,
depends on earlier noisy releases: a privacy loss summed over releases chosen that
adaptively is no valid bound by itself (Rogers, Roth, Ullman & Vadhan 2016), while the
planned bound holds for any such stopping rule (a privacy filter). So the report's
guarantee is the plan's ``epsilon`` however early the trees stop, more after a drop that
took noise shares out of released sums, and warm-start totals add up guarantees.
"""

from __future__ import annotations

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.privacy import dp


def _fit(**kw):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=400)
    h = np.arange(400) % 4
    params = dict(n_estimators=4, max_depth=10, privacy="dp", epsilon=6.0, random_state=0)
    return ff.FedForestRegressor(**{**params, **kw}).fit(X, y, client_ids=h)


def test_trees_that_stop_early_keep_the_planned_guarantee() -> None:
    """400 rows in trees of depth 10 under the minimum-rows rule: most planned levels are
    never released, so the ex-post spend is below the budget, the guarantee is not."""
    report = _fit().privacy_report_
    assert report["epsilon_spent"] < 0.9 * report["epsilon"]  # trees stopped early
    assert report["epsilon_guarantee"] == report["epsilon"] == 6.0
    assert report["epsilon_total"] == report["epsilon_guarantee"]


def test_warm_start_totals_add_up_guarantees() -> None:
    model = _fit(warm_start=True)
    model.set_params(n_estimators=6)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=400)
    model.fit(X, y, client_ids=np.arange(400) % 4)
    report = model.privacy_report_
    assert report["fits"] == 2
    assert report["epsilon_spent"] < report["epsilon"]
    assert report["epsilon_total"] == pytest.approx(12.0)


def test_the_guarantee_is_the_plan_whatever_was_released() -> None:
    """Unit: the guarantee never reads the releases; after a drop it exceeds the budget."""
    plan = dp.plan_noise(2.0, 1e-5, 1000, 40, 1, 4)
    grid, target = 40, 1
    for released in (grid + target + 1, 300, 1000):
        assert dp.spent_epsilon(plan, released, grid, target) <= 2.0
        assert dp.guaranteed_epsilon(plan, grid, target) == 2.0
    assert dp.spent_epsilon(plan, 300, grid, target) < 2.0
    after_drop = dp.guaranteed_epsilon(plan, grid, target, noise_kept=0.75)
    assert after_drop > 2.0
    assert after_drop >= dp.spent_epsilon(plan, 300, grid, target, noise_kept=0.75)


def test_a_stored_report_keeps_its_guarantee(tmp_path) -> None:
    model = _fit()
    model.save(tmp_path / "m.ffm")
    loaded = ff.load(tmp_path / "m.ffm").privacy_report_
    assert loaded["epsilon_guarantee"] == model.privacy_report_["epsilon_guarantee"]
    assert loaded["epsilon_spent"] == model.privacy_report_["epsilon_spent"]
