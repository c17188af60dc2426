"""Server side: level-wise growth of all trees at once, through a transport.

One handshake, then per tree level one Round A (route last level's splits; node summaries
and sketches for every frontier node of every tree) and one Round B (left statistics at
the merged candidates), then an out-of-bag round when asked: a forest of depth M costs
at most 2M + 2 rounds whatever its number of trees (plus, for class_weight=
"balanced_subsample" with multi-output y or sample weights, one bootstrap round per
batch: bootstrap.py; under "secure", a drop in a batch's set-up sends that round again
instead of a recovery round: batch_setup.py). The grower never sees a row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from joblib import effective_n_jobs
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT, TREE_LEAF, class_sizes, count_columns, n_stats
from ..._progress import progress_bar
from ...tree.arrays import Tree, empty_split_fields
from ...tree.prune import prune_forest
from .. import scratch
from ..criteria import impurity, leaf_value
from ..failure import DropFailedClients
from ..federation import Federation
from ..privacy.rules import default_min_rows
from ..protocol import (
    ROUND_A,
    ROUND_B,
    SETTINGS_DIGEST,
    CommunicationLedger,
    Message,
    expand_candidates,
)
from . import budget, monotonic, secure
from .batch_setup import batch_digest, fit_digest, setup_header, tree_digests
from .bootstrap import bootstrap_round
from .checks import Check, ClientRecords
from .config import ForestResult, GrowerConfig
from .constants import (
    children_constant,
    deferred_slots,
    exact_split_sides_constant,
    first_pair_only,
)
from .digest import check_warm_digest
from .dp_checks import clip_leaf_values
from .draws import sample_features as _sample_features
from .handshake import handshake
from .level import candidates, category_counts, round_b_splits, shortlist
from .oob import oob_round
from .resolve import (
    bootstrap_draws,
    check_combinations,
    check_max_features,
    check_top_l,
    resolve_max_features,
    resolve_sizes,
    root_constant,
)
from .rounds import exchange as _exchange
from .secure_sums import SetUpDropped
from .splitter import EPSILON, BestSplits, best_set_splits, with_set_splits
from .weights import check_some_weight, set_up_class_weights, weigh, weigh_level

__all__ = ["GrowerConfig", "ForestResult", "forest_importances", "grow_forest"]


class _TreeBuilder:
    """Nodes of one tree as growing lists, in breadth-first order."""

    def __init__(self) -> None:
        self.feature: list[int] = []
        self.threshold: list[float] = []
        self.left: list[int] = []
        self.right: list[int] = []
        self.missing_left: list[int] = []
        self.stats: list[NDArray[np.float64]] = []
        #: class_weight's per-class weights for this tree (None: unweighted).
        self.class_w: NDArray[np.float64] | None = None
        self.sets: dict[int, tuple[NDArray[np.int32], NDArray[np.int8]]] = {}
        #: monotonic_cst: each node's value interval, where it is not (-inf, inf).
        self.bounds: dict[int, tuple[float, float]] = {}

    def add(self, stats: NDArray[np.float64] | None) -> int:
        self.feature.append(-2)
        self.threshold.append(-2.0)
        self.left.append(TREE_LEAF)
        self.right.append(TREE_LEAF)
        self.missing_left.append(0)
        self.stats.append(np.zeros(0) if stats is None else stats)
        return len(self.feature) - 1

    def add_children(self, left: NDArray[np.float64], right: NDArray[np.float64]) -> int:
        """The children of ``m`` splits (their statistics: rows of ``left``, ``right``).

        Appended as :meth:`add` would one by one: each split's left, then its right child.
        Returns the index of the first.
        """
        base, m = len(self.feature), left.shape[0]
        self.feature += [-2] * (2 * m)
        self.threshold += [-2.0] * (2 * m)
        self.left += [TREE_LEAF] * (2 * m)
        self.right += [TREE_LEAF] * (2 * m)
        self.missing_left += [0] * (2 * m)
        pairs: list[NDArray[np.float64]] = [None, None] * m  # type: ignore[list-item]
        pairs[0::2], pairs[1::2] = list(left), list(right)
        self.stats += pairs
        return base

    def finish(self, task: str, criterion: str, class_sizes: tuple[int, ...] = ()) -> Tree:
        stats = np.array(self.stats, dtype=np.float64)  # rows of equal length (vstack: 3x slower)
        feature, threshold = empty_split_fields(len(self.feature))
        internal = np.asarray(self.left) != TREE_LEAF
        feature[internal] = np.asarray(self.feature)[internal]
        threshold[internal] = np.asarray(self.threshold)[internal]
        return Tree(
            feature=feature,
            threshold=threshold,
            children_left=np.asarray(self.left, dtype=np.int32),
            children_right=np.asarray(self.right, dtype=np.int32),
            value=leaf_value(stats, task, class_sizes or None),
            n_node_samples=stats[:, STAT_ROWS].round().astype(np.int64),
            weighted_n_node_samples=stats[:, STAT_WEIGHT].copy(),
            impurity=impurity(stats, criterion, max(len(class_sizes), 1)),
            missing_go_to_left=np.asarray(self.missing_left, dtype=np.uint8),
            **self._set_arrays(),
        )

    def _set_arrays(self) -> dict[str, NDArray[Any]]:
        size = np.zeros(len(self.feature), dtype=np.int32)
        codes, sides = [np.zeros(0, np.int32)], [np.zeros(0, np.int8)]
        for node in sorted(self.sets):
            size[node] = self.sets[node][0].size
            codes.append(self.sets[node][0])
            sides.append(self.sets[node][1])
        return {
            "set_size": size,
            "set_code": np.concatenate(codes),
            "set_side": np.concatenate(sides),
        }


def _is_leaf_by_rule(
    stats: NDArray[np.float64], depth: int, cfg: GrowerConfig
) -> NDArray[np.bool_]:
    """scikit-learn's node-level stopping rules, vectorised over nodes."""
    rows = stats[:, STAT_ROWS]
    too_deep = cfg.max_depth is not None and depth >= cfg.max_depth
    return np.asarray(
        too_deep
        | (rows < cfg.min_samples_split)
        | (rows < 2 * cfg.min_samples_leaf)
        | (impurity(stats, cfg.criterion, cfg.class_outputs) <= EPSILON)
    )


@dataclass
class _Frontier:
    """Nodes to split at the current level, ordered by tree (one slot each)."""

    tree: NDArray[np.int64]
    node: NDArray[np.int64]
    depth: int

    def tree_offsets(self, n_trees: int) -> NDArray[np.int64]:
        off = np.zeros(n_trees + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.tree, minlength=n_trees), out=off[1:])
        return off


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
        ctx["constant"] = children_constant(constant, routes, nxt.tree.size)
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
        n_col = ctx["n_categories"].size
        cols, every = np.arange(n_col, dtype=np.int32), np.ones(n_col, dtype=bool)
        f_off, f_cand = candidates(
            [], summaries_none(1, s), np.array([0, n_col]), cols, every, cfg, ctx["edges"],
            ctx["n_categories"], missing,
        )  # fmt: skip
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
    node_stats = np.array(  # rows and weight (a root's: estimated rows, weight unknown)
        [
            builders[t].stats[node][:2] if builders[t].stats[node].size else (expected, np.inf)
            for t, node in zip(frontier.tree, frontier.node, strict=True)
        ]
    ).reshape(-1, 2)
    n_slots = frontier.tree.size
    ctx["secure_slots"] = (frontier.tree + ctx["first_tree"], frontier.node, frontier.depth)
    level = secure.round_a(fed, ledger, cfg, ctx, header, arrays, n_slots, node_stats)
    if "dp" in ctx:  # a row is in one node per tree and level (a set-up sent again: once)
        budget.release_level(cfg, ctx, np.unique(frontier.tree).size)
    secure.check_root_weights(level.pooled, frontier.depth, ctx)
    pooled = _pool_node_stats(builders, frontier, level.pooled[None], ctx)
    splittable = ~_is_leaf_by_rule(pooled, frontier.depth, cfg)
    root_w = _root_weights(builders)[frontier.tree]
    pair_off, pair_feat = arrays["pair_off"], arrays["pair_feat"]
    best = BestSplits.none(n_slots, ctx["n_stats"])
    if pair_feat.size:
        best = secure.round_b(fed, ledger, cfg, ctx, level, pair_off, pair_feat, splittable, root_w)
        best = _only_splittable(best, splittable)
    secure.keep_histograms(state, level, pair_off, pair_feat, ctx["n_categories"])
    nxt, routes = _apply_splits(cfg, builders, frontier, best, ctx)
    secure.advance(state, best, routes)
    return nxt, routes


def summaries_none(n_slots: int, s: int) -> NDArray[np.float64]:
    """No client summaries yet (fixed candidates need none)."""
    return np.zeros((0, n_slots, s))


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
    for t, node, st in zip(frontier.tree, frontier.node, pooled, strict=True):
        if st[STAT_WEIGHT] > 0 or builders[t].stats[node].size == 0:
            builders[t].stats[node] = st
    return pooled


def _root_weights(builders: list[_TreeBuilder]) -> NDArray[np.float64]:
    """Each tree's root weight (pooled at its first level)."""
    return np.array([b.stats[0][STAT_WEIGHT] for b in builders])


def _only_splittable(best: BestSplits, splittable: NDArray[np.bool_]) -> BestSplits:
    """Nodes the stopping rules make leaves stay leaves (they change after a Round B drop)."""
    return replace(best, feature=np.where(splittable, best.feature, -1).astype(np.int32))


def _by_client_code(
    summaries: NDArray[np.float64], replies: list[tuple[str, Message]], clients: list[str]
) -> NDArray[np.float64]:
    """Summaries indexed by client code (handshake order); dropped clients are all zero."""
    if len(replies) == len(clients):
        return summaries
    full = np.zeros((len(clients), *summaries.shape[1:]))
    full[[clients.index(name) for name, _ in replies]] = summaries
    return full


def _apply_splits(
    cfg: GrowerConfig,
    builders: list[_TreeBuilder],
    frontier: _Frontier,
    best: Any,
    ctx: dict[str, Any],
    defer: NDArray[np.bool_] | None = None,
) -> tuple[_Frontier, dict[str, NDArray[Any]]]:
    """Record the chosen splits, create the children, and build next level's routes.

    A ``defer`` slot (``constants.deferred_slots``) is passed through: its rows go to one
    new slot of the same node (both routes), which draws on at the next level.
    """
    n_slots = frontier.tree.size
    depth = frontier.depth + 1
    if cfg.split_rule == "avgimp":
        # AvgImp learns the children's statistics only from their summaries in the next
        # Round A (also at max_depth, where that round carries no features).
        child_leaf_l = child_leaf_r = np.zeros(n_slots, dtype=bool)
    else:
        child_leaf_l = _is_leaf_by_rule(best.left, depth, cfg)
        child_leaf_r = _is_leaf_by_rule(best.right, depth, cfg)
    route_left = np.full(n_slots, -1, dtype=np.int32)
    route_right = np.full(n_slots, -1, dtype=np.int32)
    missing_left = best.missing_sides()
    split = np.flatnonzero(best.feature >= 0)
    trees, nodes = frontier.tree[split], frontier.node[split]
    # Gains added split after split, as one loop over them would.
    np.add.at(ctx["importances"], (trees, best.feature[split]), best.gain[split])
    children = np.empty((split.size, 2), dtype=np.int64)  # each split's left, right
    feature, threshold = best.feature[split].tolist(), best.threshold[split].tolist()
    miss = missing_left[split].tolist()
    node_list = nodes.tolist()
    cuts = (np.flatnonzero(np.diff(trees)) + 1).tolist()  # splits run tree by tree
    for a, z in zip([0, *cuts], [*cuts, split.size], strict=True):
        if a == z:
            continue
        b = builders[int(trees[a])]
        base = b.add_children(best.left[split[a:z]], best.right[split[a:z]])
        children[a:z] = base + np.arange(2 * (z - a)).reshape(-1, 2)
        for r in range(a, z):
            node = node_list[r]
            b.feature[node], b.threshold[node] = feature[r], threshold[r]
            b.missing_left[node] = miss[r]
            b.left[node], b.right[node] = int(children[r, 0]), int(children[r, 1])
    if ctx.get("bounds") is not None:  # monotonic_cst: the children's value intervals
        monotonic.record_children(
            builders, trees, children, best.feature[split], best.left[split],
            best.right[split], monotonic.splits_only(ctx["bounds"], split),
        )  # fmt: skip
    for i, node_set in best.sets.items():
        if best.feature[i] >= 0:
            builders[int(frontier.tree[i])].sets[int(frontier.node[i])] = node_set
    # Children that are not leaves by rule are the next frontier, split by split.
    grows = np.column_stack([~child_leaf_l[split], ~child_leaf_r[split]]).ravel()
    slot_of = np.cumsum(grows) - 1
    route_left[split] = np.where(grows[0::2], slot_of[0::2], -1)
    route_right[split] = np.where(grows[1::2], slot_of[1::2], -1)
    new_tree = np.repeat(trees, 2)[grows]
    new_node = children.ravel()[grows]
    kept = np.flatnonzero(defer) if defer is not None else np.zeros(0, dtype=np.int64)
    route_left[kept] = route_right[kept] = new_tree.size + np.arange(kept.size)
    new_tree = np.concatenate([new_tree, frontier.tree[kept]])
    new_node = np.concatenate([new_node, frontier.node[kept]])
    # New slots must be grouped by tree: sort them (stable) and renumber the routes.
    order = np.argsort(new_tree, kind="stable")
    renumber = np.empty(order.size, dtype=np.int32)
    renumber[order] = np.arange(order.size, dtype=np.int32)
    for route in (route_left, route_right):
        route[route >= 0] = renumber[route[route >= 0]]
    continued = np.zeros(order.size, dtype=bool)
    continued[renumber[new_tree.size - kept.size :]] = True
    ctx["continued"] = continued if kept.size else None
    route_feature = np.where(best.feature >= 0, best.feature, -1).astype(np.int32)
    route_feature[kept] = 0  # any column: both sides are the same slot
    routes = {
        "route_feature": route_feature,
        "route_threshold": np.nan_to_num(best.threshold, nan=0.0),
        "route_left": route_left,
        "route_right": route_right,
    }
    if best.sets:
        routes.update(_route_sets(best.sets, n_slots))
    if ctx.get("missing") is not None and ctx["missing"].any():
        routes["route_missing_left"] = missing_left
    nxt = _Frontier(new_tree.astype(np.int64)[order], new_node.astype(np.int64)[order], depth)
    return nxt, routes


def _route_sets(
    sets: dict[int, tuple[NDArray[np.int32], NDArray[np.int8]]], n_slots: int
) -> dict[str, NDArray[Any]]:
    """Set splits of this level packed per slot (offsets, codes, sides)."""
    size = np.zeros(n_slots, dtype=np.int64)
    for i, (codes, _) in sets.items():
        size[i] = codes.size
    off = np.zeros(n_slots + 1, dtype=np.int64)
    np.cumsum(size, out=off[1:])
    order = sorted(sets)
    return {
        "route_set_off": off,
        "route_set_code": np.concatenate([sets[i][0] for i in order]).astype(np.int32),
        "route_set_side": np.concatenate([sets[i][1] for i in order]).astype(np.int8),
    }


def _grow_batch(
    fed: Federation,
    cfg: GrowerConfig,
    ledger: CommunicationLedger,
    builders: list[_TreeBuilder],
    setup: dict[str, Any],
    ctx: dict[str, Any],
    bar: Any,
) -> None:
    """Grow a batch of trees level by level until no node is left to split."""
    for b in builders:
        b.add(None)
    n = len(builders)
    if "secure" in ctx:
        ctx["secure"].start_batch(n, ctx["d"])
    ctx["records"].start_batch()
    ctx["constant"] = np.tile(ctx["root_constant"], (n, 1))
    ctx["continued"] = None
    frontier = _Frontier(np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64), 0)
    routes: dict[str, NDArray[Any]] = {}
    header: dict[str, Any] = {"setup": setup}
    if ctx.get("subsample"):  # balanced_subsample (multi-output, weighted): tree weights
        header = bootstrap_round(fed, ledger, cfg, setup, ctx)
    steps = cfg.max_depth  # the bar's steps left for this batch (None: the bar has no total)
    while frontier.tree.size:
        frontier, routes = _level(fed, cfg, ledger, builders, frontier, routes, header, ctx)
        header = {}
        if steps is None or steps > 0:  # not AvgImp's extra Round A at max_depth
            bar.update(1)
            steps = None if steps is None else steps - 1
    if steps:  # trees that all stopped before max_depth: the bar ends full (it ended at 6/8)
        bar.update(steps)


def grow_forest(
    fed: Federation, cfg: GrowerConfig, prior: list[Tree] | None = None, guides: Any = None
) -> ForestResult:
    """Train a federated forest through ``fed`` and return its trees and ledger.

    With ``cfg.first_tree > 0`` (warm start) only trees ``first_tree..n_estimators-1`` are
    grown, with the seeds they would have had in one fit; ``prior`` (the earlier trees)
    joins them for the out-of-bag round, ``guides`` their fit's guides (under "secure").
    The result holds the new trees only.
    """
    check_combinations(cfg)
    if cfg.privacy != "none":
        secure.check_config(cfg)
    monotonic.check_values(cfg.monotonic_cst, cfg.split_rule)
    if cfg.on_client_failure == "drop":
        fed = DropFailedClients(fed)
    ledger = CommunicationLedger()
    schema = handshake(fed, cfg, ledger)
    first_sum = ledger.rounds  # the first masked round (batch_setup.batch_digest)
    cfg = resolve_sizes(cfg, sum(schema["n_samples"].values()))
    schema["draws"] = bootstrap_draws(cfg, schema["n_samples"])
    if cfg.privacy != "none":
        m = cfg.min_aggregate_rows or default_min_rows(cfg.min_samples_leaf)
        # Every released sum covers at least m rows: so does every leaf.
        cfg = replace(cfg, min_aggregate_rows=m, min_samples_leaf=max(cfg.min_samples_leaf, m))
    d = schema["n_features"]
    check_max_features(cfg.max_features, d)
    check_top_l(cfg.top_l, d)
    if schema["classes"] is not None:  # one block of class columns per output
        cfg = replace(cfg, class_sizes=class_sizes(schema["classes"]))
    if cfg.class_weight is not None and cfg.class_outputs > 1:  # weights on the rows
        schema["weighted"] = True  # the clients' row weights: real numbers now
    n_classes = sum(cfg.class_sizes)
    ctx: dict[str, Any] = {
        "d": d,
        "k": resolve_max_features(cfg.max_features, d),
        "n_stats": n_stats(cfg.task, n_classes, schema["n_outputs"]),
        "rngs": [np.random.default_rng([cfg.seed, t, 1]) for t in range(cfg.n_estimators)],
        "importances": np.zeros((cfg.n_estimators, d + int(cfg.split_on_client))),
        "n_classes": n_classes,
        "n_categories": category_counts(schema["categories"], d),
        "missing": schema["missing"],
        "weighted": schema["weighted"],
        "edges": schema["edges"],
        "clients": schema["clients"],
        "records": ClientRecords(
            schema["n_samples"],
            "poisson" if cfg.criterion == "poisson" else cfg.task,  # how its sums are checked
            count_columns(n_classes, schema["weighted"]),
            cfg.bootstrap,
            schema["draws"],
            schema["client_missing"],
            cfg.class_sizes,
        ),
        "monotonic": monotonic.check_after_handshake(
            cfg.monotonic_cst,
            n_features=d,
            n_outputs=schema["n_outputs"],
            class_sizes=cfg.class_sizes,
            n_categories=category_counts(schema["categories"], d),
        ),
    }
    if cfg.privacy == "dp":
        budget.plan_fit(cfg, schema, ctx)
    if cfg.privacy != "none":
        ctx["secure"] = schema["secure"] = secure.setup_grids(
            fed, ledger, cfg, schema, schema["public_keys"], ctx["n_categories"], guides
        )
        # The settings digest each client binds its bootstrap to (digest.py), over the
        # clients still present (and the drops so far: batch_setup.py).
        ctx[SETTINGS_DIGEST] = batch_digest(cfg, schema, fed, d, first_sum)
        check_warm_digest(cfg, ctx[SETTINGS_DIGEST])
        ctx["prior_digest"] = ctx[SETTINGS_DIGEST]  # a warm start's earlier trees' (checked)
    cfg = set_up_class_weights(cfg, schema, ctx)  # once the class counts are known
    ctx["root_constant"] = root_constant(schema, ctx)
    start = cfg.first_tree
    builders = [_TreeBuilder() for _ in range(start, cfg.n_estimators)]
    batch = cfg.tree_batch_size or len(builders) or 1
    n_levels = (cfg.max_depth or 0) * -(-len(builders) // batch)
    with progress_bar(
        total=n_levels or None, desc="levels", unit="level", disable=cfg.verbose <= 0
    ) as bar:
        batches: list[tuple[int, NDArray[np.uint8]]] = []  # each batch's first tree, digest
        for first in range(start, cfg.n_estimators, batch):
            # Trees of a batch grow together; batches one after another bound the clients'
            # per-row state. Seeds use global tree indices: the forest is the same.
            last = min(first + batch, cfg.n_estimators)
            while True:  # "secure"/"dp": a drop in the set-up sets the batch up again
                if SETTINGS_DIGEST in ctx:  # over the clients present, the drops so far
                    ctx[SETTINGS_DIGEST] = batch_digest(cfg, schema, fed, d, first_sum)
                sub = {
                    **ctx,
                    "rngs": ctx["rngs"][first:last],
                    "importances": ctx["importances"][first:last],
                    "first_tree": first,
                }
                header = setup_header(cfg, schema, first, last - first)
                try:
                    _grow_batch(
                        fed, cfg, ledger, builders[first - start : last - start], header, sub, bar
                    )
                    break
                except SetUpDropped:  # nothing grown yet: the batch from scratch
                    builders[first - start : last - start] = [_TreeBuilder() for _ in sub["rngs"]]
                    ctx["rngs"][first:last] = [
                        np.random.default_rng([cfg.seed, t, 1]) for t in range(first, last)
                    ]
            if SETTINGS_DIGEST in ctx:
                batches.append((first, ctx[SETTINGS_DIGEST]))
    trees = [b.finish(cfg.task, cfg.criterion, cfg.class_sizes) for b in builders]
    if ctx["monotonic"] is not None:  # scikit-learn's clip_node_value, at every node
        trees = [
            monotonic.clip_tree(t, b.bounds, cfg.task) for t, b in zip(trees, builders, strict=True)
        ]
    if "dp" in ctx and ctx["secure"].y_lo is not None:  # a node's mean lies in its targets'
        trees = [clip_leaf_values(t, ctx["secure"].y_lo, ctx["secure"].y_hi) for t in trees]
    if cfg.ccp_alpha > 0.0:  # scikit-learn's cost-complexity pruning, before the OOB round
        trees = prune_forest(trees, cfg.ccp_alpha, ctx["importances"][start:])
    result = ForestResult(
        trees,
        d,
        schema["feature_names"],
        schema["classes"],
        ledger,
        schema["n_samples"],
        importances=forest_importances(ctx["importances"][start:]),
        tree_importances=ctx["importances"][start:],
        clients=schema["clients"],
        categories=schema["categories"],
        label_dtype=schema["label_dtype"],
        dropped_clients=fed.dropped if isinstance(fed, DropFailedClients) else [],
        dropped_reasons=dict(fed.reasons) if isinstance(fed, DropFailedClients) else {},
        settings_digest=fit_digest(batches, ctx.get(SETTINGS_DIGEST)),
        guides=secure.guides_pool(ctx.get("secure")),
    )
    if cfg.oob_score:
        scored = (prior or []) + trees  # each tree's digest, where batches had several
        digests = tree_digests(batches, start, len(scored), ctx.get("prior_digest"))
        oob_round(fed, ledger, scored, cfg, result, ctx["records"], ctx.get("dp"), digests)
        if "dp" in ctx:
            budget.release_oob(cfg, schema, ctx)
    else:
        _finish_clients(fed)
    if "dp" in ctx:
        result.privacy_report = budget.report(cfg, schema, ctx, fed, ledger)
    scratch.release()  # in-process clients' scratch memory (scratch.py) back to the system
    return result


def _finish_clients(fed: Federation) -> None:
    """Let in-process clients drop their per-fit state (no message: nothing to send)."""
    for client in getattr(fed, "clients", {}).values():
        client.finish()


def forest_importances(per_tree: NDArray[np.float64]) -> NDArray[np.float64]:
    """Impurity-based importances: normalised per tree, averaged, normalised (as scikit-learn)."""
    totals = per_tree.sum(axis=1, keepdims=True)
    keep = totals[:, 0] > 0
    if not keep.any():
        return np.zeros(per_tree.shape[1])
    mean = (per_tree[keep] / totals[keep]).mean(axis=0)
    return np.asarray(mean / mean.sum())
