"""A SuperNode's own rows: a CSV or Parquet file named in its node config."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..._common import is_int_in
from ...datasets.files import read_client_data
from ...federated.client import Client
from ...federated.client_errors import is_refusal

__all__ = ["client_from_node_config", "read_client_data"]


def client_from_node_config(node_config: Mapping[str, Any]) -> Client:
    """The :class:`~fedforest.Client` a SuperNode's ``--node-config`` describes.

    Keys: ``data-path`` (CSV or Parquet), ``target`` (column name) and ``name`` (the
    client name, which seeds the client's bootstrap exactly as a local ``Client`` of that
    name does; defaults to the file's stem), and ``min-dp-colluders`` (the client's
    ``min_dp_colluders``: under ``privacy="dp"`` it refuses a run config whose
    ``dp-colluders`` is below; default 0).

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
    if not path.expanduser().is_file():
        raise ValueError(f"data-path {str(path)!r} is not a file; give each SuperNode its own.")
    X, y = read_client_data(path, str(node_config["target"]))
    floor = node_config.get("min-dp-colluders", 0)
    if not is_int_in(floor):
        raise ValueError(f"node config min-dp-colluders={floor!r}: a whole number >= 0.")
    # The Series, read as fit reads it (Client): a nullable Int64 target gives floats.
    try:
        return Client(X, y, name=str(node_config.get("name", path.stem)), min_dp_colluders=floor)
    except (ValueError, TypeError) as exc:
        if not is_refusal(exc):  # a library's text may quote a value: sent as its type only
            raise
        # fedforest's refusal names the client and the column; the file too, as the
        # reader's own refusals do (a SuperNode's operator looks for the file).
        raise type(exc)(f"{str(path)!r}: {exc}") from exc
