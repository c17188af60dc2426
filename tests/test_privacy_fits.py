"""Attacks across fits: what a recording server gets by differencing two fits' releases.

The server of ``tests/test_privacy.py`` records every reply of one fit. Users refit: more
trees with ``warm_start``, another ``n_estimators`` or ``random_state`` on the same
clients. Each fit's releases obey the minimum-rows rule, but the difference of two fits'
releases need not: the out-of-bag round summed y over the rows scored, a set that grows
by a few rows with each tree added, so two fits' sums of y differed by those rows' targets
(measured before the fix: warm_start from 8 to 19 trees, 10 clients x 200 rows, one
difference over exactly one row gave its target, four more over 2 to 8 rows).

Fits with the same ``random_state`` and other settings (another ``n_bins``) drew the same
bootstrap: each tree's root held the same rows in both fits, at other candidates, so the
two fits' root sums differenced into sums over a few rows (``refit_exposure``; 132 of
them before the fix). Each client now binds its bootstrap secret to the digest of the
fit's settings (``server/digest.py``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated import client_secure
from fedforest.federated.client_secure import oob_frac_bits, stat_frac_bits
from fedforest.federated.grid_wire import sent_candidates
from fedforest.federated.privacy.secagg import add_in_order, from_fixed, unpack_counts
from fedforest.federated.protocol import OOB, ROUND_A, ROUND_B
from fedforest.federated.server import digest
from fedforest.tree.prune import prune_tree
from tests._attack_controls import assert_found_at_some_seed
from tests.test_privacy import RecordingFederation, _data, _in_bag_weights


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


# --------------------------------------------------------------------------- other settings
def root_releases(fed: RecordingFederation) -> tuple[dict, float, float]:
    """Per (tree, feature): the roots' candidates and the pooled left sums the server decodes.

    The first Round B holds the roots, one node per tree in order; its sums are
    ``(rows, weight, sum wz, sum wz^2)`` at each candidate, ``z = (y - center) / scale``
    with the set-up's constants (also returned).
    """
    pair_off = pair_feat = None
    center = scale = 0.0
    for requests, replies in fed.rounds:
        req = next(iter(requests.values()))
        setup = req.header.get("setup", {})
        if "y_center" in setup:
            center = float(np.ravel(setup["y_center"])[0])
            scale = float(np.ravel(setup["y_scale"])[0])
        if req.kind == ROUND_A and pair_off is None:
            pair_off, pair_feat = req.arrays["pair_off"], req.arrays["pair_feat"]
            round_a = req
        if req.kind == ROUND_B:
            assert pair_off is not None and pair_feat is not None
            first = next(iter(replies.values())).arrays["left"]
            total = add_in_order((m.arrays["left"] for m in replies.values()), first.shape)
            bits = stat_frac_bits(0)
            # Rows and draws in one word when the server asked for packed counts.
            packed = req.header.get("pack_counts") is True
            left = unpack_counts(total, bits[2:]) if packed else from_fixed(total, bits)
            cand_off, cand = req.arrays["cand_off"], sent_candidates(round_a, req)
            out = {}
            for t in range(pair_off.size - 1):
                for p in range(pair_off[t], pair_off[t + 1]):
                    lo, hi = cand_off[p], cand_off[p + 1]
                    out[(t, int(pair_feat[p]))] = (cand[lo:hi], left[lo:hi])
            return out, center, scale
    raise AssertionError("no Round B recorded")


def root_differences(
    X: Any, y: np.ndarray, h: np.ndarray, seed: int, settings: tuple[dict, dict], m: int = 10
) -> tuple[int, set[int]]:
    """The attack on two secure fits' roots, the same clients and random_state ``seed``.

    Fits A and B of the rows ``X``, ``y`` held by clients ``h`` (10 trees, depth 2, each
    with its ``settings``) are recorded; the server differences every cumulative sum of
    A's root (tree t, feature f) with every one of B's on the same tree and feature. The
    test knows each fit's in-bag weights and finds the differences that are sums over 1 to
    m - 1 rows (the rows whose weight below the thresholds differs between the fits) and
    whose decoded row count and sum of targets are those rows'. Returns their number and
    the rows whose exact target a one-row difference gives.
    """
    clients = [
        ff.Client(X[h == k].reset_index(drop=True), y[h == k], f"site{k}") for k in np.unique(h)
    ]
    values = X.to_numpy()
    fits = []
    for kw in settings:
        fed = RecordingFederation(ff.LocalFederation(clients))
        model = ff.FedForestRegressor(n_estimators=10, max_depth=2, random_state=seed, **kw)
        model.fit_federated(fed)
        fits.append((*root_releases(fed), _in_bag_weights(model, clients, h, 10, seed)))
    (rel_a, center, scale, w_a), (rel_b, _, _, w_b) = fits
    z = (y - center) / scale
    pairs, exact = 0, set()
    for (t, f), (cand_a, left_a) in rel_a.items():
        if (t, f) not in rel_b:
            continue
        cand_b, left_b = rel_b[(t, f)]
        below_a = w_a[t] * (values[:, f] <= cand_a[:, None])  # (candidates, rows)
        below_b = w_b[t] * (values[:, f] <= cand_b[:, None])
        for i in range(cand_a.size):
            net = below_a[i] - below_b  # what the difference sums, per row
            n_rows = np.count_nonzero(net, axis=1)
            for j in np.flatnonzero((n_rows > 0) & (n_rows < m)):
                got = left_a[i] - left_b[j]
                if np.isclose(got[0], np.count_nonzero(net[j] > 0) - np.count_nonzero(net[j] < 0)):
                    if np.isclose(got[2], net[j] @ z, rtol=0, atol=1e-4):
                        pairs += 1
                        if n_rows[j] == 1 and abs(net[j]).sum() == 1:
                            exact.add(int(np.flatnonzero(net[j])[0]))
    return pairs, exact


def refit_exposure(n_bins: tuple[int, int], seed: int = 0) -> dict[str, float]:
    """Differences of two secure fits' root sums (same clients and random_state, other n_bins).

    :func:`root_differences`' ``"pairs"``; ``"rows"``: the share of rows whose exact
    target a one-row difference gives. ``seed``: both fits' ``random_state``.
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=8)
    settings = ({"n_bins": n_bins[0]}, {"n_bins": n_bins[1]})
    pairs, exact = root_differences(X, y, h, seed, settings)
    return {"pairs": pairs, "rows": len(exact) / len(y)}


def test_fits_with_other_settings_isolate_no_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refits with another n_bins (same random_state): their roots' sums isolate no row.

    Each client binds its bootstrap secret to the set-up's settings digest, so the two
    fits draw independent bootstraps. With the binding disabled (the data secret alone,
    as before the fix) the same attack finds sums over 1 to 9 rows: the test can fail
    (2, 1 and 0 such pairs at random_state 0 to 2, measured 2026-12-05).
    """
    assert refit_exposure((32, 24)) == {"pairs": 0, "rows": 0.0}
    monkeypatch.setattr(client_secure, "bind_secret", lambda secret, digest: secret)
    assert_found_at_some_seed(
        lambda s: refit_exposure((32, 24), s), lambda got: got["pairs"] > 0, (0, 1, 2)
    )


# --------------------------------------------------------------------------- pruning
def _weakest_links(tree) -> list[float]:  # type: ignore[no-untyped-def]
    """The tree's pruning path: each weakest link's ``alpha_eff``, pruned in turn.

    The server computes it from the tree it grew (impurities and weights, as
    ``tree/prune.py`` does); each ``ccp_alpha`` just above one of them prunes one more
    branch than the one before.
    """
    cur, path = tree, []
    while cur.node_count > 1:
        left, right = cur.children_left, cur.children_right
        r = cur.weighted_n_node_samples / cur.weighted_n_node_samples[0] * cur.impurity
        below = {}  # node -> (R of its branch's leaves, its leaves)
        for i in range(cur.node_count - 1, -1, -1):  # children after parents
            if left[i] < 0:
                below[i] = (r[i], 1)
            else:
                (a, na), (b, nb) = below[left[i]], below[right[i]]
                below[i] = (a + b, na + nb)
        alpha = min((r[i] - below[i][0]) / (below[i][1] - 1) for i in below if left[i] >= 0)
        path.append(alpha)
        cur = prune_tree(tree, alpha * (1 + 1e-9))
    return path


def pruning_exposure(seed: int = 0) -> dict[str, Any]:
    """Fits one pruning apart (same clients, random_state, settings but ``ccp_alpha``).

    The server grows one tree with ``oob_score=True``, reads its pruning path and asks
    for a fit at each weakest link's ``ccp_alpha`` (the user refits at other
    ``ccp_alpha``, a grid search over pruning). Consecutive fits' out-of-bag squared
    errors then differ only by the rows whose out-of-bag prediction the pruned branch
    changes: the tree's out-of-bag rows in it. The test knows each row's out-of-bag
    prediction (the clients keep them) and counts the differences of decoded squared
    errors that are functions of 1 to m - 1 rows' targets: ``"pairs"`` (of ``"fits"``),
    and how many rows each covers (``"rows"``).
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=4, seed=seed)
    clients = [
        ff.Client(X[h == k].reset_index(drop=True), y[h == k], f"site{k}") for k in np.unique(h)
    ]

    def fit(alpha: float) -> tuple[ff.FedForestRegressor, float, np.ndarray]:
        fed = RecordingFederation(ff.LocalFederation(clients))
        model = ff.FedForestRegressor(
            n_estimators=1, max_depth=8, oob_score=True, ccp_alpha=alpha, random_state=0
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rows drawn by the one tree: not scored
            model.fit_federated(fed)
        pred = np.concatenate([c.oob_prediction_ for c in clients])
        return model, float(oob_release(fed)[0][1]), pred

    first = fit(0.0)
    fits = [first] + [fit(a * (1 + 1e-9)) for a in _weakest_links(first[0].trees_[0])]
    rows = []
    for (_, se_a, pred_a), (_, se_b, pred_b) in zip(fits, fits[1:], strict=False):
        same = (pred_a == pred_b) | (np.isnan(pred_a) & np.isnan(pred_b))
        if se_a != se_b and 0 < np.count_nonzero(~same) < 10:
            rows.append(int(np.count_nonzero(~same)))
    return {"fits": len(fits), "pairs": len(rows), "rows": rows}


def test_fits_one_pruning_apart_isolate_no_out_of_bag_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``oob_score=True`` each ``ccp_alpha`` draws its own bootstraps.

    Pruning follows growth, so ``ccp_alpha`` was left out of the settings digest; but the
    out-of-bag round scores the pruned trees, and two fits one pruning apart released
    squared errors that differed by a few rows' (3 differences over 6 to 9 rows among 34
    fits at seed 0). ``ccp_alpha`` now enters the digest when the score is asked for
    (``digest._WITH_OOB``); with that switched off the attack finds them again. Which
    bootstraps show it depends on the draws: since the clients' data tags (2026-12-04)
    seed 2 does (one difference; none at seeds 0, 1 and 3); on 2026-12-05 seeds 2, 4 and 5
    gave 1, 0 and 2, so the control reads them in turn.
    """
    assert pruning_exposure(0)["pairs"] == 0 and pruning_exposure(2)["pairs"] == 0
    monkeypatch.setattr(digest, "_WITH_OOB", {})
    assert_found_at_some_seed(pruning_exposure, lambda got: got["pairs"] > 0, (2, 4, 5))


# --------------------------------------------------------------------------- more trees
def more_trees_exposure(seed: int = 0, task: str = "classification") -> list[int]:
    """A secure forest refitted with one tree more (``warm_start`` from 5 to 30).

    Its out-of-bag round releases the rows scored and the rows right (a classifier; whole
    counts over every scored row) or the squared errors (a regressor). Between fits with
    ``T`` and ``T + 1`` trees the count of rows right changes only where a row's
    out-of-bag vote changes class or a row is scored for the first time: a count of
    labels over those rows; the squared errors change with every prediction the new tree
    moves. The test knows every row's out-of-bag prediction (the clients keep them) and
    returns, per pair whose released sum differs, how many rows it covers, where 1 to
    m - 1.
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=4, seed=seed)
    if task == "classification":
        y = (y > np.median(y)).astype(float)
    clients = [
        ff.Client(X[h == k].reset_index(drop=True), y[h == k], f"site{k}") for k in np.unique(h)
    ]
    model: ff.FedForestClassifier | ff.FedForestRegressor
    if task == "classification":
        model = ff.FedForestClassifier(
            oob_score=True, warm_start=True, max_depth=3, random_state=0, classes=[0.0, 1.0]
        )
    else:
        model = ff.FedForestRegressor(oob_score=True, warm_start=True, max_depth=3, random_state=0)
    released = []
    for n in range(5, 31):
        fed = RecordingFederation(ff.LocalFederation(clients))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "rows drawn by every tree"
            model.set_params(n_estimators=n).fit_federated(fed)
        pred = np.concatenate([c.oob_prediction_ for c in clients])
        if task == "classification":  # the class each row's out-of-bag vote gives
            pred = np.where(
                np.isnan(pred).any(axis=1), -1, np.argmax(np.nan_to_num(pred), axis=1)
            ).astype(float)
        released.append((oob_release(fed)[0][1], pred))
    sizes = []
    for (sum_a, pred_a), (sum_b, pred_b) in zip(released, released[1:], strict=False):
        same = (pred_a == pred_b) | (np.isnan(pred_a) & np.isnan(pred_b))
        moved = np.count_nonzero(~same)
        if sum_a != sum_b and 0 < moved < 10:
            sizes.append(int(moved))
    return sizes


def test_one_tree_more_changes_the_squared_errors_by_many_rows() -> None:
    """A regressor's squared errors move with every prediction the new tree moves.

    Measured at seeds 0 to 2 (a scratch loop): 341 to 386 of the 1,000 rows per tree
    added, no pair of fits over 1 to 9. The same attack finds such pairs in a
    classifier's rows right (below), so it can fail.
    """
    assert more_trees_exposure(task="regression") == []


@pytest.mark.xfail(
    strict=True,
    reason="open limit (docs/privacy.md, 'Out of bag across fits'): a classifier's rows "
    "right across fits with more trees change by the few rows whose vote flips",
)
def test_one_tree_more_changes_the_rows_right_by_no_few_rows() -> None:
    """Measured at seed 0: 10 of 25 pairs of fits differ by the votes of 1 to 9 rows."""
    assert more_trees_exposure() == []


# --------------------------------------------------------------------------- few scored rows
def few_scored_exposure(n_fits: int = 40) -> dict[str, int]:
    """Out-of-bag sums of a small federation: the scored rows can be fewer than m.

    12 rows in two clients (a secure fit needs m = 10 in all), one tree with
    ``oob_score=True``: the squared errors run over the rows the tree left out, about 37 %
    of them. ``"below_m"``: fits whose decoded count of scored rows is 1 to m - 1;
    ``"exact"``: fits with one scored row whose target the server rebuilds to one of two
    values, ``q +- sqrt(squared error)`` in the targets' units, ``q`` the root's value
    (12 rows cannot split at m = 10), matched against the training targets.
    """
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    y = X[:, 0] + rng.normal(scale=0.3, size=12)
    clients = [ff.Client(X[:6], y[:6], "a"), ff.Client(X[6:], y[6:], "b")]
    below = exact = 0
    for seed in range(n_fits):
        fed = RecordingFederation(ff.LocalFederation(clients))
        model = ff.FedForestRegressor(n_estimators=1, oob_score=True, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rows drawn by the one tree: not scored
            model.fit_federated(fed)
        sums, center, scale = oob_release(fed)
        below += int(0 < round(sums[0]) < 10)
        if round(sums[0]) == 1:
            q = (float(model.trees_[0].value[0].ravel()[0]) - center) / scale
            guess = center + scale * (q + np.array([1.0, -1.0]) * np.sqrt(sums[1]))
            exact += int(np.isclose(guess[:, None], y, rtol=1e-6, atol=0).any())
    return {"below_m": below, "exact": exact}


@pytest.mark.xfail(
    strict=True,
    reason="open limit (docs/privacy.md, 'Federations of too few rows'): the out-of-bag "
    "squared errors run over the scored rows, which a small federation can hold fewer "
    "than m of",
)
def test_out_of_bag_errors_cover_m_rows_in_a_small_federation() -> None:
    """Measured: all 40 fits below m scored rows, one of them one row (its target)."""
    assert few_scored_exposure()["below_m"] == 0


# --------------------------------------------------------------------------- how the work runs
def released_sums(fed: RecordingFederation) -> np.ndarray:
    """Every node summary and Round B left statistic the server decodes, sorted (a set)."""
    bits = stat_frac_bits(0)
    out = []
    for requests, replies in fed.rounds:
        req = next(iter(requests.values()))
        if req.kind not in (ROUND_A, ROUND_B) or not replies:
            continue
        name = "summary" if req.kind == ROUND_A else "left"
        first = next(iter(replies.values())).arrays[name]
        total = add_in_order((m.arrays[name] for m in replies.values()), first.shape)
        packed = name == "left" and req.header.get("pack_counts") is True
        out.append(unpack_counts(total, bits[2:]) if packed else from_fixed(total, bits))
    sums = np.concatenate(out)
    return sums[np.lexsort(sums.T[::-1])]


def test_settings_of_how_the_work_runs_change_no_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """Left out of the digest, ``tree_batch_size``, ``n_jobs`` and ``on_client_failure``
    (without a drop) leave every decoded sum as it was: nothing to difference.

    The same comparison tells a setting that changes the releases on the same bootstraps:
    another ``n_bins`` with the binding to the digest switched off (the refit attack above
    finds rows there).
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=8)
    clients = [
        ff.Client(X[h == k].reset_index(drop=True), y[h == k], f"site{k}") for k in np.unique(h)
    ]

    def released(**kw: Any) -> np.ndarray:
        fed = RecordingFederation(ff.LocalFederation(clients))
        ff.FedForestRegressor(n_estimators=6, max_depth=3, random_state=0, **kw).fit_federated(fed)
        return released_sums(fed)

    base = released()
    for kw in ({"tree_batch_size": 1}, {"n_jobs": 2}, {"on_client_failure": "drop"}):
        assert np.array_equal(released(**kw), base), kw
    # Unbound draws: both fits draw the same rows (their roots' summaries are equal), and
    # the other n_bins releases other sums over them.
    monkeypatch.setattr(client_secure, "bind_secret", lambda secret, digest: secret)
    same_rows, other = released(), released(n_bins=24)
    assert not np.array_equal(other, same_rows)
    roots = [s[s[:, 0] == s[:, 0].max()] for s in (same_rows, other)]
    assert np.array_equal(*roots)


def coarse_grid_exposure(floors: list[int], column: int = 0, targets: int = 0) -> dict[str, float]:
    """Second grid rounds of fits at other ``min_aggregate_rows``, merged by the server.

    The round's counts of rows ``x <= e`` are exact, run over every row of the federation
    (no bootstrap, no secret weight) at edges the server places from the pooled moments
    (the same in every fit on the same data: their secret row weights are not bound to the
    settings). Edges that moved with the floor put the fits' counts on one axis: an
    interval between two fits' edges whose counts differ by 1 holds one row, whose value
    it gives to within its width. ``targets``: as many fits at the first floor, each on
    another target of the same rows (``y`` plus noise: another outcome, a transform),
    which changes each client's data secret and so the moments' weights. Returns the
    distinct edges and the one-row intervals narrower than 1 % and 0.1 % of the column's
    standard deviation.
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=4)
    rng = np.random.default_rng(5)
    fits = [(m, y) for m in floors] + [
        (floors[0], y + rng.normal(0, 0.5, len(y))) for _ in range(targets)
    ]
    points: set[tuple[float, float]] = set()
    for m, target in fits:
        parts = [(X[h == k].reset_index(drop=True), target[h == k]) for k in range(10)]
        clients = [ff.Client(Xk, yk, f"site{k}") for k, (Xk, yk) in enumerate(parts)]
        fed = RecordingFederation(ff.LocalFederation(clients))
        model = ff.FedForestRegressor(
            n_estimators=1, max_depth=1, random_state=0, min_aggregate_rows=m
        )
        model.fit_federated(fed)
        stage = [next(iter(q.values())).header.get("stage") for q, _ in fed.rounds]
        requests, replies = fed.rounds[stage.index("histogram")]
        request = next(iter(requests.values()))
        shape = next(iter(replies.values())).arrays["hist"].shape
        hist = from_fixed(add_in_order((r.arrays["hist"] for r in replies.values()), shape), 0)
        i = request.arrays["features"].tolist().index(column)
        points |= set(zip(request.arrays["edges"][i].tolist(), hist[i].tolist(), strict=True))
    edges, counts = (np.array(v) for v in zip(*sorted(points), strict=True))
    assert np.all(np.diff(counts) >= 0)  # one population, exact counts: one axis
    one = np.flatnonzero(np.diff(counts) == 1)
    width = (edges[one + 1] - edges[one]) / X.iloc[:, column].std()
    return {
        "edges": len(edges),
        "narrow": int((width < 0.01).sum()),
        "very_narrow": int((width < 0.001).sum()),
    }


def test_fits_at_other_floors_release_the_same_coarse_grid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fits at ``min_aggregate_rows`` 10 to 40 release the default fit's coarse grid.

    With the coarse grid at ``n / m`` edges (before 2026-12-04; monkeypatched back) they
    released 1,090 distinct edges and 42 one-row intervals narrower than 1 % of a standard
    deviation (of 1,000 rows); now their union is the default fit's 100 edges.
    """
    from fedforest.federated.server import secure_setup

    one = coarse_grid_exposure([10])
    many = coarse_grid_exposure(list(range(10, 41, 3)))
    assert many == one
    assert many["narrow"] == 0
    monkeypatch.setattr(secure_setup, "_coarse_rows", lambda m, dp: m)  # n / m edges again
    before = coarse_grid_exposure(list(range(10, 41)))
    assert before["edges"] > 5 * one["edges"]
    assert before["narrow"] >= 20


@pytest.mark.filterwarnings("ignore:min_aggregate_rows=.* is below 10:UserWarning")
def test_fits_at_warned_floors_release_the_same_coarse_grid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fits at the warned floors 1 to 9 release the default fit's coarse grid too.

    With ``n / min(m, 10)`` edges (red3's fix, monkeypatched back) each floor below 10
    placed a finer grid of its own, whose counts the default fit's difference.
    """
    from fedforest.federated.server import secure_setup

    one = coarse_grid_exposure([10])
    low = coarse_grid_exposure([10, *range(1, 10)])
    assert low == one
    monkeypatch.setattr(secure_setup, "_coarse_rows", lambda m, dp: min(m, 10))
    before = coarse_grid_exposure([10, *range(2, 10)])
    assert before["edges"] > 5 * one["edges"]
    assert before["narrow"] > one["narrow"]


@pytest.mark.xfail(
    strict=True,
    reason="open limit (docs/privacy.md, 'Count histograms are approximate'): fits on "
    "other targets of the same rows reweigh the moments, which move the coarse edges",
)
def test_fits_on_other_targets_release_the_same_coarse_grid() -> None:
    """Eleven fits on eleven targets of the same rows: each client's data secret hashes
    ``y`` too, so each fit weighs the moments of ``asinh(x)`` anew and places other coarse
    edges. Measured: 1,100 distinct edges, 74 one-row intervals narrower than 1 % of a
    deviation and 7 narrower than 0.1 % (of 1,000 rows; one fit: none)."""
    found = coarse_grid_exposure([10], targets=10)
    assert found["narrow"] == 0, found
