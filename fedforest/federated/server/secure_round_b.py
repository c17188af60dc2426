"""The secure server's Round B: pooled left statistics at the candidates the rules keep.

Under ``privacy="secure"`` (and ``"dp"``): the candidates the minimum-rows rules keep, the
pooled left statistics at them, the best splits (and the splits of category groups).
Moved out of ``secure.py``, which re-exports its names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from joblib import effective_n_jobs
from numpy.typing import NDArray

from ..._common import STAT_ROWS
from ..federation import Federation
from ..grid_wire import candidate_arrays
from ..privacy.copies import nested_apart
from ..privacy.grids import searchsorted_segments
from ..privacy.intervals import safe_from_ancestors
from ..privacy.partitions import partition_filter
from ..privacy.rules import group_categories, safe_groups, secure_candidates
from ..privacy.secagg import (
    unpack_counts,
)
from ..protocol import ROUND_B, CommunicationLedger, Message
from .checks import check_class_blocks
from .config import GrowerConfig
from .denoise import (
    clip_stats,
    consistent_children,
    cumulative_stats,
    from_z,
    stat_task,
)
from .dp_checks import check_noisy_counts
from .fallback import with_ancestor_candidates
from .guides import guided_in_threads, refine_args
from .missing import MISSING_SPLIT, few_known_above, with_missing_sides
from .secure_checks import (
    check_pooled_groups,
    check_pooled_rows,
    check_rounds_agree,
)
from .secure_cousins import cousins_filter
from .secure_grids import (  # the state between levels (the grower calls it through here)
    LevelA,
    PairSegments,
    SecureState,
    level_guides,
    offsets,
    ranges,
)
from .secure_round_a import _frac_bits, _packs, _shifts, _weight_tol, check_jensen
from .secure_sums import sums_unless_dropped
from .splitter import BestSetSplits, BestSplits, best_set_splits, best_splits, with_set_splits
from .weights import weigh

# --------------------------------------------------------------------------- Round B
#: Per categorical pair: its pooled rows per code and their groups (``group_categories``).
CategoryGroups = dict[int, tuple[NDArray[np.float64], NDArray[np.int32]]]


def category_groups(
    level: LevelA,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    n_categories: NDArray[np.int64],
    m: int,
    pairs: NDArray[np.int64] | None = None,
) -> CategoryGroups:
    """Categorical pairs' pooled rows per code (Round A's counts at its codes), grouped.

    For ``pairs`` (default: every pair of a feature of at least two categories), the
    rows of each code are the differences of the cumulative counts at its codes (the
    node's rows after the last), computed for all of them at once; then
    :func:`group_categories` of them with ``m`` rows a group. Computed once per level,
    for :func:`groupless_pairs` and :func:`round_b` both.
    """
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
    n_cat = n_categories[pair_feat]
    if pairs is None:
        pairs = np.flatnonzero(n_cat >= 2)
    if not pairs.size:
        return {}
    lo, hi = level.grid_off[pairs], level.grid_off[pairs + 1]
    # Per pair [0, its counts at its codes..., the node's rows], differenced within it.
    ext_off = offsets(hi - lo + 2)
    ext = np.zeros(int(ext_off[-1]))
    ext[ext_off[1:] - 1] = level.pooled[pair_node[pairs], STAT_ROWS]
    ext[ranges(ext_off[:-1] + 1, ext_off[1:] - 1)] = level.cum[ranges(lo, hi), 0]
    step = np.diff(ext)  # across two pairs' ends: not read
    n_rows = np.minimum(n_cat[pairs], hi - lo + 1)
    rows = np.split(step[ranges(ext_off[:-1], ext_off[:-1] + n_rows)], offsets(n_rows)[1:-1])
    return {int(p): (r, group_categories(r, m)) for p, r in zip(pairs.tolist(), rows, strict=True)}


def groupless_pairs(groups: CategoryGroups, n_pairs: int) -> NDArray[np.bool_]:
    """Per pair, a categorical feature whose node counts form no two groups of ``m`` rows.

    Round A's pooled rows per code (released anyway; ``groups``, of
    :func:`category_groups`) leave fewer than two groups (:func:`group_categories`: no
    code of ``m`` rows, or one and the others together fewer): the feature cannot split
    the node, nor any node below it, whose rows per code are at most these. The grower
    then counts it as constant there (scikit-learn's draws go past a constant feature).
    """
    out = np.zeros(n_pairs, dtype=bool)
    for p, (_, g) in groups.items():
        out[p] = not (g >= 0).any()
    return out


def round_b(
    fed: Federation,
    ledger: CommunicationLedger,
    cfg: GrowerConfig,
    ctx: dict[str, Any],
    level: LevelA,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    splittable: NDArray[np.bool_],
    root_w: NDArray[np.float64],
    cat_groups: CategoryGroups | None = None,
) -> BestSplits:
    """Candidates under the minimum-rows rule, masked Round B, and each node's best split.

    ``cat_groups``: :func:`category_groups` of the level where the grower made them (under
    ``"secure"``); made here for the categorical pairs that can split otherwise.
    """
    assert cfg.n_bins is not None
    state: SecureState = ctx["secure"]
    m = state.min_rows
    pooled = level.pooled
    n_nodes = pooled.shape[0]
    n_pairs = int(pair_off[-1])
    d = state.lo.shape[1]
    pair_node = np.repeat(np.arange(n_nodes), np.diff(pair_off))
    n_cat = ctx["n_categories"][pair_feat]
    ok = splittable[pair_node] & (pooled[pair_node, STAT_ROWS] >= 2 * m)
    num = np.flatnonzero(ok & (n_cat == 0))
    # Numeric candidates from the pooled cumulative histograms.
    g_lo, g_hi = level.grid_off[num], level.grid_off[num + 1]
    sub_off = offsets(g_hi - g_lo)
    take = ranges(g_lo, g_hi)
    sub_grid = level.grid[take]
    sub_rows = np.ascontiguousarray(level.cum[take, 0])
    node, f = pair_node[num], pair_feat[num].astype(np.int64)
    node_rows = np.ascontiguousarray(pooled[node, STAT_ROWS])
    # The roots (guided levels below them): up to ROOT_FACTOR * B - 1 quantile candidates.
    root = state.guides is not None and state.guides.level == 0
    n_levels = cfg.n_bins * (ROOT_FACTOR if root else 1)
    out_off = np.zeros(num.size + 1, dtype=np.int64)
    out = np.empty(num.size * max(n_levels, 1))  # the quantiles and the missing edge
    secure_candidates(
        sub_grid,
        sub_off,
        sub_rows,
        np.ascontiguousarray(level.cum[take, 1]),
        node_rows,
        level.node_weight(node),
        _shifts(cfg, ctx, pair_off, pair_feat, 1)[num],
        n_levels,
        m,
        out_off,
        out,
    )
    if root:
        out_off, out = root_floor(sub_grid, sub_off, sub_rows, node_rows, cfg.n_bins, out_off, out)
    tree = np.asarray(ctx["secure_slots"][0], dtype=np.int64)[node]
    if state.guides is not None:  # guides first, the same m-row spacing (guides.py)
        g_off, g_thr = level_guides(state, num, (tree, f, state.lo[node, f], state.hi[node, f]))
        out_off, out = guided_in_threads(
            sub_grid, sub_off, sub_rows, node_rows, out[: out_off[-1]], out_off, g_thr, g_off, m,
            effective_n_jobs(cfg.n_jobs),
        )  # fmt: skip
    # Less those the ancestors' releases on the feature would isolate rows with.
    anc_off, anc = state.checks.take(state.checks.find(node * d + f))
    cands = out[: out_off[-1]]
    safe = safe_from_ancestors(
        cands,
        out_off,
        sub_grid,
        sub_off,
        sub_rows,
        anc,
        anc_off,
        state.lo[node, f],
        state.hi[node, f],
        node_rows,
        m,
        effective_n_jobs(cfg.n_jobs),
    )
    # A pair left without any: its ancestors' thresholds on the node grid (fallback.py).
    bounds = (state.lo[node, f], state.hi[node, f], node_rows)
    cands, out_off, safe = with_ancestor_candidates(
        cands, out_off, safe, sub_grid, sub_off, sub_rows, anc, anc_off, *bounds, m
    )
    # Less those that would complete a partition of an ancestor's rows isolating a few.
    partition_filter(
        state.cuts, node * d + f, cands, out_off, sub_grid, sub_off, sub_rows, *bounds, m, safe
    )
    # Each candidate's grid edge: the node's rows below it (Round A).
    at = np.zeros(cands.size, dtype=np.int64)
    searchsorted_segments(sub_grid, sub_off, cands, out_off, at)
    # Less those that would leave 1 to m - 1 rows of an ancestor's release at them in no
    # other release there (its atom, secure_cousins.py).
    below = sub_rows[at]
    if cfg.privacy == "secure" and state.nested is not None:  # nested rows (missing.py)
        # A feature missing on the rows another misses: m known rows above each candidate
        # (the other's "value known | missing" edge releases the node's known rows).
        has_twin = np.asarray(state.nested[1].any(axis=1), dtype=bool)
        twin = np.repeat(has_twin[f], np.diff(out_off))
        safe &= ~(few_known_above(sub_grid, sub_off, sub_rows, cands, out_off, below, m) & twin)
        drop = nested_apart(node, f, cands, out_off, below, node_rows, safe, state.nested, m)
        safe &= ~drop
    cousins_filter(state, node, f, cands, out_off, below, safe)
    # Less those whose sum, with the sums the server derives at the same threshold, would
    # bring some node's derivable sums on the feature 1 to m - 1 rows apart (secure_derived.py).
    state.derived.filter(node, f, cands, out_off, below, node_rows, ctx["missing"], m, safe)
    cand, at = cands[safe], at[safe]
    n_kept = np.bincount(np.repeat(np.arange(num.size), np.diff(out_off))[safe], minlength=num.size)
    counts = np.zeros(n_pairs, dtype=np.int64)
    counts[num] = n_kept
    cand_off = offsets(counts)
    # The released candidates and the node's rows below them, for the children's rule.
    state.released = PairSegments(
        (node * d + f)[n_kept > 0],
        offsets(n_kept[n_kept > 0]),
        np.column_stack([cand, sub_rows[at], np.repeat(node_rows, n_kept)]),
    )
    # Category groups with at least m rows each.
    group_pair: list[int] = []
    group_maps: list[NDArray[np.int32]] = []
    group_rows: list[NDArray[Any]] = []  # each group's rows by Round A
    n_groups: list[int] = []
    cat_pairs = np.flatnonzero(ok & (n_cat >= 2))
    if cat_groups is None:
        cat_groups = category_groups(level, pair_off, pair_feat, ctx["n_categories"], m, cat_pairs)
    for p in cat_pairs:
        rows, groups = cat_groups[int(p)]
        # None if differencing with an ancestor's groups on the feature would isolate rows.
        slot, feat = int(pair_node[p]), int(pair_feat[p])
        groups = safe_groups(groups, rows, state.ancestors_groups(slot, feat), m)
        if (groups >= 0).any():
            state.groups[slot * d + feat] = (rows, groups)
            group_pair.append(int(p))
            group_maps.append(groups)
            group_rows.append(np.bincount(groups[groups >= 0], rows[groups >= 0]))
            n_groups.append(int(groups.max()) + 1)
    group_off = np.zeros(len(group_pair) + 1, dtype=np.int64)
    np.cumsum([g.size for g in group_maps], out=group_off[1:])
    if not cand.size and not group_pair:
        return BestSplits.none(n_nodes, pooled.shape[1])
    bits = _frac_bits(ctx)
    s = ctx["n_stats"]
    arrays: dict[str, NDArray[Any]] = {
        "cand_off": cand_off,
        **candidate_arrays(sub_grid, sub_off, at, cand, n_kept),
        "group_pair": np.asarray(group_pair, dtype=np.int32),
        "group_off": group_off,
        "group_map": (
            np.concatenate(group_maps).astype(np.int32) if group_maps else np.zeros(0, np.int32)
        ),
        "n_groups": np.asarray(n_groups, dtype=np.int32),
    }
    packed = _packs(cfg, state, bits)
    n_words, word_bits = (s - 1, None) if packed else (s, bits)
    sums = sums_unless_dropped(
        fed,
        ledger,
        Message(ROUND_B, {"pack_counts": True} if packed else {}, arrays),
        {
            "left": ((cand.size, n_words), word_bits),
            "group_stats": ((int(sum(n_groups)), n_words), word_bits),
        },
        effective_n_jobs(cfg.n_jobs),
    )
    if sums is None:
        # A client dropped in this Round B. The survivors' left sums (their rows between
        # two candidates may number 1 to m - 1) are not recovered, and the nodes' totals
        # (Round A) still hold its rows; asking the survivors for theirs would expose its
        # share: no node of this level splits (the next batch grows with the survivors).
        return BestSplits.none(n_nodes, pooled.shape[1])
    if packed:
        sums = {k: unpack_counts(v, bits[2:]) for k, v in sums.items()}
    regression = cfg.task == "regression"
    left_z, groups_z = sums["left"], sums["group_stats"]
    if cfg.privacy != "dp":
        check_pooled_rows(left_z, state.n_rows, "Round B's left statistics")
        check_pooled_rows(groups_z, state.n_rows, "Round B's category groups")
        group_of = np.repeat(np.asarray(group_pair, dtype=np.int64), n_groups)
        tol = _weight_tol(bits, len(fed.client_names))
        what = "Round B's category groups"
        check_rounds_agree(groups_z[:, STAT_ROWS], np.concatenate([[], *group_rows]), what)
        check_rounds_agree(left_z[:, STAT_ROWS], sub_rows[at], "Round B's left statistics")
        check_pooled_groups(groups_z, pair_node[group_of], group_of, pooled, what, tol)
    if cfg.privacy == "dp":
        sigma, rows = ctx["dp"].tree_sigma * ctx["dp"].released, pooled[pair_node, STAT_ROWS]
        within = (np.zeros(n_pairs), rows)
        what = "Round B's left statistics"
        check_noisy_counts(left_z[:, STAT_ROWS], sigma, state.n_rows, what, cand_off, within)
        g_off = offsets(np.bincount(group_pair, n_groups, n_pairs).astype(np.int64))
        what = "Round B's category groups"
        check_noisy_counts(groups_z[:, STAT_ROWS], sigma, state.n_rows, what, g_off, within)
        # Noisy per-interval increments: consistent, then cumulative per pair.
        left_z = cumulative_stats(left_z, cand_off, ctx["dp"].clip, stat_task(cfg))
        groups_z = clip_stats(groups_z, ctx["dp"].clip, stat_task(cfg))
    elif cfg.criterion == "poisson":
        check_jensen(left_z, "Round B's left statistics")
        check_jensen(groups_z, "Round B's category groups")
    elif cfg.task == "classification":
        check_class_blocks(left_z, cfg.class_sizes, ctx["weighted"], "Round B's left statistics")
        check_class_blocks(groups_z, cfg.class_sizes, ctx["weighted"], "Round B's category groups")
    left = from_z(left_z, state, regression)
    class_w = ctx.get("class_w_nodes")  # class_weight: pooled sums reweighted (weights.py)
    if class_w is not None:
        left = weigh(left, class_w[np.repeat(pair_node, np.diff(cand_off))])
        pooled = weigh(pooled, class_w)
    # Missing values: where MISSING_SPLIT passed the rule (known and missing rows, and
    # the rows since the previous candidate, each at least m), every candidate is tried
    # with them on both sides; elsewhere they stay right, summed with the rows above the
    # last candidate (no aggregate of fewer than m missing rows is released).
    side = None
    if ctx["missing"].any():
        pair_missing = ctx["missing"][pair_feat] & (n_cat == 0)
        cand_off, cand, left, side = with_missing_sides(
            pooled, pair_off, pair_missing, cand_off, cand, left
        )
    gain = np.empty(left.shape[0])
    best = best_splits(
        pooled,
        pair_off,
        pair_feat,
        cand_off,
        cand,
        left,
        gain_out=gain,
        criterion=cfg.criterion,
        root_weight=root_w,
        min_samples_leaf=max(cfg.min_samples_leaf, m),
        min_impurity_decrease=cfg.min_impurity_decrease,
        min_weight_fraction_leaf=cfg.min_weight_fraction_leaf,
        missing_side=side,
        n_outputs=cfg.class_outputs,
        bounds=ctx.get("bounds"),
    )
    if state.guides is not None:  # each pair's best threshold guides the tree's next levels
        slots = np.asarray(ctx["secure_slots"][0], dtype=np.int64)
        refine = refine_args(cfg, left, pooled, pair_node) if side is None else ()
        state.guides.record(slots[pair_node], pair_feat, cand_off, cand, gain, refine)
    if not group_pair:
        return consistent_children(best, state, cfg, ctx)
    group_stats = from_z(groups_z, state, regression)
    if class_w is not None:
        group_node = pair_node[np.repeat(np.asarray(group_pair, dtype=np.int64), n_groups)]
        group_stats = weigh(group_stats, class_w[group_node])
    sets, feature = _group_splits(
        group_stats, group_pair, group_maps, n_groups, pair_node, pair_feat, n_nodes, cfg, ctx, m
    )
    best = with_set_splits(
        best,
        sets,
        feature,
        splittable & (feature >= 0),
        root_weight=root_w,
        min_impurity_decrease=cfg.min_impurity_decrease,
        min_weight_fraction_leaf=cfg.min_weight_fraction_leaf,
    )
    return consistent_children(best, state, cfg, ctx)


def _group_splits(
    group_stats: NDArray[np.float64],
    group_pair: list[int],
    group_maps: list[NDArray[np.int32]],
    n_groups: list[int],
    pair_node: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    n_nodes: int,
    cfg: GrowerConfig,
    ctx: dict[str, Any],
    m: int,
) -> tuple[BestSetSplits, NDArray[np.int64]]:
    """Best split of category groups per node, as a set split over the codes."""
    s = group_stats.shape[1]
    g_max = max(n_groups)
    per = np.zeros((len(group_pair), g_max, s))
    start = 0
    for i, g in enumerate(n_groups):
        per[i, :g] = group_stats[start : start + g]
        start += g
    pairs = best_set_splits(
        per,
        criterion=cfg.criterion,
        n_classes=ctx["n_classes"],
        min_samples_leaf=max(cfg.min_samples_leaf, m),
        n_outputs=cfg.class_outputs,
    )
    c_max = int(ctx["n_categories"].max())
    gain = np.full(n_nodes, -np.inf)
    left = np.zeros((n_nodes, c_max), dtype=bool)
    present = np.zeros((n_nodes, c_max), dtype=bool)
    left_stats = np.zeros((n_nodes, s))
    total = np.zeros((n_nodes, s))
    feature = np.full(n_nodes, -1, dtype=np.int64)
    # Request order within a node: the first pair wins ties.
    for i, p in enumerate(group_pair):
        node = int(pair_node[p])
        if not np.isfinite(pairs.gain[i]) or pairs.gain[i] <= gain[node]:
            continue
        groups = group_maps[i]
        codes = np.flatnonzero(groups >= 0)
        gain[node] = pairs.gain[i]
        present[node] = False
        left[node] = False
        present[node, codes] = True
        left[node, codes] = pairs.left[i, groups[codes]]
        left_stats[node], total[node] = pairs.left_stats[i], pairs.total[i]
        feature[node] = int(pair_feat[p])
    return BestSetSplits(gain, left, present, left_stats, total), feature


#: A root's quantile candidates: up to this many per quantile level ``b / B`` (every root
#: grid edge ``m`` rows apart), at least ``n / B`` rows from either end (:func:`root_floor`).
ROOT_FACTOR = 4


def root_floor(
    grid: NDArray[np.float64], grid_off: NDArray[np.int64], cum_rows: NDArray[np.float64],
    node_rows: NDArray[np.float64], n_bins: int, cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:  # fmt: skip
    """The roots' candidates with at least ``n_node / B`` of the node's rows on either side.

    A root gets up to ``ROOT_FACTOR * B - 1`` quantile candidates (its guides are the only
    precise ones the forest gets: docs/privacy-findings.md, "What it costs"); none leaves
    a child smaller than ``B - 1`` quantiles would, so that a narrow band is not left in a
    small child whose grid misses it. Dropping candidates keeps the others ``m`` apart; the
    missing edge keeps its own rule.
    """
    cand = cand[: cand_off[-1]]
    at = np.zeros(cand.size, dtype=np.int64)
    searchsorted_segments(grid, grid_off, cand, cand_off, at)
    owner = np.repeat(np.arange(cand_off.size - 1), np.diff(cand_off))
    floor = node_rows[owner] / n_bins
    below = cum_rows[at]
    keep = (below >= floor) & (node_rows[owner] - below >= floor)
    keep |= cand == MISSING_SPLIT  # its own rule (the known rows, the missing rows)
    return offsets(np.bincount(owner[keep], minlength=cand_off.size - 1)), cand[keep]
