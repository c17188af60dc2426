"""Under ``privacy="secure"``: the decoded sums checked against what the clients declared.

Secure aggregation hides who sent what, so a client's lie can only be caught in a sum:
these checks compare the pooled sums with the rows the clients declared at the
handshake and with the bounds any data has. A violation is a ``ValueError`` saying some
client lied (which one is hidden). Not under ``"dp"``: its sums are noisy.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_WEIGHT

__all__ = ["ASINH_MAX", "check_pooled_moments", "check_pooled_rows"]

#: asinh of the largest float64: no client's asinh(x) or asinh(y) is larger in size.
ASINH_MAX = math.asinh(float(np.finfo(np.float64).max))


def check_pooled_moments(
    moments: NDArray[np.float64], n_rows: float, exact: NDArray[np.bool_], what: str
) -> None:
    """Under "secure": the grid round's pooled moments (rows, sum, sum of squares) of ``what``.

    Each row's count is whole, at most the ``n_rows`` the clients declared at the
    handshake (exactly that where ``exact``: no client declared a missing value there),
    and its sums are within what that many values of ``|asinh| <= ASINH_MAX`` can add up
    to. A violation means some client sent moments no data has, or a count other than its
    declared rows (secure aggregation hides which); left unchecked, the sums overflowed
    ``sinh`` (an ``OverflowError``) or silently set the grids and the targets' scale.
    """
    n, s1, s2 = moments.T
    tol = 1e-6 + 1e-9 * n  # the two-word fixed point's rounding, with room
    bad = (
        ~np.isfinite(moments).all(axis=1)
        | (n != np.round(n))
        | (n < 0)
        | (n > n_rows)
        | (exact & (n != n_rows))
        | (np.abs(s1) > ASINH_MAX * n + tol)
        | (s2 < -tol)
        | (s2 > ASINH_MAX**2 * n + tol)
    )
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"The pooled moments of {what} of the grid round (row {i}: count {n[i]:.6g}, sums "
            f"{s1[i]:.6g}, {s2[i]:.6g}) are not those of at most the {n_rows:.0f} rows the clients "
            "declared: some client sent moments no data has, or a row count other than its "
            "handshake's n_samples (secure aggregation hides which)."
        )


def check_pooled_rows(stats: NDArray[np.float64], n_rows: float, what: str) -> None:
    """Under "secure": pooled statistics count whole rows in ``[0, n_rows]``, weight >= 0.

    ``n_rows`` is the rows the clients declared at the handshake; every client encodes
    counts exactly and weights >= 0, so a violation means some client lied (secure
    aggregation hides which); unchecked, a saturated masked word made negative counts and
    the trees silently single leaves.
    """
    rows, weight = stats[:, STAT_ROWS], stats[:, STAT_WEIGHT]
    bad = ~np.isfinite(stats).all(axis=1) | (rows != np.round(rows)) | (rows < 0)
    bad |= (rows > n_rows) | (weight < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"The pooled sums of {what} count {rows[i]:.6g} rows of weight {weight[i]:.6g} "
            f"(row {i}), not whole rows within the {n_rows:.0f} the clients declared with a "
            "weight >= 0: some client lied (secure aggregation hides which)."
        )
