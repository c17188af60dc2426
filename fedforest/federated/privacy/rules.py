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

from ..kernel_cache import inner_kernel
from .group_merges import isolate_counts, safe_groups_counts

#: The candidate "value known | missing" (``server.missing.MISSING_SPLIT``; privacy/ sits
#: below the server and cannot import it).
MISSING_SPLIT = float(np.finfo(np.float64).max)

__all__ = [
    "ancestor_safe",
    "ancestor_safe_numpy",
    "default_min_rows",
    "group_categories",
    "groups_isolate",
    "groups_isolate_loop",
    "safe_groups",
    "safe_groups_loop",
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
    out : ndarray of float64, shape (n_pairs * B,)  # OUT
        The kept edges, pair after pair (``out_off`` delimits them): at most ``B - 1``
        quantile edges and the missing edge per pair.
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
    """A node's rows with value <= x, for x on its grid (increasing) or outside (lo, hi].

    Above ``hi`` its known rows: where the feature has missing values its grid ends with
    ``MISSING_SPLIT``, whose count leaves the missing rows out (``total`` counted them:
    the ancestors' thresholds above the node then hid sums of a few rows, 2026-12-03).
    """
    known = rows[g1 - 1] if g1 > g0 and grid[g1 - 1] == MISSING_SPLIT else total
    return _rows_at(rows, g0, _first_above(grid, g0, g1, x), x, lo, hi, known)


@inner_kernel
def _first_above(grid, a, b, x):
    """The first edge of ``grid[a:b]`` > x, by bisection (np.searchsorted's side="right")."""
    while a < b:
        mid = a + ((b - a) >> 1)
        if not x < grid[mid]:
            a = mid + 1
        else:
            b = mid
    return a


@inner_kernel
def _rows_at(rows, g0, a, x, lo, hi, known):
    """The rows up to the edge before ``a``: none at or below ``lo``, ``known`` at ``hi`` up."""
    got = rows[a - 1] if a > g0 else 0.0
    if x <= lo:
        got = 0.0
    if x >= hi:
        got = known
    return got


@inner_kernel
def _isolates(cc, ce, outside_below, outside_above, near, min_rows):
    # Whether the node's sum at a candidate (``cc`` rows below it) and an ancestor's at a
    # threshold (``ce``: the node's rows below it) isolate 1 to min_rows - 1 rows, below
    # (``S_A(<= e) - S_C(<= e')``) or above (``S_A(> e) - S_C(> e')``, from the released
    # totals): a difference that adds up rows on one side only and too few of them.
    b = abs(cc - ce)
    if near:
        # The parent: the node's rows between the two none or at least min_rows, so that
        # no combination with the sibling's sums isolates fewer either; when none, the
        # parent's rows outside the node below and above the threshold likewise.
        if b > 0 and b < min_rows:
            return True
        return b == 0 and (
            (outside_below > 0 and outside_below < min_rows)
            or (outside_above > 0 and outside_above < min_rows)
        )
    # A grandparent or above: the differences themselves.
    if cc <= ce:  # below: outside_below + b, one-signed; above: outside_above - b
        one_sided, signed = outside_below + b, outside_above
    else:
        one_sided, signed = outside_above + b, outside_below
    if one_sided > 0 and one_sided < min_rows:
        return True
    if b == 0 and signed > 0 and signed < min_rows:
        return True
    return signed == 0 and b > 0 and b < min_rows


@inner_kernel
def largest_runs(cand_off, anc_off):
    """The most candidates and the most ancestors' releases of any one pair (scratch sizes)."""
    most_c, most_a = 0, 0
    for p in range(cand_off.size - 1):
        most_c = max(most_c, cand_off[p + 1] - cand_off[p])
        most_a = max(most_a, anc_off[p + 1] - anc_off[p])
    return most_c, most_a


@numba.njit(nogil=True, cache=True)
def ancestor_safe(
    cands, cand_off, grid, grid_off, rows, anc_thr, anc_rows, anc_total, anc_near, anc_off,
    lo, hi, total, min_rows, out,
):  # fmt: skip
    """Which candidates of each pair stay safe against its ancestors' releases on the feature.

    An ancestor ``A`` released its cumulative sum at ``e`` (``anc_thr``; ``anc_rows``: ``A``'s
    rows with ``x <= e``; ``anc_total``: all its rows, whose sum it released too); this
    node ``C`` (inside ``A``) would release its own at ``e'``. Below, their difference is
    the sum over ``A``'s rows outside ``C`` below ``e`` and ``C``'s rows in ``(e', e]``,
    less ``C``'s rows in ``(e, e']``; above (totals less cumulative sums) the same with
    ``A``'s rows outside ``C`` above ``e``. A few rows are isolated when one part is empty
    and the other holds fewer than ``min_rows``. The parent (``anc_near``) is held to more:
    the node's rows between ``e'`` and ``e`` number none or at least ``min_rows`` (else
    the parent's sum less both children's isolates them). Every count is exact: the
    thresholds given are on the node's grid, or outside its path bounds.

    Parameters
    ----------
    cands : ndarray of float64  # IN
        Each pair's candidates, pair after pair (``cand_off``, shape (n_pairs + 1,)).
    grid, rows : ndarray of float64  # IN
        Each pair's grid (increasing: the ancestors' thresholds were merged into it) and the
        node's pooled rows with ``x <= edge``, pair after pair (``grid_off``).
    anc_thr, anc_rows, anc_total, anc_near : ndarray of float64  # IN
        Each pair's ancestors' thresholds, their rows below them, their rows, and 1 for the
        parent's (0 further up), pair after pair (``anc_off``).
    lo, hi, total : ndarray of float64, shape (n_pairs,)  # IN
        The node's path bounds on the feature and its pooled rows.
    min_rows : int  # IN
    out : ndarray of bool, shape (cands.size,)  # OUT
        True where the candidate is safe (every candidate of a pair without an ancestor's
        release or without a grid).
    """
    most_c, most_a = largest_runs(cand_off, anc_off)
    cc, ce = np.empty(most_c), np.empty(most_a)
    for p in range(cand_off.size - 1):
        c0, c1 = cand_off[p], cand_off[p + 1]
        for c in range(c0, c1):
            out[c] = True
        g0, g1 = grid_off[p], grid_off[p + 1]
        a0, a1 = anc_off[p], anc_off[p + 1]
        if g1 == g0 or a1 == a0:
            continue
        rows_below_all(grid, rows, g0, g1, cands, c0, c1, lo[p], hi[p], total[p], cc)
        rows_below_all(grid, rows, g0, g1, anc_thr, a0, a1, lo[p], hi[p], total[p], ce)
        t, m = total[p], min_rows
        ancestor_pair(cc, c0, c1, ce, anc_rows, anc_total, anc_near, a0, a1, t, m, out)


@numba.njit(nogil=True, cache=True)
def rows_below_all(grid, rows, g0, g1, x, x0, x1, lo, hi, total, out):
    """``out[k - x0]``: one pair's rows with value <= ``x[k]``, ``k`` in ``[x0, x1)``.

    :func:`_rows_below` of each; on a grid that never decreases, a value not below the one
    before it is looked for from that one's place on (a walk: the same first edge > x).
    """
    walk = True
    for i in range(g0 + 1, g1):
        walk = walk and grid[i] >= grid[i - 1]
    a = g0
    known = rows[g1 - 1] if g1 > g0 and grid[g1 - 1] == MISSING_SPLIT else total
    for k in range(x0, x1):
        v = x[k]
        if walk and k > x0 and v >= x[k - 1]:
            while a < g1 and not v < grid[a]:
                a += 1
        else:  # the first value, one below the one before, or a grid out of order
            a = _first_above(grid, g0, g1, v)
        out[k - x0] = _rows_at(rows, g0, a, v, lo, hi, known)


@inner_kernel
def ancestor_pair(cc, c0, c1, ce, anc_rows, anc_total, anc_near, a0, a1, total, min_rows, out):
    """:func:`ancestor_safe` on one pair, the rows below found.

    ``cc``: its rows below each candidate (from ``c0``); ``ce``: below each ancestor's
    threshold (from ``a0``).
    """
    ordered = True  # cc finite and never decreasing
    for c in range(c1 - c0):
        ordered = ordered and np.isfinite(cc[c]) and (c == 0 or cc[c] >= cc[c - 1])
    for a in range(a0, a1):
        e = ce[a - a0]
        below = anc_rows[a] - e
        above = (anc_total[a] - anc_rows[a]) - (total - e)
        near, first = anc_near[a] > 0, c0
        quick = ordered and np.isfinite(e) and below >= 0.0 and above >= 0.0
        if quick:
            # Rows outside C none or more: only |cc - ce| < min_rows can isolate, a run
            # of the candidates (cc never decreases) found from its first.
            b = c1
            while first < b:
                mid = first + ((b - first) >> 1)
                if e - cc[mid - c0] >= min_rows:
                    first = mid + 1
                else:
                    b = mid
        for c in range(first, c1):
            if quick and cc[c - c0] - e >= min_rows:
                break
            if _isolates(cc[c - c0], e, below, above, near, min_rows):
                out[c] = False


def _rows_below_numpy(
    grid: NDArray[np.float64],
    rows: NDArray[np.float64],
    x: NDArray[np.float64],
    bounds: tuple[float, float, float],
) -> NDArray[np.float64]:
    """NumPy twin of :func:`_rows_below` on each of ``x`` (the twins' one; an empty grid too)."""
    lo, hi, total = bounds
    j = np.searchsorted(grid, x, side="right") - 1
    got = np.where(j >= 0, rows[np.maximum(j, 0)] if grid.size else 0.0, 0.0)
    got = np.where(x <= lo, 0.0, got)
    return np.asarray(np.where(x >= hi, known_rows(grid, rows, total), got))


def known_rows(grid: NDArray[np.float64], rows: NDArray[np.float64], total: float) -> float:
    """A node's rows whose value is known (NumPy twins): its count at ``MISSING_SPLIT``."""
    return float(rows[-1]) if grid.size and grid[-1] == MISSING_SPLIT else float(total)


def _isolates_numpy(
    cc: NDArray[np.float64],
    ce: float,
    below: float,
    above: float,
    near: bool,
    m: int,
) -> NDArray[np.bool_]:
    b = np.abs(cc - ce)
    few = lambda x: (x > 0) & (x < m)  # noqa: E731
    if near:
        return np.asarray(few(b) | ((b == 0) & (few(np.float64(below)) | few(np.float64(above)))))
    low = cc <= ce
    one_sided = np.where(low, below, above) + b
    signed = np.where(low, above, below)
    return np.asarray(few(one_sided) | ((b == 0) & few(signed)) | ((signed == 0) & few(b)))


def ancestor_safe_numpy(
    cands: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    rows: NDArray[np.float64],
    anc_thr: NDArray[np.float64],
    anc_rows: NDArray[np.float64],
    anc_total: NDArray[np.float64],
    anc_near: NDArray[np.float64],
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
            for ca, ta, near, ce in zip(anc_rows[a], anc_total[a], anc_near[a], c_e, strict=True):
                below = ca - ce
                above = (ta - ca) - (total[p] - ce)
                ok &= ~_isolates_numpy(c_c, ce, below, above, bool(near > 0), min_rows)
        out[cand_off[p] : cand_off[p + 1]] = ok


def groups_isolate(
    a_rows: NDArray[np.float64],
    a_groups: NDArray[np.int32],
    c_rows: NDArray[np.float64],
    c_groups: NDArray[np.int32],
    min_rows: int,
    max_component: int = 14,
) -> bool:
    """Whether an ancestor's category groups and a node's isolate rows by differencing.

    The same answer as :func:`groups_isolate_loop` (which says what is isolated, and how).
    Where every union's two parts are whole counts, 0 or more (whole, non-negative rows
    with the node's inside the ancestor's: every fit's case), the numba kernel
    ``group_merges.isolate_counts`` decides; otherwise the loop.
    """
    n_a, n_c = int(a_groups.max()) + 1, int(c_groups.max()) + 1
    if n_a <= 0 or n_c <= 0:
        return False
    # C's rows inside A's (every fit's case): every union's two parts are counts, 0 or more
    counted = _counted(c_rows, c_groups, [(a_rows, a_groups)], min_rows)
    if counted is not None:
        a_r, a_g = counted
        c_r, c_g = c_rows.astype(np.float64), c_groups.astype(np.int64)
        return bool(isolate_counts(a_r, a_g, c_r, c_g, n_a, n_c, int(min_rows), max_component))
    return groups_isolate_loop(a_rows, a_groups, c_rows, c_groups, min_rows, max_component)


def _whole(rows: NDArray[np.float64]) -> bool:
    """Every entry a whole number whose sums stay exact in float64."""
    return bool(np.all(np.floor(rows) == rows) and np.abs(rows).sum() < 2.0**53)


def groups_isolate_loop(
    a_rows: NDArray[np.float64],
    a_groups: NDArray[np.int32],
    c_rows: NDArray[np.float64],
    c_groups: NDArray[np.int32],
    min_rows: int,
    max_component: int = 14,
) -> bool:
    """:func:`groups_isolate`'s reference: one union at a time.

    Also its path where the kernel's counts do not hold: rows that are not whole numbers
    (noisy under ``"dp"``), whose sums depend on their order, or a node's rows not inside
    the ancestor's (never in a fit). Whether an ancestor's category groups and a node's
    isolate rows by differencing.

    The ancestor ``A`` released the sum over its rows in each of its groups (``a_groups``:
    each category's group, -1 for none; ``a_rows``: its rows per category), the node ``C``
    (inside ``A``) would release its own (``c_groups``, ``c_rows``); adding groups gives
    the sum over any union of them. ``S_A(U_A) - S_C(U_C)`` adds ``A``'s rows in ``U_A``
    that are not ``C``'s rows in ``U_C`` and subtracts ``C``'s rows in ``U_C`` outside
    ``U_A``: a few rows are isolated when one part is empty and the other holds 1 to
    ``min_rows - 1`` rows. Groups that share a category form components; each component's
    choices are enumerated (at most ``2 ** max_component``: a larger one counts as
    isolating) and their (added, subtracted) rows combined over components, keeping only
    the sums that can still isolate (one part 0, the other below ``min_rows``).
    """
    n_a, n_c = int(a_groups.max()) + 1, int(c_groups.max()) + 1
    if n_a <= 0 or n_c <= 0:
        return False
    parent = list(range(n_a + n_c))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for k in np.flatnonzero((a_groups >= 0) & (c_groups >= 0)):
        parent[root(int(a_groups[k]))] = root(n_a + int(c_groups[k]))
    components: dict[int, list[int]] = {}
    for i in range(n_a + n_c):
        components.setdefault(root(i), []).append(i)
    a_in = [a_groups == g for g in range(n_a)]
    c_in = [c_groups == g for g in range(n_c)]
    reach: set[tuple[float, float]] = {(0.0, 0.0)}
    for members in components.values():
        if len(members) > max_component:
            return True
        options: set[tuple[float, float]] = set()
        for pick in range(1, 1 << len(members)):
            u_a = np.zeros(a_groups.size, dtype=bool)
            u_c = np.zeros(c_groups.size, dtype=bool)
            for j, g in enumerate(members):
                if pick >> j & 1:
                    if g < n_a:
                        u_a |= a_in[g]
                    else:
                        u_c |= c_in[g - n_a]
            both = float(c_rows[u_a & u_c].sum())
            plus, minus = float(a_rows[u_a].sum()) - both, float(c_rows[u_c].sum()) - both
            if (plus == 0 and minus < min_rows) or (minus == 0 and plus < min_rows):
                options.add((plus, minus))
        reach |= {
            (p + q, r + s)
            for p, r in reach
            for q, s in options
            if (p + q == 0 and r + s < min_rows) or (r + s == 0 and p + q < min_rows)
        }
    return any((p == 0) != (r == 0) for p, r in reach)


def safe_groups(
    groups: NDArray[np.int32],
    rows: NDArray[np.float64],
    ancestors: list[tuple[NDArray[np.float64], NDArray[np.int32]]],
    min_rows: int,
) -> NDArray[np.int32]:
    """A node's category groups that no ancestor's groups isolate rows with (or none).

    :func:`safe_groups_loop`'s answer; where every ancestor's check takes
    :func:`groups_isolate`'s counted kernel (whole rows, the node's inside each
    ancestor's: every fit's case), the whole merging loop runs in one numba call
    (``group_merges.safe_groups_counts``), else the loop.
    """
    counted = _counted(rows, groups, ancestors, min_rows)
    if counted is not None:
        a_rows, a_groups = counted
        out = safe_groups_counts(
            groups.astype(np.int64),
            rows.astype(np.float64),
            a_rows,
            a_groups,
            np.arange(len(ancestors) + 1, dtype=np.int64) * groups.size,
            int(min_rows),
            14,
        )
        return out.astype(np.int32)
    return safe_groups_loop(groups, rows, ancestors, min_rows)


def _counted(
    rows: NDArray[np.float64],
    groups: NDArray[np.int32],
    ancestors: list[tuple[NDArray[np.float64], NDArray[np.int32]]],
    min_rows: int,
) -> tuple[NDArray[np.float64], NDArray[np.int64]] | None:
    """The ancestors' rows and groups end to end where every one takes the counted kernel.

    None where :func:`groups_isolate` would not take its counted kernel for some ancestor.
    Where it does, it does for every merge of ``groups`` too: a merge keeps which categories are
    grouped (``-1`` stays). Whole rows are checked on all ancestors' at once (their sum
    below ``2 ** 53``: stricter than each's, so never a kernel the check would refuse).
    """
    k = groups.size
    if not ancestors or k == 0 or rows.size != k or min_rows < 1:
        return None
    if any(a.size != k or g.size != k for a, g in ancestors):
        return None
    a_rows = np.concatenate([a for a, _ in ancestors]).astype(np.float64)
    a_groups = np.concatenate([g for _, g in ancestors]).astype(np.int64)
    c_rows = np.tile(rows, len(ancestors))
    both = (a_groups >= 0) & np.tile(groups >= 0, len(ancestors))
    if (
        _whole(a_rows)
        and _whole(rows)
        and (a_rows >= 0).all()
        and (rows >= 0).all()
        and (a_rows[both] >= c_rows[both]).all()
    ):
        return a_rows, a_groups
    return None


def safe_groups_loop(
    groups: NDArray[np.int32],
    rows: NDArray[np.float64],
    ancestors: list[tuple[NDArray[np.float64], NDArray[np.int32]]],
    min_rows: int,
) -> NDArray[np.int32]:
    """:func:`safe_groups`'s reference, one Python check per ancestor and merge tried.

    ``groups`` as :func:`group_categories` made them; while some ancestor's released
    groups (``ancestors``: its rows per category and groups) isolate rows with them
    (:func:`groups_isolate`), two of the node's groups are merged: the first pair, the
    smallest groups first, after whose merge no ancestor isolates rows, else the two
    smallest. With fewer than two groups left the feature releases nothing at the node
    (every entry -1).
    """
    groups = groups.copy()

    def unsafe(g: NDArray[np.int32]) -> bool:
        return any(
            groups_isolate(a_rows, a_groups, rows, g, min_rows) for a_rows, a_groups in ancestors
        )

    while groups.max() >= 1 and unsafe(groups):
        n = int(groups.max()) + 1
        size = np.bincount(groups[groups >= 0], weights=rows[groups >= 0], minlength=n)
        order = np.argsort(size, kind="stable")
        pairs = [(int(order[i]), int(order[j])) for j in range(n) for i in range(j)]
        best = pairs[0]
        for i, j in pairs:
            merged = _merge_groups(groups, i, j)
            if merged.max() < 1 or not unsafe(merged):
                best = (i, j)
                break
        groups = _merge_groups(groups, *best)
    if groups.max() < 1:
        groups[:] = -1
    return groups


def _merge_groups(groups: NDArray[np.int32], i: int, j: int) -> NDArray[np.int32]:
    """Groups ``i`` and ``j`` as one, renumbered 0 .. n - 2 in order."""
    keep, gone = min(i, j), max(i, j)
    out = np.where(groups == gone, keep, groups)
    return np.where(out > gone, out - 1, out).astype(np.int32)
