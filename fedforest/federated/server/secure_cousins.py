"""The cousins' rule (``privacy="secure"``): a tree's releases at one threshold form chains.

Red team 20 (docs/privacy-findings.md): an ancestor ``A``'s Round B cumulative sum at
``e`` on feature ``j``, less the sums at ``e`` of two or more disjoint descendants of
``A`` that released ``e`` on ``j`` too (cousins: neither is the other's ancestor), is a
sum over ``A``'s other rows below ``e`` (in a leaf, or a node that never released ``j``):
1 to ``m - 1`` rows, a target. The rules across levels compare a node's candidates with
its own ancestors' releases only; thresholds recur because an ancestor's join its
descendants' grids (``secure_grids.displaced``, ``fallback.py``) and grids share edges.

**The rule.** Per tree, feature ``j`` and threshold ``e``, let ``S`` be the nodes that
released ``e`` on ``j``. Invariant: for every ``A`` in ``S``, the members of ``S`` in
``A``'s subtree form a chain (each two in ancestor relation). Then ``A`` has no two
disjoint descendants in ``S``, and the class above is empty: every difference of two
sums at ``e`` with one node inside the other is an ancestor's less a descendant's, which
the rule between two sums already checks (``rules.ancestor_safe``, ``near_tails``), and
members of ``S`` with no common ancestor in ``S`` are disjoint with no sum at ``e`` over
their union's enclosing rows to subtract them from.

**Keeping it, a level at a time** (:func:`cousins_filter`, after the other rules). A
candidate ``e`` of pair (``v``, ``j``): let ``b`` be ``v``'s nearest ancestor in ``S``
(the release pool, ``ReleasePool``; a slot passed through stands for the node whose
releases it copies, ``origin``). *Earlier levels:* drop ``e`` if some member of ``S``
lies in ``b``'s subtree (``taken``). Sound and exact: a member ``w`` of ``S`` below an
ancestor ``a`` in ``S`` of ``v`` and not on ``v``'s path lies, by the chain through
``a``, below ``b`` (``b`` and ``w`` are both in ``a``'s chain; ``w`` above ``b`` would
be on the path); conversely a member below ``b`` is off ``v``'s path (``b`` is the
nearest). *The same level:* of the pairs whose ``b`` is the same release, the first in
the frontier's order (the lowest slot) keeps ``e`` and the others drop it (two kept ``e``
below one ``b`` would be disjoint; two with different ``b`` have no common ancestor in
``S``, else one ``b`` would lie below the other and be taken). Keeping one, not none,
keeps the most splits; the order is the server's own. Without a ``b`` the node starts a
chain. A kept ``e`` marks its ``b`` taken. Everything read is what the server holds: the
tree's shape and its releases.

:func:`nearest_releases` (numba) finds each candidate's ``b``; its NumPy twin is
:func:`nearest_releases_numpy`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np
from numpy.typing import NDArray

from .secure_ancestors import path_segments

if TYPE_CHECKING:
    from .secure_grids import SecureState

__all__ = ["cousins_filter", "nearest_releases", "nearest_releases_numpy"]


@numba.njit(nogil=True, cache=True)
def nearest_releases(pool, start, end, cand, cand_off, safe, out):  # type: ignore[no-untyped-def]
    """Per candidate, the pool row of its pair's nearest ancestor's release at it, or -1.

    ``pool``: (threshold, ...) rows; pair ``p``'s ancestor ``lev`` levels above its
    parent released ``pool[start[lev, p]:end[lev, p]]``; ``cand[cand_off[p]:cand_off[p +
    1]]`` are the pair's candidates, ``safe`` those still kept (the others get -1 in
    ``out``). A segment of increasing thresholds is searched by bisection, else scanned.
    """
    for p in range(cand_off.size - 1):
        for i in range(cand_off[p], cand_off[p + 1]):
            out[i] = -1
        for lev in range(start.shape[0]):
            a0, a1 = start[lev, p], end[lev, p]
            if a1 <= a0:
                continue
            rising = True
            for k in range(a0 + 1, a1):
                if not pool[k, 0] > pool[k - 1, 0]:
                    rising = False
                    break
            for i in range(cand_off[p], cand_off[p + 1]):
                if not safe[i] or out[i] >= 0:
                    continue
                e = cand[i]
                if rising:
                    lo, hi = a0, a1
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if pool[mid, 0] < e:
                            lo = mid + 1
                        else:
                            hi = mid
                    if lo < a1 and pool[lo, 0] == e:
                        out[i] = lo
                else:
                    for k in range(a0, a1):
                        if pool[k, 0] == e:
                            out[i] = k
                            break


def nearest_releases_numpy(
    pool: NDArray[np.float64],
    start: NDArray[np.int64],
    end: NDArray[np.int64],
    cand: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    safe: NDArray[np.bool_],
) -> NDArray[np.int64]:
    """NumPy twin of :func:`nearest_releases` (returns ``out``): a candidate at a time."""
    out = np.full(cand.size, -1, dtype=np.int64)
    owner = np.repeat(np.arange(cand_off.size - 1), np.diff(cand_off))
    for i in np.flatnonzero(safe):
        p = owner[i]
        for lev in range(start.shape[0]):
            at = np.flatnonzero(pool[start[lev, p] : end[lev, p], 0] == cand[i])
            if at.size:
                out[i] = start[lev, p] + at[0]
                break
    return out


def cousins_filter(
    state: SecureState,
    node: NDArray[np.int64],
    f: NDArray[np.int64],
    cand: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    safe: NDArray[np.bool_],
) -> None:
    """``safe`` (in place) less the candidates the cousins' rule drops; marks its kept.

    Pairs (``node``, ``f``) in the frontier's order, ``cand[cand_off[p]:cand_off[p + 1]]``
    each pair's candidates, ``safe`` those the other rules keep. A kept candidate with a
    nearest ancestor's release at it marks that release taken (``state.pool.taken``) for
    the levels below.
    """
    if not state.history or not safe.any():
        return
    pool = state.pool
    start, end = path_segments(state, node, f)
    near = np.empty(cand.size, dtype=np.int64)
    nearest_releases(pool.rows(), start, end, cand, cand_off, safe, near)
    at = np.flatnonzero(near >= 0)
    origin = pool.origin[near[at]]
    taken = pool.taken[origin]
    safe[at[taken]] = False
    at, origin = at[~taken], origin[~taken]
    _, first = np.unique(origin, return_index=True)  # the first pair's, of each release
    later = np.ones(at.size, dtype=bool)
    later[first] = False
    safe[at[later]] = False
    pool.taken[origin[first]] = True
