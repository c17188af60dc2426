"""Category groups under ``"secure"`` checked against the ancestors' in numba kernels.

:func:`isolate_counts` is :func:`.rules.groups_isolate` where every union's two parts are
whole counts (0 or more); :func:`safe_groups_counts` is :func:`.rules.safe_groups`'s
merging loop in one call where every ancestor is so (every fit's case): the same pairs
tried in the same order, the same merge kept, each pair checked on the one component of
groups its merge joins (the others' answers kept from the merge before). Their references are
:func:`.rules.groups_isolate_loop` and :func:`.rules.safe_groups_loop`.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["isolate_counts", "safe_groups_counts"]


@numba.njit(nogil=True, cache=True)
def _root(parent: NDArray[np.int64], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@numba.njit(nogil=True, cache=True)
def _parts(a_rows, a_groups, c_rows, c_groups, n_a, n_c):
    """The sums :func:`isolate_counts` reads, and the components of the groups.

    Each ancestor group's rows (``a_sum``), each node group's (``c_sum``), the node's rows
    in both of a pair (``cross``), each group's component (``label``: its root; groups
    ``0 .. n_a - 1`` the ancestor's, ``n_a ..`` the node's) and each root's size.
    """
    n = n_a + n_c
    a_sum, c_sum = np.zeros(n_a), np.zeros(n_c)
    cross = np.zeros((n_a, n_c))
    parent = np.arange(n)
    for k in range(a_groups.size):
        ga, gc = a_groups[k], c_groups[k]
        if ga >= 0:
            a_sum[ga] += a_rows[k]
        if gc >= 0:
            c_sum[gc] += c_rows[k]
        if ga >= 0 and gc >= 0:
            cross[ga, gc] += c_rows[k]
            parent[_root(parent, ga)] = _root(parent, n_a + gc)
    label = np.empty(n, dtype=np.int64)
    size = np.zeros(n, dtype=np.int64)
    for i in range(n):
        label[i] = _root(parent, i)
        size[label[i]] += 1
    return a_sum, c_sum, cross, label, size


@numba.njit(nogil=True, cache=True)
def _isolates(mem, k, a_sum, c_sum, cross, n_a, m):
    """Whether a union of the groups ``mem[:k]`` (one component) isolates rows.

    Its unions in Gray-code order (one group in or out a step, the three sums updated
    exactly: whole numbers below ``2 ** 53``, so the answer is the order's of no union).
    """
    picked = np.zeros(k, dtype=np.bool_)
    a_tot = c_tot = held = 0.0
    for step in range(1, 1 << k):
        j = 0
        while not (step >> j) & 1:
            j += 1
        picked[j] = not picked[j]
        sign = 1.0 if picked[j] else -1.0
        g = mem[j]
        shared = 0.0
        if g < n_a:
            a_tot += sign * a_sum[g]
            for t in range(k):
                if picked[t] and mem[t] >= n_a:
                    shared += cross[g, mem[t] - n_a]
        else:
            c_tot += sign * c_sum[g - n_a]
            for t in range(k):
                if picked[t] and mem[t] < n_a:
                    shared += cross[mem[t], g - n_a]
        held += sign * shared
        plus, minus = a_tot - held, c_tot - held
        if (plus == 0 and 0 < minus < m) or (minus == 0 and 0 < plus < m):
            return True
    return False


@numba.njit(nogil=True, cache=True)
def isolate_counts(a_rows, a_groups, c_rows, c_groups, n_a, n_c, min_rows, max_component):
    """:func:`.rules.groups_isolate` where every union's two parts are whole counts, 0 or more.

    Each component's unions are visited in Gray-code order (:func:`_isolates`). With both
    parts 0 or more, a sum over several components isolates rows only if one component's
    union does (a sum of parts is 0 only where each part is): the first union with one
    part 0 and the other 1 to ``min_rows - 1`` answers, no sums across components are kept.
    """
    n = n_a + n_c
    a_sum, c_sum, cross, label, size = _parts(a_rows, a_groups, c_rows, c_groups, n_a, n_c)
    for i in range(n):
        if size[i] > max_component:
            return True
    mem = np.empty(n, dtype=np.int64)
    for top in range(n):
        if size[top] == 0:
            continue
        k = 0
        for i in range(n):
            if label[i] == top:
                mem[k] = i
                k += 1
        if _isolates(mem, k, a_sum, c_sum, cross, n_a, min_rows):
            return True
    return False


@numba.njit(nogil=True, cache=True)
def _bad_components(label, size, a_sum, c_sum, cross, n_a, min_rows, max_component, bad):
    """Each component's flag (``bad``, by root: too large, or a union isolates); their count."""
    n = label.size
    mem = np.empty(n, dtype=np.int64)
    count = 0
    for top in range(n):
        bad[top] = False
        if size[top] == 0:
            continue
        if size[top] > max_component:
            bad[top] = True
        else:
            k = 0
            for i in range(n):
                if label[i] == top:
                    mem[k] = i
                    k += 1
            bad[top] = _isolates(mem, k, a_sum, c_sum, cross, n_a, min_rows)
        count += bad[top]
    return count


@numba.njit(nogil=True, cache=True)
def _merge_isolates(gi, gj, label, size, bad, n_bad, a_sum, c_sum, cross, n_a, m, max_component):
    """Whether one ancestor isolates rows once the node's groups ``gi`` and ``gj`` are one.

    A merge joins the components of ``gi`` and ``gj`` and leaves every other as it was
    (its groups, sums and flag): some other one bad, the answer is yes; else the joined
    component answers, ``gj``'s sums added to ``gi``'s (whole numbers: restored exactly).
    """
    n = label.size
    ri, rj = label[n_a + gi], label[n_a + gj]
    joined = size[ri] - 1 + (size[rj] if rj != ri else 0)
    if n_bad - bad[ri] - (bad[rj] if rj != ri else 0) > 0 or joined > max_component:
        return True
    mem = np.empty(joined, dtype=np.int64)
    k = 0
    for i in range(n):
        if (label[i] == ri or label[i] == rj) and i != n_a + gj:
            mem[k] = i
            k += 1
    own_sum, own_cross = c_sum[gi], cross[:, gi].copy()
    c_sum[gi] += c_sum[gj]
    cross[:, gi] += cross[:, gj]
    out = _isolates(mem, k, a_sum, c_sum, cross, n_a, m)
    c_sum[gi] = own_sum
    cross[:, gi] = own_cross
    return out


@numba.njit(nogil=True, cache=True)
def _merged(groups, i, j):
    """Groups ``i`` and ``j`` as one, renumbered 0 .. n - 2 in order (``_merge_groups``)."""
    keep, gone = min(i, j), max(i, j)
    out = groups.copy()
    for k in range(out.size):
        g = out[k]
        if g == gone:
            g = keep
        out[k] = g - 1 if g > gone else g
    return out


@numba.njit(nogil=True, cache=True)
def safe_groups_counts(groups, rows, anc_rows, anc_groups, anc_off, min_rows, max_component):
    """:func:`.rules.safe_groups` where every ancestor's check is :func:`isolate_counts`.

    While some ancestor isolates rows, the first pair of groups (smallest first: a stable
    order of their rows) whose merge leaves none isolating is merged, else the two
    smallest; fewer than two groups left: every entry -1. Each ancestor's components and
    their flags are found once per merge made; a pair tried checks only the component its
    merge joins (:func:`_merge_isolates`), where :func:`isolate_counts` checked them all.
    """
    groups = groups.copy()
    n_anc = anc_off.size - 1
    n_a = np.zeros(n_anc, dtype=np.int64)
    for k in range(n_anc):
        n_a[k] = anc_groups[anc_off[k] : anc_off[k + 1]].max() + 1
    top_a = max(n_a.max(), 0) if n_anc else 0
    while groups.max() >= 1:
        n = groups.max() + 1
        a_sums, c_sums = np.zeros((n_anc, top_a)), np.zeros((n_anc, n))
        crosses = np.zeros((n_anc, top_a, n))
        labels = np.zeros((n_anc, top_a + n), dtype=np.int64)
        sizes = np.zeros((n_anc, top_a + n), dtype=np.int64)
        bads = np.zeros((n_anc, top_a + n), dtype=np.int64)
        n_bad = np.zeros(n_anc, dtype=np.int64)
        for k in range(n_anc):
            na = n_a[k]
            if na <= 0:
                continue
            lo, hi = anc_off[k], anc_off[k + 1]
            a_sum, c_sum, cross, label, size = _parts(
                anc_rows[lo:hi], anc_groups[lo:hi], rows, groups, na, n
            )
            a_sums[k, :na] = a_sum
            c_sums[k] = c_sum
            crosses[k, :na] = cross
            labels[k, : na + n] = label
            sizes[k, : na + n] = size
            flags = np.zeros(na + n, dtype=np.bool_)
            n_bad[k] = _bad_components(
                label, size, a_sum, c_sum, cross, na, min_rows, max_component, flags
            )
            bads[k, : na + n] = flags
        if n_bad.sum() == 0:
            break
        size = np.zeros(n)
        for k in range(groups.size):
            if groups[k] >= 0:
                size[groups[k]] += rows[k]
        order = np.empty(n, dtype=np.int64)
        for i in range(n):  # insertion: ties keep their index order (a stable argsort)
            k = i
            while k > 0 and size[order[k - 1]] > size[i]:
                order[k] = order[k - 1]
                k -= 1
            order[k] = i
        best_i, best_j = order[0], order[1]
        found = n - 1 < 1  # one group left: no check (every entry -1 below)
        for j in range(n):
            for i in range(j):
                if found:
                    break
                safe = True
                for k in range(n_anc):
                    na = n_a[k]
                    if na > 0 and _merge_isolates(
                        order[i], order[j], labels[k, : na + n], sizes[k, : na + n],
                        bads[k, : na + n], n_bad[k], a_sums[k, :na], c_sums[k],
                        crosses[k, :na], na, min_rows, max_component,
                    ):  # fmt: skip
                        safe = False
                        break
                if safe:
                    best_i, best_j, found = order[i], order[j], True
            if found:
                break
        groups = _merged(groups, best_i, best_j)
    if groups.max() < 1:
        groups[:] = -1
    return groups
