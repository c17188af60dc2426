"""The rows' clients: ``client_ids`` (one label per row) as client numbers and names.

Used by ``fit``, Dask's collections and ``diagnose``; moved out of ``_inputs.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .categorical import is_missing

__all__ = ["client_index"]


def client_index(client_ids: Any, n: int) -> tuple[NDArray[np.int64], list[str]]:
    """Client number of every row and the client names, from one label per row.

    Returns
    -------
    inverse : ndarray of int64, shape (n,)
        Index into ``names`` of each row's client.
    names : list of str
        ``str(label)`` of each distinct label, in sorted label order.
    """
    if client_ids is None:
        return np.zeros(n, dtype=np.int64), ["0"]
    if isinstance(client_ids, str):  # a column's name, or Dask's "partition" / "worker"
        raise ValueError(
            f"client_ids={client_ids!r} is one string; give one client label per row of X, "
            f"e.g. client_ids=X[{client_ids!r}] (and X.drop(columns={client_ids!r}) unless "
            "it is a feature too). 'partition' and 'worker' are for Dask collections only."
        )
    ids = np.asarray(client_ids)
    if ids.ndim != 1 or ids.shape[0] != n:
        raise ValueError(
            f"client_ids has shape {ids.shape}; expected ({n},), one client label per row of X."
        )
    if ids.dtype.kind in "fc" and np.isnan(ids).any():
        raise ValueError("client_ids contains NaN; every row needs a client label.")
    if ids.dtype.kind in "mM" and np.isnat(ids).any():  # NaT was a client named "None"
        rows = np.flatnonzero(np.isnat(ids))
        raise ValueError(
            f"client_ids contains a missing value (NaT, row {rows[0]}, {len(rows)} row(s) in "
            "all); every row needs a client label."
        )
    if ids.dtype == object:  # None, NaN or pd.NA among labels: np.unique's TypeError
        missing = [i for i, v in enumerate(ids.tolist()) if is_missing(v)]
        if missing:
            raise ValueError(
                f"client_ids contains a missing value ({ids[missing[0]]!r}, row "
                f"{missing[0]}, {len(missing)} row(s) in all); every row needs a client label."
            )
    try:
        labels, inverse = np.unique(ids, return_inverse=True)
    except TypeError as exc:
        raise ValueError(
            f"client_ids must be labels of one sortable type (all int or all str): {exc}"
        ) from exc
    names = [str(label) for label in labels.tolist()]
    empty = [k for k, name in enumerate(names) if not name.strip()]  # a Client refuses it
    if empty:
        rows = np.flatnonzero(np.isin(inverse, empty))
        raise ValueError(
            f"client_ids contains an empty label ({names[empty[0]]!r}, row {rows[0]}, "
            f"{len(rows)} row(s) in all); every row needs a client label."
        )
    if len(set(names)) != len(names):
        raise ValueError(f"client_ids has distinct labels with the same name: {names}.")
    return inverse.astype(np.int64), names
