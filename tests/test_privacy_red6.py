"""The sixth red team on ``privacy="secure"`` (issue 11, branch ``red6``; docs/privacy-findings.md).

*A colluding client's rows subtracted from the model.* The threat model lets a client
collude with the server: it hands over its own data and pair keys. It also knows its own
bootstrap (its in-bag rows and their draws, which it computed). The server holds the
fitted model: every node's mean target (``value``), its draws
(``weighted_n_node_samples``) and its distinct rows (``n_node_samples``), each over at
least ``m`` rows. Routing the colluder's in-bag rows through the trees, the server
subtracts them from each node and keeps the honest clients' part: ``n_h`` rows, ``W_h``
draws, a target sum ``S_h``. Where ``n_h`` is 1, ``S_h / W_h`` is that one honest row's
exact target, and the node's box singles the row out. The floor counts a node's rows,
not the rows outside one client, so nothing stops it. It matters where a large client
colludes (here one site of 1,000 rows beside nine of 100): such a site fills many nodes
all but alone. The test takes the colluder's in-bag rows from its own set-up (what it
knows) and the other clients' only to score the claims. A strict xfail (open).

*A warm start after a change of settings* drew the bootstraps of a cold fit with the new
settings but grew on the earlier trees' guides: other splits over the same rows, whose
nested nodes the server differenced across the two models into rows' targets. Fixed
(``server/digest.warm_history``); the test finds the rows with the fix off.

*"dp" and a colluder*: each client adds a share of the noise; a colluder knows its own,
so the coalition faces ``(K - 1) / K`` of the planned variance. A strict xfail at the
default ``dp_colluders=0`` (still true there); ``dp_colluders=1`` is the remedy
(``tests/test_dp_colluders.py``: the honest shares alone carry the planned variance).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.federated import client_secure
from fedforest.federated.client import Client
from fedforest.federated.client_secure import SecureParty
from fedforest.federated.protocol import OOB, Message
from tests import test_privacy_shapes as shapes
from tests._attack_controls import assert_found_at_some_seed
from tests.test_privacy import _data, _fit

M = 10  # min_aggregate_rows at the defaults
COLLUDER = "site0"


def _big_site_data(seed: int, big: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The suite's data, 9 sites of 100 rows, and ``site0`` of ``big`` rows."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    X0, y0, _ = _data(n_clients=1, n_rows=big, d=8, seed=seed + 100)
    keep = h != 0
    X = pd.concat([X0, X[keep]], ignore_index=True)
    return X, np.concatenate([y0, y[keep]]), np.concatenate([np.zeros(big, int), h[keep]])


def _capture_bootstraps(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Each client's in-bag rows and draws per tree, from its own set-up (what it knows;
    the colluder's is the attack's, the others' only score its claims)."""
    captured: dict[str, Any] = {}
    setup = Client._setup

    def recording_setup(self: Client, msg: Message) -> Any:
        fit = setup(self, msg)
        captured[self.name] = (fit.rows.copy(), fit.w.copy(), fit.tree_rows.copy())
        return fit

    monkeypatch.setattr(Client, "_setup", recording_setup)
    return captured


def _members(tree: Any, values: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """The rows (of ``rows``) in each node of ``tree``, parents before children."""
    members = [rows] + [rows[:0]] * (tree.children_left.size - 1)
    for i in range(tree.children_left.size):
        left, right = tree.children_left[i], tree.children_right[i]
        if left >= 0:
            go = values[members[i], tree.feature[i]] <= tree.threshold[i]
            members[left], members[right] = members[i][go], members[i][~go]
    return members


def _draws(bootstrap: Any, tree: int, n: int, offset: int) -> np.ndarray:
    """A client's draws of each of ``n`` rows in ``tree`` (its rows at ``offset``)."""
    draws = np.zeros(n)
    rows, w, tree_rows = bootstrap
    lo, hi = tree_rows[tree], tree_rows[tree + 1]
    np.add.at(draws, rows[lo:hi] + offset, w[lo:hi])
    return draws


def remainder_claims(
    model: Any, X: pd.DataFrame, y: np.ndarray, own: Callable[[int], np.ndarray] | None
) -> list:
    """The server's attack: per node, the model less the colluders' in-bag rows.

    ``own(t)`` gives the colluders' draws of each row of ``X`` in tree ``t``, from their
    set-ups (None: no colluder, nothing subtracted); ``y`` their targets (a classifier's:
    class codes) where they hold rows. Returns ``(tree, node, claim)`` for
    every node whose honest part is one row: a regressor's claim is that row's target,
    a classifier's its class code (the honest part's weighted class sums, all on one
    class).
    """
    values, claims = X.to_numpy(dtype=np.float64), []
    classify = model.trees_[0].value.ndim == 2 and hasattr(model, "classes_")
    for t, tree in enumerate(model.trees_):
        draws = np.zeros(len(y)) if own is None else own(t)
        mine = _members(tree, values, np.flatnonzero(draws))
        value = tree.value.reshape(tree.n_node_samples.size, -1)
        for i, rows in enumerate(mine):
            if int(tree.n_node_samples[i]) - rows.size != 1:
                continue
            w_total = float(tree.weighted_n_node_samples[i])
            w_h = w_total - float(draws[rows].sum())
            if classify:
                own_sums = np.bincount(y[rows].astype(int), draws[rows], value.shape[1])
                honest = value[i] * w_total - own_sums
                assert np.abs(honest).sum() - honest.max() < 1e-6 * w_total  # one class
                claims.append((t, i, int(np.argmax(honest))))
            else:
                s_h = float(value[i, 0]) * w_total - float(draws[rows] @ y[rows])
                claims.append((t, i, s_h / w_h))
    return claims


def collusion_attack(
    seed: int, n_trees: int, colluders: int = 1, big: int = 1000, n_classes: int = 0
) -> tuple[list, np.ndarray, Any]:
    """A default secure fit on :func:`_big_site_data`, then :func:`remainder_claims`.

    ``colluders``: ``site0`` to ``site{colluders - 1}`` collude (0: the server alone).
    ``n_classes``: a classifier on ``y`` cut at quantiles into that many classes of
    shrinking size (declared: the rarest are held by fewer than ``m`` rows at every
    client), else a regressor. Returns
    the claims, the honest rows rebuilt (the one honest in-bag row of the claim's node,
    from the clients' own bootstraps, when its target or class is the claim's: to 1e-6
    for a target) and, for the checks, the model and the claims that were wrong.
    """
    X, y, h = _big_site_data(seed, big)
    if n_classes:  # class k holds a share in proportion to 0.75^k (12 classes: 26 % to 1 %)
        shares = 0.75 ** np.arange(n_classes)
        y = np.digitize(y, np.quantile(y, np.cumsum(shares / shares.sum())[:-1]))
    mp = pytest.MonkeyPatch()
    captured = _capture_bootstraps(mp)
    try:
        model = (
            ff.FedForestClassifier(
                n_estimators=n_trees, random_state=seed, classes=range(n_classes)
            )
            if n_classes
            else ff.FedForestRegressor(n_estimators=n_trees, random_state=seed)
        )
        _fit(model, X, y, h)
    finally:
        mp.undo()
    first = {f"site{k}": int(np.flatnonzero(h == k)[0]) for k in np.unique(h)}
    coalition = {f"site{k}" for k in range(colluders)}

    def draws_of(names: set[str], t: int) -> np.ndarray:
        return sum((_draws(captured[n], t, len(y), first[n]) for n in names), np.zeros(len(y)))

    own = (lambda t: draws_of(coalition, t)) if coalition else None
    claims = remainder_claims(model, X, y, own)
    values, others = X.to_numpy(dtype=np.float64), set(captured) - coalition
    rebuilt, wrong = np.zeros(len(y), dtype=bool), 0
    for t, node, claim in claims:
        inside = _members(model.trees_[t], values, np.flatnonzero(draws_of(others, t)))[node]
        assert inside.size == 1  # the node's one honest in-bag row
        right = y[inside[0]] == claim if n_classes else abs(y[inside[0]] - claim) < 1e-6
        rebuilt[inside[0]] |= bool(right)
        wrong += not right
    return claims, rebuilt, {"model": model, "wrong": wrong}


def test_the_server_alone_claims_no_row_from_the_model() -> None:
    """Without the colluder's rows every node's honest part is the node: ``m`` rows or
    more, so the attack claims nothing (the floor holds for the server alone)."""
    claims, rebuilt, got = collusion_attack(0, 10, colluders=0)
    assert min(int(t.n_node_samples.min()) for t in got["model"].trees_) >= M
    assert claims == [] and not rebuilt.any()


@pytest.mark.parametrize("n_classes", [0, 12], ids=["regression", "12-classes"])
def test_the_colluders_claims_are_honest_rows_targets(n_classes: int) -> None:
    """With the colluder's rows, each claim is the target (or class) of the one honest
    in-bag row of its node (the clients' own bootstraps as ground truth, routed through
    the tree): the attack is sound, so the strict xfail below fails on a real leak."""
    claims, rebuilt, got = collusion_attack(0, 10, n_classes=n_classes)
    assert len(claims) > 5 and got["wrong"] == 0 and rebuilt.any()


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="limit: a colluding client's rows subtracted from a node leave the honest part, "
    "which the floor does not hold to m rows (docs/privacy.md, 'What a colluding client adds')",
)
def test_a_colluding_client_leaves_no_honest_row_alone() -> None:
    """``site0`` (1,000 of 1,900 rows) colludes; 10 default secure trees. Measured
    2026-12-04 at 50 trees, data seeds 0 to 2: 101, 58 and 75 of the 900 honest rows'
    targets to 1e-6 (3, 0 and 0 with ten sites of 100 rows, ``site0`` colluding)."""
    _, rebuilt, _ = collusion_attack(0, 10)
    assert rebuilt.sum() == 0, int(rebuilt.sum())


def oob_request_claims(seed: int, n_trees: int) -> tuple[int, float, dict[str, np.ndarray]]:
    """``site0`` (1,000 rows) alone reads the out-of-bag request of a secure fit.

    The request carries every tree's arrays to every client. ``site0`` routes its own
    in-bag rows through each tree and subtracts their draws from each node's ``weight``;
    where one draw is left, ``value * weight`` less its own draws times targets is that
    draw's row's target. Returns the honest rows whose target a claim gives to 1e-6, the
    fit's out-of-bag score and the request's arrays.
    """
    X, y, h = _big_site_data(seed, 1000)
    mp = pytest.MonkeyPatch()
    captured = _capture_bootstraps(mp)
    try:
        model = ff.FedForestRegressor(n_estimators=n_trees, random_state=seed, oob_score=True)
        fed = _fit(model, X, y, h)
    finally:
        mp.undo()
    request = next(q for q, _ in fed.rounds if next(iter(q.values())).kind == OOB)[COLLUDER]
    a = request.arrays
    values, rebuilt = X.to_numpy(dtype=np.float64), set()
    for t in range(n_trees):
        draws = _draws(captured[COLLUDER], t, len(y), 0)
        lo, hi = int(a["tree_off"][t]), int(a["tree_off"][t + 1])
        members = {lo: np.flatnonzero(draws)}
        for i in range(lo, hi):  # parents before children, global indices
            rows = members.get(i, np.zeros(0, dtype=np.int64))
            if a["left"][i] >= 0:
                go = values[rows, a["feature"][i]] <= a["threshold"][i]
                members[a["left"][i]], members[a["right"][i]] = rows[go], rows[~go]
            if round(float(a["weight"][i] - draws[rows].sum())) == 1:
                target = a["value"][i, 0] * a["weight"][i] - draws[rows] @ y[rows]
                match = np.flatnonzero((h != 0) & (np.abs(y - target) < 1e-6))
                rebuilt.update(match.tolist() if match.size == 1 else [])
    return len(rebuilt), float(model.oob_score_), a


@pytest.mark.filterwarnings("ignore:.*drawn by every tree:UserWarning")
def test_the_out_of_bag_request_carries_what_scoring_reads(monkeypatch) -> None:
    """Found and fixed (2026-12-04): the out-of-bag request carried every node's mean and
    draws to every client; ``site0`` alone (no server, no collusion) read 64, 35 and 39 of
    the 900 other rows' targets from it (50 trees, data seeds 0 to 2). It now carries the
    leaves' values and no weight outside set splits' children (numeric data: none), and
    the score is the same to the bit. With the full arrays (monkeypatched back) the client
    reads rows again."""
    from fedforest.federated.server import oob

    found, score, arrays = oob_request_claims(0, 10)
    assert found == 0 and not arrays["weight"].any()
    assert not arrays["value"][arrays["left"] >= 0].any() and arrays["value"].any()
    monkeypatch.setattr(oob, "scoring_arrays", lambda left, right, set_off, v, w: (v, w))
    found_before, score_before, _ = oob_request_claims(0, 10)
    assert score == score_before and found_before > 5


# --------------------------------------------------------------------------- warm starts
def _boxes(tree: Any, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Each node's box: per feature, its path's lower and upper bounds (the server's)."""
    n = tree.feature.size
    lo, hi = np.full((n, d), -np.inf), np.full((n, d), np.inf)
    for i in range(n):
        left, right = tree.children_left[i], tree.children_right[i]
        if left >= 0:
            f, t = tree.feature[i], tree.threshold[i]
            lo[left], hi[left], lo[right], hi[right] = lo[i], hi[i], lo[i], hi[i]
            hi[left, f], lo[right, f] = min(hi[i, f], t), max(lo[i, f], t)
    return lo, hi


def nested_differences(tree_a: Any, tree_b: Any, d: int) -> list[tuple[int, float]]:
    """The server's attack on one tree of two fits: every node of one inside a node of the
    other (boxes, from the thresholds) whose row count is 1 to ``M - 1`` more.

    If both trees drew the same bootstrap, the rows of the inner node are rows of the
    outer, and the difference of their sums is over the rows between: with one row,
    ``(W v)_outer - (W v)_inner`` over the draws between is that row's target. Returns
    (rows between, the target so claimed) per pair.
    """
    out = []
    for a, b in ((tree_a, tree_b), (tree_b, tree_a)):
        (lo_a, hi_a), (lo_b, hi_b) = _boxes(a, d), _boxes(b, d)
        inside = np.all((lo_b[None] <= lo_a[:, None]) & (hi_a[:, None] <= hi_b[None]), axis=2)
        more = b.n_node_samples[None, :] - a.n_node_samples[:, None]
        for i, j in zip(*np.nonzero(inside & (more > 0) & (more < M)), strict=True):
            w_a, w_b = a.weighted_n_node_samples[i], b.weighted_n_node_samples[j]
            if w_b > w_a:
                target = (b.value[j, 0] * w_b - a.value[i, 0] * w_a) / (w_b - w_a)
                out.append((int(more[i, j]), float(target)))
    return out


def warm_history_exposure(seed: int, n_trees: int = 10, first: int = 5) -> int:
    """Rows whose exact target two fits give, one cold and one warm-started after a change.

    Fit C: ``n_trees`` default secure trees of depth 8. Fit B: ``first`` trees of depth 4,
    then ``warm_start`` to ``n_trees`` at depth 8, C's settings. B's new trees draw C's
    bootstraps if their digest is C's, but grow on the depth-4 trees' guides: other
    splits over the same rows. The server compares each new tree of B with C's tree of
    the same index (:func:`nested_differences`) and claims a target where one row lies
    between; a claim within 1e-6 of exactly one row's target rebuilds that row.
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    cold = ff.FedForestRegressor(n_estimators=n_trees, max_depth=8, random_state=seed)
    _fit(cold, X, y, h)
    warm = ff.FedForestRegressor(n_estimators=first, max_depth=4, random_state=seed)
    _fit(warm, X, y, h)
    warm.set_params(warm_start=True, n_estimators=n_trees, max_depth=8)
    _fit(warm, X, y, h)
    rebuilt: set[int] = set()
    for t in range(first, n_trees):
        for rows, target in nested_differences(warm.trees_[t], cold.trees_[t], X.shape[1]):
            match = np.flatnonzero(np.abs(y - target) < 1e-6)
            if rows == 1 and match.size == 1:
                rebuilt.add(int(match[0]))
    return len(rebuilt)


def test_a_warm_start_after_other_settings_draws_other_bootstraps(monkeypatch) -> None:
    """Found and fixed (2026-12-04): the new trees' digest left out the warm start, so a
    warm start after a change of settings drew the bootstraps of a cold fit with the new
    settings while its guides differed. Measured with the history left out of the digest
    (monkeypatched back): 2, 6 and 6 of 1,000 rows' exact targets from the two models at
    data seeds 0, 1 and 2 (5 shared trees); now none, at seeds 1 and 2. (With the clients'
    data tags in the digest, 2026-12-04, other draws: 4, 2 and 4 with the history left
    out; 10, 2 and 5 on 2026-12-05: the control reads seeds 2, 0 and 1 in turn.)"""
    from fedforest.federated.server import grower

    assert warm_history_exposure(1) == 0 and warm_history_exposure(2) == 0
    monkeypatch.setattr(grower, "warm_history", lambda cfg, digest, guides: None)
    assert_found_at_some_seed(warm_history_exposure, lambda rows: rows >= 3, (2, 0, 1))


def test_a_warm_start_with_the_same_settings_is_still_one_fit() -> None:
    """The history enters the digest only after a change of settings: 5 trees, then a warm
    start to 10 with the same settings, is the cold fit of 10 trees, node for node."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=0)
    cold = ff.FedForestRegressor(n_estimators=10, max_depth=6, random_state=0)
    _fit(cold, X, y, h)
    warm = ff.FedForestRegressor(n_estimators=5, max_depth=6, random_state=0)
    _fit(warm, X, y, h)
    warm.set_params(warm_start=True, n_estimators=10)
    _fit(warm, X, y, h)
    for a, b in zip(warm.trees_, cold.trees_, strict=True):
        assert np.array_equal(a.threshold, b.threshold) and np.array_equal(a.value, b.value)


# --------------------------------------------------------------------------- sample weights
def reweighted_root_claims(row: int, weight: float) -> tuple[float, float]:
    """Two default secure fits, the second with ``row``'s sample weight at ``weight``.

    The server differences each tree's roots across the two models: where the rows or the
    draws differ, ``(W v)_a - (W v)_b`` over ``W_a - W_b`` is a target if the two trees
    drew the same bootstrap (one row's draws times its change of weight). Returns the
    claims' smallest distance to ``row``'s target and to any other row's (the baseline).
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=8)
    plain = ff.FedForestRegressor(n_estimators=10, random_state=0)
    _fit(plain, X, y, h)
    weights = np.where(np.arange(len(y)) == row, weight, 1.0)
    reweighted = ff.FedForestRegressor(n_estimators=10, random_state=0)
    _fit(reweighted, X, y, h, sample_weight=weights)
    claims = []
    for a, b in zip(plain.trees_, reweighted.trees_, strict=True):
        w_a, w_b = a.weighted_n_node_samples[0], b.weighted_n_node_samples[0]
        if abs(w_a - w_b) > 1e-9:
            claims.append((a.value[0, 0] * w_a - b.value[0, 0] * w_b) / (w_a - w_b))
    if not claims:
        return np.inf, np.inf
    gaps = np.abs(np.asarray(claims)[:, None] - y[None, :])
    others = np.delete(gaps, row, axis=1)
    return float(gaps[:, row].min()), float(others.min())


@pytest.mark.parametrize("weight", [0.0, 2.0])
def test_a_refit_with_one_weight_changed_gives_no_target(monkeypatch, weight: float) -> None:
    """Found and fixed (2026-12-04): the data secret left the sample weights out, so a
    refit with one row's weight at 0 (the row left out, say after a withdrawn consent) or
    at 2 drew the same bootstraps, and the two models' roots gave that row's target to 7e-9
    to 8e-8 in each tree that drew it (4 to 6 of 10; rows 7, 123 and 555). With the weights
    in the secret the bootstraps are independent: no claim within 1e-6 of the row's
    target. With the fix off (the weights left out again) the attack reads it."""

    to_row, _ = reweighted_root_claims(7, weight)
    assert to_row > 1e-6
    secret = client_secure.data_secret

    def without(X, y, name, sample_weight=None, categorical=None):  # noqa: ANN001, ANN202
        return secret(X, y, name, None, categorical)

    monkeypatch.setattr(client_secure, "data_secret", without)
    to_row, to_others = reweighted_root_claims(7, weight)
    assert to_row < 1e-6 < to_others


# --------------------------------------------------------------------------- categories
def _paths(tree: Any) -> dict[tuple, int]:
    """Each node by its path from the root: every split (feature, threshold, set) and side."""
    path: dict[int, tuple] = {0: ()}
    for i in range(tree.children_left.size):
        left, right = tree.children_left[i], tree.children_right[i]
        if left >= 0:
            codes, sides = tree.split_set(i)
            split = (int(tree.feature[i]), float(tree.threshold[i]), *codes, *sides)
            path[left], path[right] = (*path[i], split, 0), (*path[i], split, 1)
    return {p: i for i, p in path.items()}


def recoded_row_claims(row: int) -> float:
    """Two default secure fits, the second with ``row``'s category changed (a corrected
    record). The server matches the nodes of each tree's two versions by their paths and,
    where the rows differ by one, reads ``(W v)_a - (W v)_b`` over ``W_a - W_b`` as a
    target. Returns the claims' smallest distance to ``row``'s target."""
    X, y, h = _data(n_clients=10, n_rows=100, d=4, categorical=True)
    before = ff.FedForestRegressor(n_estimators=10, random_state=0)
    _fit(before, X, y, h)
    X = X.copy()
    X.loc[row, "ward"] = "c" if X.loc[row, "ward"] != "c" else "a"
    after = ff.FedForestRegressor(n_estimators=10, random_state=0)
    _fit(after, X, y, h)
    closest = np.inf
    for a, b in zip(before.trees_, after.trees_, strict=True):
        paths_b = _paths(b)
        for path, i in _paths(a).items():
            j = paths_b.get(path)
            if j is None or abs(int(a.n_node_samples[i]) - int(b.n_node_samples[j])) != 1:
                continue
            w_a, w_b = a.weighted_n_node_samples[i], b.weighted_n_node_samples[j]
            if abs(w_a - w_b) > 1e-9:
                claim = (a.value[i, 0] * w_a - b.value[j, 0] * w_b) / (w_a - w_b)
                closest = min(closest, abs(claim - y[row]))
    return float(closest)


def _categories_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data secret as before the fix: the categorical columns' values left out."""

    secret = client_secure.data_secret

    def without(X, y, name, sample_weight=None, categorical=None):  # noqa: ANN001, ANN202
        return secret(X, y, name, sample_weight)

    monkeypatch.setattr(client_secure, "data_secret", without)


def test_a_refit_with_one_category_changed_gives_no_target(monkeypatch) -> None:
    """Found and fixed (2026-12-04): the data secret hashed the feature matrix, which holds
    0.0 in a categorical column until the federation's codes arrive, so a refit with one
    row's category changed drew the same bootstraps; the nodes the two models share gave
    the row's target to 7e-9 to 3e-8 (rows 7, 123 and 555; 17 to 26 one-row differences).
    The secret now hashes the categorical values; with them left out the attack reads it."""
    assert recoded_row_claims(123) > 1e-6
    _categories_left_out(monkeypatch)
    assert recoded_row_claims(123) < 1e-6


def test_a_refit_on_the_same_clients_with_categories_is_the_same_forest(monkeypatch) -> None:
    """A second fit on the same ``Client`` objects grows the first fit's forest: the secret
    no longer reads the federation's codes the first fit wrote into the matrix (with them,
    the refit drew other bootstraps: the same data and settings, another forest)."""
    X, y, h = _data(n_clients=4, n_rows=100, d=3, categorical=True)

    def two_fits() -> bool:
        clients = [
            ff.Client(X[h == k].reset_index(drop=True), y[h == k], f"site{k}") for k in range(4)
        ]
        fits = [
            ff.FedForestRegressor(n_estimators=3, random_state=0).fit_federated(
                ff.LocalFederation(clients)
            )
            for _ in range(2)
        ]
        pairs = zip(fits[0].trees_, fits[1].trees_, strict=True)
        return all(np.array_equal(a.value, b.value) for a, b in pairs)

    assert two_fits()
    _categories_left_out(monkeypatch)
    assert not two_fits()


# --------------------------------------------------------------------------- one value changed
def changed_value_exposure(row: int, n_trees: int = 10, seed: int = 0) -> tuple[int, int]:
    """Two default secure fits, the second with one value of ``row`` corrected (``x7`` +
    0.01). Only that row's client redraws its bootstrap (its data secret changed; the
    settings digest, the row counts and every other client's data did not), while its
    secret row weights move the grids and so every tree's splits. The server takes every
    pair of nested nodes across the two models (:func:`nested_differences`): the other
    clients drew the same rows, so a pair one row apart can hold one of their rows alone.
    Returns (rows whose exact target a one-row pair gives, those not at ``row``'s client).
    """
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    before = ff.FedForestRegressor(n_estimators=n_trees, random_state=seed)
    _fit(before, X, y, h)
    X = X.copy()
    X.loc[row, "x7"] += 0.01
    after = ff.FedForestRegressor(n_estimators=n_trees, random_state=seed)
    _fit(after, X, y, h)
    exact: set[int] = set()
    for a, b in zip(before.trees_, after.trees_, strict=True):
        for rows, target in nested_differences(a, b, X.shape[1]):
            match = np.flatnonzero(np.abs(y - target) < 1e-6)
            if rows == 1 and match.size == 1:
                exact.add(int(match[0]))
    return len(exact), sum(h[r] != h[row] for r in exact)


def _data_tag_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings digest as before the clients' pooled data tag (2026-12-04)."""
    from fedforest.federated.server import batch_setup

    digest = batch_setup.settings_digest

    def without(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        return digest(*args[:6])

    monkeypatch.setattr(batch_setup, "settings_digest", without)


def test_a_refit_after_one_value_changed_isolates_no_row(monkeypatch) -> None:
    """Found open by red team 6, fixed 2026-12-04: a refit after one value of row 305
    (``site3``) was corrected redrew that client's bootstrap only, and 50 default trees'
    nested nodes gave 8 rows' exact targets, 6 at other clients. The settings digest now
    covers the sum of the clients' data tags (``client_secure.data_tag``, masked in the
    first grid round), which the changed value moves: every client redraws. With the tag
    left out of the digest the attack finds the rows again."""
    assert changed_value_exposure(305, n_trees=50) == (0, 0)
    _data_tag_left_out(monkeypatch)
    assert_found_at_some_seed(
        lambda seed: changed_value_exposure(305, n_trees=50, seed=seed),
        lambda got: got[0] > 0 and got[1] > 0,  # exact targets, some at other clients
        (0, 1, 2),
    )


# --------------------------------------------------------------------------- more shapes
def twenty_classes(seed: int, n: int = 100) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, dict]:
    """Twenty declared classes, shares in proportion to 0.8^k (15 % to 0.2 %: the rarest
    held by one or two rows), ``class_weight="balanced_subsample"`` (the bootstrap round,
    each tree's class weights), a binary and an integer feature."""
    X, h = shapes._base(seed, [n] * 10)
    rng = np.random.default_rng(seed + 1)
    X[:, 2], X[:, 3] = rng.integers(0, 2, size=len(X)), rng.integers(0, 6, size=len(X))
    score = shapes._y(X, rng) + X[:, 2]
    share = 0.8 ** np.arange(20)
    y = np.digitize(score, np.quantile(score, np.cumsum(share / share.sum())[:-1]))
    kw = {"task": "classification", "classes": list(range(20))}
    return shapes._frame(X), y, h, kw | {"class_weight": "balanced_subsample"}


def integer_weights(seed: int, n: int = 100) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, dict]:
    """Regression, sample weights that are repeat counts: integers 1 to 5, a tenth at 0."""
    X, h = shapes._base(seed, [n] * 10)
    y = shapes._y(X, np.random.default_rng(seed + 1))
    w = np.random.default_rng(seed + 2).integers(1, 6, size=len(y)).astype(float)
    w[np.random.default_rng(seed + 3).random(len(y)) < 0.1] = 0.0
    return shapes._frame(X), y, h, {"sample_weight": w}


@pytest.mark.parametrize("shape", [twenty_classes, integer_weights], ids=lambda f: f.__name__)
def test_the_shape_attacks_find_nothing_on_more_shapes(monkeypatch, shape) -> None:  # noqa: ANN001
    """red5's attacks (``tests/test_privacy_shapes.py``'s ``measure``: raw values, the
    fewest rows of a decoded sum, model nodes under ``m`` distinct in-bag rows, thresholds
    at training values, differencing) on two shapes it did not run: measured 2026-12-04,
    nothing at data seeds 0 to 2 (3 trees; 10 trees at seed 0)."""
    monkeypatch.setitem(shapes.SHAPES, shape.__name__, shape)
    in_bag = shapes._in_bag_weights

    def without_weightless_rows(model, clients, h, n_trees, random_state=0):  # noqa: ANN001, ANN202
        # The harness recomputes the draws; a row of weight 0 takes no part (the client
        # drops it), so it is no in-bag row: counted, it made 2 pairs and a partition
        # "isolate" rows no sum holds.
        w = in_bag(model, clients, h, n_trees, random_state)
        for k, client in enumerate(clients):
            if client.sample_weight is not None:
                w[:, np.flatnonzero(h == k)[client.sample_weight == 0]] = 0.0
        return w

    monkeypatch.setattr(shapes, "_in_bag_weights", without_weightless_rows)
    got = shapes.measure(shape.__name__, 0, trees=3, n=60)
    assert got["raw"] == 0.0 and set(got["dtypes"]) <= {"<u8", "|u1"}, got
    assert min(got["fewest"].values()) >= got["m"], got
    assert got["nodes"] > 50 and got["small"] == 0, got
    assert got["thr"] == 0, got
    assert got["differencing"] == {"parent": 0, "further": 0, "partition": 0, "rows": 0.0}, got
    under_none = shapes.measure(shape.__name__, 0, trees=3, n=60, privacy="none")
    # The replies carry the values, so the test can fail (measured 0.87 with integer
    # weights: a tenth of the rows weigh 0 and take no part).
    assert under_none["raw"] > 0.8, under_none


# --------------------------------------------------------------------------- "dp" and a colluder
def _dp_noise_shares(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[np.ndarray]]:
    """Each client's noise shares, call by call, in units of the plan's noise of the entry.

    A share is what ``SecureParty.noisy`` adds, divided by the planned standard deviation
    of the released sum's entry (``sigma`` of its kind times the entry's bound); the
    colluder knows its own (its generator is its own), the others' only score the claim.
    """
    shares: dict[str, list[np.ndarray]] = {}
    noisy = SecureParty.noisy

    def recording(party, msg, values, bounds, key="sigma", frac_bits=None):  # noqa: ANN001
        out = noisy(party, msg, values, bounds, key, frac_bits)
        v = np.asarray(values, dtype=np.float64)
        b = np.broadcast_to(np.asarray(bounds, dtype=np.float64), v.shape)
        unit = float(party.dp[key]) * b
        keep = unit > 0
        shares.setdefault(party.client.name, []).append((out - v)[keep] / unit[keep])
        return out

    monkeypatch.setattr(SecureParty, "noisy", recording)
    return shares


def _dp_fit_shares(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], np.ndarray, int]:
    """A ``"dp"`` fit of 3 clients (epsilon 5); its report, the noise per entry of the
    honest clients' shares summed, and every client's summed, stacked (2, entries)."""
    X, y, h = _data(n_clients=3, n_rows=400, d=4)
    shares = _dp_noise_shares(monkeypatch)
    model = ff.FedForestRegressor(
        n_estimators=3, max_depth=3, privacy="dp", epsilon=5.0, random_state=0
    )
    _fit(model, X, y, h)
    names = sorted(shares)
    calls = {len(shares[n]) for n in names}
    assert len(calls) == 1  # every client noises the same releases, call by call
    per_client = [np.concatenate(shares[n]) for n in names]
    everyone = np.sum(per_client, axis=0)
    honest = everyone - per_client[names.index(COLLUDER)]
    return model.privacy_report_, np.stack([everyone, honest]), len(names)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_under_dp_the_server_alone_faces_the_planned_noise(monkeypatch, seeded_secrets) -> None:
    """The clients' shares add up to the planned noise of every released entry: the
    report's epsilon holds against the server (variance 1 in units of the plan).

    The clients' secrets are seeded: from the operating system the sample variance of
    about 1,700 entries leaves the band one run in a few hundred."""
    report, noise, _ = _dp_fit_shares(monkeypatch)
    assert noise.shape[1] > 1000
    assert 0.9 < noise[0].var() < 1.1, noise[0].var()
    assert report["epsilon_spent"] <= report["epsilon"] * (1 + 1e-9)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="limit at dp_colluders=0 (the default): a colluding client's noise share is its "
    "own, so the server and it face (K - 1) / K of the planned variance; dp_colluders=1 "
    "is the remedy (docs/privacy.md, 'privacy=\"dp\"', Limits; tests/test_dp_colluders.py)",
)
def test_under_dp_a_colluding_client_leaves_the_planned_noise(monkeypatch) -> None:
    """``site0`` of 3 clients colludes and subtracts its own noise shares. Measured
    2026-12-04 (1,682 noised entries; the shares are random, so each run differs): 0.63
    and 0.69 of the planned variance left (2/3 expected), and the plan's epsilon of 5.0 is
    6.3 against the coalition at 2/3 (7.5 with 2 clients, 5.3 with 10)."""
    import dp_accounting

    report, noise, k = _dp_fit_shares(monkeypatch)
    left = noise[1].var()
    assert left == pytest.approx((k - 1) / k, rel=0.1)  # the attack does what it says
    # The plan's epsilon (its noise multiplier) against the server, then the coalition.
    planned, against = (
        dp_accounting.get_epsilon_gaussian(report["noise_multiplier"] * np.sqrt(v), report["delta"])
        for v in (1.0, left)
    )
    assert planned == pytest.approx(report["epsilon"], rel=1e-6)
    assert against <= 1.01 * planned, (left, planned, against)
