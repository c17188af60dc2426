"""The rule on derived sums in plain Python: the twin of ``secure_derived.py``'s kernels.

Red team 20's cell attack (docs/privacy-findings.md) found sums the server *derives* at
a threshold ``e`` of feature ``j`` for a node that never released ``e``, then takes
against the node's own sums at another threshold: one row, its target. Per tree, ``j``
and ``e``, write ``w(e)`` for the sum over node ``w``'s rows with ``x_j <= e``. The
server holds ``w(e)`` where ``w`` released ``e`` (Round B), and derives it where
(a) ``w``'s rows all lie on one side of ``e`` (its path bounds on ``j``: 0 below, its
known rows above; the known rows are its total when no missing value can reach ``w``,
else its sum at the "value known | missing" edge), or (b) two of a node, its children
(they partition it) are held: ``v(e) = a(e) + b(e)``, any two give the third. A slot
passed through is its node. Closing (a) and (b) per threshold gives every node's sum at
``e`` the server can form from sums at ``e`` alone, with its rows (the same arithmetic
on Round A's and Round B's exact counts).

**The rule:** for every node ``w`` and feature ``j``, the thresholds at which ``w``'s sum
is held or derived, with 0 and ``w``'s total at the ends, are 0 or at least ``m`` rows
apart; else the difference of two is a sum over 1 to ``m - 1`` of ``w``'s rows. A level's
candidates are taken in the frontier's order; a candidate is dropped when adding its sum
and closing would bring any node's derivable thresholds closer than that, else its
derivations are kept for the candidates after it and the levels below. A split passes
its node's derivable thresholds on ``j`` to its children on the feature's side rule
(a) gives them. This closes what the cell attack classified (an ancestor's sum less a
relative's or a split's total, a partition at mixed depths, the missing rows through a
"value known | missing" edge); unions of several nodes at two thresholds are the
cousins' atoms' (``secure_cousins.py``) at one threshold only.

:class:`DerivedSums` keeps, per batch, the trees' nodes (parents, children, splits,
rows) and each node's derivable thresholds per feature.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS
from .missing import MISSING_SPLIT

__all__ = ["DerivedSumsTwin"]

_INF = float("inf")


@dataclass
class DerivedSumsTwin:
    """Per batch: the trees' nodes and each node's derivable thresholds (module docstring)."""

    #: Per node: its parent (-1 a root), children, numeric split (feature, threshold,
    #: missing values left) or None, and rows (NaN unknown).
    parent: list[int] = field(default_factory=list)
    kids: list[tuple[int, ...]] = field(default_factory=list)
    split: list[tuple[int, float, bool] | None] = field(default_factory=list)
    rows: list[float] = field(default_factory=list)
    #: The current level's slots' nodes.
    slot_node: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    #: Per (node, feature): derivable thresholds (ascending) and the node's rows below each.
    points: dict[tuple[int, int], tuple[list[float], list[float]]] = field(default_factory=dict)
    #: Per feature: whether some row of the federation misses it (None: every feature may).
    missing: NDArray[np.bool_] | None = None
    _bounds: dict[tuple[int, int], tuple[float, float, bool]] = field(default_factory=dict)
    d: int = 0

    def start_batch(self, n_trees: int, d: int) -> None:
        """A batch's roots (one slot a tree), nothing derived yet."""
        self.parent, self.kids = [-1] * n_trees, [()] * n_trees
        self.split, self.rows = [None] * n_trees, [float("nan")] * n_trees
        self.slot_node = np.arange(n_trees, dtype=np.int64)
        self.points, self._bounds, self.d = {}, {}, d

    def _new(self, parent: int, rows: float) -> int:
        self.parent.append(parent)
        self.kids.append(())
        self.split.append(None)
        self.rows.append(rows)
        return len(self.parent) - 1

    # -- what the server holds --------------------------------------------------------

    def _bound(self, g: int, j: int) -> tuple[float, float, bool]:
        """Node ``g``'s path bounds on ``j`` (rows in ``(lo, hi]``), whether none misses it."""
        key = (g, j)
        got = self._bounds.get(key)
        if got is not None:
            return got
        lo, hi = -_INF, _INF
        known = self.missing is not None and not bool(self.missing[j])
        p, c = self.parent[g], g
        while p >= 0:
            s = self.split[p]
            if s is not None and s[0] == j:
                left = self.kids[p][0] == c
                t, miss_left = s[1], s[2]
                if t == MISSING_SPLIT:  # "value known | missing"
                    if left:
                        known = True
                    else:
                        lo = _INF  # every value missing: no row at or below any edge
                elif left:
                    hi = min(hi, t)
                    known |= not miss_left
                else:
                    lo = max(lo, t)
                    known |= miss_left
            p, c = self.parent[p], p
        got = (lo, hi, known)
        self._bounds[key] = got
        return got

    def _held(self, g: int, j: int, e: float) -> float | None:
        pts = self.points.get((g, j))
        if pts is None:
            return None
        k = bisect_left(pts[0], e)
        return pts[1][k] if k < len(pts[0]) and pts[0][k] == e else None

    def _value(self, g: int, j: int, e: float, pending: dict[int, float]) -> float | None:
        """Node ``g``'s rows at or below ``e`` where its sum there is derivable, else None.

        Held, pending, or its rows all on one side of ``e``.
        """
        got = pending.get(g)
        if got is None:
            got = self._held(g, j, e)
        if got is not None:
            return got
        lo, hi, known = self._bound(g, j)
        if e <= lo:
            return 0.0
        if e >= hi or e == MISSING_SPLIT:
            if known:
                rows = self.rows[g]
                return None if rows != rows else rows
            if e != MISSING_SPLIT:  # its known rows: its sum at the missing edge
                return self._held(g, j, MISSING_SPLIT)
        return None

    # -- closing ---------------------------------------------------------------------

    def _close(self, g0: int, j: int, e: float, c0: float) -> dict[int, float]:
        """The nodes whose sums at ``e`` become derivable once ``g0``'s is held (``c0`` rows).

        With their rows; ``g0`` itself included unless already derivable.
        """
        pending: dict[int, float] = {}
        stack = [(g0, c0)]
        while stack:
            g, c = stack.pop()
            if self._value(g, j, e, pending) is not None:
                continue
            pending[g] = c
            p = self.parent[g]
            if p >= 0:
                sib = [k for k in self.kids[p] if k != g]
                cp = self._value(p, j, e, pending)
                if sib:
                    if cp is not None:
                        stack.append((sib[0], cp - c))
                    else:
                        cs = self._value(sib[0], j, e, pending)
                        if cs is not None:
                            stack.append((p, c + cs))
                elif cp is None:
                    stack.append((p, c))
            ks = self.kids[g]
            if len(ks) == 2:
                ca = self._value(ks[0], j, e, pending)
                cb = self._value(ks[1], j, e, pending)
                if ca is not None and cb is None:
                    stack.append((ks[1], c - ca))
                elif cb is not None and ca is None:
                    stack.append((ks[0], c - cb))
            elif len(ks) == 1:
                stack.append((ks[0], c))
        return pending

    def _apart(self, g: int, j: int, e: float, c: float, m: int) -> bool:
        """Whether ``g``'s sum at ``e`` (``c`` rows) is 0 or ``m`` rows from its neighbours."""
        pts = self.points.get((g, j))
        below, above = 0.0, self.rows[g]
        if pts is not None:
            k = bisect_left(pts[0], e)
            if k > 0:
                below = pts[1][k - 1]
            if k < len(pts[0]):
                above = pts[1][k]
        for other in (below, above):
            if other == other and 0.5 <= abs(c - other) < m - 0.5:
                return False
        return True

    def _keep(self, j: int, e: float, pending: dict[int, float]) -> None:
        for g, c in pending.items():
            pts = self.points.setdefault((g, j), ([], []))
            k = bisect_left(pts[0], e)
            pts[0].insert(k, e)
            pts[1].insert(k, c)

    # -- the server's calls ----------------------------------------------------------

    def filter(
        self,
        node: NDArray[np.int64],
        f: NDArray[np.int64],
        cand: NDArray[np.float64],
        cand_off: NDArray[np.int64],
        below: NDArray[np.float64],
        node_rows: NDArray[np.float64],
        missing: NDArray[np.bool_] | None,
        min_rows: int,
        safe: NDArray[np.bool_],
    ) -> None:
        """``safe`` (in place) less the candidates the rule drops; the kept ones held.

        Pairs (``node`` slots, ``f``) in the frontier's order, each with its candidates
        ``cand[cand_off[p]:cand_off[p + 1]]``, ``below`` their rows of the node, the
        node's rows ``node_rows``; ``missing``: per feature, whether a row misses it.
        """
        if missing is not None:
            self.missing = np.asarray(missing, dtype=bool)
        for p in range(node.size):
            g, j = int(self.slot_node[node[p]]), int(f[p])
            if self.rows[g] != self.rows[g]:
                self.rows[g] = float(node_rows[p])
            for i in range(int(cand_off[p]), int(cand_off[p + 1])):
                if not safe[i]:
                    continue
                e, c = float(cand[i]), float(below[i])
                pending = self._close(g, j, e, c)
                if all(self._apart(h, j, e, ch, min_rows) for h, ch in pending.items()):
                    self._keep(j, e, pending)
                else:
                    safe[i] = False

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

        Each split passes its node's derivable thresholds on its feature to its children.
        """
        nxt = np.full(n_new, -1, dtype=np.int64)
        for s in range(feature.size):
            g = int(self.slot_node[s])
            a, b = int(route_left[s]), int(route_right[s])
            if feature[s] < 0:
                if a >= 0:  # passed through: the same node
                    nxt[a] = g
                continue
            ka = self._new(g, float(left[s, STAT_ROWS]))
            kb = self._new(g, float(right[s, STAT_ROWS]))
            self.kids[g] = (ka, kb)
            if self.rows[g] != self.rows[g]:
                self.rows[g] = self.rows[ka] + self.rows[kb]
            if a >= 0:
                nxt[a] = ka
            if b >= 0:
                nxt[b] = kb
            j = int(feature[s])
            if s in sets or j >= self.d:
                continue
            self.split[g] = (j, float(threshold[s]), bool(missing_left[s]))
            pts = self.points.get((g, j))
            if pts is None:
                continue
            # The missing edge first: the known rows it gives count at thresholds above.
            held = sorted(zip(pts[0], pts[1], strict=True), key=lambda p: p[0] != MISSING_SPLIT)
            for e, c in held:
                for k, other in ((ka, kb), (kb, ka)):
                    ck = self._value(k, j, e, {})
                    if ck is not None and self._value(other, j, e, {}) is None:
                        self._keep(j, e, self._close(other, j, e, c - ck))
        self.slot_node = nxt
