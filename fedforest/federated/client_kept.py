"""Round B binned from Round A's bins under ``privacy="secure"`` (issue 14).

A level's Round B asks for the left statistics of the same pairs as its Round A, and
where its candidates come as ``cand_at`` (indices into Round A's grids,
:func:`~fedforest.federated.grid_wire.decode_candidates`) each is one of its pair's
Round A edges. Round A's kernel bins every row of a pair among those edges (``a``, the
edges below the row's value); where the edges do not descend, the edges below a value
are the first ``a``, so candidate ``t`` lies below the row exactly when ``t < a``. The
row's Round B bin is then ``tab[a]``, ``tab[i]`` the pair's candidates of index below
``i``: a count of the indices, no float compared, no value gathered, no edge decoded.

So Round A's kernel writes each pair's bins (one a row of its node: about 1.9 M a client
and level at 100,000 rows) into :class:`KeptBins`, in the narrowest type that holds the
level's longest grid's length (:func:`bins_dtype`; a bin is at most its grid's length),
which the client's :class:`~fedforest.federated.client_secure.SecureParty` holds until
Round B and then drops. It lives in the process only, never in
``SecureParty.to_state``: a client restored between the rounds (Flower's ClientApp in a
fresh process per message), a Round B of another level or fit, slots that changed, a pair
whose grid descends or a Round B sent with float candidates bins the rows as before (the
same words).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numba
import numpy as np
from numpy.typing import NDArray

from . import client_kernels, client_words, kernel_views
from .client_kernels import (
    add_to_bins,
    gather_counts,
    gather_node,
    pairs_setup,
    running_sums,
    twin_walk,
)
from .client_words import (
    add_words,
    packed_words,
    row_words,
    whole_words,
    zero_rows,
)
from .kernel_cache import cache_depends_on
from .kernel_views import borrowed, keep_alive
from .privacy.secagg import pack_counts, to_fixed

if TYPE_CHECKING:
    from .client import Client, _Fit

__all__ = [
    "KEPT_DONE",
    "KEPT_PAST",
    "KEPT_UNPACKED",
    "KEPT_UNUSABLE",
    "KeptBins",
    "bins_dtype",
    "keep_bins",
    "kept_words",
    "left_stats_kept",
    "left_stats_kept_numpy",
    "slot_digest",
]

# client_words' regression_words inlined here (a regression's Round B, a call a pair):
# as a call, Round B took about 6 % more time (bench_kernels.py --privacy secure,
# docs/benchmarks-history.md); the other sinks stay calls, compiled once for both kernels.
regression_words = numba.njit(inline="always")(client_words.regression_words.py_func)

#: :func:`left_stats_kept`'s answers: every candidate written; a sum that would not pack
#: (``packed_words``' ``False``); an index past its pair's grid (the server's error);
#: a pair whose kept bins cannot serve (not written, or its grid descends: bin anew).
KEPT_DONE, KEPT_UNPACKED, KEPT_PAST, KEPT_UNUSABLE = 0, 1, 2, 3


@dataclass
class KeptBins:
    """Round A's bins of one level, kept for its Round B (see the module's text).

    ``bins[off[p]:off[p + 1]]``: pair ``p``'s node's rows' bins among its grid's edges,
    in node order; ``ok[p]``: 1 where written and the grid does not descend. ``fit``,
    ``wire`` and ``pair_feat`` are the objects Round A binned for, ``slot`` a digest of
    its rows' slots (:func:`slot_digest`; a copy was 4 bytes per in-bag row and tree,
    12.6 MB a client of 100,000 rows and 50 trees, held by every client of a worker until
    its Round B): Round B uses the bins only while they are the same.
    """

    fit: Any
    wire: Any
    pair_feat: NDArray[np.int32]
    slot: bytes
    bins: NDArray[Any]  # bins_dtype of the level's grids
    off: NDArray[np.int64]
    ok: NDArray[np.uint8]

    def arrays(self) -> tuple[NDArray[Any], NDArray[np.int64], NDArray[np.uint8]]:
        """``left_stats_ranked``'s ``kept``, ``kept_off`` and ``kept_ok``."""
        return self.bins, self.off, self.ok

    def serves(self, fit: _Fit) -> bool:
        """Whether these are ``fit``'s bins of its current level (Round A's state unchanged)."""
        return (
            self.fit is fit
            and self.wire is fit.level_wire
            and self.pair_feat is fit.pair_feat
            and self.slot == slot_digest(fit.slot)
        )


def slot_digest(slot: NDArray[np.int32]) -> bytes:
    """A digest of the rows' slots (SHA-256: equal digests mean equal slots).

    Hashed at memory speed where the processor has SHA instructions (about 8 ms for 12.6
    MB here), where comparing with a kept copy of the slots held that copy.
    """
    data = np.ascontiguousarray(slot)
    head = f"{data.dtype.str}{data.shape}".encode()
    return head + hashlib.sha256(data.view(np.uint8).data).digest()


def bins_dtype(grid_off: NDArray[np.int64]) -> type[np.integer[Any]]:
    """The narrowest of uint8, uint16 and int32 that holds every bin among these grids.

    A row's bin counts the edges of its pair's grid below its value: at most the grid's
    length, ``grid_off[p + 1] - grid_off[p]``.
    """
    longest = int(np.diff(grid_off).max(initial=0))
    for dtype in (np.uint8, np.uint16):
        if longest <= np.iinfo(dtype).max:
            return dtype
    if longest > np.iinfo(np.int32).max:
        raise ValueError(f"A grid of {longest} edges: more than int32 bins can count.")
    return np.int32


def keep_bins(fit: _Fit, grid_off: NDArray[np.int64]) -> KeptBins:
    """Room for the bins of every pair of ``fit``'s level among Round A's ``grid_off`` grids."""
    assert fit.pair_off is not None and fit.pair_feat is not None
    pair_off = np.asarray(fit.pair_off, dtype=np.int64)
    n_slots = pair_off.size - 1
    node_rows = np.bincount(fit.slot[fit.slot >= 0], minlength=n_slots)[:n_slots]
    off = np.zeros(int(pair_off[-1]) + 1, dtype=np.int64)
    np.cumsum(np.repeat(node_rows, np.diff(pair_off)), out=off[1:])
    bins = np.empty(int(off[-1]), dtype=bins_dtype(grid_off))
    ok = np.zeros(off.size - 1, dtype=np.uint8)
    return KeptBins(fit, fit.level_wire, fit.pair_feat, slot_digest(fit.slot), bins, off, ok)


@numba.njit(nogil=True, cache=True)
def left_stats_kept(
    rows, w, slot, y, n_classes, pair_off, cand_off, at, grid_off, kept, kept_off, kept_ok,
    slot_lo, slot_hi, out, scale=None,
):  # fmt: skip
    """``left_stats_ranked``'s output at candidates given as indices into Round A's grids.

    Each row's bin among pair ``p``'s candidates is ``tab[kept[...]]``, ``tab[i]`` the
    candidates ``j`` with ``at[j] < i``; the rows' statistics are then added to their bins
    and summed (or written as words, given ``scale``) exactly as ``left_stats_ranked``
    does, so the output is the same, bit for bit, as binning the decoded candidates.

    Parameters
    ----------
    rows, w, slot, y, n_classes, pair_off, cand_off, slot_lo, slot_hi, out, scale : as
        ``client_kernels.left_stats_ranked``  # IN (out: OUT)
    at : ndarray of int64, shape (n_candidates,)  # IN: candidate ``j`` of pair ``p`` is
        edge ``at[j]`` of the pair's Round A grid
    grid_off : ndarray of int64, shape (n_pairs + 1,)  # IN: Round A's grid offsets
    kept, kept_off, kept_ok : as ``left_stats_ranked`` wrote them in Round A (``kept``
        uint8, uint16 or int32: :func:`bins_dtype`)  # IN

    Returns
    -------
    status : int
        ``KEPT_DONE``; ``KEPT_UNPACKED`` (a sum would not pack), ``KEPT_PAST`` (an index
        outside its pair's grid) or ``KEPT_UNUSABLE`` (a pair's bins not kept), the first
        met pair by pair: ``out`` then partly written.
    """
    n_stat = out.shape[1]
    if scale is not None:  # the rows and the weight share the first word
        n_stat += 1
    order, start, ii, st, cls, c0, max_nc, hist, acc = pairs_setup(
        rows, slot, slot_lo, slot_hi, n_classes, pair_off, cand_off, n_stat
    )
    max_na = 0
    for p in range(pair_off[slot_lo], pair_off[slot_hi]):
        max_na = max(max_na, grid_off[p + 1] - grid_off[p])
    tab = np.empty(max_na + 1, dtype=np.int64)
    bins = np.empty(ii.shape[0], dtype=np.int64)
    words = np.empty(max_nc + 1, dtype=np.uint64)
    row_word = np.empty(ii.shape[0], dtype=np.uint64)
    # As in left_stats_ranked: views numba does not reference-count (the arguments, and
    # the scratch kept alive to every return).
    scratch = (order, start, ii, st, cls, hist, acc, tab, bins, words, row_word)
    order, start, ii, st = borrowed(order), borrowed(start), borrowed(ii), borrowed(st)
    cls, hist, acc, tab = borrowed(cls), borrowed(hist), borrowed(acc), borrowed(tab)
    bins, words, row_word = borrowed(bins), borrowed(words), borrowed(row_word)
    rows, w, slot, y = borrowed(rows), borrowed(w), borrowed(slot), borrowed(y)
    pair_off, cand_off, at = borrowed(pair_off), borrowed(cand_off), borrowed(at)
    grid_off, kept, kept_off = borrowed(grid_off), borrowed(kept), borrowed(kept_off)
    kept_ok, out = borrowed(kept_ok), borrowed(out)
    for s in range(slot_lo, slot_hi):
        a, b = start[s - slot_lo], start[s - slot_lo + 1]
        c = b - a
        if n_stat == 2:
            gather_counts(order, a, c, rows, w, ii, st)
        else:
            gather_node(order, a, c, rows, w, y, n_classes, ii, st, cls)
        whole = False
        if scale is not None:
            whole = row_words(st, c, scale, row_word)
        for p in range(pair_off[s], pair_off[s + 1]):
            nc = cand_off[p + 1] - cand_off[p]
            if nc == 0:
                continue
            lo = cand_off[p]
            na = grid_off[p + 1] - grid_off[p]
            if c == 0:  # the sums of no rows, the indices and the bins checked as below
                for j in range(lo, lo + nc):
                    if at[j] < 0 or at[j] >= na:
                        keep_alive(scratch)
                        return KEPT_PAST
                if kept_ok[p] != 1 or kept_off[p + 1] != kept_off[p]:
                    keep_alive(scratch)
                    return KEPT_UNUSABLE
                zero_rows(out, lo - c0, nc)
                continue
            for i in range(na + 1):
                tab[i] = 0
            for j in range(lo, lo + nc):
                t = at[j]
                if t < 0 or t >= na:
                    keep_alive(scratch)
                    return KEPT_PAST
                tab[t + 1] += 1
            if kept_ok[p] != 1 or kept_off[p + 1] - kept_off[p] != c:
                keep_alive(scratch)
                return KEPT_UNUSABLE
            for i in range(na):
                tab[i + 1] += tab[i]
            kp = kept_off[p]
            for k in range(c):
                bins[k] = tab[kept[kp + k]]
            # From here as left_stats_ranked: the same sums in the same order.
            if scale is not None:  # pruned at compile time (scale's type)
                if whole and n_stat == 4 and n_classes == 0:  # a regression's words
                    if not regression_words(
                        words, hist, row_word, bins, st, c, nc, lo - c0, out, scale
                    ):
                        keep_alive(scratch)
                        return KEPT_UNPACKED
                    continue
            if whole:
                for j in range(nc + 1):
                    words[j] = 0
                    for q in range(2, n_stat):
                        hist[j, q] = 0.0
                add_words(words, hist, row_word, bins, st, cls, c, n_stat, n_classes)
            else:
                for j in range(nc + 1):
                    for q in range(n_stat):
                        hist[j, q] = 0.0
                add_to_bins(hist, bins, st, cls, c, n_stat, n_classes)
            if scale is None:
                running_sums(hist, nc, lo - c0, out)
            elif whole:
                if not whole_words(words, hist, nc, lo - c0, out, acc, scale):
                    keep_alive(scratch)
                    return KEPT_UNPACKED
            elif not packed_words(hist, nc, lo - c0, out, acc, scale):
                keep_alive(scratch)
                return KEPT_UNPACKED
    keep_alive(scratch)
    return KEPT_DONE


# Its cached code holds client_kernels' gathering and sums and client_words' sinks.
cache_depends_on(left_stats_kept, client_words, client_kernels, kernel_views)


def left_stats_kept_numpy(
    rows: NDArray[np.int32], w: NDArray[np.float64], slot: NDArray[np.int32],
    y: NDArray[np.float64], n_classes: int, pair_off: NDArray[np.int64],
    cand_off: NDArray[np.int64], at: NDArray[np.int64], grid_off: NDArray[np.int64],
    kept: NDArray[Any], kept_off: NDArray[np.int64], kept_ok: NDArray[np.uint8],
    slot_lo: int, slot_hi: int, out: NDArray[Any], scale: NDArray[np.float64] | None = None,
) -> int:  # fmt: skip
    """NumPy twin of :func:`left_stats_kept` (``tab`` by a sort and ``searchsorted``)."""
    node_rows = np.bincount(slot[slot >= 0], minlength=slot_hi)
    for s in range(slot_lo, slot_hi):
        for p in range(int(pair_off[s]), int(pair_off[s + 1])):
            t, na = at[cand_off[p] : cand_off[p + 1]], grid_off[p + 1] - grid_off[p]
            if t.size and (t.min() < 0 or t.max() >= na):
                return KEPT_PAST
            if t.size and (kept_ok[p] != 1 or kept_off[p + 1] - kept_off[p] != node_rows[s]):
                return KEPT_UNUSABLE

    def bins_of(p: int, r: NDArray[np.int32]) -> NDArray[np.int64]:
        t = np.sort(at[cand_off[p] : cand_off[p + 1]])
        tab = np.searchsorted(t, np.arange(grid_off[p + 1] - grid_off[p] + 1), side="left")
        return np.asarray(tab[kept[kept_off[p] : kept_off[p + 1]]], dtype=np.int64)

    stats = out if scale is None else np.empty((out.shape[0], out.shape[1] + 1))
    twin_walk(bins_of, rows, w, slot, y, n_classes, pair_off, cand_off, slot_lo, slot_hi, stats)
    if scale is None:
        return KEPT_DONE
    try:
        out[:] = pack_counts(to_fixed(stats * scale, 0), "twin")
    except ValueError:
        return KEPT_UNPACKED
    return KEPT_DONE


def kept_words(
    client: Client,
    fit: _Fit,
    kept: KeptBins,
    at: NDArray[np.int64],
    cand_off: NDArray[np.int64],
    scale: NDArray[np.float64],
    out: NDArray[np.uint64],
) -> int:
    """:func:`left_stats_kept` per block of trees (in threads, as the client's kernels).

    Returns the worst status of the blocks (``KEPT_UNUSABLE`` over ``KEPT_PAST``: the
    caller then decodes and bins as before, which refuses such an index itself); raises
    for an index past its pair's grid.
    """
    assert fit.pair_off is not None and fit.slot_tree is not None
    assert fit.level_grid_off is not None
    pair_off, slot_tree, grid_off = fit.pair_off, fit.slot_tree, fit.level_grid_off
    y = fit.y
    statuses: list[int] = []

    def job(a: int, b: int) -> None:
        s_lo, s_hi = int(slot_tree[a]), int(slot_tree[b])
        r = slice(int(fit.tree_rows[a]), int(fit.tree_rows[b]))
        lo, hi = cand_off[pair_off[s_lo]], cand_off[pair_off[s_hi]]
        statuses.append(
            left_stats_kept(
                fit.rows[r],
                fit.w[r],
                fit.slot[r],
                y,
                fit.n_classes,
                pair_off,
                cand_off,
                at,
                grid_off,
                *kept.arrays(),
                s_lo,
                s_hi,
                out[lo:hi],
                scale,
            )  # fmt: skip
        )

    client._run_blocks(fit, job)
    status = max(statuses, default=KEPT_DONE)
    if status == KEPT_PAST:
        raise ValueError(
            f"Client {client.name!r}: cand_at from the server points past its node's grid."
        )
    return status
