"""Server level kernels (server/level.py) against their NumPy twins and a plain oracle."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.federated.server.level import answer_candidates, answer_candidates_numpy


@pytest.mark.parametrize("seed", range(5))
def test_answer_candidates_twins_and_oracle(seed: int) -> None:
    """A client's answer positions map to the candidates of the nodes it has rows in."""
    rng = np.random.default_rng(seed)
    n_nodes = 60
    per_node = rng.integers(0, 9, size=n_nodes)  # candidates of each node (some none)
    node_cand = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(per_node, out=node_cand[1:])
    has = rng.random(n_nodes) < 0.6  # nodes the client has rows in
    local = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.where(has, per_node, 0), out=local[1:])
    # The oracle: the candidates the client answers for, in order; positions index them.
    answered = np.concatenate(
        [np.arange(node_cand[n], node_cand[n + 1]) for n in range(n_nodes) if has[n]]
    ).astype(np.int64)
    assert answered.size == local[-1] > 0
    pos = np.flatnonzero(rng.random(answered.size) < 0.4).astype(np.int64)  # sparse
    for p in (pos, np.arange(answered.size, dtype=np.int64), pos[:0]):
        got, twin = np.empty(p.size, dtype=np.int64), np.empty(p.size, dtype=np.int64)
        answer_candidates(p, local, node_cand, got)
        answer_candidates_numpy(p, local, node_cand, twin)
        np.testing.assert_array_equal(got, answered[p])
        np.testing.assert_array_equal(twin, answered[p])
