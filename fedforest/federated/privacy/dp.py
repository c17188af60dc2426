"""``privacy="dp"``: Gaussian noise added inside the secure sum, calibrated and accounted.

On top of ``"secure"``, every released aggregate gets Gaussian noise: each of the ``K``
participants adds its share (standard deviation ``sigma / sqrt(K - t)``, rounded to the
fixed-point grid; at least ``MIN_SHARE`` rows for a whole count) before masking, so the
server only ever sees the noisy sum, and any ``K - t`` honest shares carry the plan's
noise: the server with ``t`` colluding clients (``dp_colluders``, default 0) faces it.
The noise is calibrated once per fit, before training, for the whole fit.

Unit of privacy: one row of one client replaced by another (the clients' row counts are
public: the handshake shows them). What one row can change is bounded by construction:

- its bootstrap count is capped at ``max_weight`` (and drawn from a secret the client
  draws at random, independent of the data);
- standardised regression targets are clipped to ``[-clip, clip]``, and ``asinh(x)`` (the
  grid moments) to ``[-ASINH_CLIP, ASINH_CLIP]``;
- everything travels as per-bin increments (Round A counts, Round B statistics), so that
  per tree and level the row touches one node summary and, per sampled feature, one
  histogram bin and one candidate interval (or category group).

Each released entry is scaled by its bound (rows 1, weight ``max_weight``, sums
``max_weight * clip`` and ``max_weight * clip^2``, ...), so a row moves each entry it
touches by at most 1 in those units, and ``E``, the number of entries one row touches over
the fit (grid rounds, every tree and level, the out-of-bag round), fixes the L2
sensitivity of the whole fit as one Gaussian mechanism: ``2 sqrt(E)`` under replacement.
The noise multiplier for ``(epsilon, delta)`` comes from the analytic Gaussian mechanism
(Balle & Wang 2018) as computed by Google's ``dp-accounting``. ``model.privacy_report_``
gives the fit's guarantee (``epsilon_guarantee``: the plan over every planned entry,
which a fit whose trees stop early keeps, as a privacy filter does) and, recomputed the
same way from the releases actually made, an ex-post ``epsilon_spent`` (less when trees
stop early; not a guarantee, since the stops depend on earlier noisy releases).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "compose_reports",
    "ASINH_CLIP",
    "DpPlan",
    "discrete_gaussian",
    "entries_per_row",
    "grid_entries",
    "level_entries",
    "log_bound",
    "MIN_SHARE",
    "oob_entries",
    "plan_noise",
    "spent_epsilon",
    "guaranteed_epsilon",
]

#: Clip of asinh(x) in the grid moments (|x| up to about 2.4e8 passes unclipped).
ASINH_CLIP = 20.0
#: Clip of standardised regression targets, in (approximate) standard deviations.
TARGET_CLIP = 2.0
#: Cap of a row's bootstrap count (P(count > 2) is about 8 % for a Poisson(1) draw).
MAX_WEIGHT = 2
#: The grid rounds (a few entries per row, which place every grid) get this many times
#: less noise than the trees' entries; their entries count this factor squared.
GRID_NOISE_RATIO = 3.0
#: The targets' histogram (one entry per row; it fixes the standardisation every sum
#: relies on) gets this many times less noise than the trees' entries.
TARGET_NOISE_RATIO = 20.0
#: The least noise share a client adds to a whole count (a row count, a histogram bin, a
#: class count), in rows. A discrete Gaussian of smaller scale is almost always 0: its
#: variance is 4e-22 at a scale of 0.1, 7.7e-3 at 0.3 (0.09 asked), 0.215 at 0.5 (0.25),
#: so the shares of ``K`` clients at ``sigma / sqrt(K)`` below about 0.5 added up to far
#: less noise than planned, none at all in practice below 0.2 (the targets' histogram at
#: ``sigma / 20``: at epsilon 50 it was released exact). From 1 on the variance is the
#: scale's square to 1e-4.
MIN_SHARE = 1.0


def log_bound(clip: float) -> float:
    """The most ``|u log u|`` reaches for ``0 <= u <= clip`` (criterion="poisson"'s column)."""
    return max(clip * math.log(clip), 1.0 / math.e)


@dataclass(frozen=True)
class DpPlan:
    """The noise of one fit under ``privacy="dp"`` and what it spends."""

    epsilon: float
    delta: float
    #: Noise standard deviation per released entry, in units of the entry's bound.
    sigma: float
    #: L2 sensitivity of the whole fit (replace one row), in the same units.
    sensitivity: float
    #: The fit is one Gaussian mechanism with this multiplier: sigma / sensitivity, or
    #: more where ``min_sigma`` lifts a noise (and ``sigma`` is less, below).
    noise_multiplier: float
    entries: int
    clip: float = TARGET_CLIP
    max_weight: int = MAX_WEIGHT
    grid_ratio: float = GRID_NOISE_RATIO
    #: The least noise of any entry: ``MIN_SHARE * sqrt(K - t)`` for ``K`` clients, so that
    #: every client's share of a whole count is a discrete Gaussian of scale >= MIN_SHARE.
    #: Where it lifts a noise (the targets' histogram's first, at ``sigma / 20``), the
    #: trees' ``sigma`` is the least with which the fit, every noise floored, is still the
    #: one Gaussian mechanism of ``noise_multiplier`` (``plan_noise``): ``epsilon`` spent,
    #: the trees' noise below ``noise_multiplier * sensitivity``.
    min_sigma: float = 0.0
    #: Colluding clients tolerated (``dp_colluders``, ``t``): each of the ``n_clients``
    #: adds a share of variance ``sigma^2 / (K - t)``, so that any ``K - t`` honest shares
    #: alone carry the plan's noise; the released sums carry ``K / (K - t)`` times it.
    colluders: int = 0
    n_clients: int = 1

    @property
    def released(self) -> float:
        """A released sum's noise over the plan's: ``sqrt(K / (K - t))`` (1 when ``t = 0``)."""
        if not self.colluders:
            return 1.0
        return math.sqrt(self.n_clients / (self.n_clients - self.colluders))

    @property
    def tree_sigma(self) -> float:
        """The noise of the trees' entries (Round A, Round B, out of bag, bootstrap)."""
        return max(self.sigma, self.min_sigma)

    @property
    def grid_sigma(self) -> float:
        """The noise of the grid rounds' entries."""
        return max(self.sigma / self.grid_ratio, self.min_sigma)

    @property
    def target_sigma(self) -> float:
        """The noise of the targets' histogram (and of ``"balanced"``'s class counts)."""
        return max(self.sigma / TARGET_NOISE_RATIO, self.min_sigma)

    def header(self) -> dict[str, Any]:
        """What the clients need to add their noise shares."""
        return {
            "sigma": self.tree_sigma,
            "grid_sigma": self.grid_sigma,
            "target_sigma": self.target_sigma,
            "clip": self.clip,
            "max_weight": self.max_weight,
            "colluders": self.colluders,
        }

    def report(
        self, spent: float, guarantee: float, more: dict[str, float | None] | None = None
    ) -> dict[str, Any]:
        """``model.privacy_report_``: the plan, the fit's guarantee and the ex-post spend.

        ``more``: the guarantee against other coalitions (``budget.report``).
        """
        return {
            "privacy": "dp",
            **asdict(self),
            "epsilon_guarantee": guarantee,
            "epsilon_spent": spent,
            **(more or {}),
            "neighbouring": "replace one row of one client",
            "accountant": "dp_accounting analytic Gaussian (one composed Gaussian mechanism)",
        }


def entries_per_row(
    *,
    n_trees: int,
    max_depth: int,
    n_sampled: int,
    n_numeric: int,
    n_stats: int,
    classification: bool,
    n_outputs: int = 1,
    class_counts: bool = False,
    bootstrap_counts: bool = False,
) -> int:
    """Entries one row touches over a fit (each moves by at most 1 in bound units).

    Per tree and level: its node summary (``n_stats`` entries, of which a classification
    row touches rows, weight and its class in each output's block; a regression row every
    output's pair), and per sampled feature one Round A bin (rows, weight) and one Round B
    interval or category group (the summary's entries). With ``bootstrap_counts``
    (``class_weight="balanced_subsample"``, multi-output y) per tree also its class in each
    output's block of the bootstrap round's counts (bound ``max_weight``: its draws).
    """
    per_level = level_entries(n_sampled, n_stats, classification, n_outputs)
    return (
        grid_entries(n_numeric, classification)
        + target_entries(classification, n_outputs, class_counts)
        + n_trees * max_depth * per_level
        + (n_trees * n_outputs if bootstrap_counts else 0)
        + oob_entries(classification, n_outputs)
    )


def effective_entries(entries: float, grid: float, target: float = 0.0) -> float:
    """Entries in units of the trees' noise: an entry with less noise weighs more."""
    return entries - grid - target + grid * GRID_NOISE_RATIO**2 + target * TARGET_NOISE_RATIO**2


def level_entries(n_sampled: int, n_stats: int, classification: bool, n_outputs: int = 1) -> int:
    """Entries one row touches in one tree's level (Round A and Round B).

    A classification row touches rows, weight and one class column per output (its class
    in each output's block); a regression row every column.
    """
    touched = 2 + n_outputs if classification else n_stats
    return touched + n_sampled * (2 + touched)


def grid_entries(n_numeric: int, classification: bool) -> int:
    """Entries one row touches in the grid rounds' features: 4 per numeric feature.

    The first round's count, sum and sum of squares of ``asinh(x)`` and one bin of the
    second round's counts. The count is not public: under "dp" every numeric column may
    miss values, and a row replaced by one with a missing value leaves it (uncharged until
    2026-12-04, when the accountant took it for the public row count).
    """
    return 4 * n_numeric


def target_entries(classification: bool, n_outputs: int = 1, class_counts: bool = False) -> int:
    """Entries one row touches in the targets' histograms: a bin per output (regression).

    A classifier's rows touch them only under ``class_weight="balanced"``
    (``class_counts``): one class count per output.
    """
    if classification:
        return n_outputs if class_counts else 0
    return n_outputs


def oob_entries(classification: bool, n_outputs: int = 1) -> int:
    """Entries one row touches in the out-of-bag round (per output: error, sum, square)."""
    return 2 if classification else 1 + 3 * n_outputs


def plan_noise(
    epsilon: float,
    delta: float,
    entries: int,
    grid: int,
    target: int = 0,
    n_clients: int = 1,
    colluders: int = 0,
) -> DpPlan:
    """Calibrate the noise for ``(epsilon, delta)`` over ``entries`` touched entries.

    ``grid`` of them are the grid rounds', which get ``GRID_NOISE_RATIO`` times less noise.
    ``n_clients`` share every entry's noise, each ``1 / (n_clients - colluders)`` of its
    variance (``DpPlan.colluders``): no entry gets less than ``MIN_SHARE`` rows from each
    (``DpPlan.min_sigma``).
    """
    import dp_accounting  # heavy (about 1 s to import): only when "dp" is asked for

    if not 0 <= colluders < max(n_clients, 1):
        raise ValueError(f"{colluders} colluders among {n_clients} clients: at most K - 1.")
    sensitivity = 2.0 * math.sqrt(effective_entries(entries, grid, target))
    multiplier = float(dp_accounting.get_sigma_gaussian(epsilon, delta))
    floor = MIN_SHARE * math.sqrt(max(n_clients - colluders, 1))
    sigma = multiplier * sensitivity
    if floor > sigma / TARGET_NOISE_RATIO:  # some noise lifted: the trees' may be less
        sigma = _sigma_under_floor(multiplier, entries - grid - target, grid, target, floor, sigma)
    return DpPlan(
        epsilon,
        delta,
        sigma,
        sensitivity,
        multiplier,
        entries,
        min_sigma=floor,
        colluders=colluders,
        n_clients=max(n_clients, 1),
    )


def _composed(sigma: float, trees: float, grid: float, target: float, floor: float) -> float:
    """The fit's noise multiplier (one composed Gaussian) at trees' noise ``sigma``, floored."""
    effective = (
        trees * (sigma / max(sigma, floor)) ** 2
        + grid * (sigma / max(sigma / GRID_NOISE_RATIO, floor)) ** 2
        + target * (sigma / max(sigma / TARGET_NOISE_RATIO, floor)) ** 2
    )
    return sigma / (2.0 * math.sqrt(effective)) if effective > 0 else math.inf


def _sigma_under_floor(
    multiplier: float, trees: float, grid: float, target: float, floor: float, high: float
) -> float:
    """The least trees' noise whose fit, every noise floored, has the plan's multiplier.

    When even every noise at the floor gives more than that multiplier (a huge epsilon),
    the floor: the fit then spends less than ``epsilon`` (``spent_epsilon``).

    The composed multiplier grows with ``sigma`` (on each stretch where the same noises
    are floored it is ``sigma / (2 sqrt(a + b sigma^2))``), and at ``high`` (the plan
    without floors) it is at least ``multiplier``: bisection.
    """
    low = 0.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if _composed(mid, trees, grid, target, floor) >= multiplier:
            high = mid
        else:
            low = mid
    # Below the floor every noise is the floor's (the same fit): say so.
    return max(high, floor)


def spent_epsilon(
    plan: DpPlan, entries_released: int, grid: int, target: int = 0, noise_kept: float = 1.0
) -> float:
    """The epsilon the releases actually made spend (fewer than planned when trees stop).

    An ex-post account, not the fit's guarantee: which trees stop, and when, depends on
    the noisy sums released before, and a privacy loss summed over releases chosen so
    adaptively is no valid bound by itself (Rogers, Roth, Ullman & Vadhan 2016, "Privacy
    odometers and filters"). The guarantee is the plan's (:func:`guaranteed_epsilon`): a
    filter that stops before the planned releases keeps the planned bound.
    """
    return _epsilon_of(plan, entries_released, grid, target, noise_kept)


def guaranteed_epsilon(plan: DpPlan, grid: int, target: int = 0, noise_kept: float = 1.0) -> float:
    """The fit's ``epsilon`` at ``plan.delta``: every planned entry, at ``noise_kept``.

    Fixed before the fit (but for drops, which do not depend on the data): ``plan.epsilon``
    when no client dropped, more when a drop took noise shares out of released sums, less
    where the noise floor lifts every noise (a huge budget).
    """
    return _epsilon_of(plan, plan.entries, grid, target, noise_kept)


def _epsilon_of(
    plan: DpPlan, entries_released: int, grid: int, target: int, noise_kept: float
) -> float:
    """The epsilon of ``entries_released`` entries, each at ``noise_kept`` of its noise.

    The releases compose to one Gaussian mechanism (Gaussian composition is exact: the
    squared sensitivities add up), whose epsilon at ``delta`` is the analytic Gaussian
    mechanism's (Balle & Wang 2018), as computed by ``dp-accounting``. ``noise_kept``: the
    least fraction of the planned noise variance any release carried (a client that drops
    in a round takes its share with it: ``(K - d) / K``), charged to every release (an
    upper bound on the spend). Where ``plan.min_sigma`` lifted a noise above the plan's,
    each kind's entries count with the noise they got (``(sigma / its noise)^2`` each).
    """
    import dp_accounting

    if entries_released <= 0:
        return 0.0
    floored = plan.min_sigma > min(plan.sigma / plan.grid_ratio, plan.sigma / TARGET_NOISE_RATIO)
    if entries_released == plan.entries and noise_kept == 1.0 and not floored:
        return plan.epsilon  # the plan, as calibrated
    if noise_kept <= 0.0:  # no noise share left in some sum
        return math.inf
    effective = effective_entries(entries_released, grid, target)
    if floored:
        effective = (
            (entries_released - grid - target) * (plan.sigma / plan.tree_sigma) ** 2
            + grid * (plan.sigma / plan.grid_sigma) ** 2
            + target * (plan.sigma / plan.target_sigma) ** 2
        )
    multiplier = plan.sigma * math.sqrt(noise_kept) / (2.0 * math.sqrt(effective))
    spent = float(dp_accounting.get_epsilon_gaussian(multiplier, plan.delta))
    if noise_kept >= 1.0 and entries_released <= plan.entries:  # at most the plan's
        spent = min(spent, plan.epsilon)
    return spent


def discrete_gaussian(sigma: Any, rng: Any) -> Any:
    """Samples of the discrete Gaussian N_Z(0, sigma^2), one per entry of ``sigma``.

    ``P(x) ~ exp(-x^2 / (2 sigma^2))`` on the integers: Canonne, Kamath & Steinke (2020),
    Algorithm 3 - a discrete Laplace proposal of scale ``t = floor(sigma) + 1`` (the
    difference of two geometric counts), accepted with probability
    ``exp(-(|y| - sigma^2 / t)^2 / (2 sigma^2))``, vectorised (in floating point, not with
    their exact rational arithmetic). An entry with ``sigma == 0`` is 0.

    Parameters
    ----------
    sigma : ndarray of float64
        Standard deviations in grid units (the fixed point's ``2^-frac``), ``>= 0``.
    rng : numpy.random.Generator
        Seeded from the operating system's generator by the caller.
    """
    import numpy as np

    sigma = np.asarray(sigma, dtype=np.float64)
    out = np.zeros(sigma.shape, dtype=np.int64)
    todo = np.flatnonzero(sigma.ravel() > 0)
    flat_sigma = sigma.ravel()
    flat_out = out.reshape(-1)
    while todo.size:
        s = flat_sigma[todo]
        t = np.floor(s) + 1.0
        p = -np.expm1(-1.0 / t)  # success probability of the geometric counts
        y = (rng.geometric(p) - rng.geometric(p)).astype(np.int64)
        accept = rng.random(todo.size) < np.exp(-((np.abs(y) - s * s / t) ** 2) / (2 * s * s))
        flat_out[todo[accept]] = y[accept]
        todo = todo[~accept]
    return out


def compose_reports(prior: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``privacy_report_`` of a forest fitted in several calls (``warm_start``).

    Each call is its own mechanism (its grid rounds, its new trees, the out-of-bag round
    over every tree) with its own guarantee; over the forest they compose, by basic
    composition: ``epsilon_total`` and ``delta_total`` add up the calls'
    ``epsilon_guarantee`` and ``delta`` (``fits`` counts them). ``new`` alone gives its own
    totals. (A report stored before ``epsilon_guarantee`` existed counts its
    ``epsilon_total``, else its ``epsilon_spent``.)
    """
    out = dict(new)
    before = prior or {"fits": 0, "epsilon_total": 0.0, "delta_total": 0.0}
    out["fits"] = int(before.get("fits", 1)) + 1
    earlier = before.get("epsilon_guarantee", before.get("epsilon_spent", 0.0))
    out["epsilon_total"] = float(before.get("epsilon_total", earlier)) + float(
        new.get("epsilon_guarantee", new["epsilon_spent"])
    )
    out["delta_total"] = float(before.get("delta_total", before.get("delta", 0.0))) + float(
        new["delta"]
    )
    return out
