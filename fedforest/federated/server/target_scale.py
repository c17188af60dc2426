"""The targets' center and scale under ``"secure"`` and ``"dp"`` (from the grid round).

From the pooled moments of ``asinh(y)`` (``"secure"``) or its noisy histogram on a fixed
grid (``"dp"``); moved out of ``secure.py`` (2026-12-03) unchanged.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import NDArray

from ..client_secure import target_grid
from ..client_targets import TARGET_SCALE_FLOOR

__all__ = [
    "ZERO_SUM",
    "check_poisson_sum",
    "held_bins",
    "moment_scale",
    "robust_scale",
    "warn_coarse_targets",
]

#: scikit-learn's refusal (word for word) of criterion="poisson" targets that sum to 0.
ZERO_SUM = "Sum of y is not strictly positive which is necessary for Poisson regression."

# A noisy count of the targets' histogram is taken to hold rows when it reaches this many
# deviations of the noise: noise alone passes in one of the 160 bins of a fit with
# probability 0.001 (at three deviations it was 0.2: a far bin of noise alone then set the
# targets' center and scale in 1 fit of 5 at 1,400 rows and epsilon 0.5, and predictions
# reached 10^8; measured 2026-12-03, benchmarks/bench_privacy.py --dp-curve).
HELD_DEVIATIONS = 4.37


def held_bins(counts: NDArray[np.float64], sigma: float) -> NDArray[np.bool_]:
    """Which noisy counts hold rows (:data:`HELD_DEVIATIONS` of the noise ``sigma``)."""
    return np.asarray(counts) >= max(HELD_DEVIATIONS * sigma, 1e-12)


def moment_scale(yn: float, y1: float, y2: float, poisson: bool) -> tuple[float, float]:
    """Center and scale of one output from the pooled moments of asinh(y).

    Under criterion="poisson" the center is 0 (the targets stay non-negative) and the
    scale puts ``sinh(mean + 2 std)`` of asinh(y) at ``u = 2``: the scaled targets are of
    order 1, as standardised ones.
    """
    mean = y1 / max(yn, 1.0)
    std = math.sqrt(max(y2 / max(yn, 1.0) - mean**2, 0.0))
    center = math.sinh(mean)
    if poisson:
        return 0.0, max(math.sinh(mean + 2 * std) / 2.0, TARGET_SCALE_FLOOR)
    # One standard deviation of asinh(y) each side, mapped back: for targets of small
    # spread (asinh nearly linear over them) their standard deviation, for targets over
    # orders of magnitude (a large spread of asinh(y)) their typical size. (Two deviations
    # halved, as before, put a target of +-10^6 at a scale of about 10^12: its squares
    # then fell below the fixed point's resolution and the forest learnt nothing.)
    spread = max(math.sinh(mean + std) - center, center - math.sinh(mean - std))
    return center, max(spread, TARGET_SCALE_FLOOR, 1e-9 * abs(center))


def robust_scale(
    counts: NDArray[np.float64], poisson: bool = False, clip: float = 2.0, sigma: float = 0.0
) -> tuple[float, float]:
    """Center (median) and scale (IQR / 1.349) of the targets from a noisy histogram.

    The histogram is of asinh(y) on a fixed grid: under "dp" one count per row, robust to
    the noise where moments (bounded by the clip squared) are not. Under
    criterion="poisson" the center is 0 and the scale puts the 99th percentile at the clip
    (at least one grid bin, 0.25 in asinh(y), above 0): the clip cuts about 1 % of the rows.
    """
    edges = target_grid()
    # Bins whose noisy count is below :data:`HELD_DEVIATIONS` of the noise (``sigma``)
    # count as empty: the noise alone otherwise piles up mass in the far tails, and
    # Poisson's 99th percentile landed there (a scale of 10^6 for counts of about 3, whose
    # leaves then predicted millions). With no bin held: center 0, scale 1.
    cum = np.concatenate([[0.0], np.cumsum(np.where(held_bins(counts, sigma), counts, 0.0))])
    if cum[-1] <= 0:
        return 0.0, 1.0
    if poisson:
        top = max(float(np.interp(0.99 * cum[-1], cum, edges)), edges[1] - edges[0])
        return 0.0, math.sinh(top) / clip
    q = np.interp(np.array([0.25, 0.5, 0.75]) * cum[-1], cum, edges)
    lo, mid, hi = (math.sinh(float(v)) for v in q)
    return mid, max((hi - lo) / 1.349, TARGET_SCALE_FLOOR, 1e-9 * abs(mid))


#: Under "dp": the share of the rows in a few bins of the targets' histogram (two adjacent
#: ones, or its two end bins) from which it does not resolve the targets.
COARSE_SHARE = 0.9


def warn_coarse_targets(counts: NDArray[np.float64], sigma: float, n_rows: float) -> None:
    """Warn when the noisy histogram that scales the targets does not resolve them.

    Under "dp" the center and scale come from quartiles on a fixed grid of 0.25 in
    ``asinh(y)`` over ``[-20, 20]`` (``|y|`` up to about 2.4e8; beyond, the end bins):
    targets within two adjacent bins, or beyond the grid, get a scale of a bin's order,
    whatever their spread, and the leaves' noise with it (3,000 rows, epsilon 5: R^2 0.3 to
    0.5 for targets of spread 1, 0.0 at 0.01, -40 at 0.001, -2.8e6 at 1e-5; 0.25 at 1e9,
    0.0 at 1e12, -9.6 for 3e12 + 1e12 z; tests/test_secure_targets.py's 100 + 10 x0 x1 + x5,
    one bin at asinh(y) 5.3, -0.8 and -0.45, 0.6 and 0.4 less 100), silently. Read off the
    released counts (post-processing) and the public row count.
    """
    held = held_bins(counts, sigma)
    rows = np.where(held, counts, 0.0)
    at = np.flatnonzero(held)
    if rows[0] + rows[-1] >= COARSE_SHARE * n_rows:
        why, fix = "lie beyond the range", "Divide y by a power of ten (so that |y| is below 1e8)"
    elif at.size and at[-1] - at[0] <= 1 and rows.sum() >= COARSE_SHARE * n_rows:
        why = "vary by less than the resolution"
        fix = (
            "Center y on a public typical value and multiply it by a power of ten (so that it "
            "varies by about 1 or more around 0)"
        )
    else:
        return
    warnings.warn(
        f'Under privacy="dp" the regression targets {why} of the noisy histogram that sets '
        "their scale (bins of 0.25 in asinh(y), |y| up to about 2.4e8: nearly every row lies "
        "in two of them), so the forest's noise is of the order of a bin, not of the "
        f"targets' spread, and its predictions may be mostly noise. {fix} and scale the "
        "predictions back.",
        UserWarning,
        stacklevel=6,
    )


def check_poisson_sum(sums: NDArray[np.float64]) -> None:
    """criterion="poisson": refuse pooled targets whose sum is not positive (the grid round).

    ``sums``: under "secure", the pooled sums of ``w asinh(y)`` per output (exact, the
    weights in [0.5, 1.5] and ``y >= 0`` at every client: 0 only when every target is 0,
    or sums below the fixed point's 2^-48). As scikit-learn's forest, over every output
    together (its ``np.sum(y)``); no client is named (a pooled fact). Not under "dp": no
    exact release may tell it there, and read off the noisy histogram it refused targets
    whose sum is positive (docs/privacy.md).
    """
    if not float(np.sum(sums)) > 0:
        raise ValueError(ZERO_SUM)
