"""Clients from Dask collections: which rows each client holds and on which worker.

Only metadata reaches the process that runs the server (partition counts, the workers
holding them, per-partition label counts); the rows are computed on the workers and stay
there, except the rows of a ``client_ids`` label, which move worker to worker to the
worker that holds most of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import dask.array as da
import dask.dataframe as dd
import numpy as np
from distributed import Client as DaskClient
from distributed import Future, wait
from numpy.typing import NDArray

from ...federated.row_clients import client_index
from ._actor import Spec, client_from_pieces, select_rows

__all__ = ["PARTITIONS_AS", "client_specs", "is_dask_collection", "row_blocks"]

PARTITIONS_AS = ("partition", "worker")


def is_dask_collection(obj: Any) -> bool:
    """A Dask collection (DataFrame, Series, Array), tested without importing Dask."""
    return hasattr(type(obj), "__dask_graph__")


def row_blocks(obj: Any, name: str, ndim: int | None = None) -> list[Any]:
    """The row blocks of a Dask collection as delayed objects, in order.

    ``ndim=1``: a Series, a one-column DataFrame or a 1-D Array; ``ndim=2``: a DataFrame or
    a 2-D Array (its columns in one block). A ValueError names ``name`` otherwise.
    """
    if isinstance(obj, da.Array):
        if ndim is not None and obj.ndim != ndim:
            raise ValueError(
                f"{name} is a {obj.ndim}-D Dask Array; expected {ndim}-D "
                f"({'one value per row' if ndim == 1 else 'rows by features'})."
            )
        if obj.ndim == 2:
            return list(obj.rechunk({1: -1}).to_delayed()[:, 0])
        if obj.ndim == 1:
            return list(obj.to_delayed())
        raise ValueError(f"{name} is a {obj.ndim}-D Dask Array; expected 1-D or 2-D.")
    if isinstance(obj, dd.DataFrame):
        if ndim == 1 and len(obj.columns) != 1:
            raise ValueError(
                f"{name} is a Dask DataFrame with {len(obj.columns)} columns; expected one "
                "value per row (a Series, a one-column DataFrame or a 1-D Array)."
            )
        return list(obj.to_delayed())
    if isinstance(obj, dd.Series):
        if ndim == 2:
            raise ValueError(f"{name} is a Dask Series; expected a Dask DataFrame or 2-D Array.")
        return list(obj.to_delayed())
    raise ValueError(
        f"{name} is a {type(obj).__name__}; expected a Dask DataFrame, Series or Array "
        "(give every one of X, y and client_ids as Dask collections partitioned alike)."
    )


def _check_aligned(X: Any, others: dict[str, Any]) -> None:
    """Same number of row blocks, and the same block lengths where Dask knows them."""
    n = X.numblocks[0] if isinstance(X, da.Array) else X.npartitions
    for name, obj in others.items():
        m = obj.numblocks[0] if isinstance(obj, da.Array) else obj.npartitions
        if m != n:
            raise ValueError(
                f"{name} has {m} partitions but X has {n}; partition {name} as X "
                "(e.g. X.map_partitions or Array.rechunk) so each row meets its own."
            )
        if isinstance(X, da.Array) and isinstance(obj, da.Array):
            a, b = X.chunks[0], obj.chunks[0]
            if not any(np.isnan(a)) and not any(np.isnan(b)) and a != b:
                raise ValueError(
                    f"{name} has row chunks {b} but X has {a}; rechunk {name} like X "
                    f"({name}.rechunk(X.chunks[0]))."
                )


def client_specs(
    client: DaskClient,
    X: Any,
    y: Any,
    client_ids: Any,
    partitions_as: str,
    categorical_features: Sequence[Any] | None,
) -> dict[str, Spec]:
    """Client name -> (worker, build, args): what each actor is built from, and where."""
    if partitions_as not in PARTITIONS_AS:
        raise ValueError(f"partitions_as must be one of {PARTITIONS_AS}, got {partitions_as!r}.")
    if isinstance(client_ids, dd.DataFrame) and len(client_ids.columns) == 1:
        client_ids = client_ids[client_ids.columns[0]]  # its labels, one per row
    others = {"y": y} if client_ids is None else {"y": y, "client_ids": client_ids}
    xs = row_blocks(X, "X", ndim=2)
    ys = row_blocks(y, "y", ndim=1)
    ids = [] if client_ids is None else row_blocks(client_ids, "client_ids", ndim=1)
    _check_aligned(X, others)
    # One graph: blocks X and y share (one read of a Parquet file) are computed once.
    futures: list[Future] = client.compute(xs + ys + ids)
    wait(futures)
    for future in futures:
        if future.status == "error":
            future.result()  # the collection itself failed to compute: its own error
    n = len(xs)
    fx, fy, fid = futures[:n], futures[n : 2 * n], futures[2 * n :]
    where = _homes(client, futures)
    homes = where[:n]
    lengths = _check_lengths(client, futures, where, list(others))
    cat = list(categorical_features) if categorical_features is not None else None
    if client_ids is not None:
        return _by_label(client, fx, fy, fid, homes, cat)
    # An empty partition (a filtered DataFrame's, say) makes no client: one would refuse to
    # be built ("has no rows"), and the same rows in memory have no such client either.
    full = [i for i in range(n) if lengths[i] > 0]
    if not full:
        raise ValueError(f"X has no rows: all of its {n} partitions are empty.")
    if partitions_as == "partition":
        return {
            str(i): (homes[i], client_from_pieces, (str(i), [(fx[i], fy[i])], cat)) for i in full
        }
    names = {a: info.get("name", a) for a, info in client.scheduler_info()["workers"].items()}
    groups: dict[str, list[int]] = defaultdict(list)
    for i in full:
        groups[homes[i]].append(i)
    specs: dict[str, Spec] = {}
    for home, parts in groups.items():
        name = f"worker-{names.get(home, home)}"
        pieces = [(fx[i], fy[i]) for i in parts]
        specs[name] = (home, client_from_pieces, (name, pieces, cat))
    return specs


def _check_lengths(
    client: DaskClient, futures: list[Future], homes: list[str], names: list[str]
) -> list[int]:
    """Row counts of X's partitions, after checking those of ``names`` (y, client_ids) equal.

    Counted where each partition lives. Partitions that do not line up (y from another
    frame, or repartitioned) failed each client's build instead, once per client, with
    "y has shape (100,); expected (200,), ... (or (200, n_outputs) for multi-output y)".
    """
    n = len(futures) // (len(names) + 1)
    counts = client.gather(
        [
            client.submit(len, f, workers=[h], pure=False)
            for f, h in zip(futures, homes, strict=True)
        ]
    )
    for k, name in enumerate(names, 1):
        for i in range(n):
            if counts[k * n + i] != counts[i]:
                raise ValueError(
                    f"Partition {i} of {name} has {counts[k * n + i]} rows but partition {i} "
                    f"of X has {counts[i]}; partition {name} as X so each row meets its own "
                    f"(e.g. X and {name} as columns of one Dask DataFrame)."
                )
    return [int(c) for c in counts[:n]]


def _homes(client: DaskClient, futures: list[Future]) -> list[str]:
    """The address of a worker holding each future's data."""
    who = client.who_has(futures)
    return [sorted(who[f.key])[0] for f in futures]


def _label_counts(ids: Any, index: int) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """Distinct labels of one partition, in order, and their row counts (run where it lives).

    :func:`~fedforest.federated.row_clients.client_index` turns them into clients, as ``fit``
    does in memory: the same checks (NaN, one sortable type), the same messages, then the
    partition (their row numbers count from its start: "row 5" was partition 2's).
    """
    values = np.asarray(ids)
    try:
        inverse, names = client_index(values, values.shape[0] if values.ndim else 0)
    except ValueError as exc:
        where = f"Partition {index} of client_ids; rows counted within it"
        raise ValueError(f"{exc} ({where}.)") from None
    first = np.unique(inverse, return_index=True)[1]
    return values[first], np.bincount(inverse, minlength=len(names)).astype(np.int64)


def _by_label(
    client: DaskClient,
    fx: list[Future],
    fy: list[Future],
    fid: list[Future],
    homes: list[str],
    cat: list[Any] | None,
) -> dict[str, Spec]:
    """One client per distinct label, on the worker holding most of its rows."""
    counted = client.gather(
        [
            client.submit(_label_counts, f, i, workers=[h], pure=False)
            for i, (f, h) in enumerate(zip(fid, homes, strict=True))
        ]
    )
    # The partitions' distinct labels together, through the same helper: the clients and
    # their order (sorted labels), or the error, are those of the rows in memory.
    found = [labels for labels, _ in counted]
    pooled = np.concatenate([v.astype(object) for v in found]) if found else np.zeros(0)
    inverse, names = client_index(pooled, pooled.shape[0])
    rows: list[dict[str, int]] = [defaultdict(int) for _ in names]
    parts: list[list[tuple[int, Any]]] = [[] for _ in names]
    at = 0
    for i, (labels, counts) in enumerate(counted):
        for label, count in zip(labels.tolist(), counts.tolist(), strict=True):
            k = int(inverse[at])
            rows[k][homes[i]] += count
            parts[k].append((i, label))  # the label as this partition holds it
            at += 1
    specs: dict[str, Spec] = {}
    for k, name in enumerate(names):
        home = min(rows[k], key=lambda a: (-rows[k][a], a))
        pieces = [
            client.submit(select_rows, fx[i], fy[i], fid[i], label, workers=[homes[i]], pure=False)
            for i, label in parts[k]
        ]
        specs[name] = (home, client_from_pieces, (name, pieces, cat))
    return specs
