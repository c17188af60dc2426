"""Running an experiment: repetitions in parallel, progress bar, CSV / JSON / PNG, report.

An :class:`Experiment` is a list of settings (a shift scale, a number of clients, a
dataset ...) and a function that runs every method once on one setting for one
repetition and returns one record per method. :func:`run_experiment` runs all
(setting, repetition) pairs, writes the results and prints the summary, the
communication each method used and the command that reproduces the run.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from .._argtypes import MAX_SEED
from .._progress import progress_bar
from ._methods import METHOD_ORDER

#: run(setting, rep, seed, n_jobs) -> one record (dict) per method.
RunFn = Callable[[Any, int, int, "int | None"], list[dict[str, Any]]]
PlotFn = Callable[["Experiment", pd.DataFrame, Path], Path]


@dataclass(frozen=True)
class Experiment:
    """One table or figure of the paper.

    Attributes
    ----------
    name : str
        The CLI name, e.g. ``"fig2-homogeneous"``.
    title : str
        What the paper shows there.
    run : callable
        ``run(setting, rep, seed, n_jobs) -> list of records``; each record has at
        least ``method``, ``metric``, ``score``, ``rounds``, ``megabytes``, ``note``.
    plot : callable
        ``plot(experiment, frame, path) -> path``.
    settings : tuple
        Values of the swept variable (``(None,)`` when nothing is swept).
    x : str or None
        Record column that holds the setting (the x axis of line plots).
    metric : str
        ``"mse"`` (lower is better), ``"accuracy"`` or ``"r2"``.
    default_reps : int
        Repetitions that run in a few minutes on 2 cores.
    paper_reps : int
        Repetitions of the paper (or our choice where it does not say; see ``notes``).
    paper : dict
        Numbers the paper prints: ``{method: {setting: value}}`` (``setting`` as str).
    notes : str
        Data settings and any deviation from the paper.
    """

    name: str
    title: str
    run: RunFn
    plot: PlotFn
    settings: tuple[Any, ...] = (None,)
    x: str | None = None
    metric: str = "mse"
    default_reps: int = 10
    paper_reps: int = 20
    paper: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: str = ""


@dataclass(frozen=True, eq=False)
class ExperimentResult:
    """Records of every (setting, repetition, method) and the files written."""

    experiment: Experiment
    frame: pd.DataFrame
    paths: dict[str, Path]
    command: str


def reproduce_command(name: str, reps: int, seed: int, out: Path) -> str:
    """The ``fedforest experiment`` command line that reruns a run."""
    argv = ["fedforest", "experiment", name, "--reps", str(reps), "--seed", str(seed)]
    return shlex.join([*argv, "--out", str(out)])


def _seed(seed: int, rep: int) -> int:
    return int(seed) * 1_000 + rep


#: The most an experiment adds to a repetition's seed (real.py: FLamby's split, seed + 43).
SEED_OFFSETS = 43


def check_seed(seed: int, reps: int) -> None:
    """Refuse a base seed whose repetitions' seeds (``1000 * seed + r``) NumPy refuses.

    ``--seed 4294967295`` ran the set-up, then stopped in NumPy's "Seed must be between 0
    and 2**32 - 1" traceback.
    """
    if not 0 <= _seed(seed, reps - 1) + SEED_OFFSETS <= MAX_SEED:
        top = (MAX_SEED - SEED_OFFSETS - (reps - 1)) // 1_000
        raise ValueError(
            f"seed {seed}: repetition r is seeded 1000 * seed + r (and up to {SEED_OFFSETS} "
            f"more), which must lie in [0, 2**32 - 1]; with {reps} repetitions give a seed "
            f"in [0, {top}]"
        )


def _run_task(exp: Experiment, setting: Any, rep: int, seed: int) -> list[dict[str, Any]]:
    records = exp.run(setting, rep, _seed(seed, rep), 1)
    for r in records:
        r.setdefault("rep", rep)
    return records


def _collect(
    exp: Experiment, reps: int, seed: int, n_jobs: int | None, progress: bool
) -> list[dict[str, Any]]:
    tasks = [(s, r) for r in range(reps) for s in exp.settings]
    bar = progress_bar(total=len(tasks), desc=exp.name, file=sys.stderr, disable=not progress)
    records: list[dict[str, Any]] = []
    with bar:
        if n_jobs is None or n_jobs == 1:
            for setting, rep in tasks:
                records += _run_task(exp, setting, rep, seed)
                bar.update()
        else:
            jobs = (delayed(_run_task)(exp, s, r, seed) for s, r in tasks)
            for chunk in Parallel(n_jobs=n_jobs, return_as="generator")(jobs):
                records += chunk
                bar.update()
    return records


def _ordered(frame: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(frame["method"]))
    return [m for m in METHOD_ORDER if m in present] + [m for m in present if m not in METHOD_ORDER]


def summarize(exp: Experiment, frame: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation of the score per method (and setting).

    Returns
    -------
    table : DataFrame
        Columns ``method`` [, ``exp.x``], ``mean``, ``std``, ``n``, ``rounds``,
        ``megabytes``, ``note``.
    """
    keys = ["method"] + ([exp.x] if exp.x else [])
    main = frame[frame.get("group", pd.Series("all", index=frame.index)) == "all"]
    grouped = main.groupby(keys, sort=False, dropna=False)
    table = grouped.agg(
        mean=("score", "mean"),
        std=("score", "std"),
        n=("score", "count"),
        rounds=("rounds", "mean"),
        megabytes=("megabytes", "mean"),
        note=("note", lambda s: next((v for v in s if v), "")),
    ).reset_index()
    order = {m: i for i, m in enumerate(_ordered(frame))}
    return table.sort_values(keys, key=lambda c: c.map(order) if c.name == "method" else c)


def _fmt(mean: float, std: float) -> str:
    if np.isnan(mean):
        return "n/a"
    return f"{mean:.3f}" if np.isnan(std) else f"{mean:.3f} ± {std:.3f}"


def _group_table(frame: pd.DataFrame) -> str:
    """Mean score per method and group (e.g. per FedHeart center), or "" without groups."""
    if "group" not in frame or frame["group"].nunique() < 2:
        return ""
    wide = frame.pivot_table(
        index="method", columns="group", values="score", aggfunc="mean", sort=False, dropna=False
    )
    wide = wide.loc[[m for m in _ordered(frame) if m in wide.index]]
    return "\nmean score by group:\n" + wide.to_string(float_format=lambda v: f"{v:.3f}")


def format_report(exp: Experiment, table: pd.DataFrame, frame: pd.DataFrame | None = None) -> str:
    """Score table (methods × settings), per-group scores and each method's communication."""
    lower = exp.metric == "mse"
    lines = [
        f"{exp.name}: {exp.title}",
        f"score: {exp.metric} ({'lower' if lower else 'higher'}"
        " is better); mean ± sd over repetitions",
        "",
    ]
    cells = table.assign(
        cell=[_fmt(m, s) for m, s in zip(table["mean"], table["std"], strict=True)]
    )
    if exp.x:
        wide = cells.pivot(index="method", columns=exp.x, values="cell")
        wide = wide.loc[[m for m in _ordered(cells) if m in wide.index]]
        wide.columns = [f"{exp.x}={c}" for c in wide.columns]
        lines.append(wide.to_string())
    else:
        lines.append(
            cells.set_index("method")[["cell"]].rename(columns={"cell": exp.metric}).to_string()
        )
    if frame is not None and (groups := _group_table(frame)):
        lines.append(groups)
    comm = table.groupby("method", sort=False)[["rounds", "megabytes"]].mean()
    lines += ["", "communication per fit (mean; MB = 10^6 bytes, both directions):"]
    for method, row in comm.iterrows():
        rounds = "-" if np.isnan(row["rounds"]) else f"{row['rounds']:.0f}"
        mb = "-" if np.isnan(row["megabytes"]) else f"{row['megabytes']:.3f}"
        lines.append(f"  {method:<28} rounds {rounds:>4}   MB {mb:>10}")
    missing = table[table["mean"].isna()].drop_duplicates("method")
    for _, row in missing.iterrows():
        lines.append(f"  {row['method']}: {row['note'] or 'no score'}")
    return "\n".join(lines)


def _write(
    exp: Experiment, frame: pd.DataFrame, table: pd.DataFrame, out: Path, meta: dict[str, Any]
) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{exp.name}.csv", "json": out / f"{exp.name}.json"}
    frame.to_csv(paths["csv"], index=False)
    payload = {
        **meta,
        "experiment": exp.name,
        "title": exp.title,
        "metric": exp.metric,
        "notes": exp.notes,
        "paper": exp.paper,
        "summary": json.loads(table.to_json(orient="records")),
        "records": json.loads(frame.to_json(orient="records")),
    }
    paths["json"].write_text(json.dumps(payload, indent=1))
    paths["png"] = exp.plot(exp, frame, out / f"{exp.name}.png")
    return paths


def run_experiment(
    exp: Experiment,
    *,
    reps: int | None = None,
    out: str | Path = "results",
    seed: int = 0,
    n_jobs: int | None = None,
    progress: bool = True,
    echo: Callable[[str], Any] | None = print,
) -> ExperimentResult:
    """Run ``exp`` and write ``NAME.csv``, ``NAME.json`` and ``NAME.png`` under ``out``.

    Parameters
    ----------
    exp : Experiment
    reps : int or None
        Repetitions; None uses ``exp.default_reps``.
    out : path, default="results"
        Output directory (created).
    seed : int, default=0
        Repetition ``r`` uses seed ``1000 * seed + r`` for its data and models.
    n_jobs : int or None
        Worker processes over (setting, repetition) pairs; None or 1 runs in process.
    progress : bool, default=True
        Show a tqdm progress bar on stderr.
    echo : callable or None, default=print
        Where the report goes; None prints nothing.

    Returns
    -------
    result : ExperimentResult
    """
    reps = exp.default_reps if reps is None else int(reps)
    if reps < 1:
        raise ValueError(f"The 'reps' parameter must be >= 1. Got {reps!r} instead.")
    check_seed(seed, reps)
    out = Path(out)
    frame = pd.DataFrame(_collect(exp, reps, seed, n_jobs, progress))
    frame.insert(0, "experiment", exp.name)
    table = summarize(exp, frame)
    command = reproduce_command(exp.name, reps, seed, out)
    paths = _write(exp, frame, table, out, {"reps": reps, "seed": seed, "command": command})
    if echo is not None:
        echo(format_report(exp, table, frame))
        echo("wrote " + ", ".join(str(p) for p in paths.values()))
        echo(f"reproduce: {command}")
    return ExperimentResult(exp, frame, paths, command)


def ordered_methods(frame: pd.DataFrame) -> Sequence[str]:
    """Methods present in ``frame`` in the paper's order."""
    return _ordered(frame)
