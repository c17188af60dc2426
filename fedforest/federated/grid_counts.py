"""Round A's counts back under ``"secure"``: two edges to a masked word in small nodes.

Round A's answer, the counts at every edge, travels as one masked ``uint64`` word per
edge (``rows + 2^32 weight``); in a node whose pooled rows and weight are both below 2^16
(known from its parent's split) two edges share a word (:func:`half_pairs`,
:func:`half_words`, :func:`unpack_hist`): the request's ``hist_half`` says where, one bit
per pair. The client checks ``hist_half`` and names the array and the server in an
error. ``grid_wire`` re-exports these names.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from .grid_lattice import PARALLEL_EDGES, _owner
from .protocol import Message, expect_array
from .threads import thread_map, work_ranges

__all__ = [
    "HALF_LIMIT",
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
]

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
