"""``fedforest simulate``: the paper's synthetic federation, fedforest against others.

Centralized and local forests; the job itself is :mod:`fedforest.simulate`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .._argtypes import MAX_SEED, DefaultsHelpFormatter, int_at_least, n_jobs
from .shared import add_privacy

SCENARIOS = ("homogeneous", "covariate-shift", "outcome-shift", "both-shifts")


def add_simulate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``fedforest simulate`` and its options."""
    sim = commands.add_parser(
        "simulate",
        help="compare fedforest with centralized and local forests on synthetic clients",
        description=(
            "Generate the FedForest paper's synthetic federation (Section 5), train "
            "fedforest, a centralized scikit-learn RandomForestRegressor on the pooled rows "
            "and one forest per client, print test MSE, fit time and communication, and "
            "write a PNG. See docs/simulate.md."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    add = sim.add_argument
    add("--scenario", choices=SCENARIOS, default="covariate-shift", help="data setting")
    add("--clients", type=int_at_least(1), default=10, help="number of clients K")
    add("--rows-per-client", type=int_at_least(4), default=200, help="rows per client")
    add("--features", type=int_at_least(4), default=20, help="number of features d")
    add("--trees", type=int_at_least(1), default=50, help="trees per forest")
    add("--max-depth", type=int_at_least(1), default=8, help="maximum tree depth")
    add("--seed", type=int_at_least(0, MAX_SEED), default=0, help="seed for data and forests")
    add("--n-bins", type=int_at_least(2), default=32, help="fedforest quantile candidates B")
    add("--out", type=_png_path, default=Path("fedforest_simulate.png"), help="PNG to write")
    add("--n-jobs", type=n_jobs, default=None, help="parallel jobs (scikit-learn semantics)")
    add_privacy(add, "fedforest's")
    add(
        "--binning",
        choices=("quantile", "global"),
        default="quantile",
        help="fedforest's candidates: per node, or fixed once per fit (--privacy none only)",
    )
    sim.set_defaults(handler=_run_simulate, command_parser=sim)


def _run_simulate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    out: Path = args.out
    if args.epsilon is not None and args.privacy != "dp":
        parser.error(f"--epsilon is the budget of --privacy dp, not of --privacy {args.privacy}")
    if args.privacy == "dp" and args.epsilon is None:
        parser.error("--privacy dp needs --epsilon, the whole fit's privacy budget (e.g. 5)")
    if args.dp_colluders and args.privacy != "dp":
        parser.error(f"--dp-colluders scales --privacy dp's noise, not --privacy {args.privacy}'s")
    if args.dp_colluders >= args.clients:
        parser.error(f"--dp-colluders {args.dp_colluders} needs more --clients ({args.clients})")
    if args.binning == "global" and args.privacy != "none":
        parser.error(
            f"--binning global needs --privacy none (not {args.privacy}): its grid is made "
            "of each client's per-feature quantiles, data values the server sees"
        )
    # On a first run (a cold numba cache), the second process compiling the client's
    # kernels starts now, before the heavy imports below (docs/benchmarks.md, "First run").
    from fedforest.federated.precompile import start_early

    start_early()
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
        privacy=args.privacy,
        epsilon=args.epsilon,
        dp_colluders=args.dp_colluders,
        binning=args.binning,
    )
    try:
        result = run_simulation(config)
    except ValueError as exc:  # the options (e.g. too few rows for the secure rules)
        message = str(exc)
        if "min_aggregate_rows" in message:  # not an option of simulate: its rows are
            message += " (fedforest simulate: give more --clients or --rows-per-client)"
        parser.error(message)
    print(format_report(result))
    print(f"wrote {save_figure(result, out)}")
    print(f"reproduce: {reproduce_command(config, out)}")
    return 0


def _png_path(text: str) -> Path:
    """``--out``: checked while parsing, so the error is the subcommand's, before training.

    The figure is a PNG: ``fig.pdf`` or ``fig.svg`` got PNG bytes under that name, silently.
    """
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"cannot write {text!r}: its directory {str(path.parent)!r} does not exist"
        )
    if path.is_dir():  # it was an IsADirectoryError once the simulation had run
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name")
    if path.suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(
            f"{text!r} does not end in .png; the figure is written as a PNG"
        )
    return path
