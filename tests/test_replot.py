"""``fedforest experiment NAME --replot``: a finished run's figure redrawn from its CSV.

Oracles: the figure the run itself drew (the same bytes), and the file's own rows for the
refusals (the file, the column and the row named; nothing drawn).
"""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

from fedforest.experiments import paper
from fedforest.experiments.paper import replot, run_experiment, tiny_experiment


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory):
    """A tiny sweep's finished run: its folder and the figure it drew."""
    out = tmp_path_factory.mktemp("run")
    run_experiment(tiny_experiment("table7-outliers"), reps=2, out=out, progress=False, echo=None)
    return out, (out / "table7-outliers.png").read_bytes()


def _copy(finished, tmp_path, edit=None):
    out, _ = finished
    frame = pd.read_csv(out / "table7-outliers.csv")
    if edit is not None:
        frame = edit(frame)
    frame.to_csv(tmp_path / "table7-outliers.csv", index=False)
    return tmp_path


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="fedforest")
    paper.add_experiment_subcommand(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["experiment", *argv])
    return args.handler(args, parser)


def test_the_figure_comes_back_as_the_run_drew_it(finished, tmp_path):
    out = _copy(finished, tmp_path)
    path = replot("table7-outliers", out)
    assert path == out / "table7-outliers.png"
    assert path.read_bytes() == finished[1]


def test_the_command_redraws_every_finished_run_in_the_folder(finished, tmp_path, capsys):
    out = _copy(finished, tmp_path)
    assert _cli("all", "--replot", "--out", str(out)) == 0
    assert capsys.readouterr().out == f"table7-outliers: redrawn {out / 'table7-outliers.png'}\n"
    assert (out / "table7-outliers.png").read_bytes() == finished[1]
    assert sorted(p.name for p in out.iterdir()) == ["table7-outliers.csv", "table7-outliers.png"]


def test_no_table_says_how_to_make_one(tmp_path, capsys):
    assert _cli("fedheart", "--replot", "--out", str(tmp_path)) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'fedheart.csv'}: no such file" in err
    assert f"run `fedforest experiment fedheart --out {tmp_path}` first" in err
    assert _cli("all", "--replot", "--out", str(tmp_path)) == 1
    assert f"no NAME.csv of any experiment in {tmp_path}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _set(column, row, value):
    def edit(frame):
        frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
        return frame

    return edit


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda f: f.drop(columns="score"), "no column 'score'"),
        (lambda f: f.drop(columns="outlier_fraction"), "no column 'outlier_fraction'"),
        (lambda f: f.iloc[:0], "the results table has no rows"),
        (_set("experiment", 2, "fedheart"), "column 'experiment', row 4 of the file: 'fedheart'"),
        (_set("metric", 0, "accuracy"), "column 'metric', row 2 of the file: 'accuracy'"),
        (_set("score", 1, "1e400"), "column 'score', row 3 of the file: inf; a score is finite"),
        (_set("score", 3, "__import__('os')"), "column 'score', row 5 of the file: \"__import__"),
        (_set("rep", 0, "-1"), "column 'rep', row 2 of the file: -1; a repetition is a whole"),
        (_set("rep", 1, "0.5"), "column 'rep', row 3 of the file: 0.5"),
        (_set("outlier_fraction", 0, None), "column 'outlier_fraction', row 2 of the file"),
        (_set("method", 0, None), "column 'method', row 2 of the file: nan; a method's name"),
    ],
)
def test_a_table_from_elsewhere_is_checked_before_it_is_drawn(finished, tmp_path, edit, named):
    out = _copy(finished, tmp_path, edit)
    with pytest.raises(ValueError, match="table7-outliers.csv") as info:
        replot("table7-outliers", out)
    assert named in str(info.value)
    assert not (out / "table7-outliers.png").exists()


def test_a_file_that_is_no_table_is_named(tmp_path):
    (tmp_path / "fedheart.csv").write_bytes(b'"unterminated\n\x00\xff,1\n')
    with pytest.raises(ValueError, match=r"fedheart\.csv: not a"):
        replot("fedheart", tmp_path)
