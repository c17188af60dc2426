"""Every test starts from the same global random state.

An estimator left at ``random_state=None`` draws its seed from NumPy's global generator, as
scikit-learn's do (``check_random_state(None)``). Without a reset, a test's forests depend on
which tests ran before it in its xdist worker, so a property that holds for most seeds fails
once in a while in CI and never on a rerun. Seeding per test, as pytest-randomly does, makes
every test's draws the same on every run and in every order; a test that means to cover many
seeds loops over them itself.

Under ``privacy="dp"`` a client draws its bootstrap secret and its noise from the operating
system (``secrets`` in ``fedforest/federated/client_secure.py``), whatever ``random_state``
is. A test whose assertion depends on that noise (a score, a split, a spread) asks for
``seeded_secrets``; a test that checks the noise is fresh keeps the operating system's.
"""

import random

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _same_global_random_state_in_every_test() -> None:
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 -- the legacy global generator is the one seeded


class SeededSecrets:
    """``secrets`` with ``randbits`` from a seeded generator (the one call the clients make)."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def randbits(self, k: int) -> int:
        return self._random.getrandbits(k)


@pytest.fixture
def seeded_secrets(monkeypatch: pytest.MonkeyPatch) -> SeededSecrets:
    """The in-process clients' secrets and "dp" noise, the same on every run of the test.

    Clients in other processes (Dask workers, Flower nodes) keep the operating system's.
    """
    from fedforest.federated import client_secure

    seeded = SeededSecrets(0)
    monkeypatch.setattr(client_secure, "secrets", seeded)
    return seeded
