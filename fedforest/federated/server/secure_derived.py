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
two kernels' compile CPU on a fresh cache 2.7 + 1.0 s -> 1.7 + 0.6 s.
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


@inner_kernel
def _held(pool, key, e):  # type: ignore[no-untyped-def]
    """The rows of (node, feature) ``key``'s held or derived sum at ``e``, else NaN."""
    head, pe, pc, pnext = pool
    k = head[key]
    while k >= 0:
        if pe[k] == e:
            return pc[k]
        k = pnext[k]
    return np.nan


@inner_kernel
def _one_side(g, j, e, d, tree):  # type: ignore[no-untyped-def]
    """Node ``g``'s rows at or below ``e`` where its bounds put them all on one side, else NaN.

    None below ``lo``; above ``hi`` (or at the missing edge) its total, where no missing
    value can reach it (else its known rows, which its sum at the missing edge gives).
    """
    rows, missing, blo, bhi, bknown = tree[4], tree[5], tree[6], tree[7], tree[8]
    key = g * d + j
    if e <= blo[key]:
        return 0.0
    if (e >= bhi[key] or e == MISSING_SPLIT) and (bknown[key] or not missing[j]):
        return rows[g]
    return np.nan


@inner_kernel
def _value(g, j, e, d, tree, pool, pend_g, pend_c, n_pend):  # type: ignore[no-untyped-def]
    """Node ``g``'s rows at or below ``e`` where its sum there is derivable, else NaN.

    Pending, held, or its rows all on one side of ``e`` (its path bounds: ``lo``, ``hi``,
    and whether no missing value reaches it, ``known``).
    """
    for i in range(n_pend):
        if pend_g[i] == g:
            return pend_c[i]
    got = _one_side(g, j, e, d, tree)
    key = g * d + j
    if got == got or pool[0][key] < 0:  # on one side, or nothing held on the feature
        return got
    got = _held(pool, key, e)
    if got == got or e == MISSING_SPLIT or e < tree[7][key]:
        return got
    return _held(pool, key, MISSING_SPLIT)  # its known rows: its sum at the missing edge


@inner_kernel
def _close(g0, j, e, c0, d, tree, pool, pend_g, pend_c, stack_g, stack_c):  # type: ignore[no-untyped-def]
    """The nodes whose sums at ``e`` become derivable once ``g0``'s is held (``c0`` rows).

    Into ``pend_*``, with their rows; returns how many (``g0`` first, unless held).
    """
    parent, kid0, kid1 = tree[0], tree[1], tree[2]
    n_pend, top = np.int64(0), 1  # n_pend not a literal 0: _value compiled once
    stack_g[0], stack_c[0] = g0, c0
    while top > 0:
        top -= 1
        g, c = stack_g[top], stack_c[top]
        held = _value(g, j, e, d, tree, pool, pend_g, pend_c, n_pend)
        if held == held:
            continue
        pend_g[n_pend], pend_c[n_pend] = g, c
        n_pend += 1
        p = parent[g]
        if p >= 0:
            s = kid1[p] if kid0[p] == g else kid0[p]
            cp = _value(p, j, e, d, tree, pool, pend_g, pend_c, n_pend)
            if cp == cp:
                stack_g[top], stack_c[top] = s, cp - c
                top += 1
            else:
                cs = _value(s, j, e, d, tree, pool, pend_g, pend_c, n_pend)
                if cs == cs:
                    stack_g[top], stack_c[top] = p, c + cs
                    top += 1
        a, b = kid0[g], kid1[g]
        if a >= 0:
            ca = _value(a, j, e, d, tree, pool, pend_g, pend_c, n_pend)
            cb = _value(b, j, e, d, tree, pool, pend_g, pend_c, n_pend)
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
def _apart(g, j, e, c, m, d, rows, pool):  # type: ignore[no-untyped-def]
    """Whether ``g``'s sum at ``e`` (``c`` rows) is 0 or ``m`` rows from its neighbours.

    Its neighbours among its derivable thresholds; 0 rows below all, its total above.
    """
    head, pe, pc, pnext = pool[0], pool[1], pool[2], pool[3]
    below_e, below_c, above_e, above_c = -np.inf, 0.0, np.inf, rows[g]
    k = head[g * d + j]
    while k >= 0:
        x = pe[k]
        if below_e < x < e:
            below_e, below_c = x, pc[k]
        elif e < x < above_e:
            above_e, above_c = x, pc[k]
        k = pnext[k]
    return _spaced(c, below_c, above_c, m)


@inner_kernel
def _insert(es, cs, n, e, c):  # type: ignore[no-untyped-def]
    """``(e, c)`` into the increasing ``es[:n]`` (and ``cs``), room permitting."""
    at = n
    while at > 0 and es[at - 1] > e:
        es[at], cs[at] = es[at - 1], cs[at - 1]
        at -= 1
    es[at], cs[at] = e, c


@inner_kernel
def _sorted_points(key, pool):  # type: ignore[no-untyped-def]
    """The thresholds held for (node, feature) ``key`` and their rows, in increasing order."""
    head, pe, pc, pnext = pool[0], pool[1], pool[2], pool[3]
    n, k = 0, head[key]
    while k >= 0:
        n += 1
        k = pnext[k]
    es, cs = np.empty(n), np.empty(n)
    i, k = n - 1, head[key]
    while k >= 0:  # newest first: laid out from the end, mostly increasing
        es[i], cs[i] = pe[k], pc[k]
        i -= 1
        k = pnext[k]
    for i in range(1, n):  # an insertion sort: few moves on a nearly sorted list
        _insert(es, cs, i, es[i], cs[i])
    return es, cs


@inner_kernel
def _snapped(g, j, e, d, tree, pool, es, cs):  # type: ignore[no-untyped-def]
    """:func:`_value` of ``g`` with no pending node, its held thresholds ``es`` (sorted)."""
    got = _one_side(g, j, e, d, tree)
    if got == got:
        return got
    zero = np.int64(0)  # not a literal: one signature of search_left (derived_filter)
    at = search_left(es, zero, es.size, e)
    if at < es.size and es[at] == e:
        return cs[at]
    if e == MISSING_SPLIT or e < tree[7][g * d + j]:
        return np.nan
    # its known rows: its sum at the missing edge
    at = search_left(es, zero, es.size, MISSING_SPLIT)
    return cs[at] if at < es.size and es[at] == MISSING_SPLIT else np.nan


@inner_kernel
def _apart_sorted(e, c, m, total, snap_e, snap_c, own_e, own_c, n_own):  # type: ignore[no-untyped-def]
    """:func:`_apart` for the pair's own node, from its sorted thresholds."""
    below_e, below_c, above_e, above_c = -np.inf, 0.0, np.inf, total
    for es, cs, n in ((snap_e, snap_c, snap_e.size), (own_e, own_c, n_own)):
        at = search_left(es, np.int64(0), n, e)
        if at > 0 and es[at - 1] > below_e:
            below_e, below_c = es[at - 1], cs[at - 1]
        while at < n and es[at] == e:
            at += 1
        if at < n and es[at] < above_e:
            above_e, above_c = es[at], cs[at]
    return _spaced(c, below_c, above_c, m)


@inner_kernel
def _keep(j, e, d, pool, pend_g, pend_c, n_pend, n_used):  # type: ignore[no-untyped-def]
    head, pe, pc, pnext = pool
    for i in range(n_pend):
        key = pend_g[i] * d + j
        pe[n_used], pc[n_used], pnext[n_used] = e, pend_c[i], head[key]
        head[key] = n_used
        n_used += 1
    return n_used


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
    """
    n_nodes = tree[0].size
    pend_g, pend_c, stack_g, stack_c = scratch
    rows = tree[4]
    cap = pool[1].size
    parent, kid0, kid1 = tree[0], tree[1], tree[2]
    owner, current, up, sib = 0, -1, -1, -1
    up_e, up_c, sib_e, sib_c = np.empty(0), np.empty(0), np.empty(0), np.empty(0)
    # The pair's node's thresholds: those held when its turn came, sorted (``snap``), and
    # those its own candidates add (``own``, kept sorted): no walk of its list a candidate.
    snap_e, snap_c = np.empty(0), np.empty(0)
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
            snap_e, snap_c = _sorted_points(g * d + j, pool)
            size = cand_off[owner + 1] - cand_off[owner]
            own_e, own_c, n_own = np.empty(size), np.empty(size), zero
            up = parent[g]
            sib = -1 if up < 0 else (kid1[up] if kid0[up] == g else kid0[up])
            up_e, up_c = _sorted_points(max(up, 0) * d + j, pool)
            sib_e, sib_c = _sorted_points(max(sib, 0) * d + j, pool)
        # The node, its parent and sibling from the pair's snapshots (their lists change
        # within the pair only at its own thresholds); a parent made derivable closes in
        # full (:func:`_close`).
        n_pend = -1
        at = search_left(own_e, zero, n_own, e)
        if not (at < n_own and own_e[at] == e):
            mine = _snapped(g, j, e, d, tree, pool, snap_e, snap_c)
            if mine == mine:
                n_pend = 0
            elif up < 0:
                pend_g[0], pend_c[0], n_pend = g, c, 1
            else:
                cp = _snapped(up, j, e, d, tree, pool, up_e, up_c)
                cs = _snapped(sib, j, e, d, tree, pool, sib_e, sib_c)
                if cp == cp and cs != cs:
                    pend_g[0], pend_c[0], pend_g[1], pend_c[1], n_pend = g, c, sib, cp - c, 2
                elif cp == cp or cs != cs:
                    pend_g[0], pend_c[0], n_pend = g, c, 1
        if n_pend < 0:
            n_pend = _close(g, j, e, c, d, tree, pool, pend_g, pend_c, stack_g, stack_c)
        ok = True
        for k in range(n_pend):
            if pend_g[k] == g:
                ok = _apart_sorted(e, c, m, rows[g], snap_e, snap_c, own_e, own_c, n_own)
            else:
                ok = _apart(pend_g[k], j, e, pend_c[k], m, d, rows, pool)
            if not ok:
                break
        if ok:
            n_used = _keep(j, e, d, pool, pend_g, pend_c, n_pend, n_used)
            if n_pend and pend_g[0] == g:
                _insert(own_e, own_c, n_own, e, c)
                n_own += 1
        else:
            safe[i] = False
    return n_used, -1


@inner_kernel
def _beside(s, j, e, d, tree, pool):  # type: ignore[no-untyped-def]
    """Node ``s``'s rows at or below ``e`` where all of them lie on one side of ``e``, else NaN.

    By its path bounds: none below; above, its known rows (its total, or its sum held at
    the missing edge where a missing value can reach it).
    """
    got = _one_side(s, j, e, d, tree)
    key = s * d + j
    if got != got and tree[7][key] <= e < MISSING_SPLIT and pool[0][key] >= 0:
        return _held(pool, key, MISSING_SPLIT)
    return got


@inner_kernel
def _pass_down(g, j, e, c, n_used, d, tree, pool, scratch):  # type: ignore[no-untyped-def]
    """Node ``g``'s sum at ``e`` (``c`` rows) passed to its children; the pool's rows in use.

    One of them on one side of ``e`` gives the other (new, it holds nothing at ``e`` and
    its closing derives nothing more: its parent's sum is held, its sibling's beside).
    """
    kid0, kid1 = tree[1], tree[2]
    pend_g, pend_c = scratch[0], scratch[1]
    for side in range(2):
        a, b = (kid0[g], kid1[g]) if side == 0 else (kid1[g], kid0[g])
        ca = _beside(a, j, e, d, tree, pool)
        cb = _beside(b, j, e, d, tree, pool)
        if ca == ca and cb != cb:
            pend_g[0], pend_c[0] = b, c - ca
            n_used = _keep(j, e, d, pool, pend_g, pend_c, np.int64(1), n_used)
    return n_used


@numba.njit(nogil=True, cache=True)
def derived_split(tree, pool, n_used, d, split, start, scratch):  # type: ignore[no-untyped-def]
    """Each numeric split's node passes its derivable sums on its feature to its children.

    ``split``: the nodes, from ``start`` on; the missing edge first (the known rows it
    gives are the node's sums above its bound). Returns (rows in use, the split to go on
    from or -1), stopping as :func:`derived_filter` does.
    """
    n_nodes = tree[0].size
    sfeat = tree[3]
    head, pe, pc, pnext = pool[0], pool[1], pool[2], pool[3]
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
                if (e == MISSING_SPLIT) == edge:
                    n_used = _pass_down(g, j, e, c, n_used, d, tree, pool, scratch)
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
