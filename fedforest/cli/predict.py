"""``fedforest predict`` and ``fedforest inspect``: a model file used on rows, described."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from .shared import (
    check_out_directory,
    check_table_out,
    importance_heading,
    load_model,
    model_rows,
    write_table,
)


def add_predict(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``fedforest predict`` and its options."""
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


def _run_predict(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import pandas as pd

    check_out_directory(args.out, parser, [("DATA", args.data), ("MODEL", args.model)])
    check_table_out(args.out, parser)
    model = load_model(args.model, parser)
    frame = model_rows(model, args.data, parser)
    ids = _client_rows(model, args.client, len(frame), parser)
    _warn_unseen_levels(model, frame, args.data)
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
    write_table(out, args.out)
    print(f"wrote {len(out)} predictions to {args.out}")
    return 0


def _warn_unseen_levels(model: Any, frame: Any, path: Path) -> None:
    """Warn of text levels the model has no category for, naming column, values and rows.

    Such rows take the marginal rule at every split on the column (both children,
    weighted), silently: a new ward, a typo (``"Cardio"``), or under ``"secure"`` a level
    no client held in ``min_aggregate_rows`` rows. Values of another kind (numbers where
    the levels are text) are the model's own warning.
    """
    names = list(getattr(model, "feature_names_in_", []))
    for j, levels in sorted(getattr(model, "categories_", {}).items()):
        if j >= len(names):  # no names: read by position (no text there to compare)
            continue
        known = {str(v) for v in levels if isinstance(v, str)}
        column = frame[names[j]]
        text = column[column.map(lambda v: isinstance(v, str))]
        unseen = text[~text.isin(known)]
        if known and len(unseen):
            shown = ", ".join(repr(v) for v in list(dict.fromkeys(unseen))[:3])
            rows = "1 row holds" if len(unseen) == 1 else f"{len(unseen)} rows hold"
            warnings.warn(
                f"{str(path)!r}: column {names[j]!r}: {rows} a level the model has no "
                f"category for ({shown}; its levels: {sorted(known)}); they are predicted by "
                "the marginal rule (both branches of each split on the column, weighted).",
                UserWarning,
                stacklevel=2,
            )


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


def add_inspect(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``fedforest inspect MODEL``."""
    ins = commands.add_parser("inspect", help="describe a model file", description=(
        "Print a model file's estimator, parameters, trees, importances, communication and "
        "privacy level."
    ))  # fmt: skip
    ins.add_argument("model", type=Path, help="a model file written by fedforest")
    ins.set_defaults(handler=_run_inspect, command_parser=ins)


def _run_inspect(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import numpy as np

    model = load_model(args.model, parser)
    depths = [t.max_depth for t in model.trees_]
    leaves = [t.n_leaves for t in model.trees_]
    print(f"{type(model).__name__} in {args.model}")
    print(f"  privacy: {model.privacy}")
    print(f"  trees: {len(model.trees_)}, depth {min(depths)}-{max(depths)}, "
          f"{int(np.mean(leaves))} leaves on average")  # fmt: skip
    print(f"  features: {model.n_features_in_}; clients: {getattr(model, 'n_clients_', '?')}")
    names = getattr(model, "feature_names_in_", None)
    if names is not None:  # the columns predict reads (only the ten top ones were named)
        kinds = getattr(model, "categories_", {})
        levels = {j: sum(v is not None for v in kinds[j]) for j in kinds}  # None: missing
        columns = [f"{c} (categorical, {levels[j]} levels)" if j in kinds else str(c)
                   for j, c in enumerate(names)]  # fmt: skip
        print(f"  columns: {', '.join(columns)}")
    clients = getattr(model, "clients_", None)
    if clients is not None:
        print(f"  client names: {', '.join(str(c) for c in clients)}")
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
    imp = model.feature_importances_
    print(f"  {importance_heading(len(imp))}")  # the list was unlabelled, under the MB
    for j in np.argsort(-imp)[:10]:
        print(f"    {names[j] if names is not None else f'x{j}':<24} {imp[j]:.4f}")
    params = model.get_params()
    print("  parameters: " + ", ".join(f"{k}={params[k]!r}" for k in sorted(params)))
    return 0
