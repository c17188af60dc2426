"""The server's checks of Round A's summaries and sketches, Round B's and the OOB round's replies.

Under ``privacy="none"``: each client's statistics against the client's handshake and
each other (whole counts, children within their parent, Cauchy-Schwarz, sorted finite
sketches, sums within their ranges). Moved out of ``checks.py``, which re-exports its
names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_TASK, STAT_WEIGHT
from ..criteria import s_log_mean
from ..protocol import Message, expect_array, unpack_increments
from . import check_kernels as ck
from .checks_base import InvalidReply
from .sketch_runs import SketchRuns, runs_problem, sketch_runs

#: Relative slack of float comparisons between a client's own sums (rounding only).
_RTOL = 1e-9


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
    _raise_regression_problem(name, kind, field, problem, counts.shape[1])


def _raise_regression_problem(name: str, kind: str, field: str, problem: int, n_count: int) -> None:
    """The error of :func:`~.check_kernels.regression_stats_problem`'s verdict, if any."""
    if problem == ck.WEIGHTS:
        weighted = n_count < STAT_TASK
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
    field = "the left statistics"
    verdicts = None
    if task == "regression":  # the three tests below in one pass over the increments
        verdicts = ck.regression_reply_problems(
            _kernel_counts(counts),
            np.ascontiguousarray(sums, dtype=np.float64),
            cand_off,
            np.asarray(cand, dtype=np.int64),
            ck.sum_columns(counts.shape[1], task, node_stats.shape[1]),
            node_of_pair,
            np.ascontiguousarray(node_stats, dtype=np.float64),
        )
    try:
        if verdicts is None:
            _check_stats_parts(name, kind, field, counts, sums, task, class_sizes)
        else:
            _raise_regression_problem(name, kind, field, verdicts[0], counts.shape[1])
    except InvalidReply as err:
        moments = err.problem == _STATS_PROBLEMS[ck.MOMENTS] and task == "regression"
        jensen = err.problem == _JENSEN and task == "poisson"
        within = ck.moments_within_rounding if moments else ck.poisson_within_rounding
        if not (
            (moments or jensen) and within(counts, sums, cand, cand_off, node_of_pair, node_stats)
        ):
            raise
    # A pair's increments add up to its rows left of the last candidate: at most the node's.
    if (
        verdicts[1]
        if verdicts
        else ck.counts_above_nodes(
            cand_off,
            cand,
            _kernel_counts(counts),
            node_of_pair,
            node_stats.astype(np.float64, copy=False),
        )
    ):
        raise InvalidReply(name, kind, field, "count more than the node holds")
    if (
        verdicts[2]
        if verdicts
        else sums.size
        and ck.sums_above_nodes(
            cand_off, cand, sums, counts.shape[1], task, node_of_pair, node_stats
        )
    ):
        raise InvalidReply(name, kind, field, "sum more than the node holds")
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
