"""Round A's grids and counts, Round B's candidates, as they travel under ``"secure"``.

Every client gets every node's grid (the same edges to each), which were most of the
bytes a secure fit sends at scale (docs/privacy.md, "What it costs"). Two encodings:

- **Grids on a lattice.** Each numeric feature has a lattice between its root
  distribution's outer bounds ``a`` and ``b`` (``grid_span``, pooled information the
  server already holds), and a grid edge travels as its ``uint32`` code ``k`` on it: the
  edge is ``a + (b - a) * (k / LATTICE_STEPS)``, computed in float64 the same way on both
  sides (IEEE operations, one at a time, no fused multiply-add), so the client rebuilds
  bit for bit the edge the server counts on: the server snaps its quantile edges with
  :func:`encode_grid` and uses the decoded ones. Candidates, so the ancestors' thresholds
  that join a node's grid, are then lattice points too and travel as codes, losslessly;
  an edge that must keep its value and is not one (a guide placed between grid edges,
  the missing-values edge, a categorical code) travels as float64 (``grid_value``,
  marked in the bit mask ``grid_exact``). A pair whose snapped edges would not keep the
  order and the ties of its original ones, or would move one by more than
  ``1 / MOVE_SHARE`` of the pair's smallest gap (a heavy tail: outer bounds 1e6 apart
  around edges 1e-5 apart), sends its quantile edges as float64: snapping never merges
  two edges nor moves one noticeably within its node.
- **Candidates as indices.** Round B's candidates are edges of the same level's node
  grids, which the client keeps from Round A: each travels as its index in its pair's
  grid (``cand_at``, ``uint8`` / ``uint16`` / ``uint32`` by the longest grid), lossless.

- **Counts two edges to a word.** Round A's answer, the counts at every edge, travels
  as one masked ``uint64`` word per edge (``rows + 2^32 weight``); in a node whose pooled
  rows and weight are both below 2^16 (known from its parent's split) two edges share a
  word (:func:`half_pairs`, :func:`half_words`, :func:`unpack_hist`): the request's
  ``hist_half`` says where, one bit per pair.

Every array from the server is checked on the client (kind, dtype, shape, bounds) before
use; an error names the array and the server.
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
    "HALF_LIMIT",
    "LATTICE_STEPS",
    "MOVE_SHARE",
    "PARALLEL_EDGES",
    "candidate_arrays",
    "decode_at",
    "decode_candidates",
    "decode_grid",
    "grid_inputs",
    "lattice_grid",
    "decode_lattice",
    "decode_lattice_numpy",
    "grid_space",
    "encode_grid",
    "encode_lattice",
    "encode_lattice_numpy",
    "half_arrays",
    "half_of",
    "half_pack",
    "half_pack_numpy",
    "half_pairs",
    "half_unpack",
    "half_unpack_numpy",
    "half_words",
    "hist_spec",
    "n_hist_words",
    "unpack_hist",
    "sent_candidates",
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


def candidate_arrays(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    at: NDArray[np.int64],
    cand: NDArray[np.float64],
    n_cand: NDArray[np.int64],
) -> dict[str, NDArray[Any]]:
    """Round B's candidates as they travel: ``cand_at``, each one's index in its grid.

    ``grid`` holds the grids of the pairs with candidates (``grid_off``), ``n_cand`` their
    candidates' counts and ``at`` each candidate's position in ``grid``. The indices take
    the smallest unsigned dtype that holds the largest. A candidate not on its grid (none
    is: they are grid edges) sends them all as float64 (``cand``).
    """
    seg = np.repeat(np.arange(n_cand.size), n_cand)
    start, end = grid_off[seg], grid_off[seg + 1]
    inside = (at >= start) & (at < end)
    if not inside.all() or not np.array_equal(grid[np.where(inside, at, 0)], cand):
        return {"cand": cand}
    local = at - start
    largest = int(local.max(initial=0))
    dtype = np.uint8 if largest < 2**8 else np.uint16 if largest < 2**16 else np.uint32
    return {"cand_at": local.astype(dtype)}


def decode_candidates(
    msg: Message,
    cand_off: NDArray[np.int64],
    grid: NDArray[np.float64] | tuple[NDArray[Any], ...],
    grid_off: NDArray[np.int64],
    client: str,
    pair_feat: NDArray[Any] | None = None,
) -> NDArray[np.float64]:
    """Round B's candidates: ``cand`` (float64) as sent, or ``cand_at`` in the level's grids.

    ``grid``: the grids, or Round A's checked arrays (:func:`grid_inputs`) and
    ``pair_feat``, of which only the candidates' edges are decoded (:func:`decode_at`).
    """
    n = int(cand_off[-1])
    if "cand_at" not in msg.arrays:
        return expect_array(msg, "cand", "f", (n,), "server")
    at = expect_array(msg, "cand_at", "u", (n,), "server").astype(np.int64)
    if grid_off.size != cand_off.size:
        raise ValueError(
            f"Client {client!r}: cand_at from the server without the level's grids (Round A)."
        )
    past = f"Client {client!r}: cand_at from the server points past its node's grid."
    if isinstance(grid, tuple):
        bits, values, codes, a, b, valid = grid
        out = np.empty(n)
        status = decode_at(
            bits, values.astype(np.float64, copy=False), codes.astype(np.uint32, copy=False),
            a, b, valid, np.asarray(pair_feat, dtype=np.int64), grid_off, cand_off, at, out,
        )  # fmt: skip
        if status:  # 2 (a code of no lattice) cannot follow Round A's decoding of every edge
            raise ValueError(past if status == 1 else f"Client {client!r}: bad grid_code.")
        return out
    owner = _owner(cand_off)
    if n and np.any(at >= np.diff(grid_off)[owner]):
        raise ValueError(past)
    return grid[grid_off[owner] + at]


#: Each byte's set bits (``grid_exact``'s exact edges among eight).
_POP = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


@numba.njit(nogil=True, cache=True)
def decode_at(bits, values, codes, a, b, valid, pair_feat, grid_off, cand_off, at, out):  # type: ignore[no-untyped-def]
    """:func:`decode_lattice`'s edge ``at[j]`` of pair ``p``'s grid into ``out[j]``.

    For ``j`` in ``cand_off[p]:cand_off[p + 1]``; 1 if past the grid, 2 where
    decode_lattice returns False, else 0. An edge's index in ``values``: the set bits
    before it (counted per byte once a call). Twin: :func:`decode_candidates` of a grid.
    """
    before = np.empty(bits.size + 1, np.int64)
    before[0] = 0
    for q in range(bits.size):
        before[q + 1] = before[q] + _POP[bits[q]]
    steps = float(LATTICE_STEPS)
    for p in range(cand_off.size - 1):
        f = pair_feat[p]
        for j in range(cand_off[p], cand_off[p + 1]):
            if at[j] < 0 or at[j] >= grid_off[p + 1] - grid_off[p]:
                return 1
            i = grid_off[p] + at[j]
            byte = i >> 3
            r = i & 7
            vi = before[byte] + (_POP[bits[byte] >> (8 - r)] if r else 0)
            if (bits[byte] >> (7 - r)) & 1:
                out[j] = values[vi]
            elif f < 0 or f >= valid.size or not valid[f]:
                return 2
            else:
                out[j] = a[f] + (b[f] - a[f]) * (codes[i - vi] / steps)
    return 0


def sent_candidates(round_a: Message, round_b: Message) -> NDArray[np.float64]:
    """The candidates a Round B request carries, read as a client reads them.

    ``round_a`` is the same level's Round A request (its grids); for a recording of the
    messages (the attack tests read what the server released).
    """
    grid_off = np.asarray(round_a.arrays["grid_off"], dtype=np.int64)
    grid = decode_grid(round_a, grid_off, round_a.arrays["pair_feat"], "recorded")
    cand_off = np.asarray(round_b.arrays["cand_off"], dtype=np.int64)
    return decode_candidates(round_b, cand_off, grid, grid_off, "recorded")


# --------------------------------------------------------------------------- the counts back
#: A node whose pooled rows and weight are both below this (known from its parent's split)
#: gets Round A's counts two edges to a word: each edge's ``rows + 2^16 weight`` in 32 bits.
HALF_LIMIT = 2**16
_LOW32 = np.uint64(2**32 - 1)


def half_pairs(
    pair_off: NDArray[np.int64], node_stats: NDArray[np.float64], packed: bool = True
) -> NDArray[np.bool_]:
    """Per pair: whether its counts travel two edges to a word.

    So when its node's pooled rows and weight (``node_stats[:, :2]``) are both below 2^16
    and the counts are packed (``packed``: whole weights, no noise). The masked sum of
    ``c_even + 2^32 c_odd`` over the clients then keeps the two edges'
    ``c = rows + 2^16 weight`` apart (each sum below 2^32), as ``rows + 2^32 weight`` keeps
    the two counts of one edge apart (``secagg.pack_counts``). A root's totals are not
    known before its Round A (``inf``): its edges travel one to a word. Nor are the draws
    under ``class_weight`` (the server reweights the pooled sums: a node's known weight
    is then not its draws, which may not fit 16 bits): the caller passes ``packed``
    False then.
    """
    small = (node_stats[:, 0] < HALF_LIMIT) & (node_stats[:, 1] < HALF_LIMIT) & packed
    return np.repeat(small, np.diff(pair_off))


def half_arrays(half: NDArray[np.bool_]) -> dict[str, NDArray[np.uint8]]:
    """Round A's ``hist_half`` (bits, one per pair) when some pair has two edges to a word."""
    return {"hist_half": np.packbits(half)} if half.any() else {}


def hist_spec(
    grid_off: NDArray[np.int64], half: NDArray[np.bool_], packed: bool, bits: NDArray[np.int64]
) -> tuple[tuple[int, int], NDArray[np.int64] | None]:
    """Round A's ``hist`` as ``secure_exchange`` sums it: its shape and fractional bits."""
    if packed:
        return (n_hist_words(grid_off, half), 1), None  # packed words, decoded by unpack_hist
    return (int(grid_off[-1]), 2), bits[:2]


def half_words(
    words: NDArray[np.uint64],
    grid_off: NDArray[np.int64],
    half: NDArray[np.bool_],
    client: str,
    in_place: bool = False,
) -> NDArray[np.uint64]:
    """A client's Round A words (``rows + 2^32 weight`` per edge), two edges to a word.

    So where ``half``: its own counts must then be below 2^16 (refused otherwise).
    ``in_place``: ``words`` (made for this answer alone, C-contiguous ``uint64``) is
    packed where it is, the result a view of its first words (no answer-long array
    allocated and faulted in per client and level); else into a new array.
    """
    w = np.ascontiguousarray(words, dtype=np.uint64).reshape(-1)
    n_words = n_hist_words(grid_off, half)
    mine = in_place and w.flags.writeable  # a copy made here is this call's own too
    out = w[:n_words] if mine else np.empty(n_words, dtype=np.uint64)
    if not half_pack(w, grid_off.astype(np.int64), half.astype(np.bool_), out):
        raise ValueError(
            f"Client {client!r}: hist_half from the server puts two edges in a word at a node "
            "where this client's own counts do not fit 16 bits; the server's totals are wrong."
        )
    return out.reshape(-1, 1)


def unpack_hist(
    total: NDArray[np.uint64],
    grid_off: NDArray[np.int64],
    half: NDArray[np.bool_],
    n_threads: int = 1,
    out: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """Server: the pooled rows and weight at every edge, shape (n_edges, 2).

    From the sum over the clients of :func:`half_words`' words; from
    :data:`PARALLEL_EDGES` edges in ``n_threads`` threads (ranges of pairs). Written
    into ``out`` (C-contiguous, that shape) if given.
    """
    out = np.empty((int(grid_off[-1]), 2)) if out is None else out
    t = np.ascontiguousarray(total, dtype=np.uint64).reshape(-1)
    off, half = grid_off.astype(np.int64), half.astype(np.bool_)
    n = n_threads if out.shape[0] >= PARALLEL_EDGES else 1
    parts = work_ranges(np.diff(off), n)
    w_off = np.zeros(half.size + 1, dtype=np.int64)  # each pair's first word
    np.cumsum(np.where(half, (np.diff(off) + 1) // 2, np.diff(off)), out=w_off[1:])

    def run(part: tuple[int, int]) -> None:
        p0, p1 = part
        g0, g1 = off[p0], off[p1]
        half_unpack(t[w_off[p0] : w_off[p1]], off[p0 : p1 + 1] - g0, half[p0:p1], out[g0:g1])

    thread_map(run, parts, n)
    return out


_LOW16 = np.uint64(HALF_LIMIT - 1)
_SHIFT16 = np.uint64(16)
_SHIFT32 = np.uint64(32)


#: The bits of a ``rows + 2^32 weight`` word that must be 0 for two edges to share a word.
_HIGH16 = np.uint64(0xFFFF0000FFFF0000)
_MID16 = np.uint64(0xFFFF0000)
_SHIFT48 = np.uint64(48)


@numba.njit(nogil=True, cache=True)
def half_pack(words, grid_off, half, out):  # type: ignore[no-untyped-def]
    """Each pair's words as they travel: two edges to a word where ``half``.

    ``words`` holds ``rows + 2^32 weight`` per edge; a ``half`` pair's edges ``2j`` and
    ``2j + 1`` become ``c_2j + 2^32 c_2j+1``, ``c = rows + 2^16 weight``. Returns False if
    such an edge's rows or weight do not fit 16 bits (``out`` then holds no answer).
    One branch per pair; the edges in straight loops. ``out`` may be ``words[:out.size]``
    (packing in place): each word is written after the edges it is made of were read,
    and at or before the first of them.
    """
    k = 0
    bad = np.uint64(0)  # the bits of the shared words' counts above 16 bits, OR-ed
    for p in range(half.size):
        lo, hi = grid_off[p], grid_off[p + 1]
        if not half[p]:
            for i in range(lo, hi):
                out[k + i - lo] = words[i]
            k += hi - lo
            continue
        n2 = (hi - lo) >> 1
        for j in range(n2):
            w0, w1 = words[lo + 2 * j], words[lo + 2 * j + 1]
            bad |= (w0 | w1) & _HIGH16
            c0 = (w0 & _LOW16) | ((w0 >> _SHIFT16) & _MID16)
            c1 = (w1 & _LOW16) | ((w1 >> _SHIFT16) & _MID16)
            out[k + j] = c0 | (c1 << _SHIFT32)
        k += n2
        if (hi - lo) & 1:  # the odd edge: a word of its own, the high half 0
            w0 = words[hi - 1]
            bad |= w0 & _HIGH16
            out[k] = (w0 & _LOW16) | ((w0 >> _SHIFT16) & _MID16)
            k += 1
    return bad == 0


@numba.njit(nogil=True, cache=True)
def half_unpack(total, grid_off, half, out):  # type: ignore[no-untyped-def]
    """Inverse of :func:`half_pack` on the summed words: ``out[i] = rows, weight``.

    One branch per pair; the edges in straight loops.
    """
    k = 0
    for p in range(half.size):
        lo, hi = grid_off[p], grid_off[p + 1]
        if not half[p]:
            for i in range(lo, hi):
                t = total[k + i - lo]
                out[i, 0] = t & _LOW32
                out[i, 1] = t >> _SHIFT32
            k += hi - lo
            continue
        n2 = (hi - lo) >> 1
        for j in range(n2):
            t = total[k + j]
            i = lo + 2 * j
            out[i, 0] = t & _LOW16
            out[i, 1] = (t >> _SHIFT16) & _LOW16
            out[i + 1, 0] = (t >> _SHIFT32) & _LOW16
            out[i + 1, 1] = t >> _SHIFT48
        k += n2
        if (hi - lo) & 1:  # the odd edge's word: the high half is 0 in every client's word
            t = total[k] & _LOW32
            out[hi - 1, 0] = t & _LOW16
            out[hi - 1, 1] = t >> _SHIFT16
            k += 1


def _half_layout(
    grid_off: NDArray[np.int64], half: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_], int]:
    """Per edge: its word, whether it shares it, whether it is the word's high half."""
    owner = _owner(grid_off)
    n = np.diff(grid_off)
    w_off = np.zeros(n.size + 1, dtype=np.int64)
    np.cumsum(np.where(half, (n + 1) // 2, n), out=w_off[1:])
    pos = np.arange(int(grid_off[-1])) - grid_off[owner]
    shared = half[owner]
    word = w_off[owner] + np.where(shared, pos // 2, pos)
    return word, shared, shared & (pos % 2 == 1), int(w_off[-1])


def half_pack_numpy(
    words: NDArray[np.uint64],
    grid_off: NDArray[np.int64],
    half: NDArray[np.bool_],
    out: NDArray[np.uint64],
) -> bool:
    """NumPy twin of :func:`half_pack` (same arguments, same outputs)."""
    word, shared, high, _ = _half_layout(grid_off, half)
    rows, weight = words & _LOW32, words >> _SHIFT32
    if np.any(shared & ((rows > _LOW16) | (weight > _LOW16))):
        return False
    c = rows | (weight << _SHIFT16)
    value = np.where(shared, np.where(high, c << _SHIFT32, c), words)
    out[:] = 0
    out[word[~high]] = value[~high]
    out[word[high]] |= value[high]
    return True


def half_unpack_numpy(
    total: NDArray[np.uint64],
    grid_off: NDArray[np.int64],
    half: NDArray[np.bool_],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`half_unpack` (same arguments, same outputs)."""
    word, shared, high, _ = _half_layout(grid_off, half)
    t = total[word]
    c = np.where(high, t >> _SHIFT32, t & _LOW32)
    out[:, 0] = np.where(shared, c & _LOW16, t & _LOW32)
    out[:, 1] = np.where(shared, c >> _SHIFT16, t >> _SHIFT32)


def n_hist_words(grid_off: NDArray[np.int64], half: NDArray[np.bool_]) -> int:
    """The words of Round A's counts: one per edge, one per two where ``half``."""
    n = np.diff(grid_off)
    return int(np.where(half, (n + 1) // 2, n).sum())


def half_of(msg: Message, n_pairs: int, client: str) -> NDArray[np.bool_] | None:
    """The request's ``hist_half`` (bits, one per pair), checked; None if absent."""
    if "hist_half" not in msg.arrays:
        return None
    bits = expect_array(msg, "hist_half", "u", ((n_pairs + 7) // 8,), "server")
    every = np.unpackbits(bits.astype(np.uint8)) if bits.dtype == np.uint8 else None
    if every is None or every[n_pairs:].any() or msg.header.get("pack_counts") is not True:
        raise ValueError(
            f"Client {client!r}: hist_half from the server must be uint8 bits, one per pair, "
            "with packed counts."
        )
    return every[:n_pairs].astype(bool)
