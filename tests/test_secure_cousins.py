"""The cousins' rule (``server/secure_cousins.py``; docs/privacy-findings.md, red team 20).

Per tree, feature and threshold, the nodes that released it must form chains below any
of them. Checked on hand-built trees (a level at a time, as the grower runs it) against
a brute-force oracle of the tree's ancestry, with the rule off as the control, and the
kernel against its NumPy twin.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fedforest.federated.server.secure_cousins import (
    cousins_filter,
    nearest_releases,
    nearest_releases_numpy,
)
from fedforest.federated.server.secure_grids import SecureState, advance
from fedforest.federated.server.secure_segments import PairSegments, offsets

D = 2


def _state() -> SecureState:
    state = SecureState(10, np.arange(D), [np.zeros(0)] * D, [np.zeros(0)] * D, *np.zeros((2, D)))
    state.start_batch(1, D)
    return state


def _level(state, node, f, cands, rule=True, safe=None):  # type: ignore[no-untyped-def]
    """One level's Round B candidates through the rule; the released ones kept as Round B
    does (``state.released``). Returns ``safe``."""
    node, f = np.asarray(node, np.int64), np.asarray(f, np.int64)
    off = offsets([len(c) for c in cands])
    cand = np.concatenate([np.asarray(c, float) for c in cands]) if cands else np.zeros(0)
    safe = np.ones(cand.size, bool) if safe is None else safe.copy()
    if rule:
        cousins_filter(state, node, f, cand, off, safe)
    owner = np.repeat(np.arange(node.size), np.diff(off))
    n_kept = np.bincount(owner[safe], minlength=node.size)
    keys = (node * D + f)[n_kept > 0]
    vals = np.column_stack([cand[safe], np.zeros((int(safe.sum()), 2))])
    state.released = PairSegments(keys, offsets(n_kept[n_kept > 0]), vals)
    return safe


def _next(state, parent):  # type: ignore[no-untyped-def]
    """The next level: this one's releases into the history, ``parent`` the new slots'."""
    state.history.append((state.parent, state.released, {}))
    state.pool.append(state.released.values)
    state.parent = np.asarray(parent, np.int64)
    state.lo, state.hi = np.zeros((len(parent), D)), np.zeros((len(parent), D))


def test_the_rule_refuses_a_cousin_below_a_released_threshold() -> None:
    """Root releases 0.5 on feature 1; its children both offer it (the first keeps it);
    at depth 2, the kept child's children offer it (the first keeps it: a chain) and so
    do the other child's (cousins of the first: the root's sum less both would be the
    rest below 0.5, dropped). A threshold no ancestor released is kept everywhere."""
    state = _state()
    _level(state, [0], [1], [[0.2, 0.5]])
    _next(state, [0, 0])
    safe = _level(state, [0, 1], [1, 1], [[0.5], [0.3, 0.5]])
    assert safe.tolist() == [True, True, False]
    _next(state, [0, 0, 1, 1])
    safe = _level(state, [0, 1, 2, 3], [1, 1, 1, 1], [[0.5], [0.5], [0.5, 0.7], [0.5]])
    assert safe.tolist() == [True, False, False, True, False]
    # Another feature's 0.5 is another chain.
    safe = _level(state, [0, 1, 2, 3], [0, 0, 0, 0], [[0.5], [0.5], [0.5], [0.5]])
    assert safe.tolist() == [True] * 4


def test_a_slot_passed_through_stands_for_its_parent() -> None:
    """Node 1 (depth 1) passes through (no split): its slot carries the root's releases
    (``advance``). Node 0's child released the root's 0.5; node 1, drawing again, is its
    cousin under the root: refused, though its nearest release is the copied one."""
    state = _state()
    _level(state, [0], [1], [[0.5]])
    _next(state, [0, 0])
    _level(state, [0], [1], [[0.5]])
    best_feature = np.array([1, -1])
    best = type("Best", (), {"feature": best_feature, "sets": {}, "threshold": np.zeros(2)})
    routes = {"route_left": np.array([0, 2]), "route_right": np.array([1, 2])}
    advance(state, best, routes)  # type: ignore[arg-type]
    assert state.parent.tolist() == [0, 0, 1]
    safe = _level(state, [0, 2], [1, 1], [[0.4], [0.5]])
    assert safe.tolist() == [True, False]


def _ancestors(parents: list[np.ndarray], lev: int, slot: int) -> list[tuple[int, int]]:
    out = []
    while lev > 0:
        slot = int(parents[lev][slot])
        lev -= 1
        out.append((lev, slot))
    return out


def _random_run(seed: int, rule: bool) -> tuple[list, list, int]:
    """A random forest's levels through the rule: (parents per level, releases, drops)."""
    rng = np.random.default_rng(seed)
    state = _state()
    n_trees = 3
    state.start_batch(n_trees, D)
    parents = [np.full(n_trees, -1)]
    releases, dropped = [], 0
    for lev in range(5):
        n = parents[lev].size
        node = np.repeat(np.arange(n), D)
        f = np.tile(np.arange(D), n)
        cands = [np.sort(rng.choice(6, rng.integers(0, 4), replace=False)) / 10 for _ in node]
        off = offsets([c.size for c in cands])
        safe = rng.random(int(off[-1])) < 0.9  # the other rules' drops
        kept = _level(state, node, f, cands, rule=rule, safe=safe)
        dropped += int((safe & ~kept).sum())
        owner = np.repeat(np.arange(node.size), np.diff(off))
        cand = np.concatenate(cands)
        got = zip(owner[kept], cand[kept], strict=True)
        releases += [(lev, int(node[p]), int(f[p]), float(e)) for p, e in got]
        # Some nodes split (two children each), the others are leaves.
        split = np.flatnonzero(rng.random(n) < 0.8)
        child_parent = np.repeat(split, 2)
        _next(state, child_parent)
        parents.append(child_parent)
    return parents, releases, dropped


def _chain_breaks(parents: list, releases: list) -> int:
    """Brute force: pairs of releases at one (feature, threshold), disjoint nodes, with a
    common ancestor that released it too."""
    by = {}
    for lev, slot, f, e in releases:
        by.setdefault((f, e), set()).add((lev, slot))
    breaks = 0
    for members in by.values():
        anc = {v: set(_ancestors(parents, *v)) for v in members}
        for v, w in itertools.combinations(members, 2):
            if v in anc[w] or w in anc[v]:
                continue
            breaks += bool(anc[v] & anc[w] & members)
    return breaks


@pytest.mark.parametrize("seed", range(6))
def test_releases_at_one_threshold_form_chains(seed: int) -> None:
    """Random trees and candidates, level by level: no two disjoint releases of one
    threshold under a third (the oracle walks the tree), while the rule drops some."""
    parents, releases, dropped = _random_run(seed, rule=True)
    assert _chain_breaks(parents, releases) == 0
    assert dropped > 0


def test_without_the_rule_the_chains_break() -> None:
    """The control: the same runs with the rule off break the chains."""
    assert all(_chain_breaks(*_random_run(seed, rule=False)[:2]) > 0 for seed in range(6))


def test_nearest_releases_kernel_and_twin_agree() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        pool = np.column_stack([rng.choice(8, 60) / 8, rng.random((60, 2))])
        pool[:30, 0] = np.arange(30) / 8  # rising segments (bisection) and not (scan)
        n_pairs, n_lev = 7, 3
        start = rng.integers(0, 50, (n_lev, n_pairs))
        end = start + rng.integers(0, 10, (n_lev, n_pairs))
        cand_off = offsets(rng.integers(0, 5, n_pairs))
        cand = rng.choice(30, int(cand_off[-1])) / 8
        safe = rng.random(cand.size) < 0.8
        out = np.empty(cand.size, np.int64)
        nearest_releases(pool, start, end, cand, cand_off, safe, out)
        np.testing.assert_array_equal(
            out, nearest_releases_numpy(pool, start, end, cand, cand_off, safe)
        )
        assert (out >= 0).any()
