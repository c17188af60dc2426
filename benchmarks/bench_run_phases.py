"""Where a ``fedforest simulate`` run's time goes, phase by phase (wall and CPU seconds).

    python benchmarks/bench_run_phases.py

Runs the steps of ``fedforest simulate`` with the default options in this process, in
the command's order (imports, this process's share of the kernels, the data, the two
scikit-learn baselines, the rest of the warm-up, fedforest's fit, the figure), and
prints each step's wall and CPU time. With a warm numba cache (a second run) it shows
what every run pays besides fitting; with a fresh one the compile steps dominate and
the second compile process's CPU is not counted (see ``bench_first_run.py --path``).
The ``fedforest`` imported is the one next to this file.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_T0, _C0 = time.perf_counter(), time.process_time()
_MARKS: list[tuple[str, float, float]] = []


def _mark(name: str) -> None:
    _MARKS.append((name, time.perf_counter() - _T0, time.process_time() - _C0))


def main() -> None:
    """Run the steps and print their times."""
    import numba  # noqa: F401

    _mark("import numba")
    from fedforest.federated.precompile import start_early

    _mark("import fedforest's kernels")
    start_early()
    _mark("start_early (cache index)")
    import sklearn.ensemble  # noqa: F401

    _mark("import scikit-learn")
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401

    _mark("import matplotlib")
    from fedforest import simulate as sim

    _mark("import fedforest.simulate")
    config = sim.SimulateConfig()
    warming = sim._WarmUp(config, None)
    warming.compile_here()
    _mark("this process's kernels")
    data = sim.make_paper_synthetic(
        config.scenario,
        n_clients=config.clients,
        n_per_client=config.rows_per_client,
        n_features=config.features,
        random_state=config.seed,
    )
    _mark("data")
    central = sim._fit_centralized(data, config)
    _mark("centralized RF: fit + predict")
    local = sim._fit_local(data, config)
    _mark("local learning: fits + predict")
    warming.finish()
    _mark("warm-up: wait, tiny fit")
    fed = sim._fit_fedforest(data, config)
    _mark("fedforest: fit + predict")
    result = sim.SimulateResult(
        config,
        (fed[0], central[0], local[0]),
        data.y_test,
        {sim.FEDFOREST: fed[1], sim.CENTRALIZED: central[1], sim.LOCAL: local[1]},
    )
    with tempfile.TemporaryDirectory() as tmp:
        sim.save_figure(result, Path(tmp) / "out.png")
    _mark("figure")
    wall0 = cpu0 = 0.0
    print(f"{'step':34s}{'wall s':>8}{'CPU s':>8}")
    for name, wall, cpu in _MARKS:
        print(f"{name:34s}{wall - wall0:8.2f}{cpu - cpu0:8.2f}")
        wall0, cpu0 = wall, cpu
    print(f"{'in all (after the interpreter)':34s}{wall0:8.2f}{cpu0:8.2f}")


if __name__ == "__main__":
    main()
