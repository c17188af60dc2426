"""The server's half of ``privacy="secure"``: sums over clients only, never a small one.

Rounds, as under ``"none"`` but with masked answers (:mod:`..privacy.secagg`):

- two grid rounds after the handshake (the first masked round relays the clients' public
  keys; a count of known values comes first where a column has missing values,
  :mod:`.sparse_columns`): the
  pooled moments of ``asinh(x)`` per numeric feature (and of ``asinh(y)`` for regression,
  which fixes the targets' standardisation), then pooled counts on a coarse grid, which
  give each feature's root distribution (:mod:`..privacy.grids`);
- Round A per level: pooled node summaries, and per (node, sampled feature) the pooled
  cumulative counts at the node's grid edges (a categorical feature's grid is its codes);
- Round B per level: pooled left statistics at candidates kept by the minimum-rows rule
  (:mod:`..privacy.rules`), and pooled statistics of the node's category groups;
- the out-of-bag round: pooled sums.

A client that fails a round under ``on_client_failure="drop"`` is removed from the sum by
a recovery round in which the survivors send the masks they shared with it for that round;
not in a Round B or a Round A below the roots, whose survivors' sums may cover fewer than
``m`` rows (that level's nodes then stay leaves), nor in the roots' Round A, which the
grower sends again under the survivors' digest (:mod:`.batch_setup`).
What the server keeps between levels, and the node grids it places from it, are in
:mod:`.secure_grids`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from joblib import effective_n_jobs
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT, class_sizes
from ..client_secure import MOMENT_FRAC_BITS, oob_frac_bits, stat_frac_bits, target_grid
from ..criteria import s_log_mean
from ..federation import Federation
from ..grid_wire import candidate_arrays, half_arrays, half_pairs, hist_spec, unpack_hist
from ..privacy.dp import ASINH_CLIP
from ..privacy.grids import moment_grid, outer_bounds, searchsorted_segments
from ..privacy.intervals import safe_from_ancestors
from ..privacy.partitions import partition_filter
from ..privacy.rules import group_categories, safe_groups, secure_candidates
from ..privacy.secagg import (
    FRAC_BITS,
    HALF_BITS,
    LOW_BITS,
    unpack_counts,
)
from ..protocol import GRID, ROUND_A, ROUND_B, CommunicationLedger, Message
from ..scratch import scratch
from .checks import check_class_blocks, check_pooled_class_counts
from .config import GrowerConfig
from .denoise import (
    clip_stats,
    consistent_children,
    cumulative_stats,
    denoise_a,
    from_z,
    stat_task,
)
from .digest import digest_arrays
from .dp_checks import check_noisy_counts, check_noisy_grid, target_range, whole
from .fallback import with_ancestor_candidates
from .guides import Guides, guided_in_threads, refine_args
from .missing import with_missing_sides
from .resolve import bootstrap_draws
from .secure_checks import (
    check_pooled_cumulative,
    check_pooled_groups,
    check_pooled_moments,
    check_pooled_rows,
    check_rounds_agree,
    refuse_small_bootstraps,
    refuse_too_few_rows,
)
from .secure_grids import (  # the state between levels (the grower calls it through here)
    LevelA,
    PairSegments,
    SecureState,
    advance,
    keep_histograms,
    node_grids,
    offsets,
    ranges,
)
from .secure_sums import SetUpDropped, secure_exchange, sums_unless_dropped
from .sparse_columns import known_enough
from .splitter import BestSetSplits, BestSplits, best_set_splits, best_splits, with_set_splits
from .target_scale import moment_scale as _moment_scale
from .target_scale import robust_scale as _robust_scale
from .weights import rows_hist, weigh

__all__ = [
    "LevelA",
    "SecureState",
    "UNSUPPORTED",
    "advance",
    "check_config",
    "guides_pool",
    "keep_histograms",
    "oob_sums",
    "round_a",
    "round_b",
    "secure_exchange",
    "setup_grids",
]

#: Options that need per-client values on the server (or send data values): refused.
UNSUPPORTED = {
    "split_on_client": "splits on the client index need each client's node statistics",
    "top_l": "Top-L shortlisting sends each client's own feature ranking",
    "avgimp": 'split_rule="avgimp" averages each client\'s own gains',
    "histogram": "the federated-histogram baseline sends each client's minimum and maximum",
    "global": "its grid is made of each client's per-feature quantiles (data values)",
    "verification": "n_bins=None sends every distinct value",
    "local_candidates": "local candidates are values of a client's own rows",
    "diagnostics": "the diagnostics read each client's counts per bin and sums per leaf",
    "client_fraction": (
        "a tree's sums would run over the clients the server sampled for it: one client's "
        "own statistics when it samples one (what the masks hide)"
    ),
    "bootstrap": (
        "without the bootstrap two trees can hold the same rows with different candidates, "
        "and differencing their sums isolates rows (the bootstrap's secret weights prevent it)"
    ),
}
#: Coarse grid of the second grid round: at most this many interior edges per feature.
_COARSE_EDGES = 1024
#: Under "secure", the coarse grid's rows per bin whatever ``min_aggregate_rows`` is: the
#: default floor's. The grid's exact counts run over every row and are not bound to the
#: settings digest, so edges that moved with ``m`` (above 10 or at the warned floors
#: below it) let fits with other floors difference them into bins of one row
#: (docs/privacy.md, "Count histograms").
_COARSE_ROWS = 10


def _coarse_rows(m: int, dp: bool) -> int:
    """Rows per coarse bin: ``m`` under "dp" (noisy counts, charged per fit), else 10."""
    return m if dp else _COARSE_ROWS


def check_config(cfg: GrowerConfig) -> None:
    """Refuse, with the reason, the options that cannot be run without a leak."""
    problems = []
    if cfg.split_on_client:
        problems.append(("split_on_client=True", UNSUPPORTED["split_on_client"]))
    if cfg.top_l:
        problems.append((f"top_l={cfg.top_l}", UNSUPPORTED["top_l"]))
    if cfg.split_rule != "exact":
        problems.append((f"split_rule={cfg.split_rule!r}", UNSUPPORTED["avgimp"]))
    if cfg.binning != "quantile":
        problems.append((f"binning={cfg.binning!r}", UNSUPPORTED[cfg.binning]))
    if cfg.n_bins is None:
        problems.append(("n_bins=None", UNSUPPORTED["verification"]))
    if cfg.local_candidates:
        problems.append(("local_candidates=True", UNSUPPORTED["local_candidates"]))
    if not cfg.bootstrap:
        problems.append(("bootstrap=False", UNSUPPORTED["bootstrap"]))
    if cfg.client_fraction < 1.0:
        problems.append((f"client_fraction={cfg.client_fraction}", UNSUPPORTED["client_fraction"]))
    if cfg.oob_leaf_sums:
        problems.append(("per-leaf out-of-bag sums", UNSUPPORTED["diagnostics"]))
    if cfg.privacy == "dp":
        if cfg.max_depth is None:
            problems.append(("max_depth=None", "the noise is calibrated for a bounded depth"))
        if cfg.epsilon is None or not cfg.epsilon > 0:
            raise ValueError(
                f'privacy="dp" needs a privacy budget: epsilon > 0, got {cfg.epsilon!r} '
                "(e.g. FedForestRegressor(privacy='dp', epsilon=5.0)); see docs/privacy.md."
            )
    if problems:
        what, why = problems[0]
        nor = ' (nor "secure")' if cfg.privacy == "dp" else ""
        raise ValueError(
            f'{what} is not available under privacy="{cfg.privacy}"{nor}: {why}. '
            'Use privacy="none" for it (the server then sees per-client statistics and data '
            "values; see docs/privacy.md)."
        )


def min_rows(cfg: GrowerConfig) -> int:
    """The minimum rows of every released sum."""
    assert cfg.min_aggregate_rows is not None
    return int(cfg.min_aggregate_rows)


# --------------------------------------------------------------------------- set-up
def setup_grids(
    fed: Federation,
    ledger: CommunicationLedger,
    cfg: GrowerConfig,
    schema: dict[str, Any],
    public_keys: dict[str, str],
    n_categories: NDArray[np.int64],
    guides: dict[str, NDArray[Any]] | None = None,
) -> SecureState:
    """The two grid rounds: the features' root distributions and the targets' scale.

    ``guides``: a warm start's earlier guides (:meth:`.guides.Guides.pool`).
    """
    d = schema["n_features"]
    if cfg.privacy == "secure":  # before any masked round
        rows = {c: schema["n_samples"].get(c, 0) for c in fed.client_names}
        refuse_too_few_rows(sum(rows.values()), min_rows(cfg))
        refuse_small_bootstraps(sum((bootstrap_draws(cfg, rows) or rows).values()), min_rows(cfg))
    numeric = np.flatnonzero(n_categories == 0).astype(np.int64)
    numeric = numeric[known_enough(fed, ledger, cfg, schema, numeric, public_keys, min_rows(cfg))]
    feats = numeric.astype(np.int32)
    regression = cfg.task == "regression"
    plan = schema.get("dp")
    header: dict[str, Any] = {
        "stage": "moments",
        "public_keys": public_keys,
        "target_moments": regression and plan is None,
        "target_hist": regression and plan is not None,
    }
    if plan is not None:
        header["dp"] = plan.header()
    balanced = cfg.class_weight == "balanced"
    if balanced:  # class_weight="balanced": the pooled class counts, masked
        header["class_counts"] = schema["classes"]
    first = Message(GRID, header, {"features": feats})
    # Two words each (hi, lo): the variance is a small difference of large sums.
    specs: dict[str, tuple[tuple[int, ...], Any]] = {
        "moments": ((feats.size, 3), 0),
        "moments_lo": ((feats.size, 3), 0),
    }
    k = int(schema.get("n_outputs", 1))  # one standardisation per output
    if regression and plan is None:
        specs["y_moments"] = ((k, 3), 0)
        specs["y_moments_lo"] = ((k, 3), 0)
    elif regression:
        specs["y_hist"] = ((k, target_grid().size - 1), 0)
    sizes = class_sizes(schema["classes"]) if schema["classes"] is not None else ()
    if balanced:  # one block of counts per output
        specs["class_counts"] = ((sum(sizes),), 0)
    sums = secure_exchange(fed, ledger, first, specs)
    moments = _two_words(sums, "moments")
    n, s1, s2 = moments.T if feats.size else (np.zeros(0),) * 3
    n_rows = float(sum(schema["n_samples"].get(c, 0) for c in fed.client_names))
    if plan is None:  # exact sums: every column counts the declared rows (bar missing values)
        check_pooled_moments(moments, n_rows, ~schema["missing"][numeric], "asinh(x)")
    if plan is not None:
        # Noisy sums: the row counts are public (the handshake's); the moments kept in range.
        check_noisy_grid(sums, moments, n_rows, plan, sizes)
        n = np.full(feats.size, max(n_rows, 1.0))
        s1 = np.clip(s1, -ASINH_CLIP * n, ASINH_CLIP * n)
        s2 = np.clip(s2, s1 * s1 / n, ASINH_CLIP**2 * n)
    m = min_rows(cfg)
    n_edges = int(np.clip(n_rows // _coarse_rows(m, plan is not None), 2, _COARSE_EDGES))
    step = 2.0 ** -(MOMENT_FRAC_BITS + LOW_BITS)  # each row's term's rounding, at most
    edges = moment_grid(n, s1, s2, n_edges, step) if feats.size else np.zeros((0, n_edges))
    hist = secure_exchange(
        fed,
        ledger,
        Message(GRID, {"stage": "histogram"}, {"features": feats, "edges": edges}),
        {"hist": ((feats.size, n_edges), 0)},
    )["hist"]
    if plan is not None:  # noisy per-bin increments: cumulative, monotone, within [0, n]
        what = "the second grid round's histograms"
        check_noisy_counts(hist.ravel(), plan.grid_sigma, n_rows, what, *whole(hist, n_rows))
        hist = np.maximum.accumulate(np.clip(np.cumsum(hist, axis=1), 0.0, n[:, None]), axis=1)
    else:  # exact counts of each feature's known rows
        grid_off = np.arange(feats.size + 1, dtype=np.int64) * n_edges
        what = "the second grid round's histograms"
        check_pooled_cumulative(hist.ravel(), grid_off, edges.ravel(), n, what)
    lo_f, hi_f = outer_bounds(n, s1, s2, step) if feats.size else (np.zeros(0), np.zeros(0))
    root_edges = [np.zeros(0)] * d
    root_mass = [np.zeros(0)] * d
    root_lo, root_hi = np.full(d, -np.inf), np.full(d, np.inf)
    for i, j in enumerate(numeric):
        # Where the pooled counts show the data starts and ends (to a coarse bin): the
        # outer bins then span the data, not the moment-based guesses.
        empty = np.flatnonzero(hist[i] <= 0)
        full = np.flatnonzero(hist[i] >= n[i])
        if empty.size:
            lo_f[i] = max(lo_f[i], edges[i][empty[-1]])
        if full.size:
            hi_f[i] = min(hi_f[i], edges[i][full[0]])
        e = np.concatenate([[lo_f[i]], np.clip(edges[i], lo_f[i], hi_f[i]), [hi_f[i]]])
        cum = np.concatenate([[0.0], hist[i], [n[i]]])
        root_edges[j], root_mass[j] = e, np.maximum(np.diff(cum), 0.0)
        root_lo[j], root_hi[j] = lo_f[i], hi_f[i]
    state = SecureState(m, numeric, root_edges, root_mass, root_lo, root_hi, n_rows=n_rows)
    if cfg.privacy == "secure":  # guided candidates (guides.py); "dp" keeps its own
        state.guides = Guides(d)
        if guides is not None:
            state.guides.add_pool(guides)
    if balanced and plan is None:
        check_pooled_class_counts(sums["class_counts"], sizes, n_rows)
        state.class_counts = sums["class_counts"]
    elif balanced:  # noisy counts (the accountant counts them): at least 1 per class
        state.class_counts = np.maximum(sums["class_counts"], 1.0)
    if regression:
        state.poisson = cfg.criterion == "poisson"
        if plan is not None:
            pairs = [
                _robust_scale(h, state.poisson, plan.clip, plan.target_sigma)
                for h in sums["y_hist"]
            ]
            ranges = [target_range(h, target_grid(), plan.target_sigma) for h in sums["y_hist"]]
            state.y_lo, state.y_hi = (np.array(v) for v in zip(*ranges, strict=True))
        else:
            moments = _two_words(sums, "y_moments")
            check_pooled_moments(moments, n_rows, np.ones(k, dtype=bool), "asinh(y)")
            pairs = [_moment_scale(n, s1, s2, state.poisson) for n, s1, s2 in moments]
        centers, scales = (np.array(v) for v in zip(*pairs, strict=True))
        if k == 1:  # one output: floats (as before multi-output)
            state.y_center, state.y_scale = float(centers[0]), float(scales[0])
        else:
            state.y_center, state.y_scale = centers, scales
    return state


def _two_words(sums: dict[str, NDArray[np.float64]], name: str) -> NDArray[np.float64]:
    """A two-word fixed-point sum (decoded with 0 fractional bits) back to real values."""
    return np.asarray(
        sums[name] / 2.0**MOMENT_FRAC_BITS
        + sums[name + "_lo"] / 2.0 ** (MOMENT_FRAC_BITS + LOW_BITS)
    )


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
    grid_off, grid, wire = node_grids(
        state, cfg, pair_off, pair_feat, ctx["n_categories"], node_stats[:, 0], shift,
        ctx["missing"], ctx["secure_slots"][0],
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
    room = scratch("pooled-hist", 2 * int(grid_off[-1]), np.float64).reshape(-1, 2)  # this level
    cum = unpack_hist(sums["hist"], grid_off, half, n_jobs, room) if packed else sums["hist"]
    if cfg.privacy != "dp":
        check_pooled_rows(summary, state.n_rows, "Round A's node summaries")
        per_pair = summary[np.repeat(np.arange(n_slots), np.diff(pair_off))][:, :2]
        if rows_hist(ctx):  # the weight column counts rows (weights.rows_hist)
            per_pair[:, 1] = per_pair[:, 0]
        tol = _weight_tol(bits, len(fed.client_names))
        check_pooled_cumulative(cum, grid_off, grid, per_pair, "Round A's histograms", tol)
    if cfg.privacy == "dp":
        sigma, pairs = ctx["dp"].tree_sigma, np.diff(pair_off)
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


# --------------------------------------------------------------------------- Round B
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
) -> BestSplits:
    """Candidates under the minimum-rows rule, masked Round B, and each node's best split."""
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
    out_off = np.zeros(num.size + 1, dtype=np.int64)
    out = np.empty(num.size * max(cfg.n_bins, 1))  # B - 1 quantiles and the missing edge
    secure_candidates(
        sub_grid,
        sub_off,
        sub_rows,
        np.ascontiguousarray(level.cum[take, 1]),
        node_rows,
        level.node_weight(node),
        _shifts(cfg, ctx, pair_off, pair_feat, 1)[num],
        cfg.n_bins,
        m,
        out_off,
        out,
    )
    tree = np.asarray(ctx["secure_slots"][0], dtype=np.int64)[node]
    if state.guides is not None:  # guides first, the same m-row spacing (guides.py)
        g_off, g_thr = state.guides.find(tree, f, state.lo[node, f], state.hi[node, f])
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
    cand = cands[safe]
    n_kept = np.bincount(np.repeat(np.arange(num.size), np.diff(out_off))[safe], minlength=num.size)
    counts = np.zeros(n_pairs, dtype=np.int64)
    counts[num] = n_kept
    cand_off = offsets(counts)
    # The released candidates and the node's rows below them, for the children's rule.
    kept_off = offsets(n_kept)
    at = np.zeros(cand.size, dtype=np.int64)
    searchsorted_segments(sub_grid, sub_off, cand, kept_off, at)
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
    for p in np.flatnonzero(ok & (n_cat >= 2)):
        c = int(n_cat[p])
        cum = np.concatenate([[0.0], level.cum[level.grid_off[p] : level.grid_off[p + 1], 0]])
        rows = np.diff(np.concatenate([cum, [pooled[pair_node[p], STAT_ROWS]]]))
        groups = group_categories(rows[:c], m)
        # None if differencing with an ancestor's groups on the feature would isolate rows.
        slot, feat = int(pair_node[p]), int(pair_feat[p])
        groups = safe_groups(groups, rows[:c], state.ancestors_groups(slot, feat), m)
        if (groups >= 0).any():
            state.groups[slot * d + feat] = (rows[:c], groups)
            group_pair.append(int(p))
            group_maps.append(groups)
            group_rows.append(np.bincount(groups[groups >= 0], rows[:c][groups >= 0]))
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
        sigma, rows = ctx["dp"].tree_sigma, pooled[pair_node, STAT_ROWS]
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


def guides_pool(state: SecureState | None) -> dict[str, NDArray[Any]] | None:
    """The fit's guides, for a warm start (None outside "secure")."""
    return None if state is None or state.guides is None else state.guides.pool()


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


# --------------------------------------------------------------------------- out of bag
def oob_sums(
    fed: Federation, ledger: CommunicationLedger, msg: Message, width: int, classification: bool
) -> NDArray[np.float64]:
    """The masked out-of-bag round's pooled sums."""
    bits = oob_frac_bits(width, classification)
    return secure_exchange(fed, ledger, msg, {"oob_sums": ((width,), bits)})["oob_sums"]
