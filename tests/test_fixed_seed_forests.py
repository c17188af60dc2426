"""A fixed seed grows the same forest: every tree array equals the saved copy, bit for bit.

The copy (tests/data/fixed-forests.npz) was written by the code of commit e034068 with
tests/data/make_fixed_forests.py (its secure case again when the grids' sinh / asinh moved
to the C library, the same on every processor: see that script); the fits are in
tests/_fixed_forests.py. Speed work on the server and the clients (issue 14) must leave
every tree as it was.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests._fixed_forests import CASES, fit_case

DATA = Path(__file__).parent / "data" / "fixed-forests.npz"


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixed_seed_forest_is_unchanged(name: str) -> None:
    with np.load(DATA, allow_pickle=False) as f:
        saved = {k: f[k] for k in f.files if k.startswith(f"{name}/")}
    got = fit_case(name)
    assert sorted(got) == sorted(saved)
    assert saved[f"{name}/n_nodes"].sum() > 100  # the trees grew
    for key, want in saved.items():
        assert got[key].dtype == want.dtype, key
        np.testing.assert_array_equal(got[key], want, err_msg=key, strict=True)
