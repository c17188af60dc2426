"""The sinks of the secure left statistics: a pair's running sums as the words a client sends.

:func:`~fedforest.federated.client_kernels.left_stats_ranked`, given a ``scale``, ends
each pair here (numba functions of their own, not inlined: compiled once per argument
types, not again inside each kernel): :func:`packed_words` writes the running sums of its
float histogram as ``secagg.to_fixed_packed`` would; in a node whose weights are whole
(bootstrap counts: :func:`row_words`) the rows and weight are added as one integer word
per row instead (:func:`add_words`, :func:`whole_words`), the same words with one add a
row and an edge in place of two float sums, their encoding and checks. Moved out of
``client_kernels`` (the layout's 800 lines).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload

from .kernel_cache import inner_kernel
from .privacy.secagg import HALF_BITS

__all__ = [
    "add_words",
    "bins_store",
    "count_words",
    "packed_words",
    "regression_words",
    "row_words",
    "whole_words",
    "zero_rows",
]

#: ``secagg._LIMIT``: a value whose magnitude reaches it is refused (2^62).
_LIMIT = float(2**62)


@inner_kernel
def packed_words(hist, nc, k, out, acc, scale):  # type: ignore[no-untyped-def]
    """A pair's running sums (``client_kernels.running_sums``) as the words a secure answer sends.

    Each row encoded as ``to_fixed_packed`` does: ``rint`` of the sum times its ``scale``,
    checked; the rows in the low half-word of the first word, the weight in the high; the
    other columns one word each. ``False`` where that encoding would refuse a sum.
    """
    a0 = a1 = 0.0  # the rows and the weight: one word
    for q in range(2, hist.shape[1]):
        acc[q] = 0.0
    for j in range(nc):
        a0 += hist[j, 0]
        a1 += hist[j, 1]
        x0, x1 = a0 * scale[0], a1 * scale[1]
        if not (abs(x0) < _LIMIT and abs(x1) < _LIMIT):
            return False
        u, v = np.int64(np.rint(x0)), np.int64(np.rint(x1))
        if not _sum_words(hist, j, k, out, acc, scale):
            return False
        if u < 0 or v < 0 or u >> HALF_BITS or v >> HALF_BITS:
            return False
        out[k + j, 0] = np.uint64(u) | (np.uint64(v) << np.uint64(HALF_BITS))
    return True


@numba.njit(inline="always")
def _sum_words(hist, j, k, out, acc, scale):  # type: ignore[no-untyped-def]
    """Row ``j``'s running sums of the columns after the rows and weight, one word each."""
    for q in range(2, hist.shape[1]):
        acc[q] += hist[j, q]
        x = acc[q] * scale[q]
        if not abs(x) < _LIMIT:
            return False
        out[k + j, q - 1] = np.uint64(np.int64(np.rint(x)))
    return True


@inner_kernel
def row_words(st, c, scale, row_word):  # type: ignore[no-untyped-def]
    """Each gathered row's rows and weight as one word, ``1 + w * 2^32`` (:func:`packed_words`).

    Only where every sum of them is exact and packs: the counts' scales 1, every weight
    whole and >= 0, the node's weight and rows below ``2^32``; ``False`` else (the node's
    counts are then summed as floats).
    """
    if scale[0] != 1.0 or scale[1] != 1.0 or c >= 2**HALF_BITS:
        return False
    total = 0.0
    for k in range(c):
        wk = st[k, 1]
        if not (wk >= 0.0 and wk == np.floor(wk)):  # NaN too
            return False
        total += wk
    if not total < 2.0**HALF_BITS:
        return False
    for k in range(c):
        row_word[k] = np.uint64(1) + (np.uint64(np.int64(st[k, 1])) << np.uint64(HALF_BITS))
    return True


@inner_kernel
def add_words(words, hist, row_word, bins, st, cls, c, n_stat, n_classes):  # type: ignore[no-untyped-def]
    """:func:`add_to_bins` with the rows and weight added as one word (:func:`row_words`).

    The other columns are added as floats in row order, as there.
    """
    if n_stat == 2:
        for k in range(c):
            words[bins[k]] += row_word[k]
    elif n_classes == 0:  # one pass: each column's additions still in row order
        for k in range(c):
            b = bins[k]
            words[b] += row_word[k]
            hist[b, 2] += st[k, 2]
            hist[b, 3] += st[k, 3]
    else:
        for k in range(c):
            b = bins[k]
            words[b] += row_word[k]
            hist[b, cls[k]] += st[k, 1]


@inner_kernel
def count_words(words, row_word, bins, c, nc, k, out):  # type: ignore[no-untyped-def]
    """:func:`add_words` then :func:`whole_words` of the counts alone (``n_stat`` 2).

    Round A's grids under ``"secure"``: the pair's ``c`` rows' words (:func:`row_words`)
    added to their bins and the running sums written to ``out[k:k + nc, 0]``, the same
    words. A branch of its own in the kernel: through the general sinks (a loop over no
    float columns per edge, their checks) the pairs took about a quarter more time at the
    papers' scale (docs/benchmarks-history.md).
    """
    for j in range(nc + 1):
        words[j] = 0
    for i in range(c):
        words[bins[i]] += row_word[i]
    run = np.uint64(0)
    for j in range(nc):
        run += words[j]
        out[k + j, 0] = run


@numba.njit(nogil=True, cache=True)
def regression_words(words, hist, row_word, bins, st, c, nc, k, out, scale):  # type: ignore[no-untyped-def]
    """:func:`add_words` then :func:`whole_words` of a regression's statistics (``n_stat`` 4).

    Round B under ``"secure"``: the rows and weight as one word a row, ``w y`` and
    ``w y^2`` as floats, each column's additions and running sums in row and edge order
    and each edge's words checked and written in the order :func:`whole_words` takes:
    the same words, and ``False`` where it would refuse. Its two columns named, not looped
    over (the general sinks' loop over the columns per edge took about a third of the
    kernel's time at the papers' scale: docs/benchmarks-history.md).
    """
    for j in range(nc + 1):
        words[j] = 0
        hist[j, 2] = 0.0
        hist[j, 3] = 0.0
    for i in range(c):
        b = bins[i]
        words[b] += row_word[i]
        hist[b, 2] += st[i, 2]
        hist[b, 3] += st[i, 3]
    run = np.uint64(0)
    a2 = a3 = 0.0
    s2, s3 = scale[2], scale[3]
    for j in range(nc):
        run += words[j]
        a2 += hist[j, 2]
        x2 = a2 * s2
        if not abs(x2) < _LIMIT:
            return False
        out[k + j, 1] = np.uint64(np.int64(np.rint(x2)))
        a3 += hist[j, 3]
        x3 = a3 * s3
        if not abs(x3) < _LIMIT:
            return False
        out[k + j, 2] = np.uint64(np.int64(np.rint(x3)))
        out[k + j, 0] = run
    return True


@inner_kernel
def whole_words(words, hist, nc, k, out, acc, scale):  # type: ignore[no-untyped-def]
    """:func:`packed_words` of :func:`add_words`' sums: the same words.

    The counts' running sums are exact whole numbers below ``2^32`` in both.
    """
    run = np.uint64(0)
    for q in range(2, hist.shape[1]):
        acc[q] = 0.0
    for j in range(nc):
        run += words[j]
        if not _sum_words(hist, j, k, out, acc, scale):
            return False
        out[k + j, 0] = run
    return True


@numba.njit(inline="always")
def zero_rows(out, k, nc):  # type: ignore[no-untyped-def]
    """A pair of a node without rows here: its ``nc`` rows of ``out`` from ``k``, all zero.

    What the sinks write for it (every sum 0: the float ``0.0``, the word ``0``), without
    binning no rows among its candidates: under ``"secure"`` a client answers every pair of
    the level, most of them (deep levels) in nodes it holds no rows of.
    """
    for j in range(nc):
        for q in range(out.shape[1]):
            out[k + j, q] = 0


def bins_store(kept, bins):  # type: ignore[no-untyped-def]
    """``bins`` where ``kept`` is None, else ``kept``: the array a pair's bins go to.

    Resolved by type when numba compiles a call (``left_stats_ranked`` writes Round A's
    bins straight into the kept ones, uint8 to int32, or into its int64 scratch).
    """
    return bins if kept is None else kept


@overload(bins_store, inline="always")
def _bins_store(kept, bins):  # type: ignore[no-untyped-def]
    if isinstance(kept, (types.NoneType, types.Omitted)):
        return lambda kept, bins: bins
    return lambda kept, bins: kept
