"""A client's secret row weights under ``privacy="secure"`` (moved out of ``client_secure``).

Some masked sums run over every row of a client, not over a tree's draws: the grid
round's moments of ``asinh(x)`` and ``asinh(y)`` and the out-of-bag sums of ``y`` and
``y^2``. Unweighted, two fits whose federations differ by one row would difference into
that row's values and target. Each row therefore weighs a secret weight of mean 1, drawn
from the client's data secret (a hash of its rows: another row set draws independent
weights, the same data the same weights and so the same forest), one stream per use
(docs/privacy.md, "Fits on federations one row apart").

NumPy only: a Flower ClientApp imports it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["MOMENT_WEIGHT_SPAN", "moment_weights", "oob_weights"]

#: Largest ratio of two rows' weights in the grid round's moments (1.5 / 0.5).
MOMENT_WEIGHT_SPAN = 3.0

#: The weights' streams of the data secret, one per use.
_MOMENTS, _OOB = 0x6D6F6D, 0x6F6F62


def _secret_row_weights(secret: int, stream: int, known: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Weights uniform in ``[0.5, 1.5]`` from ``(secret, stream)``, of mean 1 where known.

    Scaled so that the known rows' weights add up to their count (per column of a 2-D
    ``known``; 0 where none is known). ``known``: (n,) or (n, c); a 2-D mask draws one
    weight per row, the same in every column before the scaling.
    """
    n = known.shape[0]
    size = (n, 1) if known.ndim == 2 else (n,)
    w = np.random.default_rng([secret, stream]).uniform(0.5, 1.5, size=size) * known
    total = w.sum(axis=0)
    return np.asarray(
        w * np.where(total > 0, known.sum(axis=0) / np.where(total > 0, total, 1.0), 0.0)
    )


def moment_weights(secret: int, known: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Secret weights of the rows in the grid rounds (moments of ``asinh(x)``, ``asinh(y)``).

    ``known``: (n, columns), the rows whose value of a column is known. Uniform in
    ``[0.5, 1.5]`` from the client's data secret, scaled per column so that the known
    rows' weights add up to their count (the mean is the mean's estimate); a row weighs
    the same in every column before the scaling. The moments run over every row:
    unweighted, two fits whose federations differ by one row differenced into that row's
    ``asinh(x)`` and ``asinh(y)``, its values and target; the secret is a hash of the rows,
    so another row set draws independent weights and the difference is no row's. The same
    data give the same weights (the same grids and scale, the same forest).
    """
    return _secret_row_weights(secret, _MOMENTS, known)


def oob_weights(secret: int, n: int) -> NDArray[np.float64]:
    """Secret weights of the rows in the out-of-bag sums of ``y`` and ``y^2`` (``"secure"``).

    Those sums run over all of a client's rows (docs/privacy.md, "Out of bag"): unweighted,
    two fits whose federations differ by one row differenced into that row's target (the
    server knows each fit's center and scale). Uniform in ``[0.5, 1.5]`` from the data
    secret (another stream than :func:`moment_weights`'), scaled to add up to ``n``: the
    total sum of squares the score divides by is estimated, not exact (R^2 moves by about
    its sampling error over ``n`` rows); the squared errors stay exact.
    """
    return _secret_row_weights(secret, _OOB, np.ones(n, dtype=bool))
