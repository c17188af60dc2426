"""What privacy="secure" costs against "none": fit time, bytes, rounds and accuracy.

For each size (training rows x 20 features, 10 clients with shifted covariates, the
paper's forest: 50 trees, depth 8, leaf 5, B = 32, 2 threads) both levels are fitted side
by side in this process, after one untimed warm-up fit of each on 500 rows (numba's
compilation and cache loading are not fit time). Reported: the best of ``--repeats``
fit times, the bytes both ways and the rounds from ``model.communication_``, and the
test MSE, with scikit-learn's RandomForestRegressor on the same rows as the reference.

Usage::

    python benchmarks/bench_privacy.py                      # 1,400 and 20,000 rows
    python benchmarks/bench_privacy.py --sizes 1400 200000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
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

from sklearn.ensemble import RandomForestRegressor

import fedforest as ff

KW = dict(n_estimators=50, max_depth=8, min_samples_leaf=5, max_features=1 / 3)


def data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    n_test = 5000
    h = rng.integers(0, 10, n + n_test)
    X = rng.normal(size=(n + n_test, 20)) + 0.5 * h[:, None] / 10  # shifted covariates
    y = X[:, 0] + np.sin(2 * X[:, 1]) + (X[:, 2] > 0.5) + 0.3 * rng.normal(size=len(h))
    return X[:n], y[:n], h[:n], X[n:], y[n:]


def fit(privacy: str, X, y, h, repeats: int):
    best, model = np.inf, None
    for _ in range(repeats):
        model = ff.FedForestRegressor(random_state=0, n_jobs=2, privacy=privacy, **KW)
        start = time.perf_counter()
        model.fit(X, y, client_ids=h)
        best = min(best, time.perf_counter() - start)
    return best, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1400, 20000])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    )
    print(f"# python benchmarks/bench_privacy.py {shlex.join(sys.argv[1:])}")
    Xw, yw, hw, _, _ = data(500, 1)
    for privacy in ("none", "secure"):
        ff.FedForestRegressor(n_estimators=2, privacy=privacy).fit(Xw, yw, client_ids=hw)
    print("| rows | privacy | fit s | MB | rounds | test MSE | MSE / sklearn |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        X, y, h, Xt, yt = data(n)
        ref = RandomForestRegressor(random_state=0, n_jobs=2, **KW).fit(X, y)
        ref_mse = float(np.mean((ref.predict(Xt) - yt) ** 2))
        rows = {}
        for privacy in ("none", "secure"):
            seconds, model = fit(privacy, X, y, h, args.repeats)
            led = model.communication_
            mse = float(np.mean((model.predict(Xt) - yt) ** 2))
            rows[privacy] = (seconds, led.total_megabytes, led.rounds)
            print(
                f"| {n:,} | {privacy} | {seconds:.2f} | {led.total_megabytes:.1f} | "
                f"{led.rounds} | {mse:.4f} | {mse / ref_mse:.3f} |"
            )
        t = rows["secure"][0] / rows["none"][0]
        b = rows["secure"][1] / rows["none"][1]
        print(f"|  | secure / none | {t:.2f}x | {b:.2f}x | | | |")


if __name__ == "__main__":
    main()
