"""A client's per-fit state as Flower records, so that it survives between messages.

A SuperNode runs the ClientApp in a fresh process for every message (Flower's
``subprocess`` and ``process`` isolation modes alike), so the state a
:class:`~fedforest.Client` keeps between rounds (its bootstrap rows and their node
slots, the sampled features, the fine codes of its values) is written to the run's
``Context.state`` after each message and read back before the next one. The data
itself is not: the ClientApp reads its file again.

The categorical columns travel as the set-up coded them (into the federation's lists of
levels; the file read again holds the levels themselves: before, a client rebuilt for a
later message summed other rows per category, and the server refused the round).

The client's column order travels too: when the clients' files have the same columns in
different orders, the handshake puts each in the federation's order, and the client
rebuilt from its file for the next message is put in it again.

The state is the client's private attributes ``_fit`` (a dataclass of arrays and
scalars), ``_oob_setup`` and ``_codes`` (tuples), and under ``privacy="secure"`` its
masking keys and bootstrap secret (``_secure``; they never leave the SuperNode); they are
encoded generically, field by field, so that a field added to the client's state travels
without a change here.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from numpy.typing import NDArray

from ._codec import pack_arrays, unpack_arrays

if TYPE_CHECKING:  # imported on use: clear_state and state_seq need neither
    from ...federated.client import Client

__all__ = ["clear_state", "load_state", "save_state", "state_seq"]

STATE_CONFIG = "fedforest.client"
STATE_ARRAYS = "fedforest.client.arrays"
#: The categorical columns as the set-up coded them (the fields' arrays are "a0", "a1", ...).
CATEGORICAL = "categorical"
_FIELDS = ("_fit", "_oob_setup", "_codes", "_fit_secure", "_secure")


def save_state(client: Client, state: RecordDict, seq: int) -> None:
    """Write the client's per-fit state (and the message counter ``seq``) into ``state``."""
    arrays: dict[str, NDArray[Any]] = {}
    tree = {name: _encode(getattr(client, name), arrays) for name in _FIELDS}
    categorical = sorted(client._cat_raw)
    if categorical:  # the set-up coded them into the federation's lists; the file has levels
        arrays[CATEGORICAL] = np.ascontiguousarray(client.X[:, categorical])
    layout, buffer = pack_arrays(arrays)
    meta = {
        "seq": seq,
        "n_samples": client.n_samples,
        # The column order the handshake settled on (the file's may differ).
        "feature_names": client.feature_names,
        "categorical": categorical,
        # Its index among the clients (the set-up's; X's last column H under split_on_client).
        "client_index": float(client.Xt[-1, 0]) if client.n_samples else -1.0,
        "tree": tree,
        "layout": layout,
    }
    state[STATE_CONFIG] = ConfigRecord({"meta": json.dumps(meta, separators=(",", ":"))})
    state[STATE_ARRAYS] = ArrayRecord({"packed": Array(buffer)})


def load_state(client: Client, state: RecordDict) -> int:
    """Restore the state written by :func:`save_state`; returns its counter (0 if none).

    Raises
    ------
    ValueError
        If the state was written for a client with another number of rows (the data
        file changed during the run).
    """
    if STATE_CONFIG not in state.config_records:
        return 0
    meta = json.loads(str(state.config_records[STATE_CONFIG]["meta"]))
    if meta["n_samples"] != client.n_samples:
        raise ValueError(
            f"Client {client.name!r} has {client.n_samples} rows but its state from the "
            f"previous round was built on {meta['n_samples']}: the data file changed during "
            "the run."
        )
    if meta.get("feature_names") is not None:  # before the fine codes, which follow it
        client.align_columns(meta["feature_names"])
    buffer = state.array_records[STATE_ARRAYS]["packed"].numpy()
    arrays = unpack_arrays(meta["layout"], buffer, "the SuperNode state")
    client.Xt[-1] = float(meta.get("client_index", -1.0))
    categorical = meta.get("categorical") or []
    if categorical:
        coded = arrays.get(CATEGORICAL)
        shape = (client.n_samples, len(categorical))
        if sorted(client._cat_raw) != categorical or coded is None or coded.shape != shape:
            raise ValueError(
                f"Client {client.name!r}: its state from the previous round has categorical "
                f"columns {categorical}, its data file {sorted(client._cat_raw)}: the data "
                "file changed during the run."
            )
        client.X[:, categorical] = coded
        client.Xt[categorical] = coded.T
    for name in _FIELDS:
        if name in meta["tree"]:
            setattr(client, name, _decode(meta["tree"][name], arrays, client))
    return int(meta["seq"])


def state_seq(state: RecordDict) -> int:
    """The message counter of the saved state (0 if there is none)."""
    if STATE_CONFIG not in state.config_records:
        return 0
    return int(json.loads(str(state.config_records[STATE_CONFIG]["meta"]))["seq"])


def clear_state(state: RecordDict) -> None:
    """Drop the client's state from ``state`` (the fit is over)."""
    for key in (STATE_CONFIG, STATE_ARRAYS):
        if key in state:
            del state[key]


def _encode(value: Any, arrays: dict[str, NDArray[Any]]) -> Any:
    """A JSON tree for ``value``; arrays go to ``arrays`` under a generated name."""
    from ...federated.client import _Fit
    from ...federated.client_grid import GridCodes
    from ...federated.client_secure import SecureParty

    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    if isinstance(value, np.generic):
        return {"v": value.item()}
    if isinstance(value, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = value
        return {"a": key}
    if isinstance(value, _Fit):
        return {"fit": {f.name: _encode(getattr(value, f.name), arrays) for f in _fields()}}
    if isinstance(value, SecureParty):
        return {"secure": _encode(value.to_state(), arrays)}
    if isinstance(value, GridCodes):  # a cache of the data's bins: remade on first use
        return {"v": None}
    if isinstance(value, (tuple, list)):
        return {"t": [_encode(v, arrays) for v in value]}
    raise TypeError(f"Cannot keep a {type(value).__name__} in the client state.")


def _decode(node: dict[str, Any], arrays: dict[str, NDArray[Any]], client: Client) -> Any:
    """Inverse of :func:`_encode`."""
    from ...federated.client import _Fit
    from ...federated.client_secure import SecureParty

    if "secure" in node:
        return SecureParty.from_state(client, _decode(node["secure"], arrays, client))
    if "v" in node:
        return node["v"]
    if "a" in node:
        return np.array(arrays[node["a"]])  # a copy: kernels may write into it
    if "fit" in node:
        return _Fit(**{name: _decode(v, arrays, client) for name, v in node["fit"].items()})
    return tuple(_decode(v, arrays, client) for v in node["t"])


def _fields() -> tuple[dataclasses.Field[Any], ...]:
    from ...federated.client import _Fit

    return dataclasses.fields(_Fit)
