"""Server side: the features each frontier node may split on, drawn per tree.

Every node draws ``k`` of ``d`` features with its tree's generator,
``rng.choice(d, size=k, replace=False)``, node after node. That call costs ~13 µs, and a
level of a 50-tree forest has thousands of nodes, so the nodes of one tree are drawn in
one go instead: the same draws, off the same stream of the same generator. NumPy draws
a ``k``-subset by Floyd's algorithm and then shuffles it (bounded integers by Lemire's
method on the bit generator's buffered 32-bit halves); :func:`floyd_draws` replays that
on the tree's raw 64-bit words, and leaves the generator where ``choice`` would have.
Whether this NumPy draws that way is checked once per ``(d, k)`` against ``choice``
itself (:func:`_replay_matches`); where it does not, the nodes call ``choice``.
"""

from __future__ import annotations

from functools import cache

import numba
import numpy as np
from numpy.typing import NDArray

from .. import kernel_views
from ..kernel_cache import cache_depends_on
from ..kernel_views import borrowed

__all__ = ["floyd_draws", "floyd_draws_numpy", "sample_features"]

_M32 = 0xFFFFFFFF


def sample_features(
    rngs: list[np.random.Generator],
    slot_tree: NDArray[np.int64],
    d: int,
    k: int,
    constant: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """Per frontier node, ``k`` of ``d`` features drawn on the server (seeded per tree).

    scikit-learn's rule for constant features: those known to be constant in the node
    (``constant``, one row per slot) count towards the ``k`` drawn but are not sent; when
    every drawn feature is constant, drawing goes on (the tree's generator, in a random
    order of the rest) until one is not.

    Returns
    -------
    pair_off : ndarray of int64, shape (n_slots + 1,)
    pair_feat : ndarray of int32, shape (n_pairs,)
        Slot ``i`` splits on ``pair_feat[pair_off[i]:pair_off[i + 1]]``, in drawing order.
    """
    n = slot_tree.size
    if not 0 < k < d or not _replay_matches(d, k):  # every feature, or none: per node
        return _node_by_node(rngs, slot_tree, d, k, constant)
    drawn = np.empty((n, k), dtype=np.int64)
    keep = np.ones((n, k), dtype=bool)
    done = np.zeros(n, dtype=bool)  # rows whose ``keep`` is final (drawn one by one)
    # Runs of consecutive slots of one tree draw in one go, unless a node of the run could
    # need the fallback (k constant features): that one draws between nodes.
    cuts = (np.flatnonzero(np.diff(slot_tree)) + 1).tolist()
    risky = None if constant is None else constant.sum(axis=1) >= k
    for a, b in zip([0, *cuts], [*cuts, n], strict=True):
        rng = rngs[int(slot_tree[a])]
        if isinstance(rng.bit_generator, np.random.PCG64) and (
            risky is None or not risky[a:b].any()
        ):
            drawn[a:b] = _draw_nodes(rng, d, k, b - a)
            continue
        for i in range(a, b):
            drawn[i] = rng.choice(d, size=k, replace=False)
            if constant is None:
                continue
            keep[i] = ~constant[i][drawn[i]]
            done[i] = True
            if not keep[i].any() and not constant[i].all():
                rest = np.setdiff1d(np.arange(d), drawn[i])
                order = rest[rng.permutation(rest.size)]
                drawn[i, 0] = order[~constant[i][order]][0]
                keep[i, 0] = True
    if constant is not None:
        fresh = ~done
        keep[fresh] = ~constant[np.flatnonzero(fresh)[:, None], drawn[fresh]]
    pair_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=pair_off[1:])
    return pair_off, drawn[keep].astype(np.int32)


def _node_by_node(
    rngs: list[np.random.Generator],
    slot_tree: NDArray[np.int64],
    d: int,
    k: int,
    constant: NDArray[np.bool_] | None,
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """:func:`sample_features` one node at a time (``k = 0``, ``k >= d``, another NumPy)."""
    per_slot: list[NDArray[np.int64]] = []
    for i, t in enumerate(slot_tree):
        drawn = np.arange(d) if k >= d else rngs[t].choice(d, size=k, replace=False)
        if constant is None or not constant[i].any():
            per_slot.append(drawn)
            continue
        keep = drawn[~constant[i][drawn]]
        if not keep.size and k < d and not constant[i].all():
            rest = np.setdiff1d(np.arange(d), drawn)
            order = rest[rngs[t].permutation(rest.size)]
            keep = order[~constant[i][order]][:1]
        per_slot.append(keep)
    pair_off = np.zeros(slot_tree.size + 1, dtype=np.int64)
    np.cumsum([f.size for f in per_slot], out=pair_off[1:])
    feats = np.concatenate(per_slot) if per_slot else np.zeros(0, np.int64)
    return pair_off, feats.astype(np.int32)


def _draw_nodes(rng: np.random.Generator, d: int, k: int, m: int) -> NDArray[np.int64]:
    """``m`` consecutive ``rng.choice(d, size=k, replace=False)``, in one call."""
    bitgen = rng.bit_generator
    state = bitgen.state
    has, buffered = int(state["has_uint32"]), int(state["uinteger"])
    out = np.empty((m, k), dtype=np.int64)
    # 2k - 1 bounded draws a node (Floyd, then the shuffle), 32 bits each when none is
    # rejected; the raw words are taken as needed, so the stream is never overdrawn.
    words = np.empty(0, dtype=np.uint64)
    need = max(0, (m * (2 * k - 1) - has + 1) // 2)
    while True:
        words = np.concatenate([words, bitgen.random_raw(need)])
        used, has_after, buffered_after = floyd_draws(words, has, buffered, d, k, out)
        if used >= 0:
            break
        need = 1  # a rejection (probability ~ d / 2^32 a draw): one more word
    bitgen.state = {**bitgen.state, "has_uint32": int(has_after), "uinteger": int(buffered_after)}
    return out


@numba.njit(nogil=True, cache=True)
def floyd_draws(words, has, buffered, d, k, out):  # type: ignore[no-untyped-def]
    """NumPy's ``choice(d, size=k, replace=False)``, node after node, on raw words.

    Parameters
    ----------
    words : ndarray of uint64, shape (n_words,)  # IN: the generator's next raw outputs
    has, buffered : int  # IN: its buffered 32-bit half (``has_uint32``, ``uinteger``)
    d, k : int  # IN: k < d
    out : ndarray of int64, shape (m, k)  # OUT: one draw a row

    Returns
    -------
    used : int
        Words consumed, or -1 when ``words`` ran out (a rejection needed one more).
    has, buffered : int
        The buffered half afterwards.
    """
    # Views numba does not reference-count (kernel_views.borrowed): _bounded gets the
    # words per draw.
    words, out = borrowed(words), borrowed(out)
    used = 0
    for n in range(out.shape[0]):
        # Floyd's algorithm: for j = d - k .. d - 1, a value in [0, j], j itself if taken.
        for t in range(k):
            j = d - k + t
            v, used, has, buffered = _bounded(words, used, has, buffered, j)
            if used < 0:
                return -1, 0, 0
            for u in range(t):
                if out[n, u] == v:
                    v = j
                    break
            out[n, t] = v
        # Then a Fisher-Yates shuffle of the k values.
        for i in range(k - 1, 0, -1):
            jj, used, has, buffered = _bounded(words, used, has, buffered, i)
            if used < 0:
                return -1, 0, 0
            tmp = out[n, i]
            out[n, i] = out[n, jj]
            out[n, jj] = tmp
    return used, has, buffered


@numba.njit(nogil=True, cache=True, inline="always")
def _bounded(words, used, has, buffered, rng):  # type: ignore[no-untyped-def]
    """A value in ``[0, rng]`` by Lemire's method on 32-bit halves (NumPy's scalar path)."""
    excl = np.uint64(rng + 1)
    x, used, has, buffered = _next32(words, used, has, buffered)
    if used < 0:
        return 0, used, has, buffered
    m = np.uint64(x) * excl
    left = m & np.uint64(_M32)
    if left < excl:
        threshold = (np.uint64(_M32) - np.uint64(rng)) % excl
        while left < threshold:
            x, used, has, buffered = _next32(words, used, has, buffered)
            if used < 0:
                return 0, used, has, buffered
            m = np.uint64(x) * excl
            left = m & np.uint64(_M32)
    return np.int64(m >> np.uint64(32)), used, has, buffered


@numba.njit(nogil=True, cache=True, inline="always")
def _next32(words, used, has, buffered):  # type: ignore[no-untyped-def]
    """PCG64's next 32 bits: the buffered upper half, else a word's lower half."""
    if has:
        return buffered, used, 0, buffered
    if used >= words.shape[0]:
        return 0, -1, has, buffered
    w = words[used]
    return np.int64(w & np.uint64(_M32)), used + 1, 1, np.int64(w >> np.uint64(32))


def floyd_draws_numpy(
    words: NDArray[np.uint64], has: int, buffered: int, d: int, k: int, out: NDArray[np.int64]
) -> tuple[int, int, int]:
    """Python twin of :func:`floyd_draws` (Python integers: no overflow to mind)."""
    state = [0, int(has), int(buffered)]  # words used, has a half, the half

    def next32() -> int:
        used, half, value = state
        if half:
            state[1] = 0
            return value
        if used >= words.size:
            raise IndexError
        w = int(words[used])
        state[:] = [used + 1, 1, w >> 32]
        return w & _M32

    def bounded(rng: int) -> int:
        m = next32() * (rng + 1)
        while (m & _M32) < (_M32 - rng) % (rng + 1):
            m = next32() * (rng + 1)
        return m >> 32

    try:
        for n in range(out.shape[0]):
            chosen: list[int] = []
            for j in range(d - k, d):
                v = bounded(j)
                chosen.append(j if v in chosen else v)
            for i in range(k - 1, 0, -1):
                jj = bounded(i)
                chosen[i], chosen[jj] = chosen[jj], chosen[i]
            out[n] = chosen
    except IndexError:
        return -1, 0, 0
    return state[0], state[1], state[2]


@cache
def _replay_matches(d: int, k: int) -> bool:
    """Whether :func:`floyd_draws` reproduces this NumPy's ``choice`` for ``(d, k)``."""
    ref, mine = np.random.default_rng([d, k, 14]), np.random.default_rng([d, k, 14])
    for m in (1, 3, 2):
        want = np.stack([ref.choice(d, size=k, replace=False) for _ in range(m)])
        if not np.array_equal(_draw_nodes(mine, d, k, m), want):
            return False
        ref.random(), mine.random()  # something else in between
    return bool(ref.bit_generator.state == mine.bit_generator.state)


# Its cached code holds borrowed's (kernel_views): an edit there makes it stale.
cache_depends_on(floyd_draws, kernel_views)
