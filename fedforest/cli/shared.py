"""What the subcommands share.

Their files (--out checked, a model loaded, a data file's rows read, a table written), a
usage error's text, and the privacy options.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._argtypes import int_at_least, positive_float

#: The suffixes of the data files the commands read (and ``predict`` writes).
DATA_SUFFIXES = frozenset({".csv", ".parquet", ".pq"})


def add_privacy(add: Callable[..., Any], whose: str | None = None) -> None:
    """``--privacy``, ``--epsilon`` and ``--dp-colluders T`` (simulate and train).

    The estimators' ``privacy``, ``epsilon`` and ``dp_colluders``. ``whose`` begins their
    help (``"fedforest's"`` in ``simulate``, which trains other forests too).
    """
    level, budget = (
        ("privacy level", "the whole fit's") if whose is None else (f"{whose} privacy level", whose)
    )
    add(
        "--privacy",
        choices=("secure", "dp", "none"),
        default="secure",
        help=f"{level} (docs/privacy.md)",
    )
    add(
        "--epsilon",
        type=positive_float,
        default=None,
        help=f"{budget} privacy budget under --privacy dp (needed there)",
    )
    add(
        "--dp-colluders",
        type=int_at_least(0),
        default=0,
        metavar="T",
        help="under --privacy dp: the colluding clients the noise holds against",
    )


def check_out_directory(
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


def check_table_out(path: Path, parser: argparse.ArgumentParser) -> None:
    """A Parquet --out needs pyarrow: said before the work (it was a traceback after it)."""
    from fedforest.datasets.files import parquet_missing

    if missing := parquet_missing(path, "writing"):
        parser.error(f"--out {missing}")


def usage(exc: BaseException) -> str:
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


def check_model_name(
    path: Path,
    parser: argparse.ArgumentParser,
    written: str = "the model is written as a .ffm file",
    suffix: str = ".ffm",
) -> None:
    """A model's --out must not carry a data file's suffix (it read as one, silently).

    ``written`` says what is written there instead and ``suffix`` the name to give: ``train``'s
    .ffm file by default, ``export``'s ONNX model or Treelite checkpoint.
    """
    if path.suffix.lower() in DATA_SUFFIXES:
        parser.error(
            f"--out {str(path)!r} ends in {path.suffix}, a data file's suffix, but {written} "
            f"(no CSV nor Parquet): give {path.stem + suffix!r}"
        )


def load_model(path: Path, parser: argparse.ArgumentParser) -> Any:
    """A model file, or the command's usage error naming why it cannot be read."""
    import fedforest as ff

    if not path.is_file():  # as a data file's (it was Python's "[Errno 2] No such file ...")
        parser.error(f"{str(path)!r} is not a file.")
    try:
        return ff.load(path)
    except (OSError, ValueError) as exc:
        if path.suffix.lower() in DATA_SUFFIXES:  # the data, or the arguments
            # swapped: the text advised re-creating a "corrupt or truncated" model file
            parser.error(
                f"{str(path)!r} is a data file ({path.suffix}), not a model file: MODEL is "
                "the .ffm file that `fedforest train --out` or save() wrote, given before "
                "any data file."
            )
        parser.error(str(exc))


def model_rows(model: Any, path: Path, parser: argparse.ArgumentParser) -> Any:
    """The rows of a data file in the model's columns (by name), or a usage error."""
    from fedforest.datasets.files import (
        close_names,
        header_hint,
        read_table,
        separator_hint,
        spacing_hint,
    )

    try:
        frame = read_table(path)
    except ValueError as exc:
        parser.error(usage(exc))
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        missing = [c for c in names if c not in frame.columns]
        if missing:
            parser.error(
                f"{str(path)!r} lacks the model's columns {missing}.{separator_hint(frame)}"
                f"{spacing_hint(frame, missing)}"
                f"{header_hint(frame) or _renamed_hint(close_names(missing, list(frame.columns)))}"
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


def _renamed_hint(close: dict[str, str]) -> str:
    """`` The file has 'AGE' where the model has 'age'`` (columns are matched by name)."""
    if not close:
        return ""
    pairs = ", ".join(f"{got!r} where the model has {name!r}" for name, got in close.items())
    return f" The file has {pairs}: rename them as the model's (columns match by name)."


def importance_heading(n_features: int) -> str:
    """The line above the importances ``train`` and ``inspect`` list (the ten largest)."""
    which = "" if n_features <= 10 else f", the 10 largest of {n_features}"
    return f"feature importances (mean decrease in impurity{which}):"


def write_table(frame: Any, path: Path) -> None:
    """A CSV, or Parquet where the name says so (``.parquet``, ``.pq``: as the readers).

    It wrote CSV text into a file named ``.parquet``, which ``pd.read_parquet`` refused.
    """
    if path.suffix.lower() in {".parquet", ".pq"}:
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)
