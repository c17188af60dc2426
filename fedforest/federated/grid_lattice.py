"""Round A's grids on per-feature lattices, as they travel under ``"secure"``.

Every client gets every node's grid (the same edges to each), which were most of the
bytes a secure fit sends at scale (docs/privacy.md, "What it costs"). Each numeric
feature has a lattice between its root distribution's outer bounds ``a`` and ``b``
(``grid_span``, pooled information the server already holds), and a grid edge travels
as its ``uint32`` code ``k`` on it: the edge is ``a + (b - a) * (k / LATTICE_STEPS)``,
computed in float64 the same way on both sides (IEEE operations, one at a time, no fused
multiply-add), so the client rebuilds bit for bit the edge the server counts on: the
server snaps its quantile edges with :func:`encode_grid` and uses the decoded ones.
Candidates, so the ancestors' thresholds that join a node's grid, are then lattice points
too and travel as codes, losslessly; an edge that must keep its value and is not one (a
guide placed between grid edges, the missing-values edge, a categorical code) travels as
float64 (``grid_value``, marked in the bit mask ``grid_exact``). A pair whose snapped
edges would not keep the order and the ties of its original ones, or would move one by
more than ``1 / MOVE_SHARE`` of the pair's smallest gap (a heavy tail: outer bounds 1e6
apart around edges 1e-5 apart), sends its quantile edges as float64: snapping never
merges two edges nor moves one noticeably within its node.

Every array from the server is checked on the client (kind, dtype, shape, bounds) before
use; an error names the array and the server. ``grid_wire`` re-exports these names.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .protocol import Message, expect_array
from .threads import thread_map, work_ranges

__all__ = [
    "GRID_ROOM",
    "LATTICE_STEPS",
    "MOVE_SHARE",
    "PARALLEL_EDGES",
    "decode_grid",
    "decode_lattice",
    "decode_lattice_numpy",
    "encode_grid",
    "encode_lattice",
    "encode_lattice_numpy",
    "grid_inputs",
    "grid_space",
    "lattice_grid",
]

#: Lattice codes run from 0 (``a``) to ``LATTICE_STEPS`` (``b``), one ``uint32`` each.
LATTICE_STEPS = 2**32 - 1
#: Snapping may move an edge by at most this fraction of its pair's smallest gap.
MOVE_SHARE = 16
#: The server codes grids and decodes counts in threads from this many edges on.
PARALLEL_EDGES = 1 << 18


def _owner(off: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.repeat(np.arange(off.size - 1), np.diff(off))


def _decode(
    a: NDArray[np.float64], b: NDArray[np.float64], codes: NDArray[Any]
) -> NDArray[np.float64]:
    """``a + (b - a) * (k / LATTICE_STEPS)``, one IEEE operation at a time (both sides)."""
    frac = np.asarray(codes, dtype=np.float64) / float(LATTICE_STEPS)
    return np.asarray(a + (b - a) * frac)


def _lattice(ends: NDArray[np.float64]) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Each feature's ``a``, ``b`` and whether its lattice is finite and increasing."""
    a, b = ends[:, 0].astype(np.float64), ends[:, 1].astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        valid = np.isfinite(a) & np.isfinite(b - a) & (b > a)
    return a, b, valid


def encode_grid(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    pair_feat: NDArray[Any],
    exact: NDArray[np.bool_],
    lattice: NDArray[np.float64],
    n_threads: int = 1,
) -> tuple[dict[str, NDArray[Any]], NDArray[np.float64]]:
    """Round A's grid as it travels, and the grid the client rebuilds from it.

    Parameters
    ----------
    grid : ndarray of float64
        Each pair's edges, pair after pair (``grid_off``, shape (n_pairs + 1,)); the
        pairs' features ``pair_feat``.
    exact : ndarray of bool, shape (grid.size,)
        Edges that must keep their value (thresholds, guides, codes, the missing edge):
        coded only where they are lattice points, else sent as float64.
    lattice : ndarray of float64, shape (n_features, 2)
        Each feature's lattice ``a, b`` (one that is not finite and increasing: none).
    n_threads : int
        From :data:`PARALLEL_EDGES` edges, ranges of pairs are coded in that many threads
        (the kernels drop the GIL): the same arrays.

    Returns
    -------
    arrays : dict
        ``grid_exact`` (uint8, the bits of the edges sent as float64), ``grid_value``
        (float64, those edges), ``grid_code`` (uint32, the others' lattice codes),
        ``grid_span`` (float64, the lattices).
    decoded : ndarray of float64, shape (grid.size,)
        The grid the server counts on: the client's :func:`decode_grid` of ``arrays``.
    """
    a, b, valid = _lattice(lattice)
    feat = np.asarray(pair_feat, dtype=np.int64)
    off = grid_off.astype(np.int64)
    sent = np.empty(grid.size, dtype=np.bool_)
    codes = np.empty(grid.size, dtype=np.uint32)
    decoded = np.empty(grid.size)
    n = n_threads if grid.size >= PARALLEL_EDGES else 1
    parts = work_ranges(np.diff(off), n)

    def run(part: tuple[int, int]) -> int:
        p0, p1 = part
        g0, g1 = int(off[p0]), int(off[p1])
        sub, here = off[p0 : p1 + 1] - g0, slice(g0, g1)
        n_codes = encode_lattice(
            grid[here], sub, feat[p0:p1], exact[here], a, b, valid, sent[here], codes[here],
            decoded[here],
        )  # fmt: skip
        return int(n_codes)

    counts = thread_map(run, parts, n)
    starts = [int(off[p0]) for p0, _ in parts]
    arrays: dict[str, NDArray[Any]] = {
        "grid_exact": np.packbits(sent),
        "grid_value": grid[sent],
        "grid_code": (
            codes[: counts[0]]
            if len(parts) == 1
            else np.concatenate([codes[g : g + c] for g, c in zip(starts, counts, strict=True)])
        ),
        "grid_span": np.asarray(lattice, dtype=np.float64),
    }
    return arrays, decoded


@numba.njit(nogil=True, cache=True)
def encode_lattice(grid, grid_off, pair_feat, exact, a, b, valid, sent, codes, decoded):  # type: ignore[no-untyped-def]
    """Each pair's edges as codes on its feature's lattice where that is safe (the server).

    Parameters
    ----------
    grid : ndarray of float64  # IN
        Each pair's edges, pair after pair (``grid_off``); the pairs' features
        ``pair_feat``, the features' lattices ``a``, ``b`` (``valid`` where finite and
        increasing).
    exact : ndarray of bool, shape (grid.size,)  # IN
        Edges that must keep their value: coded only where they are lattice points.
    sent : ndarray of bool, shape (grid.size,)  # OUT
        The edges that travel as float64; the others' codes go to ``codes`` in order.
    codes : ndarray of uint32, shape (grid.size,)  # OUT
        The first (returned) many are the codes; the rest is scratch.
    decoded : ndarray of float64, shape (grid.size,)  # OUT
        The grid the client decodes (:func:`decode_lattice`'s operations: the same bits).

    Returns the number of codes. A pair's free edges snap to the nearest lattice point
    unless that changes the order or the ties of its edges or moves one by more than
    ``1 / MOVE_SHARE`` of its smallest positive gap: then they all travel as float64.
    One pass per pair computes the codes, the checks and the largest move (the move
    check is on it: ``|move| * MOVE_SHARE > gap`` for some edge iff for the largest), a
    second writes the codes of the edges that travel as codes, without a branch per edge.
    """
    steps = float(LATTICE_STEPS)
    n_codes = 0
    for p in range(grid_off.size - 1):
        lo, hi = grid_off[p], grid_off[p + 1]
        f = pair_feat[p]
        if not (f >= 0 and f < valid.size and valid[f]):
            for i in range(lo, hi):
                sent[i] = True
                decoded[i] = grid[i]
            continue
        fa, span = a[f], b[f] - a[f]
        smallest = np.inf  # the smallest positive gap between the pair's edges
        moved = 0.0  # the largest move of an edge (NaN moves compare false, as before)
        safe = True
        g_prev, h_prev = 0.0, 0.0
        for i in range(lo, hi):
            g = grid[i]
            x = (g - fa) / span * steps
            k = 0.0 if x != x else math.floor(min(max(x, 0.0), steps) + 0.5)
            key = np.uint32(min(k, steps))
            snapped = fa + span * (key / steps)
            out = exact[i] and snapped != g
            sent[i] = out
            codes[i] = key  # at or after the codes written so far: moved down in pass two
            here = g if out else snapped
            safe &= exact[i] or math.isfinite(g)  # no lattice point stands for it
            step = abs(here - g)
            moved = step if step > moved else moved
            if i > lo:
                d0, d1 = g - g_prev, here - h_prev
                smallest = d0 if 0 < d0 < smallest else smallest
                safe &= (d0 > 0) == (d1 > 0) and (d0 < 0) == (d1 < 0) and (d0 == 0) == (d1 == 0)
            g_prev, h_prev = g, here
        safe &= not moved * MOVE_SHARE > smallest
        for i in range(lo, hi):
            out = sent[i] or not (safe or exact[i])
            sent[i] = out
            decoded[i] = grid[i] if out else fa + span * (codes[i] / steps)
            codes[n_codes] = codes[i]  # n_codes <= i: a code not yet moved is never overwritten
            n_codes += not out
    return n_codes


def encode_lattice_numpy(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    pair_feat: NDArray[np.int64],
    exact: NDArray[np.bool_],
    a: NDArray[np.float64],
    b: NDArray[np.float64],
    valid: NDArray[np.bool_],
    sent: NDArray[np.bool_],
    codes: NDArray[np.uint32],
    decoded: NDArray[np.float64],
) -> int:
    """NumPy twin of :func:`encode_lattice` (same arguments, same outputs)."""
    owner = _owner(grid_off)
    f = pair_feat[owner]
    usable = (f >= 0) & (f < valid.size)
    usable[usable] = valid[f[usable]]
    on = np.flatnonzero(usable)
    fa, fb = a[f[on]], b[f[on]]
    with np.errstate(over="ignore", invalid="ignore"):  # the missing edge: float max
        x = (grid[on] - fa) / (fb - fa) * float(LATTICE_STEPS)
        k = np.where(np.isnan(x), 0.0, np.floor(np.clip(x, 0.0, LATTICE_STEPS) + 0.5))
    keys = np.minimum(k, LATTICE_STEPS).astype(np.uint32)
    snapped = _decode(fa, fb, keys)
    sent[:] = True
    sent[on] = exact[on] & (snapped != grid[on])
    here = grid.copy()
    here[on] = np.where(sent[on], grid[on], snapped)
    n_pairs = grid_off.size - 1
    inner = owner[1:] == owner[:-1]
    gap = np.diff(grid)
    smallest = np.full(n_pairs, np.inf)  # each pair's smallest positive gap
    wide = np.flatnonzero(np.diff(grid_off) >= 2)
    if wide.size:  # other gaps are inf: a segment running into them keeps its minimum
        gaps = np.append(np.where(inner & (gap > 0), gap, np.inf), np.inf)
        smallest[wide] = np.minimum.reduceat(gaps, grid_off[wide])
    d0, d1 = gap, np.diff(here)
    changed = ((d0 > 0) != (d1 > 0)) | ((d0 < 0) != (d1 < 0)) | ((d0 == 0) != (d1 == 0))
    with np.errstate(invalid="ignore"):
        far = np.abs(here - grid) * MOVE_SHARE > smallest[owner]
    bad = np.zeros(n_pairs, dtype=bool)
    bad[owner[1:][inner & changed]] = True
    bad[owner[far]] = True
    bad[owner[on[~np.isfinite(grid[on]) & ~exact[on]]]] = True  # no lattice point for it
    sent[bad[owner] & ~exact] = True
    coded = np.zeros(grid.size, dtype=bool)
    coded[on] = ~sent[on]
    all_keys = np.zeros(grid.size, dtype=np.uint32)
    all_keys[on] = keys
    n_codes = int(coded.sum())
    codes[:n_codes] = all_keys[coded]
    decoded[:] = np.where(coded, here, grid)
    return n_codes


def decode_grid(
    msg: Message,
    grid_off: NDArray[np.int64],
    pair_feat: NDArray[Any],
    client: str,
    previous: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """The grid of :func:`encode_grid`'s arrays, every one checked (from the server).

    ``previous``: the client's grid of the level before, no longer read; the grid is
    decoded into its memory (:func:`grid_space`).
    """
    return lattice_grid(grid_inputs(msg, grid_off, client), grid_off, pair_feat, client, previous)


def grid_inputs(msg: Message, grid_off: NDArray[np.int64], client: str) -> tuple[NDArray[Any], ...]:
    """:func:`decode_grid`'s arrays of ``msg``, checked: bits, values, codes and lattices.

    A client keeps them to decode the same grid again (Round B) without checking them again.
    """
    n = int(grid_off[-1])
    bits = expect_array(msg, "grid_exact", "u", ((n + 7) // 8,), "server")
    if bits.dtype != np.uint8:
        raise ValueError(
            f"Client {client!r}: grid_exact from the server must be uint8 bits, got {bits.dtype}."
        )
    n_sent = int(np.unpackbits(bits).sum())
    if n % 8 and np.unpackbits(bits[-1:])[n % 8 :].any():
        raise ValueError(f"Client {client!r}: grid_exact from the server has bits past the grid.")
    values = expect_array(msg, "grid_value", "f", (n_sent,), "server")
    codes = expect_array(msg, "grid_code", "u", (n - n_sent,), "server")
    if codes.size and int(codes.max()) > LATTICE_STEPS:
        raise ValueError(
            f"Client {client!r}: grid_code from the server holds a code above {LATTICE_STEPS}."
        )
    return (
        bits,
        values,
        codes,
        *_lattice(expect_array(msg, "grid_span", "f", (None, 2), "server")),
    )


def lattice_grid(
    inputs: tuple[NDArray[Any], ...],
    grid_off: NDArray[np.int64],
    pair_feat: NDArray[Any],
    client: str,
    previous: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """The grid of :func:`grid_inputs`' arrays, in ``previous``'s memory (:func:`grid_space`)."""
    bits, values, codes, a, b, valid = inputs
    out = grid_space(previous, int(grid_off[-1]))
    if not decode_lattice(
        bits, values.astype(np.float64, copy=False), codes.astype(np.uint32, copy=False),
        a, b, valid, np.asarray(pair_feat, dtype=np.int64), grid_off.astype(np.int64), out,
    ):  # fmt: skip
        raise ValueError(
            f"Client {client!r}: grid_code from the server codes a feature whose grid_span is "
            "not a finite, increasing lattice."
        )
    return out


#: A grid's memory, when it is made anew, holds this many times its edges (:func:`grid_space`).
GRID_ROOM = 4


def grid_space(previous: NDArray[np.float64] | None, n: int) -> NDArray[np.float64]:
    """Memory for ``n`` float64 edges, in ``previous``'s array when it has room.

    The first ``n`` of the array that ``previous`` views, when it holds that many;
    else the first ``n`` of a new array with room for ``GRID_ROOM * n``.
    A client's grids grow level by level (about 1.5 to 2 times); each new array is
    allocated and its pages faulted in as it is first written, which cost more CPU than
    the decoding (numpy asks for huge pages from 4 MB). With room to grow, a fit's grids
    fault in a few arrays' pages, not every level's (untouched room costs no memory).
    """
    base = previous
    while base is not None and isinstance(base.base, np.ndarray):
        base = base.base
    if (
        base is not None
        and base.dtype == np.float64
        and base.ndim == 1
        and base.flags.c_contiguous
        and base.flags.writeable
        and base.size >= n
    ):
        return base[:n]
    return np.empty(GRID_ROOM * n)[:n]


@numba.njit(nogil=True, cache=True)
def decode_lattice(bits, values, codes, a, b, valid, pair_feat, grid_off, out):  # type: ignore[no-untyped-def]
    """Every pair's grid from its wire arrays (:func:`decode_grid`).

    Parameters
    ----------
    bits : ndarray of uint8  # IN
        ``grid_exact``: bit ``i`` (most significant first) set where edge ``i`` is sent as
        float64 (``values``, in order), else it is the next of ``codes``.
    a, b : ndarray of float64, shape (n_features,)  # IN
        Each feature's lattice; ``valid`` where it is finite and increasing.
    pair_feat : ndarray of int64, shape (n_pairs,)  # IN
    grid_off : ndarray of int64, shape (n_pairs + 1,)  # IN
    out : ndarray of float64, shape (grid_off[-1],)  # OUT
        ``a + (b - a) * (k / LATTICE_STEPS)`` for a code ``k`` of feature ``f``'s lattice.

    Returns False if a code belongs to a feature without a valid lattice.
    """
    vi = 0
    ci = 0
    steps = float(LATTICE_STEPS)
    for p in range(grid_off.size - 1):
        f = pair_feat[p]
        for i in range(grid_off[p], grid_off[p + 1]):
            if (bits[i >> 3] >> (7 - (i & 7))) & 1:
                out[i] = values[vi]
                vi += 1
                continue
            if f < 0 or f >= valid.size or not valid[f]:
                return False
            out[i] = a[f] + (b[f] - a[f]) * (codes[ci] / steps)
            ci += 1
    return True


def decode_lattice_numpy(
    bits: NDArray[np.uint8],
    values: NDArray[np.float64],
    codes: NDArray[np.uint32],
    a: NDArray[np.float64],
    b: NDArray[np.float64],
    valid: NDArray[np.bool_],
    pair_feat: NDArray[np.int64],
    grid_off: NDArray[np.int64],
    out: NDArray[np.float64],
) -> bool:
    """NumPy twin of :func:`decode_lattice` (same arguments, same outputs)."""
    n = out.size
    sent = np.unpackbits(bits, count=n).astype(bool)
    f = pair_feat[_owner(grid_off)][~sent]
    if f.size and (f.min() < 0 or f.max() >= valid.size or not valid[f].all()):
        return False
    out[sent] = values
    out[~sent] = _decode(a[f], b[f], codes)
    return True
