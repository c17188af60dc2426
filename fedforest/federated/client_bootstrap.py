"""A client's bootstrap: each tree's draws, and the bootstrap round of ``balanced_subsample``.

:func:`bootstrap_counts` draws how often each of the client's rows is in a tree's
bootstrap (moved here from ``client.py``, which re-exports it).

``class_weight="balanced_subsample"`` with multi-output y or sample weights: scikit-learn
weighs a row of tree ``t`` by the product over the outputs of ``n / (n_classes * n_c)``
computed on that tree's bootstrap (``compute_sample_weight("balanced", y, indices=...)``,
draws counted without sample weights), which no reweighting of pooled per-output (or
weighted) statistics gives. Before a batch's first level the
server therefore asks every client for its bootstrap's class counts per tree and output
(:func:`answer_bootstrap`: the set-up travels with that round; masked, and noisy under
``"dp"``), sums them, and sends each tree's per-class weights with the batch's first
Round A; the client multiplies its in-bag rows' weights by them (:func:`weigh_trees`).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .client_secure import class_factor
from .client_targets import class_row_weights
from .privacy.secagg import to_fixed
from .protocol import BOOTSTRAP, Message

if TYPE_CHECKING:
    from .client import Client, _Fit

__all__ = [
    "answer_bootstrap",
    "bootstrap_counts",
    "bootstrap_counts_many",
    "tree_class_counts",
    "weigh_trees",
]

# NumPy's SeedSequence (numpy/random/bit_generator.pyx) and PCG64 seeding (pcg64.c):
# their constants, to seed many trees' generators at once (bootstrap_counts_many).
_M32, _M128 = 0xFFFFFFFF, (1 << 128) - 1
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _POOL = 0xCA01F9DD, 0x4973F715, 4
_PCG_MULT = (2549297995355413924 << 64) + 4865540595714422341


def bootstrap_counts(
    seed: int, tree: int, name: str, n: int, secret: int | None = None, draws: int | None = None
) -> NDArray[np.int64]:
    """Client-stratified bootstrap: how often each of the client's rows is drawn.

    Seeded from (random_state, tree index, client name) so that the same forest comes out
    whatever the transport or client order. Row ``i`` is drawn ``counts[i]`` times. Under
    ``privacy="secure"`` the client adds a ``secret`` of its own (derived from its data), so
    that the server, which knows the seed, cannot recompute the draws. ``draws`` (default
    ``n``) is the bootstrap's size (``max_samples``). With a ``secret``, a client of one
    row draws it a Poisson number of times of mean ``draws`` (:func:`_draws`).
    """
    words = [seed, tree, zlib.crc32(name.encode("utf-8"))]
    if secret is not None:
        words += [secret & 0xFFFFFFFFFFFFFFFF, secret >> 64]
    rng = np.random.default_rng(words)
    return _draws(rng, n, n if draws is None else draws, secret is not None)


def _draws(rng: np.random.Generator, n: int, size: int, secret: bool) -> NDArray[np.int64]:
    """One tree's counts of the client's ``n`` rows, ``size`` draws, from ``rng``.

    ``size`` draws with replacement; but a client of one row under a ``secret`` (secure,
    dp) draws it ``Poisson(size)`` times (the limit of one row's count in a large
    bootstrap): drawn ``size`` times in every tree, its row was in every tree alike, and
    where every client holds one row the trees held the same rows, which differencing
    nested nodes of two trees isolated (``bootstrap=False``'s reason for its refusal;
    red team 13, docs/privacy-findings.md).
    """
    if n == 1 and secret:
        return np.array([rng.poisson(size)], dtype=np.int64)
    return np.bincount(rng.integers(0, n, size=size), minlength=n).astype(np.int64)


def bootstrap_counts_many(
    seed: int,
    trees: range,
    name: str,
    n: int,
    draws: int | None = None,
    secret: int | None = None,
) -> NDArray[np.int64]:
    """:func:`bootstrap_counts` of each tree of ``trees`` (with ``secret``, if given), one row each.

    The same counts: each tree's generator is seeded as ``default_rng`` seeds it from
    :func:`bootstrap_counts`'s words, its SeedSequence hashes computed for all trees at
    once (:func:`_seed_states`) instead of one SeedSequence and one PCG64 made per tree
    (two thirds of a client's set-up at 1,400 rows). Negative words, or a tree index of
    2^32 and more, take the plain path.
    """
    words = [seed, zlib.crc32(name.encode("utf-8"))]
    if secret is not None:
        words += [secret & 0xFFFFFFFFFFFFFFFF, secret >> 64]
    if not trees or min(words) < 0 or not 0 <= trees.start <= trees[-1] <= _M32:
        return np.array(
            [bootstrap_counts(seed, t, name, n, secret, draws) for t in trees], np.int64
        ).reshape(len(trees), n)
    head, tail = _words32(seed), [w for v in words[1:] for w in _words32(v)]
    k = len(trees)
    entropy = np.empty((k, len(head) + 1 + len(tail)), dtype=np.uint32)
    entropy[:, : len(head)] = head
    entropy[:, len(head)] = np.asarray(trees)
    entropy[:, len(head) + 1 :] = tail
    states = _seed_states(entropy).tolist()
    bits = np.random.PCG64(0)
    rng = np.random.Generator(bits)
    size = n if draws is None else draws
    out = np.empty((k, n), dtype=np.int64)
    for t, (s0, s1, i0, i1) in enumerate(states):
        inc = (((i0 << 64) | i1) << 1 | 1) & _M128
        state = ((inc + ((s0 << 64) | s1)) * _PCG_MULT + inc) & _M128
        bits.state = {
            "bit_generator": "PCG64",
            "state": {"state": state, "inc": inc},
            "has_uint32": 0,
            "uinteger": 0,
        }
        out[t] = _draws(rng, n, size, secret is not None)
    return out


def _words32(value: int) -> list[int]:
    """A non-negative int as SeedSequence takes it: 32-bit words, lowest first (0: one word)."""
    out = [value & _M32]
    while value > _M32:
        value >>= 32
        out.append(value & _M32)
    return out


def _seed_states(entropy: NDArray[np.uint32]) -> NDArray[np.uint64]:
    """``SeedSequence(row).generate_state(4, np.uint64)`` of each row of ``entropy``.

    ``entropy`` : ndarray of uint32, shape (k, m): each row a SeedSequence's words (an int
    below 2^32 is one word). NumPy's mixing, in uint32 arithmetic over the rows.
    """
    shift = np.uint32(16)
    hc = [_INIT_A]

    def hashmix(value: NDArray[np.uint32]) -> NDArray[np.uint32]:
        value = value ^ np.uint32(hc[0])
        hc[0] = (hc[0] * _MULT_A) & _M32
        value = value * np.uint32(hc[0])
        return value ^ (value >> shift)

    def mix(x: NDArray[np.uint32], y: NDArray[np.uint32]) -> NDArray[np.uint32]:
        r = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
        return r ^ (r >> shift)

    k, m = entropy.shape
    zero = np.zeros(k, dtype=np.uint32)
    pool = [hashmix(entropy[:, i] if i < m else zero) for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(_POOL, m):  # words beyond the pool, each mixed into every pool word
        for dst in range(_POOL):
            pool[dst] = mix(pool[dst], hashmix(entropy[:, src]))
    state = np.empty((k, 8), dtype=np.uint32)
    b = _INIT_B
    for i in range(8):
        value = pool[i % _POOL] ^ np.uint32(b)
        b = (b * _MULT_B) & _M32
        value = value * np.uint32(b)
        state[:, i] = value ^ (value >> shift)
    return state.astype("<u4").view("<u8").astype(np.uint64)


def tree_class_counts(client: Client, fit: _Fit, first_tree: int) -> NDArray[np.float64]:
    """Per tree of the batch, the bootstrap's draws of each class of each output.

    Row ``t`` holds, in the class columns' order (one block per output), the number of
    draws of tree ``first_tree + t`` whose label is that class: counts with multiplicity,
    as scikit-learn's ``compute_sample_weight`` counts ``y[indices]``. Sample weights take
    no part (nor do they there); rows of weight 0 count when drawn, as there. Under
    ``"dp"`` a row's count is capped at ``max_weight`` (``Client._counts``).
    """
    n_columns = fit.n_classes
    codes = fit.y.astype(np.int64).reshape(fit.y.shape[0], -1)  # one column per output
    out = np.zeros((fit.n_trees, n_columns))
    for t in range(fit.n_trees):
        counts = client._counts(first_tree + t).astype(np.float64)
        for o in range(codes.shape[1]):
            out[t] += np.bincount(codes[:, o], weights=counts, minlength=n_columns)
    return out


def answer_bootstrap(client: Client, msg: Message) -> Message:
    """The bootstrap round: the set-up, then each tree's class counts (masked if secure)."""
    setup = msg.header.get("setup")
    if not isinstance(setup, dict):
        raise ValueError(f"Client {client.name!r}: a bootstrap round without its set-up.")
    fit = client._fit = client._setup(msg)
    if fit.n_classes == 0:
        raise ValueError(f"Client {client.name!r}: the bootstrap round is for classification.")
    counts = tree_class_counts(client, fit, int(setup.get("first_tree", 0)))
    if not fit.secure:
        return Message(BOOTSTRAP, {"name": client.name}, {"tree_class_counts": counts})
    party = client._secure_party()
    if party.dp is not None:  # a row adds at most max_weight to its class in each block
        counts = party.noisy(msg, counts, float(party.dp["max_weight"]), frac_bits=0)
    return party._masked(msg, BOOTSTRAP, {"tree_class_counts": to_fixed(counts, 0)})


def weigh_trees(client: Client, fit: _Fit, weights: Any) -> None:
    """Each in-bag row's weight times the product of its outputs' class weights, per tree.

    ``weights`` (the first Round A's ``tree_class_weights``) holds per tree of the batch
    what the set-up's ``class_weights`` holds for every tree under ``"balanced"``: one list
    of per-class weights per output. Under ``"dp"`` a row then weighs at most
    ``max_weight`` times the largest, over the batch's trees, product of each output's
    largest class weight (``class_factor``), which scales every entry's noise.
    """
    # One column of class codes per output (one output: y's codes as a column).
    codes = fit.y.reshape(fit.y.shape[0], -1) if fit.n_classes else np.zeros((0, 0))
    if not isinstance(weights, list) or len(weights) != fit.n_trees:
        raise ValueError(f"Client {client.name!r}: tree class weights for another batch.")
    factors = []
    for t, per_output in enumerate(weights):
        factors.append(class_factor(per_output, client.name))  # finite, >= 0
        sizes = [len(w) for w in per_output]
        low = np.cumsum([0, *sizes[:-1]])
        if len(sizes) != codes.shape[1] or np.any(codes < low) or np.any(codes >= low + sizes):
            raise ValueError(
                f"Client {client.name!r}: tree class weights of tree {t} do not match the "
                "classes of every output."
            )
        a, b = int(fit.tree_rows[t]), int(fit.tree_rows[t + 1])
        fit.w[a:b] = class_row_weights(fit.w[a:b], codes[fit.rows[a:b]], per_output)
    party = client._secure
    if party is not None and party.dp is not None:
        party.dp["class_factor"] = max(factors, default=1.0)
