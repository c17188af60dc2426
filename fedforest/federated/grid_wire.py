"""Round A's node grids and Round B's candidates as they travel under ``privacy="secure"``.

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

Every array from the server is checked on the client (kind, dtype, shape, bounds) before
use; an error names the array and the server.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .protocol import Message, expect_array

__all__ = [
    "LATTICE_STEPS",
    "MOVE_SHARE",
    "candidate_arrays",
    "decode_candidates",
    "decode_grid",
    "encode_grid",
    "sent_candidates",
]

#: Lattice codes run from 0 (``a``) to ``LATTICE_STEPS`` (``b``), one ``uint32`` each.
LATTICE_STEPS = 2**32 - 1
#: Snapping may move an edge by at most this fraction of its pair's smallest gap.
MOVE_SHARE = 16


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
    owner = _owner(grid_off)
    f = np.asarray(pair_feat, dtype=np.int64)[owner]
    on = np.flatnonzero(valid[f])
    fa, fb = a[f[on]], b[f[on]]
    with np.errstate(over="ignore", invalid="ignore"):  # the missing edge: float max
        k = np.rint((grid[on] - fa) / (fb - fa) * LATTICE_STEPS)
    codes = np.clip(np.nan_to_num(k), 0, LATTICE_STEPS).astype(np.uint32)
    snapped = _decode(fa, fb, codes)
    # Exact edges are coded only where they are lattice points (lossless) ...
    coded = np.zeros(grid.size, dtype=bool)
    coded[on] = ~exact[on] | (snapped == grid[on])
    decoded = grid.copy()
    decoded[on] = np.where(coded[on], snapped, grid[on])
    # ... and a pair's other edges only where snapping keeps their order and ties and
    # moves none by more than 1/MOVE_SHARE of the pair's smallest gap (else all exact).
    inner = owner[1:] == owner[:-1]
    gap = np.diff(grid)
    before, after = np.sign(gap), np.sign(np.diff(decoded))
    moved = inner & (before != after) & ~(np.isnan(before) & np.isnan(after))
    n_pairs = grid_off.size - 1
    smallest = np.full(n_pairs, np.inf)
    pos = inner & (gap > 0)
    np.minimum.at(smallest, owner[1:][pos], gap[pos])
    with np.errstate(invalid="ignore"):
        far = np.abs(decoded - grid) * MOVE_SHARE > smallest[owner]
    bad = np.zeros(n_pairs, dtype=bool)
    bad[owner[1:][moved]] = True
    bad[owner[far]] = True
    undo = bad[owner] & ~exact
    coded &= ~undo
    decoded[undo] = grid[undo]
    sent = ~coded
    arrays = {
        "grid_exact": np.packbits(sent),
        "grid_value": grid[sent],
        "grid_code": codes[coded[on]],
        "grid_span": np.asarray(lattice, dtype=np.float64),
    }
    return arrays, decoded


def decode_grid(
    msg: Message, grid_off: NDArray[np.int64], pair_feat: NDArray[Any], client: str
) -> NDArray[np.float64]:
    """The grid of :func:`encode_grid`'s arrays, every one checked (from the server)."""
    n = int(grid_off[-1])
    bits = expect_array(msg, "grid_exact", "u", ((n + 7) // 8,), "server")
    if bits.dtype != np.uint8:
        raise ValueError(
            f"Client {client!r}: grid_exact from the server must be uint8 bits, got {bits.dtype}."
        )
    every = np.unpackbits(bits)
    if every[n:].any():
        raise ValueError(f"Client {client!r}: grid_exact from the server has bits past the grid.")
    sent = every[:n].astype(bool)
    values = expect_array(msg, "grid_value", "f", (int(sent.sum()),), "server")
    codes = expect_array(msg, "grid_code", "u", (n - values.size,), "server")
    if codes.size and int(codes.max()) > LATTICE_STEPS:
        raise ValueError(
            f"Client {client!r}: grid_code from the server holds a code above {LATTICE_STEPS}."
        )
    ends = expect_array(msg, "grid_span", "f", (None, 2), "server")
    a, b, valid = _lattice(ends)
    f = np.asarray(pair_feat, dtype=np.int64)[_owner(grid_off)[~sent]]
    if f.size and (f.min() < 0 or f.max() >= valid.size or not valid[f].all()):
        raise ValueError(
            f"Client {client!r}: grid_code from the server codes a feature whose grid_span is "
            "not a finite, increasing lattice."
        )
    out = np.empty(n)
    out[sent] = values
    out[~sent] = _decode(a[f], b[f], codes)
    return out


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
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    client: str,
) -> NDArray[np.float64]:
    """Round B's candidates: ``cand`` (float64) as sent, or ``cand_at`` in the level's grids."""
    n = int(cand_off[-1])
    if "cand_at" not in msg.arrays:
        return expect_array(msg, "cand", "f", (n,), "server")
    at = expect_array(msg, "cand_at", "u", (n,), "server").astype(np.int64)
    if grid_off.size != cand_off.size:
        raise ValueError(
            f"Client {client!r}: cand_at from the server without the level's grids (Round A)."
        )
    owner = _owner(cand_off)
    if n and np.any(at >= np.diff(grid_off)[owner]):
        raise ValueError(f"Client {client!r}: cand_at from the server points past its node's grid.")
    return grid[grid_off[owner] + at]


def sent_candidates(round_a: Message, round_b: Message) -> NDArray[np.float64]:
    """The candidates a Round B request carries, read as a client reads them.

    ``round_a`` is the same level's Round A request (its grids); for a recording of the
    messages (the attack tests read what the server released).
    """
    grid_off = np.asarray(round_a.arrays["grid_off"], dtype=np.int64)
    grid = decode_grid(round_a, grid_off, round_a.arrays["pair_feat"], "recorded")
    cand_off = np.asarray(round_b.arrays["cand_off"], dtype=np.int64)
    return decode_candidates(round_b, cand_off, grid, grid_off, "recorded")
