"""Missing values: test MSE against scikit-learn's forest on the same rows, per privacy level.

The synthetic task of ``tests/test_missing.py`` (8 features, y = x0 + sin(2 x1) + [x2 > 0.5]
+ noise), 3,000 training and 3,000 test rows in 5 clients, with values missing completely
at random (20 % of every feature) or not at random (x0 > 0.8 and x1 < -0.8 missing), the
same forest on both sides (50 trees, leaf 5, a third of the features; depth None under
"none" and scikit-learn, 8 under "secure", which needs a bounded depth), and the same data
without missing values as the reference. Prints the MSE of each against scikit-learn's
``RandomForestRegressor``, which handles NaN itself.

Usage::

    python benchmarks/bench_missing.py
"""

from __future__ import annotations

import platform
import sys
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


def data(n: int, rng: np.random.Generator, kind: str):
    X = rng.normal(size=(n, 8))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + (X[:, 2] > 0.5) + 0.3 * rng.normal(size=n)
    if kind == "at random":
        X[rng.random(X.shape) < 0.2] = np.nan
    elif kind == "not at random":
        X[X[:, 0] > 0.8, 0] = np.nan
        X[X[:, 1] < -0.8, 1] = np.nan
    return X, y


def main() -> None:
    print(f"# {platform.machine()}, {platform.python_version()}, fedforest {ff.__version__}")
    print("| missing | privacy | test MSE | / scikit-learn |")
    print("|---|---|---:|---:|")
    for kind in ("none (reference)", "at random", "not at random"):
        rng = np.random.default_rng(1)
        X, y = data(3000, rng, kind)
        X_test, y_test = data(3000, rng, kind)
        h = rng.integers(0, 5, len(y))
        kw = dict(n_estimators=50, min_samples_leaf=5, max_features=1 / 3)
        ref = RandomForestRegressor(random_state=0, n_jobs=2, **kw).fit(X, y)
        base = float(np.mean((ref.predict(X_test) - y_test) ** 2))
        print(f"| {kind} | scikit-learn | {base:.4f} | 1 |")
        for privacy, depth in (("none", None), ("secure", 8)):
            model = ff.FedForestRegressor(
                privacy=privacy, max_depth=depth, random_state=0, n_jobs=2, **kw
            ).fit(X, y, client_ids=h)
            mse = float(np.mean((model.predict(X_test) - y_test) ** 2))
            print(f"| {kind} | {privacy} | {mse:.4f} | {mse / base:.3f} |")


if __name__ == "__main__":
    main()
