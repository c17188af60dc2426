"""The ``fedforest`` command.

``fedforest simulate`` trains fedforest, a centralized scikit-learn random forest and
per-client forests on the paper's synthetic federation and compares them;
``fedforest experiment swarm-overlap`` runs the swarm-forest experiment (docs/swarm.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["build_parser", "build_swarm_parser", "main"]

SCENARIOS = ("homogeneous", "covariate-shift", "outcome-shift", "both-shifts")
#: The swarm-forest experiments (``fedforest.experiments.swarm.SUBCOMMAND``), named here so
#: that listing the experiments does not import pandas; they have their own options.
SWARM_EXPERIMENTS = ("swarm-overlap",)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fedforest`` command line.

    Parameters
    ----------
    argv : sequence of str or None, default=None
        Arguments without the program name; ``None`` reads ``sys.argv``.

    Returns
    -------
    status : int
        The exit status (0 on success). Usage errors raise ``SystemExit(2)`` as argparse
        does.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] == "experiment" and argv[1].startswith("swarm"):
        return _run_swarm_experiment(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace, argparse.ArgumentParser], int] = args.handler
    return handler(args, parser)


def _run_swarm_experiment(argv: list[str]) -> int:
    """``fedforest experiment swarm-...``: the swarm-forest experiments (their own options)."""
    parser = build_swarm_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace, argparse.ArgumentParser], int] = args.handler
    return handler(args, parser)


def build_swarm_parser() -> argparse.ArgumentParser:
    """The parser of ``fedforest experiment swarm-...`` (the swarm experiments' options)."""
    from .experiments.swarm import add_swarm_subcommand

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
        description="Federated random forests whose splits equal centralized CART.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(
        title="commands", dest="command", required=True, help="what to run"
    )
    _add_simulate(commands)
    from .experiments.paper import add_experiment_subcommand

    experiment = add_experiment_subcommand(commands)
    for action in experiment._actions:
        if action.dest == "name" and action.choices is not None:
            # List every experiment in usage errors, the swarm ones too (main() routes
            # them to their own parser before this one sees them).
            action.choices = [*action.choices, *SWARM_EXPERIMENTS]
    return parser


def _add_simulate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = commands.add_parser(
        "simulate",
        help="compare fedforest with centralized and local forests on synthetic clients",
        description=(
            "Generate the FedForest paper's synthetic federation (Section 5), train "
            "fedforest, a centralized scikit-learn RandomForestRegressor on the pooled rows "
            "and one forest per client, print test MSE, fit time and communication, and "
            "write a PNG. See docs/simulate.md."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = sim.add_argument
    add("--scenario", choices=SCENARIOS, default="covariate-shift", help="data setting")
    add("--clients", type=_int_at_least(1), default=10, help="number of clients K")
    add("--rows-per-client", type=_int_at_least(4), default=200, help="rows per client")
    add("--features", type=_int_at_least(4), default=20, help="number of features d")
    add("--trees", type=_int_at_least(1), default=50, help="trees per forest")
    add("--max-depth", type=_int_at_least(1), default=8, help="maximum tree depth")
    add("--seed", type=_int_at_least(0), default=0, help="seed for data and forests")
    add("--n-bins", type=_int_at_least(2), default=32, help="fedforest quantile candidates B")
    add("--out", type=_png_path, default=Path("fedforest_simulate.png"), help="PNG to write")
    add("--n-jobs", type=int, default=None, help="parallel jobs (scikit-learn semantics)")
    sim.set_defaults(handler=_run_simulate)


def _run_simulate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    out: Path = args.out
    from fedforest.simulate import (
        SimulateConfig,
        format_report,
        reproduce_command,
        run_simulation,
        save_figure,
    )

    config = SimulateConfig(
        scenario=args.scenario,
        clients=args.clients,
        rows_per_client=args.rows_per_client,
        features=args.features,
        trees=args.trees,
        max_depth=args.max_depth,
        seed=args.seed,
        n_bins=args.n_bins,
        n_jobs=args.n_jobs,
    )
    result = run_simulation(config)
    print(format_report(result))
    print(f"wrote {save_figure(result, out)}")
    print(f"reproduce: {reproduce_command(config, out)}")
    return 0


def _png_path(text: str) -> Path:
    """``--out``: checked while parsing, so the error is the subcommand's, before training."""
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"cannot write {text!r}: its directory {str(path.parent)!r} does not exist"
        )
    return path


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = f"int >= {minimum}"
    return parse


def _version() -> str:
    try:
        return version("fedforest")
    except PackageNotFoundError:
        return "unknown (not installed)"


if __name__ == "__main__":
    raise SystemExit(main())
