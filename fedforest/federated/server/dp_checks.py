"""Under ``privacy="dp"``: noisy counts the noise cannot explain, and the targets' range.

The sums under ``"dp"`` are noisy, so :mod:`.secure_checks`' exact bounds do not hold; but
the noise is Gaussian with a standard deviation the server chose (``DpPlan``: ``sigma``
rows per count of the trees' rounds, ``grid_sigma`` in the grid rounds, ``target_sigma``
for the targets' histogram and class counts). A noisy count more than
:data:`NOISE_SIGMAS` deviations outside what any rows give (below 0, above the rows the
clients declared, a segment's counts adding up to more than its node's) has a probability
below 1e-22 for honest clients: some client sent a word no rows and no noise share make
(a saturated masked word gave leaf values of -38,520 for targets in [-3, 3]). Such a sum
is refused with an error naming the field; secure aggregation hides which client sent it.

What is public at fit time bounds the released values further (post-processing, no
privacy cost): the noisy histogram of ``asinh(y)`` (released in the first grid round)
shows where the targets lie, so regression leaf values are clipped to that range
(:func:`target_range`, :func:`clip_leaf_values`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from ...tree.arrays import Tree
from ..privacy.dp import DpPlan
from .target_scale import held_bins

__all__ = [
    "NOISE_SIGMAS",
    "check_noisy_counts",
    "check_noisy_grid",
    "check_noisy_oob",
    "clip_leaf_values",
    "target_range",
    "whole",
]

#: How many noise deviations a noisy count may lie outside its exact range.
NOISE_SIGMAS = 10.0


def check_noisy_counts(
    counts: NDArray[np.float64],
    sigma: float,
    high: float | NDArray[np.float64],
    what: str,
    off: NDArray[np.int64] | None = None,
    totals: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
    low: float | NDArray[np.float64] = 0.0,
) -> None:
    """Noisy row counts within ``[low, high]`` up to :data:`NOISE_SIGMAS` deviations.

    Parameters
    ----------
    counts : ndarray of float64, shape (n,)
        Noisy counts (each with noise of standard deviation ``sigma`` rows).
    sigma : float
        The noise of one count, in rows (a dropped client's share missing: less).
    high : float or ndarray of float64, shape (n,)
        The most rows each count can hold (the declared rows, or its node's).
    off : ndarray of int64, shape (n_segments + 1,), optional
        Segments of ``counts`` (per-bin increments of one pair or feature) whose sums
        must lie within ``totals``: (low, high) per segment, themselves noisy by up to
        ``sigma`` per count summed (the noise of a sum of ``k`` counts: ``sigma sqrt(k)``).
    what : str
        The field, for the error.
    low : float or ndarray of float64, shape (n,)
        The least each count can hold (0 for counts; a sum of signed values less).
    """
    k = NOISE_SIGMAS * sigma
    counts = np.asarray(counts, dtype=np.float64)
    bad = ~np.isfinite(counts) | (counts < np.asarray(low) - k) | (counts > np.asarray(high) + k)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        h = float(np.broadcast_to(high, counts.shape)[i])
        lo = float(np.broadcast_to(low, counts.shape)[i])
        _refuse(what, f"entry {i}: {counts[i]:.6g} rows, outside [{lo:.6g}, {h:.6g}]", sigma)
    if off is None or totals is None or off.size < 2:
        return
    seg = np.repeat(np.arange(off.size - 1), np.diff(off))
    sums = np.bincount(seg, weights=counts, minlength=off.size - 1)
    spread = k * np.sqrt(np.diff(off) + 1.0)  # the segment's counts and its total, noisy
    low, top = totals
    bad = (sums < low - spread) | (sums > top + spread)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        span = f"[{float(low[i]):.6g}, {float(top[i]):.6g}]"
        _refuse(what, f"segment {i}: {sums[i]:.6g} rows in all, outside {span}", sigma)


def check_noisy_oob(
    sums: NDArray[np.float64], classification: bool, n_rows: float, plan: DpPlan
) -> None:
    """The out-of-bag round's noisy sums, in units of their bounds (``client_secure.oob``).

    Classification: rows scored and rows right, each in ``[0, n_rows]``. Regression: rows
    scored, then per output the squared error (bound ``4 c^2``), sum of z (``c``, signed)
    and sum of z^2 (``c^2``), each within ``n_rows`` of its bound.
    """
    c = plan.clip
    k = (sums.size - 1) // 3
    bounds = np.array([1.0, 1.0] if classification else [1.0] + [4 * c * c, c, c * c] * k)
    low = np.zeros(sums.size)
    if not classification:
        low[2::3] = -n_rows  # the sums of z
    what = "the out-of-bag sums (in units of their bounds)"
    check_noisy_counts(sums / bounds, plan.tree_sigma * plan.released, n_rows, what, low=low)


def whole(
    counts: NDArray[np.float64], n_rows: float
) -> tuple[NDArray[np.int64], tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """Each row of ``counts`` a segment holding at most ``n_rows`` rows in all."""
    n, width = counts.shape
    return np.arange(n + 1, dtype=np.int64) * width, (np.zeros(n), np.full(n, n_rows))


def check_noisy_grid(
    sums: dict[str, NDArray[np.float64]],
    moments: NDArray[np.float64],
    n_rows: float,
    plan: DpPlan,
    sizes: tuple[int, ...] = (),
) -> None:
    """The first grid round's noisy counts: of ``asinh(x)``, of the targets, of the classes.

    Each feature counts at most the declared rows (``grid_sigma``); each output's histogram
    of ``asinh(y)`` and block of class counts counts them all (``target_sigma``).
    """
    what = "the grid round's moments of asinh(x)"
    check_noisy_counts(moments[:, 0], plan.grid_sigma * plan.released, n_rows, what)
    if "y_hist" in sums:
        hist = sums["y_hist"]
        off, (_, top) = whole(hist, n_rows)
        what = "the grid round's histogram of asinh(y)"
        check_noisy_counts(
            hist.ravel(), plan.target_sigma * plan.released, n_rows, what, off, (top, top)
        )
    if "class_counts" in sums:  # class_weight="balanced": one block per output
        off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        top = np.full(len(sizes), n_rows)
        what = "the grid round's classes"
        check_noisy_counts(
            sums["class_counts"], plan.target_sigma * plan.released, n_rows, what, off, (top, top)
        )


def _refuse(what: str, where: str, sigma: float) -> None:
    raise ValueError(
        f'The noisy counts of {what} under privacy="dp" ({where}) lie more than '
        f"{NOISE_SIGMAS:g} noise deviations ({sigma:.3g} rows each) beyond what any rows "
        "give: no noise explains them, some client's reply is inconsistent (secure "
        "aggregation hides which)."
    )


def target_range(
    counts: NDArray[np.float64], edges: NDArray[np.float64], sigma: float
) -> tuple[float, float]:
    """Where the targets lie, from the noisy histogram of ``asinh(y)`` of one output.

    The bins whose noisy count reaches :data:`.target_scale.HELD_DEVIATIONS` of the noise
    (as for the targets' center and scale) are taken as holding rows; the range spans them
    (noise alone passes in a fit with probability 0.001, which only widens it). No such
    bin: no bound.
    """
    held = np.flatnonzero(held_bins(counts, sigma))
    if not held.size:
        return -math.inf, math.inf
    return math.sinh(float(edges[held[0]])), math.sinh(float(edges[held[-1] + 1]))


def clip_leaf_values(tree: Tree, lo: NDArray[np.float64], hi: NDArray[np.float64]) -> Tree:
    """A regression tree's node values (one column per output) clipped to the targets' range.

    A node's value is a mean of its rows' targets, so it lies within their range; noisy
    sums (and a lying client's) can put it far outside. Post-processing of released
    values: no privacy cost.
    """
    value = np.clip(tree.value, lo[None, : tree.value.shape[1]], hi[None, : tree.value.shape[1]])
    return replace(tree, value=value)
