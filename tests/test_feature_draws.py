"""The server's per-node feature draws: one call per tree, the draws of ``rng.choice``."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.federated.server.draws import floyd_draws, floyd_draws_numpy, sample_features


def _node_by_node(rngs, slot_tree, d, k, constant):
    """The rule written out: ``choice`` per node; all constant -> go on in a random order."""
    out = []
    for i, t in enumerate(slot_tree):
        drawn = np.arange(d) if k >= d else rngs[t].choice(d, size=k, replace=False)
        if constant is not None:
            keep = drawn[~constant[i][drawn]]
            if not keep.size and k < d and not constant[i].all():
                rest = np.setdiff1d(np.arange(d), drawn)
                order = rest[rngs[t].permutation(rest.size)]
                keep = order[~constant[i][order]][:1]
            drawn = keep
        out.append(drawn)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_draws_equal_choice_node_by_node(seed: int) -> None:
    g = np.random.default_rng(seed)
    d = int(g.integers(2, 40))
    k = int(g.integers(0, d + 2))  # 0: nodes at max_depth under AvgImp
    n = int(g.integers(1, 40))
    slot_tree = np.sort(g.integers(0, 5, n))
    constant = g.random((n, d)) < g.random() if seed % 2 else None
    ours = [np.random.default_rng([seed, t]) for t in range(5)]
    ref = [np.random.default_rng([seed, t]) for t in range(5)]
    off, feats = sample_features(ours, slot_tree, d, k, constant)
    want = _node_by_node(ref, slot_tree, d, k, constant)
    assert off.dtype == np.int64 and feats.dtype == np.int32
    np.testing.assert_array_equal(np.diff(off), [w.size for w in want])
    np.testing.assert_array_equal(feats, np.concatenate(want))
    for a, b in zip(ours, ref, strict=True):  # the generators end where choice leaves them
        assert a.bit_generator.state == b.bit_generator.state
        assert a.random() == b.random()


@pytest.mark.parametrize("seed", range(8))
def test_floyd_draws_twins_with_rejections(seed: int) -> None:
    g = np.random.default_rng(seed)
    words = g.integers(0, 2**64, size=60, dtype=np.uint64)
    words[seed : seed + 3] = 0  # zero halves are rejected (Lemire's threshold)
    d, k = int(g.integers(7, 30)), int(g.integers(1, 7))
    a, b = np.zeros((4, k), np.int64), np.zeros((4, k), np.int64)
    got = floyd_draws(words, seed % 2, 987654321, d, k, a)
    assert tuple(int(x) for x in got) == floyd_draws_numpy(words, seed % 2, 987654321, d, k, b)
    np.testing.assert_array_equal(a, b)
    assert np.all((a >= 0) & (a < d)) and all(len(set(r)) == k for r in a.tolist())
    # No words: both say so.
    assert floyd_draws(words[:0], 0, 0, d, k, a)[0] == -1
    assert floyd_draws_numpy(words[:0], 0, 0, d, k, b)[0] == -1
