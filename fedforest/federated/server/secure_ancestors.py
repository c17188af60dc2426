"""The ancestors' releases each pair of a level is checked against (``privacy="secure"``).

The two rules across levels (between two sums, ``privacy/rules.py``; intervals,
``privacy/intervals.py``) check a node's candidates against its ancestors' releases on
the feature: :func:`ancestors_releases` walks each pair's path up the server's state
(``secure_grids.SecureState``) and the ``ancestors_kept`` kernel keeps, per pair, the
releases the rules need; :func:`ancestors_releases_numpy` is its level-by-level twin.
Moved out of ``secure_grids.py`` (which re-exports the names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numba
import numpy as np
from numpy.typing import NDArray

from .. import kernel_views
from ..kernel_cache import cache_depends_on, inner_kernel
from ..kernel_views import borrowed
from ..privacy.intervals import interval_checks
from ..threads import thread_map, work_ranges
from .secure_segments import gather_rows, offsets

if TYPE_CHECKING:
    from .secure_grids import SecureState

__all__ = [
    "PARALLEL_EDGES",
    "ReleasePool",
    "ancestors_kept",
    "ancestors_releases",
    "ancestors_releases_numpy",
    "near_tails",
    "path_segments",
]

#: A level's grids and its ancestors' releases are made in threads, on ranges of pairs,
#: from this many edges on (``secure_grids`` reads it from here: a test that changes it
#: sets it in both modules).
PARALLEL_EDGES = 50_000


@dataclass
class ReleasePool:
    """A batch's earlier levels' releases, level after level, in one growing array.

    :func:`ancestors_releases` reads every earlier level's releases at each level; joined
    anew each level, they were copied again at every level (quadratic in depth, each copy
    fresh memory). ``advance`` appends a level's releases once; the array grows by
    doubling and is kept across the fit's batches (``clear``), so its pages are first
    written once a fit, not once a level. Per row too, for the cousins' rule
    (``secure_cousins.py``): the row it repeats (``origin``: itself, or for a slot passed
    through the parent's row it copies) and how many of its rows below its threshold are
    in no descendant's release of that threshold on its feature (``left``, on origin rows).
    """

    values: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 3)))
    origin: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    left: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    #: Rows in use (``values[:n]``) and each level's first row, in ``history``'s order.
    n: int = 0
    base: list[int] = field(default_factory=list)

    def append(self, rows: NDArray[np.float64], copied: NDArray[np.int64] | None = None) -> None:
        """A level's releases (threshold, rows below it, the node's rows) after the others.

        ``copied``: pool rows the level's last rows copy (a slot passed through), in order.
        """
        need = self.n + rows.shape[0]
        if need > self.values.shape[0]:
            size = max(2 * need, 1024)
            grown = np.empty((size, 3))
            grown[: self.n] = self.values[: self.n]
            origin, left = np.empty(size, np.int64), np.zeros(size)
            origin[: self.n], left[: self.n] = self.origin[: self.n], self.left[: self.n]
            self.values, self.origin, self.left = grown, origin, left
        self.values[self.n : need] = rows
        n_copied = 0 if copied is None else copied.size
        own = need - n_copied
        self.origin[self.n : own] = np.arange(self.n, own)
        if copied is not None and n_copied:
            self.origin[own:need] = self.origin[copied]
        self.left[self.n : need] = rows[:, 1]
        self.base.append(self.n)
        self.n = need

    def clear(self) -> None:
        """No level (a new batch); the array is kept."""
        self.n, self.base = 0, []

    def rows(self) -> NDArray[np.float64]:
        """Every level's releases (a view: read only)."""
        return self.values[: self.n]


def near_tails(anc: NDArray[np.float64], rows: NDArray[np.float64], m: int) -> NDArray[np.bool_]:
    """Which ancestors' releases (rows of ``anc``) the rule between two sums must check.

    The parent's always. Further up, a release at ``e`` by ``A`` (``a`` rows below it, ``t``
    in all) differs from any of the node's sums by ``A``'s rows outside the node below
    ``e`` (at least ``a - rows``) or above it (at least ``t - a - rows``) plus or minus
    the node's rows between: with both at least ``m``, no candidate makes a difference
    of 1 to ``m - 1`` rows on one side only, so only the tails of ``A``'s releases matter.
    """
    a, t, near = anc[:, 1], anc[:, 2], anc[:, 3] > 0
    return np.asarray(near | (a - rows < m) | (t - a - rows < m))


def ancestors_releases(
    state: SecureState,
    node: NDArray[np.int64],
    f: NDArray[np.int64],
    rows: NDArray[np.float64],
    n_threads: int = 1,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The releases the rules check each pair (``node``, ``f``) against, pair after pair.

    Up the path level by level (:func:`path_segments`) to each pair's
    segment of every earlier level's releases; then :func:`ancestors_kept` keeps, per
    pair, the parent's all and of the others' those the rules need (see
    :func:`ancestors_releases_numpy`, its twin). Returns each row's pair (sorted) and the
    rows (threshold, the ancestor's rows below it, its rows, 1 for the parent's), each
    column contiguous. With ``n_threads`` > 1 (and :data:`PARALLEL_EDGES` releases) ranges
    of pairs run in threads, each into a buffer of its own, joined in order: the same rows.
    """
    start, end = path_segments(state, node, f)
    n_kept = np.zeros(node.size, dtype=np.int64)
    all_rel = state.pool.rows()
    work = (end - start).sum(axis=0)
    n = n_threads if int(work.sum()) >= PARALLEL_EDGES else 1

    def run(r: tuple[int, int]) -> NDArray[np.float64]:
        a, b = r
        s, e = np.ascontiguousarray(start[:, a:b]), np.ascontiguousarray(end[:, a:b])
        # Each column contiguous (Fortran order): the rules read them as columns, uncopied.
        # At least 2 rows: numba types a (0, 4) or (1, 4) one C-ordered (it is both), a
        # second signature that a first run compiled in the fit itself.
        out = np.empty((4, max(int(work[a:b].sum()), 2))).T
        total = ancestors_kept(all_rel, s, e, rows[a:b], int(state.min_rows), n_kept[a:b], out)
        return out[:total]

    done = thread_map(run, work_ranges(work, n), n)
    if len(done) == 1:
        return np.repeat(np.arange(node.size, dtype=np.int64), n_kept), done[0]
    # Joined in the threads too: each copies its range's rows into its place (its pages
    # first written there, not in this thread).
    at = offsets([k.shape[0] for k in done])
    kept = np.empty((4, int(at[-1]))).T

    def place(i: int) -> None:
        kept[at[i] : at[i + 1]] = done[i]

    thread_map(place, range(len(done)), n)
    return np.repeat(np.arange(node.size, dtype=np.int64), n_kept), kept


def path_segments(
    state: SecureState, node: NDArray[np.int64], f: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per pair (``node``, ``f``), its ancestors' releases on ``f`` in the release pool.

    Up the path a level at a time (a lookup per level for all pairs at once): the
    ancestor ``lev`` levels above the pair's parent released ``pool[start[lev, p]:end[lev,
    p]]`` (empty where it released nothing on ``f``); shape (levels, pairs) each.
    """
    d, n_lev = state.lo.shape[1], len(state.history)
    assert len(state.pool.base) == n_lev, "the release pool is one level a history entry"
    up = state.parent[node] if node.size else np.zeros(0, np.int64)
    start = np.zeros((n_lev, node.size), dtype=np.int64)
    end = np.zeros((n_lev, node.size), dtype=np.int64)
    for lev, k in enumerate(range(n_lev - 1, -1, -1)):  # lev 0: the parent's level
        parents, released, _ = state.history[k]
        base = state.pool.base[k]
        there = up >= 0
        seg = np.where(there, released.find(np.where(there, up, 0) * d + f), -1)
        found = seg >= 0
        start[lev, found] = base + released.off[seg[found]]
        end[lev, found] = base + released.off[seg[found] + 1]
        up = np.where(there, parents[np.maximum(up, 0)], -1) if parents.size else up * 0 - 1
    return start, end


@numba.njit(nogil=True, cache=True)
def ancestors_kept(pool, start, end, rows, min_rows, n_kept, out):  # type: ignore[no-untyped-def]
    """Per pair, the ancestors' releases the rules need, into ``out``; returns their count.

    ``pool`` holds every earlier level's releases (threshold, the ancestor's rows below
    it, its rows); pair ``p``'s ancestor ``lev`` levels above its parent released
    ``pool[start[lev, p]:end[lev, p]]``. Kept, in that order, pair after pair: the
    parent's all (last column 1), and of the others' those the rule between two sums
    needs (:func:`near_tails`) and those the interval rule needs (``privacy/intervals.py``,
    ``interval_checks``; its ``B``: the nearest ancestor below with a release).
    ``n_kept[p]`` is set to the pair's count.
    """
    # Views numba does not reference-count (kernel_views.borrowed): _wide gets the pool
    # per threshold.
    pool, start, end, rows = borrowed(pool), borrowed(start), borrowed(end), borrowed(rows)
    n_kept, out = borrowed(n_kept), borrowed(out)
    o = 0
    for p in range(start.shape[1]):
        # B's releases (none yet), whether they increase; np.int64: numba would also
        # compile _wide for the literal 0's type (resolved before b0 is unified)
        b0, b1, b_up = np.int64(0), np.int64(0), True
        c = rows[p]
        for lev in range(start.shape[0]):
            a0, a1 = start[lev, p], end[lev, p]
            if a1 <= a0:
                continue
            # Intervals' tests (below threshold i; a1: above the last) only where a
            # threshold near no tail needs them, in increasing order: where both releases
            # increase (as they do), B's bounds around interval i move up with i (``jl``,
            # ``jh``), else they are searched through B's as interval_checks does.
            a_up = _rising(pool, a0, a1)
            up = a_up and b_up
            jl, jh, done, ok_at = b0, b0, a0 - 1, False
            for i in range(a0, a1):
                a, t = pool[i, 1], pool[i, 2]
                keep = lev == 0 or a - c < min_rows or t - a - c < min_rows
                if not keep:
                    if done != i:
                        jl, jh, ok_at = _wide(pool, a0, a1, i, b0, b1, jl, jh, up, c, min_rows)
                    keep = not ok_at
                    jl, jh, ok_at = _wide(pool, a0, a1, i + 1, b0, b1, jl, jh, up, c, min_rows)
                    done = i + 1
                    keep = keep or not ok_at
                if keep:
                    out[o, 0], out[o, 1], out[o, 2] = pool[i, 0], a, t
                    out[o, 3] = 1.0 if lev == 0 else 0.0
                    o += 1
                    n_kept[p] += 1
            if b1 == b0:
                b0, b1, b_up = a0, a1, a_up
    return o


@inner_kernel
def _rising(pool, a0, a1):  # type: ignore[no-untyped-def]
    # Whether the thresholds pool[a0:a1, 0] never decrease (NaN: they do not).
    for i in range(a0 + 1, a1):
        if not pool[i, 0] >= pool[i - 1, 0]:
            return False
    return True


@inner_kernel
def _wide(pool, a0, a1, i, b0, b1, jl, jh, up, c, min_rows):  # type: ignore[no-untyped-def]
    # interval_checks' test of interval i (below threshold i; i == a1: above the last).
    # With ``up``, B's releases are found from ``jl`` (the first above the interval's
    # lower end) and ``jh`` (the first at or above its upper end) of a lower interval,
    # both returned; else by interval_checks' scans.
    a_lo = pool[i - 1, 1] if i > a0 else 0.0
    a_hi = pool[i, 1] if i < a1 else pool[a0, 2]
    c_max = c
    if b1 > b0:
        r_lo, r_hi = 0.0, pool[b0, 2]
        if i > a0:
            x = pool[i - 1, 0]
            if up:
                while jl < b1 and pool[jl, 0] <= x:
                    jl += 1
                if jl > b0:
                    r_lo = pool[jl - 1, 1]
            else:
                for j in range(b0, b1):
                    if pool[j, 0] <= x:
                        r_lo = pool[j, 1]
        if i < a1:
            y = pool[i, 0]
            if up:
                while jh < b1 and pool[jh, 0] < y:
                    jh += 1
                if jh < b1:
                    r_hi = pool[jh, 1]
            else:
                for j in range(b1 - 1, b0 - 1, -1):
                    if pool[j, 0] >= y:
                        r_hi = pool[j, 1]
        c_max = min(c_max, r_hi - r_lo)
    return jl, jh, a_hi - a_lo - c_max >= min_rows


# Its cached code holds borrowed's (kernel_views): an edit there makes it stale.
cache_depends_on(ancestors_kept, kernel_views)


def ancestors_releases_numpy(
    state: SecureState, node: NDArray[np.int64], f: NDArray[np.int64], rows: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """NumPy twin of :func:`ancestors_releases` (its level-by-level reference).

    The releases the rules check each pair (``node``, ``f``) against, pair after pair.

    Up the path level by level (a lookup per level for all pairs at once): the parent's
    all, and of the others' those the rule between two sums needs (:func:`near_tails`)
    and those that could end an interval the interval rule finds isolating
    (``privacy/intervals.py``, :func:`interval_checks`: bounded with the releases of the
    nearest ancestor that released the feature, ``B``). Returns each row's pair (sorted)
    and the rows (threshold, the ancestor's rows below it, its rows, 1 for the parent's).
    """
    d, m = state.lo.shape[1], state.min_rows
    owners, found = [np.zeros(0, np.int64)], [np.zeros((0, 4))]
    up = state.parent[node] if node.size else np.zeros(0, np.int64)
    b_off, b_rel = np.zeros(node.size + 1, dtype=np.int64), np.zeros((0, 3))
    for k in range(len(state.history) - 1, -1, -1):
        parents, released, _ = state.history[k]
        there = up >= 0
        seg = np.where(there, released.find(np.where(there, up, 0) * d + f), -1)
        off, rel = released.take(seg)
        owner = np.repeat(np.arange(node.size), np.diff(off))
        rel = np.column_stack([rel, np.full(rel.shape[0], float(k == len(state.history) - 1))])
        keep = near_tails(rel, rows[owner], m)
        interval_checks(
            rel[:, 1].copy(), rel[:, 2].copy(), off, b_rel[:, 0].copy(), b_rel[:, 1].copy(),
            b_rel[:, 2].copy(), b_off, rel[:, 0].copy(), rows, m, keep,
        )  # fmt: skip
        owners.append(owner[keep])
        found.append(rel[keep])
        # The nearest ancestor that released the feature: B for those further up.
        first = (np.diff(b_off) == 0) & (np.diff(off) > 0)
        if first.any():
            b_off, b_rel = _merge_segments(b_off, b_rel, off, rel[:, :3], first)
        up = np.where(there, parents[np.maximum(up, 0)], -1) if parents.size else up * 0 - 1
    owner = np.concatenate(owners)
    order = np.argsort(owner, kind="stable")
    return owner[order], np.vstack(found)[order]


def _merge_segments(
    off: NDArray[np.int64],
    values: NDArray[np.float64],
    new_off: NDArray[np.int64],
    new_values: NDArray[np.float64],
    take_new: NDArray[np.bool_],
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Per pair, its segment of ``new_values`` where ``take_new``, else of ``values``."""
    start = np.where(take_new, new_off[:-1], off[:-1])
    end = np.where(take_new, new_off[1:], off[1:])
    out_off = offsets(end - start)
    out = np.empty((int(out_off[-1]), values.shape[1]))
    keep = ~take_new  # rows from each source where the pair takes them
    old = np.ascontiguousarray(values, dtype=np.float64)
    gather_rows(old, np.where(keep, start, 0), np.where(keep, end, 0), out_off, out)
    new = np.ascontiguousarray(new_values, dtype=np.float64)
    gather_rows(new, np.where(take_new, start, 0), np.where(take_new, end, 0), out_off, out)
    return out_off, out
