"""Red team 16: random federations and settings a user could bring, the union attack on each.

:func:`draw` makes one seeded federation and estimator: 2 to 30 clients of 1 to 500 rows
(skewed; often one client of 1 to 3 rows beside large ones, sometimes rows copied from one
client to another), 1 to 30 features of mixed kinds (:data:`KINDS`), a target of one of
:data:`TARGETS` and settings drawn from what the brief lists (``max_depth=None``,
``min_samples_leaf=1``, ``n_bins`` 8 to 255, ``max_features``, ``split_on_client``,
``class_weight``, ``sample_weight``, ``oob_score``, ``max_samples``). :func:`fuzz_fit` fits
it once through the suite's recording server and runs every single-fit attack of the suite
on the recording and the model (``tests/_attack_union.py``); a row is rebuilt when some
attack gives its exact target and some attack one exact feature value of it.

The isolation attacks (``ancestor``, ``interval``) get the in-bag rows from each client's
own draws (the set-up's ``draws`` for ``max_samples``, the bound secret) and the columns
from each client's ``Xt``; since red team 17 the suite's ``_in_bag_weights`` and
``client_values`` give the same (``tests/test_privacy_red17.py`` checks it).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

import fedforest as ff
from fedforest.federated.client_bootstrap import bootstrap_counts
from tests._attack_union import all_claims, union
from tests.test_privacy import _fit, _members, ancestor_exposure
from tests.test_privacy_combinations import interval_exposure

KINDS = (
    "continuous",
    "integer",  # few levels
    "binary",
    "tie",  # most rows at one value
    "outlier",  # a few rows at 1e9
    "missing",  # continuous, a value missing here and there
    "cat_rare",  # pandas categorical, a level of 1 to 3 rows
    "cat_many",  # pandas categorical, 40 to 120 levels
    "one_off",  # constant but for one row
    "row_id",
)
REGRESSION = ("continuous", "counts", "zero_inflated", "feature")
CLASSIFICATION = ("binary", "rare_class", "text")
TARGETS = REGRESSION + CLASSIFICATION


def _sizes(rng: np.random.Generator) -> list[int]:
    k = int(rng.integers(2, 31))
    sizes = np.clip(np.round(np.exp(rng.uniform(np.log(1), np.log(500), size=k))), 1, 500)
    if rng.random() < 0.6:  # one tiny client beside large ones
        sizes[0] = int(rng.integers(1, 4))
        sizes[1:] = np.maximum(sizes[1:], rng.integers(100, 501, size=k - 1))
    return [int(s) for s in sizes]


def _column(kind: str, n: int, rng: np.random.Generator) -> Any:
    if kind == "continuous":
        return rng.normal(size=n) * 10.0 ** rng.integers(-2, 4)
    if kind == "integer":
        return rng.integers(0, int(rng.integers(2, 11)), size=n).astype(np.float64)
    if kind == "binary":
        return (rng.random(n) < rng.uniform(0.02, 0.5)).astype(np.float64)
    if kind == "tie":
        x = rng.normal(size=n)
        x[rng.random(n) < rng.uniform(0.5, 0.95)] = 0.0
        return x
    if kind == "outlier":
        x = rng.normal(size=n)
        x[rng.choice(n, size=min(n, int(rng.integers(1, 4))), replace=False)] = 1e9
        return x
    if kind == "missing":
        x = rng.normal(size=n)
        x[rng.random(n) < rng.uniform(0.005, 0.1)] = np.nan
        return x
    if kind == "cat_rare":
        levels = [f"l{i}" for i in range(int(rng.integers(2, 6)))] + ["rare"]
        codes = rng.integers(0, len(levels) - 1, size=n)
        codes[rng.choice(n, size=min(n, int(rng.integers(1, 4))), replace=False)] = len(levels) - 1
        return pd.Categorical.from_codes(codes, categories=levels)
    if kind == "cat_many":
        levels = [f"v{i}" for i in range(int(rng.integers(40, 121)))]
        return pd.Categorical.from_codes(rng.integers(0, len(levels), size=n), categories=levels)
    if kind == "one_off":
        x = np.full(n, 3.0)
        x[int(rng.integers(n))] = 7.5
        return x
    assert kind == "row_id", kind
    return np.arange(n, dtype=np.float64)


def _target(kind: str, X: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    n = len(X)
    numeric = [c for c in X.columns if X[c].dtype.kind == "f"]
    signal = np.zeros(n)
    for c in numeric[:3]:
        v = np.nan_to_num(X[c].to_numpy(dtype=np.float64), nan=0.0)
        signal += np.tanh((v - np.median(v)) / (np.std(v) + 1e-12))
    noisy = signal + rng.normal(scale=0.5, size=n)
    if kind == "continuous":
        return noisy
    if kind == "counts":
        return rng.poisson(np.exp(0.5 * signal)).astype(np.float64)
    if kind == "zero_inflated":
        return np.where(rng.random(n) < 0.7, 0.0, np.exp(noisy))
    if kind == "feature":  # the target is a feature's values (missing ones filled)
        return np.nan_to_num(X[numeric[0]].to_numpy(dtype=np.float64), nan=0.0)
    if kind == "binary":
        return (noisy > np.median(noisy)).astype(np.float64)
    if kind == "rare_class":
        y = np.digitize(noisy, np.quantile(noisy, [1 / 3, 2 / 3])).astype(np.float64)
        y[rng.choice(n, size=int(rng.integers(1, 4)), replace=False)] = 3.0
        return y
    assert kind == "text", kind
    names = np.array(["low", "mid", "high"])
    return names[np.digitize(noisy, np.quantile(noisy, [1 / 3, 2 / 3]))]


def draw(seed: int) -> dict[str, Any]:
    """One federation and estimator of the fuzz, from ``seed`` alone."""
    rng = np.random.default_rng(seed)
    sizes = _sizes(rng)
    n, d = sum(sizes), int(rng.integers(1, 31))
    kinds = [str(k) for k in rng.choice(KINDS, size=d)]
    X = pd.DataFrame({f"f{j}_{k}": _column(k, n, rng) for j, k in enumerate(kinds)})
    h = np.repeat(np.arange(len(sizes)), sizes)
    duplicated = 0
    if len(sizes) > 2 and rng.random() < 0.3:  # rows of client 1 copied into client 2
        src = np.flatnonzero(h == 1)[: int(rng.integers(1, 20))]
        dst = np.flatnonzero(h == 2)[: src.size]
        X.iloc[dst] = X.iloc[src[: dst.size]].to_numpy()
        duplicated = int(dst.size)
    target = str(rng.choice(TARGETS))
    if target == "feature" and not any(X[c].dtype.kind == "f" for c in X.columns):
        target = "continuous"
    y = _target(target, X, rng)
    if duplicated:
        y[dst] = y[src[: dst.size]]
    classification = target in CLASSIFICATION
    kw: dict[str, Any] = {
        "n_estimators": int(rng.integers(2, 7)),  # few: a draw is one fit of a minute at most
        "max_depth": [None, 4, 8, 12][int(rng.integers(4))],
        "min_samples_leaf": [1, 2, 5][int(rng.integers(3))],
        "n_bins": int(rng.integers(8, 256)),
        "max_features": [None, "sqrt", 0.3, 1 / 3][int(rng.integers(4))],
        "random_state": seed,
    }
    if rng.random() < 0.1:
        kw["split_on_client"] = True
    if rng.random() < 0.3:
        kw["oob_score"] = True
    if rng.random() < 0.25:
        kw["max_samples"] = float(rng.uniform(0.3, 0.9))
    if classification and rng.random() < 0.4:
        kw["class_weight"] = ["balanced", "balanced_subsample"][int(rng.integers(2))]
    if target == "counts" and rng.random() < 0.5:
        kw["criterion"] = "poisson"
    weights = rng.uniform(0.5, 3.0, size=n) if rng.random() < 0.25 else None
    return {
        "seed": seed,
        "X": X,
        "y": y,
        "h": h,
        "sample_weight": weights,
        "classification": classification,
        "settings": kw,
        "describe": (
            f"seed {seed}: {len(sizes)} clients, rows {min(sizes)}..{max(sizes)} ({n}), "
            f"{d} features [{', '.join(sorted(set(kinds)))}], target {target}"
            + (f", {duplicated} rows duplicated" if duplicated else "")
            + (", sample_weight" if weights is not None else "")
            + f"; {kw}"
        ),
    }


def add_draw_options(parser: argparse.ArgumentParser) -> None:
    """A benchmark's choice of draws: ``--seeds``, else ``--draws`` from ``--first``."""
    parser.add_argument("--seeds", type=int, nargs="*", default=None, help="draws to run")
    parser.add_argument("--draws", type=int, default=10, help="without --seeds: how many draws")
    parser.add_argument("--first", type=int, default=0, help="without --seeds: the first seed")


def chosen_draws(args: argparse.Namespace) -> Iterator[tuple[int, dict[str, Any]]]:
    """Print the command line and the load, then each draw of :func:`add_draw_options`'
    options with its seed."""
    seeds = args.seeds if args.seeds else list(range(args.first, args.first + args.draws))
    print("command: python " + " ".join(sys.argv), f"| load {os.getloadavg()}", flush=True)
    for seed in seeds:
        yield seed, draw(seed)


def draw_clients(case: dict[str, Any]) -> list[ff.Client]:
    """A draw's clients (one per site of ``case["h"]``), as the benchmarks fit them."""
    X, y, h, sw = case["X"], np.asarray(case["y"]), case["h"], case["sample_weight"]
    return [
        ff.Client(
            X[h == k].reset_index(drop=True),
            y[h == k],
            f"site{k}",
            sample_weight=None if sw is None else sw[h == k],
        )
        for k in np.unique(h)
    ]


def refusal(exc: Exception, width: int = 200) -> str:
    """An estimator's refusal as printed: its type and the first ``width`` characters of its
    first line."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:width]}"


def _in_bag(fed: Any, h: np.ndarray, n_trees: int) -> np.ndarray:
    """Every tree's bootstrap count of every row, as each client drew it: the set-up
    request's seed and draws (``max_samples``), the client's bound secret."""
    setup = next(
        q.header["setup"] for requests, _ in fed.rounds for q in requests.values()
        if isinstance(q.header.get("setup"), dict) and "seed" in q.header["setup"]
    )  # fmt: skip
    w = np.zeros((n_trees, len(h)))
    for k, (name, client) in enumerate(fed.clients.items()):
        n = int((h == k).sum())
        draws = int(setup.get("draws", {}).get(name, n))
        secret = client._secure.bootstrap_secret() if client._secure is not None else None
        for t in range(n_trees):
            w[t, h == k] = bootstrap_counts(int(setup["seed"]), t, name, n, secret, draws)
    return w


def _isolation_claims(fed: Any, model: Any, X: pd.DataFrame, h: np.ndarray) -> dict | None:
    """The ``ancestor`` and ``interval`` attacks (secure): the rows they single out.

    The rows are routed by the columns as the clients encoded them (``Client.Xt``); None
    if that routing does not give every node its row count.
    """
    # The columns as each client's kernels hold them (category codes after the level
    # rule, missing values as +inf), in the frame's row order.
    values = np.concatenate([c.Xt[:-1].T for c in fed.clients.values()])
    coded = pd.DataFrame(values, columns=X.columns)
    w = _in_bag(fed, h, len(model.trees_))
    member = _members(model, values, w)
    for t, tree in enumerate(model.trees_):
        if not all(r.size == tree.n_node_samples[nd] for nd, r in member[t].items()):
            return None  # rows of undeclared rare levels travel as missing: not routed here
    m = max(10, 2 * model.min_samples_leaf)
    out, none = {}, np.zeros(len(h), dtype=bool)
    for name, attack in (("ancestor", ancestor_exposure), ("interval", interval_exposure)):
        alone: set[int] = set()
        attack(fed, model, coded, w, m, alone)
        mask = none.copy()
        mask[list(alone)] = True
        out[name] = (mask, none)
    return out


def fuzz_fit(
    case: dict[str, Any], privacy: str, slow: bool = False, declare: bool = False
) -> dict[str, Any]:
    """Fit ``case`` (from :func:`draw`) under ``privacy`` on the recording server; the
    union's shares and each attack's (target, feature) counts, or ``{"refused": text}``.

    ``declare``: a classifier is given its labels (``classes=``), as the refusal of a
    label fewer than ``m`` rows of any client hold asks.
    """
    X, y, h = case["X"], case["y"], case["h"]
    kw = {**case["settings"], "privacy": privacy}
    if declare and case["classification"]:
        kw["classes"] = np.unique(y).tolist()
    kind = ff.FedForestClassifier if case["classification"] else ff.FedForestRegressor
    model: Any = kind(**kw)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fed = _fit(model, X, y, h, case["sample_weight"])
    except (ValueError, TypeError) as exc:
        return {"refused": refusal(exc)}
    fit_s = time.perf_counter() - start
    shim = model
    if case["classification"]:  # labels as their indices (text labels included)
        shim = copy.copy(model)
        shim.classes_ = np.arange(len(model.classes_), dtype=np.float64)
        y = np.searchsorted(model.classes_, y).astype(np.float64)
    y = np.asarray(y, dtype=np.float64)
    claims = all_claims(fed, shim, X, y, h, slow=False)  # linked at the draw's n_bins
    isolation = "not run"
    if slow and privacy == "secure":
        found = _isolation_claims(fed, model, X, h)
        isolation = "skipped (routing)" if found is None else "run"
        claims.update(found or {})
    counts = {k: (int(t.sum()), int(f.sum())) for k, (t, f) in claims.items()}
    return {**union(claims), "attacks": counts, "n": len(y), "fit_s": fit_s, "isolation": isolation}
