"""Combinations of more than two released sums on a feature: intervals against intervals.

An ancestor ``A`` released cumulative sums at its thresholds and its total; a node ``C``
inside it released its own at its candidates and its total. Any two of ``A``'s give its
sum over an interval ``J`` of its thresholds, any two of ``C``'s its sum over an interval
``K`` of its candidates; ``S_A(J) - S_C(K)`` covers ``A``'s rows outside ``C`` in ``J``
and ``C``'s rows in one interval but not the other. The rule between two sums
(``ancestor_safe``) misses it: with ``K = J`` (an ancestor's thresholds inside the node
join its grid, and its quantile candidates often pick them) it is ``A``'s rows outside
``C`` in ``J``, a few rows where ``C`` holds most of ``A``'s there. The interval rule
(``privacy/intervals.py``; docs/privacy.md, "Combinations of more than two sums") rules
these out; without it the attack finds them (measured on the first case: 212
combinations, 0.6 % of the rows alone).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated.privacy import intervals, rules
from fedforest.federated.privacy.intervals import (
    both_rules,
    interval_checks,
    interval_checks_numpy,
    interval_safe,
    interval_safe_numpy,
    safe_from_ancestors,
)
from tests._attack_controls import assert_found_at_some_seed
from tests.test_privacy import (
    RecordingFederation,
    _data,
    _in_bag_weights,
    _members,
    _releases,
)


def _isolating(plus: np.ndarray, minus: np.ndarray, m: int) -> np.ndarray:
    return ((minus == 0) & (plus > 0) & (plus < m)) | ((plus == 0) & (minus > 0) & (minus < m))


def interval_exposure(fed, model, X, w, m, alone_out: set | None = None) -> dict[str, float]:
    """``S_A(J) - S_C(K)`` over every ancestor ``A`` and node ``C`` that released a feature.

    ``J`` runs over the intervals of ``A``'s thresholds and -inf, +inf, ``K`` over those
    of ``C``'s candidates and -inf, +inf (``K`` not empty and not all of ``C``, ``J`` not
    empty: those are single releases). Returns the isolating combinations and the share of
    the rows isolated alone. The test knows every node's rows (the server does not).
    """
    values = X.to_numpy(dtype=np.float64)
    released = _releases(fed, model, m)
    member = _members(model, values, w)
    found, alone = 0, set()
    for (t, nd, f), cands in released.items():
        tree = model.trees_[t]
        up = {int(c): i for i in range(tree.node_count)
              for c in (tree.children_left[i], tree.children_right[i]) if c >= 0}  # fmt: skip
        C = member[t][nd]
        cv = np.sort(values[C, f])
        k_ends = np.concatenate([[-np.inf], cands, [np.inf]])
        kr = np.searchsorted(cv, k_ends, side="right")
        ku, kv = np.triu_indices(k_ends.size, 1)
        keep = (kr[kv] > kr[ku]) & ~((ku == 0) & (kv == k_ends.size - 1))
        ku, kv = ku[keep], kv[keep]
        a = up.get(nd, -1)
        while a >= 0:
            if (t, a, f) in released:
                A = member[t][a]
                av = np.sort(values[A, f])
                e_ends = np.concatenate([[-np.inf], released[(t, a, f)], [np.inf]])
                ar = np.searchsorted(av, e_ends, side="right")
                er = np.searchsorted(cv, e_ends, side="right")
                ji, jj = np.triu_indices(e_ends.size, 1)
                ji, jj = ji[ar[jj] > ar[ji]], jj[ar[jj] > ar[ji]]
                lo = np.maximum(er[ji][:, None], kr[ku][None, :])
                hi = np.minimum(er[jj][:, None], kr[kv][None, :])
                both = np.maximum(hi - lo, 0)  # C's rows in J and K
                plus = (ar[jj] - ar[ji])[:, None] - both  # A's rows in J, not C's in K
                minus = (kr[kv] - kr[ku])[None, :] - both
                bad = _isolating(plus, minus, m)
                found += int(bad.sum())
                for i, k in zip(*np.nonzero(bad & (plus + minus == 1)), strict=True):
                    in_j = set(A[(values[A, f] > e_ends[ji[i]]) & (values[A, f] <= e_ends[jj[i]])])
                    in_k = (values[C, f] > k_ends[ku[k]]) & (values[C, f] <= k_ends[kv[k]])
                    alone |= in_j ^ set(C[in_k])
            a = up.get(a, -1)
    if alone_out is not None:  # the rows themselves, for a caller that unites attacks
        alone_out |= alone
    return {"combinations": found, "rows": len(alone) / len(values)}


def _attack(n_rows: int, d: int, n_trees: int, seed: int) -> dict[str, float]:
    X, y, h = _data(n_clients=10, n_rows=n_rows, d=d, seed=seed)
    clients = [
        ff.Client(X[h == k].reset_index(drop=True), np.asarray(y)[h == k], f"site{k}")
        for k in np.unique(h)
    ]
    fed = RecordingFederation(ff.LocalFederation(clients))
    model = ff.FedForestRegressor(n_estimators=n_trees, random_state=seed).fit_federated(fed)
    w = _in_bag_weights(model, clients, h, n_trees, random_state=seed)
    return interval_exposure(fed, model, X, w, 10)


def test_intervals_against_intervals_isolate_no_row(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _attack(n_rows=100, d=8, n_trees=10, seed=0)
    assert found == {"combinations": 0, "rows": 0.0}, found
    # Without the interval rule (the rule between two sums alone) the attack finds rows.
    monkeypatch.setattr(intervals, "both_rules", rules.ancestor_safe)
    assert_found_at_some_seed(
        lambda seed: _attack(n_rows=100, d=8, n_trees=10, seed=seed),
        lambda got: got["combinations"] > 0 and got["rows"] > 0,
        (0, 1, 2),
    )


def test_intervals_against_intervals_isolate_no_row_at_another_seed() -> None:
    # Without the rule: 184 combinations, 1 % of the rows alone (measured).
    found = _attack(n_rows=100, d=8, n_trees=10, seed=1)
    assert found == {"combinations": 0, "rows": 0.0}, found


def _random_pairs(
    rng: np.random.Generator, n_pairs: int, ordered: bool = False, most_rows: int = 80
) -> tuple[list, np.ndarray]:
    """Random pairs for the kernel and its twin: grids, candidates, ancestors' releases.

    ``ordered``: each ancestor's rows below its thresholds are the node's there plus rows
    outside it that never decrease, as real releases are (the kernel's shortcut then).
    ``most_rows``: the node's rows at its grid edges are below it (a few: many ties).
    """
    grid, rows, cands, thr, thr_rows, thr_total = [], [], [], [], [], []
    g_off, c_off, a_off, lo, hi, total = [0], [0], [0], [], [], []
    for _ in range(n_pairs):
        g = int(rng.integers(0, 25))
        e = np.sort(rng.choice(np.arange(-100, 100) / 10, size=g, replace=False))
        r = np.sort(rng.integers(0, most_rows, size=g)).astype(float)
        grid += list(e)
        rows += list(r)
        g_off.append(len(grid))
        lo.append(e[0] - 1 if g else -1.0)
        hi.append(e[-1] + 1 if g else 1.0)
        total.append((r[-1] if g else 0.0) + rng.integers(0, 20))
        n_c = int(rng.integers(0, min(g, 8) + 1))
        cands += list(np.sort(rng.choice(e, size=n_c, replace=False)))
        c_off.append(len(cands))
        for n_anc in range(int(rng.integers(0, 3))):  # each ancestor: its own total
            t = np.sort(rng.choice(e, size=int(rng.integers(0, min(g, 6) + 1)), replace=False))
            thr += list(t)
            if ordered:
                node_rows = r[np.searchsorted(e, t, side="right") - 1]
                thr_rows += list(node_rows + np.sort(rng.integers(0, 60, size=t.size)))
            else:
                thr_rows += list(np.sort(rng.integers(0, 150, size=t.size)).astype(float))
            thr_total += [total[-1] + 150.0 + 50 * n_anc] * t.size
        a_off.append(len(thr))
    args = [np.array(cands), np.array(c_off), np.array(grid), np.array(g_off), np.array(rows)]
    args += [np.array(thr), np.array(thr_rows), np.array(thr_total), np.array(a_off)]
    args += [np.array(lo), np.array(hi), np.array(total), 10]
    return args, rng.random(len(cands)) < 0.8  # some dropped already


@pytest.mark.parametrize("ordered", [False, True])
def test_interval_rule_kernel_matches_its_twin(ordered: bool) -> None:
    args, start = _random_pairs(np.random.default_rng(9), 300 if ordered else 80, ordered)
    a, b = start.copy(), start.copy()
    interval_safe(*args, a)
    interval_safe_numpy(*args, b)
    np.testing.assert_array_equal(a, b)
    assert (a != start).any() and a.any()


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("m", "most_rows"), [(10, 80), (3, 80), (4, 12), (10, 6)])
def test_interval_rule_kernel_matches_its_twin_on_real_releases(
    seed: int, m: int, most_rows: int
) -> None:
    """The kernel's search from the ends (ancestors' releases that never decrease) against
    the twin's test of every pair of intervals: other minimum rows, many ties (few rows),
    empty nodes and pairs of one candidate among the random ones."""
    args, start = _random_pairs(np.random.default_rng(seed), 400, True, most_rows)
    args[12] = m
    c_off, g_off = np.diff(args[1]), np.diff(args[3])
    assert (g_off == 0).any() and (c_off == 1).any() and (np.diff(args[8]) > 0).any()
    a, b = start.copy(), start.copy()
    interval_safe(*args, a)
    interval_safe_numpy(*args, b)
    np.testing.assert_array_equal(a, b)
    assert (a != start).any() and a.any()


@pytest.mark.parametrize(("ordered", "m"), [(True, 10), (True, 4), (False, 10)])
def test_both_rules_kernel_is_the_two_rules_in_turn(ordered: bool, m: int) -> None:
    """:func:`both_rules` (the rows below found once a pair) against ``ancestor_safe`` then
    ``interval_safe``, the parent's releases among them."""
    rng = np.random.default_rng(12)
    args, _ = _random_pairs(rng, 400, ordered, 40)
    args[12] = m
    near = (rng.random(args[5].size) < 0.3).astype(float)
    two_sums = [*args[:8], near, *args[8:]]
    a = np.empty(args[0].size, dtype=bool)
    rules.ancestor_safe(*two_sums, a)
    after_ancestors = a.copy()
    interval_safe(*args, a)
    b = np.zeros(args[0].size, dtype=bool)  # every entry written
    both_rules(*two_sums, b)
    np.testing.assert_array_equal(a, b)
    assert (a != after_ancestors).any() and (~after_ancestors).any() and a.any()


def test_interval_rule_kernel_mixes_real_and_other_releases() -> None:
    """One pair's ancestors: one whose releases never decrease (the search from the ends),
    one whose do (every pair of intervals): the same answers as the twin, where the kept
    candidates of one ancestor's test are those the other kept."""
    rng = np.random.default_rng(4)
    real, start = _random_pairs(rng, 300, True, 30)
    other, _ = _random_pairs(rng, 300, False, 30)
    # Every pair's ancestors from ``real`` (never decreasing), then from ``other`` (random
    # rows; totals apart from the first's).
    thr, rows, tot, off = [], [], [], [0]
    for p in range(300):
        for args, shift in ((real, 0.0), (other, 1000.0)):
            a = slice(int(args[8][p]), int(args[8][p + 1]))
            thr += list(args[5][a])
            rows += list(args[6][a])
            tot += list(args[7][a] + shift)
        off.append(len(thr))
    mixed = list(real)
    mixed[5:9] = [np.array(thr), np.array(rows), np.array(tot), np.array(off)]
    a, b = start.copy(), start.copy()
    interval_safe(*mixed, a)
    interval_safe_numpy(*mixed, b)
    np.testing.assert_array_equal(a, b)
    assert (a != start).any() and a.any()


def test_interval_rule_keeps_no_isolating_interval_pair() -> None:
    """Brute force on random rows of an ancestor ``A`` and a node ``C`` inside it.

    After :func:`safe_from_ancestors`, no interval ``J`` of ``A``'s thresholds (and
    -inf, +inf) and interval ``K`` of ``C``'s kept candidates (and -inf, +inf) make
    ``S_A(J) - S_C(K)`` a sum over 1 to ``m - 1`` rows added (none subtracted) or the
    reverse; ``J`` or ``K`` empty, or ``K`` all of ``C``, are single releases, which the
    rule within a node covers. The rule between two sums alone keeps such pairs. The
    candidates are ``m`` rows apart or more, as the rule within a node makes them.
    """
    rng = np.random.default_rng(11)
    m, found, kept_any = 5, {True: 0, False: 0}, 0
    for _ in range(300):
        values = rng.integers(0, 40, size=int(rng.integers(12, 60))).astype(float)
        inside = rng.random(values.size) < rng.uniform(0.2, 0.9)
        if inside.sum() < 2 * m:
            continue
        c_vals = np.sort(values[inside])
        thr = np.unique(rng.choice(values, size=int(rng.integers(1, 7))))
        # Candidates as the rule within a node leaves them: m rows of C apart or more.
        cands: list[float] = []
        for v in np.unique(rng.choice(c_vals, size=int(rng.integers(1, 7)))):
            below = np.searchsorted(c_vals, v, side="right")
            last = np.searchsorted(c_vals, cands[-1], side="right") if cands else 0
            if below - last >= m and c_vals.size - below >= m:
                cands.append(float(v))
        if not cands:
            continue
        cand = np.array(cands)
        grid = np.unique(np.concatenate([thr, cand]))
        rows = np.searchsorted(c_vals, grid, side="right").astype(float)
        a_rows = np.searchsorted(np.sort(values), thr, side="right").astype(float)
        anc = np.column_stack([thr, a_rows, np.full(thr.size, values.size), np.zeros(thr.size)])
        args = (cand, np.array([0, cand.size]), grid, np.array([0, grid.size]), rows, anc)
        bounds = (np.array([-np.inf]), np.array([np.inf]), np.array([float(c_vals.size)]))
        for rule in (True, False):
            if rule:
                kept = safe_from_ancestors(*args, np.array([0, thr.size]), *bounds, m)
                kept_any += int(kept.sum())
            else:
                kept = np.ones(cand.size, dtype=bool)
                rules.ancestor_safe(
                    *args[:5], *(np.ascontiguousarray(anc[:, j]) for j in range(4)),
                    np.array([0, thr.size]), *bounds, m, kept,
                )  # fmt: skip
            idx = np.arange(values.size)
            e_ends = [-np.inf, *thr, np.inf]
            k_ends = [-np.inf, *cand[kept], np.inf]
            for i, j in itertools.combinations(range(len(e_ends)), 2):
                J = set(idx[(values > e_ends[i]) & (values <= e_ends[j])])
                for u, v in itertools.combinations(range(len(k_ends)), 2):
                    in_k = (values[inside] > k_ends[u]) & (values[inside] <= k_ends[v])
                    K = set(idx[inside][in_k])
                    if not J or not K or in_k.all():
                        continue
                    plus, minus = np.array(len(J - K)), np.array(len(K - J))
                    found[rule] += int(_isolating(plus, minus, m))
    assert found[True] == 0 and found[False] > 0 and kept_any > 0, (found, kept_any)


def _nested_rows(rng: np.random.Generator) -> tuple:
    """Random rows of an ancestor ``A``, a node ``B`` inside it, ``C`` inside ``B``."""
    values = rng.integers(0, 1000, size=int(rng.integers(100, 600))).astype(float)
    in_b = rng.random(values.size) < rng.uniform(0.2, 0.9)
    in_c = in_b & (rng.random(values.size) < rng.uniform(0.1, 0.9))
    thr = np.unique(rng.choice(values, size=int(rng.integers(1, 16))))
    b_thr = np.unique(rng.choice(values[in_b], size=int(rng.integers(0, 30))))
    return values, in_b, in_c, thr, b_thr


def test_interval_checks_kernel_matches_its_twin() -> None:
    rng = np.random.default_rng(5)
    cols: dict[str, list] = {k: [] for k in ("a", "t", "e", "b", "br", "bt", "rows")}
    off, b_off = [0], [0]
    for _ in range(60):
        values, in_b, in_c, thr, b_thr = _nested_rows(rng)
        if rng.random() < 0.3:
            b_thr = b_thr[:0]  # no B: C's rows bound alone
        cols["e"] += list(thr)
        cols["a"] += list(np.searchsorted(np.sort(values), thr, side="right").astype(float))
        cols["t"] += [float(values.size)] * thr.size
        cols["b"] += list(b_thr)
        cols["br"] += list(np.searchsorted(np.sort(values[in_b]), b_thr, side="right") * 1.0)
        cols["bt"] += [float(in_b.sum())] * b_thr.size
        cols["rows"].append(float(in_c.sum()))
        off.append(len(cols["e"]))
        b_off.append(len(cols["b"]))
    c = {k: np.array(v, dtype=float) for k, v in cols.items()}
    args = (c["a"], c["t"], np.array(off), c["b"], c["br"], c["bt"], np.array(b_off))
    start = rng.random(c["e"].size) < 0.2
    x, y = start.copy(), start.copy()
    interval_checks(*args, c["e"], c["rows"], 10, x)
    interval_checks_numpy(*args, c["e"], c["rows"], 10, y)
    np.testing.assert_array_equal(x, y)
    assert (x & ~start).any() and not x.all()


def test_interval_checks_leave_out_only_thresholds_no_interval_needs() -> None:
    """Brute force: a threshold left out ends no interval with fewer than ``m`` rows of
    ``A`` outside ``C`` (the interval rule could find none isolating with it)."""
    rng = np.random.default_rng(6)
    m, left_out, needed = 10, 0, 0
    for _ in range(200):
        values, in_b, in_c, thr, b_thr = _nested_rows(rng)
        if in_c.sum() < 1:
            continue
        a_rows = np.searchsorted(np.sort(values), thr, side="right").astype(float)
        b_rows = np.searchsorted(np.sort(values[in_b]), b_thr, side="right").astype(float)
        out = np.zeros(thr.size, dtype=bool)
        interval_checks(
            a_rows, np.full(thr.size, float(values.size)), np.array([0, thr.size]),
            b_thr, b_rows, np.full(b_thr.size, float(in_b.sum())), np.array([0, b_thr.size]),
            thr, np.array([float(in_c.sum())]), m, out,
        )  # fmt: skip
        ends = np.concatenate([[-np.inf], thr, [np.inf]])
        outside = values[~in_c]
        for i in np.flatnonzero(~out):
            for j in range(ends.size):
                lo, hi = sorted((ends[i + 1], ends[j]))
                if lo != hi:
                    assert ((outside > lo) & (outside <= hi)).sum() >= m, (i, j)
        left_out, needed = left_out + int((~out).sum()), needed + int(out.sum())
    assert left_out > 100 and needed > 100, (left_out, needed)
