"""Frictions the session-27 reviews noticed (branch fric27): each test failed before.

A secure fit whose every tree is one leaf because of the minimum-rows rule warned nothing
(the swarm runner with ``--engine fedforest``, 6 peers of 22 rows: every AUPRC 0.33).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_wine

from fedforest import Client, FedForestClassifier, FedForestRegressor
from fedforest.swarm import Peer

LEAVES = r"every tree of this forest is a single leaf.*min_aggregate_rows = 10"


def _wine(n: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_wine(return_X_y=True)
    rows = np.random.default_rng(0).permutation(len(y))[:n]
    return X[rows], y[rows]


def _one_leaf(model: FedForestClassifier | FedForestRegressor) -> bool:
    return all(t.feature.size == 1 for t in model.trees_)


def test_secure_fit_of_one_leaf_trees_warns_and_keeps_its_forest() -> None:
    X, y = _wine(22)  # roots of about 14 distinct rows: no child keeps 10 of them
    est = FedForestClassifier(n_estimators=5, random_state=0)
    with pytest.warns(UserWarning, match=LEAVES + r".*privacy=\"none\""):
        est.fit(X, y)
    assert _one_leaf(est)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = FedForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.predict_proba(X), again.predict_proba(X))


def test_fit_federated_warns_too() -> None:
    X, y = _wine(22)
    clients = [Client(X[:11], y[:11], name="a"), Client(X[11:], y[11:], name="b")]
    with pytest.warns(UserWarning, match=LEAVES):
        FedForestClassifier(n_estimators=3, random_state=0, classes=[0, 1, 2]).fit_federated(
            clients
        )


def test_no_warning_where_splits_happen_or_the_rule_is_off() -> None:
    # pytest turns any warning into an error here (pyproject's filterwarnings)
    X, y = _wine(22)
    assert not _one_leaf(
        FedForestClassifier(n_estimators=5, random_state=0, privacy="none").fit(X, y)
    )
    X, y = _wine(80)
    assert not _one_leaf(FedForestClassifier(n_estimators=5, random_state=0).fit(X, y))


def test_no_warning_when_min_samples_leaf_alone_forbids_the_split() -> None:
    # 22 rows, min_samples_leaf 12: scikit-learn grows one leaf too; the rule is not why.
    X, y = _wine(22)
    est = FedForestClassifier(
        n_estimators=3, random_state=0, min_samples_leaf=12, min_aggregate_rows=10
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.fit(X, y)
    assert _one_leaf(est)


def test_no_warning_for_a_constant_target() -> None:
    # Pure roots give one leaf under any rule; secure sums leave 7e-14 of impurity here.
    X = np.random.default_rng(0).normal(size=(26, 3))
    est = FedForestRegressor(n_estimators=3, random_state=0).fit(X, np.full(26, 17.3))
    assert _one_leaf(est) and est.trees_[0].impurity[0] > 0


def test_fedforest_peer_warns_in_its_own_terms() -> None:
    X, y = _wine(22)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    peer = Peer("A", n_estimators=5, random_state=0, engine="fedforest")
    with pytest.warns(UserWarning, match=LEAVES + r".*\(peer 'A'\).*engine='sklearn'") as got:
        peer.fit(frame, y)
    assert all('privacy="none"' not in str(w.message) for w in got)
    assert all(t.feature.size == 1 for t in peer.trees_)


# ------------------------------------------------------------- Dask actor's finish
class _FailingFinish(Client):
    """A client whose end of fit fails with a library's text (a row's value in it)."""

    def finish(self) -> None:
        raise KeyError("patient 17")


def _failing_finish(X: np.ndarray, y: np.ndarray, name: str) -> Client:
    return _FailingFinish(X, y, name=name)


def test_dask_actor_finish_sends_only_the_type_and_step() -> None:
    pytest.importorskip("distributed")
    from fedforest.transport.dask._actor import ShardActor
    from fedforest.transport.dask._wire import ERROR, from_bytes

    X, y = _wine(30)
    actor = ShardActor("a", _failing_finish, (X, y, "a"))
    frame = actor.finish()  # raised KeyError('patient 17') before, its text whole
    assert frame is not None
    reply = from_bytes(frame, "a")
    assert reply.kind == ERROR and reply.header["type"] == "KeyError"
    assert "finish failed with KeyError" in reply.header["error"]
    assert "patient" not in reply.header["error"]
    assert ShardActor("b", lambda: Client(X, y, name="b"), ()).finish() is None


# ------------------------------------------------------------------------- swarm
def _site() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(4)
    X = pd.DataFrame(rng.normal(size=(60, 3)), columns=["age", "bmi", "dose"])
    return X, (X["age"] + X["dose"] > 0).to_numpy().astype(int)


def test_clone_of_an_imported_peer_says_why_it_cannot() -> None:
    from sklearn.base import clone
    from sklearn.ensemble import RandomForestClassifier

    X, y = _site()
    peer = Peer.from_fitted("B", RandomForestClassifier(3, random_state=0).fit(X, y), X, y)
    # was "engine must be one of ('sklearn', 'fedforest'), got 'imported'"
    with pytest.raises(ValueError, match=r"Peer.from_fitted peer's.*cannot be cloned"):
        clone(peer)
    assert peer.n_features_in_ == 3 and list(peer.feature_names_in_) == ["age", "bmi", "dose"]


def test_peer_has_scikit_learns_fitted_feature_attributes() -> None:
    X, y = _site()
    peer = Peer("A", n_estimators=3, random_state=0)
    assert not hasattr(peer, "n_features_in_")
    peer.fit(X[["dose", "age"]], y)
    assert peer.n_features_in_ == 2
    assert peer.feature_names_in_.dtype == object
    assert peer.feature_names_in_.tolist() == ["dose", "age"]


def test_swarm_forest_refuses_n_jobs_zero_in_scikit_learns_words() -> None:
    from fedforest.swarm import SwarmForest

    X, y = _site()
    bundle = Peer("A", n_estimators=3, random_state=0).fit(X, y).share()
    words = r"The 'n_jobs' parameter of SwarmForest must be .* Got 0 instead"
    with pytest.raises(ValueError, match=words):  # was joblib's, at predict time
        SwarmForest([bundle], n_jobs=0)
    swarm = SwarmForest([bundle], n_jobs=-1)
    swarm.n_jobs = 0
    with pytest.raises(ValueError, match=words):
        swarm.predict_proba(X, "fpv")
