"""The client: every computation on local rows, answering the server's protocol messages.

A :class:`Client` holds its rows and never sends them. It answers four message kinds
(:mod:`fedforest.federated.protocol`): the handshake (schema, row count, labels present), Round A
(route rows through last level's splits; node summaries; weighted quantile sketches),
Round B (left-child statistics at the candidate thresholds) and the out-of-bag round
(summed errors of its rows under the trees that did not draw them). Its answers are pure
functions of its data, its name and what the server sent.

Memory: after set-up a client keeps, per tree, its in-bag rows as ``int32`` index,
``float64`` weight and ``int32`` node slot (16 bytes per in-bag row, about 0.63 n_k rows
per tree with the bootstrap), plus a column-major copy of its data and one ``uint8``
fine code per value: about ``16 * 0.63 * n_k * n_estimators + 17 * n_k * n_features``
bytes in all.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._common import N_FINE_BINS, STAT_ROWS, STAT_WEIGHT, class_sizes, count_columns, n_stats
from ..tree.apply import apply_forest_sets, predict_forest
from . import client_kernels as K
from .categorical import read_features
from .client_bootstrap import answer_bootstrap, bootstrap_counts, weigh_trees
from .client_grid import GridCodes, fixed_candidates, left_stats_coded, pack_coded
from .client_increments import left_increment_answer, pair_sketches
from .client_route import route_rows
from .client_secure import SecureParty, fit_outputs, tree_secrets
from .client_sketch import distinct_values, fine_codes
from .client_targets import (
    by_output,
    check_labels,
    check_regression_targets,
    class_codes,
    class_row_weights,
    correct_rows,
    feature_sketches,
    label_header,
    poisson_column,
    sample_weights,
    target_names,
    targets,
)
from .criteria import weighted_gain
from .domains import check_declared_labels, dtype_levels, encode_levels, handshake_levels
from .protocol import (
    BOOTSTRAP,
    GRID,
    HANDSHAKE,
    OOB,
    PROTOCOL_VERSION,
    RECOVER,
    ROUND_A,
    ROUND_B,
    Message,
    expect_array,
    pack_gains,
    pack_increments,
    pack_sketch,
    protocol_mismatch,
)

__all__ = ["Client", "bootstrap_counts"]
SETUP_DRAWS = 1 << 20  # a set-up's block of trees holds about this many (tree, row) draws


def _y_sums(v: NDArray[np.float64], w: NDArray[np.float64] | None) -> tuple[float, float]:
    """The out-of-bag sums of ``y`` and ``y^2``, each row weighing ``w`` (None: 1)."""
    if w is None:
        return float(v.sum()), float(np.sum(v * v))
    return float(np.sum(w * v)), float(np.sum(w * v * v))


def _n_stats(fit: _Fit) -> int:
    """Columns of the client's statistics for this fit (its task, classes and outputs)."""
    if fit.n_classes:
        return n_stats("classification", fit.n_classes)
    return n_stats("regression", 0, 1 if fit.y.ndim == 1 else fit.y.shape[1])


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
    #: privacy="secure": the level's grids' offsets and Round A's wire arrays of them
    #: (``grid_wire.GRID_WIRE``; Round B's candidates index the grids, decoded again).
    level_grid_off: NDArray[np.int64] | None = None
    level_wire: tuple[NDArray[Any], ...] | None = None


class Client:
    """A data holder in the federation.

    Parameters
    ----------
    X : array-like or DataFrame, shape (n_samples, n_features)
        The client's features. Column names are matched with the other clients': the
        same names in another order are put in the federation's order at the handshake
        (:meth:`align_columns`); other names are an error.
    y : array-like, shape (n_samples,) or (n_samples, n_outputs)
        Targets (numbers for regression, labels for classification). Several targets per
        row as columns are multi-output y (at every privacy level).
    name : str
        Unique client name; seeds the client's bootstrap.
    categorical_features : array-like of column names or indices, or boolean mask, optional
        Categorical columns besides the pandas ``category`` ones (a mask: one bool per
        column). Their values never leave
        the client either: the handshake shares each column's list of categories, and the
        splits use per-category statistics.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative, finite weight of each row (scikit-learn's ``sample_weight``): it
        multiplies the row's bootstrap count in every sum. The weights stay here too.
    """

    def __init__(
        self,
        X: ArrayLike,
        y: ArrayLike,
        name: str,
        categorical_features: Sequence[Any] | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> None:
        self.name = str(name)
        self.X, self.feature_names, self._cat_raw = read_features(
            X, f"Client {self.name!r}", categorical_features
        )
        self._dtype_levels = dtype_levels(X, list(self._cat_raw))  # pandas' declared categories
        # A missing value (NaN) is held as +inf: every kernel then sends it right of every
        # candidate (all finite), and routing sends it where its node says (missing_left).
        self.missing = np.isnan(self.X).any(axis=0)
        if self.missing.any():
            self.X[np.isnan(self.X)] = np.inf
        # Column-major copy: the growth kernels read one feature of many rows at a time. Its
        # last row holds this client's index H (set by the server's set-up; -1 until then).
        self.Xt = np.empty((self.X.shape[1] + 1, self.X.shape[0]))
        self.Xt[:-1] = self.X.T
        self.Xt[-1] = -1.0
        self.y_raw = targets(y, self.X.shape[0], self.name)
        self.target_names = target_names(y, self.y_raw)  # multi-output y's columns, or None
        self.sample_weight = sample_weights(sample_weight, self.X.shape[0], self.name)
        self._codes: tuple[NDArray[np.uint8], NDArray[np.float64], NDArray[np.float64]] | None = (
            None
        )
        self._fit: _Fit | None = None
        # (seed, bootstrap, n_classes, y, bootstrap draws per tree)
        self._oob_setup: tuple[int, bool, int, NDArray[np.float64], int] | None = None
        self._excluded: set[int] = set()
        self._class_sizes: tuple[int, ...] = ()  # classes per output (set-up)
        #: Threads for this client's kernels (set by LocalFederation from its ``n_jobs``).
        self.n_threads = 1
        self.oob_prediction_: NDArray[np.float64] | None = None
        #: Keys and masked answers of a fit under ``privacy="secure"`` (set by the handshake).
        self._secure: SecureParty | None = None
        self._fit_secure = False

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    def __repr__(self) -> str:
        return (
            f"Client(name={self.name!r}, n_samples={self.n_samples}, n_features={self.X.shape[1]})"
        )

    # ------------------------------------------------------------------ dispatch
    def handle(self, msg: Message) -> Message:
        """Answer one protocol message."""
        handlers = {
            HANDSHAKE: self._handshake,
            ROUND_A: self._round_a,
            ROUND_B: self._round_b,
            OOB: self._oob,
            GRID: self._grid,
            RECOVER: self._recover,
            BOOTSTRAP: lambda m: answer_bootstrap(self, m),
        }
        if msg.kind not in handlers:
            raise ValueError(f"Client {self.name!r} got an unknown message kind {msg.kind!r}.")
        return handlers[msg.kind](msg)

    def align_columns(self, names: Sequence[str]) -> None:
        """Put the columns in the order of ``names``: the same names, another order.

        The handshake asks for it when the clients' DataFrames have the same columns in
        different orders (the federation takes the first client's). Afterwards the client
        is the one built from ``X[names]``.

        Raises
        ------
        ValueError
            If the client's columns are unnamed or are not the same set of names.
        """
        names = [str(f) for f in names]
        if names == self.feature_names:
            return
        mine = self.feature_names
        if mine is None or sorted(names) != sorted(mine) or len(set(names)) != len(names):
            missing = sorted(set(names) - set(mine or []))
            extra = sorted(set(mine or []) - set(names))
            raise ValueError(
                f"Client {self.name!r} cannot order its columns as {names}: "
                + ("it has no column names" if mine is None else f"lacks {missing}, has {extra}")
                + "."
            )
        perm = [mine.index(f) for f in names]
        self.X = np.ascontiguousarray(self.X[:, perm])
        self.missing = np.asarray(self.missing)[perm]
        self.Xt[:-1] = self.X.T
        self._cat_raw = {
            new: self._cat_raw[old] for new, old in enumerate(perm) if old in self._cat_raw
        }
        self._dtype_levels = {
            new: self._dtype_levels[old]
            for new, old in enumerate(perm)
            if old in self._dtype_levels
        }
        self.feature_names = names
        self._codes = None  # fine codes follow the columns

    def _secure_party(self) -> SecureParty:
        if self._secure is None:
            raise ValueError(f"Client {self.name!r}: a secure round before a secure handshake.")
        return self._secure

    def _grid(self, msg: Message) -> Message:
        return self._secure_party().grid(msg)

    def _recover(self, msg: Message) -> Message:
        return self._secure_party().recover(msg)

    def _handshake(self, msg: Message) -> Message:
        if (why := protocol_mismatch(msg.header.get("protocol"))) is not None:
            raise ValueError(f"Client {self.name!r}: the server {why}.")
        if msg.header.get("feature_order") is not None:  # the federation's column order
            self.align_columns(msg.header["feature_order"])
        header: dict[str, Any] = {
            "protocol": PROTOCOL_VERSION,
            "name": self.name,
            "n_samples": self.n_samples,
            "n_features": int(self.X.shape[1]),
            "feature_names": self.feature_names,
        }
        # The columns with missing values (NaN) in this client; under "dp" every numeric
        # column (one row must not change what the handshake says).
        missing = np.array(self.missing, dtype=bool)
        if msg.header.get("privacy") == "dp":
            missing[[j for j in range(missing.size) if j not in self._cat_raw]] = True
        if missing.any():
            header["missing_features"] = np.flatnonzero(missing).tolist()
        if self.sample_weight is not None:  # its rows weigh other than 1 (values stay here)
            header["weighted"] = True
        if self.target_names is not None:  # the server checks every client's outputs' order
            header["target_names"] = self.target_names
        arrays: dict[str, NDArray[Any]] = {}
        self._secure = None
        if msg.header.get("privacy") in ("secure", "dp"):
            self._secure = SecureParty(self, dp=msg.header.get("privacy") == "dp")
            arrays["public_key"] = np.frombuffer(self._secure.keys.public_bytes, dtype=np.uint8)
        elif msg.header.get("ranges"):
            # Under "none": per-feature min and max (histogram baseline, constant features).
            gone = np.isinf(self.X)  # missing values; an all-missing column gives 0 and 0
            lo = np.where(gone, np.inf, self.X).min(axis=0)
            hi = np.where(gone, -np.inf, self.X).max(axis=0)
            arrays = {
                "feature_min": np.where(np.isfinite(lo), lo, 0.0),
                "feature_max": np.where(np.isfinite(hi), hi, 0.0),
            }
        if msg.header.get("feature_sketch") and "public_key" not in arrays:  # "none" only
            arrays["feature_sketch"], arrays["feature_rows"] = feature_sketches(
                self.X, int(msg.header["feature_sketch"])
            )
        # Each categorical column's levels as the privacy level and the declarations allow.
        header["categories"], declared = handshake_levels(
            self._cat_raw, self._dtype_levels, msg.header, self.feature_names,
            int(self.X.shape[1]), f"Client {self.name!r}",
        )  # fmt: skip
        if declared:
            header["declared"] = declared
        if self.y_raw.ndim == 2:
            header["n_outputs"] = int(self.y_raw.shape[1])
        if msg.header.get("task") == "classification":  # the labels present (per output)
            check_labels(self.y_raw, self.name)
            privacy, classes = msg.header.get("privacy", "none"), msg.header.get("classes")
            if classes is not None:  # declared: checked here, not answered (but under "none")
                check_declared_labels(self.y_raw, classes, f"Client {self.name!r}")
            if privacy == "none" or (classes is None and privacy != "dp"):
                rule = int(msg.header.get("min_level_rows", 1)) if privacy == "secure" else 1
                header.update(label_header(self.y_raw, privacy == "none", rule))
        else:
            check_regression_targets(self.y_raw, self.name)
        return Message(HANDSHAKE, header, arrays)

    # ------------------------------------------------------------------ set-up
    def _setup(self, msg: Message) -> _Fit:
        setup, classes = msg.header["setup"], msg.header["setup"]["classes"]
        if classes is None:
            y = self.y_raw.astype(np.float64)
            n_classes = 0
        else:  # codes; with several outputs, each in its own block of class columns
            y, n_classes = class_codes(self.y_raw, classes, self.name)
        self._class_sizes = class_sizes(classes) if classes is not None else ()
        if setup.get("privacy") in ("secure", "dp"):  # regression: standardised targets
            y = self._secure_party().set_up(msg, y, n_classes)
        self._encode_categories(setup.get("categories") or {})
        clients = setup.get("clients") or []
        first_tree = int(setup.get("first_tree", 0))
        if first_tree == 0:
            self._excluded = set()  # a new fit
        if "tree_clients" in setup:
            me = clients.index(self.name) if self.name in clients else -1
            self._excluded |= {
                first_tree + t for t, chosen in enumerate(setup["tree_clients"]) if me not in chosen
            }
        self.Xt[-1] = clients.index(self.name) if self.name in clients else -1.0
        n_trees, first = int(setup["n_trees"]), int(setup.get("first_tree", 0))
        draws = int(setup.get("draws", {}).get(self.name, self.n_samples))
        self._oob_setup = (int(setup["seed"]), bool(setup["bootstrap"]), n_classes, y, draws)
        rows, w, tree_rows = [], [], np.zeros(n_trees + 1, dtype=np.int64)
        weighted, row_w = bool(setup.get("weighted", False)), self.sample_weight
        if row_w is not None and setup.get("privacy") == "dp":  # the noise's bound: 1 a row
            row_w = np.minimum(row_w, 1.0)
        if setup.get("class_weights") is not None:  # multi-output class_weight: on the rows
            row_w = class_row_weights(row_w, y, setup["class_weights"])
        n = self.n_samples
        step = max(1, SETUP_DRAWS // max(n, 1))  # trees a block: (trees, rows) draws at once
        for lo in range(0, n_trees, step):
            ts = range(lo, min(n_trees, lo + step))
            counts = np.array([self._counts(first + t) for t in ts], np.int64).reshape(len(ts), n)
            if weighted and row_w is not None:  # a row of weight 0 takes no part (as in sklearn)
                counts = np.where(row_w > 0, counts, 0)
            at = np.flatnonzero(counts)  # in-bag rows tree after tree
            rows.append((at % max(n, 1)).astype(np.int32))
            w.append(counts.ravel()[at].astype(np.float64))
            if weighted and row_w is not None:
                w[-1] *= row_w[rows[-1]]  # bootstrap count times sample (and class) weight
            tree_rows[lo + 1 : ts.stop + 1] = tree_rows[lo] + np.cumsum((counts != 0).sum(axis=1))
        n_bins, quantile = setup["n_bins"], setup.get("binning", "quantile") == "quantile"
        if n_bins is not None and self._codes is None and quantile:
            self._codes = fine_codes(self.X, N_FINE_BINS)
        slot = np.repeat(np.arange(n_trees, dtype=np.int32), np.diff(tree_rows))
        rows_all, w_all = np.concatenate([np.zeros(0, np.int32), *rows]), np.concatenate([[], *w])
        fit = _Fit(n_trees, n_classes, y, n_bins, rows_all, w_all, slot, tree_rows)
        fit.send_sketch = quantile
        fit.split_rule = setup.get("split_rule", "exact")
        fit.top_l = setup.get("top_l")
        fit.criterion = setup.get("criterion", "squared_error")
        if fit.criterion == "poisson":
            fit.y_log = poisson_column(y, self.name)
        fit.local_candidates = bool(setup.get("local_candidates", False)) and fit.send_sketch
        fit.min_rows = int(setup.get("min_samples_leaf", 1))
        fit.secure = setup.get("privacy") in ("secure", "dp")
        fit.weighted = weighted
        self._fit_secure = fit.secure
        return fit

    def _encode_categories(self, categories: dict[str, list[Any]]) -> None:
        """Replace the raw categorical columns by the federation's codes."""
        if not self._cat_raw:
            return
        for j, raw in self._cat_raw.items():
            column = repr(self.feature_names[j]) if self.feature_names else str(j)
            self.X[:, j] = encode_levels(raw, categories[str(j)], f"Client {self.name!r}", column)
            self.Xt[j] = self.X[:, j]
        self._codes = None  # the fine codes of those columns change

    def _counts(self, tree: int, secret: int | None = None) -> NDArray[np.int64]:
        """Bootstrap counts of one tree (global index), recomputed from the seed.

        All zero for a tree whose client sample (``client_fraction``) left this client out.
        ``secret``: under "secure", the tree's bound secret when not the set-up's.
        """
        assert self._oob_setup is not None
        seed, bootstrap, _, _, draws = self._oob_setup
        if tree in self._excluded:
            return np.zeros(self.n_samples, dtype=np.int64)
        if not bootstrap:
            return np.ones(self.n_samples, dtype=np.int64)
        if secret is None and self._secure is not None:
            secret = self._secure.bootstrap_secret()
        counts = bootstrap_counts(seed, tree, self.name, self.n_samples, secret, draws)
        if self._secure is not None and self._secure.dp is not None:
            # Under "dp" a row weighs at most max_weight in any sum (its sensitivity).
            counts = np.minimum(counts, int(self._secure.dp["max_weight"]))
        return counts

    def _blocks(self, fit: _Fit) -> list[tuple[int, int]]:
        """Contiguous tree ranges of about equal row counts, one per thread."""
        n = min(self.n_threads, fit.n_trees)
        if n <= 1:
            return [(0, fit.n_trees)]
        cuts = np.searchsorted(fit.tree_rows, np.linspace(0, fit.tree_rows[-1], n + 1)[1:-1])
        edges = np.unique(np.concatenate([[0], cuts, [fit.n_trees]]))
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]

    def _run_blocks(self, fit: _Fit, job: Any) -> None:
        """Run ``job(tree_lo, tree_hi)`` over the blocks, in threads (the kernels drop the GIL)."""
        blocks = self._blocks(fit)
        if len(blocks) == 1:
            job(*blocks[0])
            return
        with ThreadPoolExecutor(len(blocks)) as pool:
            list(pool.map(lambda ab: job(*ab), blocks))

    # ------------------------------------------------------------------ Round A
    def _round_a(self, msg: Message) -> Message:
        if "setup" in msg.header:
            self._fit = self._setup(msg)
        fit = self._state()
        if "tree_class_weights" in msg.header:  # balanced_subsample, multi-output y
            weigh_trees(self, fit, msg.header["tree_class_weights"])
        if "route_feature" in msg.arrays:
            n_prev = int(msg.header["n_prev_slots"])
            route_rows(
                self.Xt,
                fit.rows,
                fit.slot,
                expect_array(msg, "route_feature", "i", (n_prev,), "server"),
                expect_array(msg, "route_threshold", "f", (n_prev,), "server"),
                expect_array(msg, "route_left", "i", (n_prev,), "server"),
                expect_array(msg, "route_right", "i", (n_prev,), "server"),
                *self._route_sets(msg, n_prev),
                self._route_missing(msg, n_prev),
            )
        fit.slot_tree = expect_array(msg, "slot_tree_off", "i", (fit.n_trees + 1,), "server")
        n_slots = int(fit.slot_tree[-1])
        fit.pair_off = expect_array(msg, "pair_off", "i", (n_slots + 1,), "server")
        fit.pair_feat = expect_array(msg, "pair_feat", "i", (int(fit.pair_off[-1]),), "server")
        summary = np.zeros((n_slots, _n_stats(fit)))
        by_output(
            fit.y,
            summary,
            lambda y, out: K.node_summaries(fit.rows, fit.w, fit.slot, y, fit.n_classes, out),
            fit.y_log,
            fit.n_classes > 0,
        )
        fit.summary = summary
        if fit.secure:
            return self._secure_party().round_a(msg, fit, summary)
        arrays: dict[str, NDArray[Any]] = {"summary": summary}
        # Only the nodes it has rows in are answered (the server reads which off the summaries).
        fit.pair_present = np.repeat(summary[:, STAT_WEIGHT] > 0, np.diff(fit.pair_off))
        if "feat_cand" in msg.arrays:  # binning="global": the candidates came with it
            arrays.update(self._answer_b(fit, msg, fixed=True))
        elif fit.n_bins is None:
            arrays["sketch_off"], arrays["sketch"] = distinct_values(
                self.X, fit.rows, fit.slot, fit.pair_off, fit.pair_feat
            )
        elif fit.send_sketch:
            cat = list(self._cat_raw)  # categorical columns send no sketch
            sent = fit.pair_present & ~np.isin(fit.pair_feat, cat) if cat else fit.pair_present
            sketch, local = self._sketches(fit)
            arrays.update(pack_sketch(sketch, sent))
            if fit.local_candidates:
                arrays["local_best"] = local[sent]
            if fit.top_l:
                has = summary[:, STAT_WEIGHT] > 0
                feats, gains = self._top_features(fit, sketch, fit.top_l)
                arrays["top_features"], arrays["top_gains"] = feats[has], gains[has]
        return Message(ROUND_A, {"name": self.name}, arrays)

    @staticmethod
    def _route_sets(
        msg: Message, n_prev: int
    ) -> tuple[NDArray[np.int64], NDArray[np.int32], NDArray[np.int8]]:
        """Set splits of the routes (absent when last level's splits are all numeric)."""
        if "route_set_off" not in msg.arrays:
            return np.zeros(n_prev + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int8)
        off = expect_array(msg, "route_set_off", "i", (n_prev + 1,), "server").astype(np.int64)
        code = expect_array(msg, "route_set_code", "i", (int(off[-1]),), "server")
        side = expect_array(msg, "route_set_side", "i", (int(off[-1]),), "server")
        return off, code.astype(np.int32), side.astype(np.int8)

    @staticmethod
    def _route_missing(msg: Message, n_prev: int) -> NDArray[np.uint8]:
        """Where missing values go at last level's splits (absent: no column has any)."""
        if "route_missing_left" not in msg.arrays:
            return np.zeros(n_prev, np.uint8)
        side = expect_array(msg, "route_missing_left", "iu", (n_prev,), "server")
        return side.astype(np.uint8)

    def _state(self) -> _Fit:
        if self._fit is None:
            raise ValueError(f"Client {self.name!r}: Round A/B before the set-up message.")
        return self._fit

    def _sketches(self, fit: _Fit) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Quantile sketch and (if asked for) local best threshold of every pair, one pass."""
        return pair_sketches(self, fit)

    # ------------------------------------------------------------------ Round B
    def _round_b(self, msg: Message) -> Message:
        fit = self._state()
        if fit.secure:
            return self._secure_party().round_b(msg, fit)
        return Message(ROUND_B, {"name": self.name}, self._answer_b(fit, msg))

    def _answer_b(self, fit: _Fit, msg: Message, fixed: bool = False) -> dict[str, NDArray[Any]]:
        """Left statistics at the candidates of ``msg`` (Round B, or a one-round level).

        ``fixed``: a one-round level's candidates, one list per column (``feat_cand``).
        """
        assert fit.pair_off is not None and fit.pair_feat is not None
        assert fit.pair_present is not None and fit.summary is not None
        if fixed:
            packed = fit.split_rule != "avgimp" and fit.y.ndim == 1 and fit.y_log is None
            fit.grid, cand_off, values = fixed_candidates(
                msg, fit.grid, self.Xt, fit.pair_feat, self.name, not packed
            )
            if values is None:
                return self._pack_fixed(fit, cand_off)
            cand = values
        else:
            shape = (int(fit.pair_off[-1]) + 1,)
            cand_off = expect_array(msg, "cand_off", "i", shape, "server").astype(np.int64)
            cand = expect_array(msg, "cand", "f", (int(cand_off[-1]),), "server")
            if fit.split_rule != "avgimp" and fit.y.ndim == 1 and fit.y_log is None:
                return left_increment_answer(self, fit, cand_off, cand)  # one pass
        left = self._left_stats(fit, cand_off, cand, fit.grid.codes if fixed and fit.grid else None)
        present = np.repeat(fit.pair_present, np.diff(cand_off))
        n_counts = count_columns(fit.n_classes, fit.weighted)
        first = np.zeros(cand.size, dtype=bool)  # the first candidate of every pair
        first[cand_off[:-1][np.diff(cand_off) > 0]] = True
        if fit.split_rule != "avgimp":
            return pack_increments(left, first, n_counts, "left", present)
        # AvgImp: per numeric candidate, the local weighted gain and left row count only
        # (compact, see pack_gains); categorical pairs keep their exact per-category
        # statistics.
        numeric = np.repeat(~np.isin(fit.pair_feat, list(self._cat_raw)), np.diff(cand_off))
        node = np.repeat(
            np.repeat(np.arange(fit.pair_off.size - 1), np.diff(fit.pair_off)), np.diff(cand_off)
        )
        keep = present & numeric
        parent = fit.summary[node[keep]]
        rows = left[keep, STAT_ROWS]
        gain = weighted_gain(parent, left[keep], fit.criterion, fit_outputs(fit))
        # All rows on one side: exactly no decrease (not the rounding of W Psi - W Psi).
        gain[(rows == 0) | (rows == parent[:, STAT_ROWS])] = 0.0
        return {
            **pack_gains(rows, gain, first[keep]),
            **pack_increments(left, first, n_counts, "left", present & ~numeric),
        }

    def _pack_fixed(self, fit: _Fit, cand_off: NDArray[np.int64]) -> dict[str, NDArray[Any]]:
        """A one-round level's answer from the grid codes: the increments that travel only."""
        assert fit.grid is not None and fit.slot_tree is not None and fit.pair_off is not None
        assert fit.pair_feat is not None and fit.pair_present is not None
        st, tr = fit.slot_tree, fit.tree_rows
        blocks = [(int(st[a]), int(st[b]), slice(tr[a], tr[b])) for a, b in self._blocks(fit)]
        return pack_coded(
            fit.grid.codes, fit.rows, fit.w, fit.slot, fit.y, fit.n_classes, fit.pair_off,
            fit.pair_feat, cand_off, fit.pair_present, _n_stats(fit),
            count_columns(fit.n_classes, fit.weighted), blocks,
        )  # fmt: skip

    def _left_stats(
        self,
        fit: _Fit,
        cand_off: NDArray[np.int64],
        cand: NDArray[np.float64],
        coded: NDArray[np.uint16] | None = None,
    ) -> NDArray[np.float64]:
        """Left-child statistics at every candidate of every pair (all trees' blocks).

        ``coded``: every row's bin among its column's candidates (the same at every node).
        """
        assert fit.pair_off is not None and fit.pair_feat is not None and fit.slot_tree is not None
        if coded is None and self._codes is None:
            self._codes = fine_codes(self.X, N_FINE_BINS)
        fine = self._codes
        left = np.empty((cand.size, _n_stats(fit)))
        pair_off, pair_feat, slot_tree = fit.pair_off, fit.pair_feat, fit.slot_tree

        def job(a: int, b: int) -> None:
            s_lo, s_hi = int(slot_tree[a]), int(slot_tree[b])
            r = slice(int(fit.tree_rows[a]), int(fit.tree_rows[b]))
            c_lo, c_hi = cand_off[pair_off[s_lo]], cand_off[pair_off[s_hi]]
            rows: tuple[Any, ...] = (fit.rows[r], fit.w[r], fit.slot[r])
            kernel: Any = left_stats_coded
            head: tuple[Any, ...] = (coded, *rows)
            tail: tuple[Any, ...] = (pair_off, pair_feat, cand_off, s_lo, s_hi)
            if coded is None:
                assert fine is not None
                kernel, head = K.left_stats, (self.Xt, *fine, *rows)
                tail = (pair_off, pair_feat, cand_off, cand, s_lo, s_hi)
            by_output(
                fit.y,
                left[c_lo:c_hi],
                lambda y, out: kernel(*head, y, fit.n_classes, *tail, out),
                fit.y_log,
                fit.n_classes > 0,
            )

        self._run_blocks(fit, job)
        return left

    def _top_features(
        self, fit: _Fit, sketch: NDArray[np.float64], top_l: int
    ) -> tuple[NDArray[np.int32], NDArray[np.float64]]:
        """Top-L shortlisting: per node, the L sampled features with the best local gain.

        The local candidates are the client's own sketch points, so this costs one more
        pass over the rows and no message beyond the ``2 L`` scalars per node.
        """
        assert fit.pair_off is not None and fit.pair_feat is not None
        assert fit.summary is not None and fit.pair_present is not None
        numeric = ~np.isin(fit.pair_feat, list(self._cat_raw))
        local = [
            np.unique(row[row < row[-1]]) if ok else np.empty(0)  # below the node maximum
            for row, ok in zip(sketch, numeric & fit.pair_present, strict=True)
        ]
        cand_off = np.zeros(len(local) + 1, dtype=np.int64)
        np.cumsum([c.size for c in local], out=cand_off[1:])
        left = self._left_stats(fit, cand_off, np.concatenate(local) if local else np.empty(0))
        pair_node = np.repeat(np.arange(fit.pair_off.size - 1), np.diff(fit.pair_off))
        cand_pair = np.repeat(np.arange(len(local)), np.diff(cand_off))
        n_out = fit.y.shape[1] if fit.y.ndim == 2 else 1  # classes: the gains' mean
        gain = weighted_gain(fit.summary[pair_node[cand_pair]], left, fit.criterion, n_out)
        best = np.full(len(local), -np.inf)
        np.maximum.at(best, cand_pair, gain)
        n_nodes = fit.pair_off.size - 1
        feats = np.full((n_nodes, top_l), -1, dtype=np.int32)
        gains = np.full((n_nodes, top_l), -np.inf)
        for node in range(n_nodes):
            lo, hi = fit.pair_off[node], fit.pair_off[node + 1]
            order = np.argsort(-best[lo:hi], kind="stable")[:top_l]
            order = order[np.isfinite(best[lo:hi][order])]
            feats[node, : order.size] = fit.pair_feat[lo:hi][order]
            gains[node, : order.size] = best[lo:hi][order]
        return feats, gains

    # ------------------------------------------------------------------ out of bag
    def _oob(self, msg: Message) -> Message:
        if self._oob_setup is None:
            raise ValueError(f"Client {self.name!r}: out-of-bag round before the set-up.")
        _, _, n_classes, y_all, _ = self._oob_setup
        n_trees = int(msg.header["n_trees"])
        tree_off = expect_array(msg, "tree_off", "i", (n_trees + 1,), "server").astype(np.int64)
        n_nodes = int(tree_off[-1])
        feature, threshold, left, right = (
            expect_array(msg, k, kind, (n_nodes,), "server")
            for k, kind in (("feature", "i"), ("threshold", "f"), ("left", "i"), ("right", "i"))
        )
        value = expect_array(msg, "value", "f", (n_nodes, None), "server")
        set_off = expect_array(msg, "set_off", "i", (n_nodes + 1,), "server").astype(np.int64)
        set_code = expect_array(msg, "set_code", "i", (int(set_off[-1]),), "server")
        set_side = expect_array(msg, "set_side", "i", (int(set_off[-1]),), "server")
        weight = expect_array(msg, "weight", "f", (n_nodes,), "server")
        missing_left = expect_array(msg, "missing_left", "iu", (n_nodes,), "server")
        missing_left = missing_left.astype(np.uint8)
        X_aug = np.ascontiguousarray(self.Xt.T)  # features and this client's index H
        pred = np.zeros((self.n_samples, value.shape[1]))
        n_oob = np.zeros(self.n_samples)
        bound = tree_secrets(self._secure if self._fit_secure else None, msg, n_trees, self.name)
        for t in range(n_trees):
            # One tree at a time, bootstrap recomputed from the seed: memory stays O(n_k).
            oob = np.flatnonzero(self._counts(t, bound[t] if bound else None) == 0)
            tree_pred = np.zeros((oob.size, value.shape[1]))
            predict_forest(
                X_aug[oob],
                feature,
                threshold,
                left,
                right,
                set_off,
                set_code,
                set_side,
                weight,
                missing_left,
                value,
                tree_off[t : t + 2],
                tree_pred,
            )
            pred[oob] += tree_pred
            n_oob[oob] += 1
        scored = n_oob > 0
        pred[scored] /= n_oob[scored, None]
        pred[~scored] = np.nan
        self.oob_prediction_ = pred
        y = y_all[scored]
        party = self._secure if self._fit_secure else None
        ys = y if party is None else y_all  # "secure": sums of y over all rows (privacy.md)
        # "secure": those sums weigh each row's secret weight (client_weights.oob_weights)
        w = None if party is None else party.oob_weights(len(ys))
        if n_classes:
            sums = [scored.sum(), correct_rows(pred[scored], y, self._class_sizes).sum()]
        elif y.ndim == 2:  # multi-output: per output, its three sums
            p = pred[scored]
            if party is not None:  # standardised, as y is
                p = party.standardise_prediction(p)
            sums = [scored.sum()]
            for o in range(y.shape[1]):
                sums += [np.sum((y[:, o] - p[:, o]) ** 2), *_y_sums(ys[:, o], w)]
        else:
            p = pred[scored, 0]
            if party is not None:  # targets are standardised under "secure": so are the errors
                p = party.standardise_prediction(p)
            sums = [scored.sum(), np.sum((y - p) ** 2), *_y_sums(ys, w)]
        arrays = {"oob_sums": np.asarray(sums, dtype=np.float64)}
        if party is not None:
            self.finish()
            return party.oob(msg, arrays["oob_sums"], n_classes)
        if msg.header.get("leaf_sums"):  # diagnostics ("none" only): per-leaf sums, tree 0
            packed = (
                feature, threshold, left, right, set_off, set_code, set_side, weight, missing_left
            )  # fmt: skip
            arrays["leaf_sums"] = self._leaf_sums(X_aug, packed, tree_off, y_all, n_classes)
        self.finish()
        return Message(OOB, {"name": self.name}, arrays)

    def _leaf_sums(
        self,
        X_aug: NDArray[np.float64],
        packed: tuple[NDArray[Any], ...],
        tree_off: NDArray[np.int64],
        y: NDArray[np.float64],
        n_classes: int,
    ) -> NDArray[np.float64]:
        """Per node of the first tree, sums over this client's rows out of its bag.

        The count, then the sums of y and y^2 (regression) or the count of each class: the
        diagnostics' honest cells (the tree never saw these rows).
        """
        oob = np.flatnonzero(self._counts(0) == 0)
        leaf = np.zeros((oob.size, 1), dtype=np.int32)
        feature, threshold, left, right, set_off, set_code, set_side, weight, missing = packed
        apply_forest_sets(
            X_aug[oob],
            feature,
            threshold,
            left,
            right,
            set_off,
            set_code,
            set_side,
            weight,
            missing,
            tree_off[:2],
            leaf,
        )
        n_nodes = int(tree_off[1] - tree_off[0])
        idx = leaf[:, 0] - int(tree_off[0])
        yy = y[oob] if y.ndim == 2 else y[oob, None]
        out = np.zeros((n_nodes, 1 + (n_classes or 2 * yy.shape[1])))
        out[:, 0] = np.bincount(idx, minlength=n_nodes)
        if n_classes:
            for c in range(n_classes):
                out[:, 1 + c] = np.bincount(
                    idx, weights=(yy[:, 0] == c).astype(float), minlength=n_nodes
                )
        else:  # per output: sum y, sum y^2
            for o in range(yy.shape[1]):
                out[:, 1 + 2 * o] = np.bincount(idx, weights=yy[:, o], minlength=n_nodes)
                out[:, 2 + 2 * o] = np.bincount(idx, weights=yy[:, o] ** 2, minlength=n_nodes)
        return out

    def finish(self) -> None:
        """Drop the per-fit state (called when no out-of-bag round follows)."""
        self._fit = None
        self._oob_setup = None
        self._excluded = set()
