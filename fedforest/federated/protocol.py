"""Message types of the federated protocol and the communication ledger.

A message is a kind, a small JSON header and a few large numpy arrays (per-node results
are packed into one array with offsets: on a real deployment every array costs a request).
Every message that crosses between server and clients is counted by the ledger, in bytes
(header JSON plus array buffers) and in scalars (array elements), per round and direction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
import pandas as pd
from numpy.typing import NDArray

__all__ = [
    "PROTOCOL_VERSION",
    "SETTINGS_DIGEST",
    "TREE_DIGEST",
    "DIGEST_BYTES",
    "protocol_mismatch",
    "increasing_positions",
    "increasing_positions_numpy",
    "REPLY_ARRAYS",
    "BOOTSTRAP",
    "Message",
    "CommunicationLedger",
    "RoundRecord",
    "expect_array",
    "expand_candidates",
    "pack_increments",
    "pack_sketch",
    "pack_increments_numpy",
    "pack_gains",
    "unpack_increments",
    "unpack_gains",
    "sketch_run_lengths",
    "unpack_sketch",
]

#: The messages' version, stated by the server's handshake and by every client's reply.
#: Bump it with any change a client of another version would misread: 2 since the masks
#: became AES-256-CTR keystreams and Rounds A and B pack two counts in one word (a client
#: of version 1 would mask with other keys and the sums would decode to garbage); 3 since
#: the set-up carries the settings digest under "secure"/"dp" (a client of version 2
#: would ignore it and draw its bootstraps unbound: another forest, and refits with other
#: settings would draw the same rows again); 4 since Round A may ask for rows in the
#: histograms' weight column (``hist_rows``: a client of version 3 would send its
#: class-weighted rows, whose one-row bins give away their labels) and, under
#: "secure"/"dp", Round A's grids travel as lattice codes and Round B's candidates as
#: indices into them (``grid_wire``; a version-3 client lacks the array "grid"); 5 since
#: the out-of-bag request may carry each tree's digest (``tree_digest``, after a drop: a
#: client of version 4 would score every tree on the last batch's bootstraps, silently);
#: 6 since under "secure" a client names only the class labels it holds in
#: ``min_level_rows`` rows (a client of version 5 would name a label one row holds; it
#: refuses the server's version before answering); 7 since under "secure" a client with
#: sample weights sends ``weight_logs`` and trims its weights to the set-up's
#: ``weight_band`` (a client of version 6 would keep a heavy row's weight as given),
#: and the first grid round asks for each categorical column's rows per code
#: (``code_counts``) and the set-up may carry ``code_map``, the codes few rows hold
#: merged (a client of version 6 would ignore it and keep its one-row code, which
#: Round A's counts follow down the trees).
PROTOCOL_VERSION = 7

HANDSHAKE = "handshake"
ROUND_A = "round_a"
ROUND_B = "round_b"
OOB = "oob"
#: ``privacy="secure"``: the pooled-grid rounds after the handshake, and the survivors'
#: mask corrections after a client dropped out mid-round.
GRID = "grid"
RECOVER = "recover"
#: class_weight="balanced_subsample" with multi-output y: before a batch's first level,
#: each tree's bootstrap class counts (the set-up travels with it).
BOOTSTRAP = "bootstrap"
KINDS = (HANDSHAKE, ROUND_A, ROUND_B, OOB, GRID, RECOVER, BOOTSTRAP)
#: Under ``privacy="secure"``/``"dp"``: the request that carries the set-up (a batch's
#: first Round A, or its bootstrap round) also carries this array, the SHA-256 digest of
#: the resolved settings (``server/digest.py``; ``DIGEST_BYTES`` uint8). Each client binds
#: its bootstrap secret to it, and refuses a secure set-up without it.
SETTINGS_DIGEST = "settings_digest"
DIGEST_BYTES = 32
#: The out-of-bag request's per-tree digests (uint8, (n_trees, DIGEST_BYTES)), sent when a
#: drop gave the fit's batches several (``server/batch_setup.py``): each client draws a
#: tree's bootstrap again bound to its batch's digest.
TREE_DIGEST = "tree_digest"
#: Every array a client's reply of each kind may hold, at any privacy level and option (a
#: recovery round's are the sums it recovers, named in its request). The server refuses any
#: other name: an array it would ignore is not a reply the protocol defines.
_PACKED_LEFT = ("left_counts", "left_sums", "left_index", "avg_rows", "avg_gain", "avg_index")
REPLY_ARRAYS: dict[str, frozenset[str]] = {
    HANDSHAKE: frozenset(
        ("public_key", "feature_min", "feature_max", "feature_sketch", "feature_rows")
    ),
    GRID: frozenset(
        ("moments", "moments_lo", "y_moments", "y_moments_lo", "y_hist", "class_counts", "hist")
        + ("known", "data_tag", "weight_logs", "code_counts", "order_sums")
    ),
    ROUND_A: frozenset(
        ("summary", "hist", "sketch", "sketch_runs", "sketch_off", "local_best")
        + ("top_features", "top_gains")
        + _PACKED_LEFT
    ),
    ROUND_B: frozenset(("left", "group_stats") + _PACKED_LEFT),
    OOB: frozenset(("oob_sums", "leaf_sums")),
    BOOTSTRAP: frozenset(("tree_class_counts",)),
}


@dataclass
class Message:
    """One protocol message.

    Attributes
    ----------
    kind : str
        ``"handshake"``, ``"round_a"``, ``"round_b"`` or ``"oob"``.
    header : dict
        JSON-serialisable metadata.
    arrays : dict of str to ndarray
        The payload; numeric arrays only (no object dtype).
    """

    kind: str
    header: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, NDArray[Any]] = field(default_factory=dict)

    def header_bytes(self) -> bytes:
        """The header as it would travel: compact UTF-8 JSON."""
        return json.dumps(self.header, separators=(",", ":"), sort_keys=True).encode()

    @property
    def nbytes(self) -> int:
        """Bytes on the wire: header plus array buffers."""
        return len(self.header_bytes()) + sum(int(a.nbytes) for a in self.arrays.values())

    @property
    def n_scalars(self) -> int:
        """Number of array elements carried."""
        return sum(int(a.size) for a in self.arrays.values())


def expect_array(
    msg: Message, name: str, kind: str, shape: tuple[int | None, ...], sender: str
) -> NDArray[Any]:
    """Fetch and validate one array of an incoming message.

    Parameters
    ----------
    kind : str
        Accepted numpy dtype kinds, e.g. ``"f"`` or ``"iu"``.
    shape : tuple
        Expected shape; ``None`` matches any length on that axis.
    sender : str
        Named in the error.
    """
    if name not in msg.arrays:
        raise ValueError(f"Message {msg.kind!r} from {sender!r} lacks the array {name!r}.")
    arr = np.asarray(msg.arrays[name])
    if (
        arr.dtype.kind not in kind
        or arr.ndim != len(shape)
        or any(want is not None and got != want for got, want in zip(arr.shape, shape, strict=True))
    ):
        raise ValueError(
            f"Array {name!r} of message {msg.kind!r} from {sender!r} has dtype {arr.dtype} and "
            f"shape {arr.shape}; expected kind {kind!r} and shape {shape}."
        )
    return arr


def pack_increments(
    left: NDArray[np.float64],
    first: NDArray[np.bool_],
    n_count_cols: int,
    prefix: str,
    present: NDArray[np.bool_] | None = None,
) -> dict[str, NDArray[Any]]:
    """Cumulative statistics at consecutive candidates as they travel: per-bin increments.

    ``left[i]`` holds the statistics of the rows left of candidate ``i``; ``first[i]``
    marks the first candidate of each (node, feature) pair; only the rows where
    ``present`` is true (whole pairs) travel. Each row travels as its increment over the
    previous candidate of its pair (the statistics of the rows between the two
    thresholds), which carries exactly the same information, its integer columns as int32
    (int64 if one exceeds int32; they are whole numbers: row counts, bootstrap weights,
    class weights), the sums of y and y^2 as float64. Bins without rows have zero
    increments; when leaving them out saves bytes, only the others travel, with their
    positions among the present rows in ``{prefix}_index`` (int32, increasing).
    """
    left = np.ascontiguousarray(left, dtype=np.float64)
    first = np.ascontiguousarray(first, dtype=np.bool_)
    keep = np.ones(left.shape[0], np.bool_) if present is None else np.asarray(present, bool)
    row_bytes = 4 * n_count_cols + 8 * (left.shape[1] - n_count_cols)
    # One pass writes the sparse form as int32 (the usual answer: most bins of a small
    # node are empty); the dense form, or int64 counts, take a second pass.
    n_keep = int(np.count_nonzero(keep))
    counts = np.empty((n_keep, n_count_cols), dtype=np.int32)
    sums = np.empty((n_keep, left.shape[1] - n_count_cols))
    index = np.empty(n_keep, dtype=np.int32)
    int32_max = float(np.iinfo(np.int32).max)
    n, n_nonzero, biggest = _fill_increments(
        left, keep, first, True, counts, sums, index, int32_max
    )
    sparse = n_nonzero * (row_bytes + 4) < n * row_bytes
    if sparse and biggest <= int32_max:  # copied: the message keeps no unused rows
        counts, sums = counts[:n_nonzero].copy(), sums[:n_nonzero].copy()
        index = index[:n_nonzero].copy()
    else:
        m = n_nonzero if sparse else n
        dtype = np.int64 if biggest > int32_max else np.int32
        counts = np.empty((m, n_count_cols), dtype=dtype)
        sums = np.empty((m, left.shape[1] - n_count_cols))
        index = np.empty(m if sparse else 0, dtype=np.int32)
        _fill_increments(left, keep, first, sparse, counts, sums, index, np.inf)
    out: dict[str, NDArray[Any]] = {f"{prefix}_counts": counts}
    if sums.shape[1]:
        out[f"{prefix}_sums"] = sums
    if sparse:
        out[f"{prefix}_index"] = index
    return out


@numba.njit(nogil=True, cache=True)
def _fill_increments(left, keep, first, sparse, counts, sums, index, limit):  # type: ignore[no-untyped-def]
    # The increment of row i is left[i] - left[i - 1] within a pair, left[i] at its start.
    # Returns (kept rows, kept rows with a non-zero increment, largest |integer increment|);
    # an integer increment too large for ``counts``' type is written only after the pass
    # has said so (``limit``: the caller then fills again with int64).
    n_counts, n_cols = counts.shape[1], left.shape[1]
    buf = np.empty(n_cols)
    j = 0  # output row
    k = -1  # position among the kept rows
    nonzero = 0
    biggest = 0.0
    for i in range(left.shape[0]):
        if not keep[i]:
            continue
        k += 1
        sub = i > 0 and not first[i]
        nz = False
        for q in range(n_cols):
            v = left[i, q] - left[i - 1, q] if sub else left[i, q]
            buf[q] = v
            if v != 0.0:
                nz = True
            if q < n_counts and abs(v) > biggest:
                biggest = abs(v)
        if nz:
            nonzero += 1
        if sparse and not nz:
            continue
        if biggest <= limit:
            for q in range(n_counts):
                counts[j, q] = np.rint(buf[q])
        for q in range(n_counts, n_cols):
            sums[j, q - n_counts] = buf[q]
        if sparse:
            index[j] = k
        j += 1
    return k + 1, nonzero, biggest


def pack_increments_numpy(
    left: NDArray[np.float64],
    first: NDArray[np.bool_],
    n_count_cols: int,
    prefix: str,
    present: NDArray[np.bool_] | None = None,
) -> dict[str, NDArray[Any]]:
    """NumPy twin of :func:`pack_increments`."""
    inc = np.array(left, dtype=np.float64)
    later = ~np.asarray(first, dtype=bool)
    if later.size:
        later[0] = False
    inc[1:][later[1:]] -= left[:-1][later[1:]]
    if present is not None:
        inc = inc[np.asarray(present, bool)]
    nonzero = np.any(inc != 0.0, axis=1)
    row_bytes = 4 * n_count_cols + 8 * (left.shape[1] - n_count_cols)
    sparse = int(nonzero.sum()) * (row_bytes + 4) < inc.shape[0] * row_bytes
    rows = inc[nonzero] if sparse else inc
    counts = rows[:, :n_count_cols]
    big = counts.size and np.abs(counts).max() > np.iinfo(np.int32).max
    out = {f"{prefix}_counts": np.rint(counts).astype(np.int64 if big else np.int32)}
    if left.shape[1] > n_count_cols:
        out[f"{prefix}_sums"] = np.ascontiguousarray(rows[:, n_count_cols:])
    if sparse:
        out[f"{prefix}_index"] = np.flatnonzero(nonzero).astype(np.int32)
    return out


@numba.njit(nogil=True, cache=True)
def increasing_positions(pos, n, out):  # type: ignore[no-untyped-def]
    """``pos`` as int64 into ``out``, and whether it increases strictly within ``[0, n)``.

    One pass instead of a conversion, a difference and three tests (:func:`_positions`
    reads every sparse answer's positions; twin :func:`increasing_positions_numpy`).

    Parameters
    ----------
    pos : ndarray of int, shape (m,)  # IN
    n : int  # IN
    out : ndarray of int64, shape (m,)  # OUT
    """
    prev = np.int64(-1)
    ok = True
    for i in range(pos.shape[0]):
        v = np.int64(pos[i])
        ok &= (v > prev) & (v < n)
        out[i] = v
        prev = v
    return ok


def increasing_positions_numpy(
    pos: NDArray[np.integer[Any]], n: int, out: NDArray[np.int64]
) -> bool:
    """NumPy twin of :func:`increasing_positions`."""
    out[:] = pos
    return bool(not pos.size or (out[0] >= 0 and out[-1] < n and np.all(np.diff(out) > 0)))


def _positions(msg: Message, name: str, n: int, sender: str) -> NDArray[np.int64]:
    """Where a sparse answer's rows stand (increasing, in ``0..n-1``).

    All positions when the array ``name`` did not travel (the answer is dense).
    """
    if name not in msg.arrays:
        return np.arange(n, dtype=np.int64)
    sent = expect_array(msg, name, "i", (None,), sender)
    pos = np.empty(sent.size, dtype=np.int64)
    if not increasing_positions(sent, n, pos):
        raise ValueError(
            f"Array {name!r} of message {msg.kind!r} from {sender!r} must hold increasing "
            f"positions in [0, {n})."
        )
    return pos


def unpack_increments(
    msg: Message, prefix: str, n: int, n_stats: int, n_count_cols: int, sender: str
) -> tuple[NDArray[np.int64], NDArray[Any], NDArray[np.float64]]:
    """Read what :func:`pack_increments` sent for ``n`` candidates.

    Returns the positions (in ``0..n-1``) of the increments that travelled, their integer
    columns and their float columns; a malformed message is a ``ValueError``.
    """
    pos = _positions(msg, f"{prefix}_index", n, sender)
    counts = expect_array(msg, f"{prefix}_counts", "i", (pos.size, n_count_cols), sender)
    sums = (
        expect_array(msg, f"{prefix}_sums", "f", (pos.size, n_stats - n_count_cols), sender)
        if n_stats > n_count_cols
        else np.empty((pos.size, 0))
    )
    return pos, counts, sums


#: AvgImp's local gains travel in this type (float32 changed a split in 1 of 4 test forests).
GAIN_DTYPE = np.float64


def pack_gains(
    left_rows: NDArray[np.float64], gain: NDArray[np.float64], first: NDArray[np.bool_]
) -> dict[str, NDArray[Any]]:
    """AvgImp's Round B answer: per candidate, the local left row count and local gain.

    ``left_rows[i]`` and ``gain[i]`` belong to candidate ``i`` (cumulative within each
    pair, ``first`` marks a pair's first candidate). The row counts travel as per-bin
    increments in the smallest unsigned type that holds them (``avg_rows``), the gains as
    :data:`GAIN_DTYPE` (``avg_gain``). A gain changes only where the client's rows do (the
    same rows left, the same partition), so when it saves bytes only the bins with rows
    travel, with their positions in ``avg_index`` (int32, increasing); the receiver
    carries each gain forward within its pair, from 0 (nothing left: no decrease).
    """
    rows = np.rint(np.asarray(left_rows, dtype=np.float64))
    first = np.asarray(first, dtype=bool)
    inc = rows.copy()
    later = ~first
    if later.size:
        later[0] = False
    inc[1:][later[1:]] -= rows[:-1][later[1:]]
    biggest = float(inc.max()) if inc.size else 0.0
    rdtype = next(t for t in (np.uint8, np.uint16, np.uint32) if biggest <= np.iinfo(t).max)
    nonzero = inc != 0
    per = np.dtype(rdtype).itemsize + np.dtype(GAIN_DTYPE).itemsize
    sparse = int(nonzero.sum()) * (per + 4) < inc.size * per
    keep = nonzero if sparse else np.ones(inc.size, dtype=bool)
    out: dict[str, NDArray[Any]] = {
        "avg_rows": inc[keep].astype(rdtype),
        "avg_gain": np.asarray(gain, dtype=np.float64)[keep].astype(GAIN_DTYPE),
    }
    if sparse:
        out["avg_index"] = np.flatnonzero(nonzero).astype(np.int32)
    return out


def unpack_gains(
    msg: Message, n: int, first: NDArray[np.bool_], sender: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Read what :func:`pack_gains` sent for ``n`` candidates: left rows and gains.

    Returns the per-bin row increments (float64, the receiver sums them per pair) and
    the gain at every candidate (carried forward within pairs); a malformed message is a
    ``ValueError``.
    """
    pos = _positions(msg, "avg_index", n, sender)
    rows = expect_array(msg, "avg_rows", "u", (pos.size,), sender)
    gain = expect_array(msg, "avg_gain", "f", (pos.size,), sender).astype(np.float64)
    inc = np.zeros(n)
    inc[pos] = rows
    vals = np.zeros(n)
    vals[pos] = gain
    # The last candidate with rows, or the pair's start, at or before each candidate.
    mark = np.zeros(n, dtype=bool)
    mark[pos] = True
    mark |= np.asarray(first, dtype=bool)
    last = np.maximum.accumulate(np.where(mark, np.arange(n), 0)) if n else np.zeros(0, np.int64)
    return inc, vals[last]


def pack_sketch(
    sketch: NDArray[np.float64], keep: NDArray[np.bool_] | None = None
) -> dict[str, NDArray[Any]]:
    """Quantile sketches as they travel: run-length encoded when that saves bytes.

    A client with fewer rows in a node than ``B`` repeats values across the ``B`` levels.
    Runs (never crossing from one pair to the next) travel as ``sketch`` (their values)
    and ``sketch_runs`` (their lengths); otherwise ``sketch`` is the dense array.
    ``keep`` (a mask of the rows): the message of ``sketch[keep]``, made in one pass over
    the kept rows (:func:`_sketch_runs`) without copying them first.
    """
    if keep is not None:
        return _pack_kept(np.ascontiguousarray(sketch, dtype=np.float64), keep)
    n, b = sketch.shape
    flat = np.ascontiguousarray(sketch).ravel()
    if flat.size == 0:
        return {"sketch": np.ascontiguousarray(sketch)}
    start = np.ones(flat.size, dtype=bool)
    start[1:] = flat[1:] != flat[:-1]
    start[::b] = True
    idx = np.flatnonzero(start)
    dtype = np.uint8 if b <= np.iinfo(np.uint8).max else np.uint32
    if idx.size * (8 + np.dtype(dtype).itemsize) >= flat.size * 8:
        return {"sketch": np.ascontiguousarray(sketch)}
    runs = np.diff(np.append(idx, flat.size)).astype(dtype)
    return {"sketch": flat[idx], "sketch_runs": runs}


def _pack_kept(sketch: NDArray[np.float64], keep: NDArray[np.bool_]) -> dict[str, NDArray[Any]]:
    """:func:`pack_sketch` of ``sketch[keep]``: the same arrays, the same choice."""
    b = sketch.shape[1]
    n_keep = int(np.count_nonzero(keep))
    if n_keep * b == 0:
        return {"sketch": np.ascontiguousarray(sketch[keep])}
    values = np.empty(n_keep * b)
    runs = np.empty(n_keep * b, dtype=np.int64)
    m = _sketch_runs(sketch, np.asarray(keep, dtype=np.bool_), values, runs)
    dtype = np.uint8 if b <= np.iinfo(np.uint8).max else np.uint32
    if m * (8 + np.dtype(dtype).itemsize) >= n_keep * b * 8:
        return {"sketch": np.ascontiguousarray(sketch[keep])}
    return {"sketch": values[:m].copy(), "sketch_runs": runs[:m].astype(dtype)}


@numba.njit(nogil=True, cache=True)
def _sketch_runs(sketch, keep, values, runs):  # type: ignore[no-untyped-def]
    # The runs of equal values of the kept rows, row after row (a run never crosses into
    # the next row; NaN != NaN, so each NaN is a run of its own, as in pack_sketch).
    # Returns how many. Branch-free: every value is written to the next free slot and
    # claims it only when it starts a run (so a run keeps its first value, -0.0 or 0.0);
    # ``runs`` holds the runs' starts among the kept values, then their lengths.
    b = sketch.shape[1]
    m = 0
    k = 0  # kept values so far
    for p in range(sketch.shape[0]):
        if not keep[p]:
            continue
        prev = sketch[p, 0]
        values[m] = prev
        runs[m] = k
        m += 1
        for j in range(1, b):
            v = sketch[p, j]
            values[m] = v
            runs[m] = k + j
            m += v != prev
            prev = v
        k += b
    for i in range(m - 1):
        runs[i] = runs[i + 1] - runs[i]
    if m:
        runs[m - 1] = k - runs[m - 1]
    return m


def unpack_sketch(msg: Message, n: int, b: int, sender: str) -> NDArray[np.float64]:
    """Inverse of :func:`pack_sketch`: the dense (n, b) sketch, validated."""
    if "sketch_runs" not in msg.arrays:
        return expect_array(msg, "sketch", "f", (n, b), sender)
    values, runs = sketch_run_lengths(msg, n, b, sender)
    return np.repeat(values, runs).reshape(n, b)


def sketch_run_lengths(
    msg: Message, n: int, b: int, sender: str
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """A run-length sketch's values and run lengths, validated (``sketch_runs`` present)."""
    values = expect_array(msg, "sketch", "f", (None,), sender)
    runs = expect_array(msg, "sketch_runs", "u", (values.size,), sender).astype(np.int64)
    # Each run within 1..n*b first, so that the int64 sum cannot wrap around to n * b.
    if runs.size and (runs.min() < 1 or runs.max() > n * b or int(runs.sum()) != n * b):
        raise ValueError(
            f"Array 'sketch_runs' of message {msg.kind!r} from {sender!r} must hold positive "
            f"run lengths adding up to {n} x {b}."
        )
    if not runs.size and n * b:
        raise ValueError(f"Message {msg.kind!r} from {sender!r} has an empty run-length sketch.")
    return values, runs


@dataclass(frozen=True)
class RoundRecord:
    """What one round moved, summed over clients."""

    round: int
    kind: str
    n_clients: int
    download_bytes: int
    upload_bytes: int
    download_scalars: int
    upload_scalars: int


def _sizes(messages: dict[str, Message]) -> tuple[int, int]:
    """Bytes and scalars of ``messages`` together; a broadcast's one message sized once."""
    sizes: dict[int, tuple[int, int]] = {}
    n_bytes = n_scalars = 0
    for m in messages.values():
        if id(m) not in sizes:
            sizes[id(m)] = (m.nbytes, m.n_scalars)
        b, k = sizes[id(m)]
        n_bytes, n_scalars = n_bytes + b, n_scalars + k
    return n_bytes, n_scalars


class CommunicationLedger:
    """Rounds, bytes and scalars in each direction, per round (``model.communication_``)."""

    def __init__(self) -> None:
        self.records: list[RoundRecord] = []

    def record(self, kind: str, requests: dict[str, Message], replies: dict[str, Message]) -> None:
        """Count one round: the server's requests and the clients' replies."""
        down_bytes, down_scalars = _sizes(requests)
        up_bytes, up_scalars = _sizes(replies)
        self.records.append(
            RoundRecord(
                round=len(self.records),
                kind=kind,
                n_clients=len(requests),
                download_bytes=down_bytes,
                upload_bytes=up_bytes,
                download_scalars=down_scalars,
                upload_scalars=up_scalars,
            )
        )

    @property
    def rounds(self) -> int:
        """Number of synchronised rounds."""
        return len(self.records)

    def _total(self, name: str) -> int:
        return int(sum(getattr(r, name) for r in self.records))

    @property
    def upload_bytes(self) -> int:
        """Bytes sent by the clients to the server."""
        return self._total("upload_bytes")

    @property
    def download_bytes(self) -> int:
        """Bytes sent by the server to the clients."""
        return self._total("download_bytes")

    @property
    def upload_scalars(self) -> int:
        """Scalars sent by the clients to the server."""
        return self._total("upload_scalars")

    @property
    def download_scalars(self) -> int:
        """Scalars sent by the server to the clients."""
        return self._total("download_scalars")

    @property
    def total_megabytes(self) -> float:
        """Both directions, in MB (10^6 bytes)."""
        return (self.upload_bytes + self.download_bytes) / 1e6

    @property
    def per_round(self) -> pd.DataFrame:
        """One row a round."""
        cols = list(RoundRecord.__dataclass_fields__)
        return pd.DataFrame([r.__dict__ for r in self.records], columns=cols)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able copy (saved with the model)."""
        return {"records": [r.__dict__ for r in self.records]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CommunicationLedger:
        """Inverse of :meth:`to_dict`."""
        ledger = cls()
        ledger.records = [RoundRecord(**r) for r in data.get("records", [])]
        return ledger

    def __repr__(self) -> str:
        return (
            f"CommunicationLedger(rounds={self.rounds}, upload_bytes={self.upload_bytes}, "
            f"download_bytes={self.download_bytes}, upload_scalars={self.upload_scalars}, "
            f"download_scalars={self.download_scalars})"
        )


def expand_candidates(
    feat_off: NDArray[np.int64], feat_cand: NDArray[np.float64], pair_feat: NDArray[np.int32]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Every (node, feature) pair's candidates from one list per feature (``feat_cand``).

    ``binning="global"``: a feature has the same candidates at every node, so Round A
    carries them per feature and both sides expand them to the pairs the same way.
    """
    count = np.diff(feat_off)[pair_feat]
    cand_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum(count, out=cand_off[1:])
    at = np.repeat(feat_off[:-1][pair_feat] - cand_off[:-1], count)
    return cand_off, feat_cand[at + np.arange(int(cand_off[-1]))]


def protocol_mismatch(stated: object) -> str | None:
    """Why a peer's stated protocol version cannot work with this one (None: it can)."""
    if stated == PROTOCOL_VERSION and not isinstance(stated, bool):
        return None
    if stated is None:
        return (
            f"states no protocol version (a fedforest older than version {PROTOCOL_VERSION} of "
            "the messages); install the same fedforest release on the server and every client"
        )
    return (
        f"speaks protocol version {stated!r}, this side {PROTOCOL_VERSION}; install the same "
        "fedforest release on the server and every client"
    )
