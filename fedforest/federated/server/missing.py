"""Missing values (NaN) at numeric splits: one more candidate, and both sides tried.

A client holds a missing value as +inf, so every candidate's left statistics leave it out
(it lies right of every finite threshold). For a (node, feature) pair whose feature has a
missing value somewhere in the federation, the server appends :data:`MISSING_SPLIT`, the
largest float, as the pair's last candidate: its left statistics are those of the rows
whose value is known, so the node's statistics minus them are the missing rows'
(``M``), one more aggregate like any other candidate's. Then every other candidate is
evaluated twice, missing rows right (its left statistics as they are) and left (plus
``M``), and the better kept (scikit-learn's and XGBoost's rule); ``MISSING_SPLIT`` itself
is the split "value known | value missing". The chosen side is stored per node
(``missing_go_to_left``) and routing follows it. A pair without missing rows in the node
sends them, at prediction, to the child with more rows, as scikit-learn does; a pair whose
missing rows were not released (too few under ``privacy="secure"``) keeps them right,
where its statistics counted them.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS

__all__ = [
    "MISSING_SPLIT",
    "add_missing_candidates",
    "few_known_above",
    "with_missing_sides",
]

#: Threshold of the split "value known (left) | missing (right)": every finite value is
#: at most it, a missing one (+inf at the clients) above it.
MISSING_SPLIT = float(np.finfo(np.float64).max)

#: ``missing_side`` codes: where a candidate sends the missing rows.
RIGHT, LEFT, LARGER = 0, 1, -1


def add_missing_candidates(
    cand_off: NDArray[np.int64], cand: NDArray[np.float64], extra: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Append :data:`MISSING_SPLIT` to the candidates of the pairs where ``extra`` holds."""
    if not extra.any():
        return cand_off, cand
    counts = np.diff(cand_off) + extra
    off = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    out = np.full(int(off[-1]), MISSING_SPLIT)
    keep = np.ones(out.size, dtype=bool)
    keep[off[1:][extra] - 1] = False  # the last slot of every extended pair
    out[keep] = cand
    return off, out


def with_missing_sides(
    parent: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_missing: NDArray[np.bool_],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    left: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.int8]]:
    """Candidates with missing rows sent right, and copies with them sent left.

    Parameters
    ----------
    parent : ndarray of float64, shape (n_nodes, n_stats)
    pair_off : ndarray of int64, shape (n_nodes + 1,)
    pair_missing : ndarray of bool, shape (n_pairs,)
        The pair's feature has a missing value somewhere in the federation.
    cand_off, cand, left : the numeric candidates and their pooled left statistics

    Returns
    -------
    cand_off, cand, left, missing_side
        Per pair, its candidates (missing right), then for a pair whose missing rows are
        known and not empty a copy of each but :data:`MISSING_SPLIT` with them left.
        ``missing_side`` is RIGHT (0), LEFT (1) or LARGER (-1: no missing row in training,
        the child with more rows at prediction).
    """
    n_pairs = cand_off.size - 1
    count = np.diff(cand_off)
    cand_pair = np.repeat(np.arange(n_pairs), count)
    side_of_pair = np.where(pair_missing, RIGHT, LARGER).astype(np.int8)
    last = np.maximum(cand_off[1:] - 1, 0)
    has = (count > 0) & (cand[last] == MISSING_SPLIT) if cand.size else count > 0
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
    gone = np.zeros((n_pairs, parent.shape[1]))
    gone[has] = parent[pair_node[has]] - left[last[has]]
    evaluated = has & (gone[:, STAT_ROWS] > 0)
    side_of_pair[has & ~evaluated] = LARGER
    if not evaluated.any():
        return cand_off, cand, left, side_of_pair[cand_pair]
    src = np.flatnonzero(evaluated[cand_pair] & (cand != MISSING_SPLIT))
    idx = np.concatenate([np.arange(cand.size), src])
    pair_of = cand_pair[idx]
    order = np.lexsort((np.arange(idx.size), pair_of))  # by pair; copies after originals
    copy = np.zeros(idx.size, dtype=bool)
    copy[cand.size :] = True
    out_left = left[idx]
    out_left[copy] += gone[pair_of[copy]]
    side = np.concatenate([side_of_pair[cand_pair], np.full(src.size, LEFT, np.int8)])
    out_off = np.zeros(n_pairs + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair_of, minlength=n_pairs), out=out_off[1:])
    return out_off, cand[idx][order], out_left[order], side[order]


def few_known_above(
    grid: NDArray[np.float64],
    grid_off: NDArray[np.int64],
    cum_rows: NDArray[np.float64],
    cand: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    below: NDArray[np.float64],
    min_rows: int,
) -> NDArray[np.bool_]:
    """Candidates leaving 1 to ``min_rows - 1`` known rows of the node above them.

    Under ``privacy="secure"``, per pair whose grid ends at :data:`MISSING_SPLIT` (its
    count there: the node's rows that know the value): a candidate's rows below it
    (``below``) against them. Another column missing on the same rows releases the
    node's sum over its known rows at its own "value known | missing" edge, so such a
    candidate's sum would leave those few rows to the server (docs/privacy.md, "Copies
    of a column"); the rule on a pair's own candidates spaces them from the node's total,
    missing rows included. ``MISSING_SPLIT`` itself is never one. Round B applies it to
    the features whose missing values nest with another's (``copies.nested_pairs``).
    """
    if grid.size == 0:  # no pair with a grid (every node too small, say)
        return np.zeros(cand.size, dtype=bool)
    last = grid_off[1:] - 1
    edge = (grid_off[1:] > grid_off[:-1]) & (grid[np.maximum(last, 0)] == MISSING_SPLIT)
    known = np.where(edge, cum_rows[np.maximum(last, 0)], np.inf)
    gap = np.repeat(known, np.diff(cand_off)) - below
    return np.asarray((cand != MISSING_SPLIT) & (gap > 0.5) & (gap < min_rows - 0.5))
