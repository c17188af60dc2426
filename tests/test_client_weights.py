"""The secret row weights (``federated/client_weights.py``) are the formulas they replaced.

``moment_weights`` and ``oob_weights`` were near-copies in ``client_secure.py``; they now
share ``_secret_row_weights``. Any change of a bit would change every secure forest (the
grids, the target scale, ``oob_score_``): both are checked here against the former code,
kept verbatim, over row counts, masks and secrets.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.federated import client_secure
from fedforest.federated.client_weights import moment_weights, oob_weights


def _former_moment_weights(secret: int, known: np.ndarray) -> np.ndarray:
    n = known.shape[0]
    w = np.random.default_rng([secret, 0x6D6F6D]).uniform(0.5, 1.5, size=(n, 1)) * known
    total = w.sum(axis=0)
    return np.asarray(
        w * np.where(total > 0, known.sum(axis=0) / np.where(total > 0, total, 1.0), 0.0)
    )


def _former_oob_weights(secret: int, n: int) -> np.ndarray:
    w = np.random.default_rng([secret, 0x6F6F62]).uniform(0.5, 1.5, size=n)
    return np.asarray(w * (n / w.sum())) if n else w


@pytest.mark.parametrize("n", [0, 1, 2, 7, 128, 1000, 4097])
def test_the_weights_equal_the_former_code_bit_for_bit(n: int) -> None:
    rng = np.random.default_rng(n)
    for secret in (0, 1, 2**127 + 12345, int(rng.integers(2**62))):
        for known in (
            np.ones((n, 3), dtype=bool),
            rng.random((n, 4)) < 0.7,
            np.zeros((n, 2), dtype=bool),
        ):
            new, old = moment_weights(secret, known), _former_moment_weights(secret, known)
            assert new.dtype == old.dtype and new.shape == old.shape
            assert new.tobytes() == old.tobytes()
        new, old = oob_weights(secret, n), _former_oob_weights(secret, n)
        assert new.dtype == old.dtype and new.shape == old.shape == (n,)
        assert new.tobytes() == old.tobytes()


def test_the_weights_have_mean_one_over_the_known_rows_and_differ_by_stream() -> None:
    known = np.random.default_rng(0).random((500, 3)) < 0.6
    w = moment_weights(7, known)
    np.testing.assert_allclose(w.sum(axis=0), known.sum(axis=0), rtol=1e-12)
    assert np.all(w[~known] == 0.0) and w[known].min() > 0.0
    assert not np.allclose(oob_weights(7, 500), moment_weights(7, np.ones((500, 1), bool))[:, 0])
    # client_secure still reaches them by name (tests patch them there).
    assert client_secure.moment_weights is moment_weights
    assert client_secure.oob_weights is oob_weights
