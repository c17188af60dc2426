"""``fedforest experiment NAME``: the FedForest paper's tables and figures from one command.

The CLI hook: ``fedforest.cli`` calls :func:`add_experiment_subcommand` on its
subparsers; the registered handler calls :func:`run`. Everything else is importable
and callable without argparse (:func:`run_experiment`, :data:`EXPERIMENTS`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cache, partial
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._argtypes import int_at_least, n_jobs, out_directory, unwritable_directory
from ._catalog import CATALOG

if TYPE_CHECKING:
    from ._runner import Experiment, ExperimentResult

# EXPERIMENTS is served by the module __getattr__ below (built on first access).
__all__ = [
    "ALL",
    "add_experiment_subcommand",
    "get_experiment",
    "replot",
    "run",
    "run_all",
    "run_experiment",
    "tiny_experiment",
]

#: ``fedforest experiment all``: every experiment of the catalogue, then the swarm one.
ALL = "all"
#: The swarm experiment ``all`` runs last, in a folder of its own under ``--out``.
SWARM = "swarm-overlap"

#: Small versions for tests: run keyword overrides and how many settings to keep.
_TINY_FOREST = {"n_estimators": 3, "max_depth": 3}
_TINY_SYNTHETIC = {"size": {"n_clients": 4, "n_per_client": 30, "n_features": 5}}
_TINY_REAL: Mapping[str, tuple[dict[str, Any], int]] = MappingProxyType(
    {
        "fedheart": ({}, 1),
        "table3-fragmentation": ({"n_rows": 200}, 2),
        "appendix-b": ({}, 2),
    }
)


@cache
def _registry() -> Mapping[str, Experiment]:
    # Imported on first use: listing the experiments in the CLI stays light.
    from .real import REAL_EXPERIMENTS
    from .synthetic import SYNTHETIC_EXPERIMENTS

    every = {**SYNTHETIC_EXPERIMENTS, **REAL_EXPERIMENTS}
    return MappingProxyType({name: every[name] for name in CATALOG})


def __getattr__(name: str) -> Any:
    """``EXPERIMENTS``: every experiment by its CLI name, built on first access."""
    if name == "EXPERIMENTS":
        return _registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name`` (see :data:`EXPERIMENTS`)."""
    if name not in CATALOG:
        raise ValueError(f"Unknown experiment {name!r}; choose one of {list(CATALOG)}.")
    return _registry()[name]


def tiny_experiment(name: str) -> Experiment:
    """A fast version of an experiment: small data, 3 trees of depth 3, few settings.

    Used by the tests; the outputs have the same structure as the full run's.
    """
    exp = get_experiment(name)
    options, n_settings = _TINY_REAL.get(name, (_TINY_SYNTHETIC, 2))
    run_fn: Callable[..., list[dict[str, Any]]] = exp.run
    run = partial(run_fn, forest=_TINY_FOREST, **options)
    return replace(exp, run=run, settings=exp.settings[:n_settings])


def run_experiment(
    name: str | Experiment,
    *,
    reps: int | None = None,
    out: str | Path = "results",
    seed: int = 0,
    n_jobs: int | None = None,
    progress: bool = True,
    echo: Any = print,
) -> ExperimentResult:
    """Run one experiment and write ``NAME.csv``, ``NAME.json`` and ``NAME.png``.

    Parameters
    ----------
    name : str or Experiment
        A name of :data:`EXPERIMENTS` (or an experiment object).
    reps : int or None
        Repetitions; None uses the experiment's default (a few minutes on 2 cores).
    out : path, default="results"
    seed : int, default=0
    n_jobs : int or None
        Worker processes over repetitions and settings.
    progress : bool, default=True
    echo : callable or None, default=print

    Returns
    -------
    result : ExperimentResult
    """
    from ._runner import run_experiment as _run

    exp = get_experiment(name) if isinstance(name, str) else name
    return _run(exp, reps=reps, out=out, seed=seed, n_jobs=n_jobs, progress=progress, echo=echo)


def replot(name: str | Experiment, out: str | Path = "results") -> Path:
    """Redraw ``NAME.png`` in ``out`` from the ``NAME.csv`` a run wrote there; runs nothing.

    For a figure's look after the code that draws it changed (a finished run's table is
    all it needs). The table is checked as a file from elsewhere: its columns, the
    experiment and metric it names, finite scores; a ValueError names the file, the
    column and the row.

    Returns
    -------
    path : Path
        The figure written.
    """
    from ._runner import replot as _replot

    return _replot(get_experiment(name) if isinstance(name, str) else name, out)


def _finished(out: Path, name: str) -> tuple[Any, Any] | None:
    """The repetitions and seed of a finished run's ``NAME.json`` in ``out`` (None: none)."""
    path = out / f"{name}.json"
    if not (path.exists() and (out / f"{name}.png").exists() and (out / f"{name}.csv").exists()):
        return None
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):  # cut short, or not ours: run again
        return None
    return (meta.get("reps"), meta.get("seed")) if isinstance(meta, dict) else None


def run_all(
    *,
    reps: int | None = None,
    out: str | Path = "results",
    seed: int = 0,
    n_jobs: int | None = None,
    progress: bool = True,
    echo: Any = print,
    experiments: Mapping[str, Experiment] | None = None,
    swarm_options: Sequence[str] | None = (),
) -> int:
    """``fedforest experiment all``: every experiment into ``out``, resumable.

    An experiment whose ``NAME.csv``, ``NAME.json`` and ``NAME.png`` in ``out`` record the
    same repetitions and seed is skipped, so the same command after an interruption goes
    on where it stopped (inside an experiment too: :func:`run_experiment` keeps its
    finished repetitions). The swarm experiment runs last into ``out/swarm-overlap`` at
    its own defaults (``swarm_options`` added; None leaves it out).

    Returns
    -------
    status : int
        0.
    """
    out = Path(out)
    todo: Mapping[str, Any] = experiments if experiments is not None else dict.fromkeys(CATALOG)
    n = len(todo) + (swarm_options is not None)
    for i, (name, exp) in enumerate(todo.items(), 1):
        r = reps if reps is not None else (exp or get_experiment(name)).default_reps
        if _finished(out, name) == (r, seed):
            echo(f"[{i}/{n}] {name}: done, {out / name}.csv/.json/.png ({r} reps, seed {seed})")
            continue
        _step(progress, f"[{i}/{n}] {name}: {r} repetition{'s' * (r != 1)}, seed {seed}")
        run_experiment(
            exp or name, reps=r, out=out, seed=seed, n_jobs=n_jobs, progress=progress, echo=echo
        )
    if swarm_options is not None:
        _run_swarm(out / SWARM, n, reps, seed, n_jobs, list(swarm_options), echo)
    swarm = f", the swarm experiment's files in {out / SWARM}/" if swarm_options is not None else ""
    echo(
        f"all done: every experiment's NAME.csv (one row per repetition, setting and "
        f"method), NAME.json (summary, the paper's values, settings) and NAME.png are in "
        f"{out}/{swarm}"
    )
    return 0


def _step(progress: bool, line: str) -> None:
    if progress:  # beside the progress bars, on stderr
        print(line, file=sys.stderr, flush=True)


def _run_swarm(
    out: Path, n: int, reps: int | None, seed: int, n_jobs: int | None, extra: list[str], echo: Any
) -> None:
    from .swarm import add_swarm_subcommand

    argv = [SWARM, "--out", str(out), "--seed", str(seed), *extra]
    argv += ["--reps", str(reps)] if reps is not None else []
    argv += ["--n-jobs", str(n_jobs)] if n_jobs is not None else []
    marker = out / "all.json"  # the options of the run that finished, written after it
    if marker.exists() and marker.read_text() == json.dumps(argv):
        echo(f"[{n}/{n}] {SWARM}: done, {out}/ ({' '.join(argv[1:])})")
        return
    _step(True, f"[{n}/{n}] {SWARM}: {' '.join(argv[1:])}")
    parser = argparse.ArgumentParser(prog="fedforest experiment")
    add_swarm_subcommand(parser.add_subparsers(dest="name", required=True))
    args = parser.parse_args(argv)
    args.handler(args, parser)
    marker.write_text(json.dumps(argv))


_positive_int = int_at_least(1)
_seed = int_at_least(0)


def _epilog() -> str:
    lines = ["experiments (default reps / paper reps):"]
    for name, entry in CATALOG.items():
        reps = f"{entry.default_reps:>3} / {entry.paper_reps:<4}"
        lines.append(f"  {name:<22} {reps} {entry.summary}")
    lines += [
        f"  {ALL:<22} every experiment above into --out, then swarm-overlap into",
        f"  {'':<22} --out/swarm-overlap; rerun to resume (finished ones are skipped)",
        "",
        "swarm forests (own options: fedforest experiment swarm-overlap --help):",
        "  swarm-overlap          peers x feature overlap, Tables II/III, CD diagram",
    ]
    return "\n".join(lines)


def add_experiment_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``experiment NAME [--reps N] [--out DIR] [--seed S] [--n-jobs J]``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The ``fedforest`` command's subparsers (``parser.add_subparsers(...)``).

    Returns
    -------
    parser : ArgumentParser
        The ``experiment`` subparser; its handler (``set_defaults(handler=...)``) takes
        ``(args, parser)`` like the other subcommands and returns the exit status.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "experiment",
        help="regenerate a table or figure of the FedForest paper",
        description="Run one of the FedForest paper's experiments on data that ships with "
        "fedforest; write NAME.csv, NAME.json and NAME.png; print the scores, the "
        "communication of every method and the command that reproduces the run. Every "
        'FedForest and Fed Histogram fit runs under privacy="none", the paper\'s protocol '
        '(fedforest\'s default is "secure", under which the + H and AvgImp/Top-L variants '
        "are refused; docs/privacy.md). See docs/results.md.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "name",
        choices=[*CATALOG, ALL],
        metavar="NAME",
        help="experiment to run (listed below), or all: every one, resumable",
    )
    parser.add_argument(
        "--reps",
        type=_positive_int,
        default=None,
        help="repetitions (default: the experiment's, a few minutes on 2 "
        "cores; the paper's counts are listed below)",
    )
    parser.add_argument(
        "--out",
        type=out_directory,
        default=Path("results"),
        help="output directory (created; default: results)",
    )
    parser.add_argument("--seed", type=_seed, default=0, help="base seed (default: 0)")
    parser.add_argument(
        "--replot",
        action="store_true",
        help="run nothing: redraw NAME.png from the NAME.csv a finished run wrote in --out "
        "(all: every experiment whose NAME.csv is there)",
    )
    parser.add_argument(
        "--n-jobs",
        type=n_jobs,
        default=None,
        help="worker processes over repetitions (default: 1)",
    )
    parser.set_defaults(handler=_handler, command_parser=parser)
    return parser


def _handler(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Options checked against each other (the seed against the repetitions) before the run."""
    from ._runner import check_seed

    names = list(CATALOG) if args.name == ALL else [args.name]
    reps = max(CATALOG[n].default_reps for n in names) if args.reps is None else args.reps
    try:
        check_seed(args.seed, reps)
    except ValueError as exc:
        parser.error(f"argument --seed: {exc}")
    if not args.replot and (why := unwritable_directory(args.out)):
        parser.error(f"argument --out: {why}")  # it was a traceback from mkdir
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Run the experiment(s) named in parsed CLI arguments; returns the exit status.

    0 when done; 130 after Ctrl-C, with a line saying what was kept and how to resume
    (it was a traceback, and the finished repetitions were lost).
    """
    if getattr(args, "replot", False):
        return _replot_cli(args.name, args.out)
    try:
        if args.name == ALL:
            return run_all(reps=args.reps, out=args.out, seed=args.seed, n_jobs=args.n_jobs)
        run_experiment(args.name, reps=args.reps, out=args.out, seed=args.seed, n_jobs=args.n_jobs)
    except KeyboardInterrupt as exc:
        kept = str(exc) or "interrupted; rerun the same command to go on"
        print(f"\nfedforest experiment: {kept}", file=sys.stderr)
        return 130
    return 0


def _replot_cli(name: str, out: Path) -> int:
    """``fedforest experiment NAME --replot``: 0 when every figure was redrawn, else 1."""
    names = [n for n in CATALOG if (out / f"{n}.csv").is_file()] if name == ALL else [name]
    if not names:
        print(f"fedforest experiment: no NAME.csv of any experiment in {out}", file=sys.stderr)
        return 1
    status = 0
    for each in names:
        try:
            print(f"{each}: redrawn {replot(each, out)}")
        except (OSError, ValueError) as exc:
            print(f"fedforest experiment {each} --replot: {exc}", file=sys.stderr)
            status = 1
    return status
