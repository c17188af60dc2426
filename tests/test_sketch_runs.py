"""The server's sketches as runs (server/sketch_runs.py): kernels against their twins and
against the dense rows they stand for, and the merge of runs against the dense merge."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.federated.protocol import Message, pack_sketch, unpack_sketch
from fedforest.federated.server import check_kernels as ck
from fedforest.federated.server.merge import merge_sketch_rows, merge_sketch_runs
from fedforest.federated.server.sketch_runs import (
    dense_runs,
    runs_problem,
    runs_problem_numpy,
    sketch_runs,
    split_runs,
    split_runs_numpy,
)


def _sketches(rng: np.random.Generator, n: int, b: int) -> np.ndarray:
    """Sorted rows with few or many distinct values, -0.0 beside 0.0, rows all NaN."""
    sk = np.sort(rng.integers(-2, 3, size=(n, b)) * 0.5, axis=1)
    sk[: n // 3] = np.sort(np.round(rng.normal(size=(n // 3, b)), 1), axis=1)
    flip = rng.random((n, b)) < 0.5
    sk[flip & (sk == 0.0)] = -0.0
    sk[rng.random(n) < 0.1] = np.nan
    return sk


def _dense(runs) -> np.ndarray:  # type: ignore[no-untyped-def]
    n = runs.row_off.size - 1
    return np.repeat(runs.values, runs.lengths).reshape(n, -1) if n else np.empty((0, 0))


@pytest.mark.parametrize("seed", range(4))
def test_split_runs_twins_and_rows(seed: int) -> None:
    """Runs of any lengths (crossing rows) become the rows' runs: the same in both twins,
    the dense rows back bit for bit, no run crossing a row, equal bits joined."""
    rng = np.random.default_rng(seed)
    n, b = 30, 8
    sk = _sketches(rng, n, b)
    flat = sk.ravel()
    cuts = np.flatnonzero(np.append(True, rng.random(flat.size - 1) < 0.3))
    lengths = np.diff(np.append(cuts, flat.size)).astype(np.int64)
    values = flat[cuts]  # runs crossing rows, values taken from their first point
    rv, rl = np.empty(values.size + n), np.empty(values.size + n, dtype=np.int64)
    row_off = np.zeros(n + 1, dtype=np.int64)
    m = split_runs(values, lengths, b, rv, rl, row_off)
    twin = split_runs_numpy(values, lengths, n, b)
    np.testing.assert_array_equal(rv[:m], twin.values)
    np.testing.assert_array_equal(np.signbit(rv[:m]), np.signbit(twin.values))
    np.testing.assert_array_equal(rl[:m], twin.lengths)
    np.testing.assert_array_equal(row_off, twin.row_off)
    want = np.repeat(values, lengths).reshape(n, b)
    got = np.repeat(rv[:m], rl[:m]).reshape(n, b)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)
    assert np.all(np.add.reduceat(rl[:m], row_off[:-1]) == b)  # every row is B points
    same = (rv[1:m] == rv[: m - 1]) & (np.signbit(rv[1:m]) == np.signbit(rv[: m - 1]))
    inner = np.ones(m - 1, dtype=bool)
    inner[row_off[1:-1] - 1] = False  # pairs across a row boundary may repeat
    assert not np.any(same & inner)
    assert m < values.size + n  # some runs were joined or split: not a copy


@pytest.mark.parametrize("seed", range(4))
def test_runs_problem_is_the_dense_check(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, b = 40, 6
    for case in range(5):
        sk = _sketches(rng, n, b)
        if case == 1:
            sk[3, 2] = np.inf  # not finite
        if case == 2:
            sk[5] = sk[5, ::-1]  # unsorted (unless constant)
            sk[5, 0] = 9.0
        if case == 3:
            sk[7, 1] = np.nan  # NaN inside a row
        if case == 4:
            sk[9] = np.arange(b)[::-1]
            sk[11, 0] = -np.inf
        runs = dense_runs(sk)
        g_dense, g_runs, g_twin = (np.empty(n, dtype=bool) for _ in range(3))
        want = ck.dense_sketch_problem(np.ascontiguousarray(sk), g_dense)
        assert runs_problem(runs.values, runs.row_off, g_runs) == want
        assert runs_problem_numpy(runs.values, runs.row_off, g_twin) == want
        assert want == (0, ck.NONFINITE, ck.UNSORTED, ck.NONFINITE, ck.NONFINITE)[case]
        np.testing.assert_array_equal(g_runs, g_dense)
        np.testing.assert_array_equal(g_twin, g_dense)


@pytest.mark.parametrize("b", [4, 32])
def test_sketch_runs_of_a_message_are_its_dense_sketch(b: int) -> None:
    rng = np.random.default_rng(b)
    few = np.sort(rng.integers(0, 3, size=(50, b)).astype(float), axis=1)  # run-length
    many = np.sort(rng.normal(size=(50, b)), axis=1)  # dense
    for sketch in (few, many, few[:0]):
        msg = Message("round_a", {}, pack_sketch(sketch))
        runs = sketch_runs(msg, sketch.shape[0], b, "c")
        np.testing.assert_array_equal(_dense(runs).reshape(sketch.shape), sketch)
        np.testing.assert_array_equal(unpack_sketch(msg, sketch.shape[0], b, "c"), sketch)
    arrays = pack_sketch(few)
    arrays["sketch_runs"] = arrays["sketch_runs"].copy()
    arrays["sketch_runs"][0] += 1  # no longer adds up to 50 x B
    with pytest.raises(ValueError, match="run lengths"):
        sketch_runs(Message("round_a", {}, arrays), 50, b, "c")


@pytest.mark.parametrize("read", [sketch_runs, unpack_sketch])
def test_run_lengths_whose_sum_wraps_around_are_refused(read) -> None:
    # Four runs of 2^62 add up to 2^64, 0 in int64: with a fifth of n x B rows the sum is
    # exactly n x B, but a run longer than the sketch is refused before it is expanded.
    n, b = 3, 4
    runs = np.array([2**62] * 4 + [n * b], dtype=np.uint64)
    arrays = {"sketch": np.arange(5, dtype=float), "sketch_runs": runs}
    with pytest.raises(ValueError, match="'sketch_runs' of message 'round_a' from 'c'"):
        read(Message("round_a", {}, arrays), n, b, "c")


@pytest.mark.parametrize("seed", range(3))
def test_merge_of_message_runs_is_the_dense_merge(seed: int) -> None:
    """Candidates from the runs of run-length messages (runs crossing rows as a client
    may send them) are those of the dense rows, bit for bit."""
    rng = np.random.default_rng(seed)
    k, p, b = 6, 200, 16
    sk = _sketches(rng, k * p, b)
    wt = rng.integers(0, 6, size=(k, p)) * (1.0 if seed % 2 else 0.37)
    index = np.arange(k * p, dtype=np.int64).reshape(k, p)
    index[rng.random((k, p)) < 0.1] = -1
    dense = merge_sketch_rows(sk, index, wt, b)
    flat = sk.ravel()
    start = np.ones(flat.size, dtype=bool)
    start[1:] = (flat[1:] != flat[:-1]) | (np.signbit(flat[1:]) != np.signbit(flat[:-1]))
    cuts = np.flatnonzero(start)
    arrays = {
        "sketch": flat[cuts],
        "sketch_runs": np.diff(np.append(cuts, flat.size)).astype(np.uint8),
    }
    runs = sketch_runs(Message("round_a", {}, arrays), k * p, b, "c")
    got = merge_sketch_runs(runs, index, wt, b)
    np.testing.assert_array_equal(dense[0], got[0])
    np.testing.assert_array_equal(dense[1], got[1])
    np.testing.assert_array_equal(np.signbit(dense[1]), np.signbit(got[1]))
    assert dense[1].size > p
