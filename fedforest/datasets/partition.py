"""Partitioners: assign the rows of a pooled dataset to simulated clients.

Each returns one client id per row (int64, ``0 .. n_clients - 1``); public names are
re-exported by :mod:`fedforest.datasets`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.model_selection import train_test_split

__all__ = [
    "partition_by_column",
    "partition_dirichlet",
    "partition_iid",
    "partition_sorted",
    "split_within_clients",
]


def _check_n_clients(n_clients: int, n_rows: int) -> None:
    if int(n_clients) != n_clients or not 1 <= n_clients <= n_rows:
        raise ValueError(
            f"The 'n_clients' parameter must be an int in [1, {n_rows}] (one row per client "
            f"at least). Got {n_clients!r} instead."
        )


def partition_by_column(values: ArrayLike) -> NDArray[np.int64]:
    """Clients from a natural site column (hospital, center, island).

    Parameters
    ----------
    values : array-like, shape (n_samples,)
        One site label per row.

    Returns
    -------
    client_ids : ndarray of int64, shape (n_samples,)
        Index of each row's site in the sorted distinct labels.

    Raises
    ------
    ValueError
        If a label is missing (NaN, None, ``pd.NA``: a NaN made a client of its own, None
        a ``TypeError`` of the sort) or the labels mix types, as ``fit``'s ``client_ids``.
    """
    labels = np.asarray(values)
    if labels.ndim != 1:
        raise ValueError(f"values must be one label per row; got shape {labels.shape}.")
    kind = labels.dtype.kind
    missing = np.flatnonzero(pd.isna(labels)) if kind in "fO" else np.empty(0, np.intp)
    if missing.size:
        raise ValueError(
            f"values has a missing label at row {missing[0]} ({missing.size} rows in all); "
            "every row needs a site: drop those rows or give them a site of their own."
        )
    try:
        return np.unique(labels, return_inverse=True)[1].astype(np.int64)
    except TypeError as exc:
        raise ValueError(
            f"values must be labels of one sortable type (all numbers or all text): {exc}"
        ) from exc


def partition_iid(
    n_samples: int, n_clients: int, random_state: int | np.random.Generator | None = None
) -> NDArray[np.int64]:
    """Uniformly random clients of equal size (sizes differ by at most one row).

    Parameters
    ----------
    n_samples : int
    n_clients : int
    random_state : int, Generator or None

    Returns
    -------
    client_ids : ndarray of int64, shape (n_samples,)
    """
    _check_n_clients(n_clients, n_samples)
    rng = np.random.default_rng(random_state)
    ids = np.arange(n_samples, dtype=np.int64) % n_clients
    return rng.permutation(ids)


def partition_dirichlet(
    y: ArrayLike,
    n_clients: int,
    alpha: float = 0.5,
    random_state: int | np.random.Generator | None = None,
) -> NDArray[np.int64]:
    """Label-skewed clients: each class is spread over the clients by Dirichlet(alpha).

    For every class, client shares are drawn from ``Dirichlet(alpha * 1_K)`` and that
    class's rows are dealt out in those proportions (the usual non-iid benchmark split;
    small ``alpha`` gives strong skew). Every client is then topped up to at least one
    row by moving rows from the largest client.

    Parameters
    ----------
    y : array-like, shape (n_samples,)
        Class labels.
    n_clients : int
    alpha : float, default=0.5
        Concentration, > 0.
    random_state : int, Generator or None

    Returns
    -------
    client_ids : ndarray of int64, shape (n_samples,)
    """
    labels = np.asarray(y)
    _check_n_clients(n_clients, labels.shape[0])
    if not alpha > 0:
        raise ValueError(f"The 'alpha' parameter must be > 0. Got {alpha!r} instead.")
    rng = np.random.default_rng(random_state)
    ids = np.empty(labels.shape[0], dtype=np.int64)
    for label in np.unique(labels):
        rows = rng.permutation(np.flatnonzero(labels == label))
        shares = rng.dirichlet(np.full(n_clients, float(alpha)))
        cuts = np.round(np.cumsum(shares)[:-1] * rows.size).astype(np.int64)
        for k, part in enumerate(np.split(rows, cuts)):
            ids[part] = k
    for k in range(n_clients):
        if not (ids == k).any():
            largest = int(np.argmax(np.bincount(ids, minlength=n_clients)))
            ids[rng.choice(np.flatnonzero(ids == largest))] = k
    return ids


def partition_sorted(x: ArrayLike, n_clients: int) -> NDArray[np.int64]:
    """Covariate-sorted clients: rows sorted by ``x`` and cut into contiguous blocks.

    The strongest covariate shift: client supports along ``x`` are disjoint.

    Parameters
    ----------
    x : array-like, shape (n_samples,)
        The sorting covariate (ties keep row order).
    n_clients : int

    Returns
    -------
    client_ids : ndarray of int64, shape (n_samples,)
        Client 0 holds the smallest values.
    """
    values = np.asarray(x, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"x must be one value per row; got shape {values.shape}.")
    _check_n_clients(n_clients, values.shape[0])
    order = np.argsort(values, kind="stable")
    ids = np.empty(values.shape[0], dtype=np.int64)
    ids[order] = np.arange(values.shape[0]) * n_clients // values.shape[0]
    return ids


def split_within_clients(
    client_ids: ArrayLike,
    test_size: float = 0.3,
    stratify: ArrayLike | None = None,
    random_state: int | None = None,
) -> NDArray[np.bool_]:
    """Hold out a fraction of every client's rows, so the test set mixes all clients.

    Clients with fewer than two rows keep them all for training. Stratification by
    ``stratify`` is used inside a client when every class there has at least two rows.

    Parameters
    ----------
    client_ids : array-like, shape (n_samples,)
    test_size : float, default=0.3
    stratify : array-like of shape (n_samples,) or None
    random_state : int or None

    Returns
    -------
    is_test : ndarray of bool, shape (n_samples,)
    """
    ids = np.asarray(client_ids)
    strata = None if stratify is None else np.asarray(stratify)
    rng = np.random.default_rng(random_state)
    is_test = np.zeros(ids.shape[0], dtype=bool)
    for client in np.unique(ids):
        rows = np.flatnonzero(ids == client)
        n_test = int(round(test_size * rows.size))
        if rows.size < 2 or n_test == 0:
            continue
        n_test = min(n_test, rows.size - 1)
        labels = None if strata is None else strata[rows]
        if labels is not None and (np.unique(labels, return_counts=True)[1] < 2).any():
            labels = None
        try:
            _, test = train_test_split(
                rows, test_size=n_test, stratify=labels, random_state=int(rng.integers(2**31))
            )
        except ValueError:  # too few rows per class for the requested split
            _, test = train_test_split(rows, test_size=n_test, random_state=0)
        is_test[test] = True
    return is_test
