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

import numpy as np
from joblib import effective_n_jobs
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT
from ..grid_wire import encode_grid
from ..privacy.grids import (
    displaced_edges,
    merge_thresholds,
    quantile_grids_at,
    searchsorted_segments,
)
from ..scratch import ROOM
from ..threads import join_ranges, thread_map, work_ranges
from .config import GrowerConfig
from .grid_bounds import outside as _outside
from .grid_bounds import within as _within
from .guides import Guides
from .missing import MISSING_SPLIT, add_missing_candidates
from .secure_ancestors import (  # the ancestors' releases (re-exported: tests import them here)
    PARALLEL_EDGES,
    ReleasePool,
    ancestors_kept,
    ancestors_releases_numpy,
    near_tails,
)
from .secure_ancestors import ancestors_releases as _ancestors_releases
from .secure_derived import DerivedSums
from .secure_segments import (  # per-pair segments (re-exported: fallback.py and tests)
    PairSegments,
    gather_rows,
    gather_rows_numpy,
    offsets,
    ranges,
)
from .splitter import BestSplits

__all__ = [
    "LevelA",
    "PairSegments",
    "SecureState",
    "advance",
    "ancestors_kept",
    "ancestors_releases_numpy",
    "displaced",
    "displaced_numpy",
    "gather_rows",
    "gather_rows_numpy",
    "keep_histograms",
    "level_guides",
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
    #: Under "secure": per feature, the one it is fitted as (``privacy/copies.py``); None:
    #: no column orders the rows like an earlier one.
    copies: NDArray[np.int64] | None = None
    #: Under "secure": pairs of features whose values, and whose missing values, nest
    #: (``(d, d)`` each, +1 / -1 / 0: ``privacy/copies.nested_pairs``); None: none.
    nested: tuple[NDArray[np.int8], NDArray[np.int8]] | None = None
    #: Under "secure": pairs of categorical features one of which groups the other's levels
    #: (``(d, d)``: ``privacy/copies.dependent_categories``), never asked at one node
    #: together; None: none.
    exclusive: NDArray[np.bool_] | None = None
    #: class_weight="balanced": the pooled class counts (a masked sum), else None.
    class_counts: NDArray[np.float64] | None = None
    #: Under "secure": the sum mod 2^64 of the clients' data tags (the settings digest's).
    data_tag: NDArray[np.uint64] | None = None
    #: Under "secure" with sample weights: the band the clients trim them to (weight_band.py).
    weight_band: tuple[float, float] | None = None
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
    #: The same levels' releases joined, level after level (``history``'s order).
    pool: ReleasePool = field(default_factory=ReleasePool)
    #: The ancestors' releases this level's numeric pairs are checked against: rows
    #: (threshold, the ancestor's rows below it, its rows, 1 for the parent's).
    checks: PairSegments = field(default_factory=lambda: PairSegments.empty(4))
    #: The trees' nodes and each one's derivable sums per feature (``secure_derived.py``).
    derived: DerivedSums = field(default_factory=DerivedSums)
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
    #: Under "secure": per feature, whether 1 to ``m - 1`` rows of the federation miss its
    #: value (its grids get no "value known | missing" edge: ``sparse_columns.py``).
    rare_missing: NDArray[np.bool_] | None = None
    #: Under "secure": per categorical column with codes few rows hold, each code's merged
    #: code (``rare_codes.py``; sent in the set-up, applied to the set splits).
    code_map: dict[int, NDArray[np.int64]] = field(default_factory=dict)
    #: Under "secure": the categorical columns whose codes form no two groups of ``m`` rows
    #: in any node (``rare_codes.groupless_columns``): constant for the draws.
    groupless: list[int] = field(default_factory=list)
    #: Under "secure": per feature, the outermost edges a node grid may hold (none between
    #: a group of fewer than ``m`` rows apart at its end and the rest: ``grid_ends``).
    edge_lo: NDArray[np.float64] | None = None
    edge_hi: NDArray[np.float64] | None = None
    #: Under "secure": per feature, the open intervals a node grid holds no edge in (none
    #: around a group of fewer than ``m`` rows apart inside the column: ``grid_gaps``).
    gaps: list[NDArray[np.float64]] | None = None
    #: Guided candidates (``server/guides.py``; "secure" only): per (tree, feature), the
    #: thresholds the tree's earlier levels found best, which join the grids.
    guides: Guides | None = None
    #: The level's guides as :func:`node_grids` found them, per numeric pair: its index,
    #: the query (tree, feature, path bounds), offsets and thresholds (:func:`level_guides`).
    found_guides: tuple[NDArray[Any], ...] | None = None
    #: Round A's pooled histograms (rows, weight per edge) are unpacked into this buffer
    #: (:meth:`hist_room`), which the state owns: ``LevelA.cum`` is read again in Round B
    #: and :func:`keep_histograms`, after other calls of the thread (the clients answering
    #: in it) may have taken its scratch memory (``scratch.py``: no view kept across rounds).
    hist_buffer: NDArray[np.float64] = field(default_factory=lambda: np.empty(0))
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
        self.pool.clear()
        self.derived.start_batch(n_trees, d)
        self.released, self.groups, self.cuts = PairSegments.empty(3), {}, _no_cuts()
        self.found_guides = None

    def hist_room(self, n_edges: int) -> NDArray[np.float64]:
        """Room for a level's pooled histograms, shape (n_edges, 2), reused level after level.

        Valid until this state's next Round A (the next level's, after this level's Round B
        and :func:`keep_histograms`); grown, with ``scratch.ROOM`` times the room, when a
        level needs more, so its pages are faulted in a few times a fit, not every level.
        """
        if self.hist_buffer.size < 2 * n_edges:
            self.hist_buffer = np.empty(ROOM * 2 * n_edges)
        return self.hist_buffer[: 2 * n_edges].reshape(n_edges, 2)

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
    if state.edge_lo is not None and state.edge_hi is not None:  # grid ends (_within)
        out, out_off = _within(out, out_off, state.edge_lo[f], state.edge_hi[f], lo, hi)
    if state.gaps is not None:
        out, out_off = _outside(out, out_off, f, state.gaps, lo, hi)
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
    if cfg.privacy == "secure":  # a quantile edge half a step from a threshold: the threshold
        keep = ~displaced(out, out_off, thr, thr_off, parts, n_threads)
        out_off, out = np.concatenate([[0], np.cumsum(keep)])[out_off], out[keep]
    # The edges equal to a threshold or guide keep their value on the wire (grid_wire).
    exact = np.zeros(out.size, dtype=bool)
    out, out_off, exact = _merged(out, out_off, exact, has, thr, thr_off, parts, n_threads)
    if state.guides is not None and tree is not None:  # guided candidates (guides.py)
        query = (np.asarray(tree, dtype=np.int64)[node], f, lo, hi)
        g_off, g_thr = state.guides.find(*query)
        state.found_guides = (sel, *query, g_off, g_thr)  # Round B's pairs' (level_guides)
        if state.gaps is not None:  # a median of thresholds can fall in a gap
            g_thr, g_off = _outside(g_thr, g_off, f, state.gaps, lo, hi)
        guided = np.diff(g_off) > 0
        out, out_off, exact = _merged(out, out_off, exact, guided, g_thr, g_off, parts, n_threads)
    if missing is not None and missing.any():
        out_off, out = add_missing_candidates(out_off, out, missing[f])
        kept = np.ones(out.size, dtype=bool)
        kept[out_off[1:][missing[f]] - 1] = False  # each extended pair's last slot
        exact = _spread(exact, kept)
    exact |= out == MISSING_SPLIT
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


def level_guides(
    state: SecureState,
    pairs: NDArray[np.int64],
    query: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]],
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """``state.guides.find(*query)`` for Round B's ``pairs`` (indices into the level's pairs).

    Taken from what :func:`node_grids` found for the level where it asked the same query
    of those pairs (the guides change only after Round B), else found again.
    """
    assert state.guides is not None
    if state.found_guides is not None:
        sel, *asked, g_off, g_thr = state.found_guides
        pos = np.minimum(np.searchsorted(sel, pairs), max(sel.size - 1, 0))
        if sel.size and np.array_equal(sel[pos], pairs):
            if all(np.array_equal(a[pos], q) for a, q in zip(asked, query, strict=True)):
                return offsets(g_off[pos + 1] - g_off[pos]), g_thr[
                    ranges(g_off[pos], g_off[pos + 1])
                ]
    return state.guides.find(*query)


def displaced(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    thr: NDArray[np.float64],
    thr_off: NDArray[np.int64],
    parts: list[tuple[int, int]] | None = None,
    n_threads: int = 1,
) -> NDArray[np.bool_]:
    """The edges of each pair's quantile grid within half a step of one of its thresholds.

    A step is the gap to the edge's neighbour on the threshold's side (the other side's at
    a grid's ends; a grid of one edge has none): the threshold replaces the edge, so the
    grid keeps its spacing (about ``m`` rows in small nodes) and is no denser for the
    ancestors' thresholds that join it (no gap wider than two of its steps). Each
    threshold displaces at most one edge. Guides displace none: measured, that cost
    accuracy (docs/privacy-findings.md, "Grids no denser than the rules need").

    Parameters
    ----------
    grid : ndarray of float64
        Each pair's quantile edges, increasing, pair after pair (``grid_off``).
    thr : ndarray of float64
        Each pair's thresholds, pair after pair (``thr_off``, the same pairs).
    parts : list of (int, int), optional
        Ranges of pairs, each run in one of ``n_threads`` threads (each pair's answer is
        its own: the same edges).

    Returns
    -------
    ndarray of bool, shape (grid.size,)
    """
    out = np.empty(grid.size, dtype=np.bool_)
    at = np.empty(thr.size, dtype=np.int64)

    def run(r: tuple[int, int]) -> None:
        a, b = r
        displaced_edges(grid, grid_off[a : b + 1], thr, thr_off[a : b + 1], at, out)

    thread_map(run, parts or [(0, grid_off.size - 1)], n_threads)
    return out


def displaced_numpy(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    thr: NDArray[np.float64],
    thr_off: NDArray[np.int64],
) -> NDArray[np.bool_]:
    """NumPy twin of :func:`displaced` (its kernel, ``grids.displaced_edges``)."""
    n = np.diff(grid_off)
    # Half gaps (halved first: no overflow between edges near float64's largest value); a
    # gap to an infinite edge counts as none: nothing beside it is displaced.
    half = grid / 2
    gap = np.zeros(grid.size + 1)
    with np.errstate(invalid="ignore"):
        gap[1:-1] = (half[1:] - half[:-1]) / 2
    gap[~np.isfinite(gap)] = 0.0
    gap[grid_off] = 0.0  # no gap across pairs (nor before the first or after the last)
    right, left = gap[1:].copy(), gap[:-1].copy()
    last, first = grid_off[1:] - 1, grid_off[:-1]
    two = n >= 2
    right[last[two]], left[first[two]] = left[last[two]], right[first[two]]
    at = np.zeros(thr.size, dtype=np.int64)
    searchsorted_segments(grid, grid_off, thr, thr_off, at)  # grid[at - 1] < t <= grid[at]
    count = np.diff(thr_off)
    start, end = np.repeat(grid_off[:-1], count), np.repeat(grid_off[1:], count)
    t = thr / 2
    out = np.zeros(grid.size, dtype=bool)
    below, above = at > start, at < end
    i, j = at[below] - 1, at[above]
    with np.errstate(invalid="ignore"):
        out[i[t[below] - half[i] < right[i]]] = True
        out[j[half[j] - t[above] < left[j]]] = True
    return out


def _spread(values: NDArray[np.bool_], where: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``values`` placed where ``where`` holds, False elsewhere."""
    out = np.zeros(where.size, dtype=bool)
    out[where] = values
    return out


def _merged(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    exact: NDArray[np.bool_],
    merge: NDArray[np.bool_],
    thr: NDArray[np.float64],
    thr_off: NDArray[np.int64],
    parts: list[tuple[int, int]],
    n_threads: int,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.bool_]]:
    """``merge_thresholds`` of the pairs' grids, each range of pairs in ``parts`` in a thread.

    Each range's grids are merged into a buffer of its own; the buffers are joined in
    order (the same grids as one call over every pair). Returns the grids, their offsets
    and their edges equal to one of ``exact``'s or of the pair's thresholds.
    """

    def run(r: tuple[int, int]) -> tuple[NDArray[Any], NDArray[Any], NDArray[np.int64]]:
        a, b = r
        n = int(grid_off[b] - grid_off[a] + thr_off[b] - thr_off[a])
        out, out_exact = np.empty(n), np.empty(n, dtype=bool)
        off = np.empty(b - a + 1, dtype=np.int64)
        merge_thresholds(
            grid, grid_off[a : b + 1], merge[a:b], thr, thr_off[a : b + 1], out, off, exact,
            out_exact,
        )  # fmt: skip
        return out[: off[-1]], out_exact[: off[-1]], off

    done = thread_map(run, parts, n_threads)
    out_off, out = join_ranges([(g, off) for g, _, off in done])
    return out, out_off, join_ranges([(e, off) for _, e, off in done])[1]


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
    # A slot passed through (no split, both routes to one slot: ``constants.deferred_slots``)
    # is the same node at the next level: its bounds, and itself as its parent.
    kept = np.flatnonzero((best.feature < 0) & (routes["route_left"] >= 0))
    c = np.asarray(routes["route_left"][kept], dtype=np.int64)
    lo[c], hi[c], parent[c] = state.lo[kept], state.hi[kept], kept
    copied = None
    if kept.size and state.history:
        state.released, copied = _with_parents_releases(state, kept, d)
        copied = copied + state.pool.base[-1]  # the parents' level's rows in the pool
    # This level's parents and releases join the history the children's rule reads.
    state.history.append((state.parent, state.released, state.groups))
    state.pool.append(state.released.values, copied)
    state.derived.advance(
        best.feature, best.threshold, set(best.sets), best.missing_sides(), best.left,
        best.right, routes["route_left"], routes["route_right"], n_new,
    )  # fmt: skip
    state.lo, state.hi, state.parent = lo, hi, parent
    state.measured, state.measured_mass = state.current, state.current_mass
    state.current, state.current_mass = PairSegments.empty(), PairSegments.empty()
    state.checks, state.released, state.groups = PairSegments.empty(4), PairSegments.empty(3), {}
    state.found_guides = None
    state.cuts = _no_cuts()


def _with_parents_releases(
    state: SecureState, kept: NDArray[np.int64], d: int
) -> tuple[PairSegments, NDArray[np.int64]]:
    """The level's releases, each passed-through slot (``kept``) given its parent's.

    Such a slot released nothing (its drawn features formed no category groups); below
    it, the same node draws again. Its parent's releases, copied as its own, reach that
    node as a parent's do (all of them checked, as the parent's: ``ancestors_kept``), not
    as a grandparent's: the rules the node meets are those it met without the pass.
    Also returns the rows of the parents' level the copies (the last rows) repeat, in
    order: the same releases for the cousins' rule (``ReleasePool.origin``).
    """
    prev = state.history[-1][1]  # the parents' level's releases
    up = state.parent[kept]
    kept, up = kept[up >= 0], up[up >= 0]
    feats = np.tile(np.arange(d, dtype=np.int64), kept.size)
    src = prev.find(np.repeat(up, d) * d + feats)
    dst = np.repeat(kept, d) * d + feats
    rel = state.released
    has = (src >= 0) & (rel.find(dst) < 0)
    if not has.any():
        return rel, np.zeros(0, np.int64)
    t_off, t = prev.take(src[has])
    released = PairSegments(
        np.concatenate([rel.key, dst[has]]),
        np.concatenate([rel.off, rel.off[-1] + t_off[1:]]),
        np.concatenate([rel.values, t]),
    )
    return released, ranges(prev.off[src[has]], prev.off[src[has] + 1])


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
