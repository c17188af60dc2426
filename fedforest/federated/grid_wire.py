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

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .protocol import Message, expect_array

__all__ = [
    "HALF_LIMIT",
    "LATTICE_STEPS",
    "MOVE_SHARE",
    "candidate_arrays",
    "decode_candidates",
    "decode_grid",
    "encode_grid",
    "half_arrays",
    "half_of",
    "half_pairs",
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
    known before its Round A (``inf``): its edges travel one to a word.
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


def half_words(
    words: NDArray[np.uint64], grid_off: NDArray[np.int64], half: NDArray[np.bool_], client: str
) -> NDArray[np.uint64]:
    """A client's Round A words (``rows + 2^32 weight`` per edge), two edges to a word.

    So where ``half``: its own counts must then be below 2^16 (refused otherwise).
    """
    w = np.asarray(words, dtype=np.uint64).reshape(-1)
    word, shared, high, n_words = _half_layout(grid_off, half)
    rows, weight = w & _LOW32, w >> np.uint64(32)
    if np.any(shared & ((rows >= HALF_LIMIT) | (weight >= HALF_LIMIT))):
        raise ValueError(
            f"Client {client!r}: hist_half from the server puts two edges in a word at a node "
            "where this client's own counts do not fit 16 bits; the server's totals are wrong."
        )
    c = rows | (weight << np.uint64(16))
    value = np.where(shared, np.where(high, c << np.uint64(32), c), w)
    out = np.zeros(n_words, dtype=np.uint64)
    out[word[~high]] = value[~high]
    out[word[high]] |= value[high]
    return out.reshape(-1, 1)


def unpack_hist(
    total: NDArray[np.uint64], grid_off: NDArray[np.int64], half: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """Server: the pooled rows and weight at every edge, shape (n_edges, 2).

    From the sum over the clients of :func:`half_words`' words.
    """
    word, shared, high, _ = _half_layout(grid_off, half)
    t = np.asarray(total, dtype=np.uint64).reshape(-1)[word]
    c = np.where(high, t >> np.uint64(32), t & _LOW32)
    out = np.empty((t.size, 2))
    out[:, 0] = np.where(shared, c & np.uint64(HALF_LIMIT - 1), t & _LOW32)
    out[:, 1] = np.where(shared, c >> np.uint64(16), t >> np.uint64(32))
    return out


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
