"""Equal buckets between a pair's first and last candidate: its rows binned without a search.

:func:`~fedforest.federated.client_kernels.pair_bins` (the left statistics' binning of a
node's rows among one pair's ascending candidates; this is inlined into it) tries this
first: a
row's bucket ``floor((x - cs[0]) * m)``, clamped, is monotone in its value ``x``, so the
candidates of lower buckets lie below it and those of higher ones do not; the few in its
own bucket are compared. One table lookup and at most ``BUCKET_AMB`` comparisons a row,
where the row-wise count compared every candidate and the rank table was filled over every
distinct value between the first and last candidate. The bins are the same numbers,
``#{j: cs[j] < x}``, so every sum is too. Moved out of ``client_kernels`` (the layout's
800 lines).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "BUCKET_AMB",
    "BUCKET_WORK",
    "BUCKETS_MIN",
    "BUCKETS_PER_CAND",
    "bucket_bins",
    "bucket_of",
]

#: Pairs (ascending candidates) of at least ``BUCKET_WORK`` rows times candidates bin a
#: row by its bucket among ``BUCKETS_PER_CAND`` equal buckets a candidate (at least
#: ``BUCKETS_MIN``) between the first and last candidate; a pair one of whose buckets holds
#: more than ``BUCKET_AMB`` candidates is binned as before (``pair_bins``' other paths).
#: Measured on a 100k-row secure fit's calls (docs/benchmarks-history.md).
BUCKET_WORK = 256
BUCKETS_PER_CAND = 2
BUCKETS_MIN = 16
BUCKET_AMB = 3


@numba.njit(inline="always")
def bucket_of(x, a, m, top):  # type: ignore[no-untyped-def]
    """The bucket of value ``x``: ``(x - a) * m`` clamped into ``0..top``, truncated.

    Monotone in ``x`` (``m > 0`` finite, ``x`` not NaN): each step rounds monotonically,
    so ``x <= x'`` gives a bucket at most ``x'``'s.
    """
    return int(min(max((x - a) * m, 0.0), top))


@numba.njit(inline="always")
def bucket_bins(cs, c, xx, lut, gc, padded, bins):  # type: ignore[no-untyped-def]
    """``bins[k] = #{j: cs[j] < xx[k]}`` for the ``c`` rows, through equal buckets.

    ``cs`` ascending; ``lut`` (int32, at least ``max(BUCKETS_PER_CAND * nc, BUCKETS_MIN)``),
    ``gc`` (int64, ``nc``) and ``padded`` (float64, ``nc + BUCKET_AMB``) are scratch.
    Returns ``False`` (``bins`` unwritten) where a bucket holds more than ``BUCKET_AMB``
    candidates or the span ``cs[-1] - cs[0]`` is not positive and finite.
    """
    nc = cs.shape[0]
    n_b = max(BUCKETS_PER_CAND * nc, BUCKETS_MIN)
    width = cs[nc - 1] - cs[0]
    if not (width > 0.0 and width < np.inf):  # NaN too; a 0 * inf would not be monotone
        return False
    m = n_b / width
    if not m < np.inf:
        return False
    a, top = cs[0], float(n_b - 1)
    # gc[j]: candidate j's bucket (non-decreasing); k_amb: the most sharing one.
    k_amb = run = 0
    for j in range(nc):
        gc[j] = bucket_of(cs[j], a, m, top)
        run = run + 1 if j and gc[j] == gc[j - 1] else 1
        k_amb = max(k_amb, run)
    if k_amb > BUCKET_AMB:
        return False
    # lut[g]: the candidates in buckets below g (below every value of bucket g); the
    # rest of g's own follow them in cs and are compared, then later ones (above every
    # value of g, or the +inf padding) add nothing.
    for g in range(n_b):
        lut[g] = 0
    for j in range(nc):
        lut[gc[j]] += 1
    run = 0
    for g in range(n_b):
        n_g = lut[g]
        lut[g] = run
        run += n_g
    for j in range(nc):
        padded[j] = cs[j]
    for j in range(nc, nc + k_amb):
        padded[j] = np.inf
    if k_amb == 1:
        for k in range(c):
            x = xx[k]
            q = lut[bucket_of(x, a, m, top)]
            bins[k] = q + (padded[q] < x)
    elif k_amb == 2:  # unrolled: a loop of k_amb compares a row cost more
        for k in range(c):
            x = xx[k]
            q = lut[bucket_of(x, a, m, top)]
            bins[k] = q + (padded[q] < x) + (padded[q + 1] < x)
    elif k_amb == 3:
        for k in range(c):
            x = xx[k]
            q = lut[bucket_of(x, a, m, top)]
            bins[k] = q + (padded[q] < x) + (padded[q + 1] < x) + (padded[q + 2] < x)
    else:  # only if BUCKET_AMB is raised above 3
        for k in range(c):
            x = xx[k]
            q = lut[bucket_of(x, a, m, top)]
            acc = q
            for i in range(k_amb):
                acc += padded[q + i] < x
            bins[k] = acc
    return True
