"""What the server learnt of each client so far in a batch (``privacy="none"``).

:class:`ClientRecords` gives each round its check, which compares a client's reply with
what the client said before. Moved out of ``checks.py``, which re-exports the name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT
from ..protocol import Message, expect_array, unpack_gains
from . import check_kernels as ck
from .checks_base import Check, InvalidReply
from .checks_summaries import (
    _check_distinct_values,
    check_oob,
    check_round_b,
    check_summaries,
    sketch_of,
)
from .sketch_runs import SketchRuns


# --------------------------------------------------------------------------- per round
class ClientRecords:
    """What the server learnt of each client so far in a batch (``privacy="none"``).

    Parameters
    ----------
    n_samples : dict of str to int
        Each client's rows (its handshake).
    task : str
    n_count : int
        Leading integer columns of the statistics.
    bootstrap : bool
    """

    def __init__(
        self,
        n_samples: dict[str, int],
        task: str,
        n_count: int,
        bootstrap: bool,
        draws: dict[str, int] | None = None,
        missing: dict[str, list[int]] | None = None,
        class_sizes: tuple[int, ...] = (),
    ):
        self.n_samples, self.task, self.n_count, self.bootstrap = (
            n_samples,
            task,
            n_count,
            bootstrap,
        )
        #: Multi-output classification: the classes of each output (blocks of columns).
        self.class_sizes = class_sizes
        #: Each client's bootstrap draws per tree (``max_samples``; default its rows).
        self.draws = dict(draws or {})
        #: The columns each client declared missing values in (its handshake).
        self.missing = {
            name: np.asarray(cols, dtype=np.int64) for name, cols in (missing or {}).items()
        }
        #: Each client's node summaries at the previous level and at this one.
        self.previous: dict[str, NDArray[np.float64]] = {}
        self.current: dict[str, NDArray[np.float64]] = {}
        #: Each client's decoded and checked sketches of this level's Round A (runs).
        self.sketches: dict[str, SketchRuns] = {}
        #: Each client's checked left statistics of this level: (reply, positions,
        #: integer columns, float columns), as ``unpack_increments`` reads them.
        self.increments: dict[
            str, tuple[Message, NDArray[np.int64], NDArray[Any], NDArray[Any]]
        ] = {}

    def next_level(self) -> None:
        """Move on a level: these summaries are the parents of the next level's nodes."""
        self.previous, self.current = self.current, {}
        self.sketches, self.increments = {}, {}

    def start_batch(self) -> None:
        """New roots: nothing known."""
        self.previous, self.current = {}, {}
        self.sketches, self.increments = {}, {}

    def round_a(
        self,
        routes: dict[str, NDArray[Any]],
        n_slots: int,
        n_stats: int,
        sketch_present: Callable[[NDArray[np.float64]], NDArray[np.bool_]] | None,
        n_bins: int | None,
        pair_feat: NDArray[np.int32] | None = None,
        local_best: bool = False,
        top_l: tuple[int, int] = (0, 0),
    ) -> Check:
        """Round A: each client's node summaries (and sketches) against its parents'.

        ``local_best``: the reply also holds the client's local best threshold of each
        sketched pair (local candidates), a finite value or NaN (none). ``n_bins`` None
        (the verification mode): every pair's distinct values (``sketch_off``, ``sketch``;
        each pair's increasing and finite). ``top_l`` = (L,
        d): its Top-L shortlists of each node it has rows in (L = 0: none).
        """
        parent = np.full(n_slots, -1, dtype=np.int64)
        sibling = np.full(n_slots, -1, dtype=np.int64)
        if routes:
            left, right = routes["route_left"], routes["route_right"]
            for a, b in ((left, right), (right, left)):
                has = a >= 0
                parent[a[has]] = np.flatnonzero(has)
                both = has & (b >= 0) & (b != a)  # a node passed through has no sibling
                sibling[a[both]] = b[both]
        root = parent < 0

        def check(name: str, request: Message, reply: Message) -> None:
            summary = expect_array(reply, "summary", "f", (n_slots, n_stats), name)
            prev = self.previous.get(name)
            parents = None
            if prev is not None and not root.all():
                parents = np.full((n_slots, n_stats), np.nan)
                parents[~root] = prev[parent[~root]]
            check_summaries(
                name,
                reply.kind,
                summary,
                n_samples=self.n_samples[name],
                draws=self.draws.get(name, self.n_samples[name]),
                n_count=self.n_count,
                task=self.task,
                root=root,
                bootstrap=self.bootstrap,
                parent=parents,
                siblings=sibling,
                class_sizes=self.class_sizes,
            )
            if top_l[0]:
                n_here = int((summary[:, STAT_WEIGHT] > 0).sum())
                feats = expect_array(reply, "top_features", "i", (n_here, top_l[0]), name)
                gains = expect_array(reply, "top_gains", "f", (n_here, top_l[0]), name)
                if (problem := ck.top_l_problem(feats, gains, top_l[1])) is not None:
                    raise InvalidReply(
                        name, reply.kind, "arrays 'top_features'/'top_gains'", problem
                    )
            if n_bins is None and pair_feat is not None:
                _check_distinct_values(name, reply, pair_feat.size)
            if sketch_present is not None and n_bins is not None:
                present = sketch_present(summary)
                sketch, gone = sketch_of(reply, int(present.sum()), n_bins, name)
                if local_best:
                    best = expect_array(reply, "local_best", "f", (int(present.sum()),), name)
                    if np.isinf(best).any():
                        raise InvalidReply(name, reply.kind, "array 'local_best'", "holds infinity")
                self.sketches[name] = sketch  # decoded once: the candidates merge it
                # A NaN row only for a column the client said it misses values in.
                if gone.any() and (
                    pair_feat is None
                    or not np.isin(pair_feat[present][gone], self.missing.get(name, [])).all()
                ):
                    raise InvalidReply(
                        name,
                        reply.kind,
                        "array 'sketch'",
                        "holds NaN for a column without missing values",
                    )
            self.current[name] = summary

        return check

    def round_b(
        self,
        pair_off: NDArray[np.int64],
        categorical_pair: NDArray[np.bool_],
        n_stats: int,
        exact: bool,
    ) -> Check:
        """Round B: each client's left statistics within its own node summaries."""
        node_of_pair = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))

        def check(name: str, request: Message, reply: Message) -> None:
            cand_off = np.asarray(request.arrays["cand_off"], dtype=np.int64)
            n_cand = np.diff(cand_off)
            if exact:  # every candidate's statistics
                answered: NDArray[np.int64] | int = int(cand_off[-1])
            else:
                answered = np.flatnonzero(np.repeat(categorical_pair, n_cand))
            stats = self.current.get(name)
            if stats is None:  # pragma: no cover - a client new in Round B is refused earlier
                raise InvalidReply(name, reply.kind, "the reply", "comes from no Round A client")
            increments = check_round_b(
                name,
                reply,
                cand_off,
                node_of_pair,
                stats,
                n_stats,
                self.n_count,
                self.task,
                answered,
                self.class_sizes,
            )
            self.increments[name] = (reply, *increments)  # read once: Round B sums them
            if not exact:
                rows = np.repeat(~categorical_pair, n_cand)
                first = np.zeros(rows.size, dtype=bool)
                first[cand_off[:-1][n_cand > 0]] = True
                inc, gains = unpack_gains(reply, int(rows.sum()), first[rows], name)
                if not np.all(np.isfinite(gains)):
                    raise InvalidReply(name, reply.kind, "array 'avg_gain'", "holds NaN or inf")
                # A pair's row increments add up to its rows left of the last candidate.
                pair = np.repeat(np.arange(n_cand.size), n_cand)[rows]
                left_rows = np.bincount(pair, weights=inc, minlength=n_cand.size)
                if np.any(left_rows > stats[node_of_pair, STAT_ROWS]):
                    raise InvalidReply(
                        name, reply.kind, "array 'avg_rows'", "counts more than the node holds"
                    )

        return check

    def oob(self, width: int, leaves: tuple[int, int] = (0, 0)) -> Check:
        """The out-of-bag round: sums within each client's rows.

        ``leaves`` = (nodes of the first tree, width): the diagnostics' per-leaf sums.
        """

        def check(name: str, request: Message, reply: Message) -> None:
            if leaves[0]:
                self._leaf_sums(name, reply, *leaves)
            sums = expect_array(reply, "oob_sums", "f", (width,), name)
            check_oob(name, sums, self.task, self.n_samples[name])

        return check

    def _leaf_sums(self, name: str, reply: Message, n_nodes: int, width: int) -> None:
        sums = expect_array(reply, "leaf_sums", "f", (n_nodes, width), name)
        problem = _leaf_sums_problem(sums, self.task, self.n_samples[name])
        if problem:
            raise InvalidReply(name, reply.kind, "array 'leaf_sums'", problem)


def _leaf_sums_problem(sums: NDArray[np.float64], task: str, n_samples: int) -> str | None:
    count = sums[:, 0]
    if not np.all(np.isfinite(sums)):
        return "holds NaN or infinity"
    if np.any(count < 0) or np.any(count != np.round(count)) or count.sum() > n_samples:
        return "has counts that are negative, fractional or above the client's rows"
    if task == "classification":
        cls = sums[:, 1:]
        if np.any(cls < 0) or np.any(cls != np.round(cls)) or np.any(cls.sum(axis=1) != count):
            return "has class counts that do not add up to the count"
    elif np.any(sums[:, 2] < 0) or np.any(sums[:, 1] ** 2 > count * sums[:, 2] * (1 + 1e-7) + 1e-9):
        return "has sums of y^2 smaller than the sums imply"
    return None
