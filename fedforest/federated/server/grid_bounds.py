"""A secure level's quantile edges moved onto its features' ends and out of their gaps.

:func:`within` (each pair's edges outside its feature's ``[edge_lo, edge_hi]`` moved onto
those bounds: the ``within_edges`` kernel, its NumPy twin :func:`within_numpy`) and
:func:`outside` (edges inside a feature's gaps moved onto the nearer end), both from
``secure_setup.grid_ends`` / ``grid_gaps``; ``secure_grids.node_grids`` calls them (as
``_within``, ``_outside``). Moved out of ``secure_grids.py`` with the kernel.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from .secure_segments import offsets

__all__ = ["outside", "within", "within_edges", "within_numpy"]


def within(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    node_lo: NDArray[np.float64],
    node_hi: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Each pair's grid with its edges outside ``[lo, hi]`` moved onto those bounds.

    ``lo`` and ``hi`` (per pair): the feature's bounds from the coarse grid's counts
    (``secure_setup.grid_ends``). The root distribution spreads a coarse bin's rows
    evenly, so a bin holding many rows at one value (ties: a column 0 in every row but
    one) got quantile edges beside that value with every row but one beyond them; each
    node's count there followed that row (docs/privacy-findings.md, "Red team 8"). An
    edge outside the bounds moves onto the nearer one, and goes where that is not inside
    the node's path bounds (``node_lo``, ``node_hi``), is a repeat, or ``lo > hi`` (a
    column of fewer than ``m`` rows off its tie never splits). The grid itself (no copy)
    when every edge lies inside its bounds. One pass of :func:`within_edges`, no array as
    long as the grid but the answer (:func:`within_numpy`: its twin, the NumPy code).
    """
    out = np.empty(grid.size)
    out_off = np.empty(grid_off.size, dtype=np.int64)
    n = within_edges(grid, grid_off, lo, hi, node_lo, node_hi, out, out_off)
    return (grid, grid_off) if n < 0 else (out[:n], out_off)


@numba.njit(nogil=True, cache=True, inline="always")
def _clip(g, a, b):  # type: ignore[no-untyped-def]
    """``np.minimum(np.maximum(g, a), b)`` to the bit.

    A NaN passes; a tie gives the bound (NumPy's choice between -0.0 and 0.0).
    """
    x = g if (g > a or g != g) else a
    return x if (x < b or x != x) else b


@numba.njit(nogil=True, cache=True)
def within_edges(grid, grid_off, lo, hi, node_lo, node_hi, out, out_off):  # type: ignore[no-untyped-def]
    """The kernel of :func:`within`.

    Returns -1 where every edge lies inside its pair's bounds (``out`` untouched), else
    the count of edges written to ``out`` (``out_off``: each pair's offsets, n_pairs + 1).
    """
    n = grid_off.shape[0] - 1
    for p in range(n):
        for i in range(grid_off[p], grid_off[p + 1]):
            if not (grid[i] >= lo[p] and grid[i] <= hi[p]):
                return _moved(grid, grid_off, lo, hi, node_lo, node_hi, out, out_off)
    return -1


@numba.njit(nogil=True, cache=True)
def _moved(grid, grid_off, lo, hi, node_lo, node_hi, out, out_off):  # type: ignore[no-untyped-def]
    o = 0
    out_off[0] = 0
    for p in range(grid_off.shape[0] - 1):
        a, b = lo[p], hi[p]
        prev = 0.0
        for i in range(grid_off[p], grid_off[p + 1]):
            x = _clip(grid[i], a, b)
            if a <= b and x > node_lo[p] and x < node_hi[p] and (i == grid_off[p] or x != prev):
                out[o] = x
                o += 1
            prev = x  # a repeat of the edge before, kept or not (sorted grids)
        out_off[p + 1] = o
    return o


def within_numpy(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    node_lo: NDArray[np.float64],
    node_hi: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """NumPy twin of :func:`within` (the same arrays)."""
    owner = np.repeat(np.arange(grid_off.size - 1), np.diff(grid_off))
    a, b = lo[owner], hi[owner]
    if np.all((grid >= a) & (grid <= b)):
        return grid, grid_off
    moved = np.minimum(np.maximum(grid, a), b)
    keep = (a <= b) & (moved > node_lo[owner]) & (moved < node_hi[owner])
    keep[1:] &= (moved[1:] != moved[:-1]) | (owner[1:] != owner[:-1])  # sorted: repeats
    return moved[keep], offsets(np.bincount(owner[keep], minlength=grid_off.size - 1))


def outside(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    feat: NDArray[np.int64],
    gaps: list[NDArray[np.float64]],
    node_lo: NDArray[np.float64],
    node_hi: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Each pair's grid with its edges inside its feature's ``gaps`` moved out of them.

    An edge goes onto the gap's nearer end (a repeat goes), as :func:`within` does at a
    feature's ends: the ends keep what the edges inside told apart from the rows beyond
    them (the zeros of a sparse column from the rest). ``gaps``: per feature, open
    intervals, sorted and disjoint (``secure_setup.grid_gaps``); ``feat``: each pair's
    feature. A moved edge goes where it is not inside the node's path bounds (``node_lo``,
    ``node_hi``). The grid itself where no pair's feature has a gap.
    """
    with_gaps = [j for j in np.unique(feat) if gaps[j].size]  # the pairs' features
    if not with_gaps:
        return grid, grid_off
    owner = np.repeat(np.arange(grid_off.size - 1), np.diff(grid_off))
    moved = grid.copy()
    at = feat[owner]
    for j in with_gaps:
        mine = np.flatnonzero(at == j)
        x = grid[mine]
        k = np.maximum(np.searchsorted(gaps[j][:, 0], x, side="right") - 1, 0)
        a, b = gaps[j][k, 0], gaps[j][k, 1]
        inside = (x > a) & (x < b)
        moved[mine] = np.where(inside, np.where(x - a <= b - x, a, b), x)
    if np.array_equal(moved, grid):
        return grid, grid_off
    keep = (moved > node_lo[owner]) & (moved < node_hi[owner])
    keep[1:] &= (moved[1:] != moved[:-1]) | (owner[1:] != owner[:-1])  # sorted: repeats
    return moved[keep], offsets(np.bincount(owner[keep], minlength=grid_off.size - 1))
