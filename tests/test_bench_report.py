"""benchmarks/bench_forest.py's report: a real (tiny) run written as Markdown and a plot.

docs/benchmarks.md's "Fit time against rows" section is this output at full size; the test
checks that a run's JSON becomes a section naming the command, the machine, the date and
the commit, with one table per size whose ratios are the measured times', and a PNG.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    sys.path.insert(0, str(BENCH))
    try:
        bench = _load("bench_forest")
        out = tmp_path_factory.mktemp("bench")
        argv = ["--sizes", "300", "600", "--repeats", "1", "--n-jobs", "1"]
        argv += ["--skip", "xgboost", "lightgbm", "--out", str(out / "r.json")]
        argv += ["--markdown", str(out / "doc" / "s.md"), "--plot", str(out / "img" / "t.png")]
        assert bench.main(argv) == 0
        yield out, json.loads((out / "r.json").read_text())
    finally:
        sys.path.remove(str(BENCH))
        for name in ("bench_forest", "report_forest"):
            sys.modules.pop(name, None)


def test_the_section_names_command_machine_date_commit_and_every_measured_time(run):
    out, payload = run
    text = (out / "doc" / "s.md").read_text()
    assert payload["command"] in text and "--markdown" in payload["command"]
    assert payload["machine"]["cpu"] in text and payload["date_utc"][:10] in text
    commit = payload["machine"]["fedforest_source"].get("git_commit")
    if commit is not None:
        assert commit[:12] in text
    for size in payload["runs"]:
        times = {r["method"]: r["fit_seconds_best"] for r in size["results"]}
        assert set(times) == {"fedforest", "sklearn"}, size["results"]
        assert f"**{size['n_train']:,} training rows**" in text
        ratio = times["fedforest"] / times["sklearn"]
        assert f"| fedforest | {times['fedforest']:.3f} |" in text
        assert f"| {ratio:.2f}x |" in text
    assert "![Fit time against training rows](../img/t.png)" in text


def test_the_plot_is_a_png_with_a_line_per_system(run):
    out, payload = run
    png = (out / "img" / "t.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000
    report = sys.modules["report_forest"]
    series = report.fit_times(payload)
    assert set(series) == {"fedforest", "sklearn"}
    assert [n for n, _ in series["sklearn"]] == [300, 600]


def test_a_failed_method_is_reported_not_plotted():
    report = _load("report_forest")
    try:
        payload = {
            "runs": [
                {
                    "n_train": 10,
                    "results": [{"method": "xgboost", "n_train": 10, "error": "ImportError: x"}],
                }
            ]
        }
        assert report.fit_times(payload) == {}
        assert "failed: ImportError: x" in "\n".join(report.size_table(payload["runs"][0]))
        with pytest.raises(ValueError, match="nothing to plot"):
            report.plot(payload, Path("unused.png"))
    finally:
        sys.modules.pop("report_forest", None)
