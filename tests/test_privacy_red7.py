"""The seventh red team on ``privacy="secure"`` (issue 11, branch ``red7``).

See docs/privacy-findings.md, "Red team 7".

The estimator's less common settings and paths, against a server holding every reply, the
model, the error texts and the warnings. Each test keeps what was measured and shows, where
it applies, that its attack finds rows under ``"none"`` (or with the protection off), so it
can fail.

*Found and fixed*: ``categorical_features`` was not in the settings digest, and the data
secret of a categorical column (codes of the client's own sorted levels) equals its numeric
one when the column holds the codes 0..k-1 (a region code, a label-encoded column). A refit
that only made such a column categorical drew the same bootstraps and grew set splits where
the first fit had thresholds: nodes of one model inside nodes of the other with one row
more gave that row's exact target (red6's nested-node attack, the boxes extended to sets
of codes). The digest now covers the columns split as sets (``server/digest.py``).

*Nothing found*:

- *settings*: ``monotonic_cst``, ``min_weight_fraction_leaf``, ``min_impurity_decrease``,
  ``max_features`` at one feature and at all of them (leaf 1, no depth limit), a small
  ``max_samples``, ``class_weight`` as a dict (alone, and with a small ``max_samples`` and
  one feature): red5's attacks (``tests/test_privacy_shapes.py``'s ``measure``) find no raw
  value, no decoded sum under ``m`` rows, no model node under ``m`` distinct in-bag rows,
  no threshold at a training value, no differencing pair or partition;
- *pruning* (``ccp_alpha``) runs on the server over the grown trees: every pruned node's
  counts and value are a grown node's (no sum is added);
- *missing values* with sample weights, a column known at one client only, another
  missing in a few rows of one client, and three outputs with missing values: no raw value,
  no decoded sum under ``m`` rows;
- *the Dask transport* (a real ``LocalCluster`` on 127.0.0.1): every reply has the form
  (kind, header, arrays' names, dtypes and shapes) and the header of ``LocalFederation``'s,
  the same decoded sums, the same forest;
- *error texts and warnings* under odd data (a NaN target, an infinite feature, a negative
  Poisson target, a negative or NaN sample weight, a label one row holds, declared or
  not): none quotes a value of the data.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from tests import test_privacy_shapes as shapes
from tests._attack_controls import assert_found_at_some_seed
from tests._loopback import loopback_cluster
from tests.test_privacy import RecordingFederation, _data, _fit, pooled_view, raw_value_exposure
from tests.test_privacy_errors import quoted_values


# --------------------------------------------------------------------------- categorical_features
def _regions(tree: Any, d: int, j: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each node's region from its path (the server's): per numeric feature the lower and
    upper bounds, and for column ``j`` (codes 0..k-1, numeric in one model, categorical in
    the other) the codes it admits. A code a set split does not list goes either way."""
    n = tree.feature.size
    lo, hi = np.full((n, d), -np.inf), np.full((n, d), np.inf)
    codes = np.ones((n, k), dtype=bool)
    for i in range(n):
        left, right = tree.children_left[i], tree.children_right[i]
        if left < 0:
            continue
        lo[[left, right]], hi[[left, right]], codes[[left, right]] = lo[i], hi[i], codes[i]
        f, t = tree.feature[i], tree.threshold[i]
        to_left, to_right = tree.split_set(i)
        if to_left.size or to_right.size:
            unlisted = np.ones(k, dtype=bool)
            unlisted[np.r_[to_left, to_right]] = False
            codes[left] &= np.isin(np.arange(k), to_left) | unlisted
            codes[right] &= np.isin(np.arange(k), to_right) | unlisted
        elif f == j:
            codes[left] &= np.arange(k) <= t
            codes[right] &= np.arange(k) > t
        else:
            hi[left, f], lo[right, f] = min(hi[i, f], t), max(lo[i, f], t)
    lo[:, j], hi[:, j] = -np.inf, np.inf
    return lo, hi, codes


def nested_claims(tree_a: Any, tree_b: Any, d: int, j: int, k: int) -> list[float]:
    """Red6's nested-node attack with sets of codes: a node of one tree inside a node of
    the other with one row more; over the same bootstrap ``(W v)_outer - (W v)_inner``
    over the draws between is that row's target."""
    out = []
    for a, b in ((tree_a, tree_b), (tree_b, tree_a)):
        (lo_a, hi_a, c_a), (lo_b, hi_b, c_b) = _regions(a, d, j, k), _regions(b, d, j, k)
        inside = np.all((lo_b[None] <= lo_a[:, None]) & (hi_a[:, None] <= hi_b[None]), axis=2)
        inside &= np.all(~c_a[:, None] | c_b[None], axis=2)
        more = b.n_node_samples[None, :] - a.n_node_samples[:, None]
        for i, o in zip(*np.nonzero(inside & (more == 1)), strict=True):
            w_a, w_b = a.weighted_n_node_samples[i], b.weighted_n_node_samples[o]
            if w_b > w_a:
                out.append(float((b.value[o, 0] * w_b - a.value[i, 0] * w_a) / (w_b - w_a)))
    return out


def categorical_refit_exposure(seed: int, n_trees: int = 10, k: int = 5) -> tuple[int, int]:
    """Two default secure fits of the suite's data (10 clients x 100 rows, 8 features) with
    ``x3`` a code 0..k-1 that moves the target: numeric, then ``categorical_features=["x3"]``.
    Returns (trees whose roots hold the same rows and draws, rows whose exact target a
    claim gives, to 1e-6 and one row only)."""
    X, y, h = _data(n_clients=10, n_rows=100, d=8, seed=seed)
    X["x3"] = np.random.default_rng(seed + 50).integers(0, k, size=len(y)).astype(float)
    y = y + 0.8 * (X["x3"].to_numpy() == 2) - 0.5 * (X["x3"].to_numpy() == 4)
    numeric = ff.FedForestRegressor(n_estimators=n_trees, random_state=seed).fit(X, y, client_ids=h)
    sets = ff.FedForestRegressor(
        n_estimators=n_trees, random_state=seed, categorical_features=["x3"]
    )
    sets.fit(X, y, client_ids=h)
    same, rebuilt = 0, set()
    for a, b in zip(numeric.trees_, sets.trees_, strict=True):
        roots = (a.n_node_samples[0], a.weighted_n_node_samples[0])
        same += int(roots == (b.n_node_samples[0], b.weighted_n_node_samples[0]))
        for claim in nested_claims(a, b, X.shape[1], 3, k):
            match = np.flatnonzero(np.abs(y - claim) < 1e-6)
            rebuilt.update(match.tolist() if match.size == 1 else [])
    return same, len(rebuilt)


def test_a_refit_with_a_column_made_categorical_gives_no_target(monkeypatch) -> None:
    """Found and fixed (2026-12-04): with the categorical columns out of the settings
    digest, the two fits drew the same bootstraps (every root the same rows) and the
    nested-node attack gave 1, 0 and 2 rows' exact targets at data seeds 0 to 2 (10
    trees); now the roots differ and it gives none. (A root of two independent draws can
    match by chance in its distinct rows and draws: 1 of the 10 at seed 2 since the
    clients' data tags, 2026-12-04.) Since the secure row weights were bound to the
    federation's clients and the node grids thinned (2026-12-05), the attack without the
    fix gives 0, 3, 0, 1 and 2 rows at seeds 0 to 4: the test reads seeds 1 and 3, the
    control seeds 1, 3 and 4 in turn."""
    from fedforest.federated.server import batch_setup

    for seed in (1, 3):
        same, rebuilt = categorical_refit_exposure(seed)
        assert rebuilt == 0 and same <= 2, (seed, same, rebuilt)
    digest = batch_setup.settings_digest

    def without_columns(cfg, n, draws, d, dropped=None, categorical=None, tag=None, **kw):  # noqa: ANN001, ANN003, ANN202
        return digest(cfg, n, draws, d, dropped, None, tag, **kw)

    monkeypatch.setattr(batch_setup, "settings_digest", without_columns)
    assert_found_at_some_seed(  # every root the same rows, a row's exact target
        categorical_refit_exposure, lambda got: got[0] == 10 and got[1] >= 1, (1, 3, 4)
    )


def test_one_level_columns_leave_the_digest_alone() -> None:
    """A categorical column of one level never splits: the forest is the one with the column
    constant and numeric (the digest covers columns of two levels or more only)."""
    X, y, h = _data(n_clients=4, n_rows=100, d=3, seed=4)
    X["flag"] = 0.0  # its one level's code: the data secret is the numeric column's
    a = ff.FedForestRegressor(n_estimators=3, random_state=0).fit(X, y, client_ids=h)
    b = ff.FedForestRegressor(n_estimators=3, random_state=0, categorical_features=["flag"])
    b.fit(X, y, client_ids=h)
    for p, q in zip(a.trees_, b.trees_, strict=True):
        np.testing.assert_array_equal(p.value, q.value)


# --------------------------------------------------------------------------- less common settings
NOTHING = {"parent": 0, "further": 0, "partition": 0, "rows": 0.0}

SETTINGS: dict[str, tuple[str, dict[str, Any]]] = {
    "monotonic_cst": ("ordinal", {"monotonic_cst": [1, 0, 0, 0, -1, 0]}),
    "min_weight_fraction_leaf": ("ordinal", {"min_weight_fraction_leaf": 0.05}),
    "min_impurity_decrease": ("ordinal", {"min_impurity_decrease": 0.01}),
    "one_feature": ("ordinal", {"max_features": 1}),
    "all_features_leaf_1": (
        "ordinal",
        {"max_features": 1.0, "max_depth": None, "min_samples_leaf": 1},
    ),
    "small_max_samples": ("ordinal", {"max_samples": 0.05}),
    "class_weight_dict": ("binary_classes", {"class_weight": {0: 1, 1: 20}}),
    "class_weight_dict_small": (
        "binary_classes",
        {"class_weight": {0: 1, 1: 20}, "max_samples": 0.1, "max_features": 1},
    ),
}


@pytest.mark.parametrize("case", list(SETTINGS))
def test_less_common_settings_release_no_sum_under_m(case: str) -> None:
    """Three secure trees on 10 clients x 60 rows (measured 2026-12-04: nothing found)."""
    shape, settings = SETTINGS[case]
    got = shapes.measure(shape, 0, trees=3, n=60, **settings)
    assert got["raw"] == 0.0 and set(got["dtypes"]) <= {"<u8", "|u1"}, got
    assert min(got["fewest"].values()) >= got["m"], got
    assert got["nodes"] > 5 and got["small"] == 0 and got["wrong"] in (0, None), got
    assert got["thr"] == 0, got
    assert got["differencing"] == NOTHING, got
    assert got.get("individuals", 0.0) == 0.0, got


@pytest.mark.parametrize("case", ["monotonic_cst", "class_weight_dict"])
def test_the_same_settings_under_none_give_the_values_away(case: str) -> None:
    """Under ``"none"`` the replies carry the rows' values (so the test above can fail)."""
    shape, settings = SETTINGS[case]
    assert shapes.measure(shape, 0, trees=3, n=60, privacy="none", **settings)["raw"] > 0.9


def _node_stats(tree: Any) -> list[tuple[int, float, tuple[float, ...]]]:
    return [
        (int(n), float(w), tuple(np.round(np.ravel(v), 12)))
        for n, w, v in zip(
            tree.n_node_samples, tree.weighted_n_node_samples, tree.value, strict=True
        )
    ]


def test_pruning_adds_no_node() -> None:
    """``ccp_alpha`` prunes the grown trees on the server: each pruned node is a grown one
    (its rows, draws and value), so the pruned model releases no sum growth did not."""
    X, y, h = _data(n_clients=10, n_rows=60, d=6, seed=3)
    grown = ff.FedForestRegressor(n_estimators=3, random_state=0).fit(X, y, client_ids=h)
    pruned = ff.FedForestRegressor(n_estimators=3, random_state=0, ccp_alpha=0.02)
    pruned.fit(X, y, client_ids=h)
    for a, b in zip(grown.trees_, pruned.trees_, strict=True):
        kept = set(_node_stats(a))
        assert b.n_node_samples.size < a.n_node_samples.size  # pruning did cut
        assert all(node in kept for node in _node_stats(b))
        assert b.n_node_samples.min() >= 10


def _missing_cases() -> dict[str, tuple[pd.DataFrame, np.ndarray, np.ndarray, Any]]:
    X1, y1, h1 = _data(n_clients=10, n_rows=60, d=6, seed=0, missing=0.2)
    w1 = np.random.default_rng(1).integers(1, 5, size=len(y1)).astype(float)
    X2, y2, h2 = _data(n_clients=10, n_rows=60, d=6, seed=1)
    X2.loc[h2 != 0, "x2"] = np.nan  # known at site0 only
    X2.loc[(h2 == 3) & (np.arange(len(y2)) % 7 == 0), "x4"] = np.nan  # a few rows of one
    X3, y3, h3 = _data(n_clients=10, n_rows=60, d=6, seed=2, missing=0.1)
    noise = np.random.default_rng(0).normal(size=len(y3))
    Y3 = np.c_[y3, X3["x3"].fillna(0).to_numpy() * 2, noise]  # an output is a feature
    return {
        "missing_and_weights": (X1, y1, h1, w1),
        "column_at_one_client": (X2, y2, h2, None),
        "multi_output_missing": (X3, Y3, h3, None),
    }


@pytest.mark.parametrize(
    "case", ["missing_and_weights", "column_at_one_client", "multi_output_missing"]
)
def test_missing_values_in_odd_places_release_no_sum_under_m(case: str) -> None:
    X, y, h, w = _missing_cases()[case]
    fed = _fit(ff.FedForestRegressor(n_estimators=3, random_state=0), X, y, h, w)
    dtypes = {a.dtype.str for _, r in fed.rounds for m in r.values() for a in m.arrays.values()}
    assert dtypes <= {"<u8", "|u1"}, dtypes
    assert raw_value_exposure(fed, X, y) == 0.0
    fewest = pooled_view(fed, 0, 1 if np.ndim(y) == 1 else y.shape[1], w is not None)
    assert min(fewest.values()) >= 10, fewest
    if case == "missing_and_weights":  # the same data under "none": the values travel
        open_fed = _fit(
            ff.FedForestRegressor(n_estimators=3, random_state=0, privacy="none"), X, y, h, w
        )
        assert raw_value_exposure(open_fed, X, y) > 0.9


def _form(fed: RecordingFederation) -> list[list[tuple[Any, ...]]]:
    return [
        [
            (name, m.kind, m.header, sorted((k, a.dtype.str, a.shape) for k, a in m.arrays.items()))
            for name, m in sorted(replies.items())
        ]
        for _, replies in fed.rounds
    ]


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
def test_dask_replies_are_local_replies() -> None:
    """A secure fit with a categorical column, missing values and ``oob_score`` over a real
    ``LocalCluster``: the replies' forms and headers are ``LocalFederation``'s round by
    round, the decoded sums cover as many rows, the forest is the same."""
    distributed = pytest.importorskip("distributed")
    from fedforest.transport.dask import DaskFederation

    X, y, h = _data(n_clients=4, n_rows=60, d=5, seed=0, categorical=True, missing=0.1)
    shards = {f"site{k}": (X[h == k].reset_index(drop=True), y[h == k]) for k in range(4)}
    # The levels declared: undeclared, a level some client holds in fewer than m rows
    # counts as missing there, with a warning that stays on the client (pytest's
    # "error" filter reaches the workers and turns it into the client's failure).
    params = {
        "n_estimators": 3,
        "random_state": 0,
        "oob_score": True,
        "categories": {"ward": list("abcdefgh")},
    }
    local = RecordingFederation(ff.LocalFederation([ff.Client(*v, n) for n, v in shards.items()]))
    a = ff.FedForestRegressor(**params).fit_federated(local)
    with (
        loopback_cluster(1) as cluster,
        distributed.Client(cluster) as dask_client,
    ):
        factories = {n: functools.partial(ff.Client, *v, n) for n, v in shards.items()}
        with DaskFederation(factories, client=dask_client, timeout=300) as inner:
            remote = RecordingFederation(inner)
            b = ff.FedForestRegressor(**params).fit_federated(remote)
    assert _form(remote) == _form(local)
    assert raw_value_exposure(remote, X, y) == 0.0
    assert pooled_view(remote, 0) == pooled_view(local, 0)
    assert min(pooled_view(remote, 0).values()) >= 10
    for p, q in zip(a.trees_, b.trees_, strict=True):
        np.testing.assert_array_equal(p.threshold, q.threshold)
        np.testing.assert_array_equal(p.value, q.value)
    assert a.oob_score_ == b.oob_score_


def _odd(case: str) -> tuple[list[list[Any]], dict[str, Any], type]:
    rng = np.random.default_rng(3)
    data: list[list[Any]] = []
    for _ in range(3):
        X = pd.DataFrame(rng.normal(size=(100, 3)), columns=["a", "b", "c"])
        data.append([X, rng.normal(size=100) + 5.0, None])
    est, kw = ff.FedForestRegressor, {}
    first = data[0]
    if case == "nan_target":
        first[1][7] = np.nan
    elif case == "infinite_feature":
        first[0].iloc[3, 1] = np.inf
    elif case == "negative_poisson_target":
        first[1][4] = -1.234567
        kw = {"criterion": "poisson"}
    elif case in ("negative_weight", "nan_weight"):
        first[2] = np.ones(100)
        first[2][5] = -2.5 if case == "negative_weight" else np.nan
    elif case in ("one_row_label", "one_row_label_declared"):
        for d in data:
            d[1] = (d[1] > 5).astype(int)
        first[1][9] = 7
        est = ff.FedForestClassifier
        kw = {"classes": [0, 1]} if case == "one_row_label_declared" else {}
    return data, kw, est


ODD = [
    "nan_target",
    "infinite_feature",
    "negative_poisson_target",
    "negative_weight",
    "nan_weight",
    "one_row_label",
    "one_row_label_declared",
]


@pytest.mark.parametrize("case", ODD)
def test_error_texts_and_warnings_under_odd_data_quote_no_value(case: str) -> None:
    """The text the server raises (or the client's, refused before any round) and every
    warning: no value of the data (``quoted_values``, red's attack), every case refused."""
    data, kw, est = _odd(case)
    values = np.concatenate(
        [np.r_[d[0].to_numpy().ravel(), np.asarray(d[1], float)] for d in data]
        + [d[2] for d in data if d[2] is not None]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError) as info:  # ClientDataError is a ValueError
            clients = [
                ff.Client(d[0], d[1], f"site{k}", sample_weight=d[2]) for k, d in enumerate(data)
            ]
            model = est(n_estimators=3, max_depth=3, random_state=0, **kw)
            model.fit_federated(RecordingFederation(ff.LocalFederation(clients)))
    texts = [str(info.value)] + [str(w.message) for w in caught]
    assert "site0" in texts[0], texts
    for text in texts:
        assert quoted_values(text, values) == [], text
    # The attack reads a value wherever a text prints one (so it can fail).
    planted = float(values[np.isfinite(values) & (np.abs(values) > 0.1)][0])
    assert quoted_values(f"{texts[0]} (value {planted!r})", values) != []
