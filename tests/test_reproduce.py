"""A researcher reproducing the papers: one command for everything, resumable runs.

Tiny versions of the experiments (``tiny_experiment``: 3 trees of depth 3, few rows), so
each test takes seconds.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pandas as pd
import pytest

from fedforest.experiments import paper
from fedforest.experiments._runner import ExperimentInterrupted, partial_path
from fedforest.experiments.paper import run_all, run_experiment, tiny_experiment


def _stopping_after(exp, finished):
    """``exp`` whose run is interrupted (Ctrl-C) once ``finished`` pairs have run."""
    calls = []

    def run(*args, **kwargs):
        if len(calls) == finished:
            raise KeyboardInterrupt
        calls.append(args)
        return exp.run(*args, **kwargs)

    return replace(exp, run=run)


def test_interrupted_run_resumes_to_the_same_records(tmp_path):
    # Ctrl-C was a traceback that lost every finished repetition; the same run now keeps
    # them and the next one computes only the rest, to the same records.
    exp = tiny_experiment("table7-outliers")  # 2 settings x 2 reps: 4 pairs
    whole = run_experiment(exp, reps=2, out=tmp_path / "whole", progress=False, echo=None)
    out = tmp_path / "cut"
    with pytest.raises(ExperimentInterrupted, match=r"finished 3 of 4 .* resumes"):
        run_experiment(_stopping_after(exp, 3), reps=2, out=out, progress=False, echo=None)
    partial = partial_path(out, exp.name)
    assert len(partial.read_text().splitlines()) == 3
    assert not (out / f"{exp.name}.csv").exists()
    lines: list[str] = []
    done = run_experiment(
        _stopping_after(exp, 1), reps=2, out=out, progress=False, echo=lines.append
    )  # one pair left to run: a second interruption would raise
    assert f"resumed: 3 (setting, repetition) pairs read from {partial}" in lines
    timed = [c for c in whole.frame if c.endswith("_seconds")]  # clocks, not results
    assert timed
    pd.testing.assert_frame_equal(done.frame.drop(columns=timed), whole.frame.drop(columns=timed))
    assert not partial.exists()
    cut, full = (
        pd.read_csv(d / f"{exp.name}.csv").drop(columns=timed) for d in (out, tmp_path / "whole")
    )
    pd.testing.assert_frame_equal(cut, full)


def test_a_damaged_partial_file_is_refused_naming_it(tmp_path):
    exp = tiny_experiment("table7-outliers")
    partial = partial_path(tmp_path, exp.name)
    partial.write_text('{"key": 1}\n{"key": "[0.0, 0, 0]", "records": []}\n')
    with pytest.raises(ValueError, match=r"table7-outliers.partial.jsonl, line 1: .*delete"):
        run_experiment(exp, reps=1, out=tmp_path, progress=False, echo=None)


def test_a_last_line_cut_short_runs_its_pair_again(tmp_path):
    exp = tiny_experiment("table7-outliers")
    with pytest.raises(ExperimentInterrupted):
        run_experiment(_stopping_after(exp, 1), reps=1, out=tmp_path, progress=False, echo=None)
    partial = partial_path(tmp_path, exp.name)
    partial.write_text(partial.read_text() + '{"key": "[0.2')  # killed mid-write
    lines: list[str] = []
    run_experiment(exp, reps=1, out=tmp_path, progress=False, echo=lines.append)
    assert any(line.startswith("resumed: 1 ") for line in lines)


def test_rerun_into_a_folder_with_results_says_it_replaces_them(tmp_path):
    exp = tiny_experiment("fedheart")
    run_experiment(exp, reps=1, out=tmp_path, progress=False, echo=None)
    lines: list[str] = []
    run_experiment(exp, reps=1, out=tmp_path, progress=False, echo=lines.append)
    assert lines[0] == (
        f"note: {tmp_path / 'fedheart.csv'}, {tmp_path / 'fedheart.json'}, "
        f"{tmp_path / 'fedheart.png'} exist (an earlier run); this run replaces them"
    )


def _parser():
    parser = argparse.ArgumentParser(prog="fedforest")
    paper.add_experiment_subcommand(parser.add_subparsers(dest="command", required=True))
    return parser


def test_ctrl_c_says_what_was_kept_and_exits_130(monkeypatch, capsys, tmp_path):
    # It was a KeyboardInterrupt traceback; the message is the runner's (tested above).
    def interrupted(name, **kwargs):
        raise ExperimentInterrupted(f"interrupted: {name}: 3 of 40 pairs kept in X; go on")

    monkeypatch.setattr(paper, "run_experiment", interrupted)
    args = _parser().parse_args(["experiment", "fedheart", "--out", str(tmp_path)])
    assert args.handler(args, None) == 130
    err = capsys.readouterr().err
    assert "fedforest experiment: interrupted: fedheart: 3 of 40 pairs kept in X; go on\n" in err
    assert "Traceback" not in err


def test_all_is_a_name_and_listed(capsys):
    args = _parser().parse_args(["experiment", "all", "--reps", "1"])
    assert args.name == "all"
    with pytest.raises(SystemExit):
        _parser().parse_args(["experiment", "--help"])
    assert "every experiment above into --out" in capsys.readouterr().out


def test_all_runs_each_experiment_once_and_resumes(tmp_path):
    exps = {n: tiny_experiment(n) for n in ("table7-outliers", "fedheart")}
    swarm = ["--datasets", "wine", "--peers", "2", "--jaccards", "0.5", "--trees", "2"]
    lines: list[str] = []
    kwargs = {"reps": 1, "out": tmp_path, "progress": False, "echo": lines.append}
    assert run_all(experiments=exps, swarm_options=swarm, **kwargs) == 0
    for name in exps:
        meta = json.loads((tmp_path / f"{name}.json").read_text())
        assert (meta["reps"], meta["seed"]) == (1, 0)
        assert (tmp_path / f"{name}.png").exists()
    assert (tmp_path / "swarm-overlap" / "summary.csv").exists()
    assert lines[-1].startswith("all done: ")
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.*")}
    lines.clear()
    run_all(experiments=exps, swarm_options=swarm, **kwargs)
    assert lines[:3] == [
        f"[1/3] table7-outliers: done, {tmp_path / 'table7-outliers'}.csv/.json/.png "
        "(1 reps, seed 0)",
        f"[2/3] fedheart: done, {tmp_path / 'fedheart'}.csv/.json/.png (1 reps, seed 0)",
        f"[3/3] swarm-overlap: done, {tmp_path / 'swarm-overlap'}/ (--out "
        f"{tmp_path / 'swarm-overlap'} --seed 0 {' '.join(swarm)} --reps 1)",
    ]
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.*")} == stamps
    # Another seed is another run: it replaces the files.
    lines.clear()
    run_all(experiments=exps, swarm_options=None, **{**kwargs, "seed": 1})
    assert json.loads((tmp_path / "fedheart.json").read_text())["seed"] == 1


def _figures(monkeypatch):
    """The figures the experiments draw (each kept as it is saved)."""
    from fedforest.experiments import _plots

    made = []

    def new_figure(*args):
        made.append(fig := new(*args))
        return fig

    new = _plots._new_figure
    monkeypatch.setattr(_plots, "_new_figure", new_figure)
    return made


def test_fedheart_marks_flamby_values_as_flambys(monkeypatch, tmp_path):
    # The FedForest paper prints no FedHeart number: 0.748 and 0.795 are FLamby's, and the
    # legend called them "paper's value".
    made = _figures(monkeypatch)
    run = run_experiment(
        tiny_experiment("fedheart"), reps=1, out=tmp_path, progress=False, echo=None
    )
    (ax,) = made[0].axes
    assert ax.get_legend_handles_labels()[1] == ["× FLamby's value"]
    assert "(1 repetition)" in ax.get_title()
    assert json.loads(run.paths["json"].read_text())["reference"] == "FLamby"


def test_sweeps_say_what_the_points_and_bars_are(monkeypatch, tmp_path):
    made = _figures(monkeypatch)
    lines: list[str] = []
    exp = tiny_experiment("table7-outliers")
    run_experiment(exp, reps=2, out=tmp_path, progress=False, echo=lines.append)
    (ax,) = made[0].axes
    assert " ".join(ax.get_title().split()).endswith("(mean ± 1 sd over 2 repetitions)")
    assert "× paper's value" in ax.get_legend_handles_labels()[1]
    assert lines[0].splitlines()[1] == "score: mse (lower is better); mean ± sd over 2 repetitions"


def test_ctrl_c_in_the_swarm_experiment_is_a_line_not_a_traceback(monkeypatch, capsys, tmp_path):
    from fedforest.cli import main
    from fedforest.experiments import swarm

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(swarm, "run_swarm_experiment", interrupted)
    assert main(["experiment", "swarm-overlap", "--out", str(tmp_path)]) == 130
    assert "swarm-overlap: interrupted; it writes its files once every scenario has run" in (
        capsys.readouterr().err
    )
