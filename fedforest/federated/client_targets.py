"""A client's targets and weights: validated on arrival, and multi-output statistics.

Everything here runs on the client, on its own rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import xlogy

from .._common import STAT_TASK

__all__ = [
    "by_output",
    "feature_sketches",
    "poisson_column",
    "proposal_target",
    "sample_weights",
    "targets",
]


def targets(y: ArrayLike, n: int, name: str) -> NDArray[Any]:
    """The client's ``y``: shape (n,), or (n, n_outputs) for multi-output regression.

    A single column ``(n, 1)`` is one output, as a 1-D array.
    """
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]  # one output, as a column
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise ValueError(
            f"Client {name!r}: y has shape {y.shape}; expected ({n},), one target per row of "
            f"X (or ({n}, n_outputs) for multi-output regression)."
        )
    if y.ndim == 2 and y.shape[1] == 0:
        raise ValueError(f"Client {name!r}: y has no columns.")
    return y


def sample_weights(weight: ArrayLike | None, n: int, name: str) -> NDArray[np.float64] | None:
    """The client's validated sample weights, or None (all ones)."""
    if weight is None:
        return None
    try:
        w = np.asarray(weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Client {name!r}: sample_weight is not numeric ({exc}).") from exc
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(
            f"Client {name!r}: sample_weight has shape {w.shape}; expected ({n},), one weight "
            "per row of X."
        )
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"Client {name!r}: sample_weight must be finite and non-negative.")
    return None if np.all(w == 1.0) else w


def by_output(
    y: NDArray[np.float64],
    out: NDArray[np.float64],
    run: Any,
    y_log: NDArray[np.float64] | None = None,
) -> None:
    """``run(y, out)`` for one target; once per output (into 4-column scratch) for several.

    The statistics of output ``o`` are ``out[..., STAT_TASK + 2 o : STAT_TASK + 2 o + 2]``;
    rows and weight are the same for every output. ``out`` starts at zero (the kernels add
    into it or overwrite it). With ``y_log`` (criterion="poisson") the second task column
    is the weighted sum of ``y_log`` (the kernel's weighted sum, on a second pass).
    """
    if y.ndim == 1:
        run(y, out)
        if y_log is not None:
            scratch = np.zeros(out.shape)
            run(y_log, scratch)
            out[..., STAT_TASK + 1] = scratch[..., STAT_TASK]
        return
    scratch = np.zeros(out.shape[:-1] + (STAT_TASK + 2,))
    for o in range(y.shape[1]):
        scratch[...] = 0.0
        run(np.ascontiguousarray(y[:, o]), scratch)
        if o == 0:
            out[..., :STAT_TASK] = scratch[..., :STAT_TASK]
        out[..., STAT_TASK + 2 * o : STAT_TASK + 2 * o + 2] = scratch[..., STAT_TASK:]


def proposal_target(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """One target for a client's threshold proposals (``local_candidates``), multi-output.

    The sum of the outputs of ``y``, each standardised on the client's rows.
    Proposals only add candidates; every split is still chosen on the pooled statistics
    of all outputs.
    """
    spread = y.std(axis=0)
    z = (y - y.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    return np.ascontiguousarray(z.sum(axis=1))


def poisson_column(y: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    """``y log y`` of every row (0 where y = 0): criterion="poisson"'s second statistic.

    Raises scikit-learn's ``ValueError`` for a negative target.
    """
    if y.ndim != 1:
        raise ValueError(f"Client {name!r}: criterion='poisson' takes one target per row.")
    if np.any(y < 0):
        raise ValueError(
            f"Client {name!r}: Some value(s) of y are negative which is not allowed for "
            "Poisson regression."
        )
    return np.asarray(xlogy(y, y), dtype=np.float64)


def feature_sketches(
    X: NDArray[np.float64], n_bins: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per column, the quantiles ``b / B`` (b = 1..B, the last the maximum) of the known values.

    ``binning="global"``'s handshake answer (under ``privacy="none"``, where values may
    travel), with the number of known values per column. Missing values (held as +inf)
    are left out; a column without known values has a row of zeros and a count of 0.
    """
    d = X.shape[1]
    out = np.zeros((d, n_bins))
    rows = np.zeros(d)
    levels = np.arange(1, n_bins + 1) / n_bins
    for j in range(d):
        v = np.sort(X[:, j][np.isfinite(X[:, j])])
        rows[j] = v.size
        if v.size:
            out[j] = v[np.clip(np.ceil(levels * v.size).astype(np.int64) - 1, 0, v.size - 1)]
    return out, rows
