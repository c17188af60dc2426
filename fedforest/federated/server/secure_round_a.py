"""The secure server's Round A: pooled node summaries and counts at the node grids' edges.

Under ``privacy="secure"`` (and ``"dp"``); with the checks both rounds make of pooled sums
(Jensen's bound, the weights' tolerance) and the levels' offsets. Moved out of
``secure.py``, which re-exports its names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from joblib import effective_n_jobs
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT
from ..client_secure import stat_frac_bits
from ..criteria import s_log_mean
from ..federation import Federation
from ..grid_wire import half_arrays, half_pairs, hist_spec, unpack_hist
from ..privacy.secagg import (
    FRAC_BITS,
    HALF_BITS,
)
from ..protocol import ROUND_A, CommunicationLedger, Message
from .checks import check_class_blocks
from .config import GrowerConfig
from .denoise import (
    denoise_a,
    from_z,
    stat_task,
)
from .digest import digest_arrays
from .dp_checks import check_noisy_counts
from .secure_checks import (
    check_pooled_cumulative,
    check_pooled_rows,
)
from .secure_grids import (  # the state between levels (the grower calls it through here)
    LevelA,
    SecureState,
    node_grids,
)
from .secure_sums import SetUpDropped, sums_unless_dropped
from .weights import rows_hist


def _shifts(
    cfg: GrowerConfig,
    ctx: dict[str, Any],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    stream: int,
) -> NDArray[np.float64]:
    """Per pair, a level offset in (0, 1] from (seed, tree, node, feature); 1 without bootstrap.

    A hash, not a generator's sequence: the same pair gets the same offset whatever the
    batch it grows in. Without the bootstrap, trees can hold the same rows and must then
    get the same candidates (see docs/privacy.md), so there are no offsets.
    """
    n_pairs = int(pair_off[-1])
    if not cfg.bootstrap:
        return np.ones(n_pairs)
    tree, node = ctx["secure_slots"][:2]
    reps = np.diff(pair_off)
    words = [np.repeat(tree, reps), np.repeat(node, reps), pair_feat.astype(np.int64)]
    x = np.full(n_pairs, (cfg.seed * 0x9E3779B97F4A7C15 + stream) % 2**64, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for w in words:
            x = _splitmix(x ^ w.astype(np.uint64))
    return np.asarray(1.0 - (x >> np.uint64(11)).astype(np.float64) / 2.0**53)


def _splitmix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finaliser (a bijective mix of 64-bit words), vectorised."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.asarray(x ^ (x >> np.uint64(31)))


def _weight_tol(bits: NDArray[np.int64], n_clients: int) -> float:
    """How far apart two pooled weights of the same rows may be: each client rounds both."""
    return 0.0 if bits[STAT_WEIGHT] == 0 else n_clients * 2.0 ** -float(bits[STAT_WEIGHT])


def _frac_bits(ctx: dict[str, Any]) -> NDArray[np.int64]:
    """Fractional bits of the level's statistics (per output's pair for regression)."""
    n_out = (ctx["n_stats"] - 2) // 2 if not ctx["n_classes"] else 1
    return stat_frac_bits(ctx["n_classes"], ctx["weighted"], n_out)


def check_jensen(stats_u: NDArray[np.float64], what: str) -> None:
    """criterion="poisson" under "secure": pooled sums obey Jensen's bound (scaled units).

    ``sum w u log u >= S log(S / W)`` holds for any rows; the fixed point moves each
    client's two sums by at most ``2^-(FRAC_BITS + 1)`` (a client without rows in the sum
    sends exact zeros, so at most ``rows`` clients round), and the check allows that
    (``rows (2 + |log(S / W)|) 2^-FRAC_BITS``). A violation means some client sent sums
    that no rows have (secure aggregation hides which client).
    """
    # One (sum w u, sum w u log u) pair per output.
    w, s, t = stats_u[:, STAT_WEIGHT, None], stats_u[:, 2::2], stats_u[:, 3::2]
    bound = s_log_mean(s, w)
    ratio = np.divide(s, w, out=np.ones_like(s), where=(s > 0) & (w > 0))
    rows = stats_u[:, STAT_ROWS, None]
    tol = rows * (2.0 + np.abs(np.log(ratio))) * 2.0**-FRAC_BITS + 1e-9
    bad = ((s < -tol) | (t < bound - tol)).any(axis=1)
    if np.any(bad):
        raise ValueError(
            f'The pooled sums of {what} under criterion="poisson" break Jensen\'s bound '
            f"(sum w u log u < S log(S / W) at {int(bad.sum())} rows of statistics): some "
            "client sent sums that no targets have (secure aggregation hides which)."
        )


# --------------------------------------------------------------------------- Round A
def round_a(
    fed: Federation,
    ledger: CommunicationLedger,
    cfg: GrowerConfig,
    ctx: dict[str, Any],
    header: dict[str, Any],
    arrays: dict[str, NDArray[Any]],
    n_slots: int,
    node_stats: NDArray[np.float64],
) -> LevelA:
    """Masked Round A: pooled summaries and counts on the node grids (node_stats: rows, weight)."""
    state: SecureState = ctx["secure"]
    if state.guides is not None:  # the level's depth: the guides of depths above it
        state.guides.level = ctx["secure_slots"][2]
    pair_off, pair_feat = arrays["pair_off"], arrays["pair_feat"]
    shift = _shifts(cfg, ctx, pair_off, pair_feat, 0)
    missing = ctx["missing"]  # a missing edge only where m rows or more miss the value
    if state.rare_missing is not None:
        missing = missing & ~state.rare_missing
    grid_off, grid, wire = node_grids(
        state, cfg, pair_off, pair_feat, ctx["n_categories"], node_stats[:, 0], shift,
        missing, ctx["secure_slots"][0],
    )  # fmt: skip
    bits = _frac_bits(ctx)
    packed = _packs(cfg, state, bits)
    half = half_pairs(pair_off, node_stats, packed and cfg.class_weight is None)  # grid_wire
    wire.update(half_arrays(half))
    sums = sums_unless_dropped(
        fed,
        ledger,
        Message(
            ROUND_A,
            {**header, "pack_counts": True} if packed else {**header, **rows_hist(ctx)},
            {**arrays, "grid_off": grid_off, **wire, **digest_arrays(header, ctx)},
        ),
        {
            "summary": ((n_slots, ctx["n_stats"]), bits),
            "hist": hist_spec(grid_off, half, packed, bits),
        },
        effective_n_jobs(cfg.n_jobs),
        # At the roots, sums under the full set's bootstraps: the batch is set up again
        # (privacy.md, "Drops"; under "dp" too: no release short of a noise share). Below
        # them a node's survivors' rows may number 1 to m - 1: nothing is released, no
        # node splits; under "dp" its noisy sums are recovered (the report charges them).
        recover=cfg.privacy == "dp" and ctx["secure_slots"][2] != 0,
    )
    if sums is None and ctx["secure_slots"][2] == 0:
        raise SetUpDropped("a client dropped in the roots' Round A")
    if sums is None:  # zero weight: the nodes keep the statistics their parents gave
        zero = np.zeros((n_slots, ctx["n_stats"]))
        return LevelA(zero, grid_off, grid, np.zeros((grid.size, 2)), bool(rows_hist(ctx)))
    summary = sums["summary"]
    n_jobs = effective_n_jobs(cfg.n_jobs)
    room = state.hist_room(int(grid_off[-1]))  # owned by the state: read again in Round B
    cum = unpack_hist(sums["hist"], grid_off, half, n_jobs, room) if packed else sums["hist"]
    if cfg.privacy != "dp":
        check_pooled_rows(summary, state.n_rows, "Round A's node summaries")
        per_pair = summary[np.repeat(np.arange(n_slots), np.diff(pair_off))][:, :2]
        if rows_hist(ctx):  # the weight column counts rows (weights.rows_hist)
            per_pair[:, 1] = per_pair[:, 0]
        tol = _weight_tol(bits, len(fed.client_names))
        check_pooled_cumulative(cum, grid_off, grid, per_pair, "Round A's histograms", tol)
    if cfg.privacy == "dp":
        sigma, pairs = ctx["dp"].tree_sigma * ctx["dp"].released, np.diff(pair_off)
        check_noisy_counts(summary[:, STAT_ROWS], sigma, state.n_rows, "Round A's node summaries")
        rows = (np.zeros(int(pair_off[-1])), np.repeat(summary[:, STAT_ROWS], pairs))
        check_noisy_counts(cum[:, 0], sigma, state.n_rows, "Round A's histograms", grid_off, rows)
        summary, cum = denoise_a(
            summary, cum, grid_off, ctx["dp"].clip, stat_task(cfg), cfg.class_sizes
        )
    elif cfg.criterion == "poisson":
        check_jensen(summary, "Round A's node summaries")
    elif cfg.task == "classification":
        check_class_blocks(summary, cfg.class_sizes, ctx["weighted"], "Round A's node summaries")
    pooled = from_z(summary, state, cfg.task == "regression")
    return LevelA(pooled, grid_off, grid, cum, bool(rows_hist(ctx)))


def _packs(cfg: GrowerConfig, state: SecureState, bits: NDArray[np.int64]) -> bool:
    """Whether rows and draws travel as one word (``pack_counts``).

    They are whole counts whose pooled sums stay below 2^32 (without sample weights,
    outside "dp"); the largest share of the masked words at small sizes.
    """
    return cfg.privacy == "secure" and not np.any(bits[:2]) and state.n_rows < 2**HALF_BITS


def check_root_weights(pooled: NDArray[np.float64], depth: int, ctx: dict[str, Any]) -> None:
    """Sample weights too small for the fixed point: a tree's rows all weigh 0 once pooled.

    With sample weights the weight column travels with ``FRAC_BITS`` fractional bits, so
    weights below about ``2^-25`` round to 0: the tree then held rows but no weight, and
    grew a single leaf (1e-12 weights gave a forest of single leaves, silently). Under
    "dp" the noise decides; not checked there.
    """
    if depth > 0 or not ctx["weighted"] or "dp" in ctx:
        return
    lost = (pooled[:, STAT_ROWS] > 0) & (pooled[:, STAT_WEIGHT] <= 0)
    if lost.any():
        raise ValueError(
            f"The clients' sample weights are too small for the secure sums: a tree's "
            f"{int(pooled[np.flatnonzero(lost)[0], STAT_ROWS])} rows weigh 0 in all once "
            f"rounded to the fixed point's 2^-{FRAC_BITS}. Scale every client's weights by "
            "one factor (only their ratios matter), e.g. so that the largest is about 1."
        )
