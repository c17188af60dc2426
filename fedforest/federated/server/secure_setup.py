"""The secure server's set-up: the options it refuses, the minimum rows, the grid rounds.

Under ``privacy="secure"`` (and ``"dp"``) the two grid rounds place every feature's root
distribution and the targets' standardisation (:func:`setup_grids`). Moved out of
``secure.py``, which re-exports its names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import class_sizes
from ..client_secure import DATA_TAG_WORDS, MOMENT_FRAC_BITS, target_grid
from ..federation import Federation
from ..privacy.copies import (
    ORDER_FRAC_BITS,
    check_order_sums,
    dependent_categories,
    nested_pairs,
    representatives,
)
from ..privacy.dp import ASINH_CLIP
from ..privacy.grids import moment_grid, outer_bounds
from ..privacy.rules import default_min_rows
from ..privacy.secagg import (
    LOW_BITS,
)
from ..privacy.weight_band import LOG_FRAC_BITS, band_from_logs
from ..protocol import GRID, CommunicationLedger, Message
from .checks import check_pooled_class_counts
from .config import GrowerConfig
from .dp_checks import check_noisy_counts, check_noisy_grid, target_range, whole
from .guides import MEDIAN_WINDOW, Guides
from .rare_codes import check_code_counts, code_maps, groupless_columns
from .resolve import bootstrap_draws, resolve_sizes
from .secure_checks import (
    check_pooled_cumulative,
    check_pooled_moments,
    refuse_small_bootstraps,
    refuse_too_few_rows,
)
from .secure_grids import (  # the state between levels (the grower calls it through here)
    SecureState,
)
from .secure_sums import secure_exchange, sums_sent_again, sums_unless_dropped
from .sparse_columns import known_enough
from .target_scale import check_poisson_sum
from .target_scale import moment_scale as _moment_scale
from .target_scale import robust_scale as _robust_scale
from .target_scale import warn_coarse_targets as _warn_coarse

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


def _coarse_counts(
    fed: Federation, ledger: CommunicationLedger, feats: NDArray[Any], edges: NDArray[Any], dp: bool
) -> NDArray[np.float64]:
    """The second grid round's pooled counts at ``edges``; a drop stops a secure fit.

    Under "secure" a drop is not recovered: the survivors' exact counts at the edges the
    first round placed with the lost client's rows, differenced against a fit without the
    drop (the same edges), gave that client's count at every edge (a client of one row:
    each value's coarse bin; docs/privacy-findings.md, "Red team 18"). Sending the grid
    rounds again would not do either: the first round, decoded with the lost client, less
    the same round over the survivors is that client's exact counts per category code and
    known values (and, where every client holds one row and weighs 1, its values). Under
    "dp" (noisy counts) the drop is recovered.
    """
    msg = Message(GRID, {"stage": "histogram"}, {"features": feats, "edges": edges})
    spec: dict[str, tuple[tuple[int, ...], Any]] = {"hist": ((feats.size, edges.shape[1]), 0)}
    if dp:
        return np.asarray(secure_exchange(fed, ledger, msg, spec)["hist"])
    asked = list(fed.client_names)
    sums = sums_unless_dropped(fed, ledger, msg, spec)
    if sums is None:
        lost = sorted(set(asked) - set(fed.client_names))
        raise ValueError(
            f"Client(s) {lost} were lost in the second grid round (the coarse counts). Under "
            "privacy='secure' a fit cannot go on without them: the others' counts, at the "
            "edges the first round placed with their rows, would give their own. Fit again "
            "(with the clients that are present), or use privacy='dp' (noisy counts)."
        )
    return np.asarray(sums["hist"])


def min_rows(cfg: GrowerConfig) -> int:
    """The minimum rows of every released sum."""
    assert cfg.min_aggregate_rows is not None
    return int(cfg.min_aggregate_rows)


def refuse_small_federation(cfg: GrowerConfig, rows: dict[str, int]) -> None:
    """Under "secure": too few rows (or bootstrap draws) in all for one released sum.

    ``rows``: each client's rows. Called by the handshake, before the class list (a
    classifier's clients name only labels held in ``m`` rows: in too small a federation
    none, and the labels' refusal hid the cause), and by :func:`setup_grids` over the
    clients still present; ``cfg`` resolved or not (a fractional ``min_samples_leaf``).
    """
    if cfg.privacy != "secure":
        return
    n = sum(rows.values())
    sized = resolve_sizes(cfg, n)  # a fractional min_samples_leaf in rows, as the grower
    m = int(sized.min_aggregate_rows or default_min_rows(sized.min_samples_leaf))
    refuse_too_few_rows(n, m)
    refuse_small_bootstraps(sum((bootstrap_draws(cfg, rows) or rows).values()), m)


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
    # before any masked round, over the clients still present
    refuse_small_federation(cfg, {c: schema["n_samples"].get(c, 0) for c in fed.client_names})
    numeric = np.flatnonzero(n_categories == 0).astype(np.int64)
    keep, few_missing = known_enough(fed, ledger, cfg, schema, numeric, public_keys, min_rows(cfg))
    rare_missing = np.zeros(d, dtype=bool)
    rare_missing[numeric[few_missing]] = True  # no "known | missing" edge in their grids
    numeric = numeric[keep]
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
    secure_tag = cfg.privacy == "secure"  # the digest covers the clients' pooled data tags
    if secure_tag:
        header["data_tag"] = True
    if secure_tag and not regression:  # the bootstrap secret reads labels as class indices
        header["classes"] = schema["classes"]
    # "secure" with sample weights: the pooled geometric mean of the weights (their band).
    trim = secure_tag and bool(schema.get("sample_weighted"))
    if trim:
        header["weight_logs"] = True
    coded = [j for j in range(d) if n_categories[j] >= 2] if secure_tag else []
    if coded:  # rows per category code (rare_codes.py): the lists, column after column
        header["code_counts"] = {str(j): schema["categories"][str(j)] for j in coded}
    # Columns ordering the rows alike (copies.py): numeric pairs, categorical x numeric
    # ones and categorical pairs.
    q = len(coded)
    copies = secure_tag and feats.size + q > 1
    if copies:
        header["order_sums"] = coded
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
    if secure_tag:  # four words of HKDF per client (client_secure.data_tag), summed mod 2^64
        specs["data_tag"] = ((DATA_TAG_WORDS,), None)
    if trim:  # (positive weights, sum of their log2) over every client
        specs["weight_logs"] = ((2,), np.array([0, LOG_FRAC_BITS], dtype=np.int64))
    if coded:
        specs["code_counts"] = ((int(n_categories[coded].sum()),), 0)
    if copies:  # per column pair and column, rows x rates of order (copies.py)
        p = feats.size
        specs["order_sums"] = (
            (2 * p * (p - 1) + p + 3 * p * q + 2 * q * (q - 1),),
            ORDER_FRAC_BITS,
        )
    # Under "secure" the rows' weights are bound to the round's clients: a drop sends it
    # again (under "dp", unweighted, the drop is recovered).
    sums = (sums_sent_again if plan is None else secure_exchange)(fed, ledger, first, specs)
    if regression and cfg.criterion == "poisson" and plan is None:  # before the next round
        check_poisson_sum(_two_words(sums, "y_moments")[:, 1])  # (not under "dp": privacy.md)
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
    hist = _coarse_counts(fed, ledger, feats, edges, plan is not None)
    if plan is not None:  # noisy per-bin increments: cumulative, monotone, within [0, n]
        what = "the second grid round's histograms"
        check_noisy_counts(
            hist.ravel(), plan.grid_sigma * plan.released, n_rows, what, *whole(hist, n_rows)
        )
        hist = np.maximum.accumulate(np.clip(np.cumsum(hist, axis=1), 0.0, n[:, None]), axis=1)
    else:  # exact counts of each feature's known rows
        grid_off = np.arange(feats.size + 1, dtype=np.int64) * n_edges
        what = "the second grid round's histograms"
        check_pooled_cumulative(hist.ravel(), grid_off, edges.ravel(), n, what)
    lo_f, hi_f = outer_bounds(n, s1, s2, step) if feats.size else (np.zeros(0), np.zeros(0))
    root_edges = [np.zeros(0)] * d
    root_mass = [np.zeros(0)] * d
    root_lo, root_hi = np.full(d, -np.inf), np.full(d, np.inf)
    edge_lo, edge_hi = np.full(d, -np.inf), np.full(d, np.inf)
    gaps: list[NDArray[np.float64]] = [np.zeros((0, 2))] * d
    for i, j in enumerate(numeric):
        if plan is None:  # no node grid edge with a group of few rows beyond it
            missing = n_rows - n[i] if rare_missing[j] else 0.0  # above every value
            edge_lo[j], edge_hi[j] = grid_ends(edges[i], hist[i], n[i], m, missing)
            gaps[j] = grid_gaps(edges[i], hist[i], n[i], m)  # nor around one inside
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
    state.rare_missing = rare_missing
    if copies:  # a copy of a column is fitted as the column (copies.py)
        check_order_sums(sums["order_sums"], numeric.size, q, n_rows, len(fed.client_names))
        state.copies = representatives(sums["order_sums"], numeric, d, coded, n_rows)
        state.nested = nested_pairs(sums["order_sums"], numeric, d, q, n_rows)
        n_clients = len(fed.client_names)
        state.exclusive = dependent_categories(
            sums["order_sums"], numeric.size, coded, d, n_rows, n_clients
        )
    if plan is None:
        state.edge_lo, state.edge_hi = edge_lo, edge_hi
        state.gaps = gaps
    if coded:  # codes few rows hold, merged before any node's count (rare_codes.py)
        check_code_counts(sums["code_counts"], n_categories[coded].tolist(), n_rows)
        state.code_map = code_maps(sums["code_counts"], coded, schema["categories"], m)
        state.groupless = groupless_columns(
            sums["code_counts"], coded, schema["categories"], state.code_map, m
        )
    if cfg.privacy == "secure":  # guided candidates (guides.py); "dp" keeps its own
        state.data_tag = np.asarray(sums["data_tag"], dtype=np.uint64)
        if trim:
            count, log_sum = sums["weight_logs"].tolist()
            state.weight_band = band_from_logs(count, log_sum, n_rows)
        state.guides = Guides(d)
        state.guides.set_root(root_edges, root_mass, MEDIAN_WINDOW * m)
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
                _robust_scale(h, state.poisson, plan.clip, plan.target_sigma * plan.released)
                for h in sums["y_hist"]
            ]
            ranges = [
                target_range(h, target_grid(), plan.target_sigma * plan.released)
                for h in sums["y_hist"]
            ]
            for h in sums["y_hist"]:
                _warn_coarse(h, plan.target_sigma * plan.released, n_rows)
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


def grid_ends(
    edges: NDArray[np.float64], cum: NDArray[np.float64], n: float, m: int, missing: float = 0.0
) -> tuple[float, float]:
    """The outermost edges a node grid of the feature may hold (``secure_grids._within``).

    ``cum``: the federation's rows at or below each coarse edge, of ``n``. Below: the
    coarse bin where they reach ``m`` rows is open to edges, unless 1 to ``m - 1`` rows lie
    below it as a group apart (an empty coarse bin between it and them: the one nonzero
    value of a column of zeros, an outlier). Then every edge in that bin would have only
    those rows below it where the bin's rows tie at its top (the zeros): the bound is the
    bin's upper edge. Otherwise the bound is its lower edge (no edge with fewer rows than
    the bin's below it). Above, the same mirrored, and ``missing`` (a column's 1 to
    ``m - 1`` missing rows, above every value: no edge of theirs) is always a group apart
    (a tie at the column's top, a capped value, would leave them alone above the edges
    beside it). ``lo > hi``: no edge. A tie beside a group in the adjacent coarse bin is
    not told apart from a tail: such a group's row is followed (docs/privacy-findings.md,
    "Red team 10").
    """
    lo, hi = np.inf, -np.inf
    below, above = np.flatnonzero(cum >= m), np.flatnonzero(n - cum >= m)
    if below.size:
        j = int(below[0])
        far = cum[j - 1] if j > 0 else 0.0  # rows below the bin
        gap = far > 0 and (cum[j - 1] - (cum[j - 2] if j > 1 else 0.0)) == 0
        lo = -np.inf if far == 0 else float(edges[j] if gap else edges[j - 1])
    if above.size:
        k = int(above[-1])
        far = n - cum[k + 1] if k + 1 < cum.size else 0.0  # rows above the bin
        nxt = cum[k + 2] if k + 2 < cum.size else n
        gap = (far > 0 and nxt - cum[k + 1] == 0) or missing > 0
        far += missing
        hi = np.inf if far == 0 else float(edges[k] if gap else edges[k + 1])
    return lo, hi


def grid_gaps(
    edges: NDArray[np.float64], cum: NDArray[np.float64], n: float, m: int
) -> NDArray[np.float64]:
    """The open intervals ``(a, b)`` a node grid of the feature may hold no edge in.

    ``cum``: the federation's rows at or below each coarse edge, of ``n``. A coarse bin of
    1 to ``m - 1`` rows beside an empty one, inside the column (rows below and above it;
    the ends are :func:`grid_ends`'), holds a group apart as a rare value at an end does:
    a level of an integer column that one row holds, beside levels many rows tie at. The
    root distribution spreads a tie's rows evenly over its coarse bin, so node grids put
    edges between the tie and the group, and each node's count between two such edges
    followed the group's rows (docs/privacy-findings.md, "Red team 11"). The group joins
    the rows above or below it, whichever reaches ``m`` rows with fewer (a tie of many
    rows stays apart): from ``a``, the bin's lower edge, no edge up to ``b``, the first
    coarse edge with ``m`` rows in ``(a, b]``, or the same downwards from its upper edge.
    Every grid interval holding the group then holds ``m`` rows. Returns the intervals,
    shape (k, 2), sorted and disjoint (``secure_grids._outside`` moves edges out of them).
    """
    c = np.concatenate([[0.0], cum, [n]])  # rows at or below each bound
    bounds = np.concatenate([[-np.inf], edges, [np.inf]])
    rows = np.diff(c)  # per coarse bin (bounds[k], bounds[k + 1]]
    small = (rows > 0) & (rows < m)
    empty_below = np.r_[False, rows[:-1] == 0]
    empty_above = np.r_[rows[1:] == 0, False]
    found: list[tuple[float, float]] = []
    for s in np.flatnonzero(small & (empty_below | empty_above) & (c[:-1] > 0) & (c[1:] < n)):
        up = np.flatnonzero(c >= c[s] + m)  # joined with the rows above it, up to m,
        down = np.flatnonzero(c <= c[s + 1] - m)  # or with those below it: the fewer
        ups = c[up[0]] - c[s] if up.size else np.inf
        downs = c[s + 1] - c[down[-1]] if down.size else np.inf
        if ups < downs or (ups == downs < np.inf and empty_below[s]):
            found.append((float(bounds[s]), float(bounds[up[0]])))
        elif downs < np.inf:
            found.append((float(bounds[down[-1]]), float(bounds[s + 1])))
    out: list[tuple[float, float]] = []
    for a, b in sorted(found):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return np.array(out, dtype=np.float64).reshape(-1, 2)


def _two_words(sums: dict[str, NDArray[np.float64]], name: str) -> NDArray[np.float64]:
    """A two-word fixed-point sum (decoded with 0 fractional bits) back to real values."""
    return np.asarray(
        sums[name] / 2.0**MOMENT_FRAC_BITS
        + sums[name + "_lo"] / 2.0 ** (MOMENT_FRAC_BITS + LOW_BITS)
    )
