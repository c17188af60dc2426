"""Every single-fit attack of the suite on one recording, united as one adversary would.

A row counts as rebuilt when ANY attack claims its exact target and ANY attack (the same
or another) claims one exact feature value of that same row. The attacks are the suite's
own (imported, not copied); each gives per training row a target claim, a feature claim,
or both:

- ``raw``: a float in some reply equal to the row's target / a feature value
  (:func:`tests.test_privacy.raw_value_rows`; for a classifier the target side is left
  out: a label in a reply names no row);
- ``linked``: a one-row node summary linked to its sketches (target and values);
- ``leaves``: a leaf's value equal to the target (to 1e-9; at 1e-6 some of 10,000 leaf
  values fall that near a target of 2,000 by chance; regressor);
- ``node_values``: ``E[y^2] / E[y]`` of the model's nodes, found in two trees (regressor);
- ``pooled_values``: the same from the masked sums the server decodes (secure regressor);
- ``nested``: one node inside another of another tree with one row more, the difference
  of their sums (red teams 6 and 13; regressor);
- ``ancestor``, ``interval``, ``category``: masked sums whose differencing isolates one
  row (secure; the test knows the in-bag rows: an upper bound on what the server can
  single out);
- ``class_groups``: a class's leaf boxes intersected until one training row is left
  (red team 13; classifier): that row's label;
- ``thresholds``: a split threshold equal to a training value of its column (every row
  holding that value).
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

import fedforest as ff
from tests.test_privacy import (
    RecordingFederation,
    _data,
    _fit,
    _in_bag_weights,
    _members,
    ancestor_exposure,
    category_exposure,
    client_values,
    linked_row_mask,
    raw_value_rows,
)
from tests.test_privacy_combinations import interval_exposure
from tests.test_privacy_red6 import nested_differences
from tests.test_privacy_red13 import class_groups
from tests.test_privacy_values import claimed_rows, node_values, pooled_values

PAPER = {"n_estimators": 50, "max_depth": 8, "min_samples_leaf": 5, "n_bins": 32}

Claims = dict[str, tuple[np.ndarray, np.ndarray]]


def _rows(n: int, found: set[int] | np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[list(found) if isinstance(found, set) else found] = True
    return mask


def threshold_rows(model: Any, X: pd.DataFrame) -> np.ndarray:
    """Rows holding, in some numeric column, a value the model splits that column at."""
    hit = np.zeros(len(X), dtype=bool)
    for j in range(X.shape[1]):
        if not pd.api.types.is_numeric_dtype(X.dtypes.iloc[j]):
            continue
        cuts = np.concatenate(
            [t.threshold[(t.children_left >= 0) & (t.feature == j)] for t in model.trees_]
        )
        hit |= np.isin(X.iloc[:, j].to_numpy(dtype=np.float64), cuts)
    return hit


def nested_rows(model: Any, d: int, y: np.ndarray) -> np.ndarray:
    """Rows whose exact target (to 1e-6, one row) a one-row nested difference claims
    (``d``: the columns the trees split on, the client index H last if they do)."""
    trees, hit = model.trees_, np.zeros(len(y), dtype=bool)
    for a in range(len(trees)):
        for b in range(a + 1, len(trees)):
            for between, target in nested_differences(trees[a], trees[b], d):
                match = np.flatnonzero(np.abs(y - target) < 1e-6) if between == 1 else []
                if len(match) == 1:
                    hit[match[0]] = True
    return hit


def class_group_rows(model: Any, V: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Rows alone in a class's group box (red team 13) whose label is that class (``V``:
    the columns the trees split on, categories as codes, the client index H last)."""
    hit = np.zeros(len(y), dtype=bool)
    for c, label in enumerate(model.classes_):
        for lo, hi in class_groups(model, V.shape[1], c):
            inside = np.flatnonzero(np.all((V > lo) & (V <= hi), axis=1))
            if inside.size == 1 and y[inside[0]] == label:
                hit[inside[0]] = True
    return hit


def all_claims(
    fed: RecordingFederation,
    model: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    h: np.ndarray,
    slow: bool = True,
) -> Claims:
    """Every attack's (target, feature) claims on one recording and its model.

    ``slow=False`` leaves out the isolation attacks (``ancestor``, ``interval``,
    ``category``) and ``nested``, which cost minutes at the paper's 50 trees.
    """
    n, none = len(y), np.zeros(len(y), dtype=bool)
    regression = isinstance(model, ff.FedForestRegressor)
    secure = model.privacy == "secure"
    # The suite's model attacks read ``estimators_``, which a forest with category or
    # client splits cannot convert to: the same trees, as they read them.
    shim = SimpleNamespace(estimators_=[SimpleNamespace(tree_=t) for t in model.trees_],
                           classes_=getattr(model, "classes_", None))  # fmt: skip
    # The columns as the clients route them (a rare level as missing, merged codes,
    # missing values as +inf; the client index H last when the trees split on it).
    coded = pd.DataFrame(client_values(fed, X, h), columns=X.columns)
    V = client_values(fed, X, h, split_on_client=getattr(model, "split_on_client", False))
    out: Claims = {}
    target, feature = raw_value_rows(fed, X, y)
    out["raw"] = (target if regression else none, feature)
    # At the fit's n_bins (a sketch is n_bins values a feature).
    classes = None if regression else model.classes_
    linked = linked_row_mask(fed, X, y, h, n_bins=model.n_bins, classes=classes)
    out["linked"] = (linked, linked)
    out["thresholds"] = (none, threshold_rows(model, X))
    if regression:
        leaves = np.concatenate(
            [e.tree_.value[e.tree_.children_left == -1].ravel() for e in shim.estimators_]
        )
        gap = np.abs(y[:, None] - leaves[None, :]).min(axis=1)
        out["leaves"] = (gap <= 1e-9 * np.abs(y), none)  # 1e-6: chance hits
        out["node_values"] = (claimed_rows(node_values(shim), y), none)
        if secure:
            out["pooled_values"] = (claimed_rows(pooled_values(fed, whole=False), y), none)
    else:
        out["class_groups"] = (class_group_rows(shim, V, y), none)
    if not slow:
        return out
    if regression:
        out["nested"] = (nested_rows(model, V.shape[1], y), none)
    if secure:  # they decode the masked sums (under "none" every reply is plain: ``raw``)
        clients = list(fed.clients.values())
        w = _in_bag_weights(model, clients, h, len(model.trees_), model.random_state)
        m = max(10, 2 * model.min_samples_leaf)
        member = _members(model, V, w)  # the test's routing
        for t, tree in enumerate(model.trees_):
            assert all(r.size == tree.n_node_samples[nd] for nd, r in member[t].items()), t
        for name, attack in (("ancestor", ancestor_exposure), ("interval", interval_exposure)):
            alone: set[int] = set()
            attack(fed, model, coded, w, m, alone)
            out[name] = (_rows(n, alone), none)
        if "ward" in X:
            alone = set()
            category_exposure(fed, model, X, w, m, "ward", alone, V)
            out["category"] = (_rows(n, alone), none)
    return out


def union(claims: Claims) -> dict[str, float]:
    """Shares of the rows: exact target, exact feature value, both (the union's rebuilt
    rows), both within one attack, and rebuilt only by linking attacks."""
    target = np.any([t for t, _ in claims.values()], axis=0)
    feature = np.any([f for _, f in claims.values()], axis=0)
    single = np.any([t & f for t, f in claims.values()], axis=0)
    rebuilt = target & feature
    return {
        "target": float(target.mean()),
        "feature": float(feature.mean()),
        "rebuilt": float(rebuilt.mean()),
        "one_attack": float(single.mean()),
        "linked_only": float((rebuilt & ~single).mean()),
    }


#: :func:`union`'s shares, in the order the benchmarks print them.
SHARES = ("target", "feature", "rebuilt", "one_attack", "linked_only")


def add_privacy_option(parser: argparse.ArgumentParser) -> None:
    """A benchmark's ``--privacy``: the levels it fits (``"none"`` the control)."""
    parser.add_argument(
        "--privacy",
        nargs="+",
        default=["secure", "none"],
        choices=["secure", "none"],
        help="privacy levels fitted (none: the control, where the attacks find rows)",
    )


def shares(got: dict[str, Any], keys: Sequence[str] = SHARES) -> str:
    """The shares ``keys`` of a fit's union (``got``) as printed: ``target 1.25% ...``."""
    return " ".join(f"{k} {100 * got[k]:.2f}%" for k in keys)


@dataclass
class Tally:
    """Per privacy level, the most rows a fit's union rebuilt and how many fits rebuilt any."""

    worst: dict[str, float] = field(default_factory=dict)
    found: dict[str, int] = field(default_factory=dict)

    def add(self, privacy: str, got: dict[str, Any]) -> None:
        self.worst[privacy] = max(self.worst.get(privacy, 0.0), got["rebuilt"])
        self.found[privacy] = self.found.get(privacy, 0) + (got["rebuilt"] > 0)


def with_rare_level(X: pd.DataFrame) -> pd.DataFrame:
    """The suite's category column ``ward`` with a level 3 rows hold (rows 3 and 17 of the
    first client, 140 of the second) and 2 missing values (rows 5 and 250)."""
    X = X.copy()
    X["ward"] = X["ward"].cat.add_categories(["rare"])
    X.loc[[3, 17, 140], "ward"] = "rare"
    X.loc[[5, 250], "ward"] = np.nan
    return X


def union_fit(
    task: str,
    variant: str,
    privacy: str,
    seed: int,
    settings: dict | None = None,
    n_rows: int = 200,
    d: int = 20,
    slow: bool = True,
) -> dict[str, Any]:
    """One recording fit of the issue's grid and every attack on it, united.

    ``variant``: ``"plain"``, ``"split_on_client"``, ``"categorical"`` (a column of 8
    categories) or ``"rare_level"`` (the same column, a ninth level 3 rows of two clients
    hold, 2 values missing: :func:`with_rare_level`). Returns :func:`union`'s shares and
    each attack's (target, feature) row counts, or ``{"refused": message}`` where the
    estimator refuses the settings.
    """
    categorical = variant in ("categorical", "rare_level")
    X, y, h = _data(n_rows=n_rows, d=d, seed=seed, categorical=categorical)
    if variant == "rare_level":
        X = with_rare_level(X)
    kw = {"random_state": seed, "privacy": privacy, **(settings or {})}
    if variant == "split_on_client":
        kw["split_on_client"] = True
    if task == "classification":
        y = (y > np.median(y)).astype(float)
        model: Any = ff.FedForestClassifier(**kw)
    else:
        model = ff.FedForestRegressor(**kw)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fed = _fit(model, X, y, h)
    except ValueError as exc:
        return {"refused": str(exc).split("\n")[0][:120]}
    y = np.asarray(y, dtype=np.float64)
    claims = all_claims(fed, model, X, y, h, slow)
    counts = {k: (int(t.sum()), int(f.sum())) for k, (t, f) in claims.items()}
    return {**union(claims), "attacks": counts}
