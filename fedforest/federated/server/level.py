"""Server side of one tree level: candidates, Top-L shortlists and best splits.

Candidates come from the clients' sketches (or category codes); the best split of every
node from the clients' Round B answers. Split from :mod:`fedforest.federated.server.grower`, which
orchestrates the rounds, to keep both small.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numba
import numpy as np
from joblib import effective_n_jobs
from numpy.typing import NDArray

from ..._common import STAT_WEIGHT, count_columns
from ..protocol import Message, expect_array, unpack_gains, unpack_increments
from ..scratch import scratch
from ..threads import thread_map
from .merge import merge_local_candidates, merge_sketch_runs, midpoint_candidates
from .missing import add_missing_candidates, with_missing_sides
from .sketch_runs import SketchRuns, runs_problem, sketch_runs, stack_runs
from .splitter import (
    BestSplits,
    best_avgimp_splits,
    best_splits,
    categorical_splits,
    with_set_splits,
)
from .weights import weigh

if TYPE_CHECKING:
    from .config import GrowerConfig

__all__ = [
    "add_rows",
    "add_rows_numpy",
    "answer_candidates",
    "answer_candidates_numpy",
    "cumsum_segments",
    "cumsum_segments_numpy",
    "candidates",
    "category_counts",
    "round_b_splits",
    "shortlist",
    "sum_increments",
]

#: Candidates per thread below which :func:`sum_increments` stays in one thread.
PARALLEL_ROWS = 65536
#: :func:`sum_increments` adds the clients' rows in blocks of about this many candidates
#: (their statistics stay in the core's cache until the last client's are added).
BLOCK_ROWS = 16384


@numba.njit(nogil=True, cache=True)
def add_rows(out, pos, counts, sums):  # type: ignore[no-untyped-def]
    """Add one client's statistics into rows ``pos`` of ``out``.

    Parameters
    ----------
    out : ndarray of float64, shape (n_candidates, n_stats)  # IN/OUT
    pos : ndarray of int64, shape (m,)  # IN: distinct rows of ``out``
    counts : ndarray of int, shape (m, n_counts)  # IN: integer columns
    sums : ndarray of float64, shape (m, n_stats - n_counts)  # IN: the others
    """
    n_counts = counts.shape[1]
    if n_counts == 2 and sums.shape[1] == 2 and out.shape[1] == 4:  # the usual, unrolled
        for j in range(pos.shape[0]):
            i = pos[j]
            out[i, 0] += counts[j, 0]
            out[i, 1] += counts[j, 1]
            out[i, 2] += sums[j, 0]
            out[i, 3] += sums[j, 1]
        return
    for j in range(pos.shape[0]):
        i = pos[j]
        for q in range(n_counts):
            out[i, q] += counts[j, q]
        for q in range(sums.shape[1]):
            out[i, n_counts + q] += sums[j, q]


def add_rows_numpy(
    out: NDArray[np.float64],
    pos: NDArray[np.int64],
    counts: NDArray[Any],
    sums: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`add_rows`."""
    out[pos] += np.column_stack([counts.astype(np.float64), sums])


@numba.njit(nogil=True, cache=True)
def cumsum_segments(a, off):  # type: ignore[no-untyped-def]
    """In place, the running sums of the rows of ``a`` within each segment.

    Parameters
    ----------
    a : ndarray of float64, shape (n, n_cols)  # IN/OUT: increments in, running sums out
    off : ndarray of int64, shape (n_segments + 1,)  # IN: segment ``s`` is ``off[s]:off[s+1]``
    """
    if a.shape[1] == 4:  # the usual, unrolled
        for seg in range(off.shape[0] - 1):
            for i in range(off[seg] + 1, off[seg + 1]):
                a[i, 0] += a[i - 1, 0]
                a[i, 1] += a[i - 1, 1]
                a[i, 2] += a[i - 1, 2]
                a[i, 3] += a[i - 1, 3]
        return
    for seg in range(off.shape[0] - 1):
        for i in range(off[seg] + 1, off[seg + 1]):
            for q in range(a.shape[1]):
                a[i, q] += a[i - 1, q]


@numba.njit(nogil=True, cache=True)
def answer_candidates(pos, local, node_cand, out):  # type: ignore[no-untyped-def]
    """The candidates a client's answer positions stand for (one walk over both).

    A client answers for the candidates of the nodes it has rows in, node after node:
    its positions ``local[n]:local[n + 1]`` are node ``n``'s candidates
    ``node_cand[n]:node_cand[n + 1]`` (``local`` does not grow at a node it lacks).

    Parameters
    ----------
    pos : ndarray of int64, shape (m,)  # IN: increasing, below ``local[-1]``
    local : ndarray of int64, shape (n_nodes + 1,)  # IN
    node_cand : ndarray of int64, shape (n_nodes + 1,)  # IN
    out : ndarray of int64, shape (m,)  # OUT
    """
    n = 0
    for i in range(pos.shape[0]):
        while local[n + 1] <= pos[i]:
            n += 1
        out[i] = node_cand[n] + (pos[i] - local[n])


def answer_candidates_numpy(
    pos: NDArray[np.int64],
    local: NDArray[np.int64],
    node_cand: NDArray[np.int64],
    out: NDArray[np.int64],
) -> None:
    """NumPy twin of :func:`answer_candidates`."""
    node = np.searchsorted(local, pos, side="right") - 1
    out[:] = pos + (node_cand[:-1] - local[:-1])[node]


def cumsum_segments_numpy(a: NDArray[np.float64], off: NDArray[np.int64]) -> None:
    """NumPy twin of :func:`cumsum_segments`."""
    for lo, hi in zip(off[:-1], off[1:], strict=True):
        a[lo:hi] = np.cumsum(a[lo:hi], axis=0)


def sum_increments(
    left: NDArray[np.float64],
    parts: list[tuple[NDArray[np.int64], NDArray[Any], NDArray[np.float64]]],
    cand_off: NDArray[np.int64],
    n_threads: int = 1,
) -> None:
    """The clients' increments added in order (:func:`add_rows`), then each pair's running sum.

    ``parts`` are the clients' (increasing positions, integer columns, float columns) in
    the canonical order. With ``n_threads`` > 1, contiguous ranges of pairs are summed in
    threads (the kernels drop the GIL): every number gets the same additions in the same
    order, so ``left`` is the same, bit for bit. Each thread goes through its range in
    blocks of about :data:`BLOCK_ROWS` candidates, every client's rows of a block then its
    running sums, for the same reason the same numbers.
    """
    n = min(n_threads, left.shape[0] // PARALLEL_ROWS)
    cuts = np.searchsorted(cand_off, np.linspace(0, cand_off[-1], max(n, 1) + 1)[1:-1])
    edges = np.unique(np.concatenate([[0], cuts, [cand_off.size - 1]]))

    def job(i: int) -> None:
        p_lo, p_hi = int(edges[i]), int(edges[i + 1])
        # In blocks of pairs that stay in cache while every client's rows are added.
        c_lo, c_hi = cand_off[p_lo], cand_off[p_hi]
        n_blocks = -(-int(c_hi - c_lo) // BLOCK_ROWS)
        blocks = np.searchsorted(cand_off, np.linspace(c_lo, c_hi, n_blocks + 1)[1:-1])
        cuts = np.unique(np.concatenate([[p_lo], np.clip(blocks, p_lo, p_hi), [p_hi]]))
        at = [np.searchsorted(pos, cand_off[cuts]) for pos, _, _ in parts]
        for j in range(cuts.size - 1):
            for (pos, counts, sums), ab in zip(parts, at, strict=True):
                a, b = ab[j], ab[j + 1]
                if b > a:
                    add_rows(left, pos[a:b], counts[a:b], sums[a:b])
            cumsum_segments(left, cand_off[cuts[j] : cuts[j + 1] + 1])

    thread_map(job, range(edges.size - 1), edges.size - 1)  # one edge: no pair, nothing


def category_counts(categories: dict[str, list[Any]], d: int) -> NDArray[np.int64]:
    """Number of categories of each feature (0 for numeric features)."""
    counts = np.zeros(d, dtype=np.int64)
    for j, values in categories.items():
        counts[int(j)] = len(values)
    return counts


def _interleave(
    count_a: NDArray[np.int64],
    vals_a: NDArray[np.float64],
    count_b: NDArray[np.int64],
    vals_b: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Per-pair lists where each pair takes its entries from ``a`` or from ``b``."""
    off = np.zeros(count_a.size + 1, dtype=np.int64)
    np.cumsum(count_a + count_b, out=off[1:])
    out = np.empty(int(off[-1]))
    for count, vals in ((count_a, vals_a), (count_b, vals_b)):
        start = np.cumsum(count) - count
        pos = np.repeat(off[:-1] - start, count) + np.arange(int(count.sum()))
        out[pos] = vals
    return off, out


def _fixed_candidates(
    edges: Any, pair_feat: NDArray[np.int32], pair_ok: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Federated-histogram candidates: the same fixed edges at every node."""
    grids = [np.unique(e) for e in edges]
    sizes = np.array([g.size for g in grids], dtype=np.int64)
    flat = np.concatenate(grids) if grids else np.empty(0)
    first = np.cumsum(sizes) - sizes
    count = np.where(pair_ok, sizes[pair_feat], 0) if pair_feat.size else sizes[:0]
    cand_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum(count, out=cand_off[1:])
    at = np.repeat(first[pair_feat] - cand_off[:-1], count) + np.arange(int(cand_off[-1]))
    return cand_off, flat[at]


def candidates(
    replies: list[tuple[str, Message]],
    summaries: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    pair_ok: NDArray[np.bool_],
    cfg: GrowerConfig,
    edges: Any,
    n_categories: NDArray[np.int64],
    missing: NDArray[np.bool_] | None = None,
    sketches: dict[str, SketchRuns] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Candidate thresholds per (node, feature) pair: merged sketches, or category codes.

    A numeric pair whose feature has missing values (``missing``, per feature) gets
    :data:`~fedforest.federated.server.missing.MISSING_SPLIT` last. ``sketches``: the
    replies' sketches as the Round A check decoded them (by client), when it did.
    """
    n_cat = n_categories[pair_feat]
    cat_ok = pair_ok & (n_cat >= 2)
    off, vals = _numeric_candidates(
        replies, summaries, pair_off, pair_feat, pair_ok & (n_cat == 0), cfg, edges, n_cat == 0,
        sketches or {},
    )  # fmt: skip
    if missing is not None:
        off, vals = add_missing_candidates(off, vals, pair_ok & (n_cat == 0) & missing[pair_feat])
    # A categorical pair's candidates are the codes 0..C-2: cumulative left statistics at
    # them give every category's statistics (the last one from the node total).
    cat_count = np.where(cat_ok, n_cat - 1, 0)
    cat_first = np.cumsum(cat_count) - cat_count
    cat_vals = (np.arange(int(cat_count.sum())) - np.repeat(cat_first, cat_count)).astype(float)
    return _interleave(np.diff(off), vals, cat_count, cat_vals)


def _numeric_candidates(
    replies: list[tuple[str, Message]],
    summaries: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    pair_ok: NDArray[np.bool_],
    cfg: GrowerConfig,
    edges: Any,
    numeric: NDArray[np.bool_],
    sketches: dict[str, SketchRuns],
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Candidate thresholds of the numeric pairs (others get none)."""
    n_pairs = int(pair_off[-1])
    if cfg.binning in ("histogram", "global"):  # the same fixed grid at every node
        return _fixed_candidates(edges, pair_feat, pair_ok)
    if cfg.n_bins is None:
        per_pair: list[NDArray[np.float64]] = []
        offs = [expect_array(m, "sketch_off", "i", (n_pairs + 1,), n) for n, m in replies]
        vals = [
            expect_array(m, "sketch", "f", (int(o[-1]),), n)
            for o, (n, m) in zip(offs, replies, strict=True)
        ]
        for p in range(n_pairs):
            per_pair.append(
                midpoint_candidates([v[o[p] : o[p + 1]] for o, v in zip(offs, vals, strict=True)])
                if pair_ok[p]
                else np.empty(0)
            )
        cand_off = np.zeros(n_pairs + 1, dtype=np.int64)
        np.cumsum([c.size for c in per_pair], out=cand_off[1:])
        return cand_off, np.concatenate(per_pair) if per_pair else np.empty(0)
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
    weights = summaries[:, pair_node, STAT_WEIGHT]
    # The sketches that arrived, stacked as rows of runs; index[k, p] is client k's row
    # for pair p.
    index = np.full((len(replies), n_pairs), -1, dtype=np.int64)
    blocks, start = [], 0
    for k, (name, msg) in enumerate(replies):
        present = (weights[k] > 0) & numeric  # clients sketch numeric features only
        n_here = int(present.sum())
        block = sketches.get(name)
        gone = np.empty(n_here, dtype=bool)
        if block is None:
            block = sketch_runs(msg, n_here, cfg.n_bins, name)
            runs_problem(block.values, block.row_off, gone)  # rows holding a NaN
        else:  # checked (checks.check_sketch): a row is all NaN or all finite
            gone = np.isnan(block.values[block.row_off[:-1]])
        blocks.append(block)
        index[k, present] = np.arange(start, start + n_here)
        # A NaN row: the client's rows of that node all lack the feature (not in the mix).
        index[k, np.flatnonzero(present)[gone]] = -1
        start += n_here
    mix_w = np.where(index >= 0, weights, 0.0)
    cand_off, cand = merge_sketch_runs(
        stack_runs(blocks, borrow=True), index[:, pair_ok], mix_w[:, pair_ok], cfg.n_bins,
        effective_n_jobs(cfg.n_jobs),
    )  # fmt: skip
    if cfg.uses_local_candidates:
        cand_off, cand = _add_local_candidates(
            replies, weights, numeric, pair_ok, cand_off, cand, cfg
        )
    counts = np.zeros(n_pairs, dtype=np.int64)
    counts[pair_ok] = np.diff(cand_off)
    full_off = np.zeros(n_pairs + 1, dtype=np.int64)
    np.cumsum(counts, out=full_off[1:])
    return full_off, cand


def _add_local_candidates(
    replies: list[tuple[str, Message]],
    weights: NDArray[np.float64],
    numeric: NDArray[np.bool_],
    pair_ok: NDArray[np.bool_],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    cfg: GrowerConfig,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Join the clients' local best thresholds to the kept pairs' quantile candidates.

    At most ``B - 1`` more per pair (see
    :func:`~fedforest.federated.server.merge.merge_local_candidates`).
    """
    assert cfg.n_bins is not None
    local = np.full((len(replies), weights.shape[1]), np.nan)
    for k, (name, msg) in enumerate(replies):
        present = (weights[k] > 0) & numeric
        local[k, present] = expect_array(msg, "local_best", "f", (int(present.sum()),), name)
    local = np.ascontiguousarray(local[:, pair_ok])
    limit = cfg.n_bins - 1
    out_off = np.empty(cand_off.size, dtype=np.int64)
    out = np.empty(cand.size + local.shape[1] * limit)
    merge_local_candidates(cand_off, cand, local, limit, out_off, out)
    return out_off, out[: out_off[-1]].copy()


def _evaluate(
    pooled: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    left: NDArray[np.float64],
    splittable: NDArray[np.bool_],
    root_w: NDArray[np.float64],
    cfg: GrowerConfig,
    ctx: dict[str, Any],
) -> BestSplits:
    """Best numeric split per node, then a categorical (set) split where it gains more."""
    n_cat = ctx["n_categories"][pair_feat]
    n_cand = np.diff(cand_off)
    numeric = np.repeat(n_cat == 0, n_cand)
    num_off = np.zeros_like(cand_off)
    np.cumsum(np.where(n_cat == 0, n_cand, 0), out=num_off[1:])
    if numeric.all():  # no categorical pair: no copies
        num_cand, num_left, side = cand, left, None
    else:
        num_cand, num_left, side = cand[numeric], left[numeric], None
    if ctx.get("missing") is not None and ctx["missing"].any():
        pair_missing = ctx["missing"][pair_feat] & (n_cat == 0)
        num_off, num_cand, num_left, side = with_missing_sides(
            pooled, pair_off, pair_missing, num_off, num_cand, num_left
        )
    best = best_splits(
        pooled,
        pair_off,
        pair_feat,
        num_off,
        num_cand,
        num_left,
        criterion=cfg.criterion,
        root_weight=root_w,
        min_samples_leaf=cfg.min_samples_leaf,
        min_impurity_decrease=cfg.min_impurity_decrease,
        min_weight_fraction_leaf=cfg.min_weight_fraction_leaf,
        missing_side=side,
        n_outputs=cfg.class_outputs,
        bounds=ctx.get("bounds"),
    )
    return _with_categorical(
        best, pooled, pair_off, pair_feat, cand_off, left, splittable, root_w, cfg, ctx
    )


def _with_categorical(
    best: BestSplits,
    pooled: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    left: NDArray[np.float64],
    splittable: NDArray[np.bool_],
    root_w: NDArray[np.float64],
    cfg: GrowerConfig,
    ctx: dict[str, Any],
) -> BestSplits:
    """Replace a node's split by its best categorical split where that gains more."""
    if not (ctx["n_categories"][pair_feat] > 0).any():
        return best
    sets, feature = categorical_splits(
        pooled,
        pair_off,
        pair_feat,
        cand_off,
        left,
        ctx["n_categories"],
        criterion=cfg.criterion,
        n_classes=ctx["n_classes"],
        min_samples_leaf=cfg.min_samples_leaf,
        n_outputs=cfg.class_outputs,
    )
    return with_set_splits(
        best,
        sets,
        feature,
        splittable & (feature >= 0),
        root_weight=root_w,
        min_impurity_decrease=cfg.min_impurity_decrease,
        min_weight_fraction_leaf=cfg.min_weight_fraction_leaf,
    )


def round_b_splits(
    replies_b: list[tuple[str, Message]],
    summaries: NDArray[np.float64],
    pooled: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    splittable: NDArray[np.bool_],
    root_w: NDArray[np.float64],
    cfg: GrowerConfig,
    ctx: dict[str, Any],
) -> BestSplits:
    """Sum the clients' Round B answers (canonical order) and pick each node's split."""
    s = pooled.shape[1]
    n_cand = np.diff(cand_off)
    categorical = np.repeat(ctx["n_categories"][pair_feat] > 0, n_cand)
    exact = cfg.split_rule != "avgimp"
    # The pooled left statistics in this thread's scratch (read by the split search only).
    left = scratch("pooled-left", cand.size * s, np.float64).reshape(cand.size, s)
    left.fill(0.0)
    gain_sum = np.zeros(cand.size)  # AvgImp: the clients' summed local gains
    left_rows = np.zeros((cand.size, 1))  # and their left rows (increments, then sums)
    first = np.zeros(cand.size, dtype=bool)  # a pair's first candidate
    first[cand_off[:-1][n_cand > 0]] = True
    cand_node = None if exact else _cand_node(pair_off, n_cand)
    node_cand = cand_off[pair_off]  # node n's candidates: node_cand[n]:node_cand[n + 1]
    n_counts = count_columns(ctx["n_classes"], ctx["weighted"])
    records = ctx.get("records")
    increments = records.increments if records is not None else {}

    def decoded(name: str, msg: Message, n_answered: int) -> tuple[Any, Any, Any]:
        checked = increments.get(name)
        if checked is not None and checked[0] is msg:  # decoded by the reply's check
            return checked[1:]
        return unpack_increments(msg, "left", n_answered, s, n_counts, name)

    # Each client answered for the candidates of the nodes it has rows in, with the
    # statistics of the rows between consecutive candidates (see pack_increments).
    parts, locals_ = [], []
    for k, (name, msg) in enumerate(replies_b):
        node_has = summaries[k, :, STAT_WEIGHT] > 0
        if exact:  # its answers' positions, as runs of the nodes' candidates
            size = np.where(node_has, np.diff(node_cand), 0)
            local = np.zeros(size.size + 1, dtype=np.int64)
            np.cumsum(size, out=local[1:])
            pos, counts, sums = decoded(name, msg, int(local[-1]))
            parts.append((pos, counts, sums))
            locals_.append(local)
            continue
        assert cand_node is not None  # AvgImp: categorical increments, numeric gains
        has = node_has[cand_node]
        answered = np.flatnonzero(has & categorical)
        pos, counts, sums = decoded(name, msg, answered.size)
        parts.append((answered[pos], counts, sums))
        at = has & ~categorical
        rows, gains = unpack_gains(msg, int(at.sum()), first[at], name)
        gain_sum[at] += gains
        left_rows[at, 0] += rows
    if exact:  # the answers' candidates, every client's in one scratch array
        sizes = np.cumsum([0] + [part[0].size for part in parts])
        at_all = scratch("answer-candidates", int(sizes[-1]), np.int64)
        for i, ((pos, counts, sums), local) in enumerate(zip(parts, locals_, strict=True)):
            at = at_all[sizes[i] : sizes[i + 1]]
            answer_candidates(pos, local, node_cand, at)
            parts[i] = (at, counts, sums)
    # Summed increments -> pooled left statistics.
    sum_increments(left, parts, cand_off, effective_n_jobs(cfg.n_jobs))
    if ctx.get("class_w_nodes") is not None:  # class_weight (weights.py)
        left = weigh(left, ctx["class_w_nodes"][_cand_node(pair_off, n_cand)])
    if exact:
        return _evaluate(
            pooled, pair_off, pair_feat, cand_off, cand, left, splittable, root_w, cfg, ctx
        )
    cumsum_segments(left_rows, cand_off)
    numeric = ~categorical
    num_off = np.zeros_like(cand_off)
    np.cumsum(np.where(ctx["n_categories"][pair_feat] == 0, n_cand, 0), out=num_off[1:])
    best = best_avgimp_splits(
        pooled,
        pair_off,
        pair_feat,
        num_off,
        cand[numeric],
        gain_sum[numeric],
        left_rows[numeric, 0],
        min_samples_leaf=cfg.min_samples_leaf,
        min_impurity_decrease=cfg.min_impurity_decrease,
        root_weight=root_w,
    )
    return _with_categorical(
        best, pooled, pair_off, pair_feat, cand_off, left, splittable, root_w, cfg, ctx
    )


def _cand_node(pair_off: NDArray[np.int64], n_cand: NDArray[np.int64]) -> NDArray[np.int64]:
    """The node of each candidate."""
    return np.repeat(np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off)), n_cand)


def shortlist(
    replies: list[tuple[str, Message]],
    summaries: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    top_l: int,
    ctx: dict[str, Any],
) -> NDArray[np.bool_]:
    """Top-L: merge the clients' rankings into each node's shortlist.

    Each client reports its L best sampled features with their local weighted gains
    ``M_{nu,k}(j)`` (a feature it does not report counts 0 for it). The server keeps the L
    features with the largest summed gains (the ``n_{nu,k}``-weighted average of the local
    best decreases, times the node weight; ties: request order) and any feature that more
    than half of the node's clients rank among their L best: at most ``3 L - 1``
    features, however many clients (their union could reach ``min(K L, d)``, which
    shortlists nothing at 6 sampled features, L = 3 and 10 clients). Categorical pairs
    are kept (their statistics are exact counts, cheap to send).
    """
    n_nodes = pair_off.size - 1
    d = ctx["d"]
    score = np.zeros((n_nodes, d))
    named = np.zeros((n_nodes, d), dtype=bool)
    votes = np.zeros((n_nodes, d))
    present = np.zeros(n_nodes)
    for k, (name, msg) in enumerate(replies):
        has = summaries[k, :, STAT_WEIGHT] > 0
        feats = expect_array(msg, "top_features", "i", (int(has.sum()), top_l), name)
        gains = expect_array(msg, "top_gains", "f", (int(has.sum()), top_l), name)
        rows, cols = np.nonzero(feats >= 0)  # checked in Round A (checks.ClientRecords)
        g = gains[rows, cols]
        nodes = np.flatnonzero(has)[rows]
        np.add.at(score, (nodes, feats[rows, cols]), g)
        named[nodes, feats[rows, cols]] = True
        np.add.at(votes, (nodes, feats[rows, cols]), 1)
        present += has
    keep = np.zeros(pair_feat.size, dtype=bool)
    for node in range(n_nodes):
        lo, hi = int(pair_off[node]), int(pair_off[node + 1])
        feats = pair_feat[lo:hi]
        cand = np.flatnonzero(named[node, feats])
        order = cand[np.argsort(-score[node, feats[cand]], kind="stable")][:top_l]
        keep[lo + order] = True
        keep[lo:hi] |= votes[node, feats] * 2 > present[node]  # a majority's choice
    return np.asarray(keep | (ctx["n_categories"][pair_feat] > 0))
