"""Frictions of issue 16 ("smaller" list), each pinned by a test."""

import argparse
import subprocess
import sys

import pytest

from fedforest import cli


def test_python_dash_m_fedforest_runs_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "fedforest", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fedforest ")


def test_unknown_experiment_lists_every_experiment(capsys):
    from fedforest.experiments._catalog import CATALOG
    from fedforest.experiments.swarm import SUBCOMMAND

    with pytest.raises(SystemExit) as exc:
        cli.main(["experiment", "nosuch"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for name in [*CATALOG, SUBCOMMAND]:
        assert repr(name) in err, name


def test_simulate_out_in_missing_directory_names_the_path(monkeypatch, capsys):
    import fedforest.simulate

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking --out")

    monkeypatch.setattr(fedforest.simulate, "run_simulation", no_training)
    with pytest.raises(SystemExit) as exc:
        cli.main(["simulate", "--out", "/nonexistent/x.png"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: fedforest simulate"), err
    assert "/nonexistent" in err
    assert "does not exist" in err


def _parsers():
    """Every parser of the command: the top level, its subcommands, the swarm ones."""
    todo = [cli.build_parser(), cli.build_swarm_parser()]
    seen = []
    while todo:
        parser = todo.pop()
        seen.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return seen


def test_every_option_of_every_subcommand_has_help():
    parsers = _parsers()
    assert {p.prog for p in parsers} >= {
        "fedforest",
        "fedforest simulate",
        "fedforest experiment",
        "fedforest experiment swarm-overlap",
    }
    missing = [
        f"{p.prog} {'/'.join(a.option_strings) or a.dest}"
        for p in parsers
        for a in p._actions
        if not a.help
    ]
    assert not missing, missing
