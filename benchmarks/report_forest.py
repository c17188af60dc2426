"""A Markdown section and a plot of fit time against rows from ``bench_forest.py``'s JSON.

``bench_forest.py --markdown FILE --plot PNG`` calls this after its run; to redo the report
of a stored run::

    python benchmarks/report_forest.py results.json --markdown section.md \\
        --plot docs/img/bench-fit-time.png

The section states what a reader needs to trust the numbers: the date, the command, the
machine and its load, the commit (and whether the tree had uncommitted changes), then one
table per size with every method's fit time and its ratios to scikit-learn and XGBoost,
and the plot (log-log: fit time against training rows, one line per system).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

#: The systems' names in the report, in the order of the legend.
LABELS = {
    "fedforest": "fedforest",
    "sklearn": "scikit-learn RF",
    "xgboost": "XGBoost RF",
    "lightgbm": "LightGBM RF",
}


def _num(value: Any, spec: str, unit: str = "") -> str:
    return "-" if value is None else format(value, spec) + unit


def fit_times(payload: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Per method, (training rows, best fit seconds) of every size it ran without error."""
    series: dict[str, list[tuple[int, float]]] = {}
    for run in payload["runs"]:
        for r in run["results"]:
            if "error" not in r:
                series.setdefault(r["method"], []).append((run["n_train"], r["fit_seconds_best"]))
    return {m: sorted(points) for m, points in series.items()}


def _ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or den is None or den <= 0 else num / den


def size_table(run: dict[str, Any]) -> list[str]:
    """One size's Markdown table: fit time, ratios, accuracy, memory, contention."""
    ok = {r["method"]: r for r in run["results"] if "error" not in r}
    sk = ok.get("sklearn", {}).get("fit_seconds_best")
    xgb = ok.get("xgboost", {}).get("fit_seconds_best")
    sk_mse = ok.get("sklearn", {}).get("test_mse")
    lines = [
        f"**{run['n_train']:,} training rows**",
        "",
        "| system | fit s (best) | fit s (median) | / scikit-learn | / XGBoost "
        "| test MSE | MSE vs scikit-learn | peak MB | bg cores |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in run["results"]:
        name = LABELS.get(r["method"], r["method"])
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error']} | | | | | | | |")
            continue
        t = r["fit_seconds_best"]
        gap = _ratio(r["test_mse"], sk_mse)
        lines.append(
            f"| {name} | {t:.3f} | {r['fit_seconds_median']:.3f} "
            f"| {_num(_ratio(t, sk), '.2f', 'x')} | {_num(_ratio(t, xgb), '.2f', 'x')} "
            f"| {r['test_mse']:.4f} | {_num(gap, '.3f')} "
            f"| {_num(r.get('peak_rss_delta_mb'), '.0f')} "
            f"| {_num(r.get('background_cores_best'), '.2f')} |"
        )
    return lines


def markdown(payload: dict[str, Any], plot_path: str | None = None) -> str:
    """The report's Markdown section (``plot_path``: the PNG's path relative to the doc)."""
    machine, settings = payload["machine"], payload["settings"]
    src = machine.get("fedforest_source", {})
    commit = src.get("git_commit")
    where = "not a git checkout" if commit is None else f"commit `{commit[:12]}`"
    if src.get("git_dirty"):
        where += " with uncommitted changes"
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items() if v)
    load_end = payload.get("load_average_end")
    load = "" if load_end is None else f"; load average at the end {load_end[0]:.2f}"
    lines = [
        f"## Fit time against rows ({payload['date_utc'][:10]}, {where})",
        "",
        f"Measured from {payload['date_utc']} to {payload['finished_utc']} UTC on "
        f"{machine['cpu']}, {machine['logical_cores']} logical cores, "
        f"{_num(machine.get('memory_gb'), '.1f')} GB{load}; {versions}. "
        f"Every system: {settings['n_estimators']} trees, depth {settings['max_depth']}, "
        f"leaf {settings['min_samples_leaf']}, {settings['features_per_node']} of "
        f"{settings['n_features']} features per node, n_jobs={settings['n_jobs']}, best of "
        f"{settings['repeats']} fit(s) after a warm-up; fedforest with "
        f"{settings['n_clients']} simulated clients, `privacy={settings['fedforest_privacy']!r}`, "
        f"`binning={settings['fedforest_binning']!r}`, {settings['fedforest_n_bins']} bins. "
        "`bg` is the CPU other processes took during the best fit (of "
        f"{machine['logical_cores']} cores): a large one means the times are contended.",
        "",
        "<!-- docs-run: skip (a benchmark: minutes to an hour; the tables are its output) -->",
        "```bash",
        payload["command"],
        "```",
        "",
    ]
    for run in payload["runs"]:
        lines += size_table(run) + [""]
    if plot_path is not None:
        lines += [f"![Fit time against training rows]({plot_path})", ""]
    return "\n".join(lines)


def plot(payload: dict[str, Any], path: Path) -> None:
    """Fit time against training rows, log-log, one line per system."""
    import matplotlib

    if "MPLBACKEND" not in os.environ:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = fit_times(payload)
    if not series:
        raise ValueError("no method ran without error: nothing to plot")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for method in sorted(series, key=lambda m: list(LABELS).index(m) if m in LABELS else 99):
        rows, seconds = zip(*series[method], strict=True)
        ax.plot(rows, seconds, marker="o", label=LABELS.get(method, method))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training rows")
    ax.set_ylabel("fit time (s, best of repeats)")
    settings = payload["settings"]
    ax.set_title(
        f"{settings['n_estimators']} trees, depth {settings['max_depth']}, "
        f"{settings['n_jobs']} threads ({payload['date_utc'][:10]})"
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(payload: dict[str, Any], markdown_path: Path | None, plot_path: Path | None) -> None:
    """Write the plot and the section; the section links the plot relative to itself."""
    if plot_path is not None:
        plot(payload, plot_path)
    if markdown_path is not None:
        link = None
        if plot_path is not None:
            link = os.path.relpath(plot_path.resolve(), markdown_path.resolve().parent)
        markdown_path.parent.mkdir(parents=True, exist_ok=True)
        markdown_path.write_text(markdown(payload, link) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("results", type=Path, help="the JSON file bench_forest.py wrote")
    p.add_argument("--markdown", type=Path, help="write the Markdown section here")
    p.add_argument("--plot", type=Path, help="write the plot (PNG) here")
    args = p.parse_args(argv)
    try:
        payload = json.loads(args.results.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(
            f"{args.results}: cannot be read as bench_forest.py's JSON ({exc})"
        ) from None
    if args.markdown is None and args.plot is None:
        print(markdown(payload))
    write(payload, args.markdown, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
