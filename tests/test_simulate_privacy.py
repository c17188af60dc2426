"""``fedforest simulate --privacy/--epsilon/--binning``: fedforest's level reaches the fit.

The main job compares fedforest with centralized and local forests; a user comparing the
privacy levels (or ``binning="global"``) runs it once per level. Each option must reach
fedforest's estimator (its predictions equal a direct fit's), be printed in the report and
the reproduce line, and a combination the estimator refuses must be a usage error before
any work.
"""

from __future__ import annotations

import re
import shlex

import numpy as np
import pytest

from fedforest import FedForestRegressor
from fedforest.cli import main
from fedforest.simulate import (
    FEDFOREST,
    SimulateConfig,
    _forest_params,
    run_simulation,
    scenario_data,
)

SMALL = ["--clients", "3", "--rows-per-client", "80", "--trees", "3", "--max-depth", "4"]


# Under "dp" the noise is the clients' own randomness (not seeded): a 240-row fit of 3 trees
# can, now and then, grow only single leaves and warn so (forest/leaves.py); these tests
# read the report, not the forest.
_NOISY_LEAVES = pytest.mark.filterwarnings("ignore:every tree of this forest is a single leaf")


def _direct_predictions(config: SimulateConfig) -> np.ndarray:
    data = scenario_data(config)
    model = FedForestRegressor(
        n_bins=config.n_bins,
        privacy=config.privacy,
        epsilon=config.epsilon,
        binning=config.binning,
        **_forest_params(config),
    )
    model.fit(data.X_train, data.y_train, client_ids=data.h_train)
    return np.asarray(model.predict(data.X_test))


@pytest.mark.parametrize("binning", ["quantile", "global"])
def test_the_level_reaches_fedforest(binning) -> None:
    """(Not ``"dp"``: its noise comes from the clients' own randomness, not from
    ``random_state``, so two fits differ; its test is the budget reported below.)"""
    config = SimulateConfig(
        clients=3, rows_per_client=80, trees=3, max_depth=4, privacy="none", binning=binning
    )
    result = run_simulation(config, progress=False)
    np.testing.assert_array_equal(result.predictions[FEDFOREST], _direct_predictions(config))
    default = run_simulation(SimulateConfig(clients=3, rows_per_client=80, trees=3, max_depth=4),
                             progress=False)  # fmt: skip
    assert not np.array_equal(default.predictions[FEDFOREST], result.predictions[FEDFOREST])


def test_none_is_reported_and_reproduced(tmp_path, capsys) -> None:
    out = tmp_path / "p.png"
    assert main(["simulate", *SMALL, "--privacy", "none", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert 'privacy="none", the paper\'s protocol' in stdout
    assert "rebuild training rows" in stdout
    line = next(x for x in stdout.splitlines() if x.startswith("reproduce: "))
    argv = shlex.split(line.removeprefix("reproduce: "))
    assert argv[argv.index("--privacy") + 1] == "none"
    assert "--epsilon" not in argv and "--binning" not in argv
    first = re.search(r"^fedforest\s+(\S+)", stdout, re.M)
    assert main(argv[1:]) == 0  # the printed command reruns the same fit
    again = re.search(r"^fedforest\s+(\S+)", capsys.readouterr().out, re.M)
    assert first is not None and again is not None and first.group(1) == again.group(1)


@_NOISY_LEAVES
def test_dp_reports_the_guarantee(tmp_path, capsys) -> None:
    out = tmp_path / "p.png"
    argv = ["simulate", *SMALL, "--privacy", "dp", "--epsilon", "8", "--out", str(out)]
    assert main(argv) == 0
    stdout = " ".join(capsys.readouterr().out.split())
    match = re.search(r"the fit is \((\S+), (\S+)\)-differentially private", stdout)
    assert match, stdout
    assert float(match.group(1)) == 8.0  # the budget: no client dropped
    assert 0.0 < float(match.group(2)) < 1e-3
    assert "--privacy dp --epsilon 8.0" in stdout and "against the server and 0 colluding" in stdout
    assert "--dp-colluders" not in stdout


@_NOISY_LEAVES
def test_dp_colluders_reach_the_fit(tmp_path, capsys) -> None:
    """``--dp-colluders 2`` of 3 clients: the report says so and the reproduce line keeps it;
    the guarantee is still the budget (it holds against the 2)."""
    out = tmp_path / "p.png"
    argv = ["simulate", *SMALL, "--privacy", "dp", "--epsilon", "8", "--dp-colluders", "2"]
    assert main([*argv, "--out", str(out)]) == 0
    stdout = " ".join(capsys.readouterr().out.split())
    assert re.search(r"the fit is \(8, \S+\)-differentially private .* and 2 colluding", stdout)
    assert "--privacy dp --epsilon 8.0 --dp-colluders 2" in stdout


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--privacy", "dp"], "--privacy dp needs --epsilon"),
        (["--epsilon", "3"], "--epsilon is the budget of --privacy dp, not of --privacy secure"),
        (["--privacy", "none", "--epsilon", "3"], "not of --privacy none"),
        (["--binning", "global"], "--binning global needs --privacy none (not secure)"),
        (["--privacy", "dp", "--epsilon", "3", "--binning", "global"], "(not dp)"),
        (["--privacy", "dp", "--epsilon", "-1"], "argument --epsilon: must be a finite number"),
        (["--privacy", "dp", "--epsilon", "inf"], "argument --epsilon: must be a finite number"),
        (["--privacy", "dp", "--epsilon", "x"], "argument --epsilon: expected a number"),
        (["--privacy", "open"], "argument --privacy: invalid choice"),
        (["--dp-colluders", "1"], "--dp-colluders scales --privacy dp's noise, not"),
        (["--privacy", "dp", "--epsilon", "3", "--dp-colluders", "3"], "needs more --clients"),
        (["--privacy", "dp", "--epsilon", "3", "--dp-colluders", "-1"], "argument --dp-colluders"),
    ],
)
def test_refused_combinations_are_usage_errors_before_any_work(
    tmp_path, capsys, options, message
) -> None:
    out = tmp_path / "p.png"
    with pytest.raises(SystemExit) as exc:
        main(["simulate", *SMALL, *options, "--out", str(out)])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_run_simulation_refuses_before_the_warm_up() -> None:
    """The Python entry point refuses what the estimator would, before fitting anything
    (the warm-up and the baselines would otherwise run first)."""
    with pytest.raises(ValueError, match='privacy="dp" needs a privacy budget'):
        run_simulation(SimulateConfig(privacy="dp"), progress=False)
    with pytest.raises(ValueError, match="binning='global' is not available"):
        run_simulation(SimulateConfig(binning="global"), progress=False)
