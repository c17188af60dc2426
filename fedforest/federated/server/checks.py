"""What the server checks in every reply before it uses it (a client is untrusted input).

Every reply is checked when it arrives, in :func:`~.rounds.exchange`, against the request it
answers: first its envelope (a :class:`Message` of the request's kind, a JSON header, numeric
arrays), then the round's fields (``check_*`` below; each knows what the server has learnt
of that client so far). A violation is an :class:`InvalidReply` naming the client, the round
and the field. Under ``on_client_failure="raise"`` it stops training; under ``"drop"`` the
client is dropped from that round on and training goes on without it, as for a client that
died (:mod:`..failure`).

Under ``privacy="none"`` the server sees each client's statistics and checks them against
each other and against the client's handshake: whole non-negative counts, at most the
client's rows, a tree's root weight equal to its bootstrap draws, children within their
parent, class weights adding up to the weight, sums of squares consistent with the sums
(Cauchy-Schwarz), sketches finite and sorted, out-of-bag sums within their ranges. Under
``"secure"`` / ``"dp"`` each client's arrays are masked: the server checks their dtype and
shape, and the decoded sums (in :mod:`.secure`); a client that lies within those bounds is
not detectable there (secure aggregation hides who contributed what).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_TASK, STAT_WEIGHT
from ..criteria import s_log_mean
from ..label_dtypes import label_dtype_problem
from ..privacy.secagg import FRAC_BITS, valid_public_key
from ..protocol import Message, expect_array, protocol_mismatch, unpack_gains, unpack_increments
from . import check_kernels as ck
from .sketch_runs import SketchRuns, runs_problem, sketch_runs

__all__ = [
    "Check",
    "ClientRecords",
    "InvalidReply",
    "check_class_blocks",
    "check_handshake",
    "check_pooled_class_counts",
    "check_oob",
    "as_invalid",
    "check_round_b",
    "check_summaries",
    "label_type",
]

#: A round's check: (client name, its request, its reply) -> None or InvalidReply.
Check = Callable[[str, Message, Message], None]
#: Relative slack of float comparisons between a client's own sums (rounding only).
_RTOL = 1e-9
#: JSON scalar types a class label may have.
_LABEL_TYPES = (str, int, float, bool)


class InvalidReply(ValueError):
    """A client's reply failed a check; names the client, the round and the field.

    Parameters
    ----------
    client : str
        The client that sent it.
    kind : str
        The message kind of the round.
    field : str
        The header field or array at fault.
    problem : str
        What is wrong with it.
    round_index : int or None
        The round, counted from 0 as in the ledger (filled in by the exchange).
    """

    def __init__(
        self, client: str, kind: str, field: str, problem: str, round_index: int | None = None
    ) -> None:
        self.client, self.kind, self.field, self.problem = client, kind, field, problem
        self.round_index = round_index
        where = f"round {round_index} ({kind})" if round_index is not None else f"a {kind} round"
        super().__init__(f"Client {client!r} sent an invalid reply in {where}: {field} {problem}.")

    def in_round(self, round_index: int) -> InvalidReply:
        """The same failure, with the round named."""
        return InvalidReply(self.client, self.kind, self.field, self.problem, round_index)


def as_invalid(name: str, kind: str, exc: ValueError) -> InvalidReply:
    """A check's error as an InvalidReply (a decoding error of ``expect_array`` & co.)."""
    if isinstance(exc, InvalidReply):
        return exc
    return InvalidReply(name, kind, "a payload", f"is malformed ({exc})")


# --------------------------------------------------------------------------- handshake
def label_type(label: Any) -> str:
    """Labels compare within a type family: numbers (bool included) or text."""
    return "text" if isinstance(label, str) else "number"


def check_handshake(task: str, privacy: str, ranges: bool) -> Check:
    """The handshake's header fields: types, sizes and ranges."""

    def check(name: str, request: Message, reply: Message) -> None:
        h, kind = reply.header, request.kind
        if (why := protocol_mismatch(h.get("protocol"))) is not None:
            raise InvalidReply(name, kind, "header field 'protocol'", why)
        for key in ("n_samples", "n_features", "feature_names"):
            if key not in h:
                raise InvalidReply(name, kind, f"header field {key!r}", "is missing")
        d, n = h["n_features"], h["n_samples"]
        # Split features are int32 in the trees; rows are counted exactly in float64.
        for key, value, low, high in (("n_features", d, 1, 2**31 - 1), ("n_samples", n, 0, 2**53)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
                raise InvalidReply(
                    name,
                    kind,
                    f"header field {key!r}",
                    f"is {value!r}, not an integer in [{low}, {high})",
                )
        n_out = h.get("n_outputs", 1)
        if isinstance(n_out, bool) or not isinstance(n_out, int) or not 1 <= n_out <= 10_000:
            raise InvalidReply(
                name, kind, "header field 'n_outputs'", f"is {n_out!r}, not an integer >= 1"
            )
        names = h["feature_names"]
        if names is not None and (
            not isinstance(names, list)
            or len(names) != d
            or not all(isinstance(f, str) for f in names)
            or len(set(names)) != d
        ):
            raise InvalidReply(
                name, kind, "header field 'feature_names'", f"is not null or {d} distinct strings"
            )
        # Each categorical column's levels; "declared": pandas-declared ones (from_dtype).
        cats = h.get("categories", {})
        for field, table in (("categories", cats), ("declared", h.get("declared", {}))):
            if not isinstance(table, dict) or not all(
                isinstance(j, str) and j.isdigit() and int(j) < d and isinstance(v, list)
                for j, v in table.items()
            ):
                raise InvalidReply(name, kind, f"header field {field!r}", "is not a column map")
            for j, values in table.items():
                where = f"header field {field!r}[{j!r}]"
                _check_scalars(name, kind, where, values, allow_null=True)
                if field == "declared" and (j not in cats or not values):
                    raise InvalidReply(name, kind, where, "is not a categorical column's levels")
        if not isinstance(h.get("weighted", False), bool):
            raise InvalidReply(name, kind, "header field 'weighted'", "is not a boolean")
        missing = h.get("missing_features", [])
        if (
            not isinstance(missing, list)
            or not all(isinstance(j, int) and not isinstance(j, bool) for j in missing)
            or sorted(set(missing)) != missing
            or any(j < 0 or j >= d or str(j) in cats for j in missing)
        ):
            raise InvalidReply(
                name,
                kind,
                "header field 'missing_features'",
                f"is not a sorted list of distinct numeric column indices below {d}",
            )
        # Declared classes (or "dp"): no labels travel, outside "none".
        quiet = privacy == "dp" or (privacy != "none" and request.header.get("classes") is not None)
        if task == "classification" and not (quiet and h.get("labels") is None):
            labels: Any = h.get("labels")
            counts: Any = h.get("label_counts")
            if n_out > 1 and (not isinstance(labels, list) or len(labels) != n_out):
                raise InvalidReply(name, kind, "header field 'labels'", f"is not {n_out} lists")
            if n_out > 1 and privacy == "none" and not isinstance(counts, list):
                raise InvalidReply(name, kind, "header field 'label_counts'", "is not a list")
            # Under "secure" a client names the labels it holds in m rows (maybe none).
            most = n // max(int(request.header.get("min_level_rows", 1)), 1)
            for o, own in enumerate(labels if n_out > 1 else [labels]):
                field = "header field 'labels'" + (f"[{o}]" if n_out > 1 else "")
                if privacy == "secure" and isinstance(own, list) and len(own) > most:
                    raise InvalidReply(name, kind, field, f"names more than {most} labels")
                if not isinstance(own, list) or not (own or privacy == "secure"):
                    raise InvalidReply(name, kind, field, "is not a non-empty list")
                _check_scalars(name, kind, field, own)
                if privacy == "none":
                    own_counts = counts if n_out == 1 else (counts[o:] or [None])[0]
                    _check_label_counts(name, kind, own_counts, len(own), n)
            found = labels if n_out == 1 else [v for own in labels for v in own]
            if (code := h.get("label_dtype")) is not None:  # y's dtype, for classes_
                if (why := label_dtype_problem(code, found)) is not None:
                    raise InvalidReply(name, kind, "header field 'label_dtype'", why)
        if ranges:
            lo = expect_array(reply, "feature_min", "f", (d,), name)
            hi = expect_array(reply, "feature_max", "f", (d,), name)
            num = np.setdiff1d(np.arange(d), [int(j) for j in cats])  # codes come later
            lo, hi = lo[num], hi[num]
            if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
                raise InvalidReply(
                    name, kind, "arrays 'feature_min'/'feature_max'", "are not finite with min<=max"
                )
        if privacy != "none":
            _check_public_key(name, kind, reply.arrays.get("public_key"))

    return check


def _check_public_key(name: str, kind: str, raw: Any) -> None:
    """Under "secure"/"dp": 32 uint8 bytes, not a low-order X25519 point."""
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.shape != (32,):
        got = "is missing" if raw is None else f"has dtype {raw.dtype}, shape {raw.shape}"
        raise InvalidReply(name, kind, "array 'public_key'", f"{got}, not 32 bytes as uint8")
    if not valid_public_key(raw.tobytes()):
        raise InvalidReply(
            name, kind, "array 'public_key'", "is not a valid X25519 key (low order)"
        )


def _check_scalars(
    name: str, kind: str, field: str, values: list[Any], allow_null: bool = False
) -> None:
    """Distinct JSON scalars of one type family (labels, categories).

    ``allow_null``: one null may stand beside them (a categorical column's missing values).
    """
    if allow_null and None in values:
        if values.count(None) > 1:
            raise InvalidReply(name, kind, field, "repeats null")
        values = [v for v in values if v is not None]
    if not all(isinstance(v, _LABEL_TYPES) for v in values):
        bad = next(v for v in values if not isinstance(v, _LABEL_TYPES))
        raise InvalidReply(name, kind, field, f"holds {bad!r}, not a string or number")
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        raise InvalidReply(name, kind, field, "holds NaN or infinity")
    if len({label_type(v) for v in values}) > 1:
        raise InvalidReply(name, kind, field, "mixes strings and numbers")
    if len(set(values)) != len(values):
        raise InvalidReply(name, kind, field, "repeats a value")


def _check_label_counts(name: str, kind: str, counts: Any, n_labels: int, n: int) -> None:
    """Under "none": each claimed label has rows, and the counts add up to the client's rows."""
    field = "header field 'label_counts'"
    if not isinstance(counts, list) or len(counts) != n_labels:
        raise InvalidReply(name, kind, field, f"is not a list of {n_labels} counts")
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in counts):
        raise InvalidReply(name, kind, field, "holds a count < 1 (a label without rows)")
    if sum(counts) != n:
        raise InvalidReply(name, kind, field, f"adds up to {sum(counts)}, not n_samples = {n}")


# --------------------------------------------------------------------------- summaries
def check_summaries(
    name: str,
    kind: str,
    summary: NDArray[np.float64],
    *,
    n_samples: int,
    n_count: int,
    task: str,
    root: NDArray[np.bool_],
    draws: int | None = None,
    bootstrap: bool,
    parent: NDArray[np.float64] | None,
    siblings: NDArray[np.int64] | None = None,
    field: str = "array 'summary'",
    class_sizes: tuple[int, ...] = (),
) -> None:
    """One client's node statistics (rows = nodes), checked against what the server knows.

    ``root`` marks the tree roots (weight = the bootstrap's draws, 0 if the client sits the
    tree out); ``parent`` holds the client's own statistics of each node's parent (NaN rows
    for roots), ``siblings`` each node's sibling among the rows (-1: none), whose sum with the
    node must equal the parent on the count columns.
    """
    _check_stats(name, kind, field, summary, n_count, task, class_sizes)
    n_draws = float(n_samples if draws is None else draws)
    problem = ck.summary_problem(
        np.ascontiguousarray(summary, dtype=np.float64),
        n_count,
        float(n_samples),
        np.ascontiguousarray(root, dtype=np.bool_),
        n_draws,
        bool(bootstrap),
        task == "regression",
        _RTOL,
        _NO_PARENT if parent is None else np.ascontiguousarray(parent, dtype=np.float64),
        _NO_SIBLINGS if siblings is None else np.ascontiguousarray(siblings, dtype=np.int64),
    )
    if problem == ck.TOO_MANY_ROWS:
        raise InvalidReply(name, kind, field, f"counts more rows than the client's {n_samples}")
    if problem == ck.ROOT_WEIGHT:
        raise InvalidReply(
            name, kind, field, f"has a root weight other than 0 or the client's {n_draws:g} draws"
        )
    if problem == ck.ABOVE_PARENT:
        raise InvalidReply(name, kind, field, "has a node with more than its parent")
    if problem == ck.NOT_ADDING:
        raise InvalidReply(name, kind, field, "has two children that do not add up to their parent")


#: No parents or siblings known (:func:`~.check_kernels.summary_problem`'s empty arrays).
_NO_PARENT = np.empty((0, 0))
_NO_SIBLINGS = np.empty(0, dtype=np.int64)


_STATS_PROBLEMS = {
    ck.NONFINITE: "holds NaN or infinity",
    ck.FRACTIONAL: "holds negative or fractional counts or weights",
    ck.MOMENTS: "has sums of y^2 smaller than the sums imply",
}


_JENSEN = "has sums of y log y smaller than the sums imply"


def _check_stats_parts(
    name: str,
    kind: str,
    field: str,
    counts: NDArray[Any],
    sums: NDArray[np.float64],
    task: str,
    class_sizes: tuple[int, ...] = (),
) -> None:
    """:func:`_check_stats` of the rows ``counts[i]`` then ``sums[i]`` (not joined)."""
    if task != "regression":
        stats = np.hstack([counts, sums])
        _check_stats(name, kind, field, stats, counts.shape[1], task, class_sizes)
        return
    # One pass, the same tests (in the kernel's types: a client picks its dtypes).
    problem = ck.regression_stats_problem(_kernel_counts(counts), np.asarray(sums, np.float64))
    if problem == ck.WEIGHTS:
        weighted = counts.shape[1] < STAT_TASK
        raise InvalidReply(
            name,
            kind,
            field,
            "has negative weights or weight without rows"
            if weighted
            else "has weights below their row counts",
        )
    if problem:
        raise InvalidReply(name, kind, field, _STATS_PROBLEMS[problem])


def _kernel_counts(counts: NDArray[Any]) -> NDArray[Any]:
    """Integer columns as the kernels take them: int32, int64 or float64 (copied if not)."""
    if counts.dtype in (np.int32, np.int64, np.float64):
        return counts
    return counts.astype(np.int64 if counts.dtype.kind in "iu" else np.float64)


def _check_stats(
    name: str,
    kind: str,
    field: str,
    stats: NDArray[np.float64],
    n_count: int,
    task: str,
    class_sizes: tuple[int, ...] = (),
) -> None:
    """Rows of additive statistics (or increments of them) that are internally consistent.

    ``class_sizes``: multi-output classification's class blocks (each adds up to the weight).
    """
    if task == "regression":
        _check_stats_parts(name, kind, field, stats[:, :n_count], stats[:, n_count:], task)
        return
    if not np.all(np.isfinite(stats)):
        raise InvalidReply(name, kind, field, "holds NaN or infinity")
    counts = stats[:, :n_count]
    if np.any(counts < 0) or np.any(counts != np.round(counts)):
        raise InvalidReply(name, kind, field, "holds negative or fractional counts or weights")
    rows, weight = stats[:, STAT_ROWS], stats[:, STAT_WEIGHT]
    weighted = n_count < STAT_TASK  # sample weights: real weights, any size per row
    if weighted:
        if np.any(weight < 0) or np.any((rows == 0) & (weight != 0)):
            raise InvalidReply(name, kind, field, "has negative weights or weight without rows")
    elif np.any(rows > weight) or np.any((rows == 0) != (weight == 0)):
        raise InvalidReply(name, kind, field, "has weights below their row counts")
    if task == "classification":
        classes = stats[:, STAT_TASK:]
        total = classes.sum(axis=1)[:, None]
        if len(class_sizes) > 1:  # one block per output, each adding up to the weight
            total = np.add.reduceat(classes, np.cumsum((0, *class_sizes[:-1])), axis=1)
        off = np.abs(total - weight[:, None])
        tol = (1e-9 * np.maximum(weight, 1.0))[:, None] if weighted else 0
        if np.any(classes < 0) or np.any(off > tol):
            raise InvalidReply(name, kind, field, "has class weights that do not add up")
    elif task == "poisson":  # (sum w*y, sum w*y*log y) per output: y >= 0, Jensen's bound
        s, t = stats[:, STAT_TASK::2], stats[:, STAT_TASK + 1 :: 2]
        bound = s_log_mean(s, weight[:, None])
        if np.any(s < 0) or np.any(t < bound - 1e-7 * np.abs(bound) - 1e-9):
            raise InvalidReply(name, kind, field, _JENSEN)
    else:
        # One (sum w*y, sum w*y^2) pair per output.
        s1, s2 = stats[:, STAT_TASK::2], stats[:, STAT_TASK + 1 :: 2]
        if np.any(s2 < 0) or np.any(s1 * s1 > weight[:, None] * s2 * (1 + 1e-7) + 1e-9):
            raise InvalidReply(name, kind, field, "has sums of y^2 smaller than the sums imply")


def check_sketch(name: str, kind: str, sketch: SketchRuns) -> NDArray[np.bool_]:
    """Sketch rows are finite and sorted (quantiles at increasing levels).

    A row is all NaN where every row of the client in that node lacks the feature; those
    rows are returned (a mask), the others must be finite and sorted. ``sketch``: the rows
    as runs (:class:`~.sketch_runs.SketchRuns`; dense rows: ``dense_runs``), checked in one
    pass over the runs.
    """
    gone = np.empty(sketch.row_off.size - 1, dtype=bool)
    problem = runs_problem(sketch.values, sketch.row_off, gone)
    if problem == ck.NONFINITE:
        raise InvalidReply(name, kind, "array 'sketch'", "holds NaN or infinity")
    if problem == ck.UNSORTED:
        raise InvalidReply(name, kind, "array 'sketch'", "has a row that is not sorted")
    return gone


def _check_distinct_values(name: str, reply: Message, n_pairs: int) -> None:
    """The verification mode's Round A values: offsets from 0, each pair's sorted values."""
    off = expect_array(reply, "sketch_off", "iu", (n_pairs + 1,), name)
    if off[0] != 0 or np.any(np.diff(off.astype(np.int64)) < 0) or off[-1] > np.iinfo(np.int32).max:
        raise InvalidReply(
            name, reply.kind, "array 'sketch_off'", "is not increasing offsets from 0"
        )
    values = expect_array(reply, "sketch", "f", (int(off[-1]),), name)
    inside = np.ones(values.size, dtype=bool)
    inside[off[1:-1][off[1:-1] < values.size]] = False  # each pair's first value
    if not np.all(np.isfinite(values)) or np.any(np.diff(values)[inside[1:]] <= 0):
        raise InvalidReply(name, reply.kind, "array 'sketch'", "is not each pair's distinct values")


def sketch_of(
    msg: Message, n_here: int, n_bins: int, name: str
) -> tuple[SketchRuns, NDArray[np.bool_]]:
    """The sketch of a reply as runs, checked, and its rows that are all NaN."""
    runs = sketch_runs(msg, n_here, n_bins, name)
    return runs, check_sketch(name, msg.kind, runs)


# --------------------------------------------------------------------------- Round B
def check_round_b(
    name: str,
    reply: Message,
    cand_off: NDArray[np.int64],
    node_of_pair: NDArray[np.int64],
    node_stats: NDArray[np.float64],
    n_stats: int,
    n_count: int,
    task: str,
    answered: NDArray[np.int64] | int,
    class_sizes: tuple[int, ...] = (),
) -> tuple[NDArray[np.int64], NDArray[Any], NDArray[np.float64]]:
    """Left statistics at a client's candidates: valid increments within the node's rows.

    ``answered`` lists the candidates (indices into the request's ``cand``) whose
    statistics the client sent, in order, or is their number when they are all of them
    (``0..answered - 1``: a position is its candidate); ``node_stats`` are its own node
    summaries. Returns the increments as :func:`~..protocol.unpack_increments` reads them.
    """
    kind = reply.kind
    n = answered if isinstance(answered, int) else answered.size
    pos, counts, sums = unpack_increments(reply, "left", n, n_stats, n_count, name)
    cand = pos if isinstance(answered, int) else answered[pos]
    try:
        _check_stats_parts(name, kind, "the left statistics", counts, sums, task, class_sizes)
    except InvalidReply as err:
        moments = err.problem == _STATS_PROBLEMS[ck.MOMENTS] and task == "regression"
        jensen = err.problem == _JENSEN and task == "poisson"
        within = ck.moments_within_rounding if moments else ck.poisson_within_rounding
        if not (
            (moments or jensen) and within(counts, sums, cand, cand_off, node_of_pair, node_stats)
        ):
            raise
    # A pair's increments add up to its rows left of the last candidate: at most the node's.
    if ck.counts_above_nodes(
        cand_off,
        cand,
        _kernel_counts(counts),
        node_of_pair,
        node_stats.astype(np.float64, copy=False),
    ):
        raise InvalidReply(name, kind, "the left statistics", "count more than the node holds")
    if sums.size and ck.sums_above_nodes(
        cand_off, cand, sums, counts.shape[1], task, node_of_pair, node_stats
    ):
        raise InvalidReply(name, kind, "the left statistics", "sum more than the node holds")
    return pos, counts, sums


# --------------------------------------------------------------------------- OOB
def check_oob(
    name: str, sums: NDArray[np.float64], task: str, n_samples: int, field: str = "'oob_sums'"
) -> None:
    """Out-of-bag sums: (scored, correct), or scored then per output (error, sum y, y^2)."""
    kind = "oob"
    if not np.all(np.isfinite(sums)):
        raise InvalidReply(name, kind, f"array {field}", "holds NaN or infinity")
    scored = sums[0]
    if scored < 0 or scored != round(scored) or scored > n_samples:
        raise InvalidReply(
            name, kind, f"array {field}", f"scores {scored} rows (the client has {n_samples})"
        )
    if task == "classification":
        if sums[1] < 0 or sums[1] > scored or sums[1] != round(sums[1]):
            raise InvalidReply(name, kind, f"array {field}", "has more correct rows than scored")
    else:  # per output: squared error, sum y, sum y^2
        se, sy, syy = sums[1::3], sums[2::3], sums[3::3]
        if np.any(se < 0) or np.any(syy < 0) or np.any(sy**2 > scored * syy * (1 + 1e-7) + 1e-9):
            raise InvalidReply(name, kind, f"array {field}", "has negative or inconsistent sums")


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


# --------------------------------------------------------------------------- pooled sums
def check_pooled_class_counts(
    counts: NDArray[np.float64], sizes: tuple[int, ...], n_rows: float
) -> None:
    """Under "secure": the masked sum of the clients' class counts (class_weight="balanced").

    Whole, non-negative, and each output's block adds up to the rows of the clients that
    answered (public from the handshake). A violation means some client sent counts that
    no labels have (secure aggregation hides which).
    """
    blocks = np.split(counts, np.cumsum(sizes)[:-1])
    bad = [
        o
        for o, block in enumerate(blocks)
        if not np.all(np.isfinite(block))
        or np.any(block < 0)
        or np.any(block != np.round(block))
        or block.sum() != n_rows
    ]
    if bad:
        where = f" of output {bad[0]}" if len(sizes) > 1 else ""
        raise ValueError(
            f"The pooled class counts{where} of the grid round are not whole non-negative "
            f"counts adding up to the {n_rows:.0f} rows of the clients: some client sent counts "
            "that no labels have (secure aggregation hides which)."
        )


def check_class_blocks(
    stats: NDArray[np.float64], sizes: tuple[int, ...], weighted: bool, what: str
) -> None:
    """Under "secure": each output's block of pooled class weights adds up to the weight.

    Without sample or class weights every column is a whole count and the blocks add up
    exactly; with them each client's fixed point moves each column by at most
    ``2^-(FRAC_BITS + 1)`` (a client without rows in the sum sends exact zeros, so at most
    ``rows`` clients round): the check allows ``rows (size + 1) 2^-FRAC_BITS``. A violation
    means some client sent class weights that no rows have (secure aggregation hides which).
    """
    if not stats.size:
        return
    starts = np.cumsum((0,) + tuple(sizes[:-1]))
    totals = np.add.reduceat(stats[:, STAT_TASK:], starts, axis=1)
    w = stats[:, STAT_WEIGHT][:, None]
    tol = np.zeros((1, len(sizes)))
    if weighted:
        tol = stats[:, STAT_ROWS][:, None] * (np.asarray(sizes) + 1.0) * 2.0**-FRAC_BITS + 1e-9
    bad = np.abs(totals - w) > tol
    if np.any(bad):
        raise ValueError(
            f"The pooled sums of {what} hold class weights that do not add up to the weight "
            f"(output {int(np.flatnonzero(bad.any(axis=0))[0])}, at {int(bad.any(axis=1).sum())}"
            " rows of statistics): some client sent class weights that no rows have (secure "
            "aggregation hides which)."
        )
