"""Round B's one-pass answer (client_increments) is the message of the two steps, bit for bit.

The two steps are the left statistics at every candidate (``left_stats``, or its NumPy twin)
then ``pack_increments``; the one pass must send the same arrays, of the same dtypes, in
the sparse and the dense form, with int32 and int64 counts, over one block of trees or
several (threads).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from fedforest._common import count_columns, n_stats
from fedforest.federated import client_kernels as K
from fedforest.federated.client_increments import left_increment_answer, left_increments_numpy
from fedforest.federated.client_sketch import fine_codes
from fedforest.federated.protocol import pack_increments


def _case(seed: int, n_classes: int, weighted: bool, n_rows: int, big: bool, n_trees: int):
    rng = np.random.default_rng(seed)
    n, d = n_rows, 4
    X = rng.normal(size=(n, d))
    X[:, 1] = np.round(X[:, 1] * 2) / 2  # ties
    X[rng.random(n) < 0.1, 2] = np.inf  # missing values (held as +inf)
    y = rng.integers(0, n_classes, n).astype(float) if n_classes else rng.normal(size=n)
    rows, w, slot, tree_rows = [], [], [], [0]
    slot_tree = [0]
    for _ in range(n_trees):
        r = np.sort(rng.choice(n, size=n // 2, replace=False)).astype(np.int32)
        rows.append(r)
        wt = rng.integers(1, 4, size=r.size).astype(np.float64)
        if weighted:
            wt = wt * rng.uniform(0.1, 2.0, size=r.size)
        if big:
            wt = wt * 3e9
        w.append(wt)
        slot.append((slot_tree[-1] + rng.integers(-1, 3, size=r.size)).astype(np.int32))
        slot[-1][slot[-1] < slot_tree[-1]] = -1
        tree_rows.append(tree_rows[-1] + r.size)
        slot_tree.append(slot_tree[-1] + 3)
    n_slots = slot_tree[-1]
    pair_off = np.arange(0, 2 * n_slots + 1, 2, dtype=np.int64)
    pair_feat = rng.integers(0, d, size=2 * n_slots).astype(np.int32)
    keep = rng.random(pair_feat.size) < 0.8
    lists = []
    for p, f in enumerate(pair_feat):
        m = int(rng.integers(0, 40)) if p % 5 else 0
        col = X[:, f][np.isfinite(X[:, f])]
        cs = np.unique(rng.choice(col, size=m)) if m else np.empty(0)
        lists.append(cs)
    cand_off = np.zeros(pair_feat.size + 1, dtype=np.int64)
    np.cumsum([c.size for c in lists], out=cand_off[1:])
    cand = np.concatenate(lists)
    Xt = np.empty((d + 1, n))
    Xt[:-1] = X.T
    client = SimpleNamespace(X=X, Xt=Xt, _codes=fine_codes(X, 256))
    fit = SimpleNamespace(
        pair_off=pair_off,
        pair_feat=pair_feat,
        slot_tree=np.array(slot_tree, dtype=np.int64),
        pair_present=keep,
        tree_rows=np.array(tree_rows, dtype=np.int64),
        rows=np.concatenate(rows),
        w=np.concatenate(w),
        slot=np.concatenate(slot),
        y=y,
        n_classes=n_classes,
        weighted=weighted,
    )

    def run_blocks(fit_: object, job: object) -> None:
        for a in range(n_trees):  # one block a tree, the last first: order must not matter
            job(n_trees - 1 - a, n_trees - a)  # type: ignore[operator]

    client._run_blocks = run_blocks
    return client, fit, cand_off, cand


def _two_steps(client, fit, cand_off, cand):
    task = "classification" if fit.n_classes else "regression"
    s, nc = n_stats(task, fit.n_classes), count_columns(fit.n_classes, fit.weighted)
    left = np.empty((cand.size, s))
    codes, fmin, fmax = client._codes
    K.left_stats(
        client.Xt, codes, fmin, fmax, fit.rows, fit.w, fit.slot, fit.y, fit.n_classes,
        fit.pair_off, fit.pair_feat, cand_off, cand, 0, fit.pair_off.size - 1, left,
    )  # fmt: skip
    first = np.zeros(cand.size, dtype=bool)
    first[cand_off[:-1][np.diff(cand_off) > 0]] = True
    present = np.repeat(fit.pair_present, np.diff(cand_off))
    return pack_increments(left, first, nc, "left", present), s, nc


def _assert_same(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key, strict=True)


@pytest.mark.parametrize("n_classes", [0, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n_rows", [40, 2000])  # few rows a node: sparse; many: dense
@pytest.mark.parametrize("n_trees", [1, 3])
def test_one_pass_answer_is_the_two_steps_message(n_classes, weighted, n_rows, n_trees) -> None:
    client, fit, cand_off, cand = _case(
        n_rows + n_classes, n_classes, weighted, n_rows, False, n_trees
    )
    want, s, nc = _two_steps(client, fit, cand_off, cand)
    _assert_same(left_increment_answer(client, fit, cand_off, cand), want)
    codes, fmin, fmax = client._codes
    twin = left_increments_numpy(
        client.Xt, codes, fmin, fmax, fit.rows, fit.w, fit.slot, fit.y, fit.n_classes,
        fit.pair_off, fit.pair_feat, fit.pair_present, cand_off, cand, s, nc,
    )  # fmt: skip
    _assert_same(twin, want)


@pytest.mark.parametrize("n_rows", [40, 2000])
def test_one_pass_answer_with_int64_counts(n_rows: int) -> None:
    client, fit, cand_off, cand = _case(7, 0, False, n_rows, True, 2)
    want, _, _ = _two_steps(client, fit, cand_off, cand)
    assert want["left_counts"].dtype == np.int64
    _assert_same(left_increment_answer(client, fit, cand_off, cand), want)
