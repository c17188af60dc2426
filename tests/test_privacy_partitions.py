"""The partition rule (privacy/partitions.py): an ancestor's sum less one of each descendant's.

Brute force on random rows: an ancestor ``A`` whose rows are partitioned into three to
six nodes, each with candidates as the rule within a node leaves them; after the rule no
choice of one kept candidate, 0 or the total per node makes ``S_A(e) - sum_c S_c(x_c)``
a sum over 1 to ``m - 1`` rows of one sign unless the choice of 0 or the total alone
per node already does (those releases are not the candidates'), and without the rule
such choices exist. The kernel and its NumPy
twin agree.
"""

from __future__ import annotations

import itertools

import numpy as np

from fedforest.federated.privacy.partitions import (
    partition_filter,
    partition_safe,
    partition_safe_numpy,
)


def _random_cut(rng: np.random.Generator, m: int) -> tuple:
    """A's rows split into nodes, the nodes' candidates (m rows apart), A's thresholds."""
    n_nodes = int(rng.integers(3, 7))
    node_vals, node_cands = [], []
    for _ in range(n_nodes):
        vals = np.sort(rng.integers(0, 60, size=int(rng.integers(2 * m, 5 * m))).astype(float))
        cands: list[float] = []
        for v in np.unique(rng.choice(vals, size=int(rng.integers(1, 6)))):
            below = np.searchsorted(vals, v, side="right")
            last = np.searchsorted(vals, cands[-1], side="right") if cands else 0
            if below - last >= m and vals.size - below >= m:
                cands.append(float(v))
        node_vals.append(vals)
        node_cands.append(np.array(cands))
    thr = np.unique(rng.choice(np.concatenate(node_vals), size=int(rng.integers(1, 5))))
    return node_vals, node_cands, thr


def _arrays(node_vals: list, node_cands: list, thr: np.ndarray) -> tuple:
    """The kernel's arguments for one cut of every node (grids hold A's thresholds)."""
    cand_off = np.cumsum([0] + [c.size for c in node_cands])
    grids = [np.unique(np.concatenate([thr, c])) for c in node_cands]
    grid_off = np.cumsum([0] + [g.size for g in grids])
    rows = [
        np.searchsorted(v, g, side="right").astype(float)
        for v, g in zip(node_vals, grids, strict=True)
    ]
    n = len(node_vals)
    return (
        np.concatenate(node_cands) if n else np.zeros(0),
        cand_off.astype(np.int64),
        np.concatenate(grids),
        grid_off.astype(np.int64),
        np.concatenate(rows),
        np.full(n, -np.inf),
        np.full(n, np.inf),
        np.array([float(v.size) for v in node_vals]),
        np.array([0, n], dtype=np.int64),
        np.arange(n, dtype=np.int64),
        np.array([0, thr.size], dtype=np.int64),
        thr.astype(float),
    )


def _isolating(node_vals: list, node_cands: list, kept: np.ndarray, thr, m: int) -> int:
    """Choices of a kept candidate or option per node whose difference isolates rows."""
    off = np.cumsum([0] + [c.size for c in node_cands])
    # Each node's kept candidates, and -inf (0) and +inf (its total), always released.
    options = [[-np.inf, *c[kept[off[i] : off[i + 1]]], np.inf] for i, c in enumerate(node_cands)]
    found = 0
    for e in thr:
        for pick in itertools.product(*options):
            if all(np.isinf(pick)):
                continue  # no candidate: the options alone (not the rule's to prevent)
            terms = [
                int(np.searchsorted(v, e, side="right") - np.searchsorted(v, x, side="right"))
                for v, x in zip(node_vals, pick, strict=True)
            ]
            plus = sum(t for t in terms if t > 0)
            minus = -sum(t for t in terms if t < 0)
            found += int((minus == 0 and 0 < plus < m) or (plus == 0 and 0 < minus < m))
    return found


def test_partition_rule_leaves_no_isolating_partition() -> None:
    rng = np.random.default_rng(3)
    m, found, kept_any, cases = 5, {True: 0, False: 0}, 0, 0
    for _ in range(400):
        node_vals, node_cands, thr = _random_cut(rng, m)
        if any(c.size == 0 for c in node_cands):
            continue
        cases += 1
        args = _arrays(node_vals, node_cands, thr)
        kept = np.ones(args[0].size, dtype=bool)
        partition_safe(*args, m, kept)
        kept_any += int(kept.sum())
        found[True] += _isolating(node_vals, node_cands, kept, thr, m)
        all_kept = np.ones(args[0].size, dtype=bool)
        found[False] += _isolating(node_vals, node_cands, all_kept, thr, m)
    assert cases > 50, cases  # the generator makes enough cuts with candidates everywhere
    assert found[True] == 0 and found[False] > 0 and kept_any > 0, (found, kept_any)


def test_partition_rule_kernel_matches_its_twin() -> None:
    rng = np.random.default_rng(7)
    m, changed = 6, 0
    for _ in range(200):
        node_vals, node_cands, thr = _random_cut(rng, m)
        args = _arrays(node_vals, node_cands, thr)
        start = rng.random(args[0].size) < 0.9  # some candidates dropped before
        a, b = start.copy(), start.copy()
        partition_safe(*args, m, a)
        partition_safe_numpy(*args, m, b)
        np.testing.assert_array_equal(a, b)
        changed += int((a != start).any())
    assert changed > 0


def test_partition_filter_skips_cuts_with_a_pair_without_candidates() -> None:
    rng = np.random.default_rng(8)
    while True:
        node_vals, node_cands, thr = _random_cut(rng, 5)
        args = _arrays(node_vals, node_cands, thr)
        kept = np.ones(args[0].size, dtype=bool)
        partition_safe(*args, 5, kept)
        if not kept.all() and all(c.size for c in node_cands):
            break
    n = len(node_vals)
    keys = np.arange(n, dtype=np.int64) * 10 + 3  # the pairs' keys, in slot order
    cuts = (np.array([0, n], dtype=np.int64), keys[::-1].copy(), args[10], args[11])
    out = np.ones(args[0].size, dtype=bool)
    partition_filter(cuts, keys, *args[:8], 5, out)
    np.testing.assert_array_equal(out, kept)  # the cut's keys in any order
    missing = (cuts[0], np.append(keys[:-1], 99).astype(np.int64), args[10], args[11])
    out = np.ones(args[0].size, dtype=bool)
    partition_filter(missing, keys, *args[:8], 5, out)
    assert out.all()  # one of its pairs has no candidates here: no partition released
