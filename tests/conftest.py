"""Every test starts from the same global random state.

An estimator left at ``random_state=None`` draws its seed from NumPy's global generator, as
scikit-learn's do (``check_random_state(None)``). Without a reset, a test's forests depend on
which tests ran before it in its xdist worker, so a property that holds for most seeds fails
once in a while in CI and never on a rerun. Seeding per test, as pytest-randomly does, makes
every test's draws the same on every run and in every order; a test that means to cover many
seeds loops over them itself.
"""

import random

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _same_global_random_state_in_every_test() -> None:
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 -- the legacy global generator is the one seeded
