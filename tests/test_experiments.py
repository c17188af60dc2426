import argparse
import json

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments import paper
from fedforest.experiments._methods import (
    AVGIMP,
    CENTRAL,
    QUANTILES,
    Fold,
    NotAvailableError,
    build_estimator,
    evaluate,
    score,
)
from fedforest.experiments.paper import (
    EXPERIMENTS,
    add_experiment_subcommand,
    run_experiment,
    tiny_experiment,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

NAMES = [
    "fig2-homogeneous",
    "fig2-covariate-shift",
    "fig2-outcome-shift",
    "fedheart",
    "table3-fragmentation",
    "table5-disjoint",
    "table6-overlap",
    "f2-both-shifts",
    "table7-outliers",
    "appendix-b",
]


def test_every_paper_experiment_is_registered():
    assert list(EXPERIMENTS) == NAMES
    for exp in EXPERIMENTS.values():
        assert 1 <= exp.default_reps <= exp.paper_reps
        assert exp.metric in ("mse", "accuracy", "r2")


@pytest.mark.parametrize("name", NAMES)
def test_experiment_runs_tiny_and_writes_outputs(name, tmp_path):
    lines = []
    result = run_experiment(
        tiny_experiment(name), reps=1, out=tmp_path, progress=False, echo=lines.append
    )
    frame = result.frame
    assert {"method", "metric", "score", "rounds", "megabytes", "note", "rep"} <= set(frame)
    main = frame[frame["group"] == "all"] if "group" in frame else frame
    # every method has a score, or no score and a note saying why
    scored = main["score"].notna()
    assert scored.any()
    assert (main.loc[~scored, "note"].str.startswith("not available yet")).all()
    assert main.loc[main["method"] == CENTRAL, "score"].notna().all()
    assert main.loc[main["method"] == QUANTILES, "score"].notna().all()
    assert (main.loc[main["method"] == QUANTILES, "rounds"] > 0).all()

    csv = pd.read_csv(result.paths["csv"])
    assert len(csv) == len(frame)
    payload = json.loads(result.paths["json"].read_text())
    assert payload["experiment"] == name and payload["summary"] and payload["records"]
    assert result.paths["png"].read_bytes()[:8] == PNG_MAGIC

    report = "\n".join(lines)
    assert "communication per fit" in report
    assert f"reproduce: fedforest experiment {name} --reps 1 --seed 0" in report


def test_fedheart_reports_every_center(tmp_path):
    result = run_experiment(
        tiny_experiment("fedheart"), reps=1, out=tmp_path, progress=False, echo=None
    )
    groups = set(result.frame["group"])
    assert groups == {"all", "Cleveland", "Hungary", "Switzerland", "VA Long Beach"}


def test_unavailable_variant_is_nan_with_a_note():
    X = np.random.default_rng(0).normal(size=(40, 3))
    fold = Fold(
        X[:30], X[:30, 0], np.arange(30) % 2, X[30:], X[30:, 0], np.arange(10) % 2, "regression"
    )
    try:
        build_estimator(AVGIMP, "regression", 0)
    except NotAvailableError:
        out = evaluate(AVGIMP, fold, 0)
        assert out.prediction is None and np.isnan(out.rounds)
        assert out.note.startswith("not available yet")
    else:
        out = evaluate(AVGIMP, fold, 0, forest={"n_estimators": 2, "max_depth": 2})
        assert out.prediction is not None and out.rounds > 0


def test_score_metrics():
    y = np.array([1.0, 2.0, 3.0])
    assert score("mse", y, y + 1) == pytest.approx(1.0)
    assert score("accuracy", y, np.array([1.0, 0.0, 3.0])) == pytest.approx(2 / 3)
    assert score("r2", y, y) == pytest.approx(1.0)
    assert np.isnan(score("mse", y, None))
    with pytest.raises(ValueError, match="metric"):
        score("auc", y, y)


def _parser():
    parser = argparse.ArgumentParser(prog="fedforest")
    add_experiment_subcommand(parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli_subcommand_parses_and_dispatches(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(paper, "run_experiment", lambda name, **kw: calls.append((name, kw)))
    args = _parser().parse_args(
        [
            "experiment",
            "table7-outliers",
            "--reps",
            "3",
            "--out",
            str(tmp_path),
            "--seed",
            "2",
            "--n-jobs",
            "2",
        ]
    )
    assert args.handler(args, None) == 0
    assert calls == [("table7-outliers", {"reps": 3, "out": tmp_path, "seed": 2, "n_jobs": 2})]


@pytest.mark.parametrize(
    "argv", [["experiment", "fig9"], ["experiment", "fedheart", "--reps", "0"]]
)
def test_cli_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(argv)
    assert exc.value.code == 2


def test_cli_help_lists_experiments(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["experiment", "--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in NAMES)


def test_parallel_reps_match_sequential(tmp_path):
    exp = tiny_experiment("table7-outliers")
    seq = run_experiment(exp, reps=2, out=tmp_path / "a", progress=False, echo=None)
    par = run_experiment(exp, reps=2, out=tmp_path / "b", progress=False, echo=None, n_jobs=2)
    key = ["rep", "outlier_fraction", "method"]
    a = seq.frame.sort_values(key).reset_index(drop=True)
    b = par.frame.sort_values(key).reset_index(drop=True)
    np.testing.assert_allclose(a["score"], b["score"])


def test_listing_the_experiments_imports_nothing_heavy():
    import subprocess
    import sys

    code = (
        "import sys, argparse; from fedforest.experiments import paper; "
        "p = argparse.ArgumentParser(); paper.add_experiment_subcommand(p.add_subparsers()); "
        "print(sorted(m for m in ('sklearn', 'pandas', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
