"""Under ``privacy="secure"``: a pair the rule left without candidates tries its ancestors'.

A node's candidates are its pooled quantiles kept ``m`` rows apart
(``privacy.rules.secure_candidates``), then checked against every ancestor's releases on
the feature (``privacy.rules.safe_from_ancestors``). In a small node the quantiles can
all fall within ``m`` rows of an ancestor's threshold and be dropped although the
ancestor's threshold itself (on the node grid: the node grids hold the ancestors'
thresholds) splits the node into two sides of at least ``m`` rows and differences with
the ancestor into nothing or into ``m`` rows or more. Measured: 20,000 uniform rows,
``y = 1`` on ``0.001 < x < 0.002`` (14 rows), ``m = 10``: a node ``x <= 0.00305`` of 43
rows had the single quantile candidate 0.00093 (17 rows left), 9 rows below the parent's
released 0.00163 (26 rows), so it was dropped and the node became a leaf; 0.00163 (26 |
17 rows, the parent's own sum on the left) was never tried, and the band went unfound.

:func:`with_ancestor_candidates` gives such pairs (no candidate kept) the ancestors'
thresholds inside the node on the node grid, kept ``m`` rows apart from the node's edges
and each other, and checks them with the same ``safe_from_ancestors``; a pair that kept a
candidate is left as it is.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from ..kernel_cache import cache_depends_on
from ..privacy.intervals import safe_from_ancestors
from . import sorted_search
from .secure_segments import offsets, ranges
from .sorted_search import search_left, sort_floats

__all__ = ["spaced_thresholds", "spaced_thresholds_numpy", "with_ancestor_candidates"]


@numba.njit(nogil=True, cache=True)
def spaced_thresholds(  # type: ignore[no-untyped-def]
    pairs, grid, grid_off, rows, anc, anc_off, lo, hi, total, m, out, n_out
):
    """Per listed pair, its ancestors' thresholds on its grid, ``m`` rows apart.

    A pair's thresholds inside ``(lo, hi)`` that are edges of its grid, from the left,
    each ``m`` rows past the last kept and ``m`` rows short of the total. Writes them to
    ``out`` (room for every ancestor threshold of the pairs) and their number per pair to
    ``n_out``; returns how many were written.
    """
    pos = 0
    for k in range(pairs.size):
        p = pairs[k]
        thr = anc[anc_off[p] : anc_off[p + 1], 0].copy()
        sort_floats(thr)  # thr.sort(), without compiling numba's quicksort here
        g = grid[grid_off[p] : grid_off[p + 1]]
        r = rows[grid_off[p] : grid_off[p + 1]]
        last = 0.0
        start = pos
        for i in range(thr.size):
            t = thr[i]
            if not (t > lo[p] and t < hi[p]) or (i > 0 and t == thr[i - 1]):
                continue
            j = search_left(grid, grid_off[p], grid_off[p + 1], t) - grid_off[p]
            if j >= g.size or g[j] != t:
                continue
            if r[j] - last >= m and total[p] - r[j] >= m:
                out[pos] = t
                pos += 1
                last = r[j]
        n_out[k] = pos - start
    return pos


# its disk cache stamped with the helper it calls (numba stamps its own file only)
cache_depends_on(spaced_thresholds, sorted_search)


def spaced_thresholds_numpy(
    pairs: NDArray[np.int64],
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    rows: NDArray[np.float64],
    anc: NDArray[np.float64],
    anc_off: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    total: NDArray[np.float64],
    m: float,
    out: NDArray[np.float64],
    n_out: NDArray[np.int64],
) -> int:
    """NumPy twin of :func:`spaced_thresholds` (the same answer, pair by pair)."""
    pos = 0
    for k, p in enumerate(pairs):
        g, r = grid[grid_off[p] : grid_off[p + 1]], rows[grid_off[p] : grid_off[p + 1]]
        thr = anc[anc_off[p] : anc_off[p + 1], 0]
        thr = np.unique(thr[(thr > lo[p]) & (thr < hi[p])])
        j = np.searchsorted(g, thr)
        on = j < g.size
        on[on] = g[j[on]] == thr[on]
        last, start = 0.0, pos
        for t, rj in zip(thr[on], r[j[on]], strict=True):
            if rj - last >= m and total[p] - rj >= m:
                out[pos], pos, last = t, pos + 1, rj
        n_out[k] = pos - start
    return pos


def with_ancestor_candidates(
    cands: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    safe: NDArray[np.bool_],
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    rows: NDArray[np.float64],
    anc: NDArray[np.float64],
    anc_off: NDArray[np.int64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    total: NDArray[np.float64],
    m: int,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.bool_]]:
    """``(cands, cand_off, safe)`` with the ancestors' thresholds added where none was kept.

    The arguments are ``safe_from_ancestors``' (one segment per pair), plus its answer
    ``safe``. The added candidates follow a pair's own (all unsafe) in its segment.
    """
    n_pairs = cand_off.size - 1
    owner = np.repeat(np.arange(n_pairs), np.diff(cand_off))
    kept = np.bincount(owner[safe], minlength=n_pairs)
    pairs = np.flatnonzero((kept == 0) & (np.diff(anc_off) > 0))
    if not pairs.size:
        return cands, cand_off, safe
    # These pairs' releases only, one row after another for the kernel (``anc`` may hold
    # its columns apart, uncopied: secure_ancestors.py).
    n_anc = np.zeros(n_pairs, dtype=np.int64)
    n_anc[pairs] = anc_off[pairs + 1] - anc_off[pairs]
    anc = np.ascontiguousarray(anc[ranges(anc_off[pairs], anc_off[pairs + 1])], dtype=np.float64)
    anc_off = offsets(n_anc)
    out = np.empty(anc.shape[0])
    n_extra = np.zeros(pairs.size, dtype=np.int64)
    n_new = spaced_thresholds(
        pairs, grid, grid_off, rows, anc, anc_off, lo, hi, total, float(m), out, n_extra
    )
    if not n_new:
        return cands, cand_off, safe
    pairs, n_extra, new = pairs[n_extra > 0], n_extra[n_extra > 0], out[:n_new]
    g_take = ranges(grid_off[pairs], grid_off[pairs + 1])
    a_take = ranges(anc_off[pairs], anc_off[pairs + 1])
    new_safe = safe_from_ancestors(
        new,
        offsets(n_extra),
        grid[g_take],
        offsets(grid_off[pairs + 1] - grid_off[pairs]),
        rows[g_take],
        anc[a_take],
        offsets(anc_off[pairs + 1] - anc_off[pairs]),
        lo[pairs],
        hi[pairs],
        total[pairs],
        m,
    )
    at = np.repeat(cand_off[pairs + 1], n_extra)
    added = np.zeros(n_pairs, dtype=np.int64)
    added[pairs] = n_extra
    out_off = cand_off + offsets(added)
    return np.insert(cands, at, new), out_off, np.insert(safe, at, new_safe)
