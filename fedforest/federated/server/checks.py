"""What the server checks in every reply before it uses it (a client is untrusted input).

Every reply is checked when it arrives, in :func:`~.rounds.exchange`, against the request it
answers: first its envelope (a :class:`Message` of the request's kind, a JSON header, numeric
arrays), then the round's fields (``check_*`` below; each knows what the server has learnt
of that client so far). A violation is an :class:`InvalidReply` naming the client, the round
and the field. Under ``on_client_failure="raise"`` it stops training; under ``"drop"`` the
client is dropped from that round on and training goes on without it, as for a client that
died (:mod:`..failure`).

Under ``privacy="none"`` the server sees each client's statistics and checks them against
each other and against the client's handshake: whole non-negative counts, at most the
client's rows, a tree's root weight equal to its bootstrap draws, children within their
parent, class weights adding up to the weight, sums of squares consistent with the sums
(Cauchy-Schwarz), sketches finite and sorted, out-of-bag sums within their ranges. Under
``"secure"`` / ``"dp"`` each client's arrays are masked: the server checks their dtype and
shape, and the decoded sums (in :mod:`.secure`); a client that lies within those bounds is
not detectable there (secure aggregation hides who contributed what).

The checks live by round in :mod:`.checks_base` (:class:`InvalidReply`), :mod:`.checks_handshake`,
:mod:`.checks_summaries` (Round A's summaries and sketches, Round B, out-of-bag) and
:mod:`.checks_records` (:class:`ClientRecords`); this module re-exports them and holds the
checks of pooled sums under ``"secure"``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_TASK, STAT_WEIGHT
from ..privacy.secagg import FRAC_BITS

# The checks by round, re-exported here (the rounds, the grower and tests import them here).
from .checks_base import Check, InvalidReply, as_invalid
from .checks_handshake import check_handshake, label_type
from .checks_records import ClientRecords
from .checks_summaries import _check_stats as _check_stats
from .checks_summaries import _check_stats_parts as _check_stats_parts
from .checks_summaries import check_oob, check_round_b, check_summaries

__all__ = [
    "bad_count_blocks",
    "Check",
    "ClientRecords",
    "InvalidReply",
    "check_class_blocks",
    "check_handshake",
    "check_pooled_class_counts",
    "check_oob",
    "as_invalid",
    "check_round_b",
    "check_summaries",
    "label_type",
]


# --------------------------------------------------------------------------- pooled sums
def bad_count_blocks(counts: NDArray[np.float64], sizes: Sequence[int], n_rows: float) -> list[int]:
    """The blocks of ``counts`` that are not whole non-negative counts adding to ``n_rows``.

    ``sizes``: each block's entries, in order. Such a block is pooled counts that no rows
    have (some client lied; secure aggregation hides which).
    """
    blocks = np.split(counts, np.cumsum(sizes)[:-1]) if sizes else []
    return [
        i
        for i, block in enumerate(blocks)
        if not np.all(np.isfinite(block))
        or np.any(block < 0)
        or np.any(block != np.round(block))
        or block.sum() != n_rows
    ]


def check_pooled_class_counts(
    counts: NDArray[np.float64], sizes: tuple[int, ...], n_rows: float
) -> None:
    """Under "secure": the masked sum of the clients' class counts (class_weight="balanced").

    Whole, non-negative, and each output's block adds up to the rows of the clients that
    answered (public from the handshake). A violation means some client sent counts that
    no labels have (secure aggregation hides which).
    """
    bad = bad_count_blocks(counts, sizes, n_rows)
    if bad:
        where = f" of output {bad[0]}" if len(sizes) > 1 else ""
        raise ValueError(
            f"The pooled class counts{where} of the grid round are not whole non-negative "
            f"counts adding up to the {n_rows:.0f} rows of the clients: some client sent counts "
            "that no labels have (secure aggregation hides which)."
        )


def check_class_blocks(
    stats: NDArray[np.float64], sizes: tuple[int, ...], weighted: bool, what: str
) -> None:
    """Under "secure": each output's block of pooled class weights adds up to the weight.

    Without sample or class weights every column is a whole count and the blocks add up
    exactly; with them each client's fixed point moves each column by at most
    ``2^-(FRAC_BITS + 1)`` (a client without rows in the sum sends exact zeros, so at most
    ``rows`` clients round): the check allows ``rows (size + 1) 2^-FRAC_BITS``. A violation
    means some client sent class weights that no rows have (secure aggregation hides which).
    """
    if not stats.size:
        return
    starts = np.cumsum((0,) + tuple(sizes[:-1]))
    totals = np.add.reduceat(stats[:, STAT_TASK:], starts, axis=1)
    w = stats[:, STAT_WEIGHT][:, None]
    tol = np.zeros((1, len(sizes)))
    if weighted:
        tol = stats[:, STAT_ROWS][:, None] * (np.asarray(sizes) + 1.0) * 2.0**-FRAC_BITS + 1e-9
    bad = np.abs(totals - w) > tol
    if np.any(bad):
        raise ValueError(
            f"The pooled sums of {what} hold class weights that do not add up to the weight "
            f"(output {int(np.flatnonzero(bad.any(axis=0))[0])}, at {int(bad.any(axis=1).sum())}"
            " rows of statistics): some client sent class weights that no rows have (secure "
            "aggregation hides which)."
        )
