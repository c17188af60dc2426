"""The minimum-rows rule for sums of three and four releases: intervals against intervals.

An ancestor ``A`` released its cumulative sums at its thresholds ``e`` and its total, so
any two of them give its sum over an interval ``J`` of its thresholds (and -inf, +inf);
a node ``C`` inside it releases its own at its candidates, and any two of those give its
sum over an interval ``K``. ``S_A(J) - S_C(K)`` covers ``A``'s rows outside ``C`` in ``J``
and ``C``'s rows in one interval but not the other: with ``K`` holding the same rows of
``C`` as ``J`` (the ancestors' thresholds join the node's grid, so its quantile
candidates often pick them) that is ``A``'s rows outside ``C`` between two thresholds, a
few rows where ``C`` holds most of ``A``'s there. The rule between two sums
(``rules.ancestor_safe``) covers ``J`` and ``K`` reaching -inf or +inf; this one every
interval.

The node's candidates are taken in increasing order and one is kept only when no
interval it ends (from -inf or any candidate kept before it, and from it to +inf) makes
such a difference with any interval of any ancestor's: what stays has no such pair, and
a candidate is dropped only for candidates that are released. (Dropping, in one pass,
every candidate that some pair of the unfiltered candidates flagged lost accuracy where
nodes hold few candidates: docs/privacy-findings.md.)
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from .. import kernel_views
from ..kernel_cache import cache_depends_on, inner_kernel
from ..kernel_views import borrowed, keep_alive
from ..threads import thread_map, work_ranges
from . import rules
from .rules import _rows_below_numpy, ancestor_pair, largest_runs, rows_below_all

__all__ = [
    "both_rules",
    "interval_checks",
    "interval_checks_numpy",
    "interval_safe",
    "interval_safe_numpy",
    "safe_from_ancestors",
]

#: :func:`safe_from_ancestors` runs its kernels in threads, on ranges of pairs, from this
#: many candidates on (below it one thread's call is shorter than a thread's start).
PARALLEL_CANDIDATES = 20_000


@inner_kernel
def _isolates(out_j, r_lo, r_hi, k_lo, k_hi, min_rows):
    # S_A(J) - S_C(K): J holds ``out_j`` rows of A outside C and C's rows (r_lo, r_hi]
    # (positions in C's sorted rows), K C's rows (k_lo, k_hi]. A few rows are isolated
    # when one side is empty and the other holds 1 to min_rows - 1 rows.
    overlap = max(0.0, min(r_hi, k_hi) - max(r_lo, k_lo))
    plus = out_j + (r_hi - r_lo - overlap)
    minus = k_hi - k_lo - overlap
    return (minus == 0 and plus > 0 and plus < min_rows) or (
        plus == 0 and minus > 0 and minus < min_rows
    )


@inner_kernel
def _interval_unsafe(er, ob, n_e, k_lo, k_hi, min_rows, ordered):
    # Whether C's interval (k_lo, k_hi] isolates rows with some interval of one ancestor's
    # (``er``: C's rows below -inf, each threshold, +inf; ``ob``: A's rows outside C below
    # them). Ends of K more than min_rows - 1 rows of C from J's differ by min_rows or more.
    # ``ordered``: er and ob never decrease, so once an end is min_rows past K's (or J
    # holds min_rows outside C) every later one is too: the loops stop there.
    for i in range(n_e + 1):
        if abs(k_lo - er[i]) >= min_rows:
            if ordered and er[i] > k_lo:
                break
            continue
        for j in range(i + 1, n_e + 2):
            out_j = ob[j] - ob[i]
            if out_j >= min_rows or abs(k_hi - er[j]) >= min_rows:
                if ordered and (out_j >= min_rows or er[j] > k_hi):
                    break
                continue
            if _isolates(out_j, er[i], er[j], k_lo, k_hi, min_rows):
                return True
    return False


@inner_kernel
def _near_unsafe(er, ob, n_e, ks, u0, u1, k_hi, min_rows):
    # _interval_unsafe(er, ob, n_e, ks[u], k_hi, min_rows, True) for any u in [u0, u1),
    # with er, ob finite and never decreasing and ks finite and never decreasing: the same
    # (u, i, j) tested, found from the ends instead of from every K. J's upper end j lies
    # within min_rows - 1 of k_hi (a run of er), its lower end i below j with fewer than
    # min_rows rows outside C between them (a run down from j), K's lower end within
    # min_rows - 1 of er[i] (a run of ks).
    a, b = 1, n_e + 2
    while a < b:  # the first j with k_hi - er[j] < min_rows (er never decreases)
        mid = a + ((b - a) >> 1)
        if k_hi - er[mid] >= min_rows:
            a = mid + 1
        else:
            b = mid
    for j in range(a, n_e + 2):
        if abs(k_hi - er[j]) >= min_rows:
            break
        for i in range(j - 1, -1, -1):
            out_j = ob[j] - ob[i]
            if out_j >= min_rows:
                break
            lo_u, hi_u = u0, u1
            while lo_u < hi_u:  # the first u with er[i] - ks[u] < min_rows
                mid = lo_u + ((hi_u - lo_u) >> 1)
                if er[i] - ks[mid] >= min_rows:
                    lo_u = mid + 1
                else:
                    hi_u = mid
            for u in range(lo_u, u1):
                if abs(ks[u] - er[i]) >= min_rows:
                    break
                if _isolates(out_j, er[i], er[j], ks[u], k_hi, min_rows):
                    return True
    return False


@numba.njit(nogil=True, cache=True)
def interval_safe(
    cands, cand_off, grid, grid_off, rows, anc_thr, anc_rows, anc_total, anc_off,
    lo, hi, total, min_rows, out,
):  # fmt: skip
    """Clear ``out`` for candidates that an interval of an ancestor's would isolate rows with.

    Parameters
    ----------
    cands : ndarray of float64  # IN
        Each pair's candidates, increasing, pair after pair (``cand_off``, shape
        (n_pairs + 1,)).
    grid, rows : ndarray of float64  # IN
        Each pair's grid (increasing; it holds every ancestor's threshold inside the node's
        path bounds) and the node's pooled rows with ``x <= edge``, pair after pair
        (``grid_off``).
    anc_thr, anc_rows, anc_total : ndarray of float64  # IN
        Each pair's ancestors' releases on the feature, pair after pair (``anc_off``): the
        threshold, the ancestor's rows below it, its rows. One ancestor's are consecutive
        and increasing; two ancestors never hold the same rows (every child of a split
        holds at least ``min_rows``), so ``anc_total`` tells them apart.
    lo, hi, total : ndarray of float64, shape (n_pairs,)  # IN
        The node's path bounds on the feature and its pooled rows.
    min_rows : int  # IN
    out : ndarray of bool, shape (cands.size,)  # IN, OUT
        False for candidates dropped already (by the rule between two sums): they are not
        released and constrain nothing; set to False for those this rule drops.
    """
    n_pairs = cand_off.size - 1
    most_c, most_a = largest_runs(cand_off, anc_off)
    cc, ce = np.empty(most_c), np.empty(most_a)
    buffers = _buffers(most_c, most_a)
    for p in range(n_pairs):
        c0, c1 = cand_off[p], cand_off[p + 1]
        g0, g1 = grid_off[p], grid_off[p + 1]
        a0, a1 = anc_off[p], anc_off[p + 1]
        if c1 == c0 or g1 == g0 or a1 == a0:
            continue
        rows_below_all(grid, rows, g0, g1, cands, c0, c1, lo[p], hi[p], total[p], cc)
        rows_below_all(grid, rows, g0, g1, anc_thr, a0, a1, lo[p], hi[p], total[p], ce)
        t, m = total[p], min_rows
        interval_pair(cc, c0, c1, ce, anc_rows, anc_total, a0, a1, t, m, out, *buffers)


@inner_kernel
def _buffers(most_c, most_a):
    # interval_pair's scratch for pairs of at most most_c candidates and most_a releases.
    er = np.empty(3 * most_a)
    return (
        er, np.empty(er.size), np.empty(most_a + 1, dtype=np.int64),
        np.empty(most_a, dtype=np.bool_), np.empty(most_c + 2),
    )  # fmt: skip


@inner_kernel
def interval_pair(
    cc, c0, c1, ce, anc_rows, anc_total, a0, a1, total, min_rows, out,
    er, ob, start, ordered, kept,
):  # fmt: skip
    """:func:`interval_safe` on one pair, the rows below found.

    ``cc``: its rows below each candidate (from ``c0``); ``ce``: below each ancestor's
    threshold (from ``a0``); ``er`` to ``kept``: scratch (:func:`_buffers`).
    """
    # Per ancestor (a run of equal totals): C's rows below -inf, its thresholds, +inf
    # (``er``) and its rows outside C below them (``ob``), at ``a + k`` for entry ``a``;
    # ``ordered``: er, ob finite and never decreasing.
    n_anc = 0
    a, at = a0, 0
    while a < a1:
        b = a
        while b < a1 and anc_total[b] == anc_total[a]:
            b += 1
        start[n_anc] = at
        n_anc += 1
        er[at], ob[at] = 0.0, 0.0
        for i in range(b - a):
            er[at + 1 + i] = ce[a - a0 + i]
            ob[at + 1 + i] = anc_rows[a + i] - er[at + 1 + i]
        er[at + b - a + 1], ob[at + b - a + 1] = total, anc_total[a] - total
        up = np.isfinite(er[at + b - a + 1]) and np.isfinite(ob[at + b - a + 1])
        for i in range(at, at + b - a + 1):
            up = up and er[i + 1] >= er[i] and ob[i + 1] >= ob[i]
        ordered[n_anc - 1] = up
        at += b - a + 2
        a = b
    start[n_anc] = at
    kept[0] = 0.0  # C's rows below -inf and each kept candidate
    # np.int64, not the literal 1 (or 0 below): numba would compile _near_unsafe for the
    # literal's type too (type inference resolves the call before unifying n_kept).
    n_kept, zero = np.int64(1), np.int64(0)
    sorted_kept = True  # kept finite and never decreasing
    for c in range(c0, c1):
        if not out[c]:
            continue
        kc = cc[c - c0]
        quick = sorted_kept and np.isfinite(kc)
        kept[n_kept] = kc  # (kc, total) as the run [n_kept, n_kept + 1) of kept
        bad = False
        for q in range(n_anc):
            s, n_e = start[q], start[q + 1] - start[q] - 2
            e, o = er[s : start[q + 1]], ob[s : start[q + 1]]
            up = ordered[q]
            if up and quick:
                bad = _near_unsafe(e, o, n_e, kept, n_kept, n_kept + 1, total, min_rows)
                bad = bad or _near_unsafe(e, o, n_e, kept, zero, n_kept, kc, min_rows)
            else:
                bad = _interval_unsafe(e, o, n_e, kc, total, min_rows, up)
                for u in range(n_kept):
                    if bad:
                        break
                    bad = _interval_unsafe(e, o, n_e, kept[u], kc, min_rows, up)
            if bad:
                break
        if bad:
            out[c] = False
        else:
            sorted_kept = quick and kc >= kept[n_kept - 1]
            n_kept += 1


@numba.njit(nogil=True, cache=True)
def both_rules(
    cands, cand_off, grid, grid_off, rows, anc_thr, anc_rows, anc_total, anc_near, anc_off,
    lo, hi, total, min_rows, out,
):  # fmt: skip
    """:func:`~fedforest.federated.privacy.rules.ancestor_safe` then :func:`interval_safe`.

    The same arguments as the first and the same ``out`` as both in turn, pair after pair,
    each pair's rows below its candidates and thresholds found once for both.
    """
    n_pairs = cand_off.size - 1
    most_c, most_a = largest_runs(cand_off, anc_off)
    cc, ce = np.empty(most_c), np.empty(most_a)
    er, ob, start, ordered, kept = _buffers(most_c, most_a)
    # Views numba does not reference-count (kernel_views.borrowed): the arguments, and
    # the scratch kept alive to the end; the pair's helpers take them per candidate.
    scratch = (cc, ce, er, ob, start, ordered, kept)
    cc, ce, er, ob = borrowed(cc), borrowed(ce), borrowed(er), borrowed(ob)
    start, ordered, kept = borrowed(start), borrowed(ordered), borrowed(kept)
    cands, cand_off, grid = borrowed(cands), borrowed(cand_off), borrowed(grid)
    grid_off, rows, anc_thr = borrowed(grid_off), borrowed(rows), borrowed(anc_thr)
    anc_rows, anc_total = borrowed(anc_rows), borrowed(anc_total)
    anc_near, anc_off, lo = borrowed(anc_near), borrowed(anc_off), borrowed(lo)
    hi, total, out = borrowed(hi), borrowed(total), borrowed(out)
    for p in range(n_pairs):
        c0, c1 = cand_off[p], cand_off[p + 1]
        for c in range(c0, c1):
            out[c] = True
        g0, g1 = grid_off[p], grid_off[p + 1]
        a0, a1 = anc_off[p], anc_off[p + 1]
        if c1 == c0 or g1 == g0 or a1 == a0:
            continue
        rows_below_all(grid, rows, g0, g1, cands, c0, c1, lo[p], hi[p], total[p], cc)
        rows_below_all(grid, rows, g0, g1, anc_thr, a0, a1, lo[p], hi[p], total[p], ce)
        t, m = total[p], min_rows
        ancestor_pair(cc, c0, c1, ce, anc_rows, anc_total, anc_near, a0, a1, t, m, out)
        interval_pair(
            cc, c0, c1, ce, anc_rows, anc_total, a0, a1, t, m, out, er, ob, start, ordered, kept
        )  # fmt: skip
    keep_alive(scratch)


def interval_safe_numpy(
    cands: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    rows: NDArray[np.float64],
    anc_thr: NDArray[np.float64],
    anc_rows: NDArray[np.float64],
    anc_total: NDArray[np.float64],
    anc_off: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    total: NDArray[np.float64],
    min_rows: int,
    out: NDArray[np.bool_],
) -> None:
    """NumPy twin of :func:`interval_safe` (same arguments, same outputs)."""
    m = min_rows
    for p in range(cand_off.size - 1):
        c0, c1 = int(cand_off[p]), int(cand_off[p + 1])
        g = slice(int(grid_off[p]), int(grid_off[p + 1]))
        if c1 == c0 or g.stop == g.start or anc_off[p + 1] == anc_off[p]:
            continue
        t = float(total[p])
        bounds = (float(lo[p]), float(hi[p]), t)
        a_all = np.arange(int(anc_off[p]), int(anc_off[p + 1]))
        runs = np.split(a_all, np.flatnonzero(np.diff(anc_total[a_all]) != 0) + 1)
        ancestors = []
        for a in runs:
            er = _rows_below_numpy(grid[g], rows[g], anc_thr[a], bounds)
            ob = np.concatenate([[0.0], anc_rows[a] - er, [anc_total[a[0]] - t]])
            ancestors.append((np.concatenate([[0.0], er, [t]]), ob))
        kc_all = _rows_below_numpy(grid[g], rows[g], cands[c0:c1], bounds)
        kept = [0.0]
        for c in np.flatnonzero(out[c0:c1]):
            kc = float(kc_all[c])
            ks = [(u, kc) for u in kept] + [(kc, t)]
            if any(_unsafe_numpy(er, ob, k, m) for er, ob in ancestors for k in ks):
                out[c0 + c] = False
            else:
                kept.append(kc)


def _unsafe_numpy(
    er: NDArray[np.float64], ob: NDArray[np.float64], k: tuple[float, float], m: int
) -> bool:
    i, j = np.triu_indices(er.size, 1)
    near = (np.abs(k[0] - er[i]) < m) & (np.abs(k[1] - er[j]) < m) & (ob[j] - ob[i] < m)
    i, j = i[near], j[near]
    overlap = np.maximum(0.0, np.minimum(er[j], k[1]) - np.maximum(er[i], k[0]))
    plus = ob[j] - ob[i] + er[j] - er[i] - overlap
    minus = k[1] - k[0] - overlap
    few = lambda x: (x > 0) & (x < m)  # noqa: E731
    return bool(np.any(((minus == 0) & few(plus)) | ((plus == 0) & few(minus))))


@numba.njit(nogil=True, cache=True)
def interval_checks(thr_rows, total, off, b_thr, b_rows, b_total, b_off, thr, rows, min_rows, out):
    """Which ancestor's thresholds the interval rule needs (the others join no grid).

    ``A``'s rows outside the node ``C`` in an interval ``J`` of ``A``'s thresholds only
    grow with ``J``, and ``C``'s rows in ``J`` are at most ``C``'s (``rows``) and at most
    those of ``B`` in the smallest interval of ``B``'s thresholds around ``J``, where
    ``B`` is an ancestor of ``C`` below ``A`` whose cumulative rows at its thresholds the
    server holds (``b_*``; none: an empty segment). A threshold both of whose neighbouring
    intervals (to the next thresholds, -inf, +inf) hold at least ``min_rows`` rows of
    ``A`` outside ``C`` by these bounds ends no interval the rule could find isolating;
    the others are needed (``out`` set True; it is only ever set, never cleared).

    Parameters
    ----------
    thr_rows, total : ndarray of float64  # IN
        Per pair, its ancestor ``A``'s releases (``off``, shape (n_pairs + 1,)): ``A``'s
        rows with ``x <= e``, increasing, and ``A``'s rows. ``thr`` : the thresholds.
    b_thr, b_rows, b_total : ndarray of float64  # IN
        Per pair, ``B``'s releases (``b_off``): thresholds, rows below them, ``B``'s rows.
    rows : ndarray of float64, shape (n_pairs,)  # IN
        ``C``'s rows.
    min_rows : int  # IN
    out : ndarray of bool, shape (thr_rows.size,)  # IN, OUT
    """
    for p in range(off.size - 1):
        a0, a1 = off[p], off[p + 1]
        b0, b1 = b_off[p], b_off[p + 1]
        if a1 == a0:
            continue
        ok_prev = True  # the interval below the current threshold is wide enough
        for i in range(a0, a1 + 1):
            a_lo = thr_rows[i - 1] if i > a0 else 0.0
            a_hi = thr_rows[i] if i < a1 else total[a0]
            c_max = rows[p]
            if b1 > b0:
                # B's rows in the smallest interval of its thresholds around (x, y].
                r_lo, r_hi = 0.0, b_total[b0]
                if i > a0:
                    x = thr[i - 1]
                    for j in range(b0, b1):
                        if b_thr[j] <= x:
                            r_lo = b_rows[j]
                if i < a1:
                    y = thr[i]
                    for j in range(b1 - 1, b0 - 1, -1):
                        if b_thr[j] >= y:
                            r_hi = b_rows[j]
                c_max = min(c_max, r_hi - r_lo)
            ok = a_hi - a_lo - c_max >= min_rows
            if i > a0 and not (ok_prev and ok):
                out[i - 1] = True
            ok_prev = ok


def interval_checks_numpy(
    thr_rows: NDArray[np.float64],
    total: NDArray[np.float64],
    off: NDArray[np.int64],
    b_thr: NDArray[np.float64],
    b_rows: NDArray[np.float64],
    b_total: NDArray[np.float64],
    b_off: NDArray[np.int64],
    thr: NDArray[np.float64],
    rows: NDArray[np.float64],
    min_rows: int,
    out: NDArray[np.bool_],
) -> None:
    """NumPy twin of :func:`interval_checks` (same arguments, same outputs)."""
    for p in range(off.size - 1):
        a = slice(int(off[p]), int(off[p + 1]))
        if a.stop == a.start:
            continue
        ends = np.concatenate([[0.0], thr_rows[a], [total[a.start]]])
        lo_x = np.concatenate([[-np.inf], thr[a]])
        hi_y = np.concatenate([thr[a], [np.inf]])
        c_max = np.full(ends.size - 1, float(rows[p]))
        b = slice(int(b_off[p]), int(b_off[p + 1]))
        if b.stop > b.start:
            bt, br = b_thr[b], b_rows[b]
            i_lo = np.searchsorted(bt, lo_x, side="right") - 1
            r_lo = np.where(i_lo >= 0, br[np.maximum(i_lo, 0)], 0.0)
            i_hi = np.searchsorted(bt, hi_y, side="left")
            r_hi = np.where(i_hi < bt.size, br[np.minimum(i_hi, bt.size - 1)], b_total[b.start])
            c_max = np.minimum(c_max, r_hi - r_lo)
        ok = np.diff(ends) - c_max >= min_rows
        out[a] |= ~(ok[:-1] & ok[1:])


def safe_from_ancestors(
    cands: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    rows: NDArray[np.float64],
    anc: NDArray[np.float64],
    anc_off: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    total: NDArray[np.float64],
    min_rows: int,
    n_threads: int = 1,
) -> NDArray[np.bool_]:
    """Which candidates (of every pair, flat) are safe from the ancestors' releases.

    :func:`~fedforest.federated.privacy.rules.ancestor_safe` (differences of two sums),
    then on the candidates it kept :func:`interval_safe` (an interval of an ancestor's
    thresholds less one of the node's candidates: three or four sums), on one output array
    (:func:`both_rules`: one kernel, each pair's rows below its candidates and thresholds
    found once for both); ``anc`` holds their ``anc_thr``, ``anc_rows``, ``anc_total`` and
    ``anc_near`` as columns. See there for the rest. Each pair's answer depends on that
    pair's arrays only: with ``n_threads`` > 1 (and :data:`PARALLEL_CANDIDATES` candidates),
    contiguous ranges of pairs run in threads (the kernel drops the GIL), each given its
    slices of the per-pair arrays (the offsets stay absolute): the same answers.
    """
    out = np.ones(cands.size, dtype=np.bool_)
    thr, below, rows_a, near = (np.ascontiguousarray(anc[:, j]) for j in range(4))
    m = int(min_rows)

    def run(pairs: tuple[int, int]) -> None:
        a, b = pairs
        c_off, g_off, a_off = cand_off[a : b + 1], grid_off[a : b + 1], anc_off[a : b + 1]
        bounds = (lo[a:b], hi[a:b], total[a:b])
        both_rules(
            cands, c_off, grid, g_off, rows, thr, below, rows_a, near, a_off, *bounds, m, out
        )

    n = n_threads if cands.size >= PARALLEL_CANDIDATES else 1
    # A pair's work grows with its candidates times its ancestors' releases.
    work = (np.diff(cand_off) + 1) * (np.diff(anc_off) + 1)
    thread_map(run, work_ranges(work, 2 * n if n > 1 else 1), n)
    return out


# Their machine code holds rules.py's kernels they call (rows_below_all, ancestor_pair; numba
# stamps a cached kernel with its own file only): stale when rules.py changes too.
cache_depends_on(interval_safe, rules)
cache_depends_on(both_rules, rules, kernel_views)
cache_depends_on(interval_checks, rules)
