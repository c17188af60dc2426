"""A client's fine codes: the one-pass kernel after one sort, and its NumPy twin."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest._common import N_FINE_BINS
from fedforest.federated.client_kernels import ranks_for
from fedforest.federated.client_sketch import fine_codes, fine_codes_numpy


def _columns(rng: np.random.Generator, n: int) -> np.ndarray:
    """Columns of many, few and one distinct value, with and without missing (+inf) ones."""
    cols = [
        rng.normal(size=n),
        np.round(rng.normal(size=n), 1),  # ties
        rng.integers(0, 5, n).astype(float),  # fewer values than bins
        np.full(n, 2.5),
        rng.exponential(size=n) * 1e6,
    ]
    missing = rng.normal(size=n)
    missing[rng.random(n) < 0.3] = np.inf
    cols.append(missing)
    few = rng.integers(0, 3, n).astype(float)
    few[rng.random(n) < 0.5] = np.inf
    cols.append(few)
    cols.append(np.full(n, np.inf))  # every value missing
    return np.column_stack(cols)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_fine", [4, 16, N_FINE_BINS])
def test_fine_codes_twins(seed: int, n_fine: int) -> None:
    rng = np.random.default_rng(seed)
    n = (1, 7, 60, 300, 1000, 3000)[seed]
    X = _columns(rng, n)
    got, want = fine_codes(X, n_fine), fine_codes_numpy(X, n_fine)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    xt = np.ascontiguousarray(X.T)
    ranks_got = ranks_for(xt, got[0], n_fine)  # registered by each
    ranks_want = ranks_for(xt, want[0], n_fine)
    for a, b in zip(ranks_got, ranks_want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    if n >= 300:  # the columns with more values than bins were binned by quantiles
        assert len(np.unique(got[0][0])) == n_fine
