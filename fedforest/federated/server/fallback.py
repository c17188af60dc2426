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

import numpy as np
from numpy.typing import NDArray

from ..privacy.intervals import safe_from_ancestors
from .secure_grids import offsets, ranges

__all__ = ["with_ancestor_candidates"]


def _spaced(thr: NDArray[np.float64], grid: NDArray[np.float64], rows: NDArray[np.float64],
            total: float, m: int) -> list[float]:  # fmt: skip
    """``thr`` on ``grid``, from the left, each ``m`` rows past the last and short of the end."""
    kept: list[float] = []
    last = 0.0
    for t in np.unique(thr):
        j = int(np.searchsorted(grid, t))
        if j >= grid.size or grid[j] != t:
            continue
        if rows[j] - last >= m and total - rows[j] >= m:
            kept.append(float(t))
            last = float(rows[j])
    return kept


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
    extra: list[list[float]] = []
    for p in pairs:
        g, r = grid[grid_off[p] : grid_off[p + 1]], rows[grid_off[p] : grid_off[p + 1]]
        thr = anc[anc_off[p] : anc_off[p + 1], 0]
        extra.append(_spaced(thr[(thr > lo[p]) & (thr < hi[p])], g, r, float(total[p]), m))
    n_extra = np.array([len(e) for e in extra], dtype=np.int64)
    if not n_extra.sum():
        return cands, cand_off, safe
    pairs, extra = pairs[n_extra > 0], [e for e in extra if e]
    n_extra = n_extra[n_extra > 0]
    new = np.concatenate([np.asarray(e) for e in extra])
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
