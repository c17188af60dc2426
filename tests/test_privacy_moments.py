"""The first grid round's moments of a column known in only a few rows of the federation.

The pooled count, sum and sum of squares of ``asinh(x)`` over a column's known values are
one value's own ``asinh`` when one is known, and give two known values as the roots of a
quadratic. A recording server that decodes the masked sums (as it does) rebuilds them
exactly. Under ``"secure"`` a masked count of each such column's known values comes first
and a column known in fewer than ``min_aggregate_rows`` rows gets no moments
(``server/sparse_columns.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.client_secure import MOMENT_FRAC_BITS
from fedforest.federated.privacy.secagg import LOW_BITS, add_in_order, from_fixed
from fedforest.federated.protocol import GRID
from tests.test_privacy import _data, _fit, raw_value_exposure


def rebuilt_from_moments(fed, X, column: str) -> float:
    """The share of ``column``'s known values that its pooled moments give back exactly."""
    truth = X[column].to_numpy(dtype=np.float64)
    truth = truth[np.isfinite(truth)]
    j = X.columns.get_loc(column)
    for requests, replies in fed.rounds:
        req = next(iter(requests.values()))
        if req.kind != GRID or req.header.get("stage") != "moments" or not replies:
            continue
        feats = req.arrays["features"].tolist()
        if j not in feats:
            return 0.0
        words = {}
        for name in ("moments", "moments_lo"):
            shape = next(iter(replies.values())).arrays[name].shape
            words[name] = from_fixed(
                add_in_order((r.arrays[name] for r in replies.values()), shape), 0
            )
        lo_bits = MOMENT_FRAC_BITS + LOW_BITS
        n, s1, s2 = (words["moments"] / 2.0**MOMENT_FRAC_BITS + words["moments_lo"] / 2.0**lo_bits)[
            feats.index(j)
        ]
        if round(n) == 1:
            got = np.array([np.sinh(s1)])
        elif round(n) == 2:  # a + b = s1, a^2 + b^2 = s2
            got = np.sinh(np.real(np.roots([1.0, -s1, (s1 * s1 - s2) / 2.0])))
        else:
            return 0.0
        return float(np.mean([np.isclose(got, v, rtol=1e-9, atol=0).any() for v in truth]))
    return 0.0


def _sparse_fit(privacy: str, known: int):
    X, y, h = _data(n_clients=10, n_rows=100, d=6)
    X = X.copy()
    col = np.full(len(X), np.nan)
    rows = [150, 720][:known]  # two clients hold one known value each
    col[rows] = X["x5"].to_numpy()[rows]
    X["x5"] = col
    fed = _fit(ff.FedForestRegressor(n_estimators=3, random_state=0, privacy=privacy), X, y, h)
    return fed, X, y


@pytest.mark.parametrize("known", [1, 2])
def test_a_column_known_in_few_rows_releases_no_moments(
    known: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fed, X, y = _sparse_fit("secure", known)
    assert rebuilt_from_moments(fed, X, "x5") == 0.0
    kinds = [next(iter(q.values())).header.get("stage") for q, _ in fed.rounds]
    assert "known" in kinds  # the count came first, masked
    # Without the count round the moments give the values back (so the test can fail).
    from fedforest.federated.server import secure_setup

    monkeypatch.setattr(
        secure_setup,
        "known_enough",
        lambda fed, ledger, cfg, schema, numeric, *a: (numeric >= 0, numeric < 0),
    )
    fed, X, y = _sparse_fit("secure", known)
    assert rebuilt_from_moments(fed, X, "x5") == 1.0
    # Under "none" they travel as sketch points anyway.
    fed, X, y = _sparse_fit("none", known)
    values = X[["x5"]].dropna()
    assert raw_value_exposure(fed, values, np.full(len(values), np.inf)) == 1.0


def test_columns_known_in_enough_rows_keep_their_grids() -> None:
    """A column with missing values but m known rows or more: moments, grid, splits."""
    X, y, h = _data(n_clients=10, n_rows=100, d=6, missing=0.3)
    y = y + 2.0 * (X["x5"].fillna(0.0).to_numpy() > 0)
    fed = _fit(ff.FedForestRegressor(n_estimators=3, random_state=0), X, y, h)
    stages = [next(iter(q.values())).header.get("stage") for q, _ in fed.rounds]
    assert stages[1:4] == ["known", "moments", "histogram"]
    moments = next(
        q for q, _ in fed.rounds if next(iter(q.values())).header.get("stage") == "moments"
    )
    assert next(iter(moments.values())).arrays["features"].tolist() == list(range(6))


def _one_row_fit(privacy: str):
    X, y, h = _data(n_clients=1, n_rows=1, d=3)
    return (
        _fit(ff.FedForestRegressor(n_estimators=2, random_state=0, privacy=privacy), X, y, h),
        X,
        y,
    )


def test_a_federation_of_too_few_rows_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer than m rows in all: the grid round's sums would cover too few rows.

    With the refusal switched off, a fit of one row released its features' and target's
    moments over that row: the row comes back whole (every value and the target).
    """
    with pytest.raises(ValueError, match="fewer than min_aggregate_rows = 10"):
        _one_row_fit("secure")
    from fedforest.federated.server import secure_setup

    monkeypatch.setattr(secure_setup, "refuse_too_few_rows", lambda *a: None)
    monkeypatch.setattr(secure_setup, "refuse_small_bootstraps", lambda *a: None)
    fed, X, y = _one_row_fit("secure")
    assert all(rebuilt_from_moments(fed, X, c) == 1.0 for c in X.columns)
    req, rep = next(
        (q, r) for q, r in fed.rounds if next(iter(q.values())).header.get("stage") == "moments"
    )
    words = {
        k: from_fixed(add_in_order((r.arrays[k] for r in rep.values()), (1, 3)), 0)
        for k in ("y_moments", "y_moments_lo")
    }
    s1 = (
        words["y_moments"] / 2.0**MOMENT_FRAC_BITS
        + words["y_moments_lo"] / 2.0 ** (MOMENT_FRAC_BITS + LOW_BITS)
    )[0, 1]
    assert np.isclose(np.sinh(s1), y[0], rtol=1e-9, atol=0)
    # Under "none" the row is in the replies anyway.
    fed, X, y = _one_row_fit("none")
    assert raw_value_exposure(fed, X, y) == 1.0
