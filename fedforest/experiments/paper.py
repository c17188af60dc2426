"""``fedforest experiment NAME``: the FedForest paper's tables and figures from one command.

The CLI hook: ``fedforest.cli`` calls :func:`add_experiment_subcommand` on its
subparsers; the registered handler calls :func:`run`. Everything else is importable
and callable without argparse (:func:`run_experiment`, :data:`EXPERIMENTS`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache, partial
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._argtypes import int_at_least, n_jobs, out_directory
from ._catalog import CATALOG

if TYPE_CHECKING:
    from ._runner import Experiment, ExperimentResult

# EXPERIMENTS is served by the module __getattr__ below (built on first access).
__all__ = [
    "add_experiment_subcommand",
    "get_experiment",
    "run",
    "run_experiment",
    "tiny_experiment",
]

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


_positive_int = int_at_least(1)
_seed = int_at_least(0)


def _epilog() -> str:
    lines = ["experiments (default reps / paper reps):"]
    for name, entry in CATALOG.items():
        reps = f"{entry.default_reps:>3} / {entry.paper_reps:<4}"
        lines.append(f"  {name:<22} {reps} {entry.summary}")
    lines += [
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
        "communication of every method and the command that reproduces the run. See "
        "docs/results.md.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "name", choices=list(CATALOG), metavar="NAME", help="experiment to run (listed below)"
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

    reps = CATALOG[args.name].default_reps if args.reps is None else args.reps
    try:
        check_seed(args.seed, reps)
    except ValueError as exc:
        parser.error(f"argument --seed: {exc}")
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Run the experiment named in parsed CLI arguments; returns the exit status 0."""
    run_experiment(args.name, reps=args.reps, out=args.out, seed=args.seed, n_jobs=args.n_jobs)
    return 0
