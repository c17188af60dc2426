"""More frictions a user meets, found in session 29 (branch fric29b): each test failed before.

1. Under warm_start, ``n_estimators`` below the fitted trees' count was refused before
   the settings' checks and the class_weight preset's warning that scikit-learn's forest
   gives first.
2. Under ``privacy="dp"`` whether a forest of single leaves warned was decided on the
   roots' noisy counts and impurities: 22 rows at epsilon 5 gave one-leaf trees silently.
3. ``fit_federated`` with criterion="poisson" on targets that are all 0 fitted silently at
   every privacy level (``fit`` refuses in scikit-learn's words): the server refuses, from
   the handshake (``"none"``) or the first grid round (``"secure"``); not under ``"dp"``,
   where no exact release tells it.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import Client, FedForestClassifier, FedForestRegressor, LocalFederation
from fedforest.federated import client_secure
from fedforest.federated.protocol import Message
from tests.test_frictions_29 import _wine


def _said(
    fit: Any, here: bool = False
) -> tuple[list[tuple[type[Warning], str]], tuple[type[BaseException], str]]:
    """The warnings ``fit()`` gives and what it raises; ``here``: warned at the caller."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with pytest.raises(Exception) as raised:
            fit()
    assert not here or all(w.filename == __file__ for w in got), [w.filename for w in got]
    return [(w.category, str(w.message)) for w in got], (raised.type, str(raised.value))


# ------------------------------------------- 1. warm_start with fewer trees: the order
@pytest.mark.parametrize("class_weight", ["balanced", "balanced_subsample", None])
@pytest.mark.parametrize("change", [{}, {"max_depth": -1}, {"bootstrap": False, "oob_score": True}])
def test_fewer_trees_under_warm_start_warn_and_refuse_as_scikit_learn_does(
    class_weight: Any, change: dict[str, Any]
) -> None:
    # The oracle: scikit-learn's forest refitted on the same rows with n_estimators 3 -> 2
    # (and a parameter it refuses before anything else; out-of-bag scores without the
    # bootstrap, refused after the preset's warning, before the trees' count).
    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] + rng.normal(0, 0.5, 80) > 0).astype(int)
    theirs = RandomForestClassifier(n_estimators=3, warm_start=True, class_weight=class_weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the preset's, at the first fit
        theirs.fit(X, y)
    theirs.set_params(n_estimators=2, **change)
    expected = _said(lambda: theirs.fit(X, y))
    if not change:
        assert expected[1][1].startswith("n_estimators=2 must be larger or equal")
    params = {"n_estimators": 3, "max_depth": 3, "privacy": "none", "random_state": 0}
    ours = FedForestClassifier(**params, warm_start=True, class_weight=class_weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours.fit(X, y)
    before = ours.predict_proba(X)
    ours.set_params(n_estimators=2, **change)
    (said, (kind, text)) = _said(lambda: ours.fit(X, y), here=True)
    assert said == expected[0]
    assert kind is expected[1][0]
    assert text.startswith(expected[1][1].replace("RandomForest", "FedForest")), text
    clients = [Client(X[:40], y[:40], name="a"), Client(X[40:], y[40:], name="b")]
    (said, (kind, text)) = _said(lambda: ours.fit_federated(clients), here=True)
    assert said == expected[0]
    assert kind is expected[1][0]
    assert text.startswith(expected[1][1].replace("RandomForest", "FedForest")), text
    np.testing.assert_array_equal(ours.predict_proba(X), before)  # the forest kept


# ----------------------------------------------- 2. dp's single-leaf warning: the trees
def test_a_dp_forest_of_single_leaves_warns_whatever_its_noisy_roots_say(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The dp noise and bootstrap come from secrets.randbits: fixed here (as
    # tests/test_frictions_29.py), so the fit is reproducible. 22 rows hold about 14
    # distinct in a root, fewer than 2 * 10: no root can split. Its noisy counts read 0 to
    # 106 rows and some noisy impurities 0 ("pure"): no warning came before.
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    X, y = _wine(22)
    est = FedForestClassifier(n_estimators=5, random_state=0, privacy="dp", epsilon=5.0)
    with pytest.warns(UserWarning, match="single leaf") as got:
        est.fit(X, y)
    assert all(t.feature.size == 1 for t in est.trees_)
    (text,) = [str(w.message) for w in got if "single leaf" in str(w.message)]
    largest = max(int(t.n_node_samples[0]) for t in est.trees_)
    assert largest >= 2 * 10  # a noisy count above the rule's 2 m
    # one client of 22 rows: 22 (1 - (1 - 1/22)^22) = 14.2 distinct rows expected
    assert (
        f"the largest root held about {largest} rows (a noisy count, privacy='dp'), and a "
        "tree's bootstrap draws about 14 distinct rows of the 22, fewer than 2 * 10." in text
    )
    assert "min_aggregate_rows = 10" in text


def test_a_dp_forest_that_splits_does_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    X, y = _wine(178)
    est = FedForestClassifier(n_estimators=5, random_state=0, privacy="dp", epsilon=50.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails
        est.fit(X, y)
    assert any(t.feature.size > 1 for t in est.trees_)


# ------------------------------------------- 3. Poisson targets that sum to 0: refused
class _Kinds(LocalFederation):
    """The local transport, noting each round's kind of request."""

    def __init__(self, clients: list[Client]) -> None:
        super().__init__(clients)
        self.kinds: list[str] = []

    def send_and_receive(self, requests: dict[str, Message], round_index: int) -> Any:
        self.kinds.append(next(iter(requests.values())).kind)
        return super().send_and_receive(requests, round_index)


ZERO_SUM = r"^Sum of y is not strictly positive which is necessary for Poisson regression\."


def _poisson(privacy: str) -> FedForestRegressor:
    kw = {"epsilon": 5.0} if privacy == "dp" else {}
    return FedForestRegressor(
        n_estimators=3, max_depth=3, criterion="poisson", privacy=privacy, random_state=0, **kw
    )


def _rates(n: int, outputs: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4))
    y = rng.poisson(np.exp(0.5 * X[:, :outputs])).astype(np.float64)
    return X, y[:, 0] if outputs == 1 else y


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_poisson_targets_summing_to_zero_are_refused_before_any_tree_grows(
    privacy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)  # dp: seeded
    X, _ = _rates(300)
    y = np.zeros(300)
    with pytest.raises(ValueError, match=ZERO_SUM):  # fit's refusal, scikit-learn's words
        _poisson(privacy).fit(X, y, client_ids=np.repeat(["a", "b"], 150))
    fed = _Kinds([Client(X[:150], y[:150], name="a"), Client(X[150:], y[150:], name="b")])
    est = _poisson(privacy)
    with pytest.raises(ValueError, match=ZERO_SUM + "$") as got:
        est.fit_federated(fed)
    assert "Client" not in str(got.value)  # a pooled fact: no client named
    assert "round_a" not in fed.kinds and "trees_" not in vars(est)
    # "none": refused at the handshake; "secure": after the first grid round's sums
    assert fed.kinds[-1] == ("handshake" if privacy == "none" else "grid")


def test_under_dp_few_positive_targets_are_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under "dp" no exact release tells the pooled sum's sign; read off the grid round's
    noisy histogram of asinh(y), three ones among 297 zeros at epsilon 5 were refused in 5
    of 5 fits (their sum is 3): nothing is refused there, as under "secure" they fit."""
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    X, _ = _rates(300)
    y = np.zeros(300)
    y[[5, 150, 290]] = 1.0
    clients = [Client(X[:150], y[:150], name="a"), Client(X[150:], y[150:], name="b")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dp's warnings on so few rows
        est = _poisson("dp").fit_federated(clients)
    assert len(est.trees_) == 3


@pytest.mark.parametrize("privacy", ["none", "secure", "dp"])
def test_a_pooled_positive_sum_fits_whatever_one_client_or_output_holds(
    privacy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The oracle: scikit-learn's forest sums y over every row and output (np.sum(y) > 0).
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    X, y = _rates(600)
    clients = [Client(X[:300], 0 * y[:300], name="a"), Client(X[300:], y[300:], name="b")]
    assert _poisson(privacy).fit_federated(clients).predict(X).min() > 0
    Y = np.c_[y, np.zeros(600)]  # one output of zeros, the other not: fits, as scikit-learn
    clients = [Client(X[:300], Y[:300], name="a"), Client(X[300:], Y[300:], name="b")]
    with warnings.catch_warnings():  # under "dp" the zeros' output warns it is unresolved
        warnings.filterwarnings("ignore", "Under privacy=.dp. the regression targets vary")
        _poisson(privacy).fit_federated(clients)
    if privacy == "dp":  # not refused under "dp" (the test above)
        return
    with pytest.raises(ValueError, match=ZERO_SUM):  # both outputs of zeros: refused
        clients = [Client(X[:300], 0 * Y[:300], name="a"), Client(X[300:], 0 * Y[300:], name="b")]
        _poisson(privacy).fit_federated(clients)


def test_exact_levels_refuse_only_a_zero_sum() -> None:
    # One positive target in 300 rows fits under "none" and "secure" (scikit-learn fits it).
    X, _ = _rates(300)
    y = np.zeros(300)
    y[17] = 1e-3
    for privacy in ("none", "secure"):
        clients = [Client(X[:150], y[:150], name="a"), Client(X[150:], y[150:], name="b")]
        _poisson(privacy).fit_federated(clients)
