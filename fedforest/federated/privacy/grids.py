"""Histogram grids placed from pooled information only, refined node by node.

The root grid of a feature comes from two securely aggregated rounds over all rows: the
pooled mean and spread of ``asinh(x)`` (scale-free, robust to heavy tails) fix a coarse
grid, the pooled counts on it give the feature's pooled distribution. A node's grid for a
feature is quantiles of the best pooled distribution the server has for that node: the
parent's own histogram of the feature when it was sampled there (truncated at the parent's
threshold for the split feature), otherwise the root distribution truncated to the node's
path bounds. So resolution follows the node: a node over a narrow range of ``x`` gets a
grid over that range, however the clients binned their data.

A distribution is ``edges`` (``g + 1`` finite, increasing) and ``mass`` (``g`` bins,
uniform within a bin: in ``x``, or in ``asinh(x)`` for a bin wider than :data:`WIDE_BIN` in
that scale, which spans orders of magnitude; see :func:`wide_bin`).
"""

from __future__ import annotations

import math
import warnings

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kernel_cache import inner_kernel

__all__ = [
    "libm_arcsinh",
    "libm_sinh",
    "moment_grid",
    "outer_bounds",
    "unresolved",
    "warn_unresolved",
    "displaced_edges",
    "merge_thresholds",
    "merge_thresholds_numpy",
    "quantile_grids",
    "quantile_grids_at",
    "quantile_grids_at_numpy",
    "quantile_grids_numpy",
    "searchsorted_segments",
    "searchsorted_segments_numpy",
]

#: The coarse grid spans this many standard deviations of asinh(x) each side of the mean;
#: the outer bounds of the root distribution a little more.
_GRID_SPAN = 6.0
_OUTER_SPAN = 8.0

#: A bin wider than this in ``asinh(x)`` (a factor ``exp(3)``, about 20, between its ends'
#: magnitudes, or more than 3 across zero) is taken as uniform in ``asinh(x)``, not in ``x``.
#: Uniform in ``x`` over orders of magnitude puts nearly every quantile at the bin's far end:
#: a feature of both signs and a huge scale (``z * 1e100``) falls into two coarse bins of
#: the moment grid, and its refined grids then missed its rows (docs/privacy.md, limits).
#: Every bin of an ordinary feature's coarse grid (``12 std / n_edges`` of ``asinh(x)``)
#: and of its node grids is far narrower, and interpolates in ``x`` as before.
WIDE_BIN = 3.0
_WIDE_RATIO = math.exp(WIDE_BIN)
_SURE_RATIO = math.exp(WIDE_BIN + 0.3)  # ln ratio - 1/4 > WIDE_BIN, with a margin
_SURE_ACROSS = math.sinh(WIDE_BIN) + 0.1  # asinh(right - left) > WIDE_BIN, with a margin


def _wide(left: float, right: float) -> bool:
    """Whether the bin ``[left, right]`` is taken as uniform in ``asinh(x)``.

    ``asinh(right) - asinh(left) > WIDE_BIN``. Bounds settle most bins without ``asinh``:
    the difference is at most ``right - left``; for ends of one sign at most the log of
    their ratio, and at least that log less 1/4 where both are at least 1 in size
    (``ln 2|x| <= |asinh x| <= ln 2|x| + 1 / (4 x^2)``); across zero at least
    ``asinh(right - left)`` (``asinh`` is concave on ``x >= 0``). Those bounds carry a
    margin, so they give the same answer as the difference itself. Compiled as
    :func:`wide_bin` for the kernels; the NumPy twins call it as it is (``math.asinh`` is
    the C library's either way).
    """
    if right - left <= WIDE_BIN:
        return False
    if left > 0.0:
        if right <= left * _WIDE_RATIO:
            return False
        if left >= 1.0 and right > left * _SURE_RATIO:
            return True
    elif right < 0.0:
        if left >= right * _WIDE_RATIO:
            return False
        if right <= -1.0 and left < right * _SURE_RATIO:
            return True
    elif right - left > _SURE_ACROSS:
        return True
    return math.asinh(right) - math.asinh(left) > WIDE_BIN


wide_bin = numba.njit(nogil=True, cache=True, inline="always")(_wide)


@numba.njit(nogil=True, cache=True, inline="always")
def _bin_part(m, left, right, a, b):
    """The mass ``m`` of bin ``[left, right]`` (``left < right``) inside ``[a, b]``."""
    lo, hi = max(left, a), min(right, b)
    if hi <= lo:
        return 0.0
    if wide_bin(left, right):
        if lo == left and hi == right:  # the formula's ratio is exactly 1
            return m
        return m * ((math.asinh(hi) - math.asinh(lo)) / (math.asinh(right) - math.asinh(left)))
    return m * (hi - lo) / (right - left)


@numba.njit(nogil=True, cache=True, inline="always")
def _bin_point(left, right, lo, hi, frac):
    """The point at ``frac`` of ``[lo, hi]`` (bin ``[left, right]`` clipped) by its mass."""
    if hi <= lo:
        return lo
    if wide_bin(left, right):
        u0 = math.asinh(lo)
        v = math.sinh(u0 + frac * (math.asinh(hi) - u0))
        return min(max(v, lo), hi)
    return lo + frac * (hi - lo)


@numba.njit(nogil=True, cache=True)
def _libm_map(x, inverse, out):
    # sinh or asinh of every value through the C library (one scalar call each).
    for i in range(x.size):
        out[i] = math.asinh(x[i]) if inverse else math.sinh(x[i])


def libm_sinh(x: ArrayLike) -> NDArray[np.float64]:
    """``np.sinh`` computed by the C library, the same in the last bit on every CPU.

    NumPy dispatches ``sinh`` and ``arcsinh`` to SIMD code on AVX-512 machines whose last
    bits differ from the C library's: the grids (and so a fixed seed's secure forest) would
    then depend on the processor the server runs on.
    """
    a = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty(a.size)
    _libm_map(a.ravel(), False, out)
    return out.reshape(a.shape)


def libm_arcsinh(x: ArrayLike) -> NDArray[np.float64]:
    """``np.arcsinh`` computed by the C library (see :func:`libm_sinh`)."""
    a = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty(a.size)
    _libm_map(a.ravel(), True, out)
    return out.reshape(a.shape)


def _asinh_stats(
    n: NDArray[np.float64], s1: NDArray[np.float64], s2: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    mean = s1 / np.maximum(n, 1.0)
    std = np.sqrt(np.maximum(s2 / np.maximum(n, 1.0) - mean**2, 0.0))
    return mean, std


def unresolved(
    n: NDArray[np.float64], s1: NDArray[np.float64], s2: NDArray[np.float64], resolution: float
) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """Features whose spread of ``asinh(x)`` the pooled moments cannot resolve.

    The variance is ``s2 / n - mean^2``: the clients' sums reach the fixed point's step
    (``resolution``) each, and in float64 they, the secret weights' scaling to the row
    count and the server's difference are each off by ``eps (1 + log2 n)`` of ``s2 / n``
    or so. Below ``floor = sqrt(resolution + (32 + 16 log2 n) eps s2 / n)`` (four times
    that bound) the standard deviation says nothing (an offset of 1e9 on unit noise,
    values near 1e-9 or below). Measured on ``1.7e9 + z`` (400 rows, 1 or 2 clients):
    ``std`` 0, 5.8e-7 and 7.2e-7 (the data's own 5.9e-10), above ``sqrt(4 eps s2 / n)`` =
    6.6e-7 in one fit of three; the floor here is 4.3e-6. Returns the mask and ``floor``
    per feature.
    """
    mean, std = _asinh_stats(n, s1, s2)
    m2 = np.abs(s2) / np.maximum(n, 1.0)
    terms = 32.0 + 16.0 * np.log2(np.maximum(n, 1.0))
    floor = np.sqrt(resolution + terms * np.finfo(np.float64).eps * m2)
    return (n > 1) & (std < floor), floor


#: A client warns of a feature whose values' standard deviation is below this many ulps of
#: their mean (``1e15 + z``: the pooled mean of ``asinh(x)`` places the probe's center
#: no closer than that; ``3e14 + z`` is resolved, test R^2 0.97; ``1e15 + z`` 0.98 in two
#: fits of three, -0.04 in one).
UNRESOLVED_ULPS = 8.0
#: ... or below this, near zero: twice the probe's innermost distance from its center there
#: (``6 * 2^-24 * 1e-15``; ``z * 1e-21`` is resolved, ``z * 1e-22`` in one fit of three).
UNRESOLVED_NEAR_ZERO = 7e-22


def warn_unresolved(
    x: NDArray[np.float64], feats: NDArray[np.int64], client: str, names: list[str] | None
) -> None:
    """Warn (on the client, where the data are) of features the secure grids cannot resolve.

    The server resolves a feature from the pooled moments of ``asinh(x)`` and, where they
    cannot tell its spread, from counts on a probe around its mean (:func:`_probe`). That
    still misses a feature whose values vary by fewer than about :data:`UNRESOLVED_ULPS`
    ulps of their mean (``1e15 + z``) or by less than :data:`UNRESOLVED_NEAR_ZERO` (``z *
    1e-22``): the forest then learns little or nothing from it. Nothing is sent: the
    warning stays on the client.
    """
    if not x.size:
        return
    known = np.isfinite(x)  # a missing value (+inf) is in no moment
    n = np.maximum(known.sum(axis=0), 1)
    scale = np.where(known, np.abs(x), 0.0).max(axis=0)  # no square overflows
    u = np.where(known, x, 0.0) / np.where(scale > 0, scale, 1.0)
    mean = u.sum(axis=0) / n
    std = np.sqrt(np.where(known, (u - mean) ** 2, 0.0).sum(axis=0) / n) * scale
    size = np.abs(mean) * scale
    least = np.maximum(UNRESOLVED_NEAR_ZERO, UNRESOLVED_ULPS * np.finfo(np.float64).eps * size)
    varies = np.where(known, x, np.inf).min(axis=0) < np.where(known, x, -np.inf).max(axis=0)
    bad = np.flatnonzero(varies & (std < least))
    if bad.size:
        cols = [names[int(feats[i])] if names else str(int(feats[i])) for i in bad]
        warnings.warn(
            f"Client {client!r}: feature(s) {cols} vary by less than {UNRESOLVED_ULPS:g} "
            f"ulps of their mean or less than {UNRESOLVED_NEAR_ZERO:g} (e.g. 1e15 + unit "
            "noise, or values near 1e-22): the secure grids cannot resolve them and the "
            "forest learns little or nothing from them. Centre and scale them before "
            'training (e.g. sklearn\'s StandardScaler), or use privacy="none".',
            UserWarning,
            stacklevel=2,
        )


def _probe(
    mean: NDArray[np.float64], floor: NDArray[np.float64], n_edges: int, span: float
) -> NDArray[np.float64]:
    """Edges ``c -+ d`` around ``c = sinh(mean)``, ``d`` geometric up to ``span`` floors.

    ``d`` runs from ``span * floor * cosh(mean)`` (the spread in ``x`` the moments still
    allow) down :data:`_PROBE_DECADES` decades (float64's digits), and no closer to ``c``
    than 4 of its ulps; half the edges below ``c``, half above (one a side: the farthest).
    Every bin spans a fixed factor of ``|x - c|``: the counts on them find the feature's
    spread to that factor.
    """
    c = _finite_sinh(mean)
    big = np.finfo(np.float64).max
    with np.errstate(over="ignore"):  # near float64's end: clipped below
        hi = np.minimum(span * floor * np.cosh(np.minimum(np.abs(mean), _ASINH_MAX)), big)
    lo = np.maximum(hi * 10.0**-_PROBE_DECADES, 4.0 * np.spacing(np.abs(c)))
    lo = np.minimum(lo, hi)
    below, above = n_edges // 2, n_edges - n_edges // 2
    t_below = np.linspace(1.0, 0.0, below) if below > 1 else np.ones(below)
    t_above = np.linspace(0.0, 1.0, above) if above > 1 else np.ones(above)
    log_lo, log_hi = np.log(lo)[:, None], np.log(hi)[:, None]
    d_below = np.exp(log_lo + (log_hi - log_lo) * t_below[None, :])
    d_above = np.exp(log_lo + (log_hi - log_lo) * t_above[None, :])
    with np.errstate(over="ignore"):
        edges = np.concatenate([c[:, None] - d_below, c[:, None] + d_above], axis=1)
    return np.clip(edges, -big, big)


def moment_grid(
    n: NDArray[np.float64],
    s1: NDArray[np.float64],
    s2: NDArray[np.float64],
    n_edges: int,
    resolution: float | None = None,
) -> NDArray[np.float64]:
    """Coarse grids, one row per feature, from pooled moments of ``asinh(x)``.

    Parameters
    ----------
    n, s1, s2 : ndarray of float64, shape (n_features,)
        Pooled row count, sum and sum of squares of ``asinh(x)``.
    n_edges : int
        Interior edges per feature.
    resolution : float, optional
        The moments' fixed-point step: a feature whose spread they cannot resolve
        (:func:`unresolved`) gets edges around its mean at geometric distances instead
        (:func:`_probe`). ``None``: mean +- 6 deviations for every feature (as before).

    Returns
    -------
    ndarray of float64, shape (n_features, n_edges)
        Nondecreasing edges (all equal for a constant feature without ``resolution``).
    """
    mean, std = _asinh_stats(n, s1, s2)
    t = np.linspace(-_GRID_SPAN, _GRID_SPAN, n_edges)
    grid = _finite_sinh(mean[:, None] + std[:, None] * t[None, :])
    if resolution is not None:
        bad, floor = unresolved(n, s1, s2, resolution)
        if bad.any():
            grid[bad] = _probe(mean[bad], floor[bad], n_edges, _GRID_SPAN)
    return grid


#: An unresolved feature's probe (:func:`_probe`) spans this many decades of ``|x - c|``.
_PROBE_DECADES = 15.0

#: ``asinh`` of the largest float64: a grid in ``asinh(x)`` ends there (``z * 1e300``
#: has a standard deviation of about 690 in that scale, and mean +- 6 of them overflows).
_ASINH_MAX = math.asinh(np.finfo(np.float64).max)


def _finite_sinh(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """``sinh(u)`` with ``u`` kept inside the float64 range (the same where it is)."""
    big = np.finfo(np.float64).max
    return np.clip(libm_sinh(np.clip(u, -_ASINH_MAX, _ASINH_MAX)), -big, big)


def outer_bounds(
    n: NDArray[np.float64],
    s1: NDArray[np.float64],
    s2: NDArray[np.float64],
    resolution: float | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Finite outer bounds of each feature's root distribution (beyond the coarse grid).

    With ``resolution`` (:func:`moment_grid`), an unresolved feature's bounds are its
    probe's ends moved out to 8 floors (:func:`_probe`).
    """
    mean, std = _asinh_stats(n, s1, s2)
    # A constant feature still needs a bin of positive width.
    std = np.where(std > 0, std, 1e-12 * np.maximum(np.abs(mean), 1.0))
    lo, hi = _finite_sinh(mean - _OUTER_SPAN * std), _finite_sinh(mean + _OUTER_SPAN * std)
    if resolution is not None:
        bad, floor = unresolved(n, s1, s2, resolution)
        if bad.any():
            ends = _probe(mean[bad], floor[bad], 2, _OUTER_SPAN)
            lo[bad], hi[bad] = ends[:, 0], ends[:, 1]
    return lo, hi


@numba.njit(nogil=True, cache=True)
def quantile_grids(edges, edge_off, mass, mass_off, lo, hi, n_out, shift, out_off, out):
    """Interior quantile edges of each truncated source distribution.

    Parameters
    ----------
    edges : ndarray of float64  # IN
        Source edges, source after source (``edge_off``).
    mass : ndarray of float64  # IN
        Source bin masses (``mass_off``); bin ``b`` of source ``q`` spans
        ``edges[edge_off[q] + b]`` to ``edges[edge_off[q] + b + 1]``.
    edge_off, mass_off : ndarray of int64, shape (n_grids + 1,)  # IN
        One source per requested grid (sources may repeat).
    lo, hi : ndarray of float64, shape (n_grids,)  # IN
        Truncation bounds (mass outside ``[lo, hi]`` is dropped).
    n_out : ndarray of int64, shape (n_grids,)  # IN
        Bins of each grid: it gets ``n_out - 1`` interior edges at levels
        ``(i - 1 + shift) / n_out``, ``i = 1..n_out-1``.
    shift : ndarray of float64, shape (n_grids,)  # IN
        In ``(0, 1]``; 1 gives the levels ``i / n_out``.
    out_off : ndarray of int64, shape (n_grids + 1,)  # IN
        ``out_off[q + 1] - out_off[q] == max(n_out[q] - 1, 0)``.
    out : ndarray of float64  # OUT
        The edges; a grid whose truncated mass is zero repeats ``lo``.
    """
    most = 0
    for q in range(n_out.size):
        most = max(most, mass_off[q + 1] - mass_off[q])
    parts = np.empty(most)
    for q in range(n_out.size):
        _quantile_grid(
            edges, edge_off[q], mass, mass_off[q], mass_off[q + 1] - mass_off[q],
            lo[q], hi[q], n_out[q], shift[q], out, out_off[q], out_off[q + 1] - out_off[q],
            parts,
        )  # fmt: skip


@numba.njit(nogil=True, cache=True)
def quantile_grids_at(edges, edge_at, mass, mass_at, n_mass, lo, hi, n_out, shift, out_off, out):
    """:func:`quantile_grids` with each source found where it lies in a pool of sources.

    Grid ``q``'s source has the edges ``edges[edge_at[q]:]`` and the ``n_mass[q]`` bin
    masses ``mass[mass_at[q]:]`` (shared sources are not repeated in the pool). The other
    arguments and the output are :func:`quantile_grids`'s.
    """
    most = 0
    for q in range(n_out.size):
        most = max(most, n_mass[q])
    parts = np.empty(most)
    for q in range(n_out.size):
        _quantile_grid(
            edges, edge_at[q], mass, mass_at[q], n_mass[q],
            lo[q], hi[q], n_out[q], shift[q], out, out_off[q], out_off[q + 1] - out_off[q],
            parts,
        )  # fmt: skip


@inner_kernel
def _quantile_grid(edges, e0, mass, m0, g, a, b, n_out, shift, out, k, n_int, parts):
    """One grid of :func:`quantile_grids`.

    Its source's edges start at ``edges[e0]``, its ``g`` masses at ``mass[m0]``; its
    ``n_int`` interior edges are written from ``out[k]``; ``parts`` (at least ``g``):
    scratch, each bin's mass inside ``[a, b]``, found once for both passes.
    """
    total = 0.0
    for i in range(g):
        left, right = edges[e0 + i], edges[e0 + i + 1]
        parts[i] = 0.0
        if right - left > 0:
            parts[i] = _bin_part(mass[m0 + i], left, right, a, b)
            total += parts[i]
        elif left >= a and left <= b:
            parts[i] = mass[m0 + i]
            total += parts[i]
    if n_int <= 0:
        return
    if total <= 0:
        for t in range(n_int):
            out[k + t] = a
        return
    cum = 0.0
    i = 0
    for t in range(n_int):
        level = total * (t + shift) / n_out
        value = b
        while i < g:
            left, right = edges[e0 + i], edges[e0 + i + 1]
            lo_i, hi_i = max(left, a), min(right, b)
            part = parts[i]
            if cum + part >= level and part > 0:
                frac = (level - cum) / part
                value = _bin_point(left, right, lo_i, hi_i, frac)
                break
            cum += part
            i += 1
        out[k + t] = value


def quantile_grids_numpy(
    edges: NDArray[np.float64],
    edge_off: NDArray[np.int64],
    mass: NDArray[np.float64],
    mass_off: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    n_out: NDArray[np.int64],
    shift: NDArray[np.float64],
    out_off: NDArray[np.int64],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`quantile_grids` (same arguments, same outputs)."""
    for q in range(n_out.size):
        e = edges[edge_off[q] : edge_off[q + 1]]
        m = mass[mass_off[q] : mass_off[q + 1]]
        left, right = e[:-1], e[1:]
        width = right - left
        lo_i, hi_i = np.maximum(left, lo[q]), np.minimum(right, hi[q])
        with np.errstate(divide="ignore", invalid="ignore"):
            part = np.where(
                width > 0,
                m * np.maximum(hi_i - lo_i, 0.0) / np.where(width > 0, width, 1.0),
                np.where((left >= lo[q]) & (left <= hi[q]), m, 0.0),
            )
        pairs = zip(left.tolist(), right.tolist(), strict=True)
        wide = np.array([r - x > 0 and _wide(x, r) for x, r in pairs], dtype=bool)
        asinh = math.asinh  # the C library's, as the kernel's
        for j in np.flatnonzero(wide & (hi_i > lo_i)):  # uniform in asinh(x)
            span = asinh(right[j]) - asinh(left[j])
            part[j] = m[j] * ((asinh(hi_i[j]) - asinh(lo_i[j])) / span)
        n_int = int(out_off[q + 1] - out_off[q])
        if n_int <= 0:
            continue
        total = part.sum()
        if total <= 0:
            out[out_off[q] : out_off[q + 1]] = lo[q]
            continue
        cum = np.concatenate([[0.0], np.cumsum(part)])
        for t in range(n_int):
            level = total * (t + shift[q]) / n_out[q]
            i = int(np.searchsorted(cum[1:], level, side="left"))
            # Skip empty bins: the first bin whose cumulative mass reaches the level and
            # that holds mass (as the kernel's scan does).
            while i < part.size and part[i] <= 0:
                i += 1
            if i >= part.size:
                out[out_off[q] + t] = hi[q]
                continue
            frac = (level - cum[i]) / part[i]
            if wide[i]:
                u0 = math.asinh(lo_i[i])
                point = math.sinh(u0 + frac * (math.asinh(hi_i[i]) - u0))
                out[out_off[q] + t] = min(max(point, lo_i[i]), hi_i[i])
            else:
                out[out_off[q] + t] = lo_i[i] + frac * max(hi_i[i] - lo_i[i], 0.0)


def quantile_grids_at_numpy(
    edges: NDArray[np.float64],
    edge_at: NDArray[np.int64],
    mass: NDArray[np.float64],
    mass_at: NDArray[np.int64],
    n_mass: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    n_out: NDArray[np.int64],
    shift: NDArray[np.float64],
    out_off: NDArray[np.int64],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`quantile_grids_at` (same arguments, same outputs)."""
    e = [edges[a : a + n + 1] for a, n in zip(edge_at, n_mass, strict=True)]
    m = [mass[a : a + n] for a, n in zip(mass_at, n_mass, strict=True)]
    edge_off = np.zeros(len(e) + 1, dtype=np.int64)
    np.cumsum([x.size for x in e], out=edge_off[1:])
    mass_off = np.zeros(len(m) + 1, dtype=np.int64)
    np.cumsum(n_mass, out=mass_off[1:])
    flat_e = np.concatenate(e) if e else np.zeros(0)
    flat_m = np.concatenate(m) if m else np.zeros(0)
    quantile_grids_numpy(flat_e, edge_off, flat_m, mass_off, lo, hi, n_out, shift, out_off, out)


@numba.njit(nogil=True, cache=True)
def searchsorted_segments(grid, grid_off, x, x_off, out):
    """``np.searchsorted(grid_p, x_p)`` (side "left") for every pair ``p``, as grid indices.

    The search is NumPy's own (a binary search that starts from the previous key's
    bounds), so the answers agree with it even on a segment that is not sorted.

    Parameters
    ----------
    grid : ndarray of float64  # IN
        Each pair's grid, pair after pair (``grid_off``, shape (n_pairs + 1,)).
    x : ndarray of float64  # IN
        Each pair's values to look up, pair after pair (``x_off``, shape (n_pairs + 1,)).
    out : ndarray of int64, shape (x.size,)  # OUT
        ``grid_off[p]`` plus the insertion point of each value in its pair's grid.
    """
    for p in range(x_off.size - 1):
        g0 = grid_off[p]
        n = grid_off[p + 1] - g0
        k0, k1 = x_off[p], x_off[p + 1]
        if k1 == k0:
            continue
        min_idx = 0
        max_idx = n
        last = x[k0]
        for k in range(k0, k1):
            key = x[k]
            if last < key:
                max_idx = n
            else:
                min_idx = 0
                max_idx = max_idx + 1 if max_idx < n else n
            last = key
            while min_idx < max_idx:
                mid = min_idx + ((max_idx - min_idx) >> 1)
                if grid[g0 + mid] < key:
                    min_idx = mid + 1
                else:
                    max_idx = mid
            out[k] = g0 + min_idx


def searchsorted_segments_numpy(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    x: NDArray[np.float64],
    x_off: NDArray[np.int64],
    out: NDArray[np.int64],
) -> None:
    """NumPy twin of :func:`searchsorted_segments` (same arguments, same outputs)."""
    for p in range(x_off.size - 1):
        g = grid[grid_off[p] : grid_off[p + 1]]
        out[x_off[p] : x_off[p + 1]] = grid_off[p] + np.searchsorted(g, x[x_off[p] : x_off[p + 1]])


@numba.njit(nogil=True, cache=True)
def displaced_edges(grid, grid_off, thr, thr_off, at, out):
    """Each pair's edges within half a step of one of its thresholds (``secure_grids.displaced``).

    A step is the gap to the edge's neighbour on the threshold's side (the other side's at
    a grid's ends; a grid of one edge has none), halved before subtracting; a gap that is
    not finite counts as none.

    Parameters
    ----------
    grid : ndarray of float64  # IN
        Each pair's quantile edges, increasing, pair after pair (``grid_off``).
    thr : ndarray of float64  # IN
        Each pair's thresholds, pair after pair (``thr_off``, the same pairs).
    at : ndarray of int64, shape (thr.size,)  # OUT
        Each threshold's place in its pair's grid (:func:`searchsorted_segments`).
    out : ndarray of bool, shape (grid.size,)  # OUT
        Written at the pairs' edges only (offsets absolute: ranges of pairs in threads).
    """
    searchsorted_segments(grid, grid_off, thr, thr_off, at)
    for i in range(grid_off[0], grid_off[-1]):
        out[i] = False
    for p in range(grid_off.size - 1):
        g0, g1 = grid_off[p], grid_off[p + 1]
        for k in range(thr_off[p], thr_off[p + 1]):
            a, t = at[k], thr[k] / 2
            if a > g0:  # the edge below: its step up (down at the grid's end)
                i = a - 1
                step = _half_gap(grid, i) if i + 1 < g1 else 0.0
                if i + 1 == g1 and g1 - g0 >= 2:
                    step = _half_gap(grid, i - 1)
                if t - grid[i] / 2 < step:
                    out[i] = True
            if a < g1:  # the edge above: its step down (up at the grid's start)
                step = _half_gap(grid, a - 1) if a > g0 else 0.0
                if a == g0 and g1 - g0 >= 2:
                    step = _half_gap(grid, a)
                if grid[a] / 2 - t < step:
                    out[a] = True


@numba.njit(inline="always")
def _half_gap(grid, i):
    # Half the gap between edges i and i + 1 (each halved first: no overflow); 0 if it is
    # not finite (an infinite edge: no gap to it).
    g = (grid[i + 1] / 2 - grid[i] / 2) / 2
    return g if np.isfinite(g) else 0.0


@numba.njit(nogil=True, cache=True)
def merge_thresholds(grid, grid_off, merge, thr, thr_off, out, out_off, exact, out_exact):
    """Each pair's grid, joined where ``merge`` by its thresholds (``np.unique`` of both).

    Parameters
    ----------
    grid : ndarray of float64  # IN
        Each pair's grid, pair after pair (``grid_off``, shape (n_pairs + 1,)).
    merge : ndarray of bool, shape (n_pairs,)  # IN
        Where the grid is joined (sorted, duplicates dropped); elsewhere it is copied as is.
    thr : ndarray of float64  # IN
        Each pair's thresholds, pair after pair (``thr_off``, shape (n_pairs + 1,)).
    out : ndarray of float64, shape (grid.size + thr.size,)  # OUT
        The grids, pair after pair (``out_off``); the tail is not written.
    out_off : ndarray of int64, shape (n_pairs + 1,)  # OUT
    exact : ndarray of bool, shape (grid.size,)  # IN
        Edges that equal an earlier merge's threshold of their pair.
    out_exact : ndarray of bool, shape (out.size,)  # OUT
        ``out``'s edges that equal one of ``exact``'s or of the pair's thresholds (the
        edges ``grid_wire`` sends with their value).
    """
    most, most_t = 0, 0
    for p in range(merge.size):
        if merge[p]:
            n_t = thr_off[p + 1] - thr_off[p]
            most = max(most, grid_off[p + 1] - grid_off[p] + n_t)
            most_t = max(most_t, n_t)
    both, ts = np.empty(most), np.empty(most_t)  # scratch
    k = 0
    out_off[0] = 0
    for p in range(merge.size):
        g0, g1 = grid_off[p], grid_off[p + 1]
        if not merge[p]:
            for i in range(g0, g1):
                out[k] = grid[i]
                out_exact[k] = exact[i]
                k += 1
            out_off[p + 1] = k
            continue
        t0, t1 = thr_off[p], thr_off[p + 1]
        ordered = True  # the grid increases (no NaN) and no threshold is NaN
        for i in range(g0, g1):
            ordered = ordered and grid[i] == grid[i] and (i == g0 or grid[i] >= grid[i - 1])
        for i in range(t0, t1):
            ordered = ordered and thr[i] == thr[i]
        if ordered:
            # The thresholds sorted alone, then merged into the grid, the grid's first on
            # ties: the stable sort of both (as the insertion sort below), repeats dropped.
            n_t = t1 - t0
            for i in range(n_t):
                ts[i] = thr[t0 + i]
            _insertion_sort(ts[:n_t])
            i, j, n = g0, 0, 0
            while i < g1 or j < n_t:
                if j == n_t or (i < g1 and not ts[j] < grid[i]):
                    v, e = grid[i], exact[i]
                    i += 1
                else:
                    v, e = ts[j], True
                    j += 1
                if n == 0 or v != out[k - 1]:
                    out[k] = v
                    out_exact[k] = e
                    k += 1
                elif e:  # a repeat of the last edge
                    out_exact[k - 1] = True
                n += 1
        else:
            k0 = k
            m = g1 - g0 + t1 - t0
            # Loops, not slice assignments: numba compiles their shape-mismatch message's
            # formatting, about 2.7 s of a first run (docs/benchmarks-history.md, first run).
            for i in range(g1 - g0):
                both[i] = grid[g0 + i]
            for i in range(t1 - t0):
                both[g1 - g0 + i] = thr[t0 + i]
            _insertion_sort(both[:m])
            for i in range(m):
                if i == 0 or both[i] != both[i - 1]:
                    out[k] = both[i]
                    k += 1
            for q in range(k0, k):  # rare (NaN, a grid out of order): by comparison
                e = False
                for i in range(t0, t1):
                    e = e or thr[i] == out[q]
                for i in range(g0, g1):
                    e = e or (exact[i] and grid[i] == out[q])
                out_exact[q] = e
        out_off[p + 1] = k


@numba.njit(inline="always")
def _insertion_sort(a):
    # Ascending, NaNs last (as ``np.sort``). Not numba's ``a.sort()``: its quicksort costs
    # about 4 s of compilation on a first run, and here ``a`` is a sorted grid followed by a
    # few thresholds, so an insertion sort moves each threshold once.
    for i in range(1, a.size):
        v = a[i]
        j = i
        while j > 0 and (v < a[j - 1] or (a[j - 1] != a[j - 1] and v == v)):
            a[j] = a[j - 1]
            j -= 1
        a[j] = v


def merge_thresholds_numpy(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    merge: NDArray[np.bool_],
    thr: NDArray[np.float64],
    thr_off: NDArray[np.int64],
    out: NDArray[np.float64],
    out_off: NDArray[np.int64],
    exact: NDArray[np.bool_],
    out_exact: NDArray[np.bool_],
) -> None:
    """NumPy twin of :func:`merge_thresholds` (same arguments, same outputs)."""
    k = 0
    out_off[0] = 0
    for p in range(merge.size):
        g = grid[grid_off[p] : grid_off[p + 1]]
        e = exact[grid_off[p] : grid_off[p + 1]]
        if merge[p]:
            t = thr[thr_off[p] : thr_off[p + 1]]
            g = np.unique(np.concatenate([g, t]))
            e = np.isin(g, np.concatenate([t, grid[grid_off[p] : grid_off[p + 1]][e]]))
        out[k : k + g.size] = g
        out_exact[k : k + g.size] = e
        k += g.size
        out_off[p + 1] = k
