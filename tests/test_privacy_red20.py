"""The twentieth red team on ``privacy="secure"`` (issue 11, branch ``red20``).

See docs/privacy-findings.md, "Red team 20". Releases of one fit combined across nodes,
levels and trees, each over ``m`` rows or more, whose combination might cover fewer.

*The cell attack* (:func:`cell_exposure`): per tree and numeric feature, the server knows
the geometry of everything it released: every node's box (the model's splits), its
candidates on the feature (Round B) and its grid edges (Round A). The leaves and the
released thresholds cut the feature space into cells, (leaf, interval of the feature),
and every released sum on the feature (a node's total, the model's; a node's cumulative
sum at a candidate) is a sum over cells. A cell whose indicator lies in the span of
those sums is a sum the server can compute, by geometry alone, whatever the rows. Cells
the server knows to be empty (Round A's exact counts show no row of a node between two
consecutive edges of its grid) are dropped as unknowns, which makes the attack stronger.
Unlike ``benchmarks/attack_span.py`` (atoms: rows of the same membership, granting the
attacker which cells are empty), every cell found here is one the server can sum; the
test knows the in-bag rows only to count a found cell's rows. It covers, on a feature,
every combination of released sums: a node's summary less a child's (the other child,
a leaf too), nested intervals over several levels, partitions that mix depths, a slot
passed through (its releases are its node's), the missing rows (the interval above every
finite edge; "value known | missing" is an edge).

*Across trees*: the server knows the seed but not the clients' bootstrap secrets; its
guess of the draws does not give the trees' rows (:func:`guessed_roots`).

Nothing found under ``"secure"``; the attacks find rows with the rules across levels
switched off (the controls) or under ``"none"``.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import fedforest as ff
from fedforest.federated.client_bootstrap import bootstrap_counts
from fedforest.federated.client_secure import stat_frac_bits
from fedforest.federated.grid_candidates import sent_candidates
from fedforest.federated.grid_lattice import decode_grid
from fedforest.federated.privacy.secagg import add_in_order, from_fixed, unpack_counts
from fedforest.federated.server import secure_derived, secure_round_b
from tests._attack_controls import assert_found_at_some_seed, rules_across_levels_off
from tests.test_privacy import (
    RecordingFederation,
    _data,
    _fit,
    _in_bag_weights,
    _members,
    _releases,
    _round_b_pairs,
    client_values,
    setup_header,
)
from tests.test_site_categories import site_data


def _grid_releases(fed: RecordingFederation, model: Any, m: int) -> dict:
    """Round A's grid edges per (tree, node, feature) of the nodes that reached Round B:
    the server decodes the node's exact rows below each of them."""
    out: dict = {}
    grids: dict = {}
    for t, nd, p, f, _, a in _round_b_pairs(fed, model, m):
        if id(a) not in grids:
            off = np.asarray(a.arrays["grid_off"], dtype=np.int64)
            grids[id(a)] = (off, decode_grid(a, off, a.arrays["pair_feat"], "recorded"))
        off, grid = grids[id(a)]
        out[(t, nd, f)] = np.asarray(grid[off[p] : off[p + 1]], dtype=np.float64)
    return out


def _paths(tree: Any) -> tuple[dict[int, list], np.ndarray]:
    """Per node its path's splits (feature, threshold, missing left, went left),
    and ``under[node, leaf]``: whether the leaf is in the node's subtree."""
    path: dict[int, list] = {0: []}
    n = tree.node_count
    parent = np.full(n, -1)
    for i in range(n):
        left, right = tree.children_left[i], tree.children_right[i]
        if left < 0:
            continue
        # A category set split only says which leaf: its column is not a numeric one.
        split = (int(tree.feature[i]), float(tree.threshold[i]), bool(tree.missing_go_to_left[i]))
        path[left], path[right] = path[i] + [(*split, True)], path[i] + [(*split, False)]
        parent[left] = parent[right] = i
    under = np.zeros((n, n), dtype=bool)
    for leaf in np.flatnonzero(tree.children_left < 0):
        a = leaf
        while a >= 0:
            under[a, leaf] = True
            a = parent[a]
    return path, under


def _cells(path: dict, leaves: np.ndarray, f: int, edges: np.ndarray) -> np.ndarray:
    """The (leaf, interval) cells that exist: interval ``k`` of ``edges`` is ``(e[k-1],
    e[k]]``, the last one above every edge and holding the missing values (``+inf``)."""
    with np.errstate(over="ignore"):  # above "value known | missing" (the largest float)
        inside = [[edges[0]], *([np.nextafter(e, np.inf)] for e in edges)]
    inside[-1].append(np.inf)
    out = []
    for leaf in leaves:
        splits = [s for s in path[int(leaf)] if s[0] == f]
        assert all(thr in edges for _, thr, _, _ in splits)
        for k, xs in enumerate(inside):
            if any(all((ml if np.isinf(x) else x <= thr) == went for _, thr, ml, went in splits)
                   for x in xs):  # fmt: skip
                out.append((int(leaf), k))
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def _in_cell(rows: np.ndarray, x: np.ndarray, edges: np.ndarray, k: int) -> np.ndarray:
    lo = -np.inf if k == 0 else edges[k - 1]
    if k == edges.size:
        return rows[x > lo]
    return rows[(x > lo) & (x <= edges[k])]


def _determined(A: np.ndarray) -> np.ndarray:
    """Columns whose unit vector lies in the row space of ``A`` (leverage 1)."""
    with threadpool_limits(1):  # BLAS threads on shared cores: 4 s an SVD instead of 0.1
        _, s, vt = np.linalg.svd(np.unique(A, axis=0), full_matrices=False)
    rank = int((s > s[0] * 1e-10).sum())
    return (vt[:rank] ** 2).sum(axis=0) > 1 - 1e-8


def cell_exposure(fed, model, V, w, m, counts: bool = True) -> dict[str, Any]:
    """Cells of 1 to ``m - 1`` in-bag rows whose sum the server computes from one tree's
    releases on one numeric feature (module docstring).

    ``V``: the columns as the clients route them (:func:`client_values`); ``w``: every
    tree's bootstrap counts (:func:`_in_bag_weights`), which the test knows and the server
    does not: they only count a found cell's rows. ``counts``: drop the cells Round A's
    counts show empty. Returns the cells found, their rows and the rows alone in one (the
    server has their exact target), and how many cells the counts emptied.
    """
    released = _releases(fed, model, m)
    grids = _grid_releases(fed, model, m) if counts else {}
    member = _members(model, V, w)
    found: list[tuple[int, int, int, int]] = []
    alone: set[int] = set()
    emptied = 0
    for t, tree in enumerate(model.trees_):
        path, under = _paths(tree)
        leaves = np.flatnonzero(tree.children_left < 0)
        for f in sorted({f for (tt, _, f) in released if tt == t}):
            mine = {nd: c for (tt, nd, g), c in released.items() if (tt, g) == (t, f)}
            edges = np.unique(np.concatenate(list(mine.values())))
            edges = edges[np.isfinite(edges)]
            grid = {nd: e for (tt, nd, g), e in grids.items() if (tt, g) == (t, f)}
            fine = np.unique(np.concatenate([edges, *grid.values()]))
            fine = fine[np.isfinite(fine)]
            cells = _cells(path, leaves, f, fine)
            rows = [_in_cell(member[t][lf], V[member[t][lf], f], fine, k) for lf, k in cells]
            n_in = np.array([r.size for r in rows])
            # Round A's counts: a node's rows between consecutive edges of its grid (and
            # its candidates and total), exact; none there empties every cell in between.
            empty = np.zeros(len(cells), dtype=bool)
            for nd in set(grid) | set(mine):
                ks = np.searchsorted(fine, np.concatenate([grid.get(nd, []), mine.get(nd, [])]))
                prev = np.zeros(len(cells), dtype=bool)
                for k in np.unique(np.append(ks[ks < fine.size], fine.size)):
                    now = under[nd, cells[:, 0]] & (cells[:, 1] <= k)
                    if not n_in[now & ~prev].any():
                        empty |= now & ~prev
                    prev = now
            assert not n_in[empty].any()
            emptied += int(empty.sum())
            # The sums' cells: the released thresholds' intervals; empty when every fine
            # cell in it is.
            upper = np.append(fine, np.inf)[cells[:, 1]]
            coarse, at = np.unique(
                np.column_stack([cells[:, 0], np.searchsorted(edges, upper)]),
                axis=0,
                return_inverse=True,
            )
            at = at.ravel()
            known = np.ones(len(coarse), dtype=bool)
            np.logical_and.at(known, at, empty)
            sums = [under[nd, coarse[:, 0]] for nd in range(tree.node_count)]
            for nd, cands in mine.items():
                ks = np.searchsorted(edges, cands[np.isfinite(cands)])
                sums += [under[nd, coarse[:, 0]] & (coarse[:, 1] <= k) for k in ks]
            open_ = np.flatnonzero(~known)
            sure = open_[_determined(np.array(sums, dtype=float)[:, open_])]
            for j in sure:
                leaf, k = coarse[j]
                got = _in_cell(member[t][leaf], V[member[t][leaf], f], edges, int(k))
                if 0 < got.size < m:
                    found.append((t, int(leaf), f, got.size))
                    alone |= set(got.tolist()) if got.size == 1 else set()
    return {
        "cells": len(found),
        "rows": sum(c[-1] for c in found),
        "alone": len(alone),
        "emptied": emptied,
    }


def _recorded_fit(model, X, y, h):
    fed = _fit(model, X, y, h)
    clients = [fed.clients[f"site{k}"] for k in np.unique(h)]
    w = _in_bag_weights(model, clients, h, len(model.trees_), model.random_state)
    return fed, w, client_values(fed, X, h)


def _case(case: str, seed: int = 0, trees: int = 5):
    """(model, X, y, h) of a named case: small data, so nodes of about ``2 m`` rows happen."""
    if case == "site":  # a column of one level per client: roots and nodes passed through
        X, y, h = site_data(12, 1, rows=20, seed=seed)
        return ff.FedForestRegressor(n_estimators=trees, random_state=seed), X, y, h
    if case == "plain":  # the privacy tests' data, numeric only
        X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    else:
        X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed, categorical=True, missing=0.2)
    return ff.FedForestRegressor(n_estimators=trees, random_state=seed), X, y, h


@pytest.mark.parametrize("case", ["missing", "site"])
def test_no_cell_of_few_rows_is_in_the_span_of_these_trees_releases(case: str) -> None:
    """20 % missing values and an 8-level column (10 x 100 rows, 8 features, seed 0), and
    the one-level-per-client column (nodes passed through). Other fits give the cell
    attack a row: below, cousins' releases at one threshold and a cut of mixed depths
    (both closed)."""
    model, X, y, h = _case(case, trees=5)
    fed, w, V = _recorded_fit(model, X, y, h)
    got = cell_exposure(fed, model, V, w, 10)
    assert got["cells"] == 0 and got["alone"] == 0, got
    assert got["emptied"] > 0  # the counts were read


def test_a_cut_of_mixed_depths_gives_no_row() -> None:
    """Closed by the rule on derived sums (``server/secure_derived.py``). Tree 3 of the
    one-level-per-client fit at seed 3 (12 x 20 rows, 10 trees) released on x1 the root's
    -0.1214 (its split: node 1's total) and 0.6144, and 0.6392 at nodes 7 and 8, which
    partition node 2: the root's sum at 0.6144 less node 1's total and nodes 7's and 8's
    at 0.6392 was node 2's rows in (0.6144, 0.6392], with sign; Round A's counts showed
    node 8 had none there, so it was leaf 11's: one row, alone. Node 2's sums at both
    thresholds are derivable, one row apart: the rule drops the second."""
    model, X, y, h = _case("site", seed=3, trees=10)
    fed, w, V = _recorded_fit(model, X, y, h)
    got = cell_exposure(fed, model, V, w, 10)
    assert got["cells"] == 0 and got["alone"] == 0, got


def test_the_cut_of_mixed_depths_gives_the_row_with_the_derived_rule_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: the same fit with every other rule on and the rule on derived sums
    off gives the cell attack the row alone."""
    monkeypatch.setattr(secure_derived.DerivedSums, "filter", lambda *a, **k: None)
    model, X, y, h = _case("site", seed=3, trees=10)
    fed, w, V = _recorded_fit(model, X, y, h)
    got = cell_exposure(fed, model, V, w, 10)
    assert got["cells"] > 0 and got["alone"] >= 1, got


def test_the_cell_attack_finds_rows_with_the_rules_across_levels_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: the same data with ``safe_from_ancestors`` and the partition rule off.
    Measured 2026-12-05 at seed 0: 5 trees, 24 cells (56 rows, 10 alone) with the counts,
    15 (42 rows, 5 alone) by geometry; here 3 trees by geometry: 8 cells (20 rows, 3 alone)."""
    rules_across_levels_off(monkeypatch, partitions=True)

    def attack(seed: int) -> dict[str, Any]:
        model, X, y, h = _case("missing", seed, trees=3)
        fed, w, V = _recorded_fit(model, X, y, h)
        return cell_exposure(fed, model, V, w, 10, counts=False)

    assert_found_at_some_seed(attack, lambda got: got["alone"] > 0, (0, 1))


def _decoded_left(fed: RecordingFederation, model: Any, m: int) -> dict:
    """Round B's decoded cumulative sums per (tree, node, feature): (candidates, sums), the
    sums' columns (rows, weight, sum w z, sum w z^2) of a one-output regressor."""
    bits = stat_frac_bits(0)
    by_request = {id(next(iter(q.values()))): r for q, r in fed.rounds if q}
    out: dict = {}
    decoded: dict = {}
    for t, nd, p, f, req, a in _round_b_pairs(fed, model, m):
        if id(req) not in decoded:
            replies = list(by_request[id(req)].values())
            total = add_in_order(
                (r.arrays["left"] for r in replies), replies[0].arrays["left"].shape
            )
            packed = req.header.get("pack_counts") is True
            decoded[id(req)] = unpack_counts(total, bits[2:]) if packed else from_fixed(total, bits)
        lo, hi = req.arrays["cand_off"][p : p + 2]
        if hi > lo:
            out[(t, nd, f)] = (sent_candidates(a, req)[lo:hi], decoded[id(req)][lo:hi, :4])
    return out


def cousin_exposure(fed, model, V, w, m, y: np.ndarray) -> dict[str, Any]:
    """An ancestor's cumulative sum at ``e`` less those of disjoint descendants (one, two or
    three, of any depths) that released the same ``e`` on the feature: the sum over the
    ancestor's rows below ``e`` in none of them, which may lie in a leaf or in a node that
    never released the feature. An ancestor's thresholds join its descendants' grids (and
    the guides repeat thresholds): one value recurs in many nodes.

    The server's own attack: the model gives which nodes descend from which, the decoded
    sums the rest's rows (isolating at 1 to ``m - 1``) and, for one row, its target through
    the set-up's center and scale. The test checks each rest's rows against the in-bag
    rows it knows, and counts the training rows whose target a one-row rest gives (1e-5).
    """
    sums = _decoded_left(fed, model, m)
    member = _members(model, V, w)
    setup = setup_header(fed)
    center, scale = setup.get("y_center", 0.0), setup.get("y_scale", 1.0)
    found, read = 0, set()
    for (t, anc, f), (cands, left) in sums.items():
        _, under = _paths(model.trees_[t])
        inside = [
            nd
            for (tt, nd, g) in sums
            if (tt, g) == (t, f) and nd != anc and under[anc][under[nd]].all()
        ]
        for i, e in enumerate(cands):
            inner = [nd for nd in inside if (sums[(t, nd, f)][0] == e).any()]
            for size in (1, 2, 3):
                for pick in itertools.combinations(inner, size):
                    if any((under[a] & under[b]).any() for a, b in itertools.combinations(pick, 2)):
                        continue  # not disjoint
                    got = left[i].copy()
                    for nd in pick:
                        c2, l2 = sums[(t, nd, f)]
                        got -= l2[int(np.flatnonzero(c2 == e)[0])]
                    rows = round(float(got[0]))
                    mine = member[t][anc][V[member[t][anc], f] <= e]
                    rest = np.setdiff1d(mine, np.concatenate([member[t][nd] for nd in pick]))
                    assert rows == rest.size, (rows, rest.size)  # the server decodes it right
                    if not 0 < rows < m:
                        continue
                    found += 1
                    if rows == 1:
                        hit = np.flatnonzero(np.abs(center + scale * got[2] / got[1] - y) < 1e-5)
                        read |= set(hit.tolist())
    return {"combinations": found, "read": len(read)}


def test_cousins_releases_at_one_threshold_give_no_target() -> None:
    """Tree 2 at seed 1 (10 x 100 rows, 8 features, 10 trees) released x0 <= -3.0126 at
    the root, node 4 (depth 2) and node 7 (depth 3), on whose grids the root's thresholds
    are; the root less both was leaf 8's rows below it (node 7's sibling, which never
    released x0): one row, whose exact target the server read from its decoded sums. The
    cousins' rule (``server/secure_cousins.py``: every atom of a tree's releases at one
    threshold holds no row or at least m) leaves no such combination: none isolating, no
    target."""
    model, X, y, h = _case("plain", seed=1, trees=10)
    fed, w, V = _recorded_fit(model, X, y, h)
    got = cousin_exposure(fed, model, V, w, 10, y)
    assert got == {"combinations": 0, "read": 0}, got


def test_cousins_attack_reads_a_target_with_the_cousins_rule_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: Round B without the cousins' rule and the rule on derived sums (its
    atoms hold the cousins'; the other rules on), the same fit gives isolating
    combinations and row 366's exact target (red team 20's finding)."""
    monkeypatch.setattr(secure_round_b, "cousins_filter", lambda *args: None)
    monkeypatch.setattr(secure_derived.DerivedSums, "filter", lambda *a, **k: None)
    model, X, y, h = _case("plain", seed=1, trees=10)
    fed, w, V = _recorded_fit(model, X, y, h)
    got = cousin_exposure(fed, model, V, w, 10, y)
    assert got["combinations"] > 0 and got["read"] >= 1, got


@pytest.mark.parametrize("privacy", ["secure", "none"])
def test_the_server_cannot_draw_the_trees_bootstraps(privacy: str) -> None:
    """Across trees: exact per-node sums of the same rows in several trees would solve
    for rows if the server knew each tree's draws. It knows the seed (the set-up's), the
    clients' names and row counts, so it can draw as a client would without its secret:
    under ``"none"`` that is every tree's draws (so the test can fail); under
    ``"secure"`` no client's draws of any tree."""
    X, y, h = _data(n_clients=6, n_rows=40, d=4)
    model = ff.FedForestRegressor(n_estimators=5, random_state=0, privacy=privacy)
    fed, w, _ = _recorded_fit(model, X, y, h)
    seed = int(setup_header(fed)["seed"])
    guess = np.zeros_like(w)
    for k, name in enumerate(f"site{k}" for k in np.unique(h)):
        idx = np.flatnonzero(h == k)
        for t in range(w.shape[0]):
            guess[t, idx] = bootstrap_counts(seed, t, name, idx.size)
    same = [(guess[t, h == k] == w[t, h == k]).all() for t in range(5) for k in range(6)]
    roots = [(guess[t] > 0).sum() == tree.n_node_samples[0] for t, tree in enumerate(model.trees_)]
    if privacy == "none":
        assert all(same) and all(roots)
    else:  # a root's count of distinct rows can match by chance (1 of 5 trees at seed 0)
        assert not any(same) and not all(roots), (same, roots)
