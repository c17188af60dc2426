"""Argument types shared by the ``fedforest`` command and its ``experiment`` subcommand.

Kept apart from both (and free of heavy imports) so that parsing a command line stays
fast: a type fails with argparse's own error, naming the option, before anything runs.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

#: The largest seed: scikit-learn's ``random_state`` (and NumPy's legacy seeds) stop there.
MAX_SEED = 2**32 - 1


def int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An integer ``>= minimum`` (and ``<= maximum``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        return value

    parse.__name__ = f"int >= {minimum}"
    return parse


def positive_float(text: str) -> float:
    """A finite float > 0 (a privacy budget, say)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def n_jobs(text: str) -> int:
    """scikit-learn's n_jobs: an integer other than 0 (joblib refuses 0 with a traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("must not be 0 (1 runs in this process, -1 on every core)")
    return value


def out_directory(text: str) -> Path:
    """A directory to write in (created): not a file, nor below one.

    Checked while parsing: ``mkdir`` failed with ``FileExistsError`` (or
    ``NotADirectoryError``) once the experiment had run.
    """
    path = Path(text)
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                where = "" if part == path else f": {str(part)!r} is a file"
                raise argparse.ArgumentTypeError(
                    f"cannot write in {text!r}{where or ', a file'}; give a directory"
                )
            break
    return path


def unwritable_directory(path: Path) -> str | None:
    """Why ``path`` cannot be created or written in (None: it can; it is created).

    For a command's ``--out``, after parsing and before any work: a folder ``mkdir``
    cannot make (``/proc/x``) or one without write permission was a traceback once the
    run had finished, its results lost.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        return f"cannot write in {str(path)!r}: {exc.strerror or exc}"
    return None


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults in the help, but not for a required option or a None default.

    ``ArgumentDefaultsHelpFormatter`` wrote "(default: None)" after ``--client``,
    ``--target`` and ``--out``, which are required, and after options whose help already
    says what leaving them out does.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.required or action.default is None:
            return action.help or ""
        return super()._get_help_string(action) or ""
