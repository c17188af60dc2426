"""``fedforest train``: a forest trained on one CSV or Parquet file per client."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._argtypes import MAX_SEED, DefaultsHelpFormatter, int_at_least
from .shared import (
    add_privacy,
    check_model_name,
    check_out_directory,
    importance_heading,
    usage,
)


def add_train(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``fedforest train`` and its options."""
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
    add("--min-samples-leaf", type=int_at_least(1), default=5, help="fewest rows per leaf")
    add_privacy(add)
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
        "--privacy dp, and under secure for a label no client holds in --min-aggregate-rows rows)",
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
    import warnings

    import numpy as np

    import fedforest as ff
    from fedforest.datasets.files import meant_hint, read_client_data, spacing_hint
    from fedforest.federated.categorical import (
        MARKED_WARNING,
        categorical_columns,
        is_numeric_column,
    )
    from fedforest.federated.domains import declaration_hint

    files = [(f"the file of --client {c}", c.partition("=")[2]) for c in args.client]
    check_out_directory(args.out, parser, files)  # before training, not after it
    check_model_name(args.out, parser)
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
            parser.error(usage(exc))
        if args.task == "regression" and not is_numeric_column(y):  # Parquet decimals too
            parser.error(
                f"{path!r} (client {name!r}): target column {args.target!r} is not numeric "
                f"({y.dtype}); for class labels use --task classification"
                f"{_stray_text_hint(y, 'correct those rows or drop them')}"
            )
        fraction = _fraction(y) if args.task == "classification" else None
        if fraction is not None:  # the clients said it in scikit-learn's words after the
            # handshake: "Unknown label type: continuous. Maybe you are trying to fit ..."
            parser.error(
                f"{path!r} (client {name!r}): target column {args.target!r} holds numbers "
                f"with fractions ({fraction:g}, ...), not class labels: for a numeric "
                "target use --task regression (the default)"
            )
        weight = None
        if args.weight is not None:
            if args.weight == args.target:
                parser.error(f"--weight {args.weight!r} is the target column")
            if args.weight not in X.columns:
                parser.error(
                    f"{path!r} (client {name!r}) has no weight column {args.weight!r}; its "
                    f"columns are {[str(c) for c in X.columns]}.{spacing_hint(X, [args.weight])}"
                    f"{meant_hint(X, args.weight)}"
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
    _check_number_columns(sites, text, parser)
    clients: list[ff.Client] = []
    for name, path, X, y, weight in sites:
        empty = [c for c in X.columns if c in text and X[c].isna().all()]
        try:
            w = None if weight is None else weight.to_numpy(dtype=np.float64)
            with warnings.catch_warnings():  # said above, per file, naming the texts
                warnings.filterwarnings("ignore", f".*{MARKED_WARNING}", UserWarning)
                client = ff.Client(X, y, name=name, sample_weight=w, categorical_features=empty)
            clients.append(client)
        except ValueError as exc:
            parser.error(f"{path!r}: {exc}")
    if len(clients) == 1:  # trained silently, "1 clients": one --client per site is meant
        warnings.warn(
            f"one client only ({clients[0].name!r}): the forest is that file's alone, nothing "
            "is federated; give one --client NAME=PATH per site (repeat the option).",
            UserWarning,
            stacklevel=2,
        )
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
        said = declaration_hint(usage(exc), options, "on the command line")
        parser.error(f"{_failed_files(exc, sites)}{said}")
    ledger = model.communication_
    score = "accuracy" if args.task == "classification" else "R^2"
    rows = f"{sum(c.n_samples for c in clients)} rows"
    if args.weight is not None:
        total = sum(
            c.n_samples if c.sample_weight is None else float(c.sample_weight.sum())
            for c in clients
        )
        rows += f", total weight {total:g} (column {args.weight!r})"
    print(f"{len(clients)} client{'s' if len(clients) > 1 else ''}, {rows}, {len(model)} trees")
    print(f"out-of-bag {score}: {model.oob_score_:.4f}")
    print(f"communication: {ledger.rounds} rounds, {ledger.total_megabytes:.2f} MB")
    order = np.argsort(-model.feature_importances_)[:10]
    print(importance_heading(len(model.feature_importances_)))  # unlabelled, under the MB
    names = model.feature_names_in_ if hasattr(model, "feature_names_in_") else None
    for j in order:
        label = names[j] if names is not None else f"x{j}"
        print(f"  {label:<24} {model.feature_importances_[j]:.4f}")
    model.save(args.out)
    print(f"wrote {args.out}")
    return 0


def _failed_files(exc: BaseException, sites: list[tuple[str, str, Any, Any, Any]]) -> str:
    """``'a.csv', 'b.csv': `` for the clients a federated round failed on, or nothing.

    A client's refusal in a round (its targets, labels or columns at the handshake) named
    the client only, where the refusals before training name its file.
    """
    paths = {name: path for name, path, *_ in sites}
    failed = [paths[n] for n in getattr(exc, "failed", []) if n in paths]
    return f"{', '.join(map(repr, failed))}: " if failed else ""


def _stray_text(column: Any) -> tuple[list[str], int]:
    """The values of a text column of mostly numbers that are not numbers, and their rows.

    Empty unless at least half of its values (missing ones aside) read as numbers: a
    ``?``, ``unknown`` or ``<5`` in a column of measurements makes ``read_csv`` read the
    whole column as text. Up to three distinct values; the rows are all of them.
    """
    import pandas as pd

    values = column.dropna().astype(str)
    numbers = pd.to_numeric(values.str.strip(), errors="coerce").notna()
    if values.empty or numbers.all() or 2 * int(numbers.sum()) < len(values):
        return [], 0
    stray = values[~numbers]
    return [str(v) for v in pd.unique(stray)[:3]], len(stray)


def _stray_text_hint(column: Any, fix: str) -> str:
    """``; its other values are numbers, but '?' (in 1 row) is not: <fix>``, or nothing."""
    stray, rows = _stray_text(column)
    if not stray:
        return ""
    named = ", ".join(repr(v) for v in stray)
    where = "in 1 row" if rows == 1 else f"in {rows} rows"
    verb = "is" if len(stray) == 1 else "are"
    return f"; its other values are numbers, but {named} ({where}) {verb} not: {fix}"


def _check_number_columns(
    sites: list[tuple[str, str, Any, Any, Any]], text: set[Any], parser: argparse.ArgumentParser
) -> None:
    """A column of numbers read as text for a few values that are not numbers, said so.

    Numbers in one file and text in another was the clients' disagreement on whether the
    column is categorical (at the handshake, naming neither file nor value). Text in every
    file trained a categorical column of one level per number (under ``"secure"`` most of
    them missing: a warning blamed the levels). The user's own files: values are named.
    """
    import warnings

    from fedforest.federated.categorical import is_numeric_column

    fix = "correct those cells, or leave them empty (a missing value)"
    for column in sorted(text, key=str):
        numeric = [
            path
            for _, path, X, _, _ in sites
            if not X[column].isna().all() and is_numeric_column(X[column])
        ]
        for _, path, X, _, _ in sites:
            if is_numeric_column(X[column]):
                continue
            hint = _stray_text_hint(X[column], fix)
            if hint and numeric:
                parser.error(
                    f"column {column!r} holds numbers in {numeric[0]!r} and text in {path!r}{hint}"
                )
            if hint:
                warnings.warn(
                    f"{path!r}: column {column!r} is read as text, a categorical column{hint}, "
                    "to split it as numbers",
                    UserWarning,
                    stacklevel=2,
                )


def _fraction(y: Any) -> float | None:
    """A value of a float target with a fraction (scikit-learn: "continuous"), or None."""
    import numpy as np
    import pandas as pd

    if not pd.api.types.is_float_dtype(y.dtype):
        return None
    values = y.dropna().to_numpy(dtype=np.float64)
    fractional = values[values != np.round(values)]
    return float(fractional[0]) if fractional.size else None
