"""Category codes that few rows of the federation hold, merged before any node's count.

Under ``privacy="secure"`` Round A releases, per node and sampled categorical feature, each
code's pooled rows (the category groups and the rules across levels read them). A code
that one row of the federation holds (a declared level no other row holds, or the missing
category that a rare undeclared level is sent as) then follows that row down every tree
that drew it, and the boxes of those nodes single it out (docs/privacy-findings.md, "Red
team 8"). So the first grid round pools each categorical column's rows per code (masked,
over every row: per fit, not per tree, since the roots' counts would already say which
trees drew the row), and the set-up sends, for a column with codes held by 1 to ``m - 1``
rows, a map of codes the clients apply before any Round A: those codes (with the missing
category when it is itself that rare or empty) join the missing category when together
they reach ``m`` rows, else the column's most frequent code. Every code then holds 0 or at
least ``m`` rows of the federation. A merged code keeps its place in the lists (no rows in
any node), and each set split sends it where its rows went (:func:`with_merged_codes`).
A column without such codes gets no map: its forest is unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..domains import MISSING_CATEGORY
from ..privacy.rules import group_categories
from .checks import bad_count_blocks

__all__ = ["check_code_counts", "code_maps", "groupless_columns", "with_merged_codes"]


def check_code_counts(counts: NDArray[np.float64], sizes: list[int], n_rows: float) -> None:
    """The grid round's pooled rows per code, checked.

    Whole, non-negative, each column's adding up to the rows the clients declared. A
    violation means some client lied (secure aggregation hides which).
    """
    bad = bad_count_blocks(counts, sizes, n_rows)
    if bad:
        raise ValueError(
            f"The pooled rows per category code of the grid round (categorical column {bad[0]} "
            f"of the request's code_counts) are not whole non-negative counts adding up to the "
            f"{n_rows:.0f} rows of the clients: some client sent counts that no rows have "
            "(secure aggregation hides which)."
        )


def code_maps(
    counts: NDArray[np.float64], columns: list[int], categories: dict[str, list[Any]], m: int
) -> dict[int, NDArray[np.int64]]:
    """Per categorical column with a code of 1 to ``m - 1`` rows, each code's merged code.

    ``counts``: the pooled rows per code, column after column (``columns``, in order),
    each of ``len(categories[str(j)])`` codes.
    """
    maps: dict[int, NDArray[np.int64]] = {}
    at = 0
    for j in columns:
        levels = categories[str(j)]
        c = counts[at : at + len(levels)]
        at += len(levels)
        few = (c > 0) & (c < m)
        if not few.any():
            continue
        miss = levels.index(MISSING_CATEGORY) if MISSING_CATEGORY in levels else -1
        if miss >= 0 and c[miss] < m:
            few[miss] = True  # empty or rare itself: it joins the merged codes
        if c[few].sum() >= m:  # the missing category (or the merged codes' first)
            target = miss if miss >= 0 else int(np.flatnonzero(few)[0])
        else:  # the most frequent of the others (m rows or more: the fit has m rows)
            target = int(np.argmax(np.where(few, -1.0, c)))
        code = np.arange(len(levels), dtype=np.int64)
        code[few] = target
        maps[j] = code
    return maps


def groupless_columns(
    counts: NDArray[np.float64],
    columns: list[int],
    categories: dict[str, list[Any]],
    maps: dict[int, NDArray[np.int64]],
    m: int,
) -> list[int]:
    """The categorical columns no node can split: their codes form no two groups anywhere.

    A node's rows per code are at most the federation's (``counts``, after the merges of
    ``maps``); where those form fewer than two groups of ``m`` rows
    (:func:`.rules.group_categories`: no code of ``m`` rows, or one and the others
    together fewer), so do any node's. The grower counts such a column as constant.
    """
    out: list[int] = []
    at = 0
    for j in columns:
        n = len(categories[str(j)])
        c = np.asarray(counts[at : at + n], dtype=np.float64)
        at += n
        if j in maps:  # a merged code's rows count at its target
            c = np.bincount(maps[j], weights=c, minlength=n).astype(np.float64)
        if not (group_categories(c, m) >= 0).any():
            out.append(j)
    return out


def with_merged_codes(
    node_set: tuple[NDArray[np.int32], NDArray[np.int8]], code: NDArray[np.int64]
) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """A set split's codes and sides, each merged code added on its target's side.

    The merged codes hold no rows in any node, so the split never saw them; a row holding
    one at prediction goes where the training rows of that level went.
    """
    codes, sides = node_set
    side_of = dict(zip(codes.tolist(), sides.tolist(), strict=True))
    merged = np.flatnonzero(code != np.arange(code.size))
    add = [(int(c), side_of[int(code[c])]) for c in merged if int(code[c]) in side_of]
    add = [(c, s) for c, s in add if c not in side_of]
    if not add:
        return node_set
    new_codes = np.concatenate([codes, np.array([c for c, _ in add], dtype=codes.dtype)])
    new_sides = np.concatenate([sides, np.array([s for _, s in add], dtype=sides.dtype)])
    order = np.argsort(new_codes, kind="stable")
    return new_codes[order], new_sides[order]
