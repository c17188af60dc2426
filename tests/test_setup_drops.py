"""A client dropped in a batch's set-up under ``privacy="secure"`` (and ``"dp"``): the batch
set up again.

The set-up (the bootstrap round, or the roots' Round A) is not recovered: its survivors'
sums would run over the bootstraps the full set's digest drew, which a refit without the
drop draws again (``tests/test_privacy_drops.py`` measures what that isolated). The
grower sends the set-up again under a digest over the survivors and the drop
(``server/batch_setup.py``); later batches are bound to it too, and the out-of-bag round
tells each client every tree's digest.
"""

from __future__ import annotations

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.client import bootstrap_counts
from fedforest.federated.client_secure import SecureParty, bind_secret, tree_secrets
from fedforest.federated.protocol import (
    BOOTSTRAP,
    DIGEST_BYTES,
    OOB,
    RECOVER,
    ROUND_A,
    SETTINGS_DIGEST,
    TREE_DIGEST,
    Message,
)
from tests.test_privacy_drops import _RecordingDrops as RecordingFederation
from tests.test_secure import _data
from tests.test_secure import _Dying as _Dies


def _clients(
    at: int | None, n_clients: int = 4, weights: bool = False, missing: bool = False
) -> list[ff.Client]:
    X, y, h = _data(n_clients=n_clients)
    if missing:  # a column with missing values: the known values' round comes first
        X[::17, 5] = np.nan
    if weights:  # a classifier with sample weights: balanced_subsample's bootstrap round
        y = (y > np.median(y)).astype(int)
    out = []
    for k in range(n_clients):
        kw = {"sample_weight": np.full(int((h == k).sum()), 0.5 + k)} if weights else {}
        if k == n_clients - 1 and at is not None:
            out.append(_Dies(X[h == k], y[h == k], str(k), at=at, **kw))
        else:
            out.append(ff.Client(X[h == k], y[h == k], str(k), **kw))
    return out


def _setups(fed: RecordingFederation) -> list[tuple[int, dict, bytes]]:
    """Each set-up request sent: (round, its set-up, digest)."""
    out = []
    for i, (requests, _) in enumerate(fed.rounds):
        msg = next(iter(requests.values()))
        if "setup" in msg.header:
            out.append((i, msg.header["setup"], msg.arrays[SETTINGS_DIGEST].tobytes()))
    return out


def _in_bag(client: ff.Client, tree: int, setup: dict, digest: bytes) -> np.ndarray:
    """The client's bootstrap counts of ``tree`` with its secret bound to ``digest``."""
    party = client._secure
    assert party is not None
    secret = bind_secret(party.secret, digest)
    draws = int(setup["draws"].get(client.name, client.n_samples))
    return bootstrap_counts(setup["seed"], tree, client.name, client.n_samples, secret, draws)


def test_a_drop_in_the_roots_round_a_sets_the_batch_up_again() -> None:
    clients = _clients(at=3)
    fed = RecordingFederation(ff.LocalFederation(clients))
    depth = 3
    model = ff.FedForestRegressor(
        n_estimators=3, max_depth=depth, random_state=0, on_client_failure="drop"
    ).fit_federated(fed)
    assert model.dropped_clients_ == [("3", 3)]
    kinds = model.communication_.per_round["kind"].tolist()
    # The roots' Round A again, in place of the recovery round: one round more than a fit
    # without the drop may take (handshake, two grid rounds, two per level).
    assert kinds[3] == kinds[4] == ROUND_A and RECOVER not in kinds
    assert model.communication_.rounds <= 2 * depth + 3 + 1
    (r1, setup, first), (r2, again, second) = _setups(fed)
    assert (r1, r2, setup["first_tree"], again["first_tree"]) == (3, 4, 0, 0)
    assert first != second
    # Every root holds the survivors' rows drawn under the second digest, not the first.
    for t, tree in enumerate(model.trees_):
        rows = [
            sum(int((_in_bag(c, t, setup, d) > 0).sum()) for c in clients[:3])
            for d in (first, second)
        ]
        assert tree.n_node_samples[0] == rows[1] != rows[0]
        assert tree.n_node_samples.min() >= 10


def test_a_drop_in_a_grid_round_after_the_first_sum_is_bound_to_the_digest() -> None:
    """A drop in the first masked round: the survivors' fit. In the second: another digest.

    A column with missing values makes the known values' count the first masked round
    (recovered) and the moments the second (sent again to the survivors); a drop in the
    coarse counts stops a secure fit (red team 18, tests/test_privacy_red18.py).
    """
    kw = dict(n_estimators=2, max_depth=2, random_state=0)
    survivors = _clients(None, missing=True)[:3]  # the same rows: the digest covers the tags
    without = ff.FedForestRegressor(**kw).fit_federated(ff.LocalFederation(survivors))
    digests = {}
    for at in (1, 2):
        model = ff.FedForestRegressor(on_client_failure="drop", **kw)
        model.fit_federated(ff.LocalFederation(_clients(at, missing=True)))
        assert model.dropped_clients_ == [("3", at)]
        digests[at] = model._settings_digest
    assert digests[1] == without._settings_digest != digests[2]
    with pytest.raises(ValueError, match="lost in the second grid round"):
        ff.FedForestRegressor(on_client_failure="drop", **kw).fit_federated(
            ff.LocalFederation(_clients(3, missing=True))
        )


@pytest.mark.filterwarnings("ignore:.*drawn by every tree:UserWarning")
def test_a_drop_in_a_batch_rebinds_the_next_and_the_oob_round_follows() -> None:
    """A drop in batch 1's Round B: batch 2 gets another digest; out of bag, each tree its own."""
    clients = _clients(at=6)
    fed = RecordingFederation(ff.LocalFederation(clients))
    model = ff.FedForestRegressor(
        n_estimators=4, max_depth=3, tree_batch_size=2, random_state=0, oob_score=True,
        on_client_failure="drop",
    ).fit_federated(fed)  # fmt: skip
    assert model.dropped_clients_ == [("3", 6)]
    (_, setup, first), (_, later, second) = _setups(fed)
    assert (setup["first_tree"], later["first_tree"]) == (0, 2) and first != second
    assert model._settings_digest == ""  # several: a warm start with oob_score is refused
    oob = next(next(iter(q.values())) for q, _ in fed.rounds if next(iter(q.values())).kind == OOB)
    sent = oob.arrays[TREE_DIGEST]
    assert sent.dtype == np.uint8 and sent.shape == (4, DIGEST_BYTES)
    tree_digest = [first, first, second, second]
    assert [row.tobytes() for row in sent] == tree_digest
    for t, tree in enumerate(model.trees_):  # batch 1's roots held the dropped client's rows
        held = clients if t < 2 else clients[:3]
        assert tree.n_node_samples[0] == sum(
            int((_in_bag(c, t, setup, tree_digest[t]) > 0).sum()) for c in held
        )
    for c in clients[:3]:  # rows in every tree's bag have no out-of-bag prediction
        bags = np.array([_in_bag(c, t, setup, tree_digest[t]) > 0 for t in range(4)])
        np.testing.assert_array_equal(np.isnan(c.oob_prediction_[:, 0]), bags.all(axis=0))
        last = np.array([_in_bag(c, t, setup, second) > 0 for t in range(4)])  # one digest: wrong
        assert not np.array_equal(bags, last)
    assert np.isfinite(model.oob_score_)


def test_a_drop_in_the_bootstrap_round_sets_the_batch_up_again() -> None:
    clients = _clients(at=3, weights=True)
    fed = RecordingFederation(ff.LocalFederation(clients))
    model = ff.FedForestClassifier(
        n_estimators=3, max_depth=3, random_state=0, class_weight="balanced_subsample",
        on_client_failure="drop",
    ).fit_federated(fed)  # fmt: skip
    assert model.dropped_clients_ == [("3", 3)]
    kinds = model.communication_.per_round["kind"].tolist()
    assert kinds[3] == kinds[4] == BOOTSTRAP and RECOVER not in kinds
    (_, setup, first), (_, _, second) = _setups(fed)
    assert first != second
    for t, tree in enumerate(model.trees_):
        assert tree.n_node_samples[0] == sum(
            int((_in_bag(c, t, setup, second) > 0).sum()) for c in clients[:3]
        )


def test_a_client_checks_the_trees_digests() -> None:
    X, y, h = _data()
    client = ff.Client(X[h == 0], y[h == 0], "0")
    ok = np.zeros((2, DIGEST_BYTES), dtype=np.uint8)
    assert tree_secrets(None, Message(OOB, {}, {}), 2, "0") == []
    with pytest.raises(ValueError, match="outside a secure fit"):
        tree_secrets(None, Message(OOB, {}, {TREE_DIGEST: ok}), 2, "0")
    party = SecureParty(client)
    for bad in (ok[:1], ok.astype(np.uint16), ok.astype(np.float64), ok[:, :5]):
        with pytest.raises(ValueError, match="tree_digest|digests"):
            tree_secrets(party, Message(OOB, {}, {TREE_DIGEST: bad}), 2, "0")
    secrets = tree_secrets(party, Message(OOB, {}, {TREE_DIGEST: ok}), 2, "0")
    assert secrets == [bind_secret(party.secret, bytes(DIGEST_BYTES))] * 2


@pytest.mark.filterwarnings("ignore:.*drawn by every tree:UserWarning")
def test_a_warm_start_scores_its_earlier_trees_on_their_own_digest() -> None:
    """A drop in the set-up of a warm start's batch: the earlier trees keep the fit's."""
    kw = dict(max_depth=2, random_state=0, oob_score=True, on_client_failure="drop")
    model = ff.FedForestRegressor(n_estimators=2, **kw).fit_federated(
        ff.LocalFederation(_clients(None))
    )
    clients = _clients(at=3)
    fed = RecordingFederation(ff.LocalFederation(clients))
    model.set_params(n_estimators=4, warm_start=True).fit_federated(fed)
    assert model.dropped_clients_ == [("3", 3)]
    (_, setup, first), (_, _, second) = _setups(fed)
    assert first != second
    oob = next(next(iter(q.values())) for q, _ in fed.rounds if next(iter(q.values())).kind == OOB)
    tree_digest = [first, first, second, second]
    assert [row.tobytes() for row in oob.arrays[TREE_DIGEST]] == tree_digest
    for c in clients[:3]:
        bags = np.array([_in_bag(c, t, setup, tree_digest[t]) > 0 for t in range(4)])
        np.testing.assert_array_equal(np.isnan(c.oob_prediction_[:, 0]), bags.all(axis=0))
    assert model._settings_digest == ""


@pytest.mark.parametrize("kind", [ROUND_A, BOOTSTRAP])
def test_a_drop_in_a_dp_set_up_sets_the_batch_up_again_at_no_extra_cost(kind: str) -> None:
    """Under "dp" as under "secure": nothing of the set-up round is decoded (its survivors'
    sums lacked the dropped client's noise share), the set-up goes again under the
    survivors' digest, and the accountant charges what was released: each level once, at
    the plan's noise (the recovery this replaced charged every release 3/4 of it)."""
    weights = kind == BOOTSTRAP
    clients = _clients(at=3, weights=weights)
    fed = RecordingFederation(ff.LocalFederation(clients))
    est = ff.FedForestClassifier if weights else ff.FedForestRegressor
    extra = {"class_weight": "balanced_subsample", "classes": [0, 1]} if weights else {}
    model = est(
        n_estimators=3, max_depth=1, random_state=0, privacy="dp", epsilon=5.0,
        oob_score=True, on_client_failure="drop", **extra,
    ).fit_federated(fed)  # fmt: skip
    assert model.dropped_clients_ == [("3", 3)]
    kinds = model.communication_.per_round["kind"].tolist()
    assert kinds[3] == kinds[4] == kind and RECOVER not in kinds
    (r1, setup, first), (r2, again, second) = _setups(fed)
    assert (r1, r2, setup["first_tree"], again["first_tree"]) == (3, 4, 0, 0)
    assert first != second
    asked = [sorted(requests) for requests, _ in fed.rounds]
    assert asked[3] == ["0", "1", "2", "3"] and asked[4] == ["0", "1", "2"]
    # Stumps: every planned entry released once, at the planned noise: the plan's epsilon.
    report = model.privacy_report_
    assert report["epsilon_spent"] == pytest.approx(report["epsilon"], rel=1e-9)
