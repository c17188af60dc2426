"""Under ``privacy="secure"``: the decoded sums checked against what the clients declared.

Secure aggregation hides who sent what, so a client's lie can only be caught in a sum:
these checks compare the pooled sums with the rows the clients declared at the
handshake and with the bounds any data has. A violation is a ``ValueError`` saying some
client lied (which one is hidden). Not under ``"dp"``: its sums are noisy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT
from . import check_kernels as ck

__all__ = [
    "ASINH_MAX",
    "check_pooled_cumulative",
    "check_pooled_groups",
    "check_pooled_moments",
    "check_pooled_rows",
    "check_rounds_agree",
    "refuse_small_bootstraps",
    "refuse_too_few_rows",
]


def _refuse(bad: NDArray[np.bool_], message: Callable[[int], str]) -> None:
    """Raise ``ValueError(message(i))`` for the first violation ``i`` of ``bad``, if any."""
    if bad.any():
        raise ValueError(message(int(np.flatnonzero(bad)[0])))


#: asinh of the largest float64: no client's asinh(x) or asinh(y) is larger in size.
ASINH_MAX = math.asinh(float(np.finfo(np.float64).max))


def check_pooled_moments(
    moments: NDArray[np.float64], n_rows: float, exact: NDArray[np.bool_], what: str
) -> None:
    """Under "secure": the grid round's pooled moments (rows, sum, sum of squares) of ``what``.

    Each row's count is whole, at most the ``n_rows`` the clients declared at the
    handshake (exactly that where ``exact``: no client declared a missing value there),
    and its sums are within what that many values of ``|asinh| <= ASINH_MAX`` can add up
    to. A violation means some client sent moments no data has, or a count other than its
    declared rows (secure aggregation hides which); left unchecked, the sums overflowed
    ``sinh`` (an ``OverflowError``) or silently set the grids and the targets' scale.
    """
    n, s1, s2 = moments.T
    tol = 1e-6 + 1e-9 * n  # the two-word fixed point's rounding, with room
    bad = (
        ~np.isfinite(moments).all(axis=1)
        | (n != np.round(n))
        | (n < 0)
        | (n > n_rows)
        | (exact & (n != n_rows))
        | (np.abs(s1) > ASINH_MAX * n + tol)
        | (s2 < -tol)
        | (s2 > ASINH_MAX**2 * n + tol)
    )
    _refuse(
        bad,
        lambda i: (
            f"The pooled moments of {what} of the grid round (row {i}: count {n[i]:.6g}, sums "
            f"{s1[i]:.6g}, {s2[i]:.6g}) are not those of at most the {n_rows:.0f} rows the clients "
            "declared: some client sent moments no data has, or a row count other than its "
            "handshake's n_samples (secure aggregation hides which)."
        ),
    )


def check_pooled_rows(stats: NDArray[np.float64], n_rows: float, what: str) -> None:
    """Under "secure": pooled statistics count whole rows in ``[0, n_rows]``, weight >= 0.

    ``n_rows`` is the rows the clients declared at the handshake; every client encodes
    counts exactly and weights >= 0, so a violation means some client lied (secure
    aggregation hides which); unchecked, a saturated masked word made negative counts and
    the trees silently single leaves.
    """
    rows, weight = stats[:, STAT_ROWS], stats[:, STAT_WEIGHT]
    bad = ~np.isfinite(stats).all(axis=1) | (rows != np.round(rows)) | (rows < 0)
    bad |= (rows > n_rows) | (weight < 0)
    _refuse(
        bad,
        lambda i: (
            f"The pooled sums of {what} count {rows[i]:.6g} rows of weight {weight[i]:.6g} "
            f"(row {i}), not whole rows within the {n_rows:.0f} the clients declared with a "
            "weight >= 0: some client lied (secure aggregation hides which)."
        ),
    )


def check_pooled_cumulative(
    cum: NDArray[np.float64],
    off: NDArray[np.int64],
    edges: NDArray[np.float64],
    total: NDArray[np.float64],
    what: str,
    weight_tol: float = 0.0,
) -> None:
    """Under "secure": pooled cumulative counts at each segment's grid edges.

    ``cum`` holds, per grid edge, the rows (and, with a second column, the weight) at or
    left of it, one segment ``off[i]:off[i + 1]`` per (node, feature) pair or feature;
    ``total`` the segment's rows (and weight), already checked: the node's pooled summary,
    or the rows the clients declared. Every count is whole and within ``[0, total]``, the
    weight within ``[0, total weight]`` (``weight_tol``: the clients' fixed-point rounding),
    and both never decrease along increasing edges. A violation means some client sent
    counts no rows have (secure aggregation hides which); left unchecked, a saturated
    masked word set the candidates and the minimum-rows rule, and the trees silently
    became single leaves.
    """
    n_cols = 1 if cum.ndim == 1 else cum.shape[1]
    cum = np.ascontiguousarray(cum, dtype=np.float64).reshape(-1, n_cols)
    total = np.ascontiguousarray(total, dtype=np.float64).reshape(-1, n_cols)
    tol = np.zeros(n_cols)
    tol[1:] = weight_tol
    off = np.asarray(off, dtype=np.int64)
    edges = np.ascontiguousarray(edges, dtype=np.float64)
    if off.size - 1 == total.shape[0] and off[-1] == cum.shape[0] == edges.size:
        i = ck.cumulative_problem(cum, off, edges, total, tol)  # one pass
    else:  # shapes the kernel does not take: NumPy's broadcasting (or its error)
        i = ck.cumulative_problem_numpy(cum, off, edges, total, tol)
    if i >= 0:
        seg = int(np.searchsorted(off, i, side="right")) - 1
        rows, bound = cum[:, 0], total[seg, 0]
        raise ValueError(
            f"The pooled counts of {what} (segment {seg}, edge {i - int(off[seg])}: "
            f"{rows[i]:.6g} rows at or left of {edges[i]:.6g}) are not whole counts that grow "
            f"from 0 to at most the segment's {bound:.6g} rows: some client sent counts no "
            "rows have (secure aggregation hides which)."
        )


def check_pooled_groups(
    stats: NDArray[np.float64],
    group_node: NDArray[np.int64],
    group_pair: NDArray[np.int64],
    node_stats: NDArray[np.float64],
    what: str,
    weight_tol: float = 0.0,
) -> None:
    """Under "secure": a pair's category groups hold at most its node's rows and weight.

    ``stats`` (one row per group, already checked by :func:`check_pooled_rows`) belongs to
    node ``group_node`` and pair ``group_pair`` (non-decreasing); ``node_stats`` are the
    nodes' pooled summaries. Every group and the sum of a pair's groups count at most the
    node's rows and weight: a group is part of the node. A violation means some client
    sent counts no rows have (secure aggregation hides which).
    """
    cols = [STAT_ROWS, STAT_WEIGHT]
    node = node_stats[:, cols]
    parts = stats[:, cols]
    tol = np.array([0.0, weight_tol])
    bad = (parts > node[group_node] + tol).any(axis=1)
    if group_pair.size:
        start = np.flatnonzero(np.r_[True, group_pair[1:] != group_pair[:-1]])
        sums = np.add.reduceat(parts, start, axis=0)
        over = (
            sums > node[group_node[start]] + tol * (np.diff(np.r_[start, parts.shape[0]]))[:, None]
        ).any(axis=1)
        bad[start[over]] = True
    _refuse(
        bad,
        lambda i: (
            f"The pooled sums of {what} (group row {i}, node {group_node[i]}) hold more rows "
            f"or weight than their node's {node[group_node[i], 0]:.6g} rows of weight "
            f"{node[group_node[i], 1]:.6g}: some client sent counts no "
            "rows have (secure aggregation hides which)."
        ),
    )


def check_rounds_agree(b_rows: NDArray[np.float64], a_rows: NDArray[np.float64], what: str) -> None:
    """Under "secure": Round B's pooled row counts equal those Round A's counts imply.

    Round B's left statistics are taken at candidates that are edges of Round A's node
    grids, and its category groups are unions of categories Round A counted, over the same
    rows of the same nodes: the pooled rows at or left of a candidate (in a group) must be
    exactly those Round A's pooled counts give there. A difference means some client
    counted other rows in the two rounds (secure aggregation hides which); unchecked, the
    gains and the children's sizes came from rows the rule never saw.
    """
    _refuse(
        b_rows != a_rows,
        lambda i: (
            f"The pooled sums of {what} count {b_rows[i]:.6g} rows at entry {i}, where Round "
            f"A's pooled counts give {a_rows[i]:.6g}: some client counted other rows in the "
            "two rounds (secure aggregation hides which)."
        ),
    )


#: Said after the number: a user who never set ``min_aggregate_rows`` sees where it came from.
_DEFAULT_NOTE = (
    " (unless set, max(10, 2 * min_samples_leaf), a fractional min_samples_leaf counted in rows)"
)


def refuse_too_few_rows(n_rows: float, min_rows: int) -> None:
    """Under "secure": a federation of fewer than ``min_rows`` rows in all is refused.

    The first grid round's moments of ``asinh(x)`` and ``asinh(y)`` run over all ``n``
    rows: with fewer than ``m`` they are a sum over too few rows (one row: its values back,
    exactly; measured 2026-12-03, a fit of one row ran and its root summary gave the
    target again). Such a forest could not split anyway (no node of fewer than ``2 m``
    rows does).
    """
    if n_rows < min_rows:
        raise ValueError(
            f'privacy="secure": the clients hold n_samples = {n_rows:.0f} rows in all, fewer than '
            f"min_aggregate_rows = {min_rows}{_DEFAULT_NOTE}; the sums released would cover "
            "fewer rows than that. Pool more rows, lower min_aggregate_rows (and "
            'min_samples_leaf), or use privacy="none" where the server may see the rows.'
        )


def refuse_small_bootstraps(draws: int, min_rows: int) -> None:
    """Under "secure": a tree's bootstrap of fewer than ``m`` draws in all is refused.

    A tree's root summary is a sum over its in-bag rows, decoded before any rule can act.
    With a tiny ``max_samples`` (each client draws ``round(f n_k)``, at least one) a tree
    could hold one row: its root summary gave that row's target exactly (measured
    2026-12-03, one client of 50 rows, ``max_samples=1``, 10 trees: every leaf a training
    target). The bar is the one :func:`refuse_too_few_rows` sets for the federation's
    rows (the default bootstrap draws them all); ``m`` draws or more can still repeat rows
    and leave a root of fewer than ``m`` distinct rows, a sum over several of them.
    """
    if draws < min_rows:
        raise ValueError(
            f'privacy="secure": a tree\'s bootstrap draws {draws} rows in all (max_samples), '
            f"fewer than min_aggregate_rows = {min_rows}{_DEFAULT_NOTE}: its root would be a "
            "sum over too few rows. Raise max_samples (or pool more rows), lower "
            'min_aggregate_rows, or use privacy="none" where the server may see the rows.'
        )
