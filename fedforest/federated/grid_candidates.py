"""Round B's candidates as they travel under ``"secure"``: indices into Round A's grids.

Round B's candidates are edges of the same level's node grids, which the client keeps
from Round A (``grid_lattice``): each travels as its index in its pair's grid
(``cand_at``, ``uint8`` / ``uint16`` / ``uint32`` by the longest grid), lossless. The
client checks the indices and names the array and the server in an error. ``grid_wire``
re-exports these names.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .grid_lattice import LATTICE_STEPS, _owner, decode_grid
from .protocol import Message, expect_array

__all__ = ["candidate_arrays", "decode_at", "decode_candidates", "sent_candidates"]


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
