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

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import class_sizes, count_columns, n_stats
from ..._numba_cache import serialize_cache_writes
from ..._progress import progress_bar
from ...tree.arrays import Tree
from ...tree.prune import prune_forest
from .. import scratch
from ..failure import DropFailedClients
from ..federation import Federation
from ..privacy.rules import default_min_rows
from ..protocol import (
    SETTINGS_DIGEST,
    CommunicationLedger,
)
from . import budget, monotonic, secure
from .batch_setup import batch_digest, fit_digest, setup_header, tree_digests
from .bootstrap import bootstrap_round
from .checks import ClientRecords
from .config import ForestResult, GrowerConfig
from .digest import check_warm_digest, warm_history, with_history
from .dp_checks import clip_leaf_values
from .draws import sample_features as _sample_features  # noqa: F401 (tests import it here)
from .grow_level import _level
from .handshake import handshake
from .level import category_counts
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
from .secure_sums import SetUpDropped
from .tree_builder import _Frontier, _TreeBuilder, first_room
from .weights import set_up_class_weights

__all__ = ["GrowerConfig", "ForestResult", "forest_importances", "grow_forest"]

serialize_cache_writes()  # before any kernel compiles: _numba_cache.py


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
        ctx["warm_history"] = warm_history(cfg, ctx[SETTINGS_DIGEST], guides)
        check_warm_digest(cfg, ctx[SETTINGS_DIGEST])
        ctx["prior_digest"] = ctx[SETTINGS_DIGEST]  # a warm start's earlier trees' (checked)
    cfg = set_up_class_weights(cfg, schema, ctx)  # once the class counts are known
    ctx["root_constant"] = root_constant(schema, ctx)
    start = cfg.first_tree
    room = first_room(cfg.max_depth)
    builders = [_TreeBuilder(room) for _ in range(start, cfg.n_estimators)]
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
                    digest = batch_digest(cfg, schema, fed, d, first_sum)
                    ctx[SETTINGS_DIGEST] = with_history(digest, ctx["warm_history"])
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
                    fresh = [_TreeBuilder(room) for _ in sub["rngs"]]
                    builders[first - start : last - start] = fresh
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
