"""One level of growth: Round A (summaries, sketches), Round B (left statistics), secure level.

Moved out of ``grower.py`` (the 800-line cap).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from joblib import effective_n_jobs
from numpy.typing import NDArray

from ..._common import STAT_WEIGHT
from ..federation import Federation
from ..privacy.copies import fitted_as_one, one_of_each
from ..protocol import (
    ROUND_A,
    ROUND_B,
    CommunicationLedger,
    Message,
    expand_candidates,
)
from . import budget, monotonic, secure
from .checks import Check, ClientRecords
from .config import GrowerConfig
from .constants import (
    children_constant,
    deferred_slots,
    exact_split_sides_constant,
    first_pair_only,
)
from .draws import sample_features as _sample_features
from .grow_splits import _apply_splits, _by_client_code, _only_splittable, _root_weights
from .level import candidates, round_b_splits, shortlist
from .rounds import exchange as _exchange
from .splitter import BestSplits, best_set_splits, with_set_splits
from .tree_builder import _Frontier, _is_leaf_by_rule, _TreeBuilder, frontier_stats
from .weights import check_some_weight, weigh, weigh_level


def _round_a(
    fed: Federation,
    ledger: CommunicationLedger,
    header: dict[str, Any],
    routes: dict[str, NDArray[Any]],
    arrays: dict[str, NDArray[Any]],
    n_slots: int,
    s: int,
    check: Check,
    n_threads: int = 1,
) -> tuple[list[tuple[str, Message]], NDArray[np.float64]]:
    msg = Message(ROUND_A, header, {**routes, **arrays})
    replies = _exchange(fed, ledger, msg, check, n_threads)
    summaries = np.stack([m.arrays["summary"] for _, m in replies])
    return replies, summaries


def _level(
    fed: Federation,
    cfg: GrowerConfig,
    ledger: CommunicationLedger,
    builders: list[_TreeBuilder],
    frontier: _Frontier,
    routes: dict[str, NDArray[Any]],
    header: dict[str, Any],
    ctx: dict[str, Any],
) -> tuple[_Frontier, dict[str, NDArray[Any]]]:
    """Grow every tree by one level: Round A, candidates, Round B, best splits."""
    n_slots, s = frontier.tree.size, ctx["n_stats"]
    slot_tree_off = frontier.tree_offsets(len(builders))
    # Nodes at max_depth only come for their summaries (AvgImp): no features for them.
    at_max = cfg.max_depth is not None and frontier.depth >= cfg.max_depth
    constant = ctx["constant"]
    pair_off, pair_feat = _sample_features(
        ctx["rngs"], frontier.tree, ctx["d"], 0 if at_max else ctx["k"], constant
    )
    state = ctx.get("secure")
    if state is not None and state.copies is not None:  # a copy drawn is asked as the column
        pair_off, pair_feat = fitted_as_one(pair_off, pair_feat, state.copies, constant)
    if state is not None and state.exclusive is not None:  # a code and its chapter: one
        pair_off, pair_feat = one_of_each(pair_off, pair_feat, state.exclusive)
    if ctx.get("continued") is not None:  # nodes drawing on (verification mode)
        pair_off, pair_feat = first_pair_only(pair_off, pair_feat, ctx["continued"])
    arrays: dict[str, NDArray[Any]] = {
        "slot_tree_off": slot_tree_off,
        "pair_off": pair_off,
        "pair_feat": pair_feat,
    }
    header = {**header, "n_prev_slots": int(routes["route_feature"].size) if routes else 0}
    if ctx.get("monotonic") is not None:  # every path's best_splits reads the intervals
        ctx["bounds"] = monotonic.level_bounds(
            builders, frontier.tree, frontier.node, ctx["monotonic"]
        )
    if cfg.privacy != "none":
        nxt, routes = _secure_level(
            fed, cfg, ledger, builders, frontier, {**routes, **arrays}, header, ctx
        )
        ctx["constant"] = children_constant(ctx["constant"], routes, nxt.tree.size)
        return nxt, routes
    records: ClientRecords = ctx["records"]
    pair_node = np.repeat(np.arange(n_slots), np.diff(pair_off))
    numeric = ctx["n_categories"][pair_feat] == 0

    def sketched(summary: NDArray[np.float64]) -> NDArray[np.bool_]:
        """The pairs a client sends a sketch for: numeric ones of its non-empty nodes."""
        return np.asarray((summary[pair_node, STAT_WEIGHT] > 0) & numeric)

    quantile = cfg.n_bins is not None and cfg.binning == "quantile"
    check_a = records.round_a(
        routes, n_slots, s, sketched if quantile else None,
        cfg.n_bins if cfg.binning == "quantile" else 0, pair_feat,
        cfg.uses_local_candidates, (cfg.top_l or 0, ctx["d"]),
    )  # fmt: skip
    missing = ctx["missing"] if ctx["missing"].any() else None
    one_round = cfg.binning == "global" and cfg.one_round
    if one_round:
        # Fixed candidates travel with Round A; the clients answer their left statistics
        # with their summaries: one round per level.
        # They are a column's whatever the node: sent once per column, expanded to the
        # pairs on both sides.
        f_off, f_cand = _column_lists(cfg, ctx, s, missing)
        cand_off, cand = expand_candidates(f_off, f_cand, pair_feat)
        arrays = {**arrays, "feat_cand_off": f_off, "feat_cand": f_cand}
        check_a = _with_left_check(check_a, records, pair_off, pair_feat, cand_off, s, ctx)
    threads = effective_n_jobs(cfg.n_jobs)
    replies, summaries = _round_a(fed, ledger, header, routes, arrays, n_slots, s, check_a, threads)
    pooled = _pool_node_stats(builders, frontier, summaries, ctx)
    splittable = ~_is_leaf_by_rule(pooled, frontier.depth, cfg)
    pair_ok = np.repeat(splittable, np.diff(pair_off))
    if cfg.top_l:
        pair_ok &= shortlist(replies, summaries, pair_off, pair_feat, cfg.top_l, ctx)
    if not one_round:
        cand_off, cand = candidates(
            replies, summaries, pair_off, pair_feat, pair_ok, cfg, ctx.get("edges"),
            ctx["n_categories"], missing, records.sketches,
        )  # fmt: skip
        records.sketches = {}  # merged: not needed any more
    root_w = _root_weights(builders)[frontier.tree]
    best = BestSplits.none(n_slots, s)
    if one_round and cand.size:
        best = round_b_splits(
            replies, summaries, pooled, pair_off, pair_feat, cand_off, cand, splittable, root_w,
            cfg, ctx,
        )  # fmt: skip
        best = _only_splittable(best, splittable)
    elif cand.size:
        requests_b = _round_b_requests(fed, replies, summaries, pair_off, cand_off, cand)
        cat_pair = ctx["n_categories"][pair_feat] > 0
        check_b = records.round_b(pair_off, cat_pair, s, cfg.split_rule != "avgimp")
        replies_b = _exchange(fed, ledger, requests_b, check_b, threads)  # checks in threads
        if len(replies_b) < len(replies):
            # A client was dropped in Round B: this level uses the survivors' statistics.
            alive = np.array([name in dict(replies_b) for name, _ in replies])
            summaries = summaries[alive]
            replies = [r for r, keep in zip(replies, alive, strict=True) if keep]
            pooled = _pool_node_stats(builders, frontier, summaries, ctx)
            splittable &= ~_is_leaf_by_rule(pooled, frontier.depth, cfg)
        best = round_b_splits(
            replies_b,
            summaries,
            pooled,
            pair_off,
            pair_feat,
            cand_off,
            cand,
            splittable,
            root_w,
            cfg,
            ctx,
        )
        best = _only_splittable(best, splittable)
    if cfg.split_on_client:
        # Splits on H come from the per-client summaries already here: no extra message.
        per_client = _by_client_code(summaries, replies, ctx["clients"])
        per_client = weigh(per_client, ctx.get("class_w_nodes"))
        by_client = best_set_splits(
            np.transpose(per_client, (1, 0, 2)),
            criterion=cfg.criterion,
            n_classes=ctx["n_classes"],
            min_samples_leaf=cfg.min_samples_leaf,
            n_outputs=cfg.class_outputs,
        )
        best = with_set_splits(
            best,
            by_client,
            ctx["d"],
            splittable,
            root_weight=root_w,
            min_impurity_decrease=cfg.min_impurity_decrease,
            min_weight_fraction_leaf=cfg.min_weight_fraction_leaf,
        )
    records.next_level()
    sides = defer = None
    if cfg.n_bins is None:  # exact candidates: a numeric pair without any is constant
        empty = (np.diff(cand_off) == 0) & pair_ok & numeric
        constant = constant.copy()
        constant[pair_node[empty], pair_feat[empty]] = True
        # and so is a split feature in a child holding one of its values
        plain = (ctx["n_categories"] == 0) & ~ctx["missing"]
        sides = exact_split_sides_constant(
            replies, pair_off, pair_feat, best.feature, best.threshold, plain
        )
        last = cfg.max_depth is not None and frontier.depth + 1 >= cfg.max_depth
        defer = deferred_slots(splittable & (best.feature < 0), pair_off, pair_feat, constant, last)
    nxt, routes = _apply_splits(cfg, builders, frontier, best, ctx, defer)
    ctx["constant"] = children_constant(constant, routes, nxt.tree.size, sides, best.feature)
    return nxt, routes


def _secure_level(
    fed: Federation,
    cfg: GrowerConfig,
    ledger: CommunicationLedger,
    builders: list[_TreeBuilder],
    frontier: _Frontier,
    arrays: dict[str, NDArray[Any]],
    header: dict[str, Any],
    ctx: dict[str, Any],
) -> tuple[_Frontier, dict[str, NDArray[Any]]]:
    """One level under "secure": masked rounds, pooled statistics only (see secure.py)."""
    state: secure.SecureState = ctx["secure"]
    expected = state.n_rows * (0.632 if cfg.bootstrap else 1.0)  # a root's distinct rows
    # Rows and weight (a root's: estimated rows, weight unknown).
    node_stats, known = frontier_stats(builders, frontier.tree, frontier.node, 2)
    node_stats[~known] = (expected, np.inf)
    n_slots = frontier.tree.size
    ctx["secure_slots"] = (frontier.tree + ctx["first_tree"], frontier.node, frontier.depth)
    level = secure.round_a(fed, ledger, cfg, ctx, header, arrays, n_slots, node_stats)
    if "dp" in ctx:  # a row is in one node per tree and level (a set-up sent again: once)
        budget.release_level(cfg, ctx, np.unique(frontier.tree).size)
    secure.check_root_weights(level.pooled, frontier.depth, ctx)
    pair_off, pair_feat = arrays["pair_off"], arrays["pair_feat"]
    none = np.zeros(pair_feat.size, dtype=bool)
    cat_groups = None  # under "dp", Round B groups the pairs that can split
    if cfg.privacy == "secure":  # categorical pairs whose counts form no two groups
        cats = ctx["n_categories"]
        cat_groups = secure.category_groups(level, pair_off, pair_feat, cats, state.min_rows)
        none = secure.groupless_pairs(cat_groups, pair_feat.size)
        if none.any():  # constant in the node's children (docs/privacy.md, "Categories")
            ctx["constant"] = ctx["constant"].copy()
            node = np.repeat(np.arange(n_slots), np.diff(pair_off))
            ctx["constant"][node[none], pair_feat[none]] = True
    pooled = _pool_node_stats(builders, frontier, level.pooled[None], ctx)
    splittable = ~_is_leaf_by_rule(pooled, frontier.depth, cfg)
    root_w = _root_weights(builders)[frontier.tree]
    best = BestSplits.none(n_slots, ctx["n_stats"])
    if pair_feat.size:
        best = secure.round_b(
            fed, ledger, cfg, ctx, level, pair_off, pair_feat, splittable, root_w, cat_groups
        )
        best = _only_splittable(best, splittable)
    secure.keep_histograms(state, level, pair_off, pair_feat, ctx["n_categories"])
    defer = None
    if cfg.privacy == "secure" and none.any():
        # A node whose drawn features all proved constant there (those category counts)
        # draws on at the next level, as scikit-learn draws past constant features.
        last = cfg.max_depth is not None and frontier.depth + 1 >= cfg.max_depth
        no_split = splittable & (best.feature < 0)
        defer = deferred_slots(no_split, pair_off, pair_feat, ctx["constant"], last)
    nxt, routes = _apply_splits(cfg, builders, frontier, best, ctx, defer)
    secure.advance(state, best, routes)
    return nxt, routes


def summaries_none(n_slots: int, s: int) -> NDArray[np.float64]:
    """No client summaries yet (fixed candidates need none)."""
    return np.zeros((0, n_slots, s))


def _column_lists(
    cfg: GrowerConfig, ctx: dict[str, Any], s: int, missing: NDArray[np.bool_] | None
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """A one-round level's candidates, one list per column: made once per fit and kept.

    They depend on the fit's grid, categories and missing columns only (the key).
    """
    key = (id(ctx["edges"]), None if missing is None else missing.tobytes())
    kept = ctx.get("column_lists")
    if kept is not None and kept[0] == key:
        return kept[1], kept[2]
    n_col = ctx["n_categories"].size
    cols, every = np.arange(n_col, dtype=np.int32), np.ones(n_col, dtype=bool)
    f_off, f_cand = candidates(
        [], summaries_none(1, s), np.array([0, n_col]), cols, every, cfg, ctx["edges"],
        ctx["n_categories"], missing,
    )  # fmt: skip
    ctx["column_lists"] = (key, f_off, f_cand)
    return f_off, f_cand


def _with_left_check(
    check_a: Check,
    records: ClientRecords,
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    s: int,
    ctx: dict[str, Any],
) -> Check:
    """A one-round level's check: the summaries, then the left statistics beside them.

    The left statistics are checked as a Round B answer to the candidates of the nodes
    the client has rows in (what it answers for).
    """
    check_b = records.round_b(pair_off, ctx["n_categories"][pair_feat] > 0, s, True)
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))

    def check(name: str, request: Message, reply: Message) -> None:
        check_a(name, request, reply)
        has = (reply.arrays["summary"][:, STAT_WEIGHT] > 0)[pair_node]
        off = np.zeros_like(cand_off)
        np.cumsum(np.where(has, np.diff(cand_off), 0), out=off[1:])
        check_b(name, Message(ROUND_B, {}, {"cand_off": off}), reply)

    return check


def _round_b_requests(
    fed: Federation,
    replies: list[tuple[str, Message]],
    summaries: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
) -> dict[str, Message]:
    """Round B requests: each client gets the candidates of the nodes it has rows in.

    The other nodes' lists are empty: the client would answer nothing for them anyway.
    """
    n_cand = np.diff(cand_off)
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
    index = {name: k for k, (name, _) in enumerate(replies)}
    requests = {}
    for name in fed.client_names:
        k = index.get(name)
        if k is None:  # not in Round A's replies: send everything
            requests[name] = Message(ROUND_B, {}, {"cand_off": cand_off, "cand": cand})
            continue
        has = (summaries[k, :, STAT_WEIGHT] > 0)[pair_node]
        off = np.zeros_like(cand_off)
        np.cumsum(np.where(has, n_cand, 0), out=off[1:])
        requests[name] = Message(
            ROUND_B, {}, {"cand_off": off, "cand": cand[np.repeat(has, n_cand)]}
        )
    return requests


def _pool_node_stats(
    builders: list[_TreeBuilder],
    frontier: _Frontier,
    summaries: NDArray[np.float64],
    ctx: dict[str, Any],
) -> NDArray[np.float64]:
    """Sum the node summaries over clients and record them on the frontier nodes.

    A node that none of the clients has rows in keeps the statistics its parent's split
    gave it; that happens only after a client was dropped (``on_client_failure="drop"``).
    Under ``class_weight`` the classes are reweighted (``weights.weigh``; at the roots,
    ``"balanced_subsample"`` reads each tree's weights off its bootstrap's class counts),
    and ``ctx["class_w_nodes"]`` holds each frontier node's weights for the level.
    """
    pooled = np.asarray(summaries.sum(axis=0))
    check_some_weight(pooled, frontier.depth, ctx)
    if ctx.get("class_weight") is not None:
        pooled = weigh_level(pooled, builders, frontier.tree, frontier.depth, ctx)
    _, known = frontier_stats(builders, frontier.tree, frontier.node, 0)
    keep = (pooled[:, STAT_WEIGHT] > 0) | ~known
    cuts = (np.flatnonzero(np.diff(frontier.tree)) + 1).tolist()  # slots run tree by tree
    for a, z in zip([0, *cuts], [*cuts, frontier.tree.size], strict=True):
        mine = np.flatnonzero(keep[a:z]) + a
        if mine.size:
            builders[int(frontier.tree[a])].set_stats(frontier.node[mine], pooled[mine])
    return pooled
