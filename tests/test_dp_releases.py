"""privacy="dp": every data-dependent release is noised, bounded and accounted for.

A recording federation sends every request to the clients and, besides, to a *shadow* of
one client whose data differ in one row (the neighbouring dataset; its replies are thrown
away, so the fit is the fit of the real data). Every noise share a client adds
(``SecureParty.noisy``) is recorded with the values it noises, in units of their bounds,
and every masked reply with its arrays before masking. Then:

- every array of a masked reply that differs between the client and its shadow was noised
  (a data-dependent release without noise would differ without a noise call);
- each released entry moves by at most 2 bound units (replacement: -1 to +1), and the
  squared change over the whole fit, each entry weighted by its noise (the grid rounds'
  and the targets' entries have less), is at most the plan's squared L2 sensitivity;
- the kinds of noisy releases are the ones the accountant charges, at most as many
  levels as it charges, at most ``k`` sampled pairs per node (its ``level_entries``), and
  the reported epsilon is what ``dp-accounting`` gives for the noise actually used.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import numpy as np
import pytest

import fedforest as ff
from fedforest._common import n_stats
from fedforest.federated import client_secure
from fedforest.federated.client_secure import SecureParty
from fedforest.federated.federation import Federation
from fedforest.federated.privacy import dp
from fedforest.federated.privacy.dp import GRID_NOISE_RATIO, TARGET_NOISE_RATIO, grid_entries
from fedforest.federated.protocol import BOOTSTRAP, GRID, OOB, ROUND_A, ROUND_B, Message
from tests.test_privacy import RecordingFederation
from tests.test_secure import _Dying

_RATIO = {"sigma": 1.0, "grid_sigma": GRID_NOISE_RATIO, "target_sigma": TARGET_NOISE_RATIO}


class ShadowFederation(RecordingFederation):
    """Delivers (and records) every request; those to ``shadow.name`` also reach ``shadow``."""

    def __init__(self, inner: Federation, *shadows: ff.Client) -> None:
        super().__init__(inner)
        self.shadows = shadows

    def send_and_receive(self, requests: dict[str, Message], round_index: int):
        replies = super().send_and_receive(requests, round_index)
        for shadow in self.shadows:
            if shadow.name in requests:
                shadow.handle(requests[shadow.name])  # thrown away
        return replies


class Recorder:
    """Per client object: its noise calls and its masked replies' arrays (before masking)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.noisy: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
        self.masked: dict[int, list[tuple[str, dict[str, np.ndarray]]]] = defaultdict(list)
        self.lock = threading.Lock()
        noisy, masked = SecureParty.noisy, SecureParty._masked
        rec = self

        def noisy_rec(party, msg, values, bounds, key="sigma", frac_bits=None):
            v = np.asarray(values, dtype=np.float64)
            b = np.broadcast_to(np.asarray(bounds, dtype=np.float64), v.shape)
            with rec.lock:
                index = len(rec.masked[id(party.client)])  # the reply it goes into
                rec.noisy[id(party.client)].append(
                    (msg.kind, msg.header.get("stage"), key, v / b, index)
                )
            return noisy(party, msg, values, bounds, key, frac_bits)

        def masked_rec(party, msg, kind, arrays):
            with rec.lock:
                rec.masked[id(party.client)].append(
                    (kind, {k: a.copy() for k, a in arrays.items()})
                )
            return masked(party, msg, kind, arrays)

        monkeypatch.setattr(SecureParty, "noisy", noisy_rec)
        monkeypatch.setattr(SecureParty, "_masked", masked_rec)
        # The bootstrap secret under "dp" is random per party: the shadow draws the same.
        # (The noise generators too: every party then draws the same shares, which changes
        # nothing recorded here.)
        monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)


def _data(task: str, seed: int = 0, n_clients: int = 3, n_rows: int = 400):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_clients * n_rows, 4))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=X.shape[0])
    if task == "classification":
        y = (y > 0).astype(float) + (y > 1)
    return X, y, np.repeat(np.arange(n_clients), n_rows)


def _neighbour(X: np.ndarray, y: np.ndarray, task: str, missing: bool):
    """Row 0 replaced by a row far from it in every feature and in the target."""
    X2, y2 = X.copy(), y.copy()
    X2[0] = np.where(X[0] > 0, -1e3, 1e3)
    y2[0] = (2.0 if y[0] == 0 else 0.0) if task == "classification" else -np.sign(y[0]) * 1e3
    if missing:
        X2[0, 1] = np.nan if np.isfinite(X[0, 1]) else 1e3
    return X2, y2


CASES = [
    ("regression", {}, False),
    ("classification", {}, False),
    ("regression", {"bootstrap": True}, True),
    ("classification", {"class_weight": "balanced"}, False),
    ("classification", {"class_weight": {0.0: 1.0, 1.0: 4.0, 2.0: 1.0}}, False),
    ("classification", {"class_weight": "balanced_subsample"}, False),
    ("regression", {"sample_weight": True}, False),
    ("regression", {"criterion": "poisson"}, False),
    ("regression", {"categorical": True}, False),
    ("classification", {"categorical": True}, True),
    ("regression", {"multi_output": True}, False),
    ("classification", {"class_weight": "balanced_subsample", "sample_weight": True}, False),
]


@pytest.mark.parametrize(("task", "extra", "missing"), CASES)
def test_every_dp_release_is_noised_bounded_and_accounted(
    monkeypatch: pytest.MonkeyPatch, task: str, extra: dict, missing: bool
) -> None:
    X, y, ids = _data(task)
    if missing:
        X[np.random.default_rng(1).random(X.shape) < 0.05] = np.nan
    X[0, 1] = np.nan if missing else X[0, 1]
    rec = Recorder(monkeypatch)
    if extra.get("criterion") == "poisson":
        y = np.exp(y)
    if extra.pop("multi_output", False):
        y = np.column_stack([y, X[:, 2] - y])
    sw = None
    if extra.pop("sample_weight", False):  # clipped to 1 on the clients: up to 2 here
        sw = np.random.default_rng(2).uniform(0.1, 2.0, size=y.size)
    X2, y2 = _neighbour(X[ids == 0], y[ids == 0], task, missing)
    cat = None
    if extra.pop("categorical", False):  # feature 3 as 4 categories (the neighbour's differs)
        X[:, 3] = np.digitize(X[:, 3], [-0.7, 0.0, 0.7])
        X2[:, 3] = X[ids == 0][:, 3]
        X2[0, 3] = 3.0 - X[0, 3]
        cat = [3]
    clients = [
        ff.Client(
            X[ids == c],
            y[ids == c],
            name=f"c{c}",
            sample_weight=None if sw is None else sw[ids == c],
            categorical_features=cat,
        )
        for c in range(3)
    ]
    if extra.get("criterion") == "poisson":
        y2[0] = 0.0 if y[0] > 1 else 1e3
    sw2 = None if sw is None else sw[ids == 0].copy()
    if sw2 is not None:
        sw2[0] = 0.1 if sw2[0] > 1 else 2.0
    shadow = ff.Client(X2, y2, name="c0", sample_weight=sw2, categorical_features=cat)
    # Every row changed (its features and target in reverse order): every data-dependent
    # array differs.
    X0, y0 = X[ids == 0], y[ids == 0]
    other = ff.Client(
        X0[::-1],
        y0[::-1],
        name="c0",
        categorical_features=cat,
        sample_weight=None if sw is None else sw[ids == 0][::-1],
    )
    fed = ShadowFederation(ff.LocalFederation(clients), shadow, other)
    est = ff.FedForestRegressor if task == "regression" else ff.FedForestClassifier
    # Under "dp" levels and labels are declared (the handshake then says nothing of them).
    if cat is not None:
        extra["categories"] = {3: [0.0, 1.0, 2.0, 3.0]}
    if task == "classification":
        extra["classes"] = [0.0, 1.0, 2.0]
    n_trees, depth, k = 3, 3, 2
    model = est(
        n_estimators=n_trees,
        max_depth=depth,
        max_features=k,
        privacy="dp",
        epsilon=50.0,
        oob_score=True,
        random_state=0,
        **extra,
    ).fit_federated(fed)
    plan = model.privacy_report_
    real, twin, changed = id(clients[0]), id(shadow), id(other)

    # Every noise call of the client has its twin in the shadow (same requests).
    calls, calls2 = rec.noisy[real], rec.noisy[twin]
    assert [c[:3] for c in calls] == [c[:3] for c in calls2]
    assert calls, "no noise was added"

    # 1. A masked array that differs between the client and its shadow was noised.
    replies, replies2 = rec.masked[real], rec.masked[changed]
    assert len(replies) == len(replies2)
    for i, ((kind, arrays), (_, arrays2)) in enumerate(zip(replies, replies2, strict=True)):
        # A two-word sum (``moments`` and ``moments_lo``) is one release.
        differ = {
            n.removesuffix("_lo") for n in arrays if not np.array_equal(arrays[n], arrays2[n])
        }
        noised = sum(1 for c in calls if c[4] == i)
        assert len(differ) <= noised, (kind, differ, noised)

    # 2. Replacement moves each entry by at most 2 bounds; the fit's squared L2 change,
    # weighted by each entry's noise, is at most the plan's squared sensitivity.
    total = 0.0
    for a, b in zip(calls, calls2, strict=True):
        d = a[3] - b[3]
        assert np.abs(d).max(initial=0.0) <= 2.0 + 1e-9, a[:3]
        total += float((d * d).sum()) * _RATIO[a[2]] ** 2
    assert total <= plan["sensitivity"] ** 2 * (1 + 1e-12), (total, plan["sensitivity"] ** 2)
    # 2b. Each kind on its own within what the accountant charges it (at most 4 squared
    # bound units an entry): the total above could hide one kind beyond its charge, as the
    # grid round's uncharged count was (branch red4: every kind within its charge here).
    moved: dict[tuple[Any, ...], float] = defaultdict(float)
    for a, b in zip(calls, calls2, strict=True):
        moved[a[:3]] += float(((a[3] - b[3]) ** 2).sum())
    clf, n_out = task == "classification", (y.shape[1] if y.ndim == 2 else 1)
    n_numeric = 4 - (cat is not None)
    charges = {
        (GRID, "moments", "grid_sigma"): 3 * n_numeric,  # count, sum, sum of squares
        (GRID, "histogram", "grid_sigma"): n_numeric,
        (GRID, "moments", "target_sigma"): dp.target_entries(
            clf, n_out, extra.get("class_weight") == "balanced"
        ),
        (OOB, None, "sigma"): dp.oob_entries(clf, n_out),
        (BOOTSTRAP, None, "sigma"): n_trees * n_out,
    }
    for kind, charge in charges.items():
        assert moved.get(kind, 0.0) <= 4 * charge + 1e-9, (kind, moved.get(kind), charge)
    per_level = dp.level_entries(
        k, n_stats("classification" if clf else "regression", 3 if clf else 0, n_out), clf, n_out
    )
    levels = moved.get((ROUND_A, None, "sigma"), 0.0) + moved.get((ROUND_B, None, "sigma"), 0.0)
    assert levels <= 4 * n_trees * depth * per_level + 1e-9, (levels, per_level)

    # 3. The releases are of the kinds the accountant charges, within its levels.
    kinds = {(c[0], c[1], c[2]) for c in calls}
    charged = {
        (GRID, "moments", "grid_sigma"),
        (GRID, "histogram", "grid_sigma"),
        (GRID, "moments", "target_sigma"),
        (ROUND_A, None, "sigma"),
        (ROUND_B, None, "sigma"),
        (OOB, None, "sigma"),
        (BOOTSTRAP, None, "sigma"),
    }
    assert kinds <= charged, kinds - charged
    if extra.get("class_weight") == "balanced_subsample" and sw is not None:
        assert (BOOTSTRAP, None, "sigma") in kinds  # the bootstrap round's class counts
    grid_rounds = {c[1] for c in calls if c[0] == GRID}
    for stage in grid_rounds:  # each grid round once (the accountant charges one)
        assert len({c[4] for c in calls if c[0] == GRID and c[1] == stage}) == 1, stage
    assert len({c[4] for c in calls if c[0] == OOB}) <= 1
    levels = sum(1 for c in replies if c[0] == ROUND_A)
    assert levels <= depth * n_trees  # the accountant charges every tree's levels
    for requests, _ in fed.rounds:
        msg = requests.get("c0")
        # No packed counts (two to a word or two edges to a word: noisy counts may be
        # negative or exceed 2^16), no rows-only histograms, no "known" stage.
        assert msg is None or not (
            msg.header.get("pack_counts")
            or msg.header.get("hist_rows")
            or "hist_half" in msg.arrays
        )
        assert msg is None or msg.header.get("stage") != "known"
        if msg is None or msg.kind not in (ROUND_A, ROUND_B) or "pair_off" not in msg.arrays:
            continue
        per_node = np.diff(msg.arrays["pair_off"])
        assert per_node.max(initial=0) <= k, (msg.kind, per_node.max())
    # Every tree grown to max_depth: every planned entry was released, the plan's epsilon
    # spent (an unaccounted level or tree would show as less); else at most that.
    if all(t.max_depth == depth for t in model.trees_):
        assert plan["epsilon_spent"] == pytest.approx(plan["epsilon"], rel=1e-9)
    assert plan["epsilon_spent"] <= plan["epsilon"]


@pytest.mark.parametrize(
    ("at", "kind", "depth", "charged"),
    [
        (2, "grid", 1, 2 / 3),
        (3, "round_a", 1, 1.0),
        (4, "round_b", 1, 1.0),
        (5, "round_a", 2, 2 / 3),
    ],
)
def test_a_drop_is_charged_the_noise_share_it_took(
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    at: int,
    kind: str,
    depth: int,
    charged: float,
) -> None:
    # A client that fails mid-round takes its noise share with it: a round recovered
    # without it (a grid round; a Round A below the roots) released sums carrying
    # (K - 1) / K of the planned variance, so the fit spends more than planned (the
    # report once said the plan's epsilon). A round not recovered released nothing: the
    # roots' Round A (a batch's set-up, sent again to the survivors, whose shares add up
    # to the plan's) and a Round B; the report once charged those 2/3 too. Stumps and the
    # out-of-bag round: every planned entry is released whatever the noise.
    import dp_accounting

    X, y, ids = _data("regression")
    clients = [_Dying(X[ids == 0], y[ids == 0], "c0", at)]
    clients += [ff.Client(X[ids == c], y[ids == c], name=f"c{c}") for c in (1, 2)]
    kept: list[float] = []
    spent = dp.spent_epsilon

    def recording(plan: Any, released: int, grid: int, target: int = 0, noise_kept: float = 1.0):
        kept.append(noise_kept)
        return spent(plan, released, grid, target, noise_kept)

    monkeypatch.setattr(dp, "spent_epsilon", recording)
    model = ff.FedForestRegressor(
        n_estimators=3,
        max_depth=depth,
        max_features=2,
        privacy="dp",
        epsilon=5.0,
        oob_score=True,
        random_state=0,
        on_client_failure="drop",
    ).fit_federated(ff.LocalFederation(clients))
    assert [name for name, _ in model.dropped_clients_] == ["c0"]
    assert f"({kind})" in caplog.text
    assert kept == [pytest.approx(charged, rel=1e-12)]
    if depth > 1:
        return
    report = model.privacy_report_
    # Every release charged at the least fraction of the planned variance (an upper bound).
    worst = dp_accounting.get_epsilon_gaussian(
        report["noise_multiplier"] * np.sqrt(charged), report["delta"]
    )
    assert report["epsilon_spent"] == pytest.approx(worst, rel=1e-9)
    if charged < 1.0:
        assert report["epsilon_spent"] > 1.2 * report["epsilon"]
    else:  # the plan's, no more (a set-up sent again counted once)
        assert report["epsilon_spent"] == pytest.approx(report["epsilon"], rel=1e-9)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_the_row_attacks_find_nothing_under_dp(task: str) -> None:
    # The suite's attacks (tests/test_privacy.py) under "dp" at the documented example
    # budget (epsilon 5) and at 50: no raw value in any reply, no row linked.
    from tests.test_privacy import _data as attack_data
    from tests.test_privacy import _fit, linked_rows, raw_value_exposure

    X, y, h = attack_data(categorical=True, missing=0.05)
    est = ff.FedForestRegressor if task == "regression" else ff.FedForestClassifier
    if task == "classification":
        y = (y > np.median(y)).astype(float)
    for epsilon in (5.0, 50.0):
        declared = {"categories": "from_dtype"}  # the ward's pandas categories, declared
        if task == "classification":
            declared["classes"] = [0.0, 1.0]
        model = est(
            n_estimators=10,
            max_depth=5,
            privacy="dp",
            epsilon=epsilon,
            random_state=0,
            **declared,  # type: ignore[arg-type]
        )
        fed = _fit(model, X, y, h)
        assert raw_value_exposure(fed, X, y) < 0.01
        assert linked_rows(fed, X, y, h) == 0.0
        for _, replies in fed.rounds:
            for msg in replies.values():
                for name, arr in msg.arrays.items():
                    assert arr.dtype in (np.uint64, np.uint8), (msg.kind, name, arr.dtype)


@pytest.mark.parametrize("declared", [False, True])
@pytest.mark.parametrize("change", ["missing", "category", "label"])
def test_the_handshake_is_the_same_for_neighbouring_data_under_dp(
    change: str, declared: bool
) -> None:
    # Replacing one row may add a missing value, a category level or a class label the
    # client had nowhere else; the handshake reply (not noised, not masked, not
    # accounted) said so: an event of probability 1 on one side, 0 on the other. Under
    # "dp" every client now declares every numeric column as possibly missing, and sends
    # neither the levels nor the labels present: the declared ones travel with the
    # request (or the server refuses the fit, test_domains.py). Under "none" the same
    # change shows (the test can fail).
    from fedforest.federated.protocol import HANDSHAKE, PROTOCOL_VERSION

    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    b = pd.Categorical(rng.choice(["p", "q"], 50), categories=["p", "q", "r"])  # declared
    X = pd.DataFrame({"a": rng.normal(size=50), "b": b})
    y = rng.integers(0, 2, size=50).astype(float)
    X2, y2 = X.copy(), y.copy()
    if change == "missing":
        X2.loc[0, "a"] = np.nan
    elif change == "category":
        X2.loc[0, "b"] = "r"
    else:
        y2[0] = 2.0
    request = {"protocol": PROTOCOL_VERSION, "privacy": "dp", "task": "classification"}
    if declared:  # as the estimators' categories= and classes= send them
        request.update(domains=[["b", ["p", "q", "r"]]], classes=[0.0, 1.0, 2.0])
    replies = {}
    for privacy in ("dp", "none"):
        msg = Message(HANDSHAKE, {**request, "privacy": privacy})
        one, two = (ff.Client(a, b, name="c0").handle(msg) for a, b in ((X, y), (X2, y2)))
        replies[privacy] = (one.header, two.header)
    one, two = replies["dp"]
    assert one == two
    one, two = replies["none"]
    # Under "none" too a declared column sends no levels; the rest still differ there.
    assert (one == two) == (declared and change == "category")


def test_a_missing_value_moves_no_more_grid_entries_than_charged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The grid rounds' count of known values is charged like their sums and bins.

    Under "dp" every numeric column may miss values (the handshake says so of every one),
    so the first grid round's count of ``asinh(x)`` per column is data: a row whose value
    is replaced by a missing one leaves the count, both moments and the coarse bin it was
    in. With a value beyond ``sinh(ASINH_CLIP)`` each moves by exactly one bound unit: 4
    units squared in one column, where the accountant charged 3 per numeric column (sum,
    sum of squares, bin; the count was taken as public) until 2026-12-04, and reported
    less epsilon than the noise gave (docs/privacy.md, "Calibration").
    """
    X, y, ids = _data("regression")
    # A column over orders of magnitude (asinh(x) of standard deviation 8), so that the
    # coarse grid (its mean +- 6 deviations) holds a row at asinh(1e9) = 21.4, which the
    # moments clip to ASINH_CLIP = 20: each of the four entries moves by its bound.
    X[:, 1] = np.sinh(8.0 * X[:, 1])
    X[0, 1] = 1e9
    X2 = X[ids == 0].copy()
    X2[0, 1] = np.nan
    rec = Recorder(monkeypatch)
    clients = [ff.Client(X[ids == c], y[ids == c], name=f"c{c}") for c in range(3)]
    shadow = ff.Client(X2, y[ids == 0], name="c0")
    fed = ShadowFederation(ff.LocalFederation(clients), shadow)
    ff.FedForestRegressor(
        n_estimators=1, max_depth=1, privacy="dp", epsilon=50.0, random_state=0
    ).fit_federated(fed)
    moved = 0.0
    for a, b in zip(rec.noisy[id(clients[0])], rec.noisy[id(shadow)], strict=True):
        if a[0] == GRID and a[2] == "grid_sigma":  # the moments and the coarse counts
            moved += float(((a[3] - b[3]) ** 2).sum())
    assert moved == pytest.approx(4.0, abs=1e-6)  # the count, both moments, one bin
    assert moved <= grid_entries(1, False) * (1 + 1e-12), (moved, grid_entries(1, False))
