"""Columns that order the rows alike are fitted as one under ``privacy="secure"``.

Two numeric columns whose rows sort (nearly) alike -- a copy, a change of unit (kg and
lb, Celsius and Fahrenheit), a logarithm, any increasing or decreasing transform -- cut
a node's rows into *nested* sets: its sum below ``e`` on one column and below ``e'`` on
the other differ by the rows between, however far apart each column's own thresholds
are. The rules on released sums (``server/secure_cousins.py``, ``secure_derived.py``)
work column by column, so a copy of a column gave the server sums over single rows (one
exact target; docs/privacy-findings.md, "Copies of a column").

The moments round adds, per pair of the grid's columns, each client's Spearman
correlation over its rows times its rows (:func:`rank_corr_sums`): the server sees their
sum over the clients, a row-weighted mean correlation. Columns are taken in order; one
whose mean ``|rho|`` with an earlier representative is at least :data:`COPY_RHO` is
fitted as that representative (:func:`representatives`): where the server draws it for
a node, it asks for the representative's candidates (:func:`fitted_as_one`), so no sum
on it is ever released. The draws are scikit-learn's as before; for an exact transform
the trees' partitions are the same. A representative keeps the columns correlated with
it below :data:`COPY_RHO` (a chain of gradually changing columns keeps one every few).

Not covered: columns correlated below :data:`COPY_RHO` still nest now and then in a
small node (measured in the findings: none found at a within-client correlation of 0.95
and below in the red team's data).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.stats import rankdata

__all__ = [
    "COPY_RHO",
    "RANK_FRAC_BITS",
    "RANK_ROWS",
    "check_rank_corr",
    "fitted_as_one",
    "rank_corr_sums",
    "representatives",
]

#: A column whose row-weighted mean within-client |Spearman rho| with an earlier
#: representative reaches this is fitted as that one.
COPY_RHO = 0.9

#: Fractional bits of each client's rows x rho (a sum over clients, exact to 2^-20).
RANK_FRAC_BITS = 20

#: A client ranks at most this many of its rows (evenly spaced) for the correlations.
RANK_ROWS = 20_000


def rank_corr_sums(x: NDArray[np.float64], n_rows: int) -> NDArray[np.float64]:
    """A client's Spearman correlations of its columns' pairs, times its rows.

    ``x``: its rows of the grid's columns (a missing value is not finite); at most
    :data:`RANK_ROWS` rows, evenly spaced, are ranked (fewer for many columns). A
    missing value takes its column's mean rank (it adds nothing to a covariance); a
    column with fewer than two distinct known values correlates 0 with every other.
    Returns the upper triangle (``i < j``, row after row) of ``n_rows * rho``, each
    within ``[-n_rows, n_rows]``.
    """
    n, p = x.shape
    # Wide data ranks fewer rows: about 2e8 multiply-adds for the covariances.
    limit = min(RANK_ROWS, max(2_000, 200_000_000 // max(p * p, 1)))
    if n > limit:
        x = x[np.linspace(0, n - 1, limit).astype(np.int64)]
    ranks = np.zeros(x.shape)
    for i in range(p):
        known = np.isfinite(x[:, i])
        if known.sum() > 1:
            r = rankdata(x[known, i])
            ranks[known, i] = r - r.mean()  # a missing value at the mean: 0
    cov = ranks.T @ ranks
    sd = np.sqrt(np.diag(cov))
    live = sd > 0
    rho = np.zeros((p, p))
    rho[np.ix_(live, live)] = cov[np.ix_(live, live)] / np.outer(sd[live], sd[live])
    upper = np.triu_indices(p, 1)
    return np.asarray(np.clip(rho[upper], -1.0, 1.0) * float(n_rows))


def check_rank_corr(pooled: NDArray[np.float64], n_rows: float, n_clients: int) -> None:
    """The pooled sums of :func:`rank_corr_sums`: finite and within the rows.

    Raises
    ------
    ValueError
        Naming the field, when a sum is not finite or exceeds the federation's rows (its
        clients' rounding aside).
    """
    slack = n_clients * 2.0**-RANK_FRAC_BITS
    bad = ~np.isfinite(pooled) | (np.abs(pooled) > n_rows + slack)
    if bad.any():
        raise ValueError(
            "The moments round's pooled rank correlations ('rank_corr') are out of range: "
            f"{int(bad.sum())} of {pooled.size} are not finite or exceed the federation's "
            f"{n_rows:g} rows: some client sent a malformed reply (secure aggregation "
            "hides which)."
        )


def representatives(
    pooled: NDArray[np.float64], feats: NDArray[np.int64], d: int, n_rows: float
) -> NDArray[np.int64] | None:
    """Per feature, the feature it is fitted as (itself, unless a copy); None: no copies.

    ``pooled``: the sums of :func:`rank_corr_sums` over the clients for the columns
    ``feats`` (in their order), ``n_rows`` the federation's rows.
    """
    p = feats.size
    rho = np.zeros((p, p))
    rho[np.triu_indices(p, 1)] = pooled / max(n_rows, 1.0)
    rho = np.abs(rho + rho.T)
    own = np.arange(p)
    reps: list[int] = []
    for j in range(p):
        close = [i for i in reps if rho[i, j] >= COPY_RHO]
        if close:
            own[j] = close[0]
        else:
            reps.append(j)
    if (own == np.arange(p)).all():
        return None
    rep = np.arange(d, dtype=np.int64)
    rep[feats] = feats[own]
    return rep


def fitted_as_one(
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    rep: NDArray[np.int64],
    constant: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """A level's drawn features with each copy replaced by its representative.

    Per slot, a representative drawn twice (itself and a copy, or two copies) once, at its
    first place; one known to be constant in the node (``constant``, per slot) not at all.
    """
    n_slots = pair_off.size - 1
    slot = np.repeat(np.arange(n_slots), np.diff(pair_off))
    feat = rep[pair_feat]
    d = rep.size
    _, first = np.unique(slot * d + feat, return_index=True)
    keep = np.zeros(feat.size, dtype=bool)
    keep[first] = True
    if constant is not None:
        keep &= ~constant[slot, feat]
    out_off = np.zeros(n_slots + 1, dtype=np.int64)
    np.cumsum(np.bincount(slot[keep], minlength=n_slots), out=out_off[1:])
    return out_off, feat[keep].astype(np.int32)
