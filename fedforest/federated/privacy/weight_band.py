"""Sample weights under ``privacy="secure"``: trimmed to a band around their pooled mean.

The minimum-rows rule counts rows, not their weight: a sum over ``m`` rows one of which
weighs a million times the others is that row's (its target, from a node's mean;
docs/privacy-findings.md, "Red team 8"). Under ``"secure"`` every positive weight is
therefore trimmed into ``[g / WEIGHT_RATIO, g * WEIGHT_RATIO]``, ``g`` the geometric mean
of the federation's positive weights, so no row weighs more than ``WEIGHT_RATIO ** 2``
times another and in a sum over ``n`` rows of bootstrap counts up to ``c`` a row holds at
most ``WEIGHT_RATIO ** 2 c / (WEIGHT_RATIO ** 2 c + n - 1)`` of the weight.

``g`` comes from one masked sum in the first grid round (``weight_logs``: each client's
count of positive weights and the sum of their ``log2``, fixed point): the server learns
the pooled count and mean, no client's. The band travels in the set-up
(``weight_band``); each client trims its own weights (:func:`trim_weights`) and logs how
many it trimmed (``fedforest.client``); ``fit``, which holds every weight, warns
(:data:`SECURE_WEIGHTS_TRIMMED`, :func:`trims`). Weights of 0 stay 0 (such rows take no
part). ``"dp"`` bounds weights otherwise (at 1, with noise); ``"none"`` releases
per-client sums and trims nothing.
"""

from __future__ import annotations

import logging

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "LOG_FRAC_BITS",
    "DP_WEIGHTS_CLIPPED",
    "SECURE_WEIGHTS_TRIMMED",
    "WEIGHT_RATIO",
    "band_from_logs",
    "bounded_weights",
    "check_band",
    "kept_top",
    "trim_weights",
    "trims",
    "weight_logs",
]

logger = logging.getLogger("fedforest.client")

#: A weight is trimmed to at most this many times the pooled geometric mean, and to at
#: least that mean over it (any two rows' weights within ``WEIGHT_RATIO ** 2``).
WEIGHT_RATIO = 10.0
#: Fractional bits of the masked sum of ``log2`` weights (the band needs no more).
LOG_FRAC_BITS = 16
#: ``|log2 w|`` of a positive finite float64 is below this (subnormals included).
_LOG2_MAX = 1075.0
#: Under privacy="dp" each client clips its rows' sample weights to 1 (the noise's bound).
DP_WEIGHTS_CLIPPED = (
    'Under privacy="dp" a row weighs at most 1: sample weights above 1 count as 1 (the noise '
    "is calibrated for rows that weigh at most their bootstrap count). Scale the weights so "
    "that the largest is 1 to keep their ratios."
)
#: ``fit``'s warning when some weight lies outside the band (:func:`trims`).
SECURE_WEIGHTS_TRIMMED = (
    'Under privacy="secure" the clients trim sample weights to within 10 times the '
    "geometric mean of the positive weights either way (a sum over the minimum rows must "
    'not be one heavy row\'s: docs/privacy.md, "Sample weights"); some of these weights lie '
    'outside it. Use privacy="dp" or "none" to keep them as given.'
)


def weight_logs(weight: NDArray[np.float64] | None, n_rows: int) -> NDArray[np.float64]:
    """A client's part of the pooled geometric mean: (positive weights, sum of their log2).

    Without sample weights every row weighs 1: ``(n_rows, 0)``.
    """
    if weight is None:
        return np.array([float(n_rows), 0.0])
    positive = weight[weight > 0]
    return np.array([float(positive.size), float(np.log2(positive).sum())])


def band_from_logs(count: float, log_sum: float, n_rows: float) -> tuple[float, float] | None:
    """The band ``(g / WEIGHT_RATIO, g * WEIGHT_RATIO)`` from the pooled ``weight_logs``.

    None when no row weighs more than 0 (nothing to trim; the roots' check refuses such a
    federation with scikit-learn's message).

    Raises
    ------
    ValueError
        If the pooled sums are not those of at most ``n_rows`` positive weights: some
        client sent a count other than its rows' or logs no weight has (secure aggregation
        hides which).
    """
    if count == 0 and log_sum == 0:
        return None
    tol = 1e-6 + 2.0**-LOG_FRAC_BITS * n_rows  # each client's rounding of its sum
    if not (
        np.isfinite(count)
        and np.isfinite(log_sum)
        and count == np.round(count)
        and 1 <= count <= n_rows
        and abs(log_sum) <= _LOG2_MAX * count + tol
    ):
        raise ValueError(
            f"The pooled weight_logs of the grid round (count {count:.6g}, sum of log2 "
            f"{log_sum:.6g}) are not those of 1 to the {n_rows:.0f} rows the clients "
            "declared: some client sent a count of positive sample weights other than its "
            "rows' or logs no weight has (secure aggregation hides which)."
        )
    # Within float64's normal range either way (the weights' own scale is free: fit puts
    # the largest in [0.5, 1) before the clients get them).
    center = float(np.exp2(np.clip(log_sum / count, -1018.0, 1019.0)))
    return center / WEIGHT_RATIO, center * WEIGHT_RATIO


def check_band(band: object, client: str) -> tuple[float, float]:
    """The set-up's ``weight_band`` as a client checks it: two finite ``0 < lo <= hi``."""
    lo = hi = np.nan
    if isinstance(band, list | tuple) and len(band) == 2:
        try:
            lo, hi = float(band[0]), float(band[1])
        except (TypeError, ValueError):
            pass
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= hi):
        raise ValueError(
            f"Client {client!r}: the set-up's weight_band is not two finite weights "
            "0 < low <= high."
        )
    return lo, hi


def trim_weights(
    weight: NDArray[np.float64], band: tuple[float, float], client: str
) -> NDArray[np.float64]:
    """The client's positive weights clipped into ``band`` (0 stays 0).

    How many were trimmed goes to the client's log (``fedforest.client``), naming the
    client and the field, never a value; it is not sent.
    """
    lo, hi = band
    trimmed = np.where(weight > 0, np.clip(weight, lo, hi), 0.0)
    n = int(np.count_nonzero(trimmed != weight))
    if n:
        logger.warning(
            "Client %r: %d sample_weight value(s) trimmed under privacy=\"secure\" to within "
            "%g times the federation's geometric mean weight either way.",
            client, n, WEIGHT_RATIO,
        )  # fmt: skip
    return trimmed


def trims(weight: NDArray[np.float64]) -> bool:
    """Whether the band of these weights (all of a federation's) trims one of them."""
    logs = weight_logs(weight, weight.size)
    band = band_from_logs(logs[0], logs[1], float(weight.size))
    if band is None:
        return False
    lo, hi = band
    positive = weight[weight > 0]
    return bool((positive < lo).any() or (positive > hi).any())


def kept_top(weight: NDArray[np.float64]) -> float:
    """The largest of these weights (all of a federation's) once the band has trimmed them.

    When it is over ``2^8`` times below their largest as given, ``fit`` scales the weights
    by it (a power of two near it): scaled by their largest, one row of weight 1e12 among
    rows of 1 put the others at 1e-12, whose band (about 1e-13 to 1e-11) fell below the
    fixed point's resolution, and ``fit`` refused weights that ``fit_federated`` on the
    same clients took.
    """
    top = float(weight.max()) if weight.size else 0.0
    logs = weight_logs(weight, weight.size)
    band = band_from_logs(logs[0], logs[1], float(weight.size))
    return top if band is None else min(top, band[1])


def bounded_weights(weight: NDArray[np.float64], privacy: str) -> str | None:
    """``fit``'s warning when the clients will bound some of these weights, else None."""
    if privacy == "dp" and weight.max() > 1.0:
        return DP_WEIGHTS_CLIPPED
    if privacy == "secure" and trims(weight):
        return SECURE_WEIGHTS_TRIMMED
    return None
