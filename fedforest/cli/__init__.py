"""The ``fedforest`` command.

``fedforest simulate`` trains fedforest, a centralized scikit-learn random forest and
per-client forests on the paper's synthetic federation and compares them;
``fedforest train`` trains on one CSV or Parquet file per client, ``fedforest predict``,
``fedforest inspect`` and ``fedforest export`` use the model file it writes;
``fedforest flower-worker`` serves a Flower SuperNode's ClientApp; ``fedforest experiment NAME``
runs the papers' experiments (``swarm-overlap``: the swarm forests, docs/swarm.md).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .export import add_export
from .predict import add_inspect, add_predict
from .shared import usage as _usage  # noqa: F401  (its old name, imported by tests)
from .simulate import add_simulate
from .train import _CATEGORY_SPEC as _CATEGORY_SPEC  # its old home (tests import it)
from .train import add_train

__all__ = ["build_parser", "build_swarm_parser", "main"]

#: The swarm-forest experiments (``fedforest.experiments.swarm.SUBCOMMAND``), named here so
#: that listing the experiments does not import pandas; they have their own options.
SWARM_EXPERIMENTS = ("swarm-overlap",)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fedforest`` command line.

    Parameters
    ----------
    argv : sequence of str or None, default=None
        Arguments without the program name; ``None`` reads ``sys.argv``: the program,
        whose process ends after this returns, so every object is then frozen out of
        garbage collection (``gc.freeze``; a shorter exit), and its warnings print as
        ``fedforest: warning: <message>`` (not at the caller's ``<frozen runpy>:88:``).
        Output piped to a reader that stops early (``fedforest inspect m.ffm | head``)
        ends the program quietly (it was a ``BrokenPipeError`` traceback).

    Returns
    -------
    status : int
        The exit status (0 on success). Usage errors raise ``SystemExit(2)`` as argparse
        does.
    """
    if argv is None:  # the program: the process ends when this returns
        warnings.formatwarning = _warning_line
        try:
            status = _main(sys.argv[1:])
            sys.stdout.flush()  # here, so that a closed pipe is caught below
            return status
        except BrokenPipeError:  # the reader has what it wanted: no traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush
            return 1
        finally:
            # Every object out of the collector's passes at exit, which otherwise walk all of
            # scikit-learn's, SciPy's, pandas's and numba's objects: 0.7 to 1.1 s CPU of every
            # `fedforest simulate` (docs/benchmarks.md, "First run"); not when argv is given.
            gc.freeze()
    return _main(list(argv))


def _warning_line(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> str:
    kind = "" if category is UserWarning else f"{category.__name__}: "  # others: say which
    return f"fedforest: warning: {kind}{message}\n"


def _main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "experiment" and argv[1].startswith("swarm"):
        return _run_swarm_experiment(argv[1:])
    if argv and argv[0] == "flower-worker":  # its own options (docs/flower.md)
        from ..transport.flower.worker import main as worker_main

        return worker_main(argv[1:])
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    # A subcommand's errors show its own usage (its parser), not the top-level one.
    command_parser = getattr(args, "command_parser", parser)
    if unknown:  # was the top-level usage and "unrecognized arguments", no hint
        command_parser.error(_unknown_text(unknown, command_parser))
    handler: Callable[[argparse.Namespace, argparse.ArgumentParser], int] = args.handler
    return handler(args, command_parser)


def _unknown_text(unknown: list[str], parser: argparse.ArgumentParser) -> str:
    """The "unrecognized arguments" error, with the options a misspelt one was meant as."""
    import difflib

    options = [o for action in parser._actions for o in action.option_strings]
    meant = []
    for arg in unknown:
        if arg.startswith("--"):
            close = difflib.get_close_matches(arg.partition("=")[0], options, n=1, cutoff=0.6)
            meant += [f"{close[0]} for {arg.partition('=')[0]}"] if close else []
    hint = f" (did you mean {', '.join(meant)}? see {parser.prog} --help)" if meant else ""
    return f"unrecognized arguments: {' '.join(unknown)}{hint}"


def _run_swarm_experiment(argv: list[str]) -> int:
    """``fedforest experiment swarm-...``: the swarm-forest experiments (their own options)."""
    from ..experiments.swarm import run_interruptible

    parser = build_swarm_parser()
    return run_interruptible(parser.parse_args(argv), parser)


def build_swarm_parser() -> argparse.ArgumentParser:
    """The parser of ``fedforest experiment swarm-...`` (the swarm experiments' options)."""
    from ..experiments.swarm import add_swarm_subcommand

    parser = argparse.ArgumentParser(prog="fedforest experiment")
    names = parser.add_subparsers(
        title="swarm experiments", dest="name", required=True, help="swarm experiment to run"
    )
    add_swarm_subcommand(names)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fedforest`` command and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="fedforest",
        description=(
            "Federated random forests whose splits follow centralized CART on the pooled "
            "rows, while the rows stay with their clients."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(
        title="commands", dest="command", required=True, help="what to run"
    )
    add_simulate(commands)
    add_train(commands)
    add_predict(commands)
    add_inspect(commands)
    add_export(commands)
    commands.add_parser(
        "flower-worker",
        help="serve a Flower SuperNode's ClientApp tasks in one process (--isolation process)",
        add_help=False,  # main() routes it to the worker's own parser: see its --help
    )
    from ..experiments.paper import add_experiment_subcommand

    experiment = add_experiment_subcommand(commands)
    for action in experiment._actions:
        if action.dest == "name" and action.choices is not None:
            # List every experiment in usage errors, the swarm ones too (main() routes
            # them to their own parser before this one sees them).
            action.choices = [*action.choices, *SWARM_EXPERIMENTS]
    return parser


def _version() -> str:
    try:
        return version("fedforest")
    except PackageNotFoundError:
        return "unknown (not installed)"
