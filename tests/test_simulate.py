"""``fedforest simulate``'s order of work does not change its results.

On a first run the scikit-learn baselines are fitted between the two halves of the
warm-up (while the second process compiles); each method must give exactly what it
gives fitted alone, in a fresh order.
"""

from __future__ import annotations

import numpy as np

from fedforest.simulate import (
    CENTRALIZED,
    FEDFOREST,
    LOCAL,
    SimulateConfig,
    _fit_centralized,
    _fit_fedforest,
    _fit_local,
    run_simulation,
    scenario_data,
)


def test_each_method_gives_what_it_gives_fitted_alone() -> None:
    config = SimulateConfig(clients=3, rows_per_client=60, features=6, trees=4, max_depth=4)
    result = run_simulation(config, progress=False)
    data = scenario_data(config)
    np.testing.assert_array_equal(result.y_test, data.y_test)
    assert [m.name for m in result.methods] == [FEDFOREST, CENTRALIZED, LOCAL]
    for name, fit in (
        (FEDFOREST, _fit_fedforest),
        (LOCAL, _fit_local),
        (CENTRALIZED, _fit_centralized),
    ):
        method, y_pred = fit(data, config)
        assert y_pred is not None
        np.testing.assert_array_equal(result.predictions[name], y_pred)
        alone = next(m for m in result.methods if m.name == name)
        assert (alone.mse, alone.rounds, alone.mb_sent) == (
            method.mse,
            method.rounds,
            method.mb_sent,
        )
