"""A client's rows from a file: CSV or Parquet, the target column named."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["read_client_data", "read_table"]

_PARQUET = {".parquet", ".pq"}


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV (pandas' defaults) or Parquet (``.parquet`` / ``.pq``, needs pyarrow) file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"{str(path)!r} is not a file.")
    try:
        if path.suffix.lower() in _PARQUET:
            return pd.read_parquet(path)
        return pd.read_csv(path)
    except (ValueError, OSError) as exc:  # pandas' and pyarrow's errors do not name the file
        raise ValueError(f"{str(path)!r} cannot be read as a table: {exc}") from exc


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
        If the file is missing, cannot be parsed, has no rows or has no column ``target``.
    """
    frame = read_table(path)
    if len(frame) == 0:
        raise ValueError(f"{str(path)!r} has no rows (a client needs at least one).")
    if target not in frame.columns:
        raise ValueError(
            f"{str(path)!r} has no target column {target!r}; its columns are "
            f"{[str(c) for c in frame.columns]}."
        )
    return frame.drop(columns=[target]), frame[target]
