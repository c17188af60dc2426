"""``fedforest export``: a model file as ONNX, Treelite, or a data file's SHAP values."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .shared import (
    check_model_name,
    check_out_directory,
    check_table_out,
    load_model,
    model_rows,
    write_table,
)


def add_export(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``fedforest export`` and its options."""
    exp = commands.add_parser(
        "export",
        help="write a model file as ONNX, Treelite, or the SHAP values of a data file",
        description=(
            "Export a model file: --to onnx writes an ONNX model "
            "and --to treelite a Treelite checkpoint (numeric and set splits), --to "
            "shap the SHAP values of every row of --data as CSV, or Parquet for an --out "
            "ending in .parquet or .pq (numeric and set splits; from the "
            "trees' node statistics, no training data). The extra fedforest[export] is "
            "needed by onnx and treelite, and by shap for a forest of numeric splits only "
            "(fedforest explains one with set splits itself). docs/export.md."
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


#: What --to onnx and --to treelite write, and the suffix to give it (an --out ending in a
#: data file's suffix is refused, as train's is).
_WRITTEN = {
    "onnx": ("--to onnx writes an ONNX model", ".onnx"),
    "treelite": ("--to treelite writes a Treelite checkpoint", ".tl"),
}


def _run_export(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import numpy as np
    import pandas as pd

    model = load_model(args.model, parser)
    if args.to == "shap" and args.data is None:
        parser.error("--to shap needs --data, the CSV or Parquet rows to explain")
    if args.to != "shap" and args.data is not None:
        parser.error("--data goes with --to shap (the rows to explain), and only with it")
    if args.dtype is not None and args.to != "onnx":
        parser.error("--dtype goes with --to onnx (the ONNX input's type), and only with it")
    # Not a traceback after the export is built; nor the model or --data replaced by it.
    check_out_directory(args.out, parser, [("MODEL", args.model), ("--data", args.data)])
    if args.to in _WRITTEN:  # --to shap writes a table: CSV, or Parquet by its suffix
        check_model_name(args.out, parser, *_WRITTEN[args.to])
    else:
        check_table_out(args.out, parser)
    try:
        if args.to == "onnx":
            onnx_model = model.to_onnx(dtype=args.dtype or "float32")
            args.out.write_bytes(onnx_model.SerializeToString())
        elif args.to == "treelite":
            model.to_treelite().serialize(str(args.out))
        else:
            frame = model_rows(model, args.data, parser)
            names = getattr(model, "feature_names_in_", None)
            values = model.shap_values(frame)
            classes: Any = getattr(model, "classes_", None)
            if isinstance(values, list):  # a multi-output classifier: <output>_<class>
                values = np.concatenate(values, axis=2)
                classes = [f"{k}_{label}" for k, c in enumerate(classes) for label in c]
            values = np.asarray(values)
            cols = list(names) if names is not None else [f"x{j}" for j in range(values.shape[1])]
            base = model.shap_expected_value_
            out = {}
            # Regression: one column per feature; classification (and multi-output): per
            # feature and class (or output), suffixed with its label.
            labels = list(classes if classes is not None else range(values.shape[-1]))
            for k in range(values.shape[2] if values.ndim == 3 else 1):
                tag = "" if values.ndim == 2 else f"_{labels[k]}"
                part = values if values.ndim == 2 else values[:, :, k]
                out.update({f"shap_{c}{tag}": part[:, j] for j, c in enumerate(cols)})
                out[f"base_value{tag}"] = np.full(len(frame), float(base[k]))
            write_table(pd.DataFrame(out), args.out)
    except (ImportError, ValueError) as exc:
        parser.error(str(exc))
    print(f"wrote {args.to} export of {args.model} to {args.out}")
    if args.to != "shap":
        columns = _export_columns(model)
        if columns is not None:
            print(f"  its input X holds the columns of export_matrix: {columns}")
        blend = _blended_splits(model)
        if blend is not None:
            print(f"fedforest: warning: {blend}", file=sys.stderr)
    return 0


def _blended_splits(model: Any) -> str | None:
    """Where an ONNX or Treelite export predicts otherwise than ``predict`` (or None).

    A set split sends a code it has not seen (a missing or unseen category, an unknown
    client) to its heavier child in the export; ``predict`` blends both children.
    """
    n = model.n_features_in_
    sets = [t.feature[t.set_size > 0] for t in model.trees_ if t.set_size.size]
    split = sorted({int(f) for features in sets for f in features})
    if not split:
        return None
    names = getattr(model, "feature_names_in_", None)
    on = [
        "the client" if j == n else str(names[j]) if names is not None else f"x{j}" for j in split
    ]
    return (
        f"set splits on {', '.join(on)}: a row whose code such a split has not seen (a "
        "missing or unseen category, an unknown or no client) goes to the heavier child in "
        'this export, where predict blends both children (docs/export.md, "Set splits").'
    )


def _export_columns(model: Any) -> str | None:
    """The columns an ONNX or Treelite export reads, when they are not X's own (or None).

    Categorical columns are codes of ``categories_`` and a forest that splits on the client
    index reads the client's position in ``clients_`` last (docs/export.md).
    """
    from ..tree.export import n_model_features

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
