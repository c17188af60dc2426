"""A SuperNode's own rows: a CSV or Parquet file named in its node config."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ...federated.client import Client

__all__ = ["client_from_node_config", "read_client_data"]

_PARQUET = {".parquet", ".pq"}


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
        If the file is missing or has no column ``target``.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"data-path {str(path)!r} is not a file; give each SuperNode its own.")
    if path.suffix.lower() in _PARQUET:
        frame = pd.read_parquet(path)
    else:
        frame = pd.read_csv(path)
    if target not in frame.columns:
        raise ValueError(
            f"{str(path)!r} has no target column {target!r}; its columns are "
            f"{[str(c) for c in frame.columns]}."
        )
    return frame.drop(columns=[target]), frame[target]


def client_from_node_config(node_config: Mapping[str, Any]) -> Client:
    """The :class:`~fedforest.Client` a SuperNode's ``--node-config`` describes.

    Keys: ``data-path`` (CSV or Parquet), ``target`` (column name) and ``name`` (the
    client name, which seeds the client's bootstrap exactly as a local ``Client`` of that
    name does; defaults to the file's stem).

    Raises
    ------
    ValueError
        If ``data-path`` or ``target`` is missing, or the data is invalid.
    """
    missing = [key for key in ("data-path", "target") if key not in node_config]
    if missing:
        raise ValueError(
            f"The SuperNode's node config lacks {missing}; start it with --node-config "
            '\'data-path="/path/to/rows.csv" target="y" name="site-a"\'.'
        )
    path = Path(str(node_config["data-path"]))
    X, y = read_client_data(path, str(node_config["target"]))
    return Client(X, y.to_numpy(), name=str(node_config.get("name", path.stem)))
