"""The secure server's per-pair segments (server/secure_grids.py): gathers against slices."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.federated.server.secure_grids import (
    PairSegments,
    _merge_segments,
    gather_rows,
    gather_rows_numpy,
    offsets,
)


def _segments(rng: np.random.Generator, n: int, width: int) -> PairSegments:
    sizes = rng.integers(0, 4, size=n)
    shape = (int(sizes.sum()),) + ((width,) if width else ())
    return PairSegments(np.arange(n, dtype=np.int64) * 3, offsets(sizes), rng.normal(size=shape))


@pytest.mark.parametrize("width", [0, 1, 3, 4])
def test_take_is_the_segments_one_after_the_other(width: int) -> None:
    rng = np.random.default_rng(width)
    segs = _segments(rng, 40, width)
    seg = rng.integers(-1, 40, size=60)
    off, values = segs.take(seg)
    parts = [segs.values[segs.off[s] : segs.off[s + 1]] if s >= 0 else segs.values[:0] for s in seg]
    np.testing.assert_array_equal(off, offsets([p.shape[0] for p in parts]))
    np.testing.assert_array_equal(values, np.concatenate(parts))
    assert values.shape[1:] == segs.values.shape[1:]
    none_off, none = segs.take(np.full(5, -1))
    assert none.shape == (0,) + segs.values.shape[1:] and not none_off.any()


def test_merge_segments_takes_each_pair_from_its_source() -> None:
    rng = np.random.default_rng(7)
    old, new = _segments(rng, 30, 3), _segments(rng, 30, 3)
    take_new = rng.random(30) < 0.4
    off, values = _merge_segments(old.off, old.values, new.off, new.values, take_new)
    parts = [
        (new if t else old).values[(new if t else old).off[i] : (new if t else old).off[i + 1]]
        for i, t in enumerate(take_new)
    ]
    np.testing.assert_array_equal(off, offsets([p.shape[0] for p in parts]))
    np.testing.assert_array_equal(values, np.concatenate(parts))


def test_gather_rows_matches_its_twin() -> None:
    rng = np.random.default_rng(3)
    src = rng.normal(size=(50, 3))
    start = rng.integers(0, 50, size=20)
    end = np.minimum(start + rng.integers(-2, 5, size=20), 50)  # some empty (end <= start)
    out_off = offsets(np.maximum(end - start, 0))
    got, want = np.full((int(out_off[-1]), 3), np.nan), np.full((int(out_off[-1]), 3), np.nan)
    gather_rows(src, start, end, out_off, got)
    gather_rows_numpy(src, start, end, out_off, want)
    np.testing.assert_array_equal(got, want)
    assert not np.isnan(got).any()
