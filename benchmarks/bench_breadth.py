"""Accuracy across the data users bring: fedforest ``"secure"`` and ``"none"`` against scikit-learn.

Every dataset that ships with scikit-learn (no download), the CSVs shipped in
``fedforest/datasets/data/`` (penguins with its categorical columns, the heart sets) and a
few generated shapes (Friedman #1, 6 classes, a 95/5 imbalance, a heavy-tailed column, a
column of few integer levels, a constant column, 10 % missing values) are split into 5
clients, iid and skewed (classification: Dirichlet(0.5) over the labels; regression: rows
sorted by the first feature), and fitted by ``FedForest*`` under ``privacy="secure"`` and
``"none"`` and scikit-learn's ``RandomForest*`` with the same forest (the estimators'
defaults: 50 trees, depth 8, leaf 5, B = 32, ``max_features`` 1/3 for regression and
``"sqrt"`` for classification; ``--paper`` adds the paper's forest, ``max_features=1/3``,
for the classifiers of a subset). Test score on a held-out quarter (R^2 and MSE, or
accuracy) over several seeds (mean and spread), fit time, and the errors and warnings
raised. A row is flagged when ``"secure"`` is more than 5 % above scikit-learn's or 2 %
above ``"none"``'s MSE, or more than 1 accuracy point plus two standard errors of the
paired difference below either.

    python benchmarks/bench_breadth.py --quick --markdown section.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn import datasets as skdata
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import accuracy_score, mean_squared_error, r2_score
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_forest as bf  # noqa: E402

from fedforest import FedForestClassifier, FedForestRegressor  # noqa: E402
from fedforest.datasets import (  # noqa: E402
    load_panel_dataset,
    partition_dirichlet,
    partition_iid,
    partition_sorted,
)
from fedforest.datasets.real import _read_csv  # noqa: E402

N_CLIENTS = 5
SYSTEMS = ("sklearn", "none", "secure")
#: Datasets whose classifiers are also fitted with the paper's forest under --paper.
PAPER_SUBSET = ("breast-cancer", "wine", "heart-disease", "imbalanced-95-5", "penguins-species")


@dataclass
class Data:
    """One dataset: features (array or frame), targets, task, its categorical columns."""

    name: str
    X: Any
    y: np.ndarray
    task: str  # "regression" or "classification"
    categorical: list[str] = field(default_factory=list)


def _panel(name: str) -> Data:
    d = load_panel_dataset(name)
    if d.site is None:
        return Data(name, d.X, d.y, d.task)
    X = pd.DataFrame(d.X, columns=d.feature_names)
    X["site"] = pd.Categorical(d.site)
    return Data(name, X, d.y, d.task, ["site"])


def _penguins_species() -> Data:
    raw = _read_csv("penguins.csv")
    raw = raw.dropna(subset=["bill_length_mm"])  # two rows with no measurement at all
    X = raw.drop(columns=["species"]).copy()
    for col in ("island", "sex"):  # sex has missing values: a missing category
        X[col] = pd.Categorical(X[col])
    y = np.unique(raw["species"].to_numpy(), return_inverse=True)[1].astype(np.int64)
    return Data("penguins-species", X, y, "classification", ["island", "sex"])


def _linnerud() -> Data:
    X, y = skdata.load_linnerud(return_X_y=True)
    return Data("linnerud (3 outputs)", X, np.asarray(y, dtype=np.float64), "regression")


def _sk(name: str, loader: Callable[..., Any], task: str) -> Callable[[int], Data]:
    def load(_rows: int) -> Data:
        X, y = loader(return_X_y=True)
        return Data(name, X, y, task)

    return load


def _friedman(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = skdata.make_friedman1(
        n, n_features=10, noise=1.0, random_state=int(rng.integers(1 << 31))
    )
    return X, y


def _generated(kind: str) -> Callable[[int], Data]:
    def load(n: int) -> Data:
        rng = np.random.default_rng(12345)
        if kind == "friedman1":
            X, y = _friedman(rng, n)
            return Data(kind, X, y, "regression")
        if kind == "6-classes":
            X, y = skdata.make_classification(
                n, 12, n_informative=6, n_classes=6, n_clusters_per_class=1, random_state=1
            )
            return Data(kind, X, y, "classification")
        if kind == "imbalanced-95-5":
            X, y = skdata.make_classification(
                n * 3 // 2, 10, n_informative=4, weights=[0.95], flip_y=0.0, random_state=2
            )
            return Data(kind, X, y, "classification")
        X, y = _friedman(rng, n)
        if kind == "heavy-tailed":  # a Cauchy column (scale 1e3), y on its arctan
            tail = rng.standard_cauchy(X.shape[0]) * 1e3
            X = np.column_stack([X, tail])
            y = y + 8 * np.arctan(tail / 1e3)
        elif kind == "integer-levels":  # x3 (10 x3 in y) on 4 levels
            X[:, 3] = rng.integers(0, 4, X.shape[0]).astype(np.float64)
            y = y + 3 * X[:, 3]
        elif kind == "constant-column":
            X = np.column_stack([X, np.full(X.shape[0], 7.0)])
        elif kind == "missing-10pc":
            X[rng.random(X.shape) < 0.10] = np.nan
        return Data(kind, X, y, "regression")

    return load


#: name -> loader of the rows (the argument: rows of a generated set, ignored by the others)
LOADERS: dict[str, Callable[[int], Data]] = {
    "diabetes": _sk("diabetes", skdata.load_diabetes, "regression"),
    "breast-cancer": _sk("breast-cancer", skdata.load_breast_cancer, "classification"),
    "wine": _sk("wine", skdata.load_wine, "classification"),
    "iris": _sk("iris", skdata.load_iris, "classification"),
    "digits": _sk("digits", skdata.load_digits, "classification"),
    "linnerud": lambda _rows: _linnerud(),
    "penguins-species": lambda _rows: _penguins_species(),
    "penguins-mass": lambda _rows: _panel("penguins-mass"),
    "heart-disease": lambda _rows: _panel("heart-disease"),
    "heart-failure": lambda _rows: _panel("heart-failure"),
    "heart-attack": lambda _rows: _panel("heart-attack"),
    "cardiovascular": lambda _rows: _panel("cardiovascular"),
    "cvd-risk-score": lambda _rows: _panel("cvd-risk-score"),
    **{
        kind: _generated(kind)
        for kind in (
            "friedman1",
            "6-classes",
            "imbalanced-95-5",
            "heavy-tailed",
            "integer-levels",
            "constant-column",
            "missing-10pc",
        )
    },
}


def clients(data: Data, X_train: Any, y_train: np.ndarray, split: str, seed: int) -> np.ndarray:
    """Client ids of the training rows: iid, or skewed by label / by the first feature."""
    n = y_train.shape[0]
    if split == "iid":
        return partition_iid(n, N_CLIENTS, seed)
    if data.task == "classification":
        return partition_dirichlet(y_train, N_CLIENTS, 0.5, seed)
    first = X_train.iloc[:, 0] if isinstance(X_train, pd.DataFrame) else X_train[:, 0]
    return partition_sorted(np.nan_to_num(np.asarray(first, dtype=np.float64)), N_CLIENTS)


def sklearn_X(X: Any, categorical: list[str]) -> Any:
    """scikit-learn's forest sees categorical columns one-hot (missing as its own level)."""
    if not categorical:
        return X
    return pd.get_dummies(X, columns=categorical, dummy_na=True, dtype=np.float64)


def make(system: str, task: str, forest: str, seed: int, m: int | None = None) -> Any:
    settings: dict[str, Any] = {"random_state": seed, "n_jobs": 2}
    if forest == "paper":
        settings["max_features"] = 1 / 3
    if system == "sklearn":
        ref = (FedForestRegressor if task == "regression" else FedForestClassifier)()
        params = ref.get_params()
        same = {k: params[k] for k in ("n_estimators", "max_depth", "min_samples_leaf")}
        same["max_features"] = params["max_features"]
        same.update(settings)
        cls = RandomForestRegressor if task == "regression" else RandomForestClassifier
        return cls(**same)
    cls_f = FedForestRegressor if task == "regression" else FedForestClassifier
    if system == "secure" and m is not None:
        settings["min_aggregate_rows"] = m
    return cls_f(privacy=system, **settings)


def score(task: str, y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    if task == "regression":
        return {"mse": float(mean_squared_error(y, pred)), "r2": float(r2_score(y, pred))}
    return {"acc": float(accuracy_score(y, pred))}


def run_case(
    data: Data, split: str, forest: str, seed: int, m: int | None
) -> dict[str, dict[str, Any]]:
    """One seed of one (dataset, split, forest): every system's score, time and messages."""
    strat = data.y if data.task == "classification" else None
    X_tr, X_te, y_tr, y_te = train_test_split(
        data.X, data.y, test_size=0.25, random_state=seed, stratify=strat
    )
    h = clients(data, X_tr, y_tr, split, seed)
    out: dict[str, dict[str, Any]] = {}
    for system in SYSTEMS:
        model = make(system, data.task, forest, seed, m)
        rec: dict[str, Any] = {"warnings": [], "error": None}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                t0 = time.perf_counter()
                if system == "sklearn":
                    Xs_tr, Xs_te = X_tr, X_te
                    if data.categorical:
                        both = sklearn_X(pd.concat([X_tr, X_te]), data.categorical)
                        Xs_tr, Xs_te = both.iloc[: len(y_tr)], both.iloc[len(y_tr) :]
                    model.fit(Xs_tr, y_tr)
                    rec["time"] = time.perf_counter() - t0
                    pred = model.predict(Xs_te)
                else:
                    kw = {"categorical_features": data.categorical} if data.categorical else {}
                    model.set_params(**kw)
                    model.fit(X_tr, y_tr, client_ids=h)
                    rec["time"] = time.perf_counter() - t0
                    pred = model.predict(X_te)
                rec.update(score(data.task, y_te, pred))
            except Exception as exc:  # a benchmark reports what fails, it does not stop
                rec["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        rec["warnings"] = sorted(
            {f"{w.category.__name__}: {str(w.message).splitlines()[0][:120]}" for w in caught}
        )
        out[system] = rec
    return out


def _stats(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(
    name: str, task: str, split: str, forest: str, runs: list[dict[str, Any]]
) -> dict[str, Any]:
    """Mean and spread over seeds; ratios and paired differences; the flag."""
    key = "mse" if task == "regression" else "acc"
    row: dict[str, Any] = {"dataset": name, "split": split, "forest": forest, "task": task}
    ok = [r for r in runs if all(r[s]["error"] is None for s in SYSTEMS)]
    for s in SYSTEMS:
        vals = [r[s][key] for r in ok]
        row[s] = _stats(vals)
        row[f"{s}_time"] = statistics.fmean([r[s]["time"] for r in ok]) if ok else float("nan")
        if task == "regression":
            row[f"{s}_r2"] = _stats([r[s]["r2"] for r in ok])[0]
    row["errors"] = sorted(
        {f"{s}: {r[s]['error']}" for r in runs for s in SYSTEMS if r[s]["error"]}
    )
    row["warnings"] = sorted({f"{s}: {w}" for r in runs for s in SYSTEMS for w in r[s]["warnings"]})
    row["seeds_ok"] = len(ok)
    flags = []
    if ok:
        for ref, cap in (("sklearn", 1.05), ("none", 1.02)):
            if task == "regression":
                ratio = row["secure"][0] / row[ref][0]
                row[f"vs_{ref}"] = ratio
                if ratio > cap:
                    flags.append(f"MSE {ratio:.3f}x {ref}")
            else:
                diffs = [r["secure"][key] - r[ref][key] for r in ok]
                mean, sd = _stats(diffs)
                se = sd / np.sqrt(len(diffs))
                row[f"vs_{ref}"] = mean
                if mean < -(0.01 + 2 * se):
                    flags.append(f"acc {100 * mean:+.1f} pt vs {ref}")
    if row["errors"]:
        flags.append("error")
    row["flags"] = flags
    return row


HEADER = (
    "| dataset | split | forest | seeds | scikit-learn | none | secure | secure vs sk "
    "| secure vs none | time secure / sk | flag |"
)


def _cell(r: dict[str, Any], system: str) -> str:
    mean, sd = r[system]
    if np.isnan(mean):
        return "-"
    if r["task"] == "regression":
        return f"{mean:.4g} ± {sd:.2g} (R² {r[f'{system}_r2']:.3f})"
    return f"{mean:.3f} ± {sd:.3f}"


def _vs(r: dict[str, Any], ref: str) -> str:
    v = r.get(f"vs_{ref}")
    if v is None:
        return "-"
    return f"{v:.3f}x" if r["task"] == "regression" else f"{100 * v:+.1f} pt"


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [HEADER, "| --- " * 11 + "|"]
    for r in rows:
        t = r["secure_time"] / r["sklearn_time"] if r["seeds_ok"] else float("nan")
        first = f"| {r['dataset']} | {r['split']} | {r['forest']} | {r['seeds_ok']} "
        lines.append(
            f"{first}| {_cell(r, 'sklearn')} | {_cell(r, 'none')} | {_cell(r, 'secure')} "
            f"| {_vs(r, 'sklearn')} | {_vs(r, 'none')} | {t:.1f} | {'; '.join(r['flags'])} |"
        )
    return lines


def notes(rows: list[dict[str, Any]]) -> list[str]:
    """Errors and warnings, one line per message text (client names and counts left out)."""
    seen: dict[str, set[str]] = {}
    for r in rows:
        for text in r["errors"] + r["warnings"]:
            text = re.sub(r"\d+ row\(s\)", "n row(s)", re.sub(r"Client '[^']*': ", "", text))
            seen.setdefault(text, set()).add(f"{r['dataset']} {r['split']}")
    return [f"- {', '.join(sorted(where))}: {text}" for text, where in sorted(seen.items())]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0, 1, 2, 3, 4],
        help="seeds of the split and forests",
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 seeds (0 1 2): about 10 minutes on 2 cores"
    )
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=None,
        choices=list(LOADERS),
        help="datasets to run (None: all of them)",
    )
    parser.add_argument(
        "--splits",
        nargs="+",
        default=["iid", "skewed"],
        choices=["iid", "skewed"],
        help="client splits",
    )
    parser.add_argument(
        "--rows", type=int, default=1000, help="rows of the generated sets (95/5: 1.5 times)"
    )
    parser.add_argument(
        "--min-aggregate-rows",
        type=int,
        default=None,
        help="secure's min_aggregate_rows (default: the estimators' own, max(10, 2 * leaf))",
    )
    parser.add_argument(
        "--paper",
        action="store_true",
        help="also the paper's forest (max_features=1/3) for the classifiers of a subset",
    )
    parser.add_argument(
        "--markdown", type=Path, default=None, help="write the run as a Markdown section here"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    seeds = [0, 1, 2] if args.quick else args.seeds
    command = "python benchmarks/bench_breadth.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    start = dt.datetime.now(dt.UTC)
    warm = _generated("friedman1")(1000)  # compile or load the kernels outside the timings
    for task, y in (("regression", warm.y), ("classification", (warm.y > 14).astype(int))):
        for system in ("none", "secure"):
            make(system, task, "default", 0).fit(
                warm.X[:300], y[:300], client_ids=np.arange(300) % 5
            )
    rows = []
    for name in args.datasets or list(LOADERS):
        data = LOADERS[name](args.rows)
        forests = ["default"]
        if args.paper and name in PAPER_SUBSET and data.task == "classification":
            forests.append("paper")
        for forest in forests:
            for split in args.splits:
                runs = [
                    run_case(data, split, forest, seed, args.min_aggregate_rows) for seed in seeds
                ]
                row = summarise(data.name, data.task, split, forest, runs)
                rows.append(row)
                print(table([row])[-1], flush=True)
    end = dt.datetime.now(dt.UTC)
    machine = bf.machine_info()
    src = machine["fedforest_source"]
    head = [
        f"### Accuracy across datasets ({start:%Y-%m-%d}, "
        f"commit `{src.get('git_commit', '?')[:12]}`"
        + (" + uncommitted changes" if src.get("git_dirty") else "")
        + ")",
        "",
        f"`{command}`, from {start:%H:%M} to {end:%H:%M} UTC on {machine['cpu']}, "
        f"{machine['usable_cores']} cores; load average at the end "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; seeds {' '.join(map(str, seeds))}; "
        f"{N_CLIENTS} clients; a held-out quarter. Regression: test MSE mean ± sd (R²), "
        "ratios of mean MSE; classification: accuracy, mean paired difference in points. "
        "Times: mean fit seconds, secure over scikit-learn (n_jobs=2 each).",
        "",
    ]
    text = "\n".join(
        head + table(rows) + ["", "Errors and warnings:", ""] + (notes(rows) or ["- none"])
    )
    print()
    print(text)
    if args.markdown is not None:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
