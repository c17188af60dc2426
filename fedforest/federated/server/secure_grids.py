"""The server's state between levels under ``privacy="secure"``: node grids from it.

Everything is pooled information, held as flat per-pair arrays (one segment per (slot,
feature) pair of a level, found by the key ``slot * d + feature``), as the rest of the
engine does: the features' root distributions, the previous level's measured histograms
(the children's grids are quantiles of them), the candidates every earlier level of the
batch released, with each level's parents (the minimum-rows rule across levels checks a
node's candidates against its ancestors' releases) and the nodes' path bounds. A level's
grids are computed for all its pairs at once (:func:`node_grids`), and
:func:`keep_histograms` and :func:`advance` carry the state to the next level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
from joblib import effective_n_jobs
from numpy.typing import ArrayLike, NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT
from ..grid_wire import encode_grid
from ..privacy.grids import merge_thresholds, quantile_grids_at, searchsorted_segments
from ..privacy.intervals import interval_checks
from ..threads import join_ranges, thread_map, work_ranges
from .config import GrowerConfig
from .guides import Guides
from .missing import MISSING_SPLIT, add_missing_candidates
from .splitter import BestSplits

__all__ = [
    "LevelA",
    "PairSegments",
    "SecureState",
    "advance",
    "ancestors_kept",
    "ancestors_releases_numpy",
    "gather_rows",
    "gather_rows_numpy",
    "keep_histograms",
    "near_tails",
    "node_grids",
    "offsets",
    "ranges",
]

#: A node's released category groups: its pooled rows per category, each category's group.
Groups = tuple[NDArray[np.float64], NDArray[np.int32]]

#: A node's grid has up to this many bins per quantile level (times ``n_bins``): 4 sends
#: 16 % fewer bytes than 8 at 100k rows at the same accuracy (docs/privacy-findings.md,
#: "What it costs").
_GRID_FACTOR = 4
#: A level's grids are made in threads, on ranges of pairs, from this many edges on.
PARALLEL_EDGES = 50_000


@dataclass
class SecureState:
    """What the server keeps between levels under ``"secure"`` (pooled information only)."""

    min_rows: int
    numeric: NDArray[np.int64]
    #: Root distribution of each feature (numeric ones; empty for categorical ones).
    root_edges: list[NDArray[np.float64]]
    root_mass: list[NDArray[np.float64]]
    root_lo: NDArray[np.float64]
    root_hi: NDArray[np.float64]
    #: The targets' standardisation ``z = (y - y_center) / y_scale``: floats, or one per
    #: output (arrays) for multi-output y; criterion="poisson" has center 0 (``poisson``).
    y_center: float | NDArray[np.float64] = 0.0
    y_scale: float | NDArray[np.float64] = 1.0
    poisson: bool = False
    #: Under "dp": where each output's targets lie (from the noisy histogram of asinh(y)).
    y_lo: NDArray[np.float64] | None = None
    y_hi: NDArray[np.float64] | None = None
    n_rows: float = 0.0
    #: class_weight="balanced": the pooled class counts (a masked sum), else None.
    class_counts: NDArray[np.float64] | None = None
    #: Per frontier slot: path bounds of every feature, shape (n_slots, d).
    lo: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 0)))
    hi: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 0)))
    #: Per frontier slot: its parent's slot at the previous level (-1: a root).
    parent: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    #: Previous level's measured histograms of its numeric pairs, found by the pair's key
    #: ``slot * d + feature``: edges (``g + 1``) and masses (``g``) per pair.
    measured: PairSegments = field(default_factory=lambda: PairSegments.empty())
    measured_mass: PairSegments = field(default_factory=lambda: PairSegments.empty())
    #: Every earlier level of the batch: its slots' parents (slots of the level before) and
    #: its released candidates, per (slot, feature) pair: (threshold, the node's rows with
    #: x <= threshold, its rows). The minimum-rows rule checks a node's candidates against
    #: all its ancestors' releases on the feature (:func:`node_grids` finds them).
    #: and its category groups, per pair key: (the node's rows per category, the groups).
    history: list[
        tuple[
            NDArray[np.int64],
            PairSegments,
            dict[int, tuple[NDArray[np.float64], NDArray[np.int32]]],
        ]
    ] = field(default_factory=list)
    #: The ancestors' releases this level's numeric pairs are checked against: rows
    #: (threshold, the ancestor's rows below it, its rows, 1 for the parent's).
    checks: PairSegments = field(default_factory=lambda: PairSegments.empty(4))
    #: This level's cuts (:func:`level_cuts`): each one's pair keys (``cut_off``), its
    #: ancestor's thresholds (``thr_off``), for the partition rule (``privacy/partitions.py``).
    cuts: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]] = (
        field(default_factory=lambda: _no_cuts())
    )
    #: This level's released candidates: (threshold, the node's rows below it, its rows).
    released: PairSegments = field(default_factory=lambda: PairSegments.empty(3))
    #: This level's released category groups, per pair key (rows per category, groups).
    groups: dict[int, Groups] = field(default_factory=dict)
    #: This level's histograms, kept for the next one.
    current: PairSegments = field(default_factory=lambda: PairSegments.empty())
    current_mass: PairSegments = field(default_factory=lambda: PairSegments.empty())
    #: Guided candidates (``server/guides.py``; "secure" only): per (tree, feature), the
    #: thresholds the tree's earlier levels found best, which join the grids.
    guides: Guides | None = None
    #: The root distributions as segments (key: the feature), for :func:`node_grids`.
    root_pool: PairSegments = field(init=False)
    root_pool_mass: PairSegments = field(init=False)

    def __post_init__(self) -> None:
        self.root_pool = PairSegments.of(self.root_edges)
        self.root_pool_mass = PairSegments.of(self.root_mass)

    def start_batch(self, n_trees: int, d: int) -> None:
        """Roots: bounds are the features' outer bounds; no measured histogram yet."""
        self.lo = np.tile(self.root_lo, (n_trees, 1))
        self.hi = np.tile(self.root_hi, (n_trees, 1))
        self.parent = np.full(n_trees, -1, dtype=np.int64)
        self.measured = self.current = PairSegments.empty()
        self.measured_mass = self.current_mass = PairSegments.empty()
        self.history, self.checks = [], PairSegments.empty(4)
        self.released, self.groups, self.cuts = PairSegments.empty(3), {}, _no_cuts()

    def ancestors_groups(self, node: int, f: int) -> list[Groups]:
        """The category groups the ancestors of ``node`` (a slot) released on feature ``f``."""
        d, up, found = self.lo.shape[1], int(self.parent[node]), []
        for parents, _, groups in reversed(self.history):
            if up < 0:
                break
            if up * d + f in groups:
                found.append(groups[up * d + f])
            up = int(parents[up]) if parents.size else -1
        return found


#: :meth:`PairSegments.find` looks keys up in a table over ``0..max(key)`` when that range
#: holds at most this many entries a key (plus :data:`TABLE_MIN`), else searches them sorted.
TABLE_SPREAD = 8
TABLE_MIN = 4096


@dataclass
class PairSegments:
    """Per (slot, feature) pair of a level, a segment of one flat array.

    Segment ``i`` (``values[off[i]:off[i + 1]]``) belongs to the pair with key ``key[i]``
    (``slot * d + feature``; keys are unique).
    """

    key: NDArray[np.int64]
    off: NDArray[np.int64]
    values: NDArray[np.float64]
    # Made by the first find (a level's releases are looked up at every deeper level, most
    # segments built never): each key's segment in a table over 0..max(key) (-1 past it),
    # unless the keys are few in that range; then the keys' order and the keys in it.
    _table: NDArray[np.int64] | None = field(default=None, init=False, repr=False, compare=False)
    _order: NDArray[np.int64] | None = field(default=None, init=False, repr=False, compare=False)
    _sorted: NDArray[np.int64] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def empty(cls, width: int = 0) -> PairSegments:
        """No segment (values of ``width`` columns; 0: one-dimensional)."""
        values = np.zeros((0, width)) if width else np.zeros(0)
        return cls(np.zeros(0, np.int64), np.zeros(1, np.int64), values)

    @classmethod
    def of(cls, arrays: list[NDArray[np.float64]]) -> PairSegments:
        """One segment per array, keyed by its index."""
        off = offsets([a.size for a in arrays])
        values = np.concatenate(arrays) if arrays else np.zeros(0)
        return cls(np.arange(len(arrays), dtype=np.int64), off, values)

    def find(self, keys: NDArray[np.int64]) -> NDArray[np.int64]:
        """The segment of each key, -1 where there is none."""
        if not self.key.size:
            return np.full(keys.size, -1, dtype=np.int64)
        if self._table is None and self._order is None:
            top = int(self.key.max()) + 1
            if self.key.min() >= 0 and top <= TABLE_SPREAD * self.key.size + TABLE_MIN:
                table = np.full(top + 1, -1, dtype=np.int64)
                table[self.key] = np.arange(self.key.size)
                if np.array_equal(table[self.key], np.arange(self.key.size)):
                    self._table = table  # else a key repeats: the sorted search, as before
            if self._table is None:
                self._order = np.argsort(self.key, kind="stable")
                self._sorted = self.key[self._order]
        if self._table is not None:
            top = self._table.size - 1
            return self._table[np.where((keys >= 0) & (keys < top), keys, top)]
        assert self._order is not None and self._sorted is not None
        order = self._order
        at = order[np.minimum(np.searchsorted(self._sorted, keys), order.size - 1)]
        return np.where(self.key[at] == keys, at, -1).astype(np.int64)

    def take(self, seg: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[Any]]:
        """The segments ``seg`` (``-1``: an empty one), one after the other, and offsets."""
        found = seg >= 0
        if not found.any():
            return np.zeros(seg.size + 1, dtype=np.int64), self.values[:0]
        start = np.where(found, self.off[np.maximum(seg, 0)], 0)
        end = np.where(found, self.off[np.maximum(seg, 0) + 1], 0)
        out_off = offsets(end - start)
        out = np.empty((int(out_off[-1]),) + self.values.shape[1:], dtype=self.values.dtype)
        gather_rows(_as_2d(self.values), start, end, out_off, _as_2d(out))
        return out_off, out


def _as_2d(a: NDArray[Any]) -> NDArray[Any]:
    """A contiguous view with one column per value (rows of a 1-D array: one each)."""
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))


@numba.njit(nogil=True, cache=True)
def gather_rows(src, start, end, out_off, out):  # type: ignore[no-untyped-def]
    """Rows ``src[start[i]:end[i]]`` into ``out[out_off[i]:]``, for each ``i`` with rows.

    Pairs without rows (``end <= start``) leave ``out`` as it is: two calls with the pairs
    split between two sources fill one output.
    """
    for i in range(start.shape[0]):
        o = out_off[i]
        for r in range(start[i], end[i]):
            for c in range(src.shape[1]):
                out[o, c] = src[r, c]
            o += 1


def gather_rows_numpy(
    src: NDArray[Any],
    start: NDArray[np.int64],
    end: NDArray[np.int64],
    out_off: NDArray[np.int64],
    out: NDArray[Any],
) -> None:
    """NumPy twin of :func:`gather_rows`."""
    n = np.maximum(end - start, 0)
    out[ranges(out_off[:-1], out_off[:-1] + n)] = src[ranges(start, start + n)]


def ranges(start: NDArray[np.int64], end: NDArray[np.int64]) -> NDArray[np.int64]:
    """``np.concatenate([np.arange(a, b) for a, b in zip(start, end)])``, vectorised."""
    n = np.asarray(end - start, dtype=np.int64)
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.cumsum(n) - n
    return np.arange(total, dtype=np.int64) - np.repeat(first - start, n)


def offsets(counts: ArrayLike) -> NDArray[np.int64]:
    """Offsets of consecutive segments of ``counts`` entries (``off[0] == 0``)."""
    counts = np.asarray(counts)
    off = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off


@dataclass
class LevelA:
    """What Round A taught the server about one level (pooled), for Round B."""

    pooled: NDArray[np.float64]
    grid_off: NDArray[np.int64]
    grid: NDArray[np.float64]
    cum: NDArray[np.float64]  # (n_grid, 2): pooled rows and weight with x <= edge
    #: The histograms' weight column counts rows (``hist_rows``: the clients weigh rows by
    #: their classes, which a bin of few rows would give away; ``weights.rows_hist``).
    rows_only: bool = False

    def node_weight(self, node: NDArray[np.int64]) -> NDArray[np.float64]:
        """The nodes' totals of the histograms' weight column (their rows if ``rows_only``)."""
        return np.ascontiguousarray(self.pooled[node, STAT_ROWS if self.rows_only else STAT_WEIGHT])


def node_grids(
    state: SecureState,
    cfg: GrowerConfig,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    n_categories: NDArray[np.int64],
    node_rows: NDArray[np.float64],
    shift: NDArray[np.float64],
    missing: NDArray[np.bool_] | None = None,
    tree: NDArray[np.int64] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.float64], dict[str, NDArray[Any]]]:
    """Each pair's grid: codes for categories, quantiles of its source distribution else.

    Returns the grids' offsets, the grids as the clients rebuild them (the quantile edges
    snapped to their pair's lattice, ``grid_wire``) and the arrays they travel as.

    ``shift`` (per pair, in ``(0, 1]``) offsets the quantile levels: drawn per tree from
    the seed, it gives the trees different grids (finer resolution for the forest). A
    feature with missing values (``missing``, per feature) ends its grids with
    :data:`~fedforest.federated.server.missing.MISSING_SPLIT`: Round A then counts the
    node's rows whose value is known, for the minimum-rows rule of that candidate.
    """
    assert cfg.n_bins is not None
    n_pairs = int(pair_off[-1])
    d = state.lo.shape[1]
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
    n_cat = n_categories[pair_feat]
    g_max = _GRID_FACTOR * cfg.n_bins
    sel = np.flatnonzero(n_cat == 0)
    node, f = pair_node[sel], pair_feat[sel].astype(np.int64)
    n_out = np.clip(node_rows[node] // state.min_rows, 1, g_max).astype(np.int64)
    lo, hi = state.lo[node, f], state.hi[node, f]
    # Each pair's source: its parent's measured histogram of the feature, else the root's,
    # found in a pool of both (shared sources are not copied).
    key = state.parent[node] * d + f
    src = state.measured.find(key)
    measured = src >= 0
    root, root_mass = state.root_pool, state.root_pool_mass
    meas, meas_mass = state.measured, state.measured_mass
    edges = np.concatenate([root.values, meas.values])
    mass = np.concatenate([root_mass.values, meas_mass.values])
    edge_at, mass_at, n_mass = root.off[f], root_mass.off[f], np.diff(root_mass.off)[f]
    edge_at[measured] = root.values.size + meas.off[src[measured]]
    mass_at[measured] = root_mass.values.size + meas_mass.off[src[measured]]
    n_mass[measured] = np.diff(meas_mass.off)[src[measured]]
    out_off = offsets(np.maximum(n_out - 1, 0))
    out = np.empty(int(out_off[-1]))
    shift = shift[sel]
    # Each pair's grid depends on its own arguments: ranges of pairs run in threads.
    threads = effective_n_jobs(cfg.n_jobs)
    n_threads = threads if out.size >= PARALLEL_EDGES else 1
    parts = work_ranges(n_mass + n_out, n_threads)

    def grids(r: tuple[int, int]) -> None:
        a, b = r
        quantile_grids_at(
            edges, edge_at[a:b], mass, mass_at[a:b], n_mass[a:b], lo[a:b], hi[a:b],
            n_out[a:b], shift[a:b], out_off[a : b + 1], out,
        )  # fmt: skip

    thread_map(grids, parts, n_threads)
    # The ancestors' thresholds inside the node's path bounds join its grid, so that Round A
    # counts the node's rows below each of them (for the rules in Round B: every count is
    # exact).
    owner, anc_rel = _ancestors_releases(state, node, f, node_rows[node], threads)
    anc_off = offsets(np.bincount(owner, minlength=sel.size))
    has = np.diff(anc_off) > 0
    state.checks = PairSegments((node * d + f)[has], offsets(np.diff(anc_off)[has]), anc_rel)
    thr = anc_rel[:, 0]
    inside = (thr > lo[owner]) & (thr < hi[owner])
    # And the thresholds of the ancestors whose cuts at this level the pair is in.
    cut_owner, cut_thr = level_cuts(state, node, f, lo, hi)
    owner = np.concatenate([owner[inside], cut_owner])
    by = np.argsort(owner, kind="stable")
    thr = np.concatenate([thr[inside], cut_thr])[by]
    thr_off = offsets(np.bincount(owner, minlength=sel.size))
    has |= np.diff(thr_off) > 0
    out, out_off = _merged(out, out_off, has, thr, thr_off, parts, n_threads)
    extra = [(thr, thr_off)]
    if state.guides is not None and tree is not None:  # guided candidates (guides.py)
        g_off, g_thr = state.guides.find(np.asarray(tree)[node], f, lo, hi)
        out, out_off = _merged(out, out_off, np.diff(g_off) > 0, g_thr, g_off, parts, n_threads)
        extra.append((g_thr, g_off))
    if missing is not None and missing.any():
        out_off, out = add_missing_candidates(out_off, out, missing[f])
    exact = _exact_edges(out, out_off, extra) | (out == MISSING_SPLIT)
    if sel.size < n_pairs:  # categorical pairs: their codes, exact
        counts = np.zeros(n_pairs, dtype=np.int64)
        counts[sel] = np.diff(out_off)
        cat = np.flatnonzero(n_cat >= 2)
        counts[cat] = n_cat[cat] - 1
        grid_off = offsets(counts)
        owner = np.repeat(np.arange(n_pairs), counts)
        grid = np.arange(int(grid_off[-1]), dtype=np.float64) - grid_off[owner]  # the codes
        numeric = n_cat[owner] == 0
        grid[numeric] = out
        every = ~numeric
        every[numeric] = exact
        out, out_off, exact = grid, grid_off, every
    lattice = np.column_stack([state.root_lo, state.root_hi])  # per feature (grid_wire)
    wire, grid = encode_grid(out, out_off, pair_feat, exact, lattice, threads)
    return out_off, grid, wire


def _exact_edges(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    extra: list[tuple[NDArray[np.float64], NDArray[np.int64]]],
) -> NDArray[np.bool_]:
    """The edges of each pair's grid that equal one of its thresholds in ``extra``.

    ``extra`` holds ``(values, off)`` segments per pair (the ancestors' thresholds, the
    guides), which joined the grids: those edges keep their value on the wire
    (``grid_wire``), the rest may snap to the lattice.
    """
    exact = np.zeros(grid.size, dtype=bool)
    for values, off in extra:
        at = np.zeros(values.size, dtype=np.int64)
        searchsorted_segments(grid, grid_off, values, off, at)  # each one's place in its grid
        ends = np.repeat(grid_off[1:], np.diff(off))
        hit = at < ends
        hit[hit] = grid[at[hit]] == values[hit]
        exact[at[hit]] = True
    return exact


def _merged(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    merge: NDArray[np.bool_],
    thr: NDArray[np.float64],
    thr_off: NDArray[np.int64],
    parts: list[tuple[int, int]],
    n_threads: int,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """``merge_thresholds`` of the pairs' grids, each range of pairs in ``parts`` in a thread.

    Each range's grids are merged into a buffer of its own; the buffers are joined in
    order (the same grids as one call over every pair).
    """

    def run(r: tuple[int, int]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        a, b = r
        out = np.empty(int(grid_off[b] - grid_off[a] + thr_off[b] - thr_off[a]))
        off = np.empty(b - a + 1, dtype=np.int64)
        merge_thresholds(grid, grid_off[a : b + 1], merge[a:b], thr, thr_off[a : b + 1], out, off)
        return out[: off[-1]], off

    out_off, out = join_ranges(thread_map(run, parts, n_threads))
    return out, out_off


def keep_histograms(
    state: SecureState,
    level: LevelA,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    n_categories: NDArray[np.int64],
) -> None:
    """Keep this level's numeric histograms as distributions for the children's grids."""
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
    n_grid = np.diff(level.grid_off)
    p = np.flatnonzero((n_categories[pair_feat] == 0) & (n_grid > 0))
    node, f = pair_node[p], pair_feat[p].astype(np.int64)
    # Per pair: edges (lo, its grid, hi) and cumulative weights (0, at the grid, the node's).
    off = offsets(n_grid[p] + 2)
    inner = np.ones(int(off[-1]), dtype=bool)
    inner[off[:-1]] = inner[off[1:] - 1] = False
    take = ranges(level.grid_off[p], level.grid_off[p + 1])
    edges = np.empty(inner.size)
    edges[inner] = level.grid[take]
    edges[off[:-1]], edges[off[1:] - 1] = state.lo[node, f], state.hi[node, f]
    cum = np.empty(inner.size)
    cum[inner] = level.cum[take, 1]
    cum[off[:-1]], cum[off[1:] - 1] = 0.0, level.node_weight(node)
    # A grid's MISSING_SPLIT edge: the known values end there (the missing rows are in no
    # distribution); the histogram then ends at the last finite edge, at the known weight.
    last = off[1:] - 2
    gone = edges[last] == MISSING_SPLIT
    if gone.any():
        cum[last[gone] + 1] = cum[last[gone]]
        edges[last[gone]] = edges[last[gone] - 1]
        keep = np.ones(edges.size, dtype=bool)
        keep[last[gone]] = False
        edges, cum = edges[keep], cum[keep]
        off = offsets(np.diff(off) - gone)
    mass = np.delete(cum[1:] - cum[:-1], off[1:-1] - 1)
    key = node * state.lo.shape[1] + f
    state.current = PairSegments(key, off, edges)
    state.current_mass = PairSegments(key, off - np.arange(off.size), np.maximum(mass, 0.0))


def advance(state: SecureState, best: BestSplits, routes: dict[str, NDArray[Any]]) -> None:
    """Path bounds and parents of the next level's slots, from this level's splits."""
    n_new = int(max(routes["route_left"].max(initial=-1), routes["route_right"].max(initial=-1)))
    n_new += 1
    d = state.lo.shape[1]
    lo = np.zeros((n_new, d))
    hi = np.zeros((n_new, d))
    parent = np.full(n_new, -1, dtype=np.int64)
    split = np.flatnonzero(best.feature >= 0)
    f = best.feature[split].astype(np.int64)
    # Numeric splits narrow the child's bounds on their feature (set splits do not).
    sets = np.fromiter(best.sets, dtype=np.int64, count=len(best.sets))
    # (a "value known | missing" split narrows nothing: its right child's values are all
    # missing, and a split that sends missing rows left has them above its threshold)
    numeric = ~np.isin(split, sets) & (f < d) & (best.threshold[split] != MISSING_SPLIT)
    for side, route in enumerate((routes["route_left"], routes["route_right"])):
        child = np.asarray(route[split], dtype=np.int64)
        there = child >= 0
        c, i = child[there], split[there]
        lo[c], hi[c], parent[c] = state.lo[i], state.hi[i], i
        n = there & numeric
        c, g, t = child[n], f[n], best.threshold[split[n]]
        if side == 0:  # min(hi, t) and max(lo, t), as Python's
            hi[c, g] = np.where(t < hi[c, g], t, hi[c, g])
        else:
            lo[c, g] = np.where(t > lo[c, g], t, lo[c, g])
    # This level's parents and releases join the history the children's rule reads.
    state.history.append((state.parent, state.released, state.groups))
    state.lo, state.hi, state.parent = lo, hi, parent
    state.measured, state.measured_mass = state.current, state.current_mass
    state.current, state.current_mass = PairSegments.empty(), PairSegments.empty()
    state.checks, state.released, state.groups = PairSegments.empty(4), PairSegments.empty(3), {}
    state.cuts = _no_cuts()


def _no_cuts() -> tuple[
    NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]
]:
    one = np.zeros(1, dtype=np.int64)
    return one, np.zeros(0, dtype=np.int64), one.copy(), np.zeros(0)


def level_cuts(
    state: SecureState,
    node: NDArray[np.int64],
    f: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The level's cuts on a feature, kept in ``state.cuts``; the thresholds they need.

    A cut: an ancestor two levels up or more that released the feature, whose
    descendants at this level are all slots with a pair on it (``2 ** steps`` pairs: no
    leaf on the way); they partition its rows (``privacy/partitions.py``). Per pair
    (``node``, ``f``: the level's numeric pairs), up the path a level at a time for all
    at once. Returns, for the grids, each cut's thresholds inside its pairs' path
    bounds (``lo``, ``hi``) and their pairs (indices into ``node``), so that Round A
    counts every pair's rows below them.
    """
    d, depth = state.lo.shape[1], len(state.history)
    keys, sizes, thr, thr_n = [], [], [], []
    owners, found = [np.zeros(0, np.int64)], [np.zeros(0)]
    up = state.parent[node] if node.size else np.zeros(0, np.int64)
    for k in range(depth - 2, -1, -1):
        parents = state.history[k + 1][0]
        up = np.where(up >= 0, parents[np.maximum(up, 0)], -1) if parents.size else up * 0 - 1
        there = np.flatnonzero(up >= 0)
        uniq, inv, count = np.unique(
            up[there] * d + f[there], return_inverse=True, return_counts=True
        )
        released = state.history[k][1]
        seg = released.find(uniq)
        full = (count == 2 ** (depth - k)) & (seg >= 0)
        if not full.any():
            continue
        inv = inv.ravel()
        member = there[full[inv]]
        group = (np.cumsum(full) - 1)[inv[full[inv]]]
        by = np.lexsort((member, group))
        member, group = member[by], group[by]
        t_off, t = released.take(seg[full])
        keys.append(node[member] * d + f[member])
        sizes.append(count[full])
        thr.append(t[:, 0])
        thr_n.append(np.diff(t_off))
        own = np.repeat(member, np.diff(t_off)[group])
        x = t[ranges(t_off[group], t_off[group + 1]), 0]
        inside = (x > lo[own]) & (x < hi[own])
        owners.append(own[inside])
        found.append(x[inside])
    if keys:
        state.cuts = (
            offsets(np.concatenate(sizes)),
            np.concatenate(keys),
            offsets(np.concatenate(thr_n)),
            np.concatenate(thr),
        )
    else:
        state.cuts = _no_cuts()
    return np.concatenate(owners), np.concatenate(found)


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


def _ancestors_releases(
    state: SecureState,
    node: NDArray[np.int64],
    f: NDArray[np.int64],
    rows: NDArray[np.float64],
    n_threads: int = 1,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The releases the rules check each pair (``node``, ``f``) against, pair after pair.

    Up the path level by level (a lookup per level for all pairs at once) to each pair's
    segment of every earlier level's releases; then :func:`ancestors_kept` keeps, per
    pair, the parent's all and of the others' those the rules need (see
    :func:`ancestors_releases_numpy`, its twin). Returns each row's pair (sorted) and the
    rows (threshold, the ancestor's rows below it, its rows, 1 for the parent's). With
    ``n_threads`` > 1 (and :data:`PARALLEL_EDGES` releases) ranges of pairs run in threads,
    each into a buffer of its own, joined in order: the same rows.
    """
    d, n_lev = state.lo.shape[1], len(state.history)
    up = state.parent[node] if node.size else np.zeros(0, np.int64)
    start = np.zeros((n_lev, node.size), dtype=np.int64)
    end = np.zeros((n_lev, node.size), dtype=np.int64)
    pool, base = [np.zeros((0, 3))], 0
    for lev, k in enumerate(range(n_lev - 1, -1, -1)):  # lev 0: the parent's level
        parents, released, _ = state.history[k]
        there = up >= 0
        seg = np.where(there, released.find(np.where(there, up, 0) * d + f), -1)
        found = seg >= 0
        start[lev, found] = base + released.off[seg[found]]
        end[lev, found] = base + released.off[seg[found] + 1]
        pool.append(released.values)
        base += released.values.shape[0]
        up = np.where(there, parents[np.maximum(up, 0)], -1) if parents.size else up * 0 - 1
    n_kept = np.zeros(node.size, dtype=np.int64)
    all_rel = np.ascontiguousarray(np.concatenate(pool), dtype=np.float64)
    work = (end - start).sum(axis=0)
    n = n_threads if int(work.sum()) >= PARALLEL_EDGES else 1

    def run(r: tuple[int, int]) -> NDArray[np.float64]:
        a, b = r
        s, e = np.ascontiguousarray(start[:, a:b]), np.ascontiguousarray(end[:, a:b])
        out = np.empty((int(work[a:b].sum()), 4))
        total = ancestors_kept(all_rel, s, e, rows[a:b], int(state.min_rows), n_kept[a:b], out)
        return out[:total]

    done = thread_map(run, work_ranges(work, n), n)
    kept = done[0] if len(done) == 1 else np.concatenate(done)
    return np.repeat(np.arange(node.size, dtype=np.int64), n_kept), kept


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
    o = 0
    for p in range(start.shape[1]):
        b0, b1, b_up = 0, 0, True  # B's releases (none yet), whether they increase
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


@numba.njit(nogil=True, cache=True)
def _rising(pool, a0, a1):  # type: ignore[no-untyped-def]
    # Whether the thresholds pool[a0:a1, 0] never decrease (NaN: they do not).
    for i in range(a0 + 1, a1):
        if not pool[i, 0] >= pool[i - 1, 0]:
            return False
    return True


@numba.njit(nogil=True, cache=True)
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


def ancestors_releases_numpy(
    state: SecureState, node: NDArray[np.int64], f: NDArray[np.int64], rows: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """NumPy twin of :func:`_ancestors_releases` (its level-by-level reference).

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
