"""The settings digest a secure set-up carries, and the bootstraps bound to it.

Under ``privacy="secure"`` a client's bootstrap secret is bound to the SHA-256 digest of
the fit's resolved settings (``server/digest.py``, ``client_secure.bind_secret``): fits
with other settings draw independent bootstraps (``test_privacy_fits.py`` attacks the
refit), the same settings the same forest. The digest is a request array the client
checks like any other (kind, dtype, length) and a secure set-up without it is refused.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.client_secure import SecureParty, bind_secret
from fedforest.federated.federation import ClientFailure, Federation
from fedforest.federated.protocol import DIGEST_BYTES, SETTINGS_DIGEST, Message
from fedforest.federated.server.config import GrowerConfig
from fedforest.federated.server.digest import settings_digest


def _cfg(**kw: Any) -> GrowerConfig:
    base = GrowerConfig(
        task="regression",
        criterion="squared_error",
        n_estimators=10,
        max_depth=4,
        min_samples_split=2,
        min_samples_leaf=10,
        min_impurity_decrease=0.0,
        max_features=1.0,
        n_bins=32,
        bootstrap=True,
        oob_score=False,
        seed=7,
        privacy="secure",
        min_aggregate_rows=10,
    )
    return replace(base, **kw)


def _digest(cfg: GrowerConfig, draws: dict[str, int] | None = None) -> bytes:
    n = {"a": 100, "b": 60}
    out = settings_digest(cfg, n, {} if draws is None else draws, 6)
    assert out.dtype == np.uint8 and out.shape == (DIGEST_BYTES,)
    return out.tobytes()


def test_the_digest_follows_the_settings_that_shape_the_releases() -> None:
    base = _digest(_cfg())
    # Left out: pruning, trees, seed, how the work runs, the OOB score, failures.
    for kw in (
        {"ccp_alpha": 0.01},
        {"n_estimators": 3},
        {"first_tree": 4},
        {"seed": 8},
        {"n_jobs": 2},
        {"verbose": 1},
        {"tree_batch_size": 2},
        {"oob_score": True},
        {"on_client_failure": "drop"},
        {"max_features": 6},  # the same k as 1.0 of 6 features
    ):
        assert _digest(_cfg(**kw)) == base, kw
    # Everything else is bound.
    for kw in (
        {"n_bins": 24},
        {"min_samples_leaf": 11},
        {"min_aggregate_rows": 12},
        {"max_depth": 5},
        {"max_features": 0.5},
        {"criterion": "poisson"},
        {"privacy": "dp"},
        {"bootstrap": False},
        {"min_impurity_decrease": 1e-9},
        {"monotonic_cst": [1, 0, 0, 0, 0, 0]},
    ):
        assert _digest(_cfg(**kw)) != base, kw
    # Pruning with the out-of-bag score: the pruned trees are what the round scores, so
    # each ccp_alpha draws its own bootstraps (test_privacy_fits.py attacks it); unpruned,
    # or without the score, the digest stays.
    oob = _digest(_cfg(oob_score=True))
    assert oob == base == _digest(_cfg(oob_score=True, ccp_alpha=0.0))
    pruned = {_digest(_cfg(oob_score=True, ccp_alpha=a)) for a in (0.01, 0.02)}
    assert len(pruned) == 2 and base not in pruned
    # max_samples as the bootstrap sizes it resolves to: the clients' own sizes are the
    # default; other sizes are other releases.
    assert _digest(_cfg(max_samples=1.0), {"a": 100, "b": 60}) == base
    assert _digest(_cfg(max_samples=0.5), {"a": 50, "b": 30}) != base
    # dp_colluders (added later) at its default 0 is left out: the digest, so every
    # forest, of before; any other value is bound (other noise shares).
    dp = _digest(_cfg(privacy="dp", epsilon=5.0))
    assert _digest(_cfg(privacy="dp", epsilon=5.0, dp_colluders=0)) == dp
    assert (
        len({dp, *(_digest(_cfg(privacy="dp", epsilon=5.0, dp_colluders=t)) for t in (1, 2))}) == 3
    )


def test_binding_is_hkdf_of_the_secret_and_the_digest() -> None:
    d1, d2 = bytes(range(32)), bytes(range(1, 33))
    secret = 12345678901234567890
    assert bind_secret(secret, d1) == bind_secret(secret, d1)
    assert len({bind_secret(secret, d1), bind_secret(secret, d2), secret}) == 3
    assert bind_secret(secret, d1) != bind_secret(secret + 1, d1)
    assert 0 <= bind_secret(secret, d1) < 2**128


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(600, 4))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=600)
    return X, y, np.repeat(np.arange(3), 200)


def _trees(model: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(t.feature.copy(), t.threshold.copy()) for t in model.trees_]


def test_same_settings_same_forest_other_settings_other_bootstraps() -> None:
    X, y, h = _data()
    kw = dict(max_depth=3, random_state=0)
    a = ff.FedForestRegressor(n_estimators=3, **kw).fit(X, y, client_ids=h)
    b = ff.FedForestRegressor(n_estimators=3, **kw).fit(X, y, client_ids=h)
    # More trees, another batching, pruning, threads: the first trees' bootstraps stay.
    c = ff.FedForestRegressor(n_estimators=5, tree_batch_size=2, n_jobs=2, **kw)
    c.fit(X, y, client_ids=h)
    for (fa, ta), (fb, tb), (fc, tc) in zip(_trees(a), _trees(b), _trees(c), strict=False):
        assert np.array_equal(fa, fb) and np.array_equal(ta, tb)
        assert np.array_equal(fa, fc) and np.array_equal(ta, tc)
    # Another n_bins: the roots hold other rows (bootstrap row counts differ somewhere).
    d = ff.FedForestRegressor(n_estimators=3, n_bins=24, **kw).fit(X, y, client_ids=h)
    roots = [t.n_node_samples[0] for t in a.trees_], [t.n_node_samples[0] for t in d.trees_]
    assert roots[0] != roots[1]


class _Tamper(Federation):
    """Delivers every request, the settings digest changed by ``how`` (None: removed)."""

    def __init__(self, inner: Federation, how: Any) -> None:
        self.inner, self.how = inner, how

    @property
    def client_names(self) -> list[str]:
        return self.inner.client_names

    def send_and_receive(self, requests: dict[str, Message], round_index: int) -> Any:
        out = {}
        for name, msg in requests.items():
            arrays = dict(msg.arrays)
            if SETTINGS_DIGEST in arrays:
                arrays.pop(SETTINGS_DIGEST)
                if self.how is not None:
                    arrays[SETTINGS_DIGEST] = self.how
            out[name] = Message(msg.kind, msg.header, arrays)
        return self.inner.send_and_receive(out, round_index)


@pytest.mark.parametrize("privacy", ["secure", "dp"])
@pytest.mark.parametrize(
    "how",
    [
        None,
        np.zeros(DIGEST_BYTES, dtype=np.uint64),
        np.zeros(DIGEST_BYTES - 1, dtype=np.uint8),
        np.zeros(DIGEST_BYTES, dtype=np.float64),
        np.zeros((2, DIGEST_BYTES), dtype=np.uint8),
    ],
    ids=["missing", "uint64", "short", "float", "2d"],
)
def test_a_client_refuses_a_secure_set_up_without_a_valid_digest(privacy: str, how: Any) -> None:
    X, y, h = _data()
    clients = [ff.Client(X[h == k], y[h == k], f"c{k}") for k in range(3)]
    fed = _Tamper(ff.LocalFederation(clients), how)
    kw: dict[str, Any] = {"epsilon": 50.0} if privacy == "dp" else {}
    model = ff.FedForestRegressor(n_estimators=2, max_depth=2, privacy=privacy, **kw)
    with pytest.raises((ValueError, ClientFailure), match="digest"):
        model.fit_federated(fed)
    # The same clients, the digest delivered: the fit works (the check can pass).
    model.fit_federated(ff.LocalFederation(clients))


def test_the_bound_secret_survives_the_client_state() -> None:
    """Flower keeps a client's party between messages (``to_state`` / ``from_state``)."""
    X, y, h = _data()
    clients = [ff.Client(X[h == k], y[h == k], f"c{k}") for k in range(3)]
    ff.FedForestRegressor(n_estimators=2, max_depth=2).fit_federated(ff.LocalFederation(clients))
    party = clients[0]._secure
    assert party is not None and party.bound is not None and party.bound != party.secret
    back = SecureParty.from_state(clients[0], party.to_state())
    assert back.bootstrap_secret() == party.bootstrap_secret()
    assert back.secret == party.secret


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
def test_a_warm_start_with_the_score_on_corrected_data_is_refused() -> None:
    """One value corrected at one client between a fit and its warm start: that client's
    earlier draws can no longer be recomputed (its secret changed). Before the clients'
    data tags the digest did not change, and the out-of-bag score read that client's rows
    as drawn by the new secret, silently; now the digest differs and the score refuses."""
    X, y, h = _data()
    kw = dict(max_depth=3, random_state=0, oob_score=True, warm_start=True)
    warm = ff.FedForestRegressor(n_estimators=3, **kw).fit(X, y, client_ids=h)
    warm.set_params(n_estimators=4).fit(X, y, client_ids=h)  # the same data: it grows
    assert len(warm.trees_) == 4
    X = X.copy()
    X[450, 2] += 0.01  # the third client's
    with pytest.raises(ValueError, match="warm_start with oob_score.*or their data"):
        warm.set_params(n_estimators=5).fit(X, y, client_ids=h)
    assert len(warm.trees_) == 4


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
def test_warm_start_keeps_the_out_of_bag_rows_or_refuses() -> None:
    """Out of bag after a warm start: the earlier trees' bootstraps must be recomputable.

    Before, a warm start that changed a digested setting (or ran under "dp", whose secret
    is random per fit) scored the earlier trees on rows drawn with the new digest or
    secret: wrong out-of-bag rows, silently.
    """
    X, y, h = _data()
    kw = dict(max_depth=3, random_state=0, oob_score=True)
    one = ff.FedForestRegressor(n_estimators=6, **kw).fit(X, y, client_ids=h)
    warm = ff.FedForestRegressor(n_estimators=3, warm_start=True, **kw).fit(X, y, client_ids=h)
    warm.set_params(n_estimators=6).fit(X, y, client_ids=h)  # same settings: one fit's
    assert warm.oob_score_ == pytest.approx(one.oob_score_, abs=1e-9)
    before = _trees(warm)
    with pytest.raises(ValueError, match="warm_start with oob_score.*first 6 trees"):
        warm.set_params(n_estimators=8, n_bins=24).fit(X, y, client_ids=h)
    assert len(warm.trees_) == 6 and all(  # the forest it had is kept
        np.array_equal(f, g) and np.array_equal(t, u)
        for (f, t), (g, u) in zip(before, _trees(warm), strict=True)
    )
    # Without the score the new settings grow; the forest then mixes two digests.
    warm.set_params(oob_score=False).fit(X, y, client_ids=h)
    assert len(warm.trees_) == 8
    with pytest.raises(ValueError, match="warm_start with oob_score"):
        warm.set_params(n_estimators=9, oob_score=True).fit(X, y, client_ids=h)
    # Pruned with the score, ccp_alpha is bound: the same one keeps the trees' rows,
    # trees pruned without the score were grown under the unpruned digest.
    pruned = ff.FedForestRegressor(n_estimators=2, warm_start=True, ccp_alpha=1e-3, **kw)
    pruned.fit(X, y, client_ids=h).set_params(n_estimators=3).fit(X, y, client_ids=h)
    assert len(pruned.trees_) == 3
    with pytest.raises(ValueError, match="warm_start with oob_score.*ccp_alpha unless"):
        pruned.set_params(n_estimators=4, ccp_alpha=2e-3).fit(X, y, client_ids=h)
    unscored = ff.FedForestRegressor(n_estimators=2, warm_start=True, ccp_alpha=1e-3, **kw)
    unscored.set_params(oob_score=False).fit(X, y, client_ids=h)
    with pytest.raises(ValueError, match="warm_start with oob_score"):
        unscored.set_params(n_estimators=3, oob_score=True).fit(X, y, client_ids=h)
    dp = ff.FedForestRegressor(n_estimators=2, warm_start=True, privacy="dp", epsilon=5.0, **kw)
    dp.fit(X, y, client_ids=h)
    with pytest.raises(ValueError, match="privacy='dp'.*fresh random secret"):
        dp.set_params(n_estimators=3).fit(X, y, client_ids=h)
