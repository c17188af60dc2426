"""A researcher reproducing the papers: one command for everything, resumable runs.

Tiny versions of the experiments (``tiny_experiment``: 3 trees of depth 3, few rows), so
each test takes seconds.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgb, to_rgba

from fedforest.experiments import _methods, paper
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


def _drawn(monkeypatch, tmp_path, name, methods):
    """``name``'s figure of made-up scores (5 repetitions, a spread within each box)."""
    exp = paper.EXPERIMENTS[name]
    rows = [
        {"method": m, "score": 0.5 + 0.5 * k + 0.01 * r, "rep": r, "group": "all"}
        | ({exp.x: s} if exp.x else {})
        for k, m in enumerate(methods)
        for r in range(5)
        for s in (exp.settings if exp.x else [None])
    ]
    made = _figures(monkeypatch)
    exp.plot(exp, pd.DataFrame(rows), tmp_path / "plot.png")
    (ax,) = made[0].axes
    return exp, ax


def _contrast(a, b):
    """WCAG 2.1's contrast ratio of two opaque sRGB colours (1 to 21)."""

    def luminance(rgb):
        c = np.asarray(rgb, dtype=float)
        c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return float(c @ [0.2126, 0.7152, 0.0722])

    hi, lo = sorted([luminance(a), luminance(b)], reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_every_box_shows_its_median(monkeypatch, tmp_path):
    # The median line was matplotlib's orange (C1), on Centralized RF + H's orange box.
    _, ax = _drawn(monkeypatch, tmp_path, "fedheart", _methods.METHOD_ORDER)
    boxes = ax.patches
    assert len(boxes) == len(_methods.METHOD_ORDER)
    for box, method in zip(boxes, _methods.METHOD_ORDER, strict=True):
        xs, ys = box.get_path().vertices.T
        median = [
            line
            for line in ax.lines
            if len(line.get_xdata()) == 2
            and (min(line.get_xdata()), max(line.get_xdata())) == (xs.min(), xs.max())
        ]
        assert len(median) == 1, method
        assert ys.min() < median[0].get_ydata()[0] < ys.max(), method
        *rgb, alpha = to_rgba(box.get_facecolor())
        face = alpha * np.asarray(rgb) + (1 - alpha)  # as it shows on the white axes
        # 3:1 is WCAG's least contrast for a graphical object against what is next to it.
        assert _contrast(face, to_rgb(median[0].get_color())) >= 3.0, method


@pytest.mark.parametrize("name", ["table7-outliers", "fedheart"])
def test_the_legends_cross_is_no_methods_colour(monkeypatch, tmp_path, name):
    # The legend's cross took the first cross's colour (FedForest Quantiles' green in Table 7,
    # FedAvg LR's cyan in FedHeart): it read as that method's value alone.
    methods = [
        m for m in _methods.METHOD_ORDER if name == "fedheart" or m in paper.EXPERIMENTS[name].paper
    ]
    exp, ax = _drawn(monkeypatch, tmp_path, name, methods)
    if exp.x:  # a sweep: a line per method, named in the legend
        handles, labels = ax.get_legend_handles_labels()
        colour = {
            lab: to_rgb(h.lines[0].get_color())
            for h, lab in zip(handles, labels, strict=True)
            if lab in methods
        }
        at = {m: float(s) for m in exp.paper for s in exp.paper[m]}
    else:  # boxes at 1, 2, ... in the order of ``methods``
        colour = {m: to_rgb(b.get_facecolor()) for m, b in zip(methods, ax.patches, strict=True)}
        at = {m: float(methods.index(m) + 1) for m in exp.paper}
    assert set(colour) == set(methods)
    crosses = [line for line in ax.lines if line.get_marker() == "x" and len(line.get_xdata())]
    assert len(crosses) == sum(len(v) for v in exp.paper.values())
    for method, values in exp.paper.items():  # each cross keeps its method's colour
        for setting, value in values.items():
            x = float(setting) if setting else at[method]
            (cross,) = [c for c in crosses if (c.get_xdata()[0], c.get_ydata()[0]) == (x, value)]
            assert to_rgb(cross.get_color()) == colour[method], (method, setting)
    (entry,) = [
        h
        for h, t in zip(ax.get_legend().legend_handles, ax.get_legend().get_texts(), strict=True)
        if t.get_text() == f"× {exp.reference}'s value"
    ]
    assert entry.get_marker() == "x"
    assert to_rgb(entry.get_color()) not in set(colour.values())


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
