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
from ._methods import METHOD_ORDER, PRIVACY

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
    reference : str
        Whose numbers ``paper`` holds, as the figure's legend names them ("paper", or
        "FLamby" for FedHeart's baselines, which the paper does not print).
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
    reference: str = "paper"
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


def _task_key(setting: Any, rep: int, seed: int) -> str:
    return json.dumps([setting, rep, seed], default=str)


def _json_value(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else str(value)


def partial_path(out: Path, name: str) -> Path:
    """Where a run keeps its finished (setting, repetition) pairs until it writes its files."""
    return out / f"{name}.partial.jsonl"


def _finished_tasks(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The records of the pairs an interrupted run finished, by task key.

    A line is one pair: ``{"key": ..., "records": [...]}``; a last line cut short by the
    interruption is left out (its pair runs again). Anything else is refused, naming the file.
    """
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    done: dict[str, list[dict[str, Any]]] = {}
    for i, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines):  # the line being written when the run stopped
                break
            entry = None
        records = entry.get("records") if isinstance(entry, dict) else None
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("key"), str)
            and isinstance(records, list)
            and all(isinstance(r, dict) and isinstance(r.get("method"), str) for r in records)
        ):
            raise ValueError(
                f"{path}, line {i}: not a finished repetition of this experiment "
                '({"key": ..., "records": [{"method": ...}, ...]}); delete the file to start over'
            )
        done[entry["key"]] = records
    return done


class ExperimentInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: the pairs it finished are kept for the same command to resume."""


def _collect(
    exp: Experiment, reps: int, seed: int, n_jobs: int | None, progress: bool, partial: Path
) -> tuple[list[dict[str, Any]], int]:
    """Every (setting, repetition) pair's records in order, and how many came from ``partial``.

    Each finished pair is appended to ``partial`` at once, so an interrupted run loses at
    most the pairs in progress; the records are the same whichever run computed them
    (a pair is seeded by its repetition alone).
    """
    tasks = [(s, r) for r in range(reps) for s in exp.settings]
    kept = _finished_tasks(partial)
    results = {key: kept[key] for s, r in tasks if (key := _task_key(s, r, seed)) in kept}
    todo = [(s, r) for s, r in tasks if _task_key(s, r, seed) not in results]
    resumed = len(results)
    bar = progress_bar(
        total=len(tasks), initial=resumed, desc=exp.name, file=sys.stderr, disable=not progress
    )
    try:
        with bar, partial.open("a") as sink:
            if n_jobs is None or n_jobs == 1:
                chunks: Any = (_run_task(exp, s, r, seed) for s, r in todo)
            else:
                jobs = (delayed(_run_task)(exp, s, r, seed) for s, r in todo)
                chunks = Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
            for (s, r), chunk in zip(todo, chunks, strict=True):
                key = _task_key(s, r, seed)
                line = json.dumps({"key": key, "records": chunk}, default=_json_value)
                sink.write(line + "\n")
                sink.flush()
                results[key] = chunk
                bar.update()
    except KeyboardInterrupt:
        raise ExperimentInterrupted(
            f"interrupted: {exp.name} finished {len(results)} of {len(tasks)} (setting, "
            f"repetition) pairs, kept in {partial}; the same command resumes from there"
        ) from None
    records = [rec for s, r in tasks for rec in results[_task_key(s, r, seed)]]
    return records, resumed


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


def _repetitions(n: int) -> str:
    """``"1 repetition"``, ``"5 repetitions"``: how many runs a mean is over."""
    return f"{n} repetition{'' if n == 1 else 's'}"


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


#: Said under every report: the level is not fedforest's default, by design.
PRIVACY_LINE = (
    f'privacy="{PRIVACY}" for every FedForest and Fed Histogram fit (the paper\'s protocol, '
    "by design): the server sees per-client statistics and data values; fedforest's "
    'default is "secure" (docs/privacy.md)'
)


def format_report(exp: Experiment, table: pd.DataFrame, frame: pd.DataFrame | None = None) -> str:
    """Score table (methods × settings), per-group scores and each method's communication."""
    lower = exp.metric == "mse"
    metrics = [exp.metric]
    if frame is not None and "metric" in frame:
        metrics = list(dict.fromkeys(frame["metric"].astype(str))) or metrics
    by = f" by {exp.x}" if len(metrics) > 1 and exp.x else ""
    lines = [
        f"{exp.name}: {exp.title}",
        f"score: {' or '.join(metrics)}{by} ({'lower' if lower else 'higher'}"
        f" is better); mean ± sd over {_repetitions(int(table['n'].max()))}",
        PRIVACY_LINE,
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
        "privacy": PRIVACY,
        "notes": exp.notes,
        "paper": exp.paper,
        "reference": exp.reference,
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
    out.mkdir(parents=True, exist_ok=True)
    partial = partial_path(out, exp.name)
    earlier = [out / f"{exp.name}.{ext}" for ext in ("csv", "json", "png")]
    if echo is not None and (present := [str(p) for p in earlier if p.exists()]):
        echo(f"note: {', '.join(present)} exist (an earlier run); this run replaces them")
    records, resumed = _collect(exp, reps, seed, n_jobs, progress, partial)
    if echo is not None and resumed:
        echo(f"resumed: {resumed} (setting, repetition) pairs read from {partial}")
    frame = pd.DataFrame(records)
    frame.insert(0, "experiment", exp.name)
    table = summarize(exp, frame)
    command = reproduce_command(exp.name, reps, seed, out)
    paths = _write(exp, frame, table, out, {"reps": reps, "seed": seed, "command": command})
    partial.unlink()
    if echo is not None:
        echo(format_report(exp, table, frame))
        echo("wrote " + ", ".join(str(p) for p in paths.values()))
        echo(f"reproduce: {command}")
    return ExperimentResult(exp, frame, paths, command)


def ordered_methods(frame: pd.DataFrame) -> Sequence[str]:
    """Methods present in ``frame`` in the paper's order."""
    return _ordered(frame)


def replot(exp: Experiment, out: str | Path = "results") -> Path:
    """Redraw ``NAME.png`` under ``out`` from the ``NAME.csv`` a run wrote there; runs nothing.

    The table is a file from elsewhere: read as text (pandas' CSV reader) and checked
    (:func:`checked_results`) before it is drawn. Returns the figure's path.
    """
    out = Path(out)
    path = out / f"{exp.name}.csv"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no such file; --replot redraws the figure of a finished run: run "
            f"`fedforest experiment {exp.name} --out {out}` first."
        )
    try:
        frame = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
        raise ValueError(f"{path}: not a CSV table ({type(exc).__name__}: {exc})") from None
    return exp.plot(exp, checked_results(frame, exp, path), out / f"{exp.name}.png")


def checked_results(frame: pd.DataFrame, exp: Experiment, path: Path | str) -> pd.DataFrame:
    """``frame``, read from ``path``, if it is ``exp``'s results table.

    Else a ValueError naming the file, the column and the first offending row (a row of
    the file counts from 2, after its header).

    Checked: the columns the figure reads (``experiment``, ``metric``, ``method``,
    ``score``, ``rep``, the setting's column ``exp.x``), that it names ``exp`` and its
    metric, a method's name as text, scores finite or missing (a method that could not
    run), repetitions whole numbers at least 0, settings present.
    """
    need = ["experiment", "metric", "method", "score", "rep", *([exp.x] if exp.x else [])]
    lacking = [c for c in need if c not in frame.columns]
    if lacking:
        raise ValueError(
            f"{path}: not a results table of `fedforest experiment {exp.name}`: no column "
            f"{', '.join(map(repr, lacking))} (it has {list(map(str, frame.columns))})."
        )
    if frame.empty:
        raise ValueError(f"{path}: the results table has no rows.")

    def refuse(column: str, bad: Any, what: str) -> None:
        rows = np.flatnonzero(np.asarray(bad, dtype=bool))
        if rows.size:
            value = frame[column].iloc[rows[0]]
            value = value.item() if isinstance(value, np.generic) else value
            raise ValueError(
                f"{path}: column {column!r}, row {rows[0] + 2} of the file: {value!r}; {what}."
            )

    refuse("experiment", frame["experiment"].astype(str) != exp.name, f"expected {exp.name!r}")
    refuse("metric", frame["metric"].astype(str) != exp.metric, f"expected {exp.metric!r}")
    refuse(
        "method",
        [not isinstance(m, str) or not m.strip() for m in frame["method"]],
        "a method's name is text",
    )
    score = pd.to_numeric(frame["score"], errors="coerce")
    refuse("score", score.isna() & frame["score"].notna(), "a score is a number (or empty)")
    refuse("score", np.isinf(score.to_numpy(dtype=float)), "a score is finite (or empty)")
    rep = pd.to_numeric(frame["rep"], errors="coerce").to_numpy(dtype=float)
    refuse(
        "rep",
        ~(np.isfinite(rep) & (rep >= 0) & (rep == np.floor(rep))),
        "a repetition is a whole number, 0 or more",
    )
    if exp.x:
        refuse(exp.x, frame[exp.x].isna(), "each row names its setting")
    return frame.assign(score=score, rep=rep.astype(np.int64))
