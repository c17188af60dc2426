"""Every benchmark and example script's command line parses: ``--help`` exits 0 (a script
whose parser defines an option twice crashes on any invocation, found in bench_privacy.py),
and its help gives every option a text and shows its default."""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(
    path
    for path in [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "examples").rglob("*.py")]
    if "argparse" in (text := path.read_text()) and "def main(" in text
)


def _help_of(script: Path, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """Run ``script --help`` (asserting it exits 0 and prints a usage); its parser."""
    shown: list[argparse.ArgumentParser] = []
    print_help = argparse.ArgumentParser.print_help

    def record(self: argparse.ArgumentParser, file: object = None) -> None:
        shown.append(self)
        print_help(self, file)  # type: ignore[arg-type]

    monkeypatch.setattr(argparse.ArgumentParser, "print_help", record)
    monkeypatch.syspath_prepend(str(script.parent))
    monkeypatch.setattr(sys, "argv", [script.name, "--help"])
    spec = importlib.util.spec_from_file_location(f"_bench_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as stop:
        module.main()
    assert stop.value.code == 0
    (parser,) = shown
    return parser


def _unhelpful(parser: argparse.ArgumentParser) -> list[str]:
    """Options (of the parser and its subcommands) with no help text, or whose default the
    help does not show."""
    wrong = []
    text = " ".join(parser.format_help().split())
    shows = issubclass(parser.formatter_class, argparse.ArgumentDefaultsHelpFormatter)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        name = f"{parser.prog} {'/'.join(action.option_strings) or action.dest}"
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                wrong += _unhelpful(sub)
        if not (action.help and action.help.strip()):
            wrong.append(f"{name}: no help")
            continue
        optional = action.option_strings or action.nargs in ("?", "*")
        if not optional or action.default is argparse.SUPPRESS:
            continue
        if not shows and "%(default)" not in action.help:
            wrong.append(f"{name}: default {action.default!r} not shown")
        elif shows and not re.search(re.escape(f"(default: {action.default})"), text):
            wrong.append(f"{name}: no '(default: {action.default})' in the help")
    return wrong


@pytest.mark.parametrize("script", SCRIPTS, ids=[str(p.relative_to(ROOT)) for p in SCRIPTS])
def test_script_help_parses_and_shows_defaults(
    script: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    parser = _help_of(script, monkeypatch)
    assert "usage:" in capsys.readouterr().out
    wrong = _unhelpful(parser)
    assert not wrong, wrong
