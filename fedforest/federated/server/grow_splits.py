"""Splits applied: pooled node statistics, children added to the trees, rows' sets routed.

Moved out of ``grower.py`` (the 800-line cap).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_WEIGHT
from ..protocol import (
    Message,
)
from . import monotonic
from .config import GrowerConfig
from .rare_codes import with_merged_codes
from .splitter import BestSplits
from .tree_builder import _Frontier, _is_leaf_by_rule, _TreeBuilder


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
    feature, threshold = best.feature[split], best.threshold[split]
    miss = missing_left[split]
    cuts = (np.flatnonzero(np.diff(trees)) + 1).tolist()  # splits run tree by tree
    for a, z in zip([0, *cuts], [*cuts, split.size], strict=True):
        if a == z:
            continue
        b = builders[int(trees[a])]
        base = b.add_children(best.left[split[a:z]], best.right[split[a:z]])
        children[a:z] = base + np.arange(2 * (z - a)).reshape(-1, 2)
        b.set_splits(nodes[a:z], feature[a:z], threshold[a:z], miss[a:z], children[a:z])
    if ctx.get("bounds") is not None:  # monotonic_cst: the children's value intervals
        monotonic.record_children(
            builders, trees, children, best.feature[split], best.left[split],
            best.right[split], monotonic.splits_only(ctx["bounds"], split),
        )  # fmt: skip
    code_map = ctx["secure"].code_map if "secure" in ctx else {}
    for i, node_set in best.sets.items():
        if code_map and int(best.feature[i]) in code_map:  # merged codes (rare_codes.py)
            node_set = best.sets[i] = with_merged_codes(node_set, code_map[int(best.feature[i])])
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
