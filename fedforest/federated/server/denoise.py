"""Post-processing of the noisy sums of ``privacy="dp"``: consistent, cumulative, bounded.

Applied by the server to what it decoded; post-processing changes no privacy guarantee.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_TASK, STAT_WEIGHT
from ..criteria import s_log_mean
from .config import GrowerConfig
from .level import cumsum_segments
from .splitter import BestSplits

__all__ = [
    "clip_stats",
    "consistent_children",
    "cumulative",
    "cumulative_stats",
    "denoise_a",
    "fill_empty_blocks",
    "from_z",
    "stat_task",
    "to_z",
]


class Standardisation(Protocol):
    """The pooled constants the clients standardise their targets with.

    Floats, or one per output (arrays) for multi-output y; under criterion="poisson"
    (``poisson``) the center is 0 and the second column sums ``w u log u``.
    """

    y_center: float | NDArray[np.float64]
    y_scale: float | NDArray[np.float64]
    poisson: bool


def stat_task(cfg: GrowerConfig) -> str:
    """How the statistics' task columns are bounded: "poisson", or the task."""
    return "poisson" if cfg.criterion == "poisson" else cfg.task


def _constants(state: Standardisation) -> Iterator[tuple[int, float, float]]:
    """Per output: its first task column, center and scale (Python floats)."""
    centers = np.atleast_1d(np.asarray(state.y_center, dtype=np.float64)).tolist()
    scales = np.atleast_1d(np.asarray(state.y_scale, dtype=np.float64)).tolist()
    for o, (c, s) in enumerate(zip(centers, scales, strict=True)):
        yield 2 + 2 * o, float(c), float(s)


def denoise_a(
    summary: NDArray[np.float64],
    hist: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    clip: float,
    task: str,
    class_sizes: tuple[int, ...] = (),
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Post-processing of noisy Round A sums: counts non-negative, histograms cumulative.

    ``class_sizes``: classification's blocks of class columns (one per output), each made
    a distribution of the node's weight (:func:`fill_empty_blocks`).
    """
    summary = clip_stats(summary, clip, task)
    summary[:, STAT_WEIGHT] = np.maximum(summary[:, STAT_WEIGHT], 1.0)  # leaf values divide
    summary = fill_empty_blocks(summary, class_sizes)
    return summary, cumulative(np.maximum(hist, 0.0), grid_off)


def fill_empty_blocks(
    stats: NDArray[np.float64], class_sizes: tuple[int, ...]
) -> NDArray[np.float64]:
    """Noisy node statistics whose block of class weights the clipping left all zero.

    Per output (``class_sizes``: its block's columns): where the noise drowned every class
    of a node, the block gets the node's weight spread evenly, so that a leaf predicts
    uniform proportions for that output rather than none (its proportions must add up to
    1: model files refuse a block that does not). Other blocks are unchanged.
    """
    out = np.array(stats, dtype=np.float64, copy=True)
    start = STAT_TASK
    for size in class_sizes:
        block = out[:, start : start + size]  # a view: filled in place
        empty = block.sum(axis=1) <= 0
        block[empty] = (out[empty, STAT_WEIGHT] / size)[:, None]
        start += size
    return out


def clip_stats(stats: NDArray[np.float64], clip: float, task: str) -> NDArray[np.float64]:
    """Noisy statistics made consistent: counts >= 0, |mean z| <= clip, variance >= 0.

    ``task`` "regression": per output's pair; "poisson" (:func:`stat_task`): the mean
    ``u`` within ``[0, clip]`` and ``sum w u log u`` within Jensen's bound and ``S log clip``.
    """
    out = np.array(stats, dtype=np.float64, copy=True)
    out[:, STAT_ROWS] = np.maximum(out[:, STAT_ROWS], 0.0)
    out[:, STAT_WEIGHT] = np.maximum(out[:, STAT_WEIGHT], 0.0)
    w = out[:, STAT_WEIGHT]
    if task == "regression":
        for a in range(2, out.shape[1], 2):  # one (sum w z, sum w z^2) pair per output
            out[:, a] = np.clip(out[:, a], -clip * w, clip * w)
            out[:, a + 1] = np.clip(out[:, a + 1], 0.0, clip * clip * w)
            # Cauchy-Schwarz: (sum w z)^2 <= W * sum w z^2.
            out[:, a + 1] = np.maximum(
                out[:, a + 1], np.divide(out[:, a] ** 2, w, where=w > 0, out=np.zeros_like(w))
            )
    elif task == "poisson":
        for a in range(2, out.shape[1], 2):  # one (sum w u, sum w u log u) pair per output
            out[:, a] = np.clip(out[:, a], 0.0, clip * w)
            # Jensen: sum w u log u >= S log(S / W); and u log u <= u log(clip) for u <= clip.
            out[:, a + 1] = np.clip(
                out[:, a + 1], s_log_mean(out[:, a], w), out[:, a] * np.log(clip)
            )
    else:
        out[:, 2:] = np.maximum(out[:, 2:], 0.0)
    return out


def cumulative(inc: NDArray[np.float64], off: NDArray[np.int64]) -> NDArray[np.float64]:
    """Running sums of ``inc`` (rows) within each segment ``off[i]:off[i + 1]``."""
    a = np.array(inc, dtype=np.float64, copy=True)
    if a.size == 0:  # no interval travelled this level (every pair refused)
        return a
    flat = np.ascontiguousarray(a.reshape(a.shape[0], -1))
    cumsum_segments(flat, np.asarray(off, dtype=np.int64))  # the Round B summing kernel
    return np.asarray(flat.reshape(a.shape))


def cumulative_stats(
    inc: NDArray[np.float64], off: NDArray[np.int64], clip: float, task: str
) -> NDArray[np.float64]:
    """Noisy left statistics from per-interval increments: running sums per pair.

    Each interval is made consistent first (:func:`_clip_stats`), so counts stay monotone.
    """
    return cumulative(clip_stats(inc, clip, task), off)


def from_z(
    stats: NDArray[np.float64], state: Standardisation, regression: bool
) -> NDArray[np.float64]:
    """Statistics of standardised targets back in the targets' units (regression only)."""
    if not regression:
        return stats
    out = np.array(stats, dtype=np.float64, copy=True)
    w = stats[..., STAT_WEIGHT]
    for a, c, s in _constants(state):
        sz, szz = stats[..., a], stats[..., a + 1]
        if state.poisson:  # y = s u: sum w y log y = s sum w u log u + s log(s) sum w u
            out[..., a] = s * sz
            out[..., a + 1] = s * szz + s * np.log(s) * sz
            continue
        out[..., a] = s * sz + c * w
        out[..., a + 1] = s * s * szz + 2.0 * c * s * sz + c * c * w
    return out


def consistent_children(
    best: BestSplits, state: Standardisation, cfg: GrowerConfig, ctx: dict[str, Any]
) -> BestSplits:
    """Under "dp": children's noisy statistics made consistent (they may become leaves).

    A right child's statistics are the parent's minus the left's, both noisy: its weight
    is kept at least 1 and its mean target within the clipped range.
    """
    if cfg.privacy != "dp":
        return best
    clip = ctx["dp"].clip
    out = []
    for stats in (best.left, best.right):
        z = to_z(stats, state, cfg.task == "regression")
        z = clip_stats(z, clip, stat_task(cfg))
        z[:, STAT_WEIGHT] = np.maximum(z[:, STAT_WEIGHT], 1.0)
        z = fill_empty_blocks(z, cfg.class_sizes)
        out.append(from_z(z, state, cfg.task == "regression"))
    keep = best.feature >= 0
    left = np.where(keep[:, None], out[0], best.left)
    right = np.where(keep[:, None], out[1], best.right)
    return dataclasses.replace(best, left=left, right=right)


def to_z(
    stats: NDArray[np.float64], state: Standardisation, regression: bool
) -> NDArray[np.float64]:
    """Inverse of :func:`from_z`."""
    if not regression:
        return np.array(stats, dtype=np.float64, copy=True)
    out = np.array(stats, dtype=np.float64, copy=True)
    w = stats[..., STAT_WEIGHT]
    for a, c, s in _constants(state):
        sy, syy = stats[..., a], stats[..., a + 1]
        if state.poisson:
            out[..., a] = sy / s
            out[..., a + 1] = (syy - np.log(s) * sy) / s
            continue
        out[..., a] = (sy - c * w) / s
        out[..., a + 1] = (syy - 2.0 * c * sy + c * c * w) / (s * s)
    return out
