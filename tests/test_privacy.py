"""Privacy is measured: a recording server tries to rebuild training rows from what it got.

``RecordingFederation`` wraps a real ``LocalFederation`` and keeps every request and reply,
as an honest-but-curious server would. The attacks:

- *raw values*: every floating-point number in any reply, matched against the training
  features and targets;
- *single-row aggregates*: a client's node summary over one row gives that row's target;
  its sketches of that node give the row's feature values: linked, a rebuilt row;
- *the pooled view*: under ``"secure"`` the server adds the masked replies up (as the
  protocol does) and decodes them; every node summary, every Round B interval between
  consecutive candidates (the difference of cumulative sums) and every category group
  must cover at least ``min_aggregate_rows`` rows.

They must find rows under ``privacy="none"`` (so the test can fail) and none under the
default. Every new message field must keep these tests green.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.federated.client_secure import stat_frac_bits
from fedforest.federated.federation import Federation
from fedforest.federated.privacy.secagg import add_in_order, from_fixed
from fedforest.federated.protocol import ROUND_A, ROUND_B, Message, unpack_sketch


class RecordingFederation(Federation):
    """An honest-but-curious server's transport: delivers everything, keeps everything."""

    def __init__(self, inner: Federation) -> None:
        self.inner = inner
        self.rounds: list[tuple[dict[str, Message], dict[str, Message]]] = []

    @property
    def client_names(self) -> list[str]:
        return self.inner.client_names

    @property
    def clients(self) -> dict[str, Any]:
        return getattr(self.inner, "clients", {})

    def send_and_receive(self, requests: dict[str, Message], round_index: int):
        replies = self.inner.send_and_receive(requests, round_index)
        self.rounds.append((dict(requests), dict(replies)))
        return replies


def _data(n_clients=10, n_rows=200, d=20, seed=0, categorical=False, missing=0.0):
    rng = np.random.default_rng(seed)
    X = (
        rng.normal(size=(n_clients * n_rows, d))
        + np.repeat(rng.normal(size=n_clients), n_rows)[:, None]
    )
    y = X[:, 0] + np.sin(2 * X[:, 1]) + rng.normal(scale=0.3, size=X.shape[0])
    X[rng.random(X.shape) < missing] = np.nan  # values missing completely at random
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(d)])
    if categorical:
        frame["ward"] = pd.Categorical(rng.choice(list("abcdefgh"), size=len(frame)))
        y = y + 2 * (frame["ward"] == "c").to_numpy()
    h = np.repeat(np.arange(n_clients), n_rows)
    return frame, y, h


def _fit(model, X, y, h, sample_weight=None):
    clients = [
        ff.Client(
            X[h == k].reset_index(drop=True),
            np.asarray(y)[h == k],
            f"site{k}",
            sample_weight=None if sample_weight is None else sample_weight[h == k],
        )
        for k in np.unique(h)
    ]
    fed = RecordingFederation(ff.LocalFederation(clients))
    model.fit_federated(fed)
    return fed


def raw_value_exposure(fed: RecordingFederation, X: pd.DataFrame, y: np.ndarray) -> float:
    """Fraction of training rows with an exact feature value or target in some reply."""
    seen = set()
    for _, replies in fed.rounds:
        for msg in replies.values():
            for arr in msg.arrays.values():
                if np.asarray(arr).dtype.kind == "f":
                    seen.update(np.asarray(arr, dtype=np.float64).ravel().tolist())
    values = X.select_dtypes("number").to_numpy(dtype=np.float64)
    targets = np.isin(np.asarray(y, float), list(seen)).reshape(len(y), -1)  # any output
    hit = np.isin(values, list(seen)).any(axis=1) | targets.any(axis=1)
    return float(hit.mean())


def linked_rows(fed: RecordingFederation, X: pd.DataFrame, y: np.ndarray, h, n_bins=32) -> float:
    """Rows rebuilt by linking a one-row node's summary (target) to its sketches (values)."""
    numeric = [j for j, c in enumerate(X.columns) if X[c].dtype.kind == "f"]
    values = np.full(X.shape, np.nan)
    for j in numeric:
        values[:, j] = X.iloc[:, j].to_numpy(dtype=np.float64)
    rebuilt = np.zeros(len(y), dtype=bool)
    names = {f"site{k}": np.flatnonzero(h == k) for k in np.unique(h)}
    for requests, replies in fed.rounds:
        for name, msg in replies.items():
            req = requests[name]
            if req.kind != ROUND_A or "summary" not in msg.arrays:
                continue
            summary = np.asarray(msg.arrays["summary"])
            if summary.dtype.kind != "f" or "pair_off" not in req.arrays:
                continue
            pair_off, pair_feat = req.arrays["pair_off"], req.arrays["pair_feat"]
            pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
            present = (summary[pair_node, 1] > 0) & np.isin(pair_feat, numeric)
            try:
                sketch = unpack_sketch(msg, int(present.sum()), n_bins, name)
            except ValueError:
                continue
            rows = names[name]
            for node in np.flatnonzero(summary[:, 0] == 1):
                target = summary[node, 2] / summary[node, 1]
                cand = rows[np.isclose(y[rows], target, rtol=1e-12, atol=0)]
                pos = np.flatnonzero(present & (pair_node == node))
                for q, p in zip(pos, np.searchsorted(np.flatnonzero(present), pos), strict=True):
                    j = pair_feat[q]
                    rebuilt[cand[values[cand, j] == sketch[p, 0]]] = True
    return float(rebuilt.mean())


def pooled_view(fed: RecordingFederation, n_classes: int, n_outputs: int = 1) -> dict[str, float]:
    """What the server decodes from the masked sums: the fewest rows of any released sum."""
    bits = stat_frac_bits(n_classes, n_outputs=n_outputs)
    fewest = {"summary": np.inf, "interval": np.inf, "group": np.inf}
    last_pair_off = last_summary = None
    for requests, replies in fed.rounds:
        kinds = {m.kind for m in requests.values()}
        if not replies:
            continue
        first = next(iter(replies.values()))
        if ROUND_A in kinds:
            last_pair_off = next(iter(requests.values())).arrays["pair_off"]
        if ROUND_A in kinds and first.arrays["summary"].dtype == np.uint64:
            total = add_in_order(
                (m.arrays["summary"] for m in replies.values()), first.arrays["summary"].shape
            )
            summary = from_fixed(total, bits)
            rows = summary[:, 0][summary[:, 0] > 0]
            if rows.size:
                fewest["summary"] = min(fewest["summary"], rows.min())
            last_summary = summary
        if ROUND_B in kinds and first.arrays["left"].dtype == np.uint64:
            req = next(iter(requests.values()))
            left = from_fixed(
                add_in_order(
                    (m.arrays["left"] for m in replies.values()), first.arrays["left"].shape
                ),
                bits,
            )
            cand_off = req.arrays["cand_off"]
            pair_off = last_pair_off
            assert pair_off is not None and last_summary is not None
            pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
            for p in range(cand_off.size - 1):
                lo, hi = cand_off[p], cand_off[p + 1]
                if hi == lo:
                    continue
                cum = np.concatenate([[0.0], left[lo:hi, 0], [last_summary[pair_node[p], 0]]])
                fewest["interval"] = min(fewest["interval"], np.diff(cum).min())
            gs = first.arrays["group_stats"]
            if gs.shape[0]:
                groups = from_fixed(
                    add_in_order((m.arrays["group_stats"] for m in replies.values()), gs.shape),
                    bits,
                )
                fewest["group"] = min(fewest["group"], groups[:, 0].min())
    return fewest


# --------------------------------------------------------------------------- the attacks
@pytest.mark.parametrize(
    ("task", "missing", "binning"),
    [
        ("regression", 0.0, "quantile"),
        ("classification", 0.0, "quantile"),
        ("regression", 0.15, "quantile"),
        ("regression", 0.0, "global"),
    ],
    ids=["regression", "classification", "regression-missing", "regression-global"],
)
def test_attack_rebuilds_rows_under_none(task: str, missing: float, binning: str) -> None:
    X, y, h = _data(missing=missing)
    kw: dict[str, Any] = dict(n_estimators=10, random_state=0, privacy="none", binning=binning)
    if task == "classification":
        y = (y > np.median(y)).astype(float)
        model = ff.FedForestClassifier(**kw)
    else:
        model = ff.FedForestRegressor(**kw)
    fed = _fit(model, X, y, h)
    assert raw_value_exposure(fed, X, y) > 0.9
    if task == "regression" and not missing and binning == "quantile":
        assert linked_rows(fed, X, y, h) > 0.05


@pytest.mark.parametrize(
    "settings",
    [
        {},  # defaults
        {"n_estimators": 50, "max_depth": 8, "min_samples_leaf": 5, "n_bins": 32},  # the paper's
    ],
    ids=["defaults", "paper"],
)
@pytest.mark.parametrize(
    ("task", "missing", "weighted"),
    [
        ("regression", 0.0, False),
        ("classification", 0.0, False),
        ("regression", 0.15, False),
        ("classification", 0.0, True),
    ],
    ids=["regression", "classification", "regression-missing", "classification-weighted"],
)
def test_attack_finds_nothing_under_secure(
    task: str, settings: dict, missing: float, weighted: bool
) -> None:
    X, y, h = _data(categorical=True, missing=missing)
    weights = np.random.default_rng(3).exponential(size=len(y)) if weighted else None
    settings = {"n_estimators": 20, **settings}
    if task == "classification":
        y = (y > np.median(y)).astype(float)
        model = ff.FedForestClassifier(random_state=0, **settings)
    else:
        model = ff.FedForestRegressor(random_state=0, **settings)
    assert model.privacy == "secure"  # the default
    fed = _fit(model, X, y, h, weights)
    assert raw_value_exposure(fed, X, y) < 0.01
    assert linked_rows(fed, X, y, h) == 0.0
    for _, replies in fed.rounds:
        for msg in replies.values():
            for name, arr in msg.arrays.items():
                assert arr.dtype in (np.uint64, np.uint8), (msg.kind, name, arr.dtype)
    m = max(10, 2 * model.min_samples_leaf)
    fewest = pooled_view(fed, 2 if task == "classification" else 0)
    assert fewest["summary"] >= m and fewest["interval"] >= m, fewest
    assert fewest["group"] >= m, fewest
    assert min(t.n_node_samples.min() for t in model.trees_) >= m


@pytest.mark.parametrize("target", ["multi-output", "poisson", "multi-output-poisson"])
def test_attack_finds_nothing_under_secure_in_the_new_target_columns(target: str) -> None:
    """Multi-output (a pair per output) and Poisson (sum u, sum u log u) masked columns.

    With a categorical column: its category groups carry every output's pair too.
    """
    X, y, h = _data(categorical=True)
    rng = np.random.default_rng(5)
    ward = 3 * (X["ward"] == "e").to_numpy()  # a category effect on the other outputs
    if target == "poisson":
        y = rng.poisson(np.exp(0.5 * X["x0"].to_numpy() - 0.5)).astype(float)
        model = ff.FedForestRegressor(n_estimators=20, criterion="poisson", random_state=0)
        k = 1
    elif target == "multi-output":  # three outputs of different scales, one a raw feature
        y = np.column_stack([y, 100 + 10 * X["x2"] * X["x3"] + ward, X["x4"]])
        model = ff.FedForestRegressor(n_estimators=20, random_state=0)
        k = 3
    else:
        rate = np.exp(0.5 * X[["x0", "x1"]].to_numpy() - 0.5) * np.c_[1.0 + ward, 2.0 + 0 * ward]
        y = rng.poisson(rate).astype(float)
        model = ff.FedForestRegressor(n_estimators=20, criterion="poisson", random_state=0)
        k = 2
    assert model.privacy == "secure"
    fed = _fit(model, X, y, h)
    assert raw_value_exposure(fed, X, y) == 0.0
    assert linked_rows(fed, X, y if k == 1 else y[:, 0], h) == 0.0
    columns = set()
    for requests, replies in fed.rounds:
        for msg in replies.values():
            for name, arr in msg.arrays.items():
                assert arr.dtype in (np.uint64, np.uint8), (msg.kind, name, arr.dtype)
                if msg.kind == ROUND_A and name == "summary":
                    columns.add(arr.shape[1])
        for req in requests.values():  # the standardisation the server sent: no data value
            setup = req.header.get("setup", {})
            if "y_center" in setup:
                sent = np.ravel([setup["y_center"], setup["y_scale"]])
                sent = sent[sent != 0]  # (Poisson's center is the constant 0)
                assert not np.isin(sent, np.ravel(y)).any()
    assert columns == {2 + 2 * k}  # every output's masked pair (or Poisson's two columns)
    m = max(10, 2 * model.min_samples_leaf)
    fewest = pooled_view(fed, 0, k)
    assert fewest["summary"] >= m and fewest["interval"] >= m, fewest
    assert m <= fewest["group"] < np.inf, fewest  # category groups were released
    assert any((t.feature == X.columns.get_loc("ward")).any() for t in model.trees_)
    assert min(t.n_node_samples.min() for t in model.trees_) >= m


# --------------------------------------------------------------------------- across levels
def _in_bag_weights(model, clients, h, n_trees):
    from fedforest.federated.client import bootstrap_counts
    from fedforest.federated.client_secure import data_secret

    seed = int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))
    w = np.zeros((n_trees, len(h)))
    for k, c in enumerate(clients):
        idx = np.flatnonzero(h == k)
        secret = data_secret(c.X, c.y_raw, c.name)
        for t in range(n_trees):
            w[t, idx] = bootstrap_counts(seed, t, c.name, idx.size, secret)
    return w


def cross_level_exposure(fed, model, X, w, m) -> float:
    """Rows whose sum a parent's cumulative sum minus its children's isolates exactly.

    For every tree, node and feature released both at a node and at one of its children:
    the parent's sum at ``e`` minus the child's at ``e'`` (both decoded by the server) is
    a sum over one in-bag row for some pairs unless the candidates prevent it. The test
    knows the rows (the server does not) and counts the rows so isolated.
    """
    values = X.to_numpy(dtype=np.float64)
    trees = model.trees_
    member = []
    for t, tree in enumerate(trees):
        mem = {0: np.flatnonzero(w[t] > 0)}
        for i in range(tree.node_count):
            if tree.children_left[i] >= 0 and i in mem:
                r = mem[i]
                go = values[r, tree.feature[i]] <= tree.threshold[i]
                mem[tree.children_left[i]], mem[tree.children_right[i]] = r[go], r[~go]
        member.append(mem)
    depth = []
    for tree in trees:
        dd = {0: 0}
        for i in range(tree.node_count):
            for c in (tree.children_left[i], tree.children_right[i]):
                if c >= 0:
                    dd[c] = dd[i] + 1
        depth.append(dd)
    rounds = [(next(iter(r.values())), r) for r, _ in fed.rounds]
    released: dict = {}
    level = -1
    for req, _ in rounds:
        if req.kind == ROUND_A:
            level += 1
            a = req
        if req.kind != ROUND_B:
            continue
        slots = []
        for t, tree in enumerate(trees):
            frontier = [
                nd
                for nd, dd in sorted(depth[t].items())
                if dd == level
                and (
                    tree.children_left[nd] >= 0
                    or (tree.n_node_samples[nd] >= 2 * m and tree.impurity[nd] > 1e-12)
                )
            ]
            want = a.arrays["slot_tree_off"][t + 1] - a.arrays["slot_tree_off"][t]
            assert len(frontier) == want  # the reconstruction of the server's slots
            slots += [(t, nd) for nd in frontier]
        pair_off, pair_feat = a.arrays["pair_off"], a.arrays["pair_feat"]
        cand_off, cand = req.arrays["cand_off"], req.arrays["cand"]
        for s, (t, nd) in enumerate(slots):
            for p in range(pair_off[s], pair_off[s + 1]):
                if cand_off[p + 1] > cand_off[p]:
                    released[(t, nd, int(pair_feat[p]))] = cand[cand_off[p] : cand_off[p + 1]]
    exposed: set = set()
    for (t, nd, f), parent_cands in released.items():
        tree = trees[t]
        left, right = tree.children_left[nd], tree.children_right[nd]
        if left >= 0 and (t, left, f) in released and (t, right, f) in released:
            # Parent minus both children: the children's rows between their thresholds
            # and the parent's.
            P, L, R = member[t][nd], member[t][left], member[t][right]
            for e in parent_cands:
                below_p = set(P[values[P, f] <= e].tolist())
                for e_l in released[(t, left, f)]:
                    below_l = set(L[values[L, f] <= e_l].tolist())
                    for e_r in released[(t, right, f)]:
                        both = below_l | set(R[values[R, f] <= e_r].tolist())
                        if len(below_p ^ both) == 1:
                            exposed |= below_p ^ both
        for child in (tree.children_left[nd], tree.children_right[nd]):
            if child < 0 or (t, child, f) not in released:
                continue
            P, C = member[t][nd], member[t][child]
            for e in parent_cands:
                below_p = set(P[values[P, f] <= e].tolist())
                for e2 in released[(t, child, f)]:
                    below_c = set(C[values[C, f] <= e2].tolist())
                    if below_c <= below_p and len(below_p - below_c) == 1:
                        exposed |= below_p - below_c
                    if below_p <= below_c and len(below_c - below_p) == 1:
                        exposed |= below_c - below_p
    return len(exposed) / len(values)


def test_differencing_across_levels_isolates_no_row(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y, h = _data(n_clients=10, n_rows=100, d=8)
    n_trees = 10
    clients = [
        ff.Client(X[h == k].reset_index(drop=True), np.asarray(y)[h == k], f"site{k}")
        for k in np.unique(h)
    ]

    def attack() -> float:
        fed = RecordingFederation(ff.LocalFederation(clients))
        model = ff.FedForestRegressor(n_estimators=n_trees, random_state=0).fit_federated(fed)
        return cross_level_exposure(fed, model, X, _in_bag_weights(model, clients, h, n_trees), 10)

    assert attack() == 0.0
    # The attack finds rows when the rule is off (so this test can fail).
    from fedforest.federated.server import secure

    monkeypatch.setattr(
        secure, "safe_from_ancestors", lambda cands, *a, **k: np.ones(cands.size, dtype=bool)
    )
    assert attack() > 0.005
