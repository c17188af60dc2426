"""Multi-output and Poisson forests under privacy="secure" against "none".

The data of ``tests/test_secure_targets.py``: three outputs of different scales
(Friedman's, ``100 + 10 x0 x1 + x5``, ``5 sin(6 x2)``; test MSE averaged over the outputs)
and Poisson counts with rate ``exp(0.5 x0 - 0.7 x1 - 0.5)`` (test deviance against the
true rates); and of ``tests/test_secure_multi_output_classification.py``: three label
columns of 2, 3 and 2 classes (test error: 1 - subset accuracy). Training rows in 5
clients, as many test rows. Per seed and setting the
ratio of ``"secure"`` to ``"none"``: at the defaults (``"none"`` with its local candidates
and leaves of 5, ``"secure"`` with ``min_aggregate_rows=10``) and under the same rules
(``min_aggregate_rows=1`` against ``"none"`` without local candidates), with the secure
fit's time and megabytes; for multi-output also the three outputs fitted one by one.
``--rules`` adds two rows that split the defaults' cost: ``leaves of m`` (``"secure"`` at
the defaults against ``"none"`` without local candidates and ``min_samples_leaf=10``,
secure's leaf floor) and ``none, leaves of m`` (``"none"`` with that floor against
``"none"`` without it: what the floor alone costs); the table then gives the per-seed
mean and standard error of (one forest's ratio) - (the outputs' one by one).

Usage::

    python benchmarks/bench_secure_targets.py [--rows 3000] [--seeds 3] [--trees 40]
        [--targets multi-output poisson multi-output-classification]
        [--rules defaults "same rules" "leaves of m" "none, leaves of m"]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

try:  # running from a checkout without ``pip install -e .``
    import fedforest  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "fedforest":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.datasets import make_friedman1
from sklearn.metrics import mean_poisson_deviance, mean_squared_error

import fedforest as ff

#: Per row, the reference's settings and the measured forest's (each with its privacy).
RULES: dict[str, tuple[dict, dict]] = {
    "defaults": ({"privacy": "none"}, {"privacy": "secure"}),
    "same rules": (
        {"privacy": "none", "local_candidates": False},
        {"privacy": "secure", "min_aggregate_rows": 1},
    ),
    "leaves of m": (
        {"privacy": "none", "local_candidates": False, "min_samples_leaf": 10},
        {"privacy": "secure"},
    ),
    "none, leaves of m": (
        {"privacy": "none", "local_candidates": False},
        {"privacy": "none", "local_candidates": False, "min_samples_leaf": 10},
    ),
}


def outputs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_friedman1(n_samples=n, noise=1.0, random_state=seed)
    return X, np.column_stack([y, 100 + 10 * X[:, 0] * X[:, 1] + X[:, 5], 5 * np.sin(6 * X[:, 2])])


def counts(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    rate = np.exp(0.5 * X[:, 0] - 0.7 * X[:, 1] - 0.5)
    return X, rng.poisson(rate).astype(float), rate


def labels(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Three label columns (2, 3 and 2 classes) of five normal features, with noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    Y = np.column_stack(
        [
            np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, "y", "n"),
            np.array(["lo", "mid", "hi"])[
                np.digitize(X[:, 1] + X[:, 2] + 0.3 * rng.normal(size=n), [-0.5, 0.5])
            ],
            np.where(X[:, 3] * X[:, 0] + 0.3 * rng.normal(size=n) > 0, "a", "b"),
        ]
    )
    return X, Y


def classify(rows: int, seed: int, kw: dict) -> tuple:
    """Multi-output classification: (1 - subset accuracy, the outputs' mean error alone, ...)."""
    cid = np.random.default_rng(seed).integers(0, 5, rows)
    X_all, Y_all = labels(2 * rows, 30 + seed)
    X, Y, X_test, Y_test = X_all[:rows], Y_all[:rows], X_all[rows:], Y_all[rows:]
    model = ff.FedForestClassifier(**kw)
    start = time.perf_counter()
    model.fit(X, Y, client_ids=cid)
    seconds = time.perf_counter() - start
    err = 1.0 - float(np.mean(np.all(model.predict(X_test) == Y_test, axis=1)))
    one = [ff.FedForestClassifier(**kw).fit(X, Y[:, o], client_ids=cid) for o in range(3)]
    each = float(np.mean([1.0 - m.score(X_test, Y_test[:, o]) for o, m in enumerate(one)]))
    return err, each, seconds, model.communication_.total_megabytes


def score(target: str, rows: int, seed: int, trees: int, rules: dict) -> tuple:
    """(test error, one-output-at-a-time error or NaN, fit seconds, megabytes)."""
    cid = np.random.default_rng(seed).integers(0, 5, rows)
    kw = {"random_state": seed, "n_estimators": trees, **rules}
    if target == "multi-output-classification":
        return classify(rows, seed, kw)
    if target == "poisson":
        X, y, _ = counts(rows, 10 + seed)
        X_test, _, rate = counts(rows, 20 + seed)
        model = ff.FedForestRegressor(criterion="poisson", **kw)
        start = time.perf_counter()
        model.fit(X, y, client_ids=cid)
        seconds = time.perf_counter() - start
        err, each = mean_poisson_deviance(rate, model.predict(X_test)), float("nan")
    else:
        X_all, Y_all = outputs(2 * rows, seed)
        X, Y, X_test, Y_test = X_all[:rows], Y_all[:rows], X_all[rows:], Y_all[rows:]
        model = ff.FedForestRegressor(**kw)
        start = time.perf_counter()
        model.fit(X, Y, client_ids=cid)
        seconds = time.perf_counter() - start
        err = mean_squared_error(Y_test, model.predict(X_test))
        one = [ff.FedForestRegressor(**kw).fit(X, Y[:, o], client_ids=cid) for o in range(3)]
        each = float(
            np.mean(
                [mean_squared_error(Y_test[:, o], m.predict(X_test)) for o, m in enumerate(one)]
            )
        )
    return err, each, seconds, model.communication_.total_megabytes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=3000, help="training rows (5 clients)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds (data and forests)")
    parser.add_argument("--trees", type=int, default=40, help="trees of every forest")
    parser.add_argument(
        "--targets",
        nargs="+",
        default=["multi-output", "poisson", "multi-output-classification"],
        choices=["multi-output", "poisson", "multi-output-classification"],
        help="targets to run",
    )
    parser.add_argument(
        "--rules",
        nargs="+",
        default=["defaults", "same rules"],
        choices=list(RULES),
        help="rows: the reference and the measured forest's settings (RULES)",
    )
    args = parser.parse_args()
    print(f"# {platform.machine()}, {platform.python_version()}, fedforest {ff.__version__}")
    print(f"# {args.rows} training rows in 5 clients, {args.trees} trees, {args.seeds} seeds")
    print(
        "| target | rules | measured / reference per seed | mean | outputs alone | "
        "difference (se) | s | MB |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for target in args.targets:
        for name in args.rules:
            reference, measured = RULES[name]
            ratios, singles, seconds, mb = [], [], [], []
            for seed in range(args.seeds):
                base = score(target, args.rows, seed, args.trees, reference)
                sec = score(target, args.rows, seed, args.trees, measured)
                ratios.append(sec[0] / base[0])
                singles.append(sec[1] / base[1])
                seconds.append(sec[2])
                mb.append(sec[3])
            per_seed = ", ".join(f"{r:.3f}" for r in ratios)
            single = diff = ""
            if target != "poisson":
                single = f"{np.mean(singles):.3f}"
                d = np.subtract(ratios, singles)
                se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else float("nan")
                diff = f"{d.mean():+.3f} ({se:.3f})"
            print(
                f"| {target} | {name} | {per_seed} | {np.mean(ratios):.3f} | {single} | "
                f"{diff} | {np.median(seconds):.2f} | {np.median(mb):.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
