"""Attacks across fits: what a recording server gets by differencing two fits' releases.

The server of ``tests/test_privacy.py`` records every reply of one fit. Users refit: more
trees with ``warm_start``, another ``n_estimators`` or ``random_state`` on the same
clients. Each fit's releases obey the minimum-rows rule, but the difference of two fits'
releases need not: the out-of-bag round summed y over the rows scored, a set that grows
by a few rows with each tree added, so two fits' sums of y differed by those rows' targets
(measured before the fix: warm_start from 8 to 19 trees, 10 clients x 200 rows, one
difference over exactly one row gave its target, four more over 2 to 8 rows).
"""

from __future__ import annotations

import warnings

import numpy as np

import fedforest as ff
from fedforest.federated.client_secure import oob_frac_bits
from fedforest.federated.privacy.secagg import add_in_order, from_fixed
from fedforest.federated.protocol import OOB
from tests.test_privacy import RecordingFederation, _data


def oob_release(fed: RecordingFederation) -> tuple[np.ndarray, float, float]:
    """The pooled out-of-bag sums the server decodes, and the targets' center and scale."""
    center, scale, sums = 0.0, 1.0, None
    for requests, replies in fed.rounds:
        req = next(iter(requests.values()))
        setup = req.header.get("setup", {})
        if "y_center" in setup:
            center = float(np.ravel(setup["y_center"])[0])
            scale = float(np.ravel(setup["y_scale"])[0])
        if req.kind == OOB and replies:
            first = next(iter(replies.values())).arrays["oob_sums"]
            if first.dtype == np.uint64:  # masked: the server adds them up and decodes
                total = add_in_order((m.arrays["oob_sums"] for m in replies.values()), first.shape)
                sums = from_fixed(total, oob_frac_bits(first.size, False))
            else:
                sums = np.sum([m.arrays["oob_sums"] for m in replies.values()], axis=0)
    assert sums is not None
    return sums, center, scale


def warm_start_exposure(privacy: str, y_scale: float = 1.0) -> dict[str, float]:
    """Differences of consecutive warm-started fits' OOB sums over 1 to m - 1 rows.

    ``"pairs"``: such differences; ``"rows"``: the share of the rows whose exact target
    a one-row difference gave (matched against the training targets).
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=4)
    y = y * y_scale
    clients = [
        ff.Client(X[h == k].reset_index(drop=True), y[h == k], f"site{k}") for k in np.unique(h)
    ]
    model = ff.FedForestRegressor(
        oob_score=True, warm_start=True, max_depth=2, random_state=0, privacy=privacy
    )
    released = []
    for n in range(5, 16):
        model.n_estimators = n
        fed = RecordingFederation(ff.LocalFederation(clients))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "rows drawn by every tree"
            model.fit_federated(fed)
        released.append(oob_release(fed))
    pairs, exact = 0, set()
    for (a, center, scale), (b, _, _) in zip(released, released[1:], strict=False):
        rows = round(b[0] - a[0])  # more rows scored: the new tree's out-of-bag ones
        if np.any(np.abs(b[2::3] - a[2::3]) > 1e-9) and 0 < rows < 10:
            pairs += 1
            if rows == 1:  # the row's target, back in its units
                target = center + scale * (b[2] - a[2])
                exact |= set(np.flatnonzero(np.isclose(y, target, rtol=1e-6, atol=0)).tolist())
    return {"pairs": pairs, "rows": len(exact) / len(y)}


def test_warm_start_oob_sums_isolate_no_target() -> None:
    """Under "secure" the OOB sums of y cover every row, so refits difference to nothing.

    Under "none" (per-client plain sums, pooled by the attacker) the same differencing
    finds sums over a few rows and exact targets: the test can fail.
    """
    assert warm_start_exposure("secure") == {"pairs": 0, "rows": 0.0}
    found = warm_start_exposure("none")
    assert found["pairs"] > 0 and found["rows"] > 0, found
