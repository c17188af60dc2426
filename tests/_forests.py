"""Forests compared bit for bit (the transports' and client orders' invariant)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedforest.tree.arrays import Tree


def assert_same_forest(a: Any, b: Any) -> None:
    """Every array of every tree is identical (bit for bit: dtype, values, NaN where NaN)."""
    assert len(a.trees_) == len(b.trees_)
    for t, (ta, tb) in enumerate(zip(a.trees_, b.trees_, strict=True)):
        for name in (*Tree.ARRAYS, *Tree.SET_ARRAYS):
            x, y = getattr(ta, name), getattr(tb, name)
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), (t, name)
