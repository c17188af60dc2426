"""The rule on derived sums (``privacy="secure"``): a node's derivable sums stay m rows apart.

Red team 20's cell attack (docs/privacy-findings.md) found sums the server *derives* at
a threshold ``e`` of feature ``j`` for a node that never released ``e``, then takes
against the node's own sums at another threshold: one row, its target. Per tree, ``j``
and ``e``, write ``w(e)`` for the sum over node ``w``'s rows with ``x_j <= e``. The
server holds ``w(e)`` where ``w`` released ``e`` (Round B), and derives it where
(a) ``w``'s rows all lie on one side of ``e`` (its path bounds on ``j``: 0 below, its
known rows above; the known rows are its total when no missing value can reach ``w``,
else its sum at the "value known | missing" edge), or (b) two of a node and its two
children (they partition it) are held or derived: ``v(e) = a(e) + b(e)``, any two give
the third. A slot passed through is its node. Closing (a) and (b) at ``e`` gives every
node's sum at ``e`` the server can form from sums at ``e``, with its rows (the same
arithmetic on Round A's and Round B's exact counts).

**The rule:** for every node ``w`` and feature ``j``, the thresholds at which ``w``'s sum
is held or derived, with 0 rows and ``w``'s total at the ends, are 0 or at least ``m``
rows apart; else the difference of two is a sum over 1 to ``m - 1`` of ``w``'s rows. A
level's candidates are taken in the frontier's order; a candidate is dropped when
holding its sum and closing would bring some node's derivable thresholds closer than
that; else what it derives is kept for the candidates after it and the levels below. A
split passes its node's derivable thresholds on its feature to its children (rule (a)
gives one child, (b) the other). This closes the class the cell attack found (an
ancestor's sum less a relative's or a split's total, a partition at mixed depths, the
missing rows through a "value known | missing" edge, each against the node's own split
or candidate).

Not covered: at one ``e``, a derivable node's *atom* (its sum less its highest derivable
descendants': the rows below ``e`` of several nodes under it whose own sums are not
derivable). The cousins' rule (``secure_cousins.py``) keeps the atoms of released sums
0 or ``m`` rows; with derived ones among them an atom can hold fewer (10 of about 48,000
derivable sums in 12 fits of 10 trees). Checking them at each candidate walked
subtrees: 0.43 s of CPU a fit of 2,000 rows, and an atom a later split shrinks (its
child on one side of ``e`` joins the derivable sums) would still escape; kept in
``tests/test_secure_derived.py`` as a strict xfail. Nor: a union of several nodes
derivable at two thresholds, and a node's known rows held after the thresholds above
its bound were closed.

:class:`DerivedSums` keeps, per batch, the trees' nodes (parents, children, numeric
splits, rows) in arrays and each node's derivable thresholds per feature in a linked
pool; the kernels :func:`derived_filter` and :func:`derived_split` (numba) do the
closing. Their twin is ``secure_derived_twin.DerivedSumsTwin`` (plain Python, the same
decisions: tests compare them over whole fits). Their helpers are
``kernel_cache.inner_kernel`` functions (no Python entry point: kernels call them, never
Python) and get no literal argument (numba compiles a helper again for a literal): the
two kernels' compile CPU on a fresh cache 2.7 + 1.0 s -> 1.7 + 0.6 s. The kernels write a
candidate's lookups out rather than call helpers with arrays (below).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS
from ..kernel_cache import cache_depends_on, inner_kernel
from . import sorted_search
from .missing import MISSING_SPLIT
from .sorted_search import search_left

__all__ = ["DerivedSums", "derived_filter", "derived_split"]


# A candidate's work is written out in the kernels on scalars and the kernels' own arrays,
# which they unpack from their tuples once: a helper LLVM does not inline takes a new
# reference (an atomic increment, then a decrement) for each array it is given or takes
# out of a tuple, at every call. With helpers per lookup, 80 % of derived_filter's time at
# 100,000 rows went to those (perf; 2026-12-06): 0.45 -> 0.06 s for a level's 687,180
# candidates, the same decisions. The helpers left take scalars, or run once a pair.


@inner_kernel
def _side(e, lo, hi, closed, total):  # type: ignore[no-untyped-def]
    """A node's rows at or below ``e`` by its bounds on the feature alone, else NaN.

    0 below ``lo``; ``total`` (its rows) at or above ``hi`` or at the missing edge where
    ``closed`` (no missing value can reach it: its known rows are its total).
    """
    if e <= lo:
        return 0.0
    if (e >= hi or e == MISSING_SPLIT) and closed:
        return total
    return np.nan


@inner_kernel
def _close(  # type: ignore[no-untyped-def]
    g0, j, e, c0, d, parent, kid0, kid1, rows, missing, blo, bhi, bknown, head, pe, pc,
    pnext, pend_g, pend_c, stack_g, stack_c,
):  # fmt: skip
    """The nodes whose sums at ``e`` become derivable once ``g0``'s is held (``c0`` rows).

    Into ``pend_*``, with their rows; returns how many (``g0`` first, unless held).

    A node's sum at ``e`` is derivable where it is pending, held, or its rows all lie on
    one side of ``e`` (its path bounds, and whether no missing value reaches it). A
    stacked node's is looked up first, then (once it is pending) its parent's, its
    sibling's and its children's, in one loop on scalars (:func:`derived_filter`).
    """
    n_pend, top = 0, 1
    stack_g[0], stack_c[0] = g0, c0
    while top > 0:
        top -= 1
        g, c = stack_g[top], stack_c[top]
        p = parent[g]
        s = -1 if p < 0 else (kid1[p] if kid0[p] == g else kid0[p])
        a, b = kid0[g], kid1[g]
        cp, cs, ca, cb = np.nan, np.nan, np.nan, np.nan
        for w in range(5):  # g, then its parent, sibling and children
            x = g if w == 0 else (p if w == 1 else (s if w == 2 else (a if w == 3 else b)))
            v = np.nan
            if x >= 0:
                pending = False
                for i in range(n_pend):
                    if pend_g[i] == x:
                        v, pending = pend_c[i], True
                        break
                key = x * d + j
                if not pending:
                    v = _side(e, blo[key], bhi[key], bknown[key] or not missing[j], rows[x])
                if not pending and v != v and head[key] >= 0:
                    q = head[key]
                    while q >= 0:  # held
                        if pe[q] == e:
                            v = pc[q]
                            break
                        q = pnext[q]
                    if v != v and e != MISSING_SPLIT and e >= bhi[key]:
                        q = head[key]
                        while q >= 0:  # its known rows: its sum at the missing edge
                            if pe[q] == MISSING_SPLIT:
                                v = pc[q]
                                break
                            q = pnext[q]
            if w == 0:
                if v == v:
                    break
                pend_g[n_pend], pend_c[n_pend] = g, c
                n_pend += 1
            elif w == 1:
                cp = v
            elif w == 2:
                cs = v
            elif w == 3:
                ca = v
            else:
                cb = v
        else:
            if p >= 0:
                if cp == cp:
                    stack_g[top], stack_c[top] = s, cp - c
                    top += 1
                elif cs == cs:
                    stack_g[top], stack_c[top] = p, c + cs
                    top += 1
            if a >= 0:
                if ca == ca and cb != cb:
                    stack_g[top], stack_c[top] = b, c - ca
                    top += 1
                elif cb == cb and ca != ca:
                    stack_g[top], stack_c[top] = a, c - cb
                    top += 1
    return n_pend


@inner_kernel
def _spaced(c, below, above, m):  # type: ignore[no-untyped-def]
    """Whether ``c`` rows are 0 or at least ``m`` from each of ``below`` and ``above``."""
    for other in (below, above):
        if other == other and 0.5 <= abs(c - other) < m - 0.5:
            return False
    return True


@inner_kernel
def _insert(es, cs, n, e, c):  # type: ignore[no-untyped-def]
    """``(e, c)`` into the increasing ``es[:n]`` (and ``cs``), room permitting."""
    at = n
    while at > 0 and es[at - 1] > e:
        es[at], cs[at] = es[at - 1], cs[at - 1]
        at -= 1
    es[at], cs[at] = e, c


@inner_kernel
def _list_size(key, head, pnext):  # type: ignore[no-untyped-def]
    n, k = 0, head[key]
    while k >= 0:
        n += 1
        k = pnext[k]
    return n


@inner_kernel
def _sorted_into(key, head, pe, pc, pnext, to_e, to_c, at):  # type: ignore[no-untyped-def]
    """:func:`_sorted_points` of ``key`` into ``to_*[at:]`` (room for them); the end."""
    n, k = 0, head[key]
    while k >= 0:
        n += 1
        k = pnext[k]
    i, k = at + n - 1, head[key]
    while k >= 0:  # newest first: laid out from the end, mostly increasing
        to_e[i], to_c[i] = pe[k], pc[k]
        i -= 1
        k = pnext[k]
    for i in range(at + 1, at + n):  # an insertion sort: few moves on a nearly sorted list
        x, y, w = to_e[i], to_c[i], i
        while w > at and to_e[w - 1] > x:
            to_e[w], to_c[w] = to_e[w - 1], to_c[w - 1]
            w -= 1
        to_e[w], to_c[w] = x, y
    return at + n


@numba.njit(nogil=True, cache=True)
def derived_filter(  # type: ignore[no-untyped-def]
    tree, pool, n_used, d, gnode, f, cand, cand_off, below, m, safe, start, scratch
):
    """The rule on candidates from ``start`` on, in order (``safe`` cleared, in place).

    A candidate is dropped where holding its sum would bring some node's derivable
    thresholds 1 to ``m - 1`` rows apart, else what it derives is kept in the pool.
    Returns (rows of the pool in use, the candidate to go on from, or -1 when done): it
    stops before a candidate when the pool could not take a closing of every node (the
    caller grows it).

    A candidate's usual work (its node, parent and sibling looked up, its node's
    neighbours, what it adds) is written out here on scalars and the kernel's own
    arrays: a helper taking arrays costs a reference taken and dropped per array and call.
    """
    parent, kid0, kid1, _, rows, missing, blo, bhi, bknown = tree
    head, pe, pc, pnext = pool
    pend_g, pend_c, stack_g, stack_c = scratch
    n_nodes = parent.size
    cap = pe.size
    owner, current, up, sib = 0, -1, -1, -1
    # The sorted thresholds held by the pair's node, its parent and its sibling when the
    # pair's turn came (``snap``: three runs, from ``off``), and those its own candidates
    # add (``own``, kept sorted): no walk of their lists a candidate.
    snap_e, snap_c = np.empty(64), np.empty(64)
    off = np.zeros(4, np.int64)
    # ``zero`` not the literal 0: a helper given a literal compiles a version for it.
    zero = np.int64(0)
    own_e, own_c, n_own = np.empty(0), np.empty(0), zero
    for i in range(start, cand.size):
        if not safe[i]:
            continue
        while cand_off[owner + 1] <= i:
            owner += 1
        if n_used + n_nodes > cap:
            return n_used, i
        g, j, e, c = gnode[owner], f[owner], cand[i], below[i]
        if owner != current:
            current = owner
            size = cand_off[owner + 1] - cand_off[owner]
            own_e, own_c, n_own = np.empty(size), np.empty(size), zero
            up = parent[g]
            sib = -1 if up < 0 else (kid1[up] if kid0[up] == g else kid0[up])
            k_g, k_up, k_sib = g * d + j, max(up, 0) * d + j, max(sib, 0) * d + j
            total = (
                _list_size(k_g, head, pnext) + _list_size(k_up, head, pnext)
                + _list_size(k_sib, head, pnext)
            )  # fmt: skip
            if total > snap_e.size:
                snap_e, snap_c = np.empty(2 * total), np.empty(2 * total)
            off[1] = _sorted_into(k_g, head, pe, pc, pnext, snap_e, snap_c, zero)
            off[2] = _sorted_into(k_up, head, pe, pc, pnext, snap_e, snap_c, off[1])
            off[3] = _sorted_into(k_sib, head, pe, pc, pnext, snap_e, snap_c, off[2])
        # The node, its parent and sibling from the pair's snapshots (their lists change
        # within the pair only at its own thresholds); a parent made derivable closes in
        # full (:func:`_close`).
        n_pend = -1
        at = search_left(own_e, zero, n_own, e)
        if not (at < n_own and own_e[at] == e):
            mine, cp, cs = np.nan, np.nan, np.nan
            for w in range(3 if up >= 0 else 1):  # :func:`_value` of each, none pending
                x = g if w == 0 else (up if w == 1 else sib)
                key = x * d + j
                v = _side(e, blo[key], bhi[key], bknown[key] or not missing[j], rows[x])
                if v != v:
                    lo, hi = off[w], off[w + 1]
                    a = search_left(snap_e, lo, hi, e)
                    if a < hi and snap_e[a] == e:
                        v = snap_c[a]
                    elif e != MISSING_SPLIT and e >= bhi[key]:  # its known rows
                        a = search_left(snap_e, lo, hi, MISSING_SPLIT)
                        if a < hi and snap_e[a] == MISSING_SPLIT:
                            v = snap_c[a]
                if w == 0:
                    mine = v
                    if v == v:
                        break
                elif w == 1:
                    cp = v
                else:
                    cs = v
            if mine == mine:
                n_pend = 0
            elif up < 0:
                pend_g[0], pend_c[0], n_pend = g, c, 1
            elif cp == cp and cs != cs:
                pend_g[0], pend_c[0], pend_g[1], pend_c[1], n_pend = g, c, sib, cp - c, 2
            elif cp == cp or cs != cs:
                pend_g[0], pend_c[0], n_pend = g, c, 1
        if n_pend < 0:
            n_pend = _close(
                g, j, e, c, d, parent, kid0, kid1, rows, missing, blo, bhi, bknown, head, pe,
                pc, pnext, pend_g, pend_c, stack_g, stack_c,
            )  # fmt: skip
        ok = True
        for k in range(n_pend):
            x, cx = pend_g[k], pend_c[k]
            # Its neighbours among its derivable thresholds: 0 rows below all, its total
            # above (:func:`_apart`); the pair's node's from its snapshot and own ones.
            below_e, below_c, above_e, above_c = -np.inf, 0.0, np.inf, rows[x]
            if x == g:
                hi = off[1]
                a = search_left(snap_e, zero, hi, e)
                if a > 0 and snap_e[a - 1] > below_e:
                    below_e, below_c = snap_e[a - 1], snap_c[a - 1]
                while a < hi and snap_e[a] == e:
                    a += 1
                if a < hi and snap_e[a] < above_e:
                    above_e, above_c = snap_e[a], snap_c[a]
                a = search_left(own_e, zero, n_own, e)
                if a > 0 and own_e[a - 1] > below_e:
                    below_e, below_c = own_e[a - 1], own_c[a - 1]
                while a < n_own and own_e[a] == e:
                    a += 1
                if a < n_own and own_e[a] < above_e:
                    above_e, above_c = own_e[a], own_c[a]
            else:
                q = head[x * d + j]
                while q >= 0:
                    y = pe[q]
                    if below_e < y < e:
                        below_e, below_c = y, pc[q]
                    elif e < y < above_e:
                        above_e, above_c = y, pc[q]
                    q = pnext[q]
            ok = _spaced(cx, below_c, above_c, m)
            if not ok:
                break
        if ok:
            for k in range(n_pend):  # :func:`_keep`
                key = pend_g[k] * d + j
                pe[n_used], pc[n_used], pnext[n_used] = e, pend_c[k], head[key]
                head[key] = n_used
                n_used += 1
            if n_pend and pend_g[0] == g:
                _insert(own_e, own_c, n_own, e, c)
                n_own += 1
        else:
            safe[i] = False
    return n_used, -1


@numba.njit(nogil=True, cache=True)
def derived_split(tree, pool, n_used, d, split, start, scratch):  # type: ignore[no-untyped-def]
    """Each numeric split's node passes its derivable sums on its feature to its children.

    ``split``: the nodes, from ``start`` on; the missing edge first (the known rows it
    gives are the node's sums above its bound). Returns (rows in use, the split to go on
    from or -1), stopping as :func:`derived_filter` does.

    A node's sum at ``e`` (``c`` rows) passed to its children: one of them on one side of
    ``e`` gives the other (new, it holds nothing at ``e`` and its closing derives nothing
    more: its parent's sum is held, its sibling's beside). A child is on one side by its
    path bounds: none below; above, its known rows (its total, or its sum held at the
    missing edge where a missing value can reach it). Written out on scalars, as in
    :func:`derived_filter`.
    """
    parent, kid0, kid1, sfeat, rows, missing, blo, bhi, bknown = tree
    head, pe, pc, pnext = pool
    n_nodes = parent.size
    cap = pe.size
    for s in range(start, split.size):
        g = split[s]
        j = sfeat[g]
        for edge in (True, False):
            k = head[g * d + j]
            while k >= 0:
                if n_used + n_nodes > cap:
                    return n_used, s  # redone from the first: what is kept is kept
                e, c = pe[k], pc[k]
                k = pnext[k]
                if (e == MISSING_SPLIT) != edge:
                    continue
                for side in range(2):
                    a, b = (kid0[g], kid1[g]) if side == 0 else (kid1[g], kid0[g])
                    ca, cb = np.nan, np.nan
                    for w in range(2):
                        x = a if w == 0 else b
                        key = x * d + j
                        v = _side(e, blo[key], bhi[key], bknown[key] or not missing[j], rows[x])
                        if v != v and bhi[key] <= e < MISSING_SPLIT:
                            q = head[key]
                            while q >= 0:  # its sum held at the missing edge, if any
                                if pe[q] == MISSING_SPLIT:
                                    v = pc[q]
                                    break
                                q = pnext[q]
                        if w == 0:
                            ca = v
                        else:
                            cb = v
                    if ca == ca and cb != cb:
                        key = b * d + j
                        pe[n_used], pc[n_used], pnext[n_used] = e, c - ca, head[key]
                        head[key] = n_used
                        n_used += 1
    return n_used, -1


# Their cached code holds sorted_search's bisection: an edit there makes it stale.
cache_depends_on(derived_filter, sorted_search)
cache_depends_on(derived_split, sorted_search)


def _grown(a: NDArray, size: int, fill: float | int) -> NDArray:
    out = np.full(size, fill, dtype=a.dtype)
    out[: a.size] = a
    return out


@dataclass
class DerivedSums:
    """Per batch: the trees' nodes and each node's derivable thresholds (module docstring)."""

    #: Per node: parent (-1 a root), children (-1: none), numeric split's feature (-1:
    #: none), rows (NaN unknown); ``n`` in use (a split's threshold and missing side are
    #: in its children's bounds, below).
    parent: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    kid0: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    kid1: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    sfeat: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    rows: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    n: int = 0
    d: int = 0
    #: The current level's slots' nodes.
    slot_node: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    #: Per (node, feature) key ``node * d + feature``: the first of its derivable
    #: thresholds in the pool (-1: none); the pool: threshold, rows below it, next.
    head: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    pe: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    pc: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    pnext: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    used: int = 0
    #: Per (node, feature) key: the node's path bounds (its rows in ``(lo, hi]``) and
    #: whether a split on its path keeps every missing value out.
    blo: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    bhi: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    bknown: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))
    #: Per feature: whether some row of the federation misses it.
    missing: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))

    def start_batch(self, n_trees: int, d: int) -> None:
        """A batch's roots (one slot a tree), nothing derived yet."""
        self.n, self.d, self.used = 0, d, 0
        if self.missing.size != d:
            self.missing = np.ones(d, dtype=bool)
        self.head[:] = -1
        self._room(n_trees)
        self.n = n_trees
        self.slot_node = np.arange(n_trees, dtype=np.int64)

    def _room(self, n_nodes: int) -> None:
        """Room for ``n_nodes`` nodes (fresh ones blank)."""
        if n_nodes > self.parent.size:
            size = max(2 * n_nodes, 256)
            self.parent = _grown(self.parent, size, -1)
            self.kid0, self.kid1 = _grown(self.kid0, size, -1), _grown(self.kid1, size, -1)
            self.sfeat, self.rows = _grown(self.sfeat, size, -1), _grown(self.rows, size, np.nan)
            self.head = _grown(self.head, size * self.d, -1)
            self.blo = _grown(self.blo, size * self.d, -np.inf)
            self.bhi = _grown(self.bhi, size * self.d, np.inf)
            self.bknown = _grown(self.bknown, size * self.d, False)
        new = slice(self.n, n_nodes)
        self.parent[new] = self.kid0[new] = self.kid1[new] = self.sfeat[new] = -1
        self.rows[new] = np.nan
        keys = slice(self.n * self.d, n_nodes * self.d)
        self.blo[keys], self.bhi[keys], self.bknown[keys] = -np.inf, np.inf, False

    def _tree(self) -> tuple[NDArray, ...]:
        n = self.n
        return (
            self.parent[:n], self.kid0[:n], self.kid1[:n], self.sfeat[:n], self.rows[:n],
            self.missing, self.blo, self.bhi, self.bknown,
        )  # fmt: skip

    def _pool(self) -> tuple[NDArray, ...]:
        return self.head, self.pe, self.pc, self.pnext

    def _more_pool(self) -> None:
        """A pool with room for about twice the rows."""
        size = max(2 * self.pe.size, self.used + 4 * self.n + 1024)
        self.pe, self.pc = _grown(self.pe, size, 0.0), _grown(self.pc, size, 0.0)
        self.pnext = _grown(self.pnext, size, -1)

    def _scratch(self) -> tuple[NDArray, ...]:
        n = self.n + 1
        return (
            np.empty(n, np.int64), np.empty(n), np.empty(3 * n + 3, np.int64),
            np.empty(3 * n + 3),
        )  # fmt: skip

    def filter(
        self,
        node: NDArray[np.int64],
        f: NDArray[np.int64],
        cand: NDArray[np.float64],
        cand_off: NDArray[np.int64],
        below: NDArray[np.float64],
        node_rows: NDArray[np.float64],
        missing: NDArray[np.bool_],
        min_rows: int,
        safe: NDArray[np.bool_],
    ) -> None:
        """``safe`` (in place) less the candidates the rule drops; the kept ones held.

        Pairs (``node`` slots, ``f``) in the frontier's order, each with its candidates
        ``cand[cand_off[p]:cand_off[p + 1]]``, ``below`` their rows of the node, the
        node's rows ``node_rows``; ``missing``: per feature, whether a row misses it.
        """
        self.missing = np.ascontiguousarray(missing, dtype=bool)
        gnode = self.slot_node[node]
        unknown = np.isnan(self.rows[gnode])
        self.rows[gnode[unknown]] = node_rows[unknown]
        start = 0
        scratch = self._scratch()
        while start >= 0:
            self.used, start = derived_filter(
                self._tree(), self._pool(), self.used, self.d, gnode, np.asarray(f, np.int64),
                np.ascontiguousarray(cand, np.float64), np.asarray(cand_off, np.int64),
                np.ascontiguousarray(below, np.float64), min_rows, safe, start, scratch,
            )  # fmt: skip
            if start >= 0:
                self._more_pool()

    def advance(
        self,
        feature: NDArray[np.int32],
        threshold: NDArray[np.float64],
        sets: set[int],
        missing_left: NDArray[np.uint8],
        left: NDArray[np.float64],
        right: NDArray[np.float64],
        route_left: NDArray[np.int64],
        route_right: NDArray[np.int64],
        n_new: int,
    ) -> None:
        """The next level's slots from this level's splits.

        Each numeric split passes its node's derivable thresholds on its feature to its
        children.
        """
        nxt = np.full(n_new, -1, dtype=np.int64)
        slot_node = self.slot_node
        split = np.flatnonzero(feature >= 0)
        passed = np.flatnonzero((feature < 0) & (route_left >= 0))
        nxt[route_left[passed]] = slot_node[passed]  # passed through: the same node
        g = slot_node[split]
        first = self.n
        self._room(first + 2 * split.size)
        self.n = first + 2 * split.size
        ka = first + 2 * np.arange(split.size)
        kb = ka + 1
        self.parent[ka] = self.parent[kb] = g
        self.rows[ka], self.rows[kb] = left[split, STAT_ROWS], right[split, STAT_ROWS]
        self.kid0[g], self.kid1[g] = ka, kb
        unknown = np.isnan(self.rows[g])
        self.rows[g[unknown]] = self.rows[ka[unknown]] + self.rows[kb[unknown]]
        for route, kids in ((route_left, ka), (route_right, kb)):
            to = route[split]
            nxt[to[to >= 0]] = kids[to >= 0]
        d = self.d
        for kids in (ka, kb):  # a child's path bounds start as its parent's
            at = (kids[:, None] * d + np.arange(d)).ravel()
            up = (g[:, None] * d + np.arange(d)).ravel()
            self.blo[at], self.bhi[at], self.bknown[at] = (
                self.blo[up],
                self.bhi[up],
                self.bknown[up],
            )
        numeric = (feature[split] < d) & ~np.isin(split, np.fromiter(sets, np.int64))
        g, s, ka, kb = g[numeric], split[numeric], ka[numeric], kb[numeric]
        j, t, ml = feature[s].astype(np.int64), threshold[s], missing_left[s]
        self.sfeat[g] = j
        edge = t == MISSING_SPLIT  # "value known | missing": left all known, right none
        self.bknown[ka * d + j] |= edge | (ml == 0)
        self.bknown[kb * d + j] |= ~edge & (ml == 1)
        self.bhi[ka * d + j] = np.where(
            edge, self.bhi[ka * d + j], np.minimum(self.bhi[ka * d + j], t)
        )
        self.blo[kb * d + j] = np.where(edge, np.inf, np.maximum(self.blo[kb * d + j], t))
        self.slot_node = nxt
        start = 0
        scratch = self._scratch()
        while start >= 0 and g.size:
            self.used, start = derived_split(
                self._tree(), self._pool(), self.used, self.d, g, start, scratch
            )
            if start >= 0:
                self._more_pool()
