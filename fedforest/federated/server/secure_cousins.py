"""The cousins' rule (``privacy="secure"``): a tree's releases at one threshold nest.

Red team 20 (docs/privacy-findings.md): an ancestor ``A``'s Round B cumulative sum at
``e`` on feature ``j``, less the sums at ``e`` of two or more disjoint descendants of
``A`` that released ``e`` on ``j`` too (cousins: neither is the other's ancestor), is a
sum over ``A``'s other rows below ``e`` (in a leaf, or a node that never released ``j``):
1 to ``m - 1`` rows, a target. The rules across levels compare a node's candidates with
its own ancestors' releases only; thresholds recur because an ancestor's join its
descendants' grids (``secure_grids.displaced``, ``fallback.py``) and grids share edges.

**What the server can form at one threshold.** Per tree, feature ``j`` and threshold
``e``, let ``S`` be the nodes that released ``e`` on ``j``; node ``v``'s sum at ``e``
is over its rows ``v(e)`` below ``e``. Nodes nest or are disjoint, so the sets ``v(e)``
form a laminar family: each is the disjoint union of its *atom* (``v(e)`` less the
``w(e)`` of ``v``'s children in ``S``, the members below ``v`` with none between) and
its children's sets. Every sum over the family, with any integer coefficients, is
constant on each atom, so the smallest sets of rows it can isolate are atoms and their
unions. **The rule:** every atom holds 0 or at least ``m`` rows. Then every sum the
server forms at ``e`` is over 0 or at least ``m`` rows (a union of atoms). Round A's
counts are exact under ``"secure"``, so the server knows each atom's rows without a
row's value: ``|v(e)|`` is the count below ``e`` it releases with the sum.

**Keeping it, a level at a time** (:func:`cousins_filter`, after the other rules). A
candidate ``e`` of pair (``v``, ``j``), ``c`` rows of ``v`` below it: let ``b`` be
``v``'s nearest ancestor in ``S`` (the release pool, ``ReleasePool``; a slot passed
through stands for the node whose releases it copies, ``origin``). ``v`` is a leaf of
the family (its descendants are not grown yet) and becomes a child of ``b``: its atom
is ``v(e)`` (``c`` rows: 0 or at least ``m`` by the rule of bins) and ``b``'s atom
loses ``c`` rows (``v(e)`` lies in it: a child of ``b`` in ``S`` holding ``v``'s rows
would be an ancestor of ``v`` below ``b``). ``e`` is kept if ``b``'s atom keeps 0 or at
least ``m`` rows (``ReleasePool.left``), and then ``b``'s atom shrinks by ``c``. Pairs
of one level under the same ``b`` are taken in the frontier's order (the server's own),
each against what the ones before it left, so the atom stays 0 or at least ``m`` after
each kept one. No other atom changes. Without a ``b``, ``v(e)`` starts a family.
Everything read is what the server holds: the tree's shape, its releases and Round A's
counts. (Red team 20's first rule kept the releases at ``e`` a chain, one child per
member: an atom was then an ancestor's sum less one descendant's, which the rule
between two sums checks; it dropped 12.9 % of the candidates and cost 4 to 6 points of
MSE at the default depth.)

:func:`nearest_releases` (numba) finds each candidate's ``b``; :func:`keep_atoms`
(numba) keeps the atoms; their NumPy twins are :func:`nearest_releases_numpy` and
:func:`keep_atoms_numpy`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np
from numpy.typing import NDArray

from .secure_ancestors import path_segments

if TYPE_CHECKING:
    from .secure_grids import SecureState

__all__ = [
    "cousins_filter",
    "keep_atoms",
    "keep_atoms_numpy",
    "nearest_releases",
    "nearest_releases_numpy",
]


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


@numba.njit(nogil=True, cache=True)
def keep_atoms(at, origin, below, left, min_rows, safe):  # type: ignore[no-untyped-def]
    """Candidates kept while their nearest releases' atoms keep 0 or ``min_rows`` rows.

    In order, candidate ``at[k]`` (``below[k]`` rows below it) is kept if its nearest
    release ``origin[k]``'s atom keeps 0 or at least ``min_rows`` rows, which it then
    loses (``left``, in place); else ``safe[at[k]]`` is cleared.
    """
    for k in range(at.size):
        r = left[origin[k]] - below[k]
        if r < 0.5 or r >= min_rows:
            left[origin[k]] = r
        else:
            safe[at[k]] = False


def keep_atoms_numpy(
    at: NDArray[np.int64],
    origin: NDArray[np.int64],
    below: NDArray[np.float64],
    left: NDArray[np.float64],
    min_rows: int,
    safe: NDArray[np.bool_],
) -> None:
    """NumPy twin of :func:`keep_atoms`: a release's candidates a group at a time.

    Each against what the kept before it left (a Python loop over the group).
    """
    order = np.argsort(origin, kind="stable")
    for group in np.split(order, np.flatnonzero(np.diff(origin[order])) + 1):
        if not group.size:
            continue
        rest = float(left[origin[group[0]]])
        for k in group:
            r = rest - below[k]
            if r < 0.5 or r >= min_rows:
                rest = r
            else:
                safe[at[k]] = False
        left[origin[group[0]]] = rest


def cousins_filter(
    state: SecureState,
    node: NDArray[np.int64],
    f: NDArray[np.int64],
    cand: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    below: NDArray[np.float64],
    safe: NDArray[np.bool_],
) -> None:
    """``safe`` (in place) less the candidates the cousins' rule drops; its kept shrink atoms.

    Pairs (``node``, ``f``) in the frontier's order, ``cand[cand_off[p]:cand_off[p + 1]]``
    each pair's candidates, ``below`` each candidate's rows of the node below it (Round
    A), ``safe`` those the other rules keep. A kept candidate with a nearest ancestor's
    release at it takes its rows from that release's atom (``state.pool.left``) for the
    levels below.
    """
    if not state.history or not safe.any():
        return
    pool = state.pool
    start, end = path_segments(state, node, f)
    near = np.empty(cand.size, dtype=np.int64)
    nearest_releases(pool.rows(), start, end, cand, cand_off, safe, near)
    at = np.flatnonzero(near >= 0)
    if at.size:
        below = np.ascontiguousarray(below, dtype=np.float64)
        keep_atoms(at, pool.origin[near[at]], below[at], pool.left, state.min_rows, safe)
