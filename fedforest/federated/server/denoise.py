"""Post-processing of the noisy sums of ``privacy="dp"``: consistent, cumulative, bounded.

Applied by the server to what it decoded; post-processing changes no privacy guarantee.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT

__all__ = ["clip_stats", "cumulative", "cumulative_stats", "denoise_a"]


def denoise_a(
    summary: NDArray[np.float64],
    hist: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    clip: float,
    task: str,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Post-processing of noisy Round A sums: counts non-negative, histograms cumulative."""
    summary = clip_stats(summary, clip, task)
    summary[:, STAT_WEIGHT] = np.maximum(summary[:, STAT_WEIGHT], 1.0)  # leaf values divide
    return summary, cumulative(np.maximum(hist, 0.0), grid_off)


def clip_stats(stats: NDArray[np.float64], clip: float, task: str) -> NDArray[np.float64]:
    """Noisy statistics made consistent: counts >= 0, |mean z| <= clip, variance >= 0."""
    out = np.array(stats, dtype=np.float64, copy=True)
    out[:, STAT_ROWS] = np.maximum(out[:, STAT_ROWS], 0.0)
    out[:, STAT_WEIGHT] = np.maximum(out[:, STAT_WEIGHT], 0.0)
    w = out[:, STAT_WEIGHT]
    if task == "regression":
        out[:, 2] = np.clip(out[:, 2], -clip * w, clip * w)
        out[:, 3] = np.clip(out[:, 3], 0.0, clip * clip * w)
        # Cauchy-Schwarz: (sum w z)^2 <= W * sum w z^2.
        out[:, 3] = np.maximum(
            out[:, 3], np.divide(out[:, 2] ** 2, w, where=w > 0, out=np.zeros_like(w))
        )
    else:
        out[:, 2:] = np.maximum(out[:, 2:], 0.0)
    return out


def cumulative(inc: NDArray[np.float64], off: NDArray[np.int64]) -> NDArray[np.float64]:
    """Running sums of ``inc`` (rows) within each segment ``off[i]:off[i + 1]``."""
    a = np.asarray(inc, dtype=np.float64)
    flat = a.reshape(a.shape[0], -1)
    cum = np.cumsum(flat, axis=0)
    starts = off[:-1]
    before = np.zeros((off.size - 1, flat.shape[1]))
    later = starts > 0
    before[later] = cum[starts[later] - 1]
    seg = np.repeat(np.arange(off.size - 1), np.diff(off))
    return np.asarray((cum - before[seg]).reshape(a.shape))


def cumulative_stats(
    inc: NDArray[np.float64], off: NDArray[np.int64], clip: float, task: str
) -> NDArray[np.float64]:
    """Noisy left statistics from per-interval increments: running sums per pair.

    Each interval is made consistent first (:func:`_clip_stats`), so counts stay monotone.
    """
    return cumulative(clip_stats(inc, clip, task), off)
