"""Red team 14: every single-fit attack of the suite on one recording, united (issue 11).

One adversary holds one fit's recording and its model and runs every attack at once
(``tests/_attack_union.py``): a row is rebuilt when ANY attack gives its exact target and
ANY attack one exact feature value of that same row, claims of different attacks
combined. On a reduced grid (10 clients x 100 rows x 8 features, 10 trees): under
``"secure"`` fewer than 1 % of the rows (none found), under ``"none"`` most of them.
``benchmarks/attack_union.py`` runs issue 11's full grid at the paper's settings.

Also red team 13's one-fit attack on clients of one row (nested nodes of two trees of the
same fit, one row apart), for the classifier: the row alone between the two boxes and its
label from the difference of the class weights.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated import client_bootstrap
from tests._attack_controls import assert_found_at_some_seed
from tests._attack_union import union_fit
from tests.test_privacy import _data, _fit
from tests.test_privacy_red6 import M, _boxes

SMALL: dict[str, Any] = {"n_rows": 100, "d": 8, "settings": {"n_estimators": 10}}


@pytest.mark.parametrize(
    ("task", "variant"),
    [("regression", "plain"), ("regression", "categorical"), ("classification", "plain")],
)
def test_the_union_of_every_attack_rebuilds_no_row_under_secure(task: str, variant: str) -> None:
    got = union_fit(task, variant, "secure", 0, **SMALL)
    assert got["rebuilt"] < 0.01 and got["linked_only"] == 0.0, got
    assert got["attacks"]["raw"] == (0, 0) and got["attacks"]["linked"] == (0, 0), got


def test_split_on_client_is_refused_under_secure() -> None:
    got = union_fit("regression", "split_on_client", "secure", 0, **SMALL)
    assert "split_on_client" in got.get("refused", ""), got


@pytest.mark.parametrize(
    ("task", "variant"),
    [("regression", "plain"), ("classification", "split_on_client")],
)
def test_the_union_rebuilds_rows_under_none(task: str, variant: str) -> None:
    """The control: the same attacks on ``"none"``'s recording (93 % of the rows rebuilt
    in the regression, 6 % in the classifier split on the client, seed 0)."""
    assert_found_at_some_seed(
        lambda seed: union_fit(task, variant, "none", seed, **SMALL),
        lambda got: got["rebuilt"] > 0.03,
        (0, 1, 2),
    )


# ------------------------------------------------------- one fit, one-row clients, classifier
def across_trees_class_exposure(seed: int, n_clients: int = 100) -> dict[str, int]:
    """A default secure classifier (50 trees) on ``n_clients`` clients of one row each (the
    suite's data, 8 features, the target split at its median). For every node of one tree
    inside a node of another tree of the same fit with one row more, the server claims the
    row between the boxes has the class whose weight the difference holds (a whole share:
    0 or 1 of class 0, to 1e-9). Returns the claims, the rows rebuilt (alone between the
    boxes with the claimed label) and the claims whose box held one row of another label."""
    X, y, h = _data(n_clients=n_clients, n_rows=1, d=8, seed=seed)
    labels = (y > np.median(y)).astype(float)
    model = ff.FedForestClassifier(random_state=seed, classes=[0.0, 1.0])  # one row: no label
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _fit(model, X, labels, h)
    V, d = X.to_numpy(dtype=np.float64), X.shape[1]
    boxes = [_boxes(t, d) for t in model.trees_]
    rebuilt: set[int] = set()
    claims = wrong = 0
    for a in range(len(boxes)):
        for b in range(len(boxes)):
            if a == b:
                continue
            ta, tb = model.trees_[a], model.trees_[b]
            (lo_a, hi_a), (lo_b, hi_b) = boxes[a], boxes[b]
            inside = np.all((lo_b[None] <= lo_a[:, None]) & (hi_a[:, None] <= hi_b[None]), axis=2)
            more = tb.n_node_samples[None, :] - ta.n_node_samples[:, None]
            for i, j in zip(*np.nonzero(inside & (more == 1) & (more < M)), strict=True):
                w_a, w_b = ta.weighted_n_node_samples[i], tb.weighted_n_node_samples[j]
                if w_b <= w_a:
                    continue
                share = (tb.value[j, 0] * w_b - ta.value[i, 0] * w_a) / (w_b - w_a)
                if abs(share - round(share)) > 1e-9 or round(share) not in (0, 1):
                    continue
                claims += 1
                label = model.classes_[0] if round(share) == 1 else model.classes_[1]
                in_b = np.all((V > lo_b[j]) & (V <= hi_b[j]), axis=1)
                in_a = np.all((V > lo_a[i]) & (V <= hi_a[i]), axis=1)
                between = np.flatnonzero(in_b & ~in_a)
                if between.size == 1:
                    if labels[between[0]] == label:
                        rebuilt.add(int(between[0]))
                    else:
                        wrong += 1
    return {"claims": claims, "rebuilt": len(rebuilt), "wrong": wrong}


def test_one_classifier_fit_on_clients_of_one_row_gives_no_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Red team 13's fix (a one-row client draws its row a secret Poisson number of times)
    holds for the classifier; with the former draws (the control) rows come back."""
    got = across_trees_class_exposure(0)
    assert got["rebuilt"] <= 1, got  # a box can hold one row of the claimed label by chance
    draws = client_bootstrap._draws
    monkeypatch.setattr(
        client_bootstrap, "_draws", lambda rng, n, size, secret: draws(rng, n, size, False)
    )
    assert_found_at_some_seed(across_trees_class_exposure, lambda r: r["rebuilt"] > 5, [0, 1, 2])


# ------------------------------------------------- the out-of-bag sums with the same trees
def oob_with_trees_exposure(privacy: str, seed: int, n_clients: int = 17, n_rows: int = 3):  # noqa: ANN201
    """One regressor (50 trees, ``oob_score=True``) on ``n_clients`` x ``n_rows`` rows. The
    server writes each tree's root sum (the model's ``value * weighted_n``) as ``sum_i c_ti
    y_i`` with the bootstrap counts it can compute (the public seed, the clients' names and
    sizes; not a secret it does not hold), adds the out-of-bag round's sums of ``y`` with
    ``w = 1`` (each client's, read in the clear under ``"none"``; the pooled one under
    ``"secure"``) and solves. Returns, with the trees alone and with the out-of-bag sums
    too, the rows whose target the system fixes (no null-space component) and of those
    the rows it gives exactly (to 1e-6)."""
    from fedforest.federated.client_bootstrap import bootstrap_counts
    from fedforest.federated.protocol import OOB
    from tests.test_privacy_fits import oob_release

    X, y, h = _data(n_clients=n_clients, n_rows=n_rows, d=4, seed=seed)
    model = ff.FedForestRegressor(random_state=seed, privacy=privacy, oob_score=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fed = _fit(model, X, y, h)
    public = int(np.random.RandomState(seed).randint(np.iinfo(np.int32).max))
    C = np.zeros((len(model.trees_), len(y)))
    for k in range(n_clients):
        idx = np.flatnonzero(h == k)
        for t in range(len(model.trees_)):
            C[t, idx] = bootstrap_counts(public, t, f"site{k}", idx.size, None)
    roots = np.array([t.value[0, 0] * t.weighted_n_node_samples[0] for t in model.trees_])
    pooled, center, scale = oob_release(fed)
    rows, sums = [np.ones(len(y))], [scale * pooled[2] + len(y) * center]
    _, replies = next((q, a) for q, a in fed.rounds if next(iter(q.values())).kind == OOB)
    for name, msg in replies.items():
        if msg.arrays["oob_sums"].dtype.kind == "f":  # "none": each client's own sums
            k = int(name.removeprefix("site"))
            rows.append((h == k).astype(float))
            sums.append(scale * float(msg.arrays["oob_sums"][2]) + (h == k).sum() * center)
    out = {}
    for label, A, b in (
        ("trees", C, roots),
        ("trees+oob", np.vstack([C, *rows]), np.append(roots, sums)),
    ):
        y_hat = np.linalg.lstsq(A, b, rcond=None)[0]
        _, sv, vt = np.linalg.svd(A)
        null = vt[int((sv > 1e-9 * sv[0]).sum()) :]
        fixed = np.abs(null).max(axis=0) < 1e-9 if null.size else np.ones(len(y), bool)
        exact = fixed & (np.abs(y_hat - y) <= 1e-6 * np.abs(y))
        out[label] = (int(fixed.sum()), int(exact.sum()))
    return out


def test_out_of_bag_sums_with_the_same_trees_give_no_target_under_secure() -> None:
    """Red team 13 analysed it only: 17 clients x 3 rows, 50 trees. Under ``"none"`` each
    client's out-of-bag sum of ``y`` with the root sums (counts the server computes) fixes
    all 51 targets exactly (the trees alone: none); under ``"secure"`` the one pooled sum
    and the roots fix none."""
    got = oob_with_trees_exposure("secure", 0)
    assert got == {"trees": (0, 0), "trees+oob": (0, 0)}, got
    assert_found_at_some_seed(
        lambda seed: oob_with_trees_exposure("none", seed),
        lambda got: got["trees+oob"][1] > 25,
        (0, 1, 2),
    )
