"""Minimum-aggregate rules: every released sum covers at least ``min_rows`` rows.

Candidates come from a node's pooled histogram on its grid: per (node, feature) at most
``B - 1`` grid edges near the pooled weighted quantiles ``b / B``, kept only where the rows
between consecutive kept edges, below the first and above the last, number at least
``min_rows``. So every Round B statistic (a cumulative sum at a candidate) differs from its
neighbours by a sum over at least ``min_rows`` rows, and every child of a split holds at
least ``min_rows`` rows. Categories with fewer than ``min_rows`` rows in a node are merged.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

#: The candidate "value known | missing" (``server.missing.MISSING_SPLIT``; privacy/ sits
#: below the server and cannot import it).
MISSING_SPLIT = float(np.finfo(np.float64).max)

__all__ = [
    "ancestor_safe",
    "ancestor_safe_numpy",
    "default_min_rows",
    "group_categories",
    "safe_from_ancestors",
    "secure_candidates",
    "secure_candidates_numpy",
]


def default_min_rows(min_samples_leaf: int) -> int:
    """The default ``min_aggregate_rows``: ``max(10, 2 * min_samples_leaf)``."""
    return max(10, 2 * int(min_samples_leaf))


@numba.njit(nogil=True, cache=True)
def secure_candidates(
    grid, grid_off, cum_rows, cum_w, node_rows, node_w, shift, n_bins, min_rows, out_off, out
):
    """Candidate thresholds of every pair from its pooled cumulative histogram.

    Parameters
    ----------
    grid : ndarray of float64, shape (n_edges,)  # IN
        Each pair's grid edges, increasing, pair after pair.
    grid_off : ndarray of int64, shape (n_pairs + 1,)  # IN
    cum_rows, cum_w : ndarray of float64, shape (n_edges,)  # IN
        Pooled distinct rows and weight with ``x <= edge``.
    node_rows, node_w : ndarray of float64, shape (n_pairs,)  # IN
        The pair's node totals.
    shift : ndarray of float64, shape (n_pairs,)  # IN
        In ``(0, 1]``: the quantile levels are ``(b - 1 + shift) / B``.
    n_bins : int  # IN
        ``B``: levels ``b / B``, ``b = 1..B-1``, when ``shift`` is 1.
    min_rows : int  # IN
    out_off : ndarray of int64, shape (n_pairs + 1,)  # OUT
    out : ndarray of float64, shape (n_pairs * (B - 1),)  # OUT
        The kept edges, pair after pair (``out_off`` delimits them).
    """
    n_pairs = grid_off.size - 1
    k = 0
    out_off[0] = 0
    for p in range(n_pairs):
        lo, hi = grid_off[p], grid_off[p + 1]
        total_rows = node_rows[p]
        total_w = node_w[p]
        last_rows = 0.0
        last_j = -1
        j = lo
        for b in range(1, n_bins):
            level = total_w * (b - 1 + shift[p]) / n_bins
            while j < hi and cum_w[j] < level:
                j += 1
            if j >= hi:
                break
            if j == last_j:
                continue
            if cum_rows[j] - last_rows >= min_rows and total_rows - cum_rows[j] >= min_rows:
                if k == out_off[p] or grid[j] > out[k - 1]:
                    out[k] = grid[j]
                    k += 1
                    last_rows = cum_rows[j]
                    last_j = j
        # A grid ending at MISSING_SPLIT (the feature has missing values): that candidate
        # too, when the rows since the last kept one and the missing rows pass the rule.
        j = hi - 1
        if hi > lo and grid[j] == MISSING_SPLIT and (k == out_off[p] or out[k - 1] < grid[j]):
            if cum_rows[j] - last_rows >= min_rows and total_rows - cum_rows[j] >= min_rows:
                out[k] = grid[j]
                k += 1
        out_off[p + 1] = k


def secure_candidates_numpy(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    cum_rows: NDArray[np.float64],
    cum_w: NDArray[np.float64],
    node_rows: NDArray[np.float64],
    node_w: NDArray[np.float64],
    shift: NDArray[np.float64],
    n_bins: int,
    min_rows: int,
    out_off: NDArray[np.int64],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`secure_candidates` (same arguments, same outputs)."""
    k = 0
    out_off[0] = 0
    for p in range(grid_off.size - 1):
        lo, hi = int(grid_off[p]), int(grid_off[p + 1])
        levels = node_w[p] * (np.arange(1, n_bins) - 1 + shift[p]) / n_bins
        picks = lo + np.searchsorted(cum_w[lo:hi], levels, side="left")
        last_rows, kept = 0.0, list[float]()
        for j in dict.fromkeys(int(v) for v in picks if v < hi):
            if cum_rows[j] - last_rows < min_rows or node_rows[p] - cum_rows[j] < min_rows:
                continue
            if kept and grid[j] <= kept[-1]:
                continue
            kept.append(float(grid[j]))
            last_rows = float(cum_rows[j])
        j = hi - 1
        if hi > lo and grid[j] == MISSING_SPLIT and (not kept or kept[-1] < grid[j]):
            if cum_rows[j] - last_rows >= min_rows and node_rows[p] - cum_rows[j] >= min_rows:
                kept.append(float(grid[j]))
        out[k : k + len(kept)] = kept
        k += len(kept)
        out_off[p + 1] = k


def group_categories(rows: NDArray[np.float64], min_rows: int) -> NDArray[np.int32]:
    """Groups of a node's categories such that every group holds at least ``min_rows`` rows.

    Categories with at least ``min_rows`` rows keep a group of their own; the others that
    have rows are merged into one group, which joins the smallest large category when it is
    still too small. Categories absent from the node get ``-1``. With fewer than two groups
    no categorical split is possible (every entry is then ``-1``).

    Parameters
    ----------
    rows : ndarray of float64, shape (n_categories,)
        Pooled distinct rows of each category in the node.
    """
    groups = np.full(rows.size, -1, dtype=np.int32)
    big = np.flatnonzero(rows >= min_rows)
    small = np.flatnonzero((rows > 0) & (rows < min_rows))
    groups[big] = np.arange(big.size, dtype=np.int32)
    if small.size:
        if rows[small].sum() >= min_rows:
            groups[small] = big.size
        elif big.size:
            groups[small] = groups[big[np.argmin(rows[big])]]
        # else: too few rows in all: nothing can be released per group
    n_groups = int(groups.max()) + 1 if (groups >= 0).any() else 0
    if n_groups < 2:
        groups[:] = -1
    return groups


@numba.njit(nogil=True, cache=True)
def _rows_below(grid, rows, g0, g1, x, lo, hi, total):
    """A node's rows with value <= x, for x on its grid (increasing) or outside (lo, hi]."""
    a, b = g0, g1
    while a < b:  # the first edge > x (np.searchsorted's side="right")
        mid = a + ((b - a) >> 1)
        if not x < grid[mid]:
            a = mid + 1
        else:
            b = mid
    got = rows[a - 1] if a > g0 else 0.0
    if x <= lo:
        got = 0.0
    if x >= hi:
        got = total
    return got


@numba.njit(nogil=True, cache=True)
def ancestor_safe(
    cands, cand_off, grid, grid_off, rows, anc_thr, anc_rows, anc_off, lo, hi, total, min_rows, out
):
    """Which candidates of each pair stay safe against its ancestors' releases on the feature.

    An ancestor ``A`` released its cumulative sum at ``e`` (``anc_thr``; ``anc_rows``: ``A``'s
    rows with ``x <= e``); this node ``C`` (inside ``A``) would release its own at ``e'``.
    For ``e' <= e`` their difference is a sum over ``count_A(e) - count_C(e')`` rows; for
    ``e' > e`` it is the sum over ``C``'s rows in ``(e, e']`` minus the sum over ``A``'s rows
    outside ``C`` below ``e``: a few rows are isolated when one part is empty and the other
    holds fewer than ``min_rows``. Every count is exact: the ancestors' thresholds are on
    the node's grid.

    Parameters
    ----------
    cands : ndarray of float64  # IN
        Each pair's candidates, pair after pair (``cand_off``, shape (n_pairs + 1,)).
    grid, rows : ndarray of float64  # IN
        Each pair's grid (increasing: the ancestors' thresholds were merged into it) and the
        node's pooled rows with ``x <= edge``, pair after pair (``grid_off``).
    anc_thr, anc_rows : ndarray of float64  # IN
        Each pair's ancestors' thresholds and their rows below them (``anc_off``).
    lo, hi, total : ndarray of float64, shape (n_pairs,)  # IN
        The node's path bounds on the feature and its pooled rows.
    min_rows : int  # IN
    out : ndarray of bool, shape (cands.size,)  # OUT
        True where the candidate is safe (every candidate of a pair without an ancestor's
        release or without a grid).
    """
    for p in range(cand_off.size - 1):
        c0, c1 = cand_off[p], cand_off[p + 1]
        for c in range(c0, c1):
            out[c] = True
        g0, g1 = grid_off[p], grid_off[p + 1]
        if g1 == g0:
            continue
        for a in range(anc_off[p], anc_off[p + 1]):
            ce = _rows_below(grid, rows, g0, g1, anc_thr[a], lo[p], hi[p], total[p])
            outside = anc_rows[a] - ce
            for c in range(c0, c1):
                cc = _rows_below(grid, rows, g0, g1, cands[c], lo[p], hi[p], total[p])
                # The node's rows between the candidate and the ancestor's threshold: none,
                # or at least min_rows, so that no combination with its siblings' sums
                # isolates fewer.
                between = abs(cc - ce)
                if not (between == 0 or between >= min_rows):
                    out[c] = False
                # The ancestor's rows outside this node below the threshold: with the
                # candidate in the threshold's gap, the two sums differ by exactly them.
                if between == 0 and outside >= 1 and outside < min_rows:
                    out[c] = False


def _rows_below_numpy(
    grid: NDArray[np.float64],
    rows: NDArray[np.float64],
    x: NDArray[np.float64],
    bounds: tuple[float, float, float],
) -> NDArray[np.float64]:
    lo, hi, total = bounds
    j = np.searchsorted(grid, x, side="right") - 1
    got = np.where(j >= 0, rows[np.clip(j, 0, max(grid.size - 1, 0))], 0.0)
    got = np.where(x <= lo, 0.0, got)
    return np.asarray(np.where(x >= hi, total, got))


def ancestor_safe_numpy(
    cands: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    rows: NDArray[np.float64],
    anc_thr: NDArray[np.float64],
    anc_rows: NDArray[np.float64],
    anc_off: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    total: NDArray[np.float64],
    min_rows: int,
    out: NDArray[np.bool_],
) -> None:
    """NumPy twin of :func:`ancestor_safe` (same arguments, same outputs)."""
    for p in range(cand_off.size - 1):
        c = cands[cand_off[p] : cand_off[p + 1]]
        ok = np.ones(c.size, dtype=bool)
        g = slice(int(grid_off[p]), int(grid_off[p + 1]))
        a = slice(int(anc_off[p]), int(anc_off[p + 1]))
        if c.size and grid_off[p + 1] > grid_off[p]:
            bounds = (float(lo[p]), float(hi[p]), float(total[p]))
            c_e = _rows_below_numpy(grid[g], rows[g], anc_thr[a], bounds)
            c_c = _rows_below_numpy(grid[g], rows[g], c, bounds)
            for ca, ce in zip(anc_rows[a], c_e, strict=True):
                between = np.abs(c_c - ce)
                ok &= (between == 0) | (between >= min_rows)
                outside = ca - ce
                ok &= ~((between == 0) & (outside >= 1) & (outside < min_rows))
        out[cand_off[p] : cand_off[p + 1]] = ok


def safe_from_ancestors(
    cands: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    rows: NDArray[np.float64],
    anc_thr: NDArray[np.float64],
    anc_rows: NDArray[np.float64],
    anc_off: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    total: NDArray[np.float64],
    min_rows: int,
) -> NDArray[np.bool_]:
    """Which candidates (of every pair, flat) are safe from the ancestors' releases.

    :func:`ancestor_safe` on its own output array; see there for the arguments.
    """
    out = np.ones(cands.size, dtype=np.bool_)
    ancestor_safe(
        cands, cand_off, grid, grid_off, rows, anc_thr, anc_rows, anc_off, lo, hi, total,
        int(min_rows), out,
    )  # fmt: skip
    return out
