"""One-pass kernels of the server's reply checks (:mod:`.checks`), with NumPy twins.

The checks of a client's statistics and sketches are many whole-array NumPy passes
(finite? whole counts? weights above rows? Cauchy-Schwarz? sorted?), each allocating a
temporary; at a level of a 50-tree forest that is a few hundred thousand rows per client
and per round. These kernels make the same tests in one pass, without temporaries, and
say which test failed first (in the order :mod:`.checks` reports them); the checks keep
their messages. Their twins are the NumPy formulations the checks used before.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_TASK, STAT_WEIGHT
from ..criteria import s_log_mean

__all__ = [
    "NONFINITE",
    "FRACTIONAL",
    "WEIGHTS",
    "MOMENTS",
    "UNSORTED",
    "counts_above_nodes",
    "counts_above_nodes_numpy",
    "sum_columns",
    "sums_above_kernel",
    "sums_above_nodes",
    "sums_above_nodes_numpy",
    "moments_within_rounding",
    "poisson_within_rounding",
    "top_l_problem",
    "cumulative_problem",
    "cumulative_problem_numpy",
    "regression_stats_problem",
    "regression_stats_problem_numpy",
    "regression_reply_problems",
    "dense_sketch_problem",
    "summary_problem",
    "summary_problem_numpy",
]

#: What a check found (0: nothing), in the order the checks report them.
NONFINITE, FRACTIONAL, WEIGHTS, MOMENTS, UNSORTED = 1, 2, 3, 4, 2


@numba.njit(nogil=True, cache=True, inline="always")
def _col(counts, sums, i, c):  # type: ignore[no-untyped-def]
    nc = counts.shape[1]
    return np.float64(counts[i, c]) if c < nc else sums[i, c - nc]


@numba.njit(nogil=True, cache=True)
def regression_stats_problem(counts, sums):  # type: ignore[no-untyped-def]
    """The first failed test of regression statistics, one row per node or increment.

    A row is ``counts[i]`` (the integer columns: rows, weight unless sample weights make
    it real) then ``sums[i]`` (one (sum w*y, sum w*y^2) pair per output).

    Parameters
    ----------
    counts : ndarray of int or float64, shape (m, n_count)  # IN
    sums : ndarray of float64, shape (m, n_stats - n_count)  # IN

    Returns
    -------
    int
        0, or :data:`NONFINITE`, :data:`FRACTIONAL` (negative or fractional counts),
        :data:`WEIGHTS` (weights below rows, or without rows) or :data:`MOMENTS`
        (sums of y^2 smaller than the sums imply): the first of them any row fails.
    """
    m, nc = counts.shape
    ns = sums.shape[1]
    weighted = nc < STAT_TASK
    first = STAT_TASK - nc  # the first task column in ``sums``
    # Every test on every row, the verdicts or-ed without a branch (the first test any row
    # fails is the smallest of those codes, whatever the row): the same verdict as stopping
    # at each fault (tests/test_check_kernels.py); one fit's 160 calls at 1,400 rows (1.5 M
    # rows) replayed: 6.6 ms of CPU instead of 17.1 (least of 15; medians 8.5 and 19.8).
    finite, frac, weights, moments = True, False, False, False
    for i in range(m):
        for c in range(nc):
            v = np.float64(counts[i, c])
            finite &= np.isfinite(v)
            frac |= (v < 0) | (v != np.floor(v))
        for c in range(ns):
            finite &= np.isfinite(sums[i, c])
        rows = np.float64(counts[i, STAT_ROWS])
        weight = _col(counts, sums, i, STAT_WEIGHT)
        if weighted:
            weights |= (weight < 0) | ((rows == 0) & (weight != 0))
        else:
            weights |= (rows > weight) | ((rows == 0) != (weight == 0))
        for c in range(first, ns - 1, 2):
            s1, s2 = sums[i, c], sums[i, c + 1]
            moments |= (s2 < 0) | (s1 * s1 > weight * s2 * (1 + 1e-7) + 1e-9)
    return _verdict(finite, frac, weights, moments)


@numba.njit(nogil=True, cache=True, inline="always")
def _verdict(finite, frac, weights, moments):  # type: ignore[no-untyped-def]
    """The code of the first test failed, in the tests' order (0: none)."""
    if not finite:
        return NONFINITE
    if frac:
        return FRACTIONAL
    if weights:
        return WEIGHTS
    return MOMENTS if moments else 0


@numba.njit(nogil=True, cache=True)
def regression_reply_problems(counts, sums, cand_off, cand, cols, node_of_pair, node_stats):  # type: ignore[no-untyped-def]
    """Round B's three regression checks in one pass over a client's increments.

    Returns (:func:`regression_stats_problem`, :func:`counts_above_nodes`,
    :func:`sums_above_kernel`) of the same arguments: the same tests in the same
    expressions, each row read once (the twin is those three calls).

    Parameters
    ----------
    counts : ndarray of int or float64, shape (m, n_count)  # IN
    sums : ndarray of float64, shape (m, n_stats - n_count)  # IN
    cand_off : ndarray of int64, shape (n_pairs + 1,)  # IN
    cand : ndarray of int64, shape (m,)  # IN: increasing candidate of each increment
    cols : ndarray of int64, shape (n_cols,)  # IN: :func:`sums_above_nodes`' columns
    node_of_pair : ndarray of int64, shape (n_pairs,)  # IN
    node_stats : ndarray of float64, shape (n_nodes, n_stats)  # IN
    """
    m, nc = counts.shape
    ns = sums.shape[1]
    n_pairs = cand_off.shape[0] - 1
    n_cols = cols.shape[0]
    if nc == 2 and ns == 2 and n_cols == 1 and cols[0] == 3:  # the usual reply, unrolled
        return _reply_problems_4(counts, sums, cand_off, cand, node_of_pair, node_stats)
    weighted = nc < STAT_TASK
    first = STAT_TASK - nc
    finite, frac, weights, moments = True, False, False, False
    over_counts, over_sums = False, False
    acc_c = np.zeros(nc)
    acc_s = np.zeros(n_cols)
    p = -1
    for r in range(m + 1):
        q = p
        if r < m:
            c = cand[r]
            q = max(p, 0)
            while q + 1 < n_pairs and cand_off[q + 1] <= c:
                q += 1
        if q != p or r == m:
            if p >= 0:  # the pair's totals against its node's
                nd = node_of_pair[p]
                for j in range(nc):
                    over_counts |= acc_c[j] > node_stats[nd, j]
                slack = 1.0 + 8.0 * 2.0**-52 * max(node_stats[nd, STAT_ROWS], 1.0)
                for j in range(n_cols):
                    over_sums |= acc_s[j] > node_stats[nd, cols[j]] * slack
            for j in range(nc):
                acc_c[j] = 0.0
            for j in range(n_cols):
                acc_s[j] = 0.0
            p = q
        if r == m:
            break
        for j in range(nc):
            v = np.float64(counts[r, j])
            acc_c[j] += v
            finite &= np.isfinite(v)
            frac |= (v < 0) | (v != np.floor(v))
        for j in range(n_cols):
            acc_s[j] += sums[r, cols[j] - nc]
        for j in range(ns):
            finite &= np.isfinite(sums[r, j])
        rows = np.float64(counts[r, STAT_ROWS])
        weight = _col(counts, sums, r, STAT_WEIGHT)
        if weighted:
            weights |= (weight < 0) | ((rows == 0) & (weight != 0))
        else:
            weights |= (rows > weight) | ((rows == 0) != (weight == 0))
        for j in range(first, ns - 1, 2):
            s1, s2 = sums[r, j], sums[r, j + 1]
            moments |= (s2 < 0) | (s1 * s1 > weight * s2 * (1 + 1e-7) + 1e-9)
    return _verdict(finite, frac, weights, moments), over_counts, over_sums


@numba.njit(nogil=True, cache=True)
def _reply_problems_4(counts, sums, cand_off, cand, node_of_pair, node_stats):  # type: ignore[no-untyped-def]
    # regression_reply_problems of (rows, weight | sum w y, sum w y^2) rows, in locals.
    m = counts.shape[0]
    n_pairs = cand_off.shape[0] - 1
    finite, frac, weights, moments = True, False, False, False
    over_counts, over_sums = False, False
    a0 = a1 = a3 = 0.0
    p = -1
    for r in range(m + 1):
        q = p
        if r < m:
            c = cand[r]
            q = max(p, 0)
            while q + 1 < n_pairs and cand_off[q + 1] <= c:
                q += 1
        if q != p or r == m:
            if p >= 0:
                nd = node_of_pair[p]
                over_counts |= (a0 > node_stats[nd, 0]) | (a1 > node_stats[nd, 1])
                slack = 1.0 + 8.0 * 2.0**-52 * max(node_stats[nd, STAT_ROWS], 1.0)
                over_sums |= a3 > node_stats[nd, 3] * slack
            a0 = a1 = a3 = 0.0
            p = q
        if r == m:
            break
        rows, weight = np.float64(counts[r, 0]), np.float64(counts[r, 1])
        s1, s2 = sums[r, 0], sums[r, 1]
        a0 += rows
        a1 += weight
        a3 += s2
        finite &= np.isfinite(rows) & np.isfinite(weight) & np.isfinite(s1) & np.isfinite(s2)
        frac |= (rows < 0) | (rows != np.floor(rows)) | (weight < 0) | (weight != np.floor(weight))
        weights |= (rows > weight) | ((rows == 0) != (weight == 0))
        moments |= (s2 < 0) | (s1 * s1 > weight * s2 * (1 + 1e-7) + 1e-9)
    return _verdict(finite, frac, weights, moments), over_counts, over_sums


def regression_stats_problem_numpy(counts: NDArray[Any], sums: NDArray[np.float64]) -> int:
    """NumPy twin of :func:`regression_stats_problem`."""
    stats = np.hstack([counts.astype(np.float64), sums])
    n_count = counts.shape[1]
    if not np.all(np.isfinite(stats)):
        return NONFINITE
    cnt = stats[:, :n_count]
    if np.any(cnt < 0) or np.any(cnt != np.round(cnt)):
        return FRACTIONAL
    rows, weight = stats[:, STAT_ROWS], stats[:, STAT_WEIGHT]
    if n_count < STAT_TASK:
        if np.any(weight < 0) or np.any((rows == 0) & (weight != 0)):
            return WEIGHTS
    elif np.any(rows > weight) or np.any((rows == 0) != (weight == 0)):
        return WEIGHTS
    s1, s2 = stats[:, STAT_TASK::2], stats[:, STAT_TASK + 1 :: 2]
    if np.any(s2 < 0) or np.any(s1 * s1 > weight[:, None] * s2 * (1 + 1e-7) + 1e-9):
        return MOMENTS
    return 0


@numba.njit(nogil=True, cache=True)
def counts_above_nodes(cand_off, cand, counts, node_of_pair, node_stats):  # type: ignore[no-untyped-def]
    """Whether a pair's increments count more than its node holds (a column's sum).

    Parameters
    ----------
    cand_off : ndarray of int64, shape (n_pairs + 1,)  # IN
    cand : ndarray of int64, shape (m,)  # IN: increasing candidate of each increment
    counts : ndarray of int, shape (m, n_count)  # IN
    node_of_pair : ndarray of int64, shape (n_pairs,)  # IN
    node_stats : ndarray of float64, shape (n_nodes, >= n_count)  # IN
    """
    n_pairs = cand_off.shape[0] - 1
    nc = counts.shape[1]
    acc = np.zeros(nc)
    p = -1
    for r in range(cand.shape[0]):
        c = cand[r]
        q = max(p, 0)
        while q + 1 < n_pairs and cand_off[q + 1] <= c:
            q += 1
        if q != p:
            if p >= 0:
                for j in range(nc):
                    if acc[j] > node_stats[node_of_pair[p], j]:
                        return True
            acc[:] = 0.0
            p = q
        for j in range(nc):
            acc[j] += np.float64(counts[r, j])
    if p >= 0:
        for j in range(nc):
            if acc[j] > node_stats[node_of_pair[p], j]:
                return True
    return False


def sums_above_nodes(
    cand_off: NDArray[np.int64],
    cand: NDArray[np.int64],
    sums: NDArray[Any],
    n_count: int,
    task: str,
    node_of_pair: NDArray[np.int64],
    node_stats: NDArray[np.float64],
) -> bool:
    """Whether a pair's increments of a sum that never falls add up to more than its node's.

    Those sums: the weight (with sample weights, a float column), ``w y^2`` (squared
    error), Poisson's ``w y``, class weights. Increments are differences of running sums
    over the node's rows, so their total may pass the node's by rounding: ``8 n u`` of it
    is allowed (``n`` the node's rows, ``u`` the unit roundoff). ``sums``: the statistics'
    columns from ``n_count`` on; ``cand`` is increasing. One pass
    (:func:`sums_above_kernel`); NumPy twin :func:`sums_above_nodes_numpy`.
    """
    cols = sum_columns(n_count, task, node_stats.shape[1])
    if cand.size == 0 or cols.size == 0:
        return False
    return bool(
        sums_above_kernel(
            cand_off,
            np.asarray(cand, dtype=np.int64),
            np.ascontiguousarray(sums, dtype=np.float64),
            cols,
            n_count,
            node_of_pair,
            np.ascontiguousarray(node_stats, dtype=np.float64),
        )
    )


def sum_columns(n_count: int, task: str, n_columns: int) -> NDArray[np.int64]:
    """The full-layout columns :func:`sums_above_nodes` checks."""
    every = {"regression": slice(STAT_TASK + 1, None, 2), "poisson": slice(STAT_TASK, None, 2)}
    task_cols = np.arange(n_columns)[every.get(task, slice(STAT_TASK, None))]
    return np.concatenate([np.arange(n_count, STAT_TASK), task_cols]).astype(np.int64)


@numba.njit(nogil=True, cache=True)
def sums_above_kernel(cand_off, cand, sums, cols, n_count, node_of_pair, node_stats):  # type: ignore[no-untyped-def]
    """:func:`sums_above_nodes`: each pair's increments summed in order, then compared.

    Parameters
    ----------
    cand_off : ndarray of int64, shape (n_pairs + 1,)  # IN
    cand : ndarray of int64, shape (m,)  # IN: increasing candidate of each increment
    sums : ndarray of float64, shape (m, n_stats - n_count)  # IN
    cols : ndarray of int64, shape (n_cols,)  # IN: full-layout columns checked
    n_count : int  # IN: ``sums``' first column is column ``n_count`` of the layout
    node_of_pair : ndarray of int64, shape (n_pairs,)  # IN
    node_stats : ndarray of float64, shape (n_nodes, n_stats)  # IN
    """
    n_pairs = cand_off.shape[0] - 1
    n_cols = cols.shape[0]
    acc = np.zeros(n_cols)
    p = -1
    for r in range(cand.shape[0] + 1):
        q = p
        if r < cand.shape[0]:
            c = cand[r]
            q = max(p, 0)
            while q + 1 < n_pairs and cand_off[q + 1] <= c:
                q += 1
        if q != p or r == cand.shape[0]:
            if p >= 0:  # the pair's totals against its node's (the twin's expression)
                node = node_stats[node_of_pair[p]]
                slack = 1.0 + 8.0 * 2.0**-52 * max(node[STAT_ROWS], 1.0)
                for j in range(n_cols):
                    if acc[j] > node[cols[j]] * slack:
                        return True
            for j in range(n_cols):
                acc[j] = 0.0
            p = q
        if r < cand.shape[0]:
            for j in range(n_cols):
                acc[j] += sums[r, cols[j] - n_count]
    return False


def sums_above_nodes_numpy(
    cand_off: NDArray[np.int64],
    cand: NDArray[np.int64],
    sums: NDArray[Any],
    n_count: int,
    task: str,
    node_of_pair: NDArray[np.int64],
    node_stats: NDArray[np.float64],
) -> bool:
    """NumPy twin of :func:`sums_above_nodes` (a segmented sum)."""
    cols = sum_columns(n_count, task, node_stats.shape[1])
    if cand.size == 0 or cols.size == 0:
        return False
    # Each pair's first increment and its pair (arrays of pairs, none of increments).
    first = np.searchsorted(cand, cand_off, side="left")
    has = np.flatnonzero(first[1:] > first[:-1])
    starts = first[has]
    total = np.add.reduceat(np.asarray(sums, dtype=np.float64)[:, cols - n_count], starts, axis=0)
    node = node_stats[node_of_pair[has]]
    slack = 1.0 + 8.0 * 2.0**-52 * np.maximum(node[:, STAT_ROWS : STAT_ROWS + 1], 1.0)
    return bool(np.any(total > node[:, cols] * slack))


def _increments_at_nodes(
    counts: NDArray[Any],
    sums: NDArray[Any],
    cand: NDArray[np.int64],
    cand_off: NDArray[np.int64],
    node_of_pair: NDArray[np.int64],
    node_stats: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each increment's statistics (counts, then sums, as float64) and its node's summary."""
    stats = np.hstack([counts.astype(np.float64), np.asarray(sums, dtype=np.float64)])
    pair = np.searchsorted(cand_off, cand, side="right") - 1
    return stats, node_stats[node_of_pair[pair]]


def moments_within_rounding(
    counts: NDArray[Any],
    sums: NDArray[np.float64],
    cand: NDArray[np.int64],
    cand_off: NDArray[np.int64],
    node_of_pair: NDArray[np.int64],
    node_stats: NDArray[np.float64],
) -> bool:
    """Cauchy-Schwarz on Round B increments, within the rounding of a running sum.

    A client's increments are differences of its running sums over a node's rows (in row
    order), so each carries the rounding of sums as large as the node's: up to about
    ``n u S`` for ``n`` rows, unit roundoff ``u`` and ``S`` the node's sum of ``w y^2``
    (its sum of ``|w y|`` at most ``sqrt(W S)``). Targets over many orders of magnitude
    make that visible (a bin of small targets after large ones); the slack below is four
    times the bound, tiny against any sum a client could use it to fake.
    """
    stats, node = _increments_at_nodes(counts, sums, cand, cand_off, node_of_pair, node_stats)
    n = np.maximum(node[:, STAT_ROWS], 1.0)[:, None]
    big2 = np.abs(node[:, STAT_TASK + 1 :: 2])
    slack2 = 4.0 * n * 2.0**-52 * big2
    slack1 = 4.0 * n * 2.0**-52 * np.sqrt(np.abs(node[:, STAT_WEIGHT])[:, None] * big2)
    s1, s2 = stats[:, STAT_TASK::2], stats[:, STAT_TASK + 1 :: 2]
    weight = stats[:, STAT_WEIGHT][:, None]
    low = np.maximum(np.abs(s1) - slack1, 0.0)
    return bool(
        np.all(s2 >= -slack2) and np.all(low * low <= weight * (s2 + slack2) * (1 + 1e-7) + 1e-9)
    )


def poisson_within_rounding(
    counts: NDArray[Any],
    sums: NDArray[np.float64],
    cand: NDArray[np.int64],
    cand_off: NDArray[np.int64],
    node_of_pair: NDArray[np.int64],
    node_stats: NDArray[np.float64],
) -> bool:
    """Jensen's bound on Poisson increments (``t >= s log(s / w)``), within their rounding.

    As :func:`moments_within_rounding`: each increment is a difference of running sums over
    the node's rows, so ``s = sum w y`` and ``t = sum w y log y`` each carry up to about
    ``n u`` of the node's sum of their terms' sizes (``S``, and at most ``T + 2 W / e``
    for ``t``: the terms of ``y < 1`` add up to no less than ``-W / e``), and ``w`` (with
    sample weights) ``n u W``. The slack is four times that; ``s log(s / w)`` is taken at
    its least over ``s``'s interval (it is convex, least at ``s = w / e``). Before, the
    bound allowed ``1e-7`` of itself only, and an honest client whose targets spanned many
    orders of magnitude was refused.
    """
    stats, node = _increments_at_nodes(counts, sums, cand, cand_off, node_of_pair, node_stats)
    eps = 4.0 * np.maximum(node[:, STAT_ROWS], 1.0)[:, None] * 2.0**-52
    w_node = np.abs(node[:, STAT_WEIGHT])[:, None]
    slack_s = eps * np.abs(node[:, STAT_TASK::2])
    slack_t = eps * (np.abs(node[:, STAT_TASK + 1 :: 2]) + 2.0 * w_node / np.e)
    s, t = stats[:, STAT_TASK::2], stats[:, STAT_TASK + 1 :: 2]
    weight = stats[:, STAT_WEIGHT][:, None]
    low = np.maximum(s - slack_s, 0.0)
    s_star = np.clip(weight / np.e, low, s + slack_s)
    bound = s_log_mean(s_star, np.broadcast_to(weight, s_star.shape))
    # The weight's rounding: d/dw of s log(s / w) is -s / w.
    slack_w = (s + slack_s) * eps * w_node / np.maximum(weight, np.finfo(np.float64).tiny)
    slack = slack_t + np.minimum(slack_w, np.abs(bound) + slack_t)
    return bool(np.all(s >= -slack_s) and np.all(t >= bound - slack - 1e-7 * np.abs(bound) - 1e-9))


def top_l_problem(feats: NDArray[Any], gains: NDArray[Any], d: int) -> str | None:
    """What is wrong with a client's Top-L shortlists (rows = its nodes), or None.

    ``feats``: its L best features per node (-1: none), each in ``[0, d)`` at most once;
    ``gains``: their local gains, finite where a feature is named. NumPy only.
    """
    named = feats >= 0
    if np.any(feats < -1) or np.any(feats >= d):
        return f"names a feature outside [0, {d}) (or below the -1 of none)"
    ranked = np.sort(feats, axis=1)
    if np.any((np.diff(ranked, axis=1) == 0) & (ranked[:, 1:] >= 0)):
        return "names a feature twice in a node"
    if not np.all(np.isfinite(gains[named])):
        return "holds a gain that is not finite"
    return None


def counts_above_nodes_numpy(
    cand_off: NDArray[np.int64],
    cand: NDArray[np.int64],
    counts: NDArray[Any],
    node_of_pair: NDArray[np.int64],
    node_stats: NDArray[np.float64],
) -> bool:
    """NumPy twin of :func:`counts_above_nodes` (a bincount per count column)."""
    pair_of = np.searchsorted(cand_off, cand, side="right") - 1
    n_pairs = cand_off.size - 1
    pairs = pair_of[np.flatnonzero(np.diff(pair_of, prepend=-1))]  # sorted: first of each
    node = node_of_pair[pairs]
    for j in range(counts.shape[1]):
        per_pair = np.bincount(pair_of, weights=counts[:, j], minlength=n_pairs)
        if np.any(per_pair[pairs] > node_stats[node, j]):
            return True
    return False


def dense_sketch_problem(sketch: NDArray[np.float64], gone: NDArray[np.bool_]) -> int:
    """Sketch rows (shape (n, B)) finite and sorted, except rows all NaN.

    The check on dense rows, in NumPy: the reference that the server's check over runs
    (:func:`~.sketch_runs.runs_problem` and its twin) is compared with in the tests.
    ``gone`` (OUT): the rows holding a NaN. Returns 0, :data:`NONFINITE` (a row not all
    NaN holds NaN or infinity) or :data:`UNSORTED`.
    """
    gone[:] = np.isnan(sketch).any(axis=1)
    empty = np.isnan(sketch).all(axis=1)
    if not np.all(np.isfinite(sketch[~empty])):
        return NONFINITE
    rest = sketch[~empty]
    if rest.shape[1] > 1 and np.any(np.diff(rest, axis=1) < 0):
        return UNSORTED
    return 0


@numba.njit(nogil=True, cache=True)
def cumulative_problem(cum, off, edges, total, tol):  # type: ignore[no-untyped-def]
    """The first edge whose pooled cumulative counts fail a test, or -1 (``"secure"``).

    One pass for :func:`~.secure_checks.check_pooled_cumulative`: a row fails when a
    value is not finite, its count (column 0) is not whole, a value lies outside
    ``[-tol, total + tol]`` of its segment, or (after an edge of the same segment that is
    not larger) a value falls by more than ``tol``.

    Parameters
    ----------
    cum : ndarray of float64, shape (off[-1], n_cols)  # IN: per edge
    off : ndarray of int64, shape (n_segments + 1,)  # IN
    edges : ndarray of float64, shape (off[-1],)  # IN
    total : ndarray of float64, shape (n_segments, n_cols)  # IN
    tol : ndarray of float64, shape (n_cols,)  # IN
    """
    n_cols = cum.shape[1]
    for g in range(off.shape[0] - 1):
        for i in range(off[g], off[g + 1]):
            bad = False
            for c in range(n_cols):
                v = cum[i, c]
                if not np.isfinite(v) or v < -tol[c] or v > total[g, c] + tol[c]:
                    bad = True
                elif i > off[g] and edges[i] >= edges[i - 1] and v - cum[i - 1, c] < -tol[c]:
                    bad = True
            if bad or cum[i, 0] != np.rint(cum[i, 0]):
                return i
    return -1


def cumulative_problem_numpy(
    cum: NDArray[np.float64],
    off: NDArray[np.int64],
    edges: NDArray[np.float64],
    total: NDArray[np.float64],
    tol: NDArray[np.float64],
) -> int:
    """NumPy twin of :func:`cumulative_problem` (the check's former formulation)."""
    seg = np.repeat(np.arange(off.size - 1), np.diff(off))
    rows = cum[:, 0]
    bad = ~np.isfinite(cum).all(axis=1) | (rows != np.round(rows))
    bad |= ((cum < -tol) | (cum > total[seg] + tol)).any(axis=1)
    # Where the edges increase within a segment, so do the counts (ties: equal edges).
    step = (seg[1:] == seg[:-1]) & (edges[1:] >= edges[:-1])
    falls = step[:, None] & (np.diff(cum, axis=0) < -tol)
    bad[1:] |= falls.any(axis=1)
    return int(np.flatnonzero(bad)[0]) if bad.any() else -1


#: What :func:`summary_problem` found (0: nothing), in the order it reports them.
TOO_MANY_ROWS, ROOT_WEIGHT, ABOVE_PARENT, NOT_ADDING = 1, 2, 3, 4


@numba.njit(nogil=True, cache=True)
def summary_problem(  # type: ignore[no-untyped-def]
    summary, n_count, n_samples, root, n_draws, bootstrap, regression, rtol, parent, siblings
):
    """The first failed test of a client's node summaries against what the server knows.

    One pass for ``checks.check_summaries`` (after the statistics' own check): rows above
    the client's samples (:data:`TOO_MANY_ROWS`), a root weight other than 0 or the draws
    (:data:`ROOT_WEIGHT`; not with sample weights), a node above its parent on the count
    columns or the last column under regression (:data:`ABOVE_PARENT`), two children not
    adding up to their parent (:data:`NOT_ADDING`). Each test covers every row before the
    next is reported.

    Parameters
    ----------
    summary : ndarray of float64, shape (n, n_stats)  # IN
    n_count : int  # IN: count columns
    n_samples, n_draws : float  # IN
    root : ndarray of bool, shape (n,)  # IN
    bootstrap, regression : bool  # IN
    rtol : float  # IN: the last column's slack against the parent's
    parent : ndarray of float64, shape (n, n_stats) or (0, n_stats)  # IN: each node's
        parent's statistics (rows of roots unused); (0, ...): no parents known
    siblings : ndarray of int64, shape (n,) or (0,)  # IN: each node's sibling, -1: none;
        (0,): none known
    """
    n, n_stats = summary.shape
    weighted = n_count < STAT_TASK
    has_parent = parent.shape[0] > 0
    has_sib = siblings.shape[0] > 0
    bad = np.zeros(5, dtype=np.bool_)
    for i in range(n):
        rows = summary[i, STAT_ROWS]
        weight = summary[i, STAT_WEIGHT]
        if rows > n_samples:
            bad[TOO_MANY_ROWS] = True
        if root[i]:
            if not weighted:
                ok = weight == 0 or (weight == n_draws if bootstrap else weight == rows)
                if not bootstrap:
                    ok = ok and (rows == 0 or rows == n_draws)
                if not ok:
                    bad[ROOT_WEIGHT] = True
            continue
        if not has_parent:
            continue
        for c in range(n_count):
            if summary[i, c] > parent[i, c]:
                bad[ABOVE_PARENT] = True
        last = n_stats - 1
        if regression and summary[i, last] > parent[i, last] * (1 + rtol) + rtol:
            bad[ABOVE_PARENT] = True
        if has_sib and siblings[i] > i:
            j = siblings[i]
            for c in range(n_count):
                if summary[i, c] + summary[j, c] != parent[i, c]:
                    bad[NOT_ADDING] = True
    for code in range(1, 5):
        if bad[code]:
            return code
    return 0


def summary_problem_numpy(
    summary: NDArray[np.float64],
    n_count: int,
    n_samples: float,
    root: NDArray[np.bool_],
    n_draws: float,
    bootstrap: bool,
    regression: bool,
    rtol: float,
    parent: NDArray[np.float64],
    siblings: NDArray[np.int64],
) -> int:
    """NumPy twin of :func:`summary_problem` (the former whole-array checks)."""
    rows, weight = summary[:, STAT_ROWS], summary[:, STAT_WEIGHT]
    if np.any(rows > n_samples):
        return TOO_MANY_ROWS
    at_root = weight[root]
    ok = (at_root == 0) | (at_root == n_draws if bootstrap else at_root == rows[root])
    if not bootstrap:
        ok &= (rows[root] == 0) | (rows[root] == n_draws)
    if n_count >= STAT_TASK and not np.all(ok):
        return ROOT_WEIGHT
    if parent.shape[0] == 0:
        return 0
    child = ~root
    p = parent[child]
    cols = slice(0, n_count)
    if np.any(summary[child, cols] > p[:, cols]) or (
        regression and np.any(summary[child, -1] > p[:, -1] * (1 + rtol) + rtol)
    ):
        return ABOVE_PARENT
    if siblings.shape[0] > 0:
        both = np.flatnonzero(child & (siblings > np.arange(siblings.size)))
        total = summary[both, cols] + summary[siblings[both], cols]
        if np.any(total != parent[both, cols]):
            return NOT_ADDING
    return 0
