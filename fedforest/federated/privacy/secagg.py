"""Secure aggregation: pairwise masks that cancel in the sum over clients.

Each client holds an X25519 key pair for one fit. The public keys travel in the handshake
and the server relays them all (it learns nothing from them); every pair of clients then
shares a 32-byte key (X25519, then HKDF-SHA256 bound to both names). To send an array the
server will add up, a client encodes it as integers mod 2^64 (fixed point for real values)
and adds, for every other participant, a keystream of AES-256 in counter mode under their
pair key (added by the client whose name sorts first, subtracted by the other; AES-CTR is
the PRG of Bonawitz et al. 2017 and runs twice as fast as ChaCha20 where the CPU has AES
instructions, which the masks' cost at small fits is made of). In the sum over all
participants every keystream appears once with each sign and cancels exactly; any one
client's array looks uniformly random to the server.

A client's answer in a round is masked by one stream per mask neighbour, laid over all the
round's arrays at once (concatenated in the order of their names): streams are bound to
the round (``tag``) and the arrays' names, so no stream is used twice.
When a participant drops out mid-round, the survivors send the sum of their streams with
the dropped ones for that round only (:func:`correction`): the server removes them and
learns nothing about any survivor (its other masks still hide it) nor about the dropped
client's earlier answers (those used other streams). The primitives are the
``cryptography`` package's; nothing here is hand-made cryptography.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numba
import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from numpy.typing import NDArray

from ..threads import thread_map

__all__ = [
    "FRAC_BITS",
    "MaskingKeys",
    "add_in_order",
    "add_into",
    "correction",
    "from_fixed",
    "pack_counts",
    "to_fixed_packed",
    "stream_layout",
    "to_fixed",
    "unpack_counts",
    "valid_public_key",
]

#: Fractional bits of the fixed-point encoding of real-valued sums (targets are
#: standardised first, so this is a resolution of about 6e-8 target standard deviations).
FRAC_BITS = 24
#: A client refuses to encode a value whose magnitude reaches this (room for 2^62 / it
#: summed over clients without wrapping).
_LIMIT = float(2**62)
#: HKDF info of the pair keys; v2: AES-256-CTR masks (v1 was ChaCha20: keys differ, so
#: clients of the two versions cannot mask for one another by accident).
_INFO = b"fedforest/secagg/v2"


def to_fixed(values: NDArray[np.float64], frac_bits: NDArray[np.int64] | int) -> NDArray[np.uint64]:
    """Encode real values as integers mod 2^64 (two's complement), ``round(v * 2^frac)``.

    Parameters
    ----------
    values : ndarray of float64, shape (..., n_columns)
    frac_bits : int or ndarray of int64, shape (n_columns,)
        Fractional bits per column (0 for counts, which stay exact).

    Raises
    ------
    ValueError
        If a value is not finite or too large to be summed without wrapping.
    """
    values = np.array(values, dtype=np.float64, copy=None, order="C")
    scale = np.exp2(np.asarray(frac_bits, dtype=np.float64))
    if scale.ndim > 1 or (scale.ndim == 1 and (values.ndim == 0 or values.shape[-1] != scale.size)):
        scaled = values * scale  # any other broadcast: NumPy's (the same numbers)
        values, scale = np.array(scaled, order="C"), np.ones(1)
    out = np.empty(values.shape, dtype=np.int64)
    if not _encode(values.reshape(-1), np.atleast_1d(scale), out.reshape(-1)):
        # No value in the text: a client's error reaches the server (Flower, Dask), and the
        # largest scaled sum was a row's sample weight times its draws
        # (docs/privacy-findings.md, "Error texts").
        raise ValueError(
            "a value to aggregate securely is not finite or too large for fixed-point sums "
            "(|value * 2^frac| must stay below 2^62): rescale the targets or sample weights "
            "(e.g. divide them by a power of ten)."
        )
    return out.view(np.uint64)


@numba.njit(nogil=True, cache=True)
def _encode(values, scale, out):  # type: ignore[no-untyped-def]
    # out[i] = rint(values[i] * scale[i % k]) in one pass; False if one is not finite or
    # reaches 2^62 (NaN fails the comparison too). Row by row: no modulo per value.
    k = scale.shape[0]
    for r in range(0, values.shape[0], k):
        for c in range(min(k, values.shape[0] - r)):
            v = values[r + c] * scale[c]
            if not abs(v) < _LIMIT:
                return False
            out[r + c] = np.int64(np.rint(v))
    return True


def from_fixed(
    total: NDArray[np.uint64], frac_bits: NDArray[np.int64] | int
) -> NDArray[np.float64]:
    """Decode a sum of :func:`to_fixed` encodings back to real values."""
    ints = np.asarray(total, dtype=np.uint64).view(np.int64).astype(np.float64)
    return np.asarray(ints / np.exp2(np.asarray(frac_bits, dtype=np.float64)))


#: Fractional bits of the low word of a two-word encoding (:func:`to_fixed2`).
LOW_BITS = 32


def to_fixed2(
    values: NDArray[np.float64], frac_bits: int
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """Two words per value, for sums whose variance is a small difference of large terms.

    ``hi = floor(v * 2^frac)`` and ``lo = round(fraction * 2^LOW_BITS)``: the sum keeps
    ``frac + LOW_BITS`` fractional bits (more than a float64 holds) with the range of
    ``frac``. Decode the two sums with :func:`from_fixed2`.
    """
    scaled = np.asarray(values, dtype=np.float64) * np.exp2(frac_bits)
    hi = np.floor(scaled)
    return to_fixed(hi, 0), to_fixed((scaled - hi) * np.exp2(LOW_BITS), 0)


def from_fixed2(
    hi: NDArray[np.uint64], lo: NDArray[np.uint64], frac_bits: int
) -> NDArray[np.float64]:
    """Decode the sums of :func:`to_fixed2` encodings."""
    return np.asarray(from_fixed(hi, frac_bits) + from_fixed(lo, frac_bits + LOW_BITS))


#: Bits of each half of a word that carries two counts (:func:`pack_counts`).
HALF_BITS = 32


def pack_counts(fixed: NDArray[np.uint64], who: str) -> NDArray[np.uint64]:
    """A row's first two columns (whole counts) in one word ``a + b * 2^32``.

    Fewer words to mask and send. The sum over clients of the packed words packs the two
    columns' sums as long as each stays below ``2^32`` (the server asks for packed counts
    only when the pooled rows are fewer); the masks, being uniform mod 2^64, hide a packed
    word as they hide any other.

    Parameters
    ----------
    fixed : ndarray of uint64, shape (n, s), s >= 2
        :func:`to_fixed` encodings; the first two columns of counts (0 fractional bits).
    who : str
        The client, named in the error.

    Returns
    -------
    ndarray of uint64, shape (n, s - 1)
        The packed counts, then the other columns as they were.

    Raises
    ------
    ValueError
        If a count is negative or reaches ``2^32``.
    """
    if fixed.ndim != 2 or fixed.shape[1] < 2:
        raise ValueError(f"Client {who!r}: counts to pack come in pairs, got shape {fixed.shape}.")
    counts = fixed[:, :2]
    if counts.size and int(counts.max()) >> HALF_BITS:  # a negative count wraps to >= 2^63
        raise ValueError(
            f"Client {who!r}: counts to pack must be whole numbers in [0, 2^{HALF_BITS}); "
            f"got the word {int(counts.max())}."
        )
    out = np.empty((fixed.shape[0], fixed.shape[1] - 1), dtype=np.uint64)
    out[:, 0] = counts[:, 0] | (counts[:, 1] << np.uint64(HALF_BITS))
    out[:, 1:] = fixed[:, 2:]
    return out


def to_fixed_packed(
    values: NDArray[np.float64], frac_bits: NDArray[np.int64], who: str
) -> NDArray[np.uint64]:
    """``pack_counts(to_fixed(values, frac_bits), who)`` in one pass: the same words.

    ``values`` has shape (n, s), s >= 2, and its first two columns 0 fractional bits (the
    counts). Any value that one of the two would refuse takes the two steps, which raise
    their own errors in their order.
    """
    values = np.asarray(values, dtype=np.float64)
    bits = np.asarray(frac_bits, dtype=np.int64)
    if (
        values.ndim == 2
        and values.shape[1] >= 2
        and bits.shape == (values.shape[1],)
        and not bits[:2].any()
    ):
        out = np.empty((values.shape[0], values.shape[1] - 1), dtype=np.uint64)
        if _encode_packed(np.ascontiguousarray(values), np.exp2(bits.astype(np.float64)), out):
            return out
    return pack_counts(to_fixed(values, frac_bits), who)


@numba.njit(nogil=True, cache=True)
def _encode_packed(values, scale, out):  # type: ignore[no-untyped-def]
    # _encode, then pack_counts' word for the first two columns: False where either would
    # refuse (a value not finite or reaching 2^62; a count outside [0, 2^32)).
    words = np.empty(values.shape[1], dtype=np.int64)
    for r in range(values.shape[0]):
        for c in range(values.shape[1]):
            v = values[r, c] * scale[c]
            if not abs(v) < _LIMIT:
                return False
            words[c] = np.int64(np.rint(v))
        a, b = words[0], words[1]
        if a < 0 or b < 0 or a >> HALF_BITS or b >> HALF_BITS:
            return False
        out[r, 0] = np.uint64(a) | (np.uint64(b) << np.uint64(HALF_BITS))
        for c in range(2, values.shape[1]):
            out[r, c - 1] = np.uint64(words[c])
    return True


def unpack_counts(
    total: NDArray[np.uint64], frac_bits: NDArray[np.int64] | None = None
) -> NDArray[np.float64]:
    """Decode a sum of :func:`pack_counts` words: shape (n, s - 1) to (n, s), float64.

    ``frac_bits`` are those of the columns after the two counts (:func:`from_fixed`).
    """
    total = np.asarray(total, dtype=np.uint64)
    out = np.empty((total.shape[0], total.shape[1] + 1))
    out[:, 0] = total[:, 0] & np.uint64(2**HALF_BITS - 1)
    out[:, 1] = total[:, 0] >> np.uint64(HALF_BITS)
    if total.shape[1] > 1:
        assert frac_bits is not None
        out[:, 2:] = from_fixed(total[:, 1:], frac_bits)
    return out


#: :func:`add_in_order` adds in threads from this many words on.
PARALLEL_WORDS = 1 << 20


def add_in_order(
    arrays: Iterable[NDArray[np.uint64]], shape: tuple[int, ...], n_threads: int = 1
) -> NDArray[np.uint64]:
    """Sum uint64 arrays mod 2^64 (the order does not matter: integer sums are exact).

    One array at a time (:func:`add_into`), in threads as it does.
    """
    total = np.zeros(shape, dtype=np.uint64)
    for a in arrays:
        add_into(total, a, n_threads)
    return total


def add_into(total: NDArray[np.uint64], array: NDArray[np.uint64], n_threads: int = 1) -> None:
    """``total += array`` mod 2^64, in place (:func:`add_in_order` one array at a time).

    With ``n_threads`` > 1 and :data:`PARALLEL_WORDS` words, contiguous ranges of the words
    are added in threads (NumPy drops the GIL): the same sums.
    """
    flat, other = total.reshape(-1), array.reshape(-1)
    n = n_threads if flat.size >= PARALLEL_WORDS else 1
    cuts = np.linspace(0, flat.size, n + 1).astype(np.int64)

    def add(i: int) -> None:
        part = flat[cuts[i] : cuts[i + 1]]
        part += other[cuts[i] : cuts[i + 1]]  # wraps mod 2^64, as intended

    thread_map(add, range(n), n)


def _maskable(a: object) -> bool:
    """Whether ``a`` can be masked in place: a writeable C-contiguous uint64 array."""
    return (
        isinstance(a, np.ndarray)
        and a.dtype == np.uint64
        and a.flags.c_contiguous
        and a.flags.writeable
    )


def _initial_block(tag: int, name: str) -> bytes:
    """The initial counter block of the keystreams masking (round ``tag``, arrays ``name``).

    A 12-byte digest of the round and the label of the arrays' names (:func:`stream_layout`;
    unique per stream), then a 4-byte block counter from 0 (room for 64 GB a stream before
    the counter would carry into the digest). The same for every pair of the round.
    """
    return hashlib.sha256(f"{tag}:{name}".encode()).digest()[:12] + b"\x00" * 4


def _encryptor(key: bytes | algorithms.AES, tag: int, name: str, iv: bytes = b"") -> Any:
    """The AES-256-CTR encryptor whose keystream masks (round ``tag``, arrays ``name``).

    ``key``: the pair key, or its ``algorithms.AES`` made once; ``iv``: the round's
    :func:`_initial_block` when the caller made it already. Encrypting zero bytes with it,
    in one call or chunk by chunk, gives the stream's words in order.
    """
    aes = key if isinstance(key, algorithms.AES) else algorithms.AES(key)
    return Cipher(aes, modes.CTR(iv or _initial_block(tag, name))).encryptor()


#: Words of keystream made per step (128 KiB): each neighbour's chunk is added into the
#: total while both sit in the CPU's cache, so a round's masks cost one pass over the
#: answer in memory whatever the number of neighbours, and no buffer as long as the answer
#: is allocated (and faulted in) per stream.
_CHUNK_WORDS = 1 << 14


def _add_streams(
    encryptors: list[tuple[Any, bool]], total: NDArray[np.uint64]
) -> NDArray[np.uint64]:
    """Add (``True``) or subtract each encryptor's next ``total.size`` keystream words.

    Chunk by chunk, every stream in turn on the same chunk of ``total`` (in place, mod
    2^64): the same words as one keystream per stream added over the whole array.
    """
    n = total.shape[0]
    if not encryptors or n == 0:
        return total
    buf = np.empty(min(n, _CHUNK_WORDS) + 8, dtype=np.uint64)  # update_into: a block more
    out = buf.view(np.uint8).data
    for lo in range(0, n, _CHUNK_WORDS):
        hi = min(n, lo + _CHUNK_WORDS)
        part, words, zeros = total[lo:hi], buf[: hi - lo], _zeros(8 * (hi - lo))
        for enc, plus in encryptors:
            enc.update_into(zeros, out)
            if plus:
                part += words  # wraps mod 2^64, as intended
            else:
                part -= words
    return total


#: Zero bytes the keystreams are encrypted from (grown on demand, never written).
_ZERO_BYTES = np.zeros(0, dtype=np.uint8)


def _zeros(n: int) -> memoryview:
    global _ZERO_BYTES
    if _ZERO_BYTES.size < n:
        _ZERO_BYTES = np.zeros(max(n, 2 * _ZERO_BYTES.size), dtype=np.uint8)
    return _ZERO_BYTES.data[:n]


def valid_public_key(raw: bytes) -> bool:
    """Whether ``raw`` is an X25519 public key that gives a secret pair key.

    A low-order point (all zeros, 1, and five others) gives the all-zero shared secret
    whatever the private key (``cryptography`` refuses the exchange): a client sending one
    made every other client fail the grid round, so the server checks each key at the
    handshake with an exchange against a throwaway key of its own.
    """
    try:
        X25519PrivateKey.generate().exchange(X25519PublicKey.from_public_bytes(raw))
    except ValueError:
        return False
    return True


class MaskingKeys:
    """One client's key pair for a fit and the pair keys it shares with the others."""

    def __init__(self, name: str, private: bytes | None = None) -> None:
        self.name = name
        self._private = (
            X25519PrivateKey.generate()
            if private is None
            else X25519PrivateKey.from_private_bytes(private)
        )
        self._pair: dict[str, bytes] = {}
        #: Each peer's pair key as the cipher's key object, made once (with its key's bytes).
        self._aes: dict[str, tuple[bytes, algorithms.AES]] = {}

    def _cipher_key(self, other: str) -> algorithms.AES:
        key = self._pair[other]
        made = self._aes.get(other)
        if made is None or made[0] is not key:  # first use, or the pair keys replaced
            made = self._aes[other] = (key, algorithms.AES(key))
        return made[1]

    def export(self) -> tuple[bytes, dict[str, bytes]]:
        """The private key and the pair keys, for a client that keeps state between rounds.

        They stay on the client (a Flower SuperNode keeps them in its own run state).
        """
        raw = self._private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        return raw, dict(self._pair)

    @classmethod
    def restore(cls, name: str, private: bytes, pair: dict[str, bytes]) -> MaskingKeys:
        """Inverse of :meth:`export`."""
        keys = cls(name, private)
        keys._pair = dict(pair)
        return keys

    @property
    def public_bytes(self) -> bytes:
        """The raw 32-byte X25519 public key (sent in the handshake)."""
        return self._private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    def agree(self, publics: Mapping[str, bytes]) -> None:
        """Derive the pair key with every other client from the relayed public keys."""
        pair = {}
        for other, raw in publics.items():
            if other == self.name:
                continue
            if not isinstance(raw, bytes) or len(raw) != 32:
                raise ValueError(
                    f"Client {self.name!r}: the public key of {other!r} is not 32 bytes."
                )
            try:  # a low-order point: the exchange refuses it (see valid_public_key)
                shared = self._private.exchange(X25519PublicKey.from_public_bytes(raw))
            except ValueError:
                raise ValueError(
                    f"Client {self.name!r}: the public key of {other!r} is not a valid X25519 "
                    "key (a low-order point: the pair key would be known to all)."
                ) from None
            names = "\x00".join(sorted((self.name, other))).encode("utf-8")
            pair[other] = HKDF(
                algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO + b"\x00" + names
            ).derive(shared)
        self._pair = pair

    def _signed_streams(
        self, peers: Iterable[str], tag: int, name: str, parts: list[NDArray[np.uint64]]
    ) -> None:
        """Add this client's signed streams with ``peers`` into ``parts``, in place.

        ``parts`` are 1-d arrays laid end to end (:func:`stream_layout`'s order): each
        stream runs on over them, as over one array of their total length.
        """
        encryptors, iv = [], _initial_block(tag, name)
        for other in peers:
            if other == self.name:
                continue
            if other not in self._pair:
                raise ValueError(f"Client {self.name!r} has no pair key with {other!r}.")
            aes = self._cipher_key(other)
            encryptors.append((_encryptor(aes, tag, name, iv), self.name < other))
        for part in parts:
            _add_streams(encryptors, part)

    def mask(
        self,
        arrays: Mapping[str, NDArray[np.uint64]],
        peers: Iterable[str],
        tag: int,
        *,
        in_place: bool = False,
    ) -> dict[str, NDArray[np.uint64]]:
        """The arrays plus this client's masks for round ``tag`` with its mask neighbours.

        One keystream per neighbour covers every array (:func:`stream_layout`): a cipher
        set up once per neighbour and round instead of once per array. ``in_place``: the
        caller's arrays (made for this answer alone) are masked where they are, when each
        is a writeable C-contiguous uint64 array, instead of in a copy (the same words;
        the copy cost as much as the masks at 100,000 rows).
        """
        peers = mask_neighbours(self.name, list(peers))
        shapes = {name: np.shape(a) for name, a in arrays.items()}
        label, offsets, n = stream_layout(shapes)
        if in_place and all(_maskable(a) for a in arrays.values()):
            parts = [np.asarray(arrays[name]).reshape(-1) for name in sorted(arrays)]
            self._signed_streams(peers, tag, label, parts)
            return dict(arrays)
        flat = np.empty(n, dtype=np.uint64)  # a copy of the arrays: the masks go into it
        for name, a in arrays.items():
            lo, hi = offsets[name]
            flat[lo:hi] = np.asarray(a, dtype=np.uint64).ravel()
        self._signed_streams(peers, tag, label, [flat])
        return {name: flat[slice(*offsets[name])].reshape(shape) for name, shape in shapes.items()}

    def correction(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dropped: Iterable[str],
        tag: int,
        peers: Iterable[str],
    ) -> dict[str, NDArray[np.uint64]]:
        """The masks this client added in round ``tag`` for the ``dropped`` peers, per array.

        ``peers`` are the round's participants. Refused when the survivors' mask graph would
        fall apart: the sum of a group of survivors cut off from the others would be exposed.
        """
        peers = list(peers)
        dropped = [d for d in dropped if d in set(peers)]
        survivors = [p for p in peers if p not in set(dropped)]
        if not _connected(survivors, peers):
            raise ValueError(
                f"Client {self.name!r}: removing the masks of {dropped} would leave groups of "
                "clients whose sums are no longer hidden by the others; refusing to recover."
            )
        dropped = [d for d in dropped if d in set(mask_neighbours(self.name, peers))]
        label, offsets, n = stream_layout(shapes)
        flat = np.zeros(n, dtype=np.uint64)
        self._signed_streams(dropped, tag, label, [flat])
        return {
            name: flat[slice(*offsets[name])].reshape(tuple(shape))
            for name, shape in shapes.items()
        }


def stream_layout(
    shapes: Mapping[str, tuple[int, ...]],
) -> tuple[str, dict[str, tuple[int, int]], int]:
    """Where a round's arrays sit in its keystreams: one stream covers them all.

    The arrays are laid end to end in the order of their names; the stream's label (with
    the round, its nonce) is the names joined by NUL, so one array's stream is the one of
    its name alone. Returns the label, each array's (start, end) in words, and the total.
    """
    offsets, n = {}, 0
    for name in sorted(shapes):
        size = math.prod(int(k) for k in shapes[name])  # not np.prod: 18 us a call
        offsets[name] = (n, n + size)
        n += size
    return "\x00".join(sorted(shapes)), offsets, n


def mask_neighbours(name: str, peers: list[str]) -> list[str]:
    """Whom ``name`` shares masks with in a round of ``peers``: a circulant graph.

    With ``K`` participants (sorted by name) each is joined to the ``d = ceil(log2(K) / 2)``
    next and previous ones, or to all when ``K <= 2 d + 2`` (where the circulant would
    leave each one non-neighbour: 4 clients formed a ring, which a drop of two opposite
    clients cut, so the survivors could not recover). Every answer carries ``2 d`` masks
    (``K - 1`` in the complete graph), any proper group of clients has edges to the rest
    (the graph is connected, so the server learns no partial sum), and a client computes
    ``2 d`` keystreams per array instead of ``K - 1`` (the idea of Bell et al. 2020,
    SecAgg+, which Flower's SecAgg+ also uses). The price: a client's answer is exposed if
    all of its ``2 d`` neighbours collude with the server, and drops that cut the graph
    stop the recovery.
    """
    return list(_neighbours(name, tuple(peers)))


@functools.lru_cache(maxsize=1024)
def _neighbours(name: str, peers: tuple[str, ...]) -> tuple[str, ...]:
    # The same every round of a fit (its clients, its drops): made once, not per answer.
    order = sorted(set(peers))
    k = len(order)
    if name not in order:
        return ()
    d = max(1, math.ceil(math.log2(max(k, 2)) / 2))
    if k <= 2 * d + 2:
        return tuple(p for p in order if p != name)
    i = order.index(name)
    return tuple(sorted({order[(i + j) % k] for j in range(-d, d + 1) if j != 0}))


def _connected(nodes: list[str], peers: list[str]) -> bool:
    """Whether ``nodes`` stay connected by the round's mask graph (over ``peers``)."""
    if len(nodes) <= 1:
        return True
    keep = set(nodes)
    seen, todo = {nodes[0]}, [nodes[0]]
    while todo:
        for other in mask_neighbours(todo.pop(), peers):
            if other in keep and other not in seen:
                seen.add(other)
                todo.append(other)
    return seen == keep


def correction(
    total: NDArray[np.uint64], corrections: Iterable[NDArray[np.uint64]]
) -> NDArray[np.uint64]:
    """The survivors' sum with their masks for the dropped clients removed."""
    out = np.array(total, dtype=np.uint64, copy=True)
    for c in corrections:
        out -= c
    return out
