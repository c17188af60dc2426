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
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._common import N_FINE_BINS, STAT_ROWS, STAT_WEIGHT, count_columns, n_stats
from .._numba_cache import serialize_cache_writes
from . import client_kernels as K
from .categorical import is_missing, pandas_frame, read_features
from .client_bootstrap import answer_bootstrap, bootstrap_counts, bootstrap_counts_many, weigh_trees
from .client_grid import fixed_candidates, left_stats_coded, pack_coded
from .client_increments import left_increment_answer, pair_sketches
from .client_oob import answer_oob
from .client_route import route_rows
from .client_secure import SecureParty, colluder_count, fit_outputs
from .client_setup import SETUP_DRAWS as SETUP_DRAWS  # moved; patch it in client_setup
from .client_setup import _Fit, handshake, set_up
from .client_sketch import distinct_values, fine_codes
from .client_targets import by_output, sample_weights, target_names, targets
from .criteria import weighted_gain
from .domains import dtype_levels
from .protocol import (
    BOOTSTRAP,
    GRID,
    HANDSHAKE,
    OOB,
    RECOVER,
    ROUND_A,
    ROUND_B,
    Message,
    expect_array,
    pack_gains,
    pack_increments,
    pack_sketch,
)

__all__ = ["Client", "bootstrap_counts"]

serialize_cache_writes()  # before any kernel compiles: _numba_cache.py


def _n_stats(fit: _Fit) -> int:
    """Columns of the client's statistics for this fit (its task, classes and outputs)."""
    if fit.n_classes:
        return n_stats("classification", fit.n_classes)
    return n_stats("regression", 0, 1 if fit.y.ndim == 1 else fit.y.shape[1])


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
        Unique client name; seeds the client's bootstrap. A number is taken as its text;
        None, NaN or an empty string is refused.
    categorical_features : array-like of column names or indices, or boolean mask, optional
        Categorical columns besides the pandas ``category`` ones (a mask: one bool per
        column). Their values never leave
        the client either: the handshake shares each column's list of categories, and the
        splits use per-category statistics.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative, finite weight of each row (scikit-learn's ``sample_weight``): it
        multiplies the row's bootstrap count in every sum. The weights stay here too.
    min_dp_colluders : int, default=0
        Under ``privacy="dp"``: the fewest colluding clients this client wants the noise
        to hold against; it refuses a fit whose server set ``dp_colluders`` below (the
        server chooses the noise, every client its own floor: docs/privacy.md).
    """

    def __init__(
        self,
        X: ArrayLike,
        y: ArrayLike,
        name: str,
        categorical_features: Sequence[Any] | None = None,
        sample_weight: ArrayLike | None = None,
        min_dp_colluders: int = 0,
    ) -> None:
        self.name = _client_name(name)
        self.min_dp_colluders = colluder_count(
            min_dp_colluders, f"Client {self.name!r}: min_dp_colluders"
        )
        X = pandas_frame(X)  # pyarrow's or polars' frame: its names and dtypes kept
        rows, self.feature_names, self._cat_raw = read_features(
            X, f"Client {self.name!r}", categorical_features
        )
        self._dtype_levels = dtype_levels(X, list(self._cat_raw))  # pandas' declared categories
        # A missing value (NaN) is held as +inf: every kernel then sends it right of every
        # candidate (all finite), and routing sends it where its node says (missing_left).
        self.missing = np.isnan(rows).any(axis=0)
        if self.missing.any():
            rows[np.isnan(rows)] = np.inf
        # Column-major: the growth kernels read one feature of many rows at a time. Its last
        # row holds this client's index H (set by the server's set-up; -1 until then). The
        # rows are held here only (``X`` is a view of it; a row-major copy beside it was 8
        # bytes a value more: 16 MB a client of 100,000 rows x 20 features).
        self.Xt = np.empty((rows.shape[1] + 1, rows.shape[0]))
        self.Xt[:-1] = rows.T
        self.Xt[-1] = -1.0
        del rows
        self.y_raw = targets(y, self.X.shape[0], self.name)
        self.target_names = target_names(y, self.y_raw)  # multi-output y's columns, or None
        self.sample_weight = sample_weights(sample_weight, self.X.shape[0], self.name)
        # Whether weights were given at all (all ones is None above): what the handshake
        # says under "dp", where whether one differs from 1 is one row's (red team 21).
        self._weights_given = sample_weight is not None
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
    def X(self) -> NDArray[np.float64]:
        """The rows, shape (n_samples, n_features): a view of ``Xt`` (Fortran order).

        Writing into it writes into ``Xt``. Its columns picked (``X[:, j]``, ``X[:, cols]``)
        are the arrays they were of a row-major copy (NumPy returns the latter in Fortran
        order too), so float sums over them run in the same order.
        """
        return self.Xt[:-1].T

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
        self.Xt[:-1] = self.Xt[perm]  # the rows' columns in the federation's order
        self.missing = np.asarray(self.missing)[perm]
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
        return handshake(self, msg)

    # ------------------------------------------------------------------ set-up
    def _setup(self, msg: Message) -> _Fit:
        return set_up(self, msg)

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

    def _counts_of(self, trees: range) -> NDArray[np.int64]:
        """:meth:`_counts` of each tree of ``trees``, one row each.

        A bootstrap without a tree left out seeds the trees' generators at once
        (``bootstrap_counts_many``, with the set-up's bound secret under "secure": the
        same draws).
        """
        assert self._oob_setup is not None
        seed, bootstrap, _, _, draws = self._oob_setup
        if bootstrap and not self._excluded.intersection(trees):
            secret = None if self._secure is None else self._secure.bootstrap_secret()
            counts = bootstrap_counts_many(seed, trees, self.name, self.n_samples, draws, secret)
            if self._secure is not None and self._secure.dp is not None:
                counts = np.minimum(counts, int(self._secure.dp["max_weight"]))  # as _counts
            return counts
        rows = [self._counts(t) for t in trees]
        return np.array(rows, np.int64).reshape(len(trees), self.n_samples)

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
        return answer_oob(self, msg)

    def finish(self) -> None:
        """Drop the per-fit state (called when no out-of-bag round follows)."""
        self._fit = None
        self._oob_setup = None
        self._excluded = set()


def _client_name(name: Any) -> str:
    """The client's name as text; a missing or empty one refused (it was "None", "nan", "").

    ``fit`` refuses a missing client label, naming the row; a ``Client(X, y, None)`` (a
    lookup that found nothing) was client "None", and a second one "appears twice".
    """
    if is_missing(name) or not str(name).strip():
        raise ValueError(
            f"Client name must be a non-empty label (it names the client in errors and seeds "
            f"its bootstrap), got {name!r}"
        )
    return str(name)
