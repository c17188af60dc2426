"""A client's handshake and set-up: its answer to the handshake, its per-fit state.

Moved out of ``client.py`` (the 800-line cap); :class:`~fedforest.federated.client.Client`
calls these from its ``_handshake`` and ``_setup`` and re-exports ``_Fit`` and
``SETUP_DRAWS`` (patch ``SETUP_DRAWS`` here: this module reads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .._common import N_FINE_BINS, class_sizes
from .client_grid import GridCodes
from .client_secure import SecureParty
from .client_sketch import fine_codes
from .client_targets import (
    check_labels,
    check_poisson_targets,
    check_regression_targets,
    class_codes,
    class_row_weights,
    feature_sketches,
    label_header,
    poisson_column,
)
from .domains import check_declared_labels, encode_levels, handshake_levels
from .privacy.weight_band import check_band, trim_weights
from .protocol import HANDSHAKE, PROTOCOL_VERSION, Message, protocol_mismatch

if TYPE_CHECKING:
    from .client import Client

__all__ = ["SETUP_DRAWS", "encode_categories", "handshake", "merge_codes", "set_up"]
SETUP_DRAWS = 1 << 20  # a set-up's block of trees holds about this many (tree, row) draws


@dataclass
class _Fit:
    """Per-fit state: set by the first Round A, dropped after the out-of-bag round."""

    n_trees: int
    n_classes: int
    y: NDArray[np.float64]
    n_bins: int | None
    rows: NDArray[np.int32]
    w: NDArray[np.float64]
    slot: NDArray[np.int32]
    tree_rows: NDArray[np.int64]
    pair_off: NDArray[np.int64] | None = None
    pair_feat: NDArray[np.int32] | None = None
    slot_tree: NDArray[np.int64] | None = None
    pair_present: NDArray[np.bool_] | None = None
    send_sketch: bool = True
    summary: NDArray[np.float64] | None = None
    split_rule: str = "exact"
    top_l: int | None = None
    criterion: str = "squared_error"
    #: criterion="poisson": y log y of every row (its statistics' second task column).
    y_log: NDArray[np.float64] | None = None
    local_candidates: bool = False
    min_rows: int = 1
    secure: bool = False
    #: Sample weights multiply the bootstrap counts (weight and class columns: real sums).
    weighted: bool = False
    #: binning="global": every row's bin among its column's candidates.
    grid: GridCodes | None = None
    #: privacy="secure": the level's grids' offsets and Round A's wire arrays of them as
    #: checked (``grid_wire.grid_inputs``; Round B decodes its candidates' edges from them).
    level_grid_off: NDArray[np.int64] | None = None
    level_wire: tuple[NDArray[Any], ...] | None = None


def handshake(client: Client, msg: Message) -> Message:
    """Answer the handshake: schema, rows, missing columns, levels, labels, key."""
    if (why := protocol_mismatch(msg.header.get("protocol"))) is not None:
        raise ValueError(f"Client {client.name!r}: the server {why}.")
    if msg.header.get("feature_order") is not None:  # the federation's column order
        client.align_columns(msg.header["feature_order"])
    header: dict[str, Any] = {
        "protocol": PROTOCOL_VERSION,
        "name": client.name,
        "n_samples": client.n_samples,
        "n_features": int(client.X.shape[1]),
        "feature_names": client.feature_names,
    }
    # The columns with missing values (NaN) in this client; under "dp" every numeric
    # column (one row must not change what the handshake says).
    missing = np.array(client.missing, dtype=bool)
    if msg.header.get("privacy") == "dp":
        missing[[j for j in range(missing.size) if j not in client._cat_raw]] = True
    if missing.any():
        header["missing_features"] = np.flatnonzero(missing).tolist()
    # Its rows weigh other than 1 (the values stay here); under "dp" whether it was given
    # weights: a row of weight 0.5 among ones must not change the reply (red team 21).
    dp_given = msg.header.get("privacy") == "dp" and client._weights_given
    if client.sample_weight is not None or dp_given:
        header["weighted"] = True
    if client.target_names is not None:  # the server checks every client's outputs' order
        header["target_names"] = client.target_names
    arrays: dict[str, NDArray[Any]] = {}
    client._secure = None
    regression = msg.header.get("task") != "classification"
    if regression:  # checked before the secure party's secret reads them as floats
        check_regression_targets(client.y_raw, client.name)
        if msg.header.get("criterion") == "poisson":  # its domain: before any round's cost
            check_poisson_targets(client.y_raw.astype(np.float64), client.name)
            if msg.header.get("privacy") == "none":  # the pooled sum's sign (server/handshake)
                header["targets_positive"] = bool(np.any(client.y_raw.astype(np.float64) > 0))
    if msg.header.get("privacy") in ("secure", "dp"):
        dp = msg.header.get("privacy") == "dp"
        client._secure = SecureParty(client, dp=dp, regression=regression)
        arrays["public_key"] = np.frombuffer(client._secure.keys.public_bytes, dtype=np.uint8)
    elif msg.header.get("ranges"):
        # Under "none": per-feature min and max (histogram baseline, constant features).
        gone = np.isinf(client.X)  # missing values; an all-missing column gives 0 and 0
        lo = np.where(gone, np.inf, client.X).min(axis=0)
        hi = np.where(gone, -np.inf, client.X).max(axis=0)
        arrays = {
            "feature_min": np.where(np.isfinite(lo), lo, 0.0),
            "feature_max": np.where(np.isfinite(hi), hi, 0.0),
        }
    if msg.header.get("feature_sketch") and "public_key" not in arrays:  # "none" only
        arrays["feature_sketch"], arrays["feature_rows"] = feature_sketches(
            client.X, int(msg.header["feature_sketch"])
        )
    # Each categorical column's levels as the privacy level and the declarations allow.
    header["categories"], declared = handshake_levels(
        client._cat_raw, client._dtype_levels, msg.header, client.feature_names,
        int(client.X.shape[1]), f"Client {client.name!r}",
    )  # fmt: skip
    if declared:
        header["declared"] = declared
    if client.y_raw.ndim == 2:
        header["n_outputs"] = int(client.y_raw.shape[1])
    if msg.header.get("task") == "classification":  # the labels present (per output)
        check_labels(client.y_raw, client.name)
        privacy, classes = msg.header.get("privacy", "none"), msg.header.get("classes")
        if classes is not None:  # declared: checked here, not answered (but under "none")
            check_declared_labels(client.y_raw, classes, f"Client {client.name!r}")
        if privacy == "none" or (classes is None and privacy != "dp"):
            rule = int(msg.header.get("min_level_rows", 1)) if privacy == "secure" else 1
            header.update(label_header(client.y_raw, privacy == "none", rule))
    return Message(HANDSHAKE, header, arrays)


def set_up(client: Client, msg: Message) -> _Fit:
    """The fit's state from the set-up sent with its first Round A (in-bag rows, weights)."""
    setup, classes = msg.header["setup"], msg.header["setup"]["classes"]
    if classes is None:
        y = client.y_raw.astype(np.float64)
        n_classes = 0
    else:  # codes; with several outputs, each in its own block of class columns
        y, n_classes = class_codes(client.y_raw, classes, client.name)
    client._class_sizes = class_sizes(classes) if classes is not None else ()
    if setup.get("privacy") in ("secure", "dp"):  # regression: standardised targets
        y = client._secure_party().set_up(msg, y, n_classes)
    encode_categories(client, setup.get("categories") or {})
    if setup.get("code_map"):  # "secure": codes few rows hold, merged (server/rare_codes.py)
        merge_codes(client, setup["code_map"], setup.get("categories") or {})
    clients = setup.get("clients") or []
    first_tree = int(setup.get("first_tree", 0))
    if first_tree == 0:
        client._excluded = set()  # a new fit
    if "tree_clients" in setup:
        me = clients.index(client.name) if client.name in clients else -1
        client._excluded |= {
            first_tree + t for t, chosen in enumerate(setup["tree_clients"]) if me not in chosen
        }
    client.Xt[-1] = clients.index(client.name) if client.name in clients else -1.0
    n_trees, first = int(setup["n_trees"]), int(setup.get("first_tree", 0))
    draws = int(setup.get("draws", {}).get(client.name, client.n_samples))
    client._oob_setup = (int(setup["seed"]), bool(setup["bootstrap"]), n_classes, y, draws)
    rows, w, tree_rows = [], [], np.zeros(n_trees + 1, dtype=np.int64)
    weighted, row_w = bool(setup.get("weighted", False)), client.sample_weight
    if row_w is not None and setup.get("privacy") == "dp":  # the noise's bound: 1 a row
        row_w = np.minimum(row_w, 1.0)
    if row_w is not None and setup.get("weight_band") is not None:  # "secure": trimmed
        row_w = trim_weights(row_w, check_band(setup["weight_band"], client.name), client.name)
    if setup.get("class_weights") is not None:  # multi-output class_weight: on the rows
        row_w = class_row_weights(row_w, y, setup["class_weights"])
    n = client.n_samples
    step = max(1, SETUP_DRAWS // max(n, 1))  # trees a block: (trees, rows) draws at once
    for lo in range(0, n_trees, step):
        ts = range(lo, min(n_trees, lo + step))
        counts = client._counts_of(range(first + ts.start, first + ts.stop))
        if weighted and row_w is not None:  # a row of weight 0 takes no part (as in sklearn)
            counts = np.where(row_w > 0, counts, 0)
        at = np.flatnonzero(counts)  # in-bag rows tree after tree
        rows.append((at % max(n, 1)).astype(np.int32))
        w.append(counts.ravel()[at].astype(np.float64))
        if weighted and row_w is not None:
            w[-1] *= row_w[rows[-1]]  # bootstrap count times sample (and class) weight
        tree_rows[lo + 1 : ts.stop + 1] = tree_rows[lo] + np.cumsum((counts != 0).sum(axis=1))
    n_bins, quantile = setup["n_bins"], setup.get("binning", "quantile") == "quantile"
    if n_bins is not None and client._codes is None and quantile:
        client._codes = fine_codes(client.X, N_FINE_BINS)
    slot = np.repeat(np.arange(n_trees, dtype=np.int32), np.diff(tree_rows))
    rows_all, w_all = np.concatenate([np.zeros(0, np.int32), *rows]), np.concatenate([[], *w])
    fit = _Fit(n_trees, n_classes, y, n_bins, rows_all, w_all, slot, tree_rows)
    fit.send_sketch = quantile
    fit.split_rule = setup.get("split_rule", "exact")
    fit.top_l = setup.get("top_l")
    fit.criterion = setup.get("criterion", "squared_error")
    if fit.criterion == "poisson":
        fit.y_log = poisson_column(y, client.name)
    fit.local_candidates = bool(setup.get("local_candidates", False)) and fit.send_sketch
    fit.min_rows = int(setup.get("min_samples_leaf", 1))
    fit.secure = setup.get("privacy") in ("secure", "dp")
    fit.weighted = weighted
    client._fit_secure = fit.secure
    return fit


def merge_codes(client: Client, code_map: Any, categories: dict[str, list[Any]]) -> None:
    """Each listed column's codes replaced by their merged codes.

    Checked first: per column of the client's, one whole code in range per level of the
    column's list.
    """
    entries: list[tuple[Any, Any]] = list(code_map.items()) if isinstance(code_map, dict) else []
    for key, code in entries or [("", None)]:
        j = int(key) if isinstance(key, str) and key.isdigit() else -1
        size = len(categories.get(key, [])) if j >= 0 else 0
        ok = isinstance(code, list) and size > 0 and len(code) == size
        ok = ok and all(type(v) is int and 0 <= v < size for v in code)
        if not ok or j not in client._cat_raw:
            raise ValueError(
                f"Client {client.name!r}: the server's code_map is not, per categorical column "
                "of this client, one code in range per level of the column's categories."
            )
        column = client.X[:, j].astype(np.int64)
        client.X[:, j] = np.asarray(code, dtype=np.float64)[column]
        client.Xt[j] = client.X[:, j]


def encode_categories(client: Client, categories: dict[str, list[Any]]) -> None:
    """Replace the raw categorical columns by the federation's codes."""
    if not client._cat_raw:
        return
    for j, raw in client._cat_raw.items():
        column = repr(client.feature_names[j]) if client.feature_names else str(j)
        client.X[:, j] = encode_levels(raw, categories[str(j)], f"Client {client.name!r}", column)
        client.Xt[j] = client.X[:, j]
    client._codes = None  # the fine codes of those columns change
