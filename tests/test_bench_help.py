"""Every benchmark script's command line parses: ``--help`` exits 0 (a script whose parser
defines an option twice crashes on any invocation, found in bench_privacy.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(
    path
    for path in BENCHMARKS.glob("*.py")
    if "argparse" in (text := path.read_text()) and "def main(" in text
)


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_benchmark_help_parses(script: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setattr(sys, "argv", [script.name, "--help"])
    spec = importlib.util.spec_from_file_location(f"_bench_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as stop:
        module.main()
    assert stop.value.code == 0
    assert "usage:" in capsys.readouterr().out
