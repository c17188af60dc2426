"""`fedforest experiment` reviewed as a user (session 28): what a run says and refuses.

- The privacy level the experiments run under (the paper's protocol, "none", not the
  default "secure") was stated only in docs/results.md: neither the printed report, nor
  NAME.json, nor ``--help`` said it.
- Appendix B scores regression datasets by R² and classification ones by accuracy; its
  report said "score: accuracy" above R² numbers.
- An ``--out`` that cannot be created or written in was a traceback (``mkdir``) instead
  of a usage error: at once for the paper's experiments, after the whole run for
  swarm-overlap.
- The Fed Histogram baseline ran under "none" whatever privacy level it was given.
- benchmarks/check_docs.py did not check the Appendix B tables.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fedforest.cli import main
from fedforest.experiments import _methods, paper, swarm
from fedforest.experiments._methods import QUANTILES, build_estimator
from fedforest.experiments.paper import run_experiment, tiny_experiment


def test_report_and_json_say_the_privacy_level_the_forests_were_fitted_at(
    tmp_path: Path,
) -> None:
    # appendix-b's tiny version: diabetes (R²) and breast cancer (accuracy), 3 trees.
    lines: list[str] = []
    run = run_experiment(
        tiny_experiment("appendix-b"), reps=1, out=tmp_path, progress=False, echo=lines.append
    )
    fitted = build_estimator(QUANTILES, "regression", 0).privacy  # what the fits used
    header = lines[0].splitlines()
    assert header[2].startswith(f'privacy="{fitted}" for every FedForest and Fed Histogram')
    assert json.loads(run.paths["json"].read_text())["privacy"] == fitted == "none"
    # Both scores, and which setting picks one, named: the report said "accuracy" only.
    assert header[1].startswith("score: r2 or accuracy by dataset (higher is better)")
    assert set(run.frame["metric"]) == {"r2", "accuracy"}


def test_report_names_a_single_metric_as_before(tmp_path: Path) -> None:
    lines: list[str] = []
    run_experiment(
        tiny_experiment("fedheart"), reps=1, out=tmp_path, progress=False, echo=lines.append
    )
    assert lines[0].splitlines()[1].startswith("score: accuracy (higher is better)")


def test_the_fits_read_the_one_privacy_constant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The constant the report and NAME.json print is the one the estimators are built with.
    monkeypatch.setattr(_methods, "PRIVACY", "secure")
    assert build_estimator(QUANTILES, "regression", 0).privacy == "secure"


def test_help_says_the_experiments_run_under_privacy_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["experiment", "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert 'privacy="none", the paper\'s protocol' in text
    assert 'default is "secure"' in text


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc refuses mkdir, even to root"
)
@pytest.mark.parametrize("name", ["appendix-b", "all", "swarm-overlap"])
def test_an_out_that_cannot_be_written_is_a_usage_error_before_the_run(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run started")

    monkeypatch.setattr(paper, "run_experiment", must_not_run)
    monkeypatch.setattr(paper, "run_all", must_not_run)
    # swarm-overlap ran for minutes (4 at --reps 1, loaded), then lost it all in mkdir.
    monkeypatch.setattr(swarm, "run_swarm_experiment", must_not_run)
    with pytest.raises(SystemExit) as stop:
        main(["experiment", name, "--reps", "1", "--out", "/proc/fedforest-no-such-dir/r"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "argument --out: cannot write in '/proc/fedforest-no-such-dir/r'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("privacy", ["secure", "dp"])
def test_fed_histogram_refuses_a_privacy_level_it_does_not_run(privacy: str) -> None:
    # It ran every fit under "none" whatever it was given (its default, inherited, is
    # "secure"); docs/privacy.md lists it among what "secure" and "dp" refuse.
    from fedforest.datasets import make_paper_synthetic
    from fedforest.experiments.baselines import FederatedHistogramRegressor

    d = make_paper_synthetic("homogeneous", random_state=0, n_clients=3, n_per_client=40)
    small = {"n_estimators": 2, "max_depth": 2, "random_state": 0}
    extra = {"epsilon": 5.0} if privacy == "dp" else {}
    model = FederatedHistogramRegressor(privacy=privacy, **small, **extra)
    with pytest.raises(ValueError, match=f"only under privacy='none'.*privacy='{privacy}'"):
        model.fit(d.X_train, d.y_train, client_ids=d.h_train)
    fitted = FederatedHistogramRegressor(privacy="none", **small)
    fitted.fit(d.X_train, d.y_train, client_ids=d.h_train)
    assert fitted.communication_.rounds > 0
    # The experiments build it at their one level.
    assert build_estimator("Fed Histogram", "regression", 0).privacy == _methods.PRIVACY


def _check_docs() -> Any:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "check_docs.py"
    spec = importlib.util.spec_from_file_location("check_docs_28", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_check_docs_reads_every_appendix_b_cell_and_flags_a_drifted_one() -> None:
    # Records whose 3 repetitions (mean - sd, mean, mean + sd) give the page's cells.
    import pandas as pd

    cd = _check_docs()
    try:
        text = cd.section(cd.RESULTS, cd.APPENDIX_B_SECTION)
        scores = cd.table_with(text, "dataset", "here")
        costs = cd.table_with(text, "rounds", "here")
        rows = []
        for dataset, cells in scores.items():
            for method in costs:
                mean, sd = (p.value for p in cd.mean_sd(cells[method].replace("**", ""), "here"))
                for rep, value in enumerate((mean - sd, mean, mean + sd)):
                    rows.append(
                        {"dataset": dataset, "method": method, "rep": rep, "score": value}
                        | {"rounds": float(costs[method]["rounds"]), "note": ""}
                        | {"megabytes": float(costs[method]["MB (mean over datasets)"])}
                    )
        frame = pd.DataFrame(rows)
        comparisons = cd.compare_appendix_b(frame)
        assert len(comparisons) == 11 * 6 * 2 + 6 * 2
        assert all(c.ok for c in comparisons)
        at = (frame["dataset"] == "heart-attack") & (frame["method"] == "Fed Histogram")
        frame.loc[at & (frame["rep"] == 1), "score"] += 0.002  # the mean moves by 0.0007
        drifted = [c.where for c in cd.compare_appendix_b(frame) if not c.ok]
        assert drifted == [
            "results.md 'Appendix B: real tabular datasets', heart-attack, Fed Histogram, mean"
        ]
    finally:
        sys.modules.pop("check_docs_28", None)


def test_check_docs_reads_every_table3_cell_and_flags_a_drifted_one() -> None:
    import pandas as pd

    cd = _check_docs()
    try:
        table = cd.table_with(cd.section(cd.RESULTS, cd.TABLE3_SECTION), "K = 1", "here")
        rows = []
        for method, cells in table.items():
            for k in (1, 2, 5, 10, 20, 50, 100):
                mean, sd = (p.value for p in cd.mean_sd(cells[f"K = {k}"], "here"))
                for rep, value in enumerate((mean - sd, mean, mean + sd)):
                    rows.append(
                        {"K": k, "method": method, "rep": rep, "score": value, "note": ""}
                        | {
                            "rounds": float(cells["rounds"]),
                            "megabytes": float(cells["MB per fit"]),
                        }
                    )
        frame = pd.DataFrame(rows)
        comparisons = cd.compare_table3(frame)
        assert len(comparisons) == 6 * 7 * 2 + 6 * 2
        assert all(c.ok for c in comparisons)
        # one K at 0.1 MB: the mean over the 7 K moves to 0.014, the page prints 0.00
        frame.loc[(frame["method"] == "Local Learning") & (frame["K"] == 100), "megabytes"] = 0.1
        drifted = [c.where for c in cd.compare_table3(frame) if not c.ok]
        assert drifted == ["results.md 'Table 3: fragmentation', Local Learning, MB"]
    finally:
        sys.modules.pop("check_docs_28", None)
