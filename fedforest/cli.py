"""The ``fedforest`` command.

``fedforest simulate`` trains fedforest, a centralized scikit-learn random forest and
per-client forests on the paper's synthetic federation and compares them;
``fedforest train`` trains on one CSV or Parquet file per client, ``fedforest predict``
and ``fedforest inspect`` use the model file it writes; ``fedforest experiment NAME``
runs the papers' experiments (``swarm-overlap``: the swarm forests, docs/swarm.md).
"""

from __future__ import annotations

import argparse
import gc
import sys
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ._argtypes import MAX_SEED, DefaultsHelpFormatter, int_at_least, n_jobs, positive_float

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
        Arguments without the program name; ``None`` reads ``sys.argv``: the program,
        whose process ends after this returns, so every object is then frozen out of
        garbage collection (``gc.freeze``; a shorter exit), and its warnings print as
        ``fedforest: warning: <message>`` (not at the caller's ``<frozen runpy>:88:``).

    Returns
    -------
    status : int
        The exit status (0 on success). Usage errors raise ``SystemExit(2)`` as argparse
        does.
    """
    if argv is None:  # the program: the process ends when this returns
        warnings.formatwarning = _warning_line
        try:
            return _main(sys.argv[1:])
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
        from .transport.flower.worker import main as worker_main

        return worker_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace, argparse.ArgumentParser], int] = args.handler
    # A subcommand's errors show its own usage (its parser), not the top-level one.
    return handler(args, getattr(args, "command_parser", parser))


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
        description=(
            "Federated random forests whose splits follow centralized CART on the pooled "
            "rows, while the rows stay with their clients."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(
        title="commands", dest="command", required=True, help="what to run"
    )
    _add_simulate(commands)
    _add_train(commands)
    _add_predict(commands)
    _add_inspect(commands)
    _add_export(commands)
    commands.add_parser(
        "flower-worker",
        help="serve a Flower SuperNode's ClientApp tasks in one process (--isolation process)",
        add_help=False,  # main() routes it to the worker's own parser: see its --help
    )
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
    add(
        "--privacy",
        choices=("secure", "dp", "none"),
        default="secure",
        help="fedforest's privacy level (docs/privacy.md)",
    )
    add(
        "--epsilon",
        type=positive_float,
        default=None,
        help="fedforest's privacy budget under --privacy dp (needed there)",
    )
    _add_dp_colluders(add)
    add(
        "--binning",
        choices=("quantile", "global"),
        default="quantile",
        help="fedforest's candidates: per node, or fixed once per fit (--privacy none only)",
    )
    sim.set_defaults(handler=_run_simulate, command_parser=sim)


def _add_dp_colluders(add: Callable[..., Any]) -> None:
    """``--dp-colluders T`` (simulate and train): the estimators' ``dp_colluders``."""
    add(
        "--dp-colluders",
        type=int_at_least(0),
        default=0,
        metavar="T",
        help="under --privacy dp: the colluding clients the noise holds against",
    )


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


def _add_train(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    train = commands.add_parser(
        "train",
        help="train on one CSV or Parquet file per client and write a model file",
        description=(
            "Train a federated forest on clients that each hold one file (simulated in this "
            "process: each file is one Client). Columns are matched by name; text columns "
            "are categorical; --weight names a column of sample weights. See docs/cli.md."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    add = train.add_argument
    add(
        "--client",
        action="append",
        required=True,
        metavar="NAME=PATH",
        help="a client's file (repeated: one per client)",
    )
    add("--target", required=True, help="the target column (in every file)")
    add(
        "--weight",
        default=None,
        metavar="COLUMN",
        help="a column of sample weights (in every file; not a feature): each row's weight",
    )
    add("--task", choices=("regression", "classification"), default="regression", help="task")
    add("--trees", type=int_at_least(1), default=50, help="trees in the forest")
    add("--max-depth", type=int_at_least(1), default=8, help="maximum tree depth")
    add("--min-samples-leaf", type=int_at_least(1), default=5, help="rows per leaf")
    add("--privacy", choices=("secure", "dp", "none"), default="secure", help="privacy level")
    add("--epsilon", type=float, default=None, help="privacy budget under --privacy dp")
    _add_dp_colluders(add)
    add(
        "--min-aggregate-rows",
        type=int_at_least(1),
        default=None,
        metavar="M",
        help="fewest rows behind any sum the server sees under --privacy secure/dp "
        "(default max(10, 2 * --min-samples-leaf); below 10 warns)",
    )
    add(
        "--classes",
        default=None,
        metavar="LABEL,LABEL,...",
        help="--task classification: the class labels, declared (public; needed under "
        "--privacy dp, and under secure for a label no client holds in m rows)",
    )
    add(
        "--categories",
        action="append",
        default=None,
        metavar="COLUMN=LEVEL,LEVEL,...",
        help="a text column's levels, declared (public; needed under --privacy dp)",
    )
    add("--seed", type=int_at_least(0, MAX_SEED), default=0, help="random_state of the forest")
    add("--out", type=Path, required=True, help="model file to write (.ffm)")
    train.set_defaults(handler=_run_train, command_parser=train)


#: How ``--categories`` is written (in its errors).
_CATEGORY_SPEC = "COLUMN=LEVEL,LEVEL,... (one --categories per column)"


def _declared(
    args: argparse.Namespace, parser: argparse.ArgumentParser, y: Any, columns: list[str]
) -> dict[str, Any]:
    """``--classes`` and ``--categories`` as the estimator's ``classes`` and ``categories``.

    Labels take the dtype of the first file's target (numbers there: each label must read
    as one, and as that dtype without change); levels stay text, as ``read_csv`` gives a
    text column's values.
    """
    import numpy as np
    import pandas as pd

    declared: dict[str, Any] = {}
    if args.classes is not None:
        if args.task != "classification":
            parser.error("--classes goes with --task classification")
        labels = [label.strip() for label in args.classes.split(",")]
        if "" in labels or len(set(labels)) != len(labels):
            parser.error(f"--classes {args.classes!r}: labels must be non-empty and distinct")
        classes: Any = np.asarray(labels, dtype=object)
        words = {label.lower() for label in labels}
        if pd.api.types.is_bool_dtype(y.dtype) and words <= {"true", "false"}:
            classes = np.asarray([label.lower() == "true" for label in labels])  # read_csv's
        elif pd.api.types.is_numeric_dtype(y.dtype):
            numbers = pd.to_numeric(pd.Series(labels), errors="coerce").to_numpy()
            as_y = numbers.astype(y.dtype) if not np.isnan(numbers).any() else numbers
            if np.isnan(numbers).any() or not np.array_equal(as_y, numbers):
                parser.error(
                    f"--classes {args.classes!r}: the target {args.target!r} holds numbers "
                    f"({y.dtype}); every label must be one of that type"
                )
            classes = as_y
        declared["classes"] = classes
    if args.categories:
        from fedforest.federated.domains import parse_categories  # the run config's parser

        try:
            categories = parse_categories(args.categories, "--categories", _CATEGORY_SPEC)
        except ValueError as exc:
            parser.error(str(exc))
        for column in categories:
            if column not in columns:
                parser.error(f"--categories: no feature column {column!r}; columns: {columns}")
        declared["categories"] = categories
    return declared


def _run_train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import numpy as np

    import fedforest as ff
    from fedforest.datasets.files import read_client_data, spacing_hint
    from fedforest.federated.categorical import categorical_columns, is_numeric_column
    from fedforest.federated.domains import declaration_hint

    files = [(f"the file of --client {c}", c.partition("=")[2]) for c in args.client]
    _check_out_directory(args.out, parser, files)  # before training, not after it
    sites: list[tuple[str, str, Any, Any, Any]] = []  # name, path, X, y, weight
    columns = None
    for spec in args.client:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            parser.error(f"--client expects NAME=PATH, got {spec!r}")
        if name in {site[0] for site in sites}:
            parser.error(f"--client {spec!r}: the client name {name!r} is given twice")
        for other, seen, *_ in sites:  # its rows would count twice, silently
            if Path(path).is_file() and Path(path).samefile(seen):
                parser.error(f"--client {spec!r}: client {other!r} reads that file already")
        try:
            X, y = read_client_data(path, args.target)
        except ValueError as exc:
            parser.error(_usage(exc))
        if args.task == "regression" and not is_numeric_column(y):  # Parquet decimals too
            parser.error(
                f"{path!r} (client {name!r}): target column {args.target!r} is not numeric "
                f"({y.dtype}); for class labels use --task classification"
            )
        weight = None
        if args.weight is not None:
            if args.weight == args.target:
                parser.error(f"--weight {args.weight!r} is the target column")
            if args.weight not in X.columns:
                parser.error(
                    f"{path!r} (client {name!r}) has no weight column {args.weight!r}; its "
                    f"columns are {[str(c) for c in X.columns]}.{spacing_hint(X, [args.weight])}"
                )
            weight = X.pop(args.weight)
            if not is_numeric_column(weight) or weight.isna().any():
                parser.error(
                    f"{path!r} (client {name!r}): weight column {args.weight!r} must hold "
                    "numbers in every row"
                )
        if columns is None:
            columns = list(X.columns)
        elif set(X.columns) != set(columns):
            extra = sorted(set(X.columns) ^ set(columns))
            parser.error(f"{path!r} (client {name!r}) does not have the same columns: {extra}")
        sites.append((name, path, X[columns], y, weight))  # by name, the first file's order
    # A text column left empty in a file reads as float NaN there: it is that file's
    # column of missing categories, not a numeric one (the handshake refused the mismatch).
    text = {X.columns[j] for _, _, X, _, _ in sites for j in categorical_columns(X, None, 0)}
    clients: list[ff.Client] = []
    for name, path, X, y, weight in sites:
        empty = [c for c in X.columns if c in text and X[c].isna().all()]
        try:
            w = None if weight is None else weight.to_numpy(dtype=np.float64)
            clients.append(ff.Client(X, y, name=name, sample_weight=w, categorical_features=empty))
        except ValueError as exc:
            parser.error(f"{path!r}: {exc}")
    cls = ff.FedForestClassifier if args.task == "classification" else ff.FedForestRegressor
    # Labels as the first client reads them (a Series as fit reads it: nullable Int64 as
    # floats), so that --classes take the type the clients' labels have.
    declared = _declared(args, parser, clients[0].y_raw, list(sites[0][2].columns))
    model = cls(
        **declared,
        n_estimators=args.trees,
        max_depth=args.max_depth,
        min_samples_leaf=args.min_samples_leaf,
        privacy=args.privacy,
        epsilon=args.epsilon,
        dp_colluders=args.dp_colluders,
        min_aggregate_rows=args.min_aggregate_rows,
        oob_score=True,
        random_state=args.seed,
        verbose=1,
    )
    try:
        model.fit_federated(ff.LocalFederation(clients))
    except ValueError as exc:  # the clients' data or the options: a usage error, no traceback
        options = {
            "classes=": "--classes LABEL,...",
            "categories=": "--categories COLUMN=LEVEL,...",
            "epsilon=": "--epsilon",
            "dp_colluders=": "--dp-colluders",
        }
        parser.error(declaration_hint(_usage(exc), options, "on the command line"))
    ledger = model.communication_
    score = "accuracy" if args.task == "classification" else "R^2"
    rows = f"{sum(c.n_samples for c in clients)} rows"
    if args.weight is not None:
        total = sum(
            c.n_samples if c.sample_weight is None else float(c.sample_weight.sum())
            for c in clients
        )
        rows += f", total weight {total:g} (column {args.weight!r})"
    print(f"{len(clients)} clients, {rows}, {len(model)} trees")
    print(f"out-of-bag {score}: {model.oob_score_:.4f}")
    print(f"communication: {ledger.rounds} rounds, {ledger.total_megabytes:.2f} MB")
    order = np.argsort(-model.feature_importances_)[:10]
    names = model.feature_names_in_ if hasattr(model, "feature_names_in_") else None
    for j in order:
        label = names[j] if names is not None else f"x{j}"
        print(f"  {label:<24} {model.feature_importances_[j]:.4f}")
    model.save(args.out)
    print(f"wrote {args.out}")
    return 0


def _add_predict(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pred = commands.add_parser(
        "predict",
        help="predict the rows of a CSV or Parquet file with a model file",
        description="Predict every row of DATA (the model's feature columns, by name).",
    )
    pred.add_argument("model", type=Path, help="a model file written by fedforest")
    pred.add_argument("data", type=Path, help="CSV or Parquet file of rows to predict")
    pred.add_argument(
        "--out", type=Path, required=True, help="CSV file to write (Parquet: .parquet, .pq)"
    )
    pred.add_argument(
        "--client",
        metavar="NAME",
        help=(
            "the client (one of the model's clients_) whose rows DATA holds, for a forest "
            "that splits on the client (split_on_client); without it such rows are predicted "
            "by the marginal rule (both branches of a client split, weighted)"
        ),
    )
    pred.set_defaults(handler=_run_predict, command_parser=pred)


def _check_out_directory(
    path: Path, parser: argparse.ArgumentParser, inputs: Sequence[tuple[str, Any]] = ()
) -> None:
    """--out's directory must exist (said before the work, naming the path).

    Nor is --out one of the command's ``inputs`` (what, path): it replaced it, silently.
    """
    directory = path.resolve().parent
    if not directory.is_dir():
        parser.error(f"--out {str(path)!r}: the directory {str(directory)!r} does not exist")
    if path.is_dir():
        parser.error(f"--out {str(path)!r} is a directory; give a file name")
    for what, given in inputs:
        if given is not None and path.is_file() and Path(given).is_file():
            if path.samefile(given):
                parser.error(f"--out {str(path)!r} is {what}; writing there would replace it")


def _usage(exc: BaseException) -> str:
    """An exception as a usage error's text, with what a traceback would have shown.

    Its notes (the file a reader failed on, ``datasets/files.py``), and the exception a
    client's stand-in stands for (``federated/client_errors.py``: a server sees only its
    type; on the command line every client's rows are the user's own).
    """
    text = " ".join([str(exc), *getattr(exc, "__notes__", [])])
    link: BaseException | None = exc
    while link is not None:
        if getattr(link, "client_type", None) and link.__cause__ is not None:
            return f"{text} ({type(link.__cause__).__name__}: {link.__cause__})"
        link = link.__cause__
    return text


def _load_model(path: Path, parser: argparse.ArgumentParser) -> Any:
    """A model file, or the command's usage error naming why it cannot be read."""
    import fedforest as ff

    if not path.is_file():  # as a data file's (it was Python's "[Errno 2] No such file ...")
        parser.error(f"{str(path)!r} is not a file.")
    try:
        return ff.load(path)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))


def _model_rows(model: Any, path: Path, parser: argparse.ArgumentParser) -> Any:
    """The rows of a data file in the model's columns (by name), or a usage error."""
    from fedforest.datasets.files import read_table, separator_hint, spacing_hint

    try:
        frame = read_table(path)
    except ValueError as exc:
        parser.error(_usage(exc))
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        missing = [c for c in names if c not in frame.columns]
        if missing:
            parser.error(
                f"{str(path)!r} lacks the model's columns {missing}.{separator_hint(frame)}"
                f"{spacing_hint(frame, missing)}"
            )
        frame = frame[list(names)]
    else:  # fitted on an array (in Python): the columns by position, without their names
        if frame.shape[1] != model.n_features_in_:
            parser.error(
                f"{str(path)!r} has {frame.shape[1]} columns; the model was fitted without "
                f"column names on {model.n_features_in_}, which it reads by position: give "
                "exactly those columns, in their order"
            )
        frame = frame.set_axis(range(frame.shape[1]), axis=1)  # no names: no warning
    if len(frame) == 0:  # predict's and export --to shap's (scikit-learn's text named no file)
        parser.error(f"{str(path)!r} has no rows to predict or explain")
    return frame


def _run_predict(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import pandas as pd

    _check_out_directory(args.out, parser, [("DATA", args.data), ("MODEL", args.model)])
    model = _load_model(args.model, parser)
    frame = _model_rows(model, args.data, parser)
    ids = _client_rows(model, args.client, len(frame), parser)
    try:
        pred = model.predict(frame, client_ids=ids)
    except ValueError as exc:  # values the model cannot read (e.g. text in a numeric column)
        parser.error(f"{str(args.data)!r}: {exc}")
    if pred.ndim == 2:  # a multi-output model: one column per output
        out = pd.DataFrame({f"prediction_{k}": pred[:, k] for k in range(pred.shape[1])})
    else:
        out = pd.DataFrame({"prediction": pred})
    if hasattr(model, "predict_proba"):
        with warnings.catch_warnings():  # the rows' warnings, said once by predict above
            warnings.simplefilter("ignore", UserWarning)
            proba = model.predict_proba(frame, client_ids=ids)
        multi = isinstance(proba, list)  # multi-output: proba_<output>_<class>
        outputs = zip(proba, model.classes_, strict=True) if multi else [(proba, model.classes_)]
        for k, (p, labels) in enumerate(outputs):
            for j, label in enumerate(labels):
                out[f"proba_{k}_{label}" if multi else f"proba_{label}"] = p[:, j]
    _write_table(out, args.out)
    print(f"wrote {len(out)} predictions to {args.out}")
    return 0


def _client_rows(
    model: Any, client: str | None, n: int, parser: argparse.ArgumentParser
) -> list[str] | None:
    """``client_ids`` of the rows: --client's, checked against ``clients_``, or None.

    A forest that splits on the client predicted its rows by the marginal rule without a
    word (the command had no way to name their client); it now says so on stderr.
    """
    clients = [str(c) for c in getattr(model, "clients_", [])]
    splits = any(bool((t.feature == model.n_features_in_).any()) for t in model.trees_)
    if client is None:
        if splits:
            print(
                "note: the forest splits on the client (split_on_client); the rows are "
                "predicted by the marginal rule. Give --client NAME to predict them as one "
                f"client's rows (clients: {', '.join(clients)}).",
                file=sys.stderr,
            )
        return None
    if client not in clients:
        parser.error(f"--client {client!r} is not one of the model's clients: {clients}")
    return [client] * n


def _add_inspect(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ins = commands.add_parser("inspect", help="describe a model file", description=(
        "Print a model file's estimator, parameters, trees, importances, communication and "
        "privacy level."
    ))  # fmt: skip
    ins.add_argument("model", type=Path, help="a model file written by fedforest")
    ins.set_defaults(handler=_run_inspect, command_parser=ins)


def _run_inspect(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import numpy as np

    model = _load_model(args.model, parser)
    depths = [t.max_depth for t in model.trees_]
    leaves = [t.n_leaves for t in model.trees_]
    print(f"{type(model).__name__} in {args.model}")
    print(f"  privacy: {model.privacy}")
    print(f"  trees: {len(model.trees_)}, depth {min(depths)}-{max(depths)}, "
          f"{int(np.mean(leaves))} leaves on average")  # fmt: skip
    print(f"  features: {model.n_features_in_}; clients: {getattr(model, 'n_clients_', '?')}")
    classes = getattr(model, "classes_", None)
    if classes is not None:  # one list per output of a multi-output classifier
        listed = [c.tolist() for c in classes] if isinstance(classes, list) else classes.tolist()
        print(f"  classes: {listed}")
    reasons = getattr(model, "dropped_reasons_", {})
    for name, r in getattr(model, "dropped_clients_", []):
        why = f" ({reasons[name]})" if name in reasons else ""
        print(f"  dropped: client {name!r} in round {r}{why}")
    if hasattr(model, "oob_score_"):
        print(f"  out-of-bag score: {model.oob_score_:.4f}")
    ledger = getattr(model, "communication_", None)
    if ledger is not None:
        print(f"  communication: {ledger.rounds} rounds, {ledger.total_megabytes:.2f} MB")
    names = getattr(model, "feature_names_in_", None)
    imp = model.feature_importances_
    for j in np.argsort(-imp)[:10]:
        print(f"    {names[j] if names is not None else f'x{j}':<24} {imp[j]:.4f}")
    params = model.get_params()
    print("  parameters: " + ", ".join(f"{k}={params[k]!r}" for k in sorted(params)))
    return 0


def _add_export(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    exp = commands.add_parser(
        "export",
        help="write a model file as ONNX, Treelite, or the SHAP values of a data file",
        description=(
            "Export a model file (extra fedforest[export]): --to onnx writes an ONNX model "
            "and --to treelite a Treelite checkpoint (numeric and set splits), --to "
            "shap the SHAP values of every row of --data as CSV, or Parquet for an --out "
            "ending in .parquet or .pq (numeric splits only; from the "
            "trees' node statistics, no training data). docs/export.md."
        ),
    )
    exp.add_argument("model", type=Path, help="a model file written by fedforest")
    exp.add_argument(
        "--to", required=True, choices=["onnx", "treelite", "shap"], help="the export's format"
    )
    exp.add_argument("--out", type=Path, required=True, help="file to write")
    exp.add_argument("--data", type=Path, help="--to shap: CSV or Parquet rows to explain")
    exp.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        help=(
            "--to onnx: the input X's type (default float32; float64 compares X with the "
            "trees' float64 thresholds, so every row routes as fedforest's predict)"
        ),
    )
    exp.set_defaults(handler=_run_export, command_parser=exp)


def _run_export(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import numpy as np
    import pandas as pd

    model = _load_model(args.model, parser)
    if args.to == "shap" and args.data is None:
        parser.error("--to shap needs --data, the CSV or Parquet rows to explain")
    if args.to != "shap" and args.data is not None:
        parser.error("--data goes with --to shap (the rows to explain), and only with it")
    if args.dtype is not None and args.to != "onnx":
        parser.error("--dtype goes with --to onnx (the ONNX input's type), and only with it")
    # Not a traceback after the export is built; nor the model or --data replaced by it.
    _check_out_directory(args.out, parser, [("MODEL", args.model), ("--data", args.data)])
    try:
        if args.to == "onnx":
            onnx_model = model.to_onnx(dtype=args.dtype or "float32")
            args.out.write_bytes(onnx_model.SerializeToString())
        elif args.to == "treelite":
            model.to_treelite().serialize(str(args.out))
        else:
            frame = _model_rows(model, args.data, parser)
            names = getattr(model, "feature_names_in_", None)
            values = model.shap_values(frame)
            classes: Any = getattr(model, "classes_", None)
            if isinstance(values, list):  # a multi-output classifier: <output>_<class>
                values = np.concatenate(values, axis=2)
                classes = [f"{k}_{label}" for k, c in enumerate(classes) for label in c]
            values = np.asarray(values)
            cols = list(names) if names is not None else [f"x{j}" for j in range(values.shape[1])]
            base = np.atleast_1d(model.shap_explainer().expected_value)
            out = {}
            # Regression: one column per feature; classification (and multi-output): per
            # feature and class (or output), suffixed with its label.
            labels = list(classes if classes is not None else range(values.shape[-1]))
            for k in range(values.shape[2] if values.ndim == 3 else 1):
                tag = "" if values.ndim == 2 else f"_{labels[k]}"
                part = values if values.ndim == 2 else values[:, :, k]
                out.update({f"shap_{c}{tag}": part[:, j] for j, c in enumerate(cols)})
                out[f"base_value{tag}"] = np.full(len(frame), float(base[k]))
            _write_table(pd.DataFrame(out), args.out)
    except (ImportError, ValueError) as exc:
        parser.error(str(exc))
    print(f"wrote {args.to} export of {args.model} to {args.out}")
    if args.to != "shap":
        columns = _export_columns(model)
        if columns is not None:
            print(f"  its input X holds the columns of export_matrix: {columns}")
    return 0


def _export_columns(model: Any) -> str | None:
    """The columns an ONNX or Treelite export reads, when they are not X's own (or None).

    Categorical columns are codes of ``categories_`` and a forest that splits on the client
    index reads the client's position in ``clients_`` last (docs/export.md).
    """
    from .tree.export import n_model_features

    categories = getattr(model, "categories_", {})
    n = model.n_features_in_
    with_client = n_model_features(model.trees_, n) > n
    if not categories and not with_client:
        return None
    names = getattr(model, "feature_names_in_", None)
    cols = [str(names[j]) if names is not None else f"x{j}" for j in range(n)]
    cols = [f"{c} (code in categories_)" if j in categories else c for j, c in enumerate(cols)]
    if with_client:
        cols.append("the client's position in clients_ (-1: unknown)")
    return ", ".join(cols)


def _write_table(frame: Any, path: Path) -> None:
    """A CSV, or Parquet where the name says so (``.parquet``, ``.pq``: as the readers).

    It wrote CSV text into a file named ``.parquet``, which ``pd.read_parquet`` refused.
    """
    if path.suffix.lower() in {".parquet", ".pq"}:
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


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


def _version() -> str:
    try:
        return version("fedforest")
    except PackageNotFoundError:
        return "unknown (not installed)"


if __name__ == "__main__":
    raise SystemExit(main())
