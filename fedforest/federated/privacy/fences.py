"""Node grid edges kept where the parent's released counts show ``m`` rows (``"secure"``).

A child's grid is quantiles of its parent's measured histogram, each bin's rows spread
evenly over it. Where the parent's rows tie at one value of a bin (a capped column, a
level of an integer column), edges land between the tie and a row or two beside it, and
the child's count between two edges (or beyond the last) holds that row alone; red team
8's tracer follows it down the trees (docs/privacy-findings.md, "Red team 10" and "Red
team 11"). The coarse grid cannot tell such a tie from a cluster; the parent's counts,
which the server has when it places the children's grids, can, at the parent's edges.

So a child's edges are fenced by them, within the child's path bounds ``(a, b]``: no edge
below the first parent edge with ``m`` of the parent's rows in ``(a, edge]`` or above the
last with ``m`` in ``(edge, b]`` (an edge outside moves onto that bound), and none
strictly inside a span of parent bins around a bin of 1 to ``m - 1`` rows (the bin with
its bins above or below it, whichever reach ``m`` rows with fewer: an edge there moves
onto the span's nearer end). A child's interval that holds such a bin then holds the
whole span: ``m`` rows of the parent, so ``m`` of the federation. Edges of a pair whose
range shows fewer than ``m`` rows go (NaN).
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["fenced_edges", "fenced_edges_numpy"]


@numba.njit(nogil=True, cache=True)
def fenced_edges(grid, grid_off, src, p_edges, p_eoff, p_rows, p_roff, lo, hi, m, join, out):  # noqa: PLR0913
    """Each pair's edges moved out of its parent's fences, NaN where none may lie.

    ``grid`` (``grid_off``: per pair): sorted edges. ``src`` (per pair): the parent's
    histogram (``-1``: none, the edges stay), its edges ``p_edges[p_eoff[s]:p_eoff[s + 1]]``
    and rows per bin ``p_rows[p_roff[s]:p_roff[s + 1]]`` (one fewer). ``lo``, ``hi``: the
    pair's path bounds. ``out`` (OUT, like ``grid``).
    """
    most = 1
    for s in range(p_roff.size - 1):
        most = max(most, p_roff[s + 1] - p_roff[s] + 1)
    cum = np.empty(most)
    span_a = np.empty(most)
    span_b = np.empty(most)
    for q in range(grid_off.size - 1):
        g0, g1 = grid_off[q], grid_off[q + 1]
        s = src[q]
        if s < 0:
            for i in range(g0, g1):
                out[i] = grid[i]
            continue
        e0, nb, r0 = p_eoff[s], p_roff[s + 1] - p_roff[s], p_roff[s]
        cum[0] = 0.0
        for k in range(nb):
            cum[k + 1] = cum[k] + p_rows[r0 + k]
        i0 = 0  # the first parent edge at or above a, the last at or below b
        while i0 <= nb and p_edges[e0 + i0] < lo[q]:
            i0 += 1
        j0 = nb
        while j0 >= 0 and p_edges[e0 + j0] > hi[q]:
            j0 -= 1
        low, high = _ends(p_edges, e0, cum, i0, j0, m)
        if low > high:
            for i in range(g0, g1):
                out[i] = np.nan
            continue
        n_span = 0
        for k in range(i0, j0):  # bins (E_k, E_k+1] inside the range, 1 to m - 1 rows
            rows = cum[k + 1] - cum[k]
            if not join or rows <= 0 or rows >= m:
                continue
            up, down = np.inf, np.inf
            ju, jd = -1, -1
            for j in range(k + 2, nb + 1):
                if cum[j] - cum[k] >= m:
                    up, ju = cum[j] - cum[k], j
                    break
            for j in range(k - 1, -1, -1):
                if cum[k + 1] - cum[j] >= m:
                    down, jd = cum[k + 1] - cum[j], j
                    break
            if ju >= 0 and up <= down:
                span_a[n_span], span_b[n_span] = p_edges[e0 + k], p_edges[e0 + ju]
                n_span += 1
            elif jd >= 0:
                span_a[n_span], span_b[n_span] = p_edges[e0 + jd], p_edges[e0 + k + 1]
                n_span += 1
        n_span = _merge_spans(span_a, span_b, n_span)
        t = 0
        for i in range(g0, g1):  # sorted edges against sorted, disjoint spans
            x = min(max(grid[i], low), high)
            while t < n_span and span_b[t] <= x:
                t += 1
            if t < n_span and span_a[t] < x:
                x = _off_span(x, span_a[t], span_b[t], low, high)
            out[i] = x


@numba.njit(nogil=True, cache=True, inline="always")
def _ends(p_edges, e0, cum, i0, j0, m):
    """The lowest and highest edge a node may hold in its range's edges ``i0 .. j0``.

    The first with ``m`` rows at or below it, the last with ``m`` above (the bin where
    they are reached may tie at its far end: no edge inside it).
    """
    low, high = np.inf, -np.inf
    for j in range(i0, j0 + 1):
        if cum[j] - cum[i0] >= m:
            low = p_edges[e0 + j]
            break
    for j in range(j0, i0 - 1, -1):
        if cum[j0] - cum[j] >= m:
            high = p_edges[e0 + j]
            break
    return low, high


@numba.njit(nogil=True, cache=True, inline="always")
def _off_span(x, a, b, low, high):
    """``x`` (inside ``(a, b)``) moved onto the nearer end in ``[low, high]`` (or NaN)."""
    first, second = (a, b) if x - a <= b - x else (b, a)
    if low <= first <= high:
        return first
    return second if low <= second <= high else np.nan


@numba.njit(nogil=True, cache=True, inline="always")
def _merge_spans(a, b, n):
    """The first ``n`` open intervals sorted, overlapping ones joined; how many remain."""
    for i in range(1, n):  # insertion sort: a histogram's few thin bins
        x, y, j = a[i], b[i], i - 1
        while j >= 0 and a[j] > x:
            a[j + 1], b[j + 1] = a[j], b[j]
            j -= 1
        a[j + 1], b[j + 1] = x, y
    k = 0
    for i in range(n):
        if k > 0 and a[i] < b[k - 1]:
            b[k - 1] = max(b[k - 1], b[i])
        else:
            a[k], b[k] = a[i], b[i]
            k += 1
    return k


def fenced_edges_numpy(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    src: NDArray[np.int64],
    p_edges: NDArray[np.float64],
    p_eoff: NDArray[np.int64],
    p_rows: NDArray[np.float64],
    p_roff: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    m: float,
    join: bool,
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`fenced_edges` (same arguments, same outputs)."""
    for q in range(grid_off.size - 1):
        x = grid[grid_off[q] : grid_off[q + 1]].copy()
        s = src[q]
        if s >= 0:
            e = p_edges[p_eoff[s] : p_eoff[s + 1]]
            cum = np.concatenate([[0.0], np.cumsum(p_rows[p_roff[s] : p_roff[s + 1]])])
            inside = np.flatnonzero((e >= lo[q]) & (e <= hi[q]))
            i0, j0 = (int(inside[0]), int(inside[-1])) if inside.size else (e.size, -1)
            low, high = _ends_numpy(e, cum, i0, j0, m)
            if low > high:
                x[:] = np.nan
            else:
                x = np.clip(x, low, high)
                for a, b in _joined(_spans(e, cum, i0, j0, m) if join else []):
                    near = np.where(x - a <= b - x, a, b)
                    far = np.where(near == a, b, a)
                    ok_near, ok_far = (near >= low) & (near <= high), (far >= low) & (far <= high)
                    moved = np.where(ok_near, near, np.where(ok_far, far, np.nan))
                    x = np.where((x > a) & (x < b), moved, x)
        out[grid_off[q] : grid_off[q + 1]] = x


def _spans(
    e: NDArray[np.float64], cum: NDArray[np.float64], i0: int, j0: int, m: float
) -> list[tuple[float, float]]:
    """The twin's spans around the thin bins of one parent histogram, in bin order."""
    out = []
    for k in range(i0, j0):
        if not 0 < cum[k + 1] - cum[k] < m:
            continue
        up = [j for j in range(k + 2, cum.size) if cum[j] - cum[k] >= m]
        down = [j for j in range(k - 1, -1, -1) if cum[k + 1] - cum[j] >= m]
        n_up = cum[up[0]] - cum[k] if up else np.inf
        n_down = cum[k + 1] - cum[down[0]] if down else np.inf
        if up and n_up <= n_down:
            out.append((float(e[k]), float(e[up[0]])))
        elif down:
            out.append((float(e[down[0]]), float(e[k + 1])))
    return out


def _joined(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Open intervals sorted, overlapping ones joined."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _ends_numpy(
    e: NDArray[np.float64], cum: NDArray[np.float64], i0: int, j0: int, m: float
) -> tuple[float, float]:
    """The twin's ``_ends``."""
    js = np.arange(i0, j0 + 1)
    ok_lo = js[cum[js] - cum[i0] >= m] if js.size else js
    ok_hi = js[cum[j0] - cum[js] >= m] if js.size else js
    low = float(e[ok_lo[0]]) if ok_lo.size else np.inf
    high = float(e[ok_hi[-1]]) if ok_hi.size else -np.inf
    return low, high
