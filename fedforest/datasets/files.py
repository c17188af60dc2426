"""A client's rows from a file: CSV or Parquet, the target column named."""

from __future__ import annotations

import difflib
import importlib
import logging
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "close_names",
    "header_hint",
    "meant_hint",
    "parquet_missing",
    "read_client_data",
    "read_table",
    "separator_hint",
    "spacing_hint",
]

_PARQUET = {".parquet", ".pq"}
#: pyarrow's texts for a file that is not (whole) Parquet: structure, not values. Any other
#: pyarrow text (a cast it refused, say) may quote a value and is logged, not raised.
_ARROW_STRUCTURAL = (
    "magic bytes",
    "footer",
    "thrift",
    "file size is 0",
    "end of stream",
    "end of file",
)
logger = logging.getLogger("fedforest.client")


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV (pandas' defaults) or Parquet (``.parquet`` / ``.pq``, needs pyarrow) file.

    A file the reader refuses (truncated, not CSV or Parquet, ragged rows, no columns) is
    a ``ValueError`` naming the file and the reader's reason (a Parquet, gzip or Excel
    file given as CSV: what it is). Any other exception of the
    reader (a value it cannot convert: pyarrow's "year 10184 is out of range" for a date
    after 9999) is raised as it is (a note names the file), its text quoting the value: a
    remote client sends its type only (``federated/client_errors.py``). pyarrow's text is
    in the refusal only where it speaks of the file's structure (else logged). Duplicated
    column names are refused, naming them (pandas renamed a CSV's), and so are CSV rows
    longer than the header (pandas made the extra fields an index). A first column
    without a name holding 0 to n - 1 (the index ``to_csv`` writes) is dropped, with a
    warning.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"{str(path)!r} is not a file.")
    parquet = path.suffix.lower() in _PARQUET
    if missing := parquet_missing(path, "reading"):
        raise ValueError(missing)
    try:
        frame = pd.read_parquet(path) if parquet else pd.read_csv(path)
    except (ValueError, OSError) as exc:
        kind = "Parquet" if parquet else "CSV"
        if parquet and (twice := _repeated(_parquet_names(path))):  # pyarrow's "Multiple
            # matches for FieldRef", which _reason left out as possibly quoting a value
            raise ValueError(_twice_text(path, twice)) from exc
        if not parquet and (what := _binary_format(path)):  # the latin-1 advice was wrong
            raise ValueError(f"{str(path)!r} cannot be read as CSV: {what}") from exc
        if not _unreadable(exc):
            exc.add_note(f"(reading {str(path)!r} as {kind})")
            raise
        raise ValueError(f"{str(path)!r} cannot be read as {kind}: {_reason(exc)}") from exc
    if not parquet and (twice := _repeated(_csv_names(path, frame))):
        raise ValueError(_twice_text(path, twice))
    if not parquet and not frame.index.equals(pd.RangeIndex(len(frame))):
        # Rows longer than the header: pandas takes their first field(s) as the row index
        # and reads the rest under the header's names, shifted ("1,2," under "a,b" was
        # a=2, b=NaN), silently.
        raise ValueError(
            f"{str(path)!r}: its rows have more fields than its header has names "
            f"({len(frame.columns)}): pandas would read the first as the row index and the "
            f"others shifted.{_longer_rows_hint(frame)}"
        )
    # pandas' to_csv writes the index unless index=False: a first column without a name
    # holding 0, 1, ..., n-1 is that index, not a feature (it was the top "feature").
    first = frame.columns[0] if len(frame.columns) else None
    if first == "Unnamed: 0" and np.array_equal(frame[first].to_numpy(), np.arange(len(frame))):
        warnings.warn(
            f"{str(path)!r}: its first column has no name and holds the row numbers 0 to "
            f"{len(frame) - 1}: read as the index pandas' to_csv wrote (index=True), not as "
            "a feature.",
            UserWarning,
            stacklevel=2,
        )
        frame = frame.drop(columns=first)
    return frame


def parquet_missing(path: Path, doing: str) -> str | None:
    """Why ``path`` cannot be read or written, when it is Parquet and no engine is installed.

    pandas reads and writes Parquet with pyarrow (or fastparquet), which fedforest's own
    dependencies leave out (the extra ``parquet`` pins it): the user was shown pandas'
    ImportError as a traceback. ``doing``: "reading" or "writing".
    """
    if path.suffix.lower() not in _PARQUET:
        return None
    for engine in ("pyarrow", "fastparquet"):
        try:
            importlib.import_module(engine)
            return None
        except ImportError:
            continue
    return (
        f"{str(path)!r} is a Parquet file ({path.suffix}): {doing} Parquet needs pyarrow, "
        "which is not installed: pip install 'fedforest[parquet]' (or use a .csv file)."
    )


#: A file's first bytes -> what it is, for a file given as CSV that is none.
_MAGIC = (
    (b"PAR1", "it is a Parquet file; name it .parquet (or .pq)"),
    (b"\x1f\x8b", "it is gzip-compressed; decompress it first (gunzip)"),
    (
        b"PK\x03\x04",
        "it is a ZIP archive (an Excel .xlsx workbook?); save the sheet as CSV or Parquet",
    ),
    (
        b"\xd0\xcf\x11\xe0",
        "it is an Excel 97-2003 workbook (.xls); save the sheet as CSV or Parquet",
    ),
)


def _binary_format(path: Path) -> str:
    """What a file given as CSV is, from its first bytes ("" if none of :data:`_MAGIC`).

    Such a file failed as text not in UTF-8, with the advice to read it as Latin-1.
    """
    with path.open("rb") as file:
        head = file.read(4)
    return next((what for magic, what in _MAGIC if head.startswith(magic)), "")


def _longer_rows_hint(frame: pd.DataFrame) -> str:
    """Why a CSV's rows are longer than its header, from the header's names.

    A ``;``-separated file with decimal commas (``a;b`` over ``0,5;1,2``: Excel in much of
    Europe) and a first line that is no header (Excel's ``sep=;``, a title) were told of a
    trailing comma on each row.
    """
    if str(frame.columns[0]).lower().startswith("sep="):
        return (
            " Its first line is Excel's separator line ('sep=...'): drop it, e.g. "
            "pandas.read_csv(path, skiprows=1).to_csv(new_path, index=False)."
        )
    if hint := separator_hint(frame):
        return f"{hint} Its numbers have decimal commas ('0,5'): add decimal=','."
    if len(frame.columns) == 1 or str(frame.columns[0]).startswith("#"):
        return (
            " Is its first line a title or a comment? Drop it, e.g. "
            "pandas.read_csv(path, skiprows=1).to_csv(new_path, index=False)."
        )
    return (
        " A trailing comma on each row, or a header missing a name? Give each row one field "
        "per name."
    )


def _csv_names(path: Path, frame: pd.DataFrame) -> list[str]:
    """The header's names as written: pandas renames a repeated ``a`` to ``a.1``, ``a.2``.

    Read again (one line) only when a name looks renamed so: ``a.1`` beside an ``a``.
    """
    names = [str(c) for c in frame.columns]
    bases = {n.rpartition(".")[0] for n in names if n.rpartition(".")[2].isdigit()}
    if not bases & set(names):
        return names
    return [str(c) for c in pd.read_csv(path, header=None, nrows=1, dtype=str).iloc[0]]


def _parquet_names(path: Path) -> list[str]:
    """A Parquet file's column names from its schema ([] if it has none to read)."""
    try:
        import pyarrow.parquet as pq

        return [str(n) for n in pq.read_schema(path).names]
    except Exception:  # noqa: BLE001 - the reader's own error is the one to raise then
        return []


def _repeated(names: list[str]) -> list[str]:
    return sorted({n for n in names if names.count(n) > 1})


def _twice_text(path: Path, twice: list[str]) -> str:
    """The refusal of a header that repeats names (which one is the feature, the target?)."""
    return f"{str(path)!r} has duplicate column names {twice}; name each column once."


def _unreadable(exc: BaseException) -> bool:
    """Whether the reader refused the file's structure, in a text that quotes no value.

    pandas' parser errors (ragged rows, no columns: counts of fields and line numbers),
    a decoding error (its byte left out below), an OS error, and pyarrow's errors of a
    file that is not Parquet; not a value the reader could not convert.
    """
    structural = (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError)
    return isinstance(exc, structural) or type(exc).__name__ in ("ArrowInvalid", "ArrowIOError")


def _reason(exc: BaseException) -> str:
    """The reader's reason, without a value of the file.

    A decoding error's text quotes a byte of the file (a letter of a name, say) and a
    SuperNode's error reaches the server: its encoding only. pyarrow's text is kept when it
    speaks of the file's structure; otherwise it is logged for the site's operator.
    """
    if isinstance(exc, UnicodeDecodeError):
        utf16 = bytes(exc.object[:2]) in (b"\xff\xfe", b"\xfe\xff")
        found, encoding = (
            (" (it starts with a UTF-16 byte-order mark)", "utf-16") if utf16 else ("", "latin-1")
        )
        return (
            f"not {exc.encoding} text{found}; fedforest reads UTF-8 CSV: convert it, e.g. "
            f"pandas.read_csv(path, encoding={encoding!r}).to_csv(new_path, index=False) "
            "(with the file's own encoding: 'latin-1', 'cp1252', 'utf-16', ...), or write Parquet"
        )
    name = type(exc).__name__
    if name.startswith("Arrow") and not any(s in str(exc).lower() for s in _ARROW_STRUCTURAL):
        logger.error("pyarrow refused a file: %s", exc)
        return f"pyarrow's {name} (its text may quote a value: logged by 'fedforest.client')"
    return str(exc)


def separator_hint(frame: pd.DataFrame) -> str:
    """Why a file has none of the expected columns, when it was not comma-separated.

    pandas reads a ``;``- or tab-separated file as one column whose name holds the
    separators: the error then says so (before, it listed that one column only).
    """
    if frame.shape[1] != 1:
        return ""
    name = str(frame.columns[0])
    for sep, word in ((";", "';'"), ("\t", "tab"), ("|", "'|'")):
        if sep in name:
            return (
                f" It reads as one column: the file looks {word}-separated, and fedforest "
                "reads comma-separated CSV (convert it, e.g. pandas.read_csv(path, "
                f"sep={sep!r}).to_csv(new_path, index=False), or write Parquet)."
            )
    return ""


def spacing_hint(frame: pd.DataFrame, wanted: list[str]) -> str:
    """Why a file lacks columns it holds with spaces around their names.

    pandas keeps the space after each comma of ``a, b, y`` in the names (``' y'``): the
    error listed the columns, the spaces easy to miss in the quotes.
    """
    spaced = {str(c).strip(): str(c) for c in frame.columns if str(c) != str(c).strip()}
    found = [spaced[w] for w in wanted if w in spaced]
    if not found:
        return ""
    return (
        f" Its column names {found} have spaces around them: read it with "
        "pandas.read_csv(path, skipinitialspace=True) and write it again "
        "(.to_csv(new_path, index=False)), or rename the columns."
    )


def close_names(wanted: list[str], columns: list[str]) -> dict[str, str]:
    """The column of ``columns`` each name of ``wanted`` was likely meant as (misspelt).

    A name differing only in case comes first, then :func:`difflib.get_close_matches`'
    closest; names differing only by spaces around them are :func:`spacing_hint`'s.
    """
    names = [str(c) for c in columns]
    found: dict[str, str] = {}
    for name in wanted:
        candidates = [c for c in names if c.strip() != name]
        same_case = [c for c in candidates if c.lower() == name.lower()]
        close = same_case or difflib.get_close_matches(name, candidates, n=1, cutoff=0.7)
        if close:
            found[name] = close[0]
    return found


def header_hint(frame: pd.DataFrame) -> str:
    """Why a file lacks every named column when its first line is a row of data.

    A CSV written without its header line (``to_csv(header=False)``, an export) has its
    first row's values as column names: the error listed them (``['2.0', '1.19', ...]``).
    Said when at least half of the names read as numbers (a data row's text values, a
    category, are names too).
    """
    # A ';'-, tab- or '|'-separated file without its header reads as one column whose
    # name is the first row: its fields count.
    names = [f for c in frame.columns for f in re.split(r"[;\t|]", str(c))]
    numbers = pd.to_numeric(pd.Series(names, dtype=object), errors="coerce").notna()
    if not names or 2 * int(numbers.sum()) < len(names):
        return ""
    return (
        " Its first line reads as data, not as a header (its column names are numbers): "
        "the file seems to lack its header line; add the column names as its first line."
    )


def read_client_data(path: str | Path, target: str) -> tuple[pd.DataFrame, pd.Series]:
    """Features and target of one client's file.

    Parameters
    ----------
    path : str or Path
        A CSV file (``.csv``, read with pandas' defaults) or a Parquet file
        (``.parquet`` / ``.pq``, needs ``pyarrow``).
    target : str
        The target column; every other column is a feature, in file order.

    Returns
    -------
    X : DataFrame, shape (n_samples, n_features)
    y : Series, shape (n_samples,)

    Raises
    ------
    ValueError
        If the file is missing, cannot be parsed, has no rows or has no column ``target``,
        or a row has no target (pandas reads an empty cell, NA or N/A as missing).
    """
    frame = read_table(path)
    if len(frame) == 0:
        raise ValueError(f"{str(path)!r} has no rows (a client needs at least one).")
    if target not in frame.columns:
        headless = header_hint(frame)
        if headless:  # its "column names" are a row of data: not listed (on Flower this
            # text reaches the server's error)
            raise ValueError(
                f"{str(path)!r} has no target column {target!r}.{separator_hint(frame)}{headless}"
            )
        raise ValueError(
            f"{str(path)!r} has no target column {target!r}; its columns are "
            f"{[str(c) for c in frame.columns]}.{separator_hint(frame)}"
            f"{spacing_hint(frame, [target])}{meant_hint(frame, target)}"
        )
    y = frame[target]
    if y.isna().all():  # "drop those rows" would leave none: the file has no target
        raise ValueError(
            f"{str(path)!r}: target column {target!r} is empty (missing in every row: empty "
            "cells, NaN, NA, N/A, ...); every row needs a target: is it this file's target?"
        )
    if y.isna().any():  # refused by both tasks; here the file is known (no row, no count:
        # a SuperNode's text reaches the server)
        raise ValueError(
            f"{str(path)!r}: target column {target!r} is missing in some rows (an empty "
            "cell, NaN, NA, N/A, ...); every row needs a target: drop those rows."
        )
    return frame.drop(columns=[target]), y


def meant_hint(frame: pd.DataFrame, name: str) -> str:
    """`` Did you mean 'y'?`` for a column ``name`` the file holds spelt otherwise."""
    close = close_names([name], list(frame.columns)).get(name)
    return "" if close is None else f" Did you mean {close!r}?"
