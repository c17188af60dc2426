"""The server's accounts under ``privacy="dp"``: the fit's noise plan and the budget spent.

The noise of the whole fit is calibrated before anything is released (:func:`plan_fit`,
from the entries one row can touch: :func:`..privacy.dp.entries_per_row`); the entries
actually released are counted as the fit goes (the grid rounds, each tree's levels, the
out-of-bag round; under ``class_weight="balanced_subsample"`` with multi-output y or
sample weights, the bootstrap rounds' class counts: ``server/bootstrap.py``), and what they spend is
``model.privacy_report_`` (:func:`report`).
Moved out of ``grower.py``, which drives the rounds, to keep it within the layout's limit.
"""

from __future__ import annotations

import math
from typing import Any

from ..privacy import dp
from ..protocol import RECOVER, CommunicationLedger
from .config import GrowerConfig
from .weights import rows_weighed_per_tree

__all__ = ["noise_kept", "plan_fit", "release_level", "release_oob", "report"]


def _numeric(ctx: dict[str, Any]) -> int:
    """The numeric features (each with its grid-round entries)."""
    return int((ctx["n_categories"] == 0).sum())


def _grid_and_target(
    cfg: GrowerConfig, schema: dict[str, Any], ctx: dict[str, Any]
) -> tuple[int, int]:
    """Entries one row touches in the grid rounds' features and in the targets' histograms."""
    cls = cfg.task == "classification"
    balanced = cfg.class_weight == "balanced"  # noisy class counts in the first grid round
    return (
        dp.grid_entries(_numeric(ctx), cls),
        dp.target_entries(cls, schema["n_outputs"], balanced),
    )


def plan_fit(cfg: GrowerConfig, schema: dict[str, Any], ctx: dict[str, Any]) -> None:
    """The noise of the whole fit, calibrated before anything is released.

    ``ctx["dp"]`` (also ``schema["dp"]``, sent to the clients); the grid rounds' entries
    are counted as released.
    """
    assert cfg.epsilon is not None and cfg.max_depth is not None
    n_rows = sum(schema["n_samples"].values())
    delta = cfg.delta if cfg.delta is not None else min(1e-5, 0.1 / max(n_rows, 1))
    entries = dp.entries_per_row(
        n_trees=cfg.n_estimators,
        max_depth=cfg.max_depth,
        n_sampled=ctx["k"],
        n_numeric=_numeric(ctx),
        n_stats=ctx["n_stats"],
        classification=cfg.task == "classification",
        n_outputs=schema["n_outputs"],
        class_counts=cfg.class_weight == "balanced",
        bootstrap_counts=rows_weighed_per_tree(cfg, bool(schema["weighted"])),
    )
    grid, target = _grid_and_target(cfg, schema, ctx)
    n_clients = len(schema["n_samples"])  # they share every entry's noise
    t = int(cfg.dp_colluders)
    if t >= n_clients:
        raise ValueError(
            f"dp_colluders={t} colluding clients cannot be tolerated among the {n_clients} "
            f"clients of this fit: each client's noise share is sigma / sqrt(K - dp_colluders) "
            f"(K = {n_clients} clients), so dp_colluders must be at most {n_clients - 1}."
        )
    plan = dp.plan_noise(float(cfg.epsilon), float(delta), entries, grid, target, n_clients, t)
    ctx["dp"] = schema["dp"] = plan
    ctx["dp_released"] = [grid + target]
    # Kept: the report is made after set-up, whose configuration has no class_weight left
    # for multi-output y (the clients weigh their rows).
    ctx["dp_grid_target"] = (grid, target)


def release_level(cfg: GrowerConfig, ctx: dict[str, Any], n_trees: int) -> None:
    """One level of ``n_trees`` trees released: a row is in one node per tree and level."""
    per_level = dp.level_entries(
        ctx["k"], ctx["n_stats"], cfg.task == "classification", cfg.class_outputs
    )
    ctx["dp_released"][0] += n_trees * per_level


def release_oob(cfg: GrowerConfig, schema: dict[str, Any], ctx: dict[str, Any]) -> None:
    """The out-of-bag round's sums released."""
    ctx["dp_released"][0] += dp.oob_entries(cfg.task == "classification", schema["n_outputs"])


def report(
    cfg: GrowerConfig,
    schema: dict[str, Any],
    ctx: dict[str, Any],
    fed: Any = None,
    ledger: CommunicationLedger | None = None,
) -> dict[str, Any]:
    """``model.privacy_report_``: the plan, the fit's guarantee and what its releases spent.

    :func:`noise_kept` of the drops (``fed.dropped``) charges every release (an upper
    bound on the spend); without ``ledger`` every drop counts as recovered.
    """
    plan: dp.DpPlan = ctx["dp"]
    grid, target = ctx["dp_grid_target"]
    dropped = list(getattr(fed, "dropped", None) or [])
    k, t = len(schema["n_samples"]), plan.colluders
    kept = noise_kept(dropped, ledger, k, t)
    spent = dp.spent_epsilon(plan, ctx["dp_released"][0], grid, target, kept)
    guarantee = max(dp.guaranteed_epsilon(plan, grid, target, kept), spent)
    # Against the server alone, and against one colluder more than tolerated (None: no
    # honest share left, no guarantee; a model file's JSON holds no infinity).
    more = {
        name: dp.guaranteed_epsilon(plan, grid, target, noise_kept(dropped, ledger, k, t, c))
        for name, c in (("epsilon_server_alone", 0), ("epsilon_one_more_colluder", t + 1))
    }
    return plan.report(
        spent, guarantee, {n: e if math.isfinite(e) else None for n, e in more.items()}
    )


def noise_kept(
    dropped: list[tuple[str, int]],
    ledger: CommunicationLedger | None,
    n_clients: int,
    colluders: int = 0,
    against: int | None = None,
) -> float:
    """The least fraction of the planned noise variance a released sum carried.

    Each client adds ``sigma / sqrt(P - t)`` of noise, ``P`` the clients asked in the
    round, ``t`` the ``colluders`` tolerated; ``against`` colluders (default ``t``) know
    theirs, so a round's sums carry ``(P - c) / (P - t)`` of the planned variance against
    them (1 at ``c = t``). A client dropped in a round that was recovered (the next round
    removes its masks) took its share out of that round's released sums: ``(P - d - c) /
    (P - t)``, ``d`` the clients dropped in it. A round not recovered released nothing (a
    batch's set-up, sent again to the survivors, whose shares then add up to the plan's; a
    Round B), nor did a drop in the handshake. Which entries a recovered round held is
    not tracked: the least fraction charges every release.
    """
    t = colluders
    c = t if against is None else against
    if ledger is None:  # every drop taken as one round's of the clients at the handshake
        d = len(dropped)
        return max(n_clients - d - c, 0) / (n_clients - t) if n_clients > t else 1.0
    records = ledger.records
    # Every round's own share count (fewer clients after a drop: the survivors' shares).
    kept = min(
        (max(p - c, 0) / (p - t) for p in {r.n_clients for r in records} if p > t), default=1.0
    )
    for r in sorted({r for _, r in dropped}):
        if r + 1 < len(records) and records[r + 1].kind == RECOVER and records[r].n_clients > t:
            d = sum(1 for _, at in dropped if at == r)
            p = records[r].n_clients
            kept = min(kept, max(p - d - c, 0) / (p - t))
    return kept
