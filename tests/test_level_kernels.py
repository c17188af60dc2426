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


def _sparse_level(seed: int, n_clients: int = 3, n_nodes: int = 40, n_bins: int = 31):
    """A level of few rows a node (deep-level like): each client's left increments per bin.

    Rows get a bin per pair (the candidates below their value, ``n_bins``: above the last,
    never sent); a client sends a bin's (rows, weight | sum y, sum y^2) where it has rows.
    """
    rng = np.random.default_rng(seed)
    k = 3  # pairs a node
    pair_off = np.arange(0, (n_nodes + 1) * k, k, dtype=np.int64)
    pair_feat = np.tile(np.arange(k, dtype=np.int32), n_nodes)
    cand_off = np.arange(0, (n_nodes * k + 1) * n_bins, n_bins, dtype=np.int64)
    cand = np.tile(np.linspace(0.0, 1.0, n_bins), n_nodes * k)
    pooled = np.zeros((n_nodes, 4))
    parts = []
    for _ in range(n_clients):
        left = np.zeros((cand.size, 4))
        node = rng.integers(0, n_nodes, size=4 * n_nodes)
        y = np.round(rng.normal(size=node.size), 1)  # repeated values: tied gains
        for n, v in zip(node, y, strict=True):
            st = np.array([1.0, 1.0, v, v * v])
            pooled[n] += st
            for p in range(pair_off[n], pair_off[n + 1]):
                b = int(rng.integers(0, n_bins + 1))
                if b < n_bins:
                    left[cand_off[p] + b] += st
        pos = np.flatnonzero(left[:, 0] > 0).astype(np.int64)
        parts.append((pos, left[pos, :2].astype(np.int32), left[pos, 2:].copy()))
    return pooled, pair_off, pair_feat, cand_off, cand, parts


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("min_rows", [1, 3])
def test_dropping_unanswered_candidates_picks_the_same_splits(seed: int, min_rows: int) -> None:
    """answered_only: the splits of every candidate (the plain sums and scan) are kept,
    bit for bit, when the candidates no client answered for are dropped."""
    from fedforest.federated.server.level import answered_only, sum_increments
    from fedforest.federated.server.splitter import best_splits

    pooled, pair_off, pair_feat, cand_off, cand, parts = _sparse_level(seed)
    picks = []
    for drop in (False, True):
        off, values, mine = cand_off, cand, list(parts)
        if drop:
            off, values = answered_only(mine, cand_off, cand)
            assert values.size < cand.size / 2  # most bins of a few rows are empty
        left = np.zeros((values.size, 4))
        sum_increments(left, mine, off)
        picks.append(
            best_splits(
                pooled,
                pair_off,
                pair_feat,
                off,
                values,
                left,
                criterion="squared_error",
                min_samples_leaf=min_rows,
                min_impurity_decrease=0.0,
                root_weight=np.full(pooled.shape[0], pooled[:, 1].sum()),
            )  # fmt: skip
        )
    every, answered = picks
    assert (every.feature >= 0).sum() > pooled.shape[0] // 2  # most nodes split
    for field in ("feature", "threshold", "gain", "left", "right"):
        np.testing.assert_array_equal(getattr(answered, field), getattr(every, field))


def test_dropping_unanswered_candidates_keeps_a_dense_level() -> None:
    """When most candidates were answered the lists stay as they are (no pass to pay)."""
    from fedforest.federated.server.level import answered_only

    _, _, _, cand_off, cand, parts = _sparse_level(0, n_nodes=4, n_bins=3)
    mine = list(parts)
    off, values = answered_only(mine, cand_off, cand)
    assert off is cand_off and values is cand
    assert all(a[0] is b[0] for a, b in zip(mine, parts, strict=True))
