"""Columns known in fewer than ``min_aggregate_rows`` rows get no moments (``"secure"``).

The first grid round releases, per numeric feature, the pooled count, sum and sum of
squares of ``asinh(x)`` over the rows whose value is known. For a column missing almost
everywhere in the federation those are sums over a few rows: one known value is its own
sum, two are the roots of ``t^2 - s1 t + (s1^2 - s2) / 2`` (measured: both values back to
1e-15). Where some client declared missing values in a numeric column, a masked round
before the moments (``stage="known"``) pools the count of known values of those columns;
a column known in fewer than ``m`` rows is left out of both grid rounds and gets no grid:
it could not split anyway (every candidate needs ``m`` known rows on its left, the
"missing" candidate ``m`` known rows too). Under ``"dp"`` the moments carry noise and
this round is not run. The round carries the clients' public keys (the first masked
round relays them).

The same count gives each column's missing rows: where they number 1 to ``m - 1`` the
column's grids get no "value known | missing" edge (whose count in a node is the node's
missing rows: a missing value that few rows hold would follow them down the trees,
docs/privacy.md, "Values few rows hold"); the missing rows then stay right of every
candidate, as a value above every other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..federation import Federation
from ..protocol import GRID, CommunicationLedger, Message
from .config import GrowerConfig
from .secure_checks import check_pooled_rows
from .secure_sums import secure_exchange

__all__ = ["known_enough"]


def known_enough(
    fed: Federation,
    ledger: CommunicationLedger,
    cfg: GrowerConfig,
    schema: dict[str, Any],
    numeric: NDArray[np.int64],
    public_keys: dict[str, str],
    m: int,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Per numeric feature, whether its moments may be asked for (known in ``m`` rows+).

    And per numeric feature, whether 1 to ``m - 1`` rows of the federation miss its value
    (its grids get no missing edge).
    """
    sparse = numeric[schema["missing"][numeric]]
    keep = np.ones(numeric.size, dtype=bool)
    few = np.zeros(numeric.size, dtype=bool)
    if cfg.privacy != "secure" or sparse.size == 0:
        return keep, few
    header = {"stage": "known", "public_keys": public_keys}
    msg = Message(GRID, header, {"features": sparse.astype(np.int32)})
    known = secure_exchange(fed, ledger, msg, {"known": ((sparse.size,), 0)})["known"]
    n_rows = float(sum(schema["n_samples"].get(c, 0) for c in fed.client_names))
    check_pooled_rows(np.column_stack([known, known]), n_rows, "the known values' counts")
    keep[np.isin(numeric, sparse[known < m])] = False
    few[np.isin(numeric, sparse[(n_rows - known > 0) & (n_rows - known < m)])] = True
    return keep, few
