"""Category groups under ``"secure"`` checked against the ancestors' in numba kernels.

:func:`isolate_counts` is :func:`.rules.groups_isolate` where every union's two parts are
whole counts (0 or more); :func:`safe_groups_counts` is :func:`.rules.safe_groups`'s
merging loop in one call where every ancestor is so (every fit's case): the same pairs
tried in the same order, the same merge kept. Their references are
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
def isolate_counts(a_rows, a_groups, c_rows, c_groups, n_a, n_c, min_rows, max_component):
    """:func:`.rules.groups_isolate` where every union's two parts are whole counts, 0 or more.

    Each component's unions are visited in Gray-code order (one group in or out a step,
    the three sums updated exactly: whole numbers below ``2 ** 53``). With both parts 0 or
    more, a sum over several components isolates rows only if one component's union does
    (a sum of parts is 0 only where each part is): the first union with one part 0 and the
    other 1 to ``min_rows - 1`` answers, no sums across components are kept.
    """
    m, n = min_rows, n_a + n_c
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
def _unsafe(groups, rows, anc_rows, anc_groups, anc_off, min_rows, max_component):
    """Whether some ancestor's groups isolate rows with ``groups``.

    The ancestors' rows and groups end to end, ``anc_off`` their offsets.
    """
    n_c = groups.max() + 1
    for k in range(anc_off.size - 1):
        a_rows = anc_rows[anc_off[k] : anc_off[k + 1]]
        a_groups = anc_groups[anc_off[k] : anc_off[k + 1]]
        n_a = a_groups.max() + 1
        if n_a <= 0 or n_c <= 0:
            continue
        if isolate_counts(a_rows, a_groups, rows, groups, n_a, n_c, min_rows, max_component):
            return True
    return False


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
    smallest; fewer than two groups left: every entry -1.
    """
    groups = groups.copy()
    while groups.max() >= 1 and _unsafe(
        groups, rows, anc_rows, anc_groups, anc_off, min_rows, max_component
    ):
        n = groups.max() + 1
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
        found = False
        for j in range(n):
            for i in range(j):
                merged = _merged(groups, order[i], order[j])
                if merged.max() < 1 or not _unsafe(
                    merged, rows, anc_rows, anc_groups, anc_off, min_rows, max_component
                ):
                    best_i, best_j, found = order[i], order[j], True
                    break
            if found:
                break
        groups = _merged(groups, best_i, best_j)
    if groups.max() < 1:
        groups[:] = -1
    return groups
