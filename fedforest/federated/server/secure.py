"""The server's half of ``privacy="secure"``: sums over clients only, never a small one.

Rounds, as under ``"none"`` but with masked answers (:mod:`..privacy.secagg`):

- two grid rounds after the handshake (the first masked round relays the clients' public
  keys; a count of known values comes first where a column has missing values,
  :mod:`.sparse_columns`): the
  pooled moments of ``asinh(x)`` per numeric feature (and of ``asinh(y)`` for regression,
  which fixes the targets' standardisation), then pooled counts on a coarse grid, which
  give each feature's root distribution (:mod:`..privacy.grids`);
- Round A per level: pooled node summaries, and per (node, sampled feature) the pooled
  cumulative counts at the node's grid edges (a categorical feature's grid is its codes);
- Round B per level: pooled left statistics at candidates kept by the minimum-rows rule
  (:mod:`..privacy.rules`), and pooled statistics of the node's category groups;
- the out-of-bag round: pooled sums.

A client that fails a round under ``on_client_failure="drop"`` is removed from the sum by
a recovery round in which the survivors send the masks they shared with it for that round;
not in a Round B or a Round A below the roots, whose survivors' sums may cover fewer than
``m`` rows (that level's nodes then stay leaves), nor in the roots' Round A, which the
grower sends again under the survivors' digest (:mod:`.batch_setup`).
What the server keeps between levels, and the node grids it places from it, are in
:mod:`.secure_grids`; the set-up in :mod:`.secure_setup`, Round A in :mod:`.secure_round_a`
and Round B in :mod:`.secure_round_b` (this module re-exports their names, the grower
calls them through here), the out-of-bag round here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

# Besides what the out-of-bag round uses, re-exported names: the grower calls the rounds
# through here, and tests and benchmarks import them here (a test that patches one sets
# it in the module that now calls it).
from ..client_secure import oob_frac_bits
from ..federation import Federation
from ..grid_wire import candidate_arrays
from ..privacy.intervals import safe_from_ancestors
from ..privacy.partitions import partition_filter
from ..privacy.rules import safe_groups, secure_candidates
from ..privacy.secagg import HALF_BITS
from ..protocol import CommunicationLedger, Message
from .guides import Guides
from .secure_checks import refuse_small_bootstraps, refuse_too_few_rows
from .secure_grids import LevelA, SecureState, advance, keep_histograms, node_grids
from .secure_round_a import check_jensen, check_root_weights, round_a
from .secure_round_b import category_groups, groupless_pairs, round_b
from .secure_setup import (
    UNSUPPORTED,
    check_config,
    min_rows,
    setup_grids,
)
from .secure_setup import _coarse_rows as _coarse_rows
from .secure_setup import _robust_scale as _robust_scale
from .secure_sums import secure_exchange, sums_unless_dropped
from .splitter import best_splits
from .weights import rows_hist

__all__ = [
    "LevelA",
    "SecureState",
    "UNSUPPORTED",
    "advance",
    "best_splits",
    "candidate_arrays",
    "check_config",
    "check_jensen",
    "check_root_weights",
    "Guides",
    "HALF_BITS",
    "min_rows",
    "node_grids",
    "partition_filter",
    "refuse_small_bootstraps",
    "refuse_too_few_rows",
    "rows_hist",
    "safe_from_ancestors",
    "safe_groups",
    "secure_candidates",
    "sums_unless_dropped",
    "guides_pool",
    "keep_histograms",
    "oob_sums",
    "round_a",
    "category_groups",
    "groupless_pairs",
    "round_b",
    "secure_exchange",
    "setup_grids",
]


def guides_pool(state: SecureState | None) -> dict[str, NDArray[Any]] | None:
    """The fit's guides, for a warm start (None outside "secure")."""
    return None if state is None or state.guides is None else state.guides.pool()


# --------------------------------------------------------------------------- out of bag
def oob_sums(
    fed: Federation,
    ledger: CommunicationLedger,
    msg: Message,
    width: int,
    classification: bool,
    weighted: bool = False,
) -> NDArray[np.float64] | None:
    """The masked out-of-bag round's pooled sums; None after a drop under ``"secure"``.

    ``weighted`` (``"secure"``): a drop releases nothing. The survivors' squared errors
    (a classifier's rows right) are exact and equal to theirs in a fit without the drop
    (the same trees and draws), so their sum, recovered or sent again, differenced against
    that fit gave the lost client's own answer (docs/privacy-findings.md, "Red team 18").
    Under ``"dp"`` (noisy sums) the drop is recovered.
    """
    bits = oob_frac_bits(width, classification)
    spec: dict[str, tuple[tuple[int, ...], Any]] = {"oob_sums": ((width,), bits)}
    if not weighted:
        return secure_exchange(fed, ledger, msg, spec)["oob_sums"]
    sums = sums_unless_dropped(fed, ledger, msg, spec)
    return None if sums is None else sums["oob_sums"]
