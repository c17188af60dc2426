"""Binary (one-hot) columns with max_features < 1: fedforest's trees against scikit-learn's.

A feature constant inside a node (a binary column below a split on it, or a one-hot
column below its sibling's split) that is drawn for the node: scikit-learn draws another
feature; fedforest detects it only after the node's Round A (or not at all under quantile
sketches) and makes the node a leaf when every drawn feature is such a one
(docs/architecture.md, Round A). This prints how much that costs: test R^2 and leaves per
tree on y = 2 x0 + noise with two normal columns and ``--binary`` random 0/1 columns, one
feature drawn per node (``max_features=1``), against scikit-learn's forest and both at
``max_features=1.0``; ``--onehot L`` adds a category of L levels, one-hot encoded, whose
code adds to y.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
from sklearn.ensemble import RandomForestRegressor

import fedforest as ff


def _data(
    rng: np.random.Generator, n: int, binary: int, onehot: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    X = np.column_stack([rng.normal(size=(n, 2)), rng.integers(0, 2, (n, binary))])
    y = 2.0 * X[:, 0]
    if onehot:  # a category of ``onehot`` levels, one-hot encoded, adding its code to y
        code = rng.integers(0, onehot, n)
        X, y = np.column_stack([X, np.eye(onehot)[code]]), y + code
    return X.astype(np.float64), y


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--binary", type=int, nargs="+", default=[0, 1, 3], help="random 0/1 columns"
    )
    parser.add_argument("--rows", type=int, default=300, help="training rows")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 to SEEDS - 1")
    parser.add_argument(
        "--onehot", type=int, default=0, help="levels of a one-hot encoded category (0: none)"
    )
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"command: python {' '.join(sys.argv)}")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"commit {commit}, {when}, load average {os.getloadavg()[0]:.2f}")
    if args.onehot:
        print(f"and one-hot columns of a category of {args.onehot} levels")
    kw = {"n_estimators": 50, "max_depth": 8, "min_samples_leaf": 5}
    models = {
        "scikit-learn": lambda mf, s: RandomForestRegressor(**kw, max_features=mf, random_state=s),
        "fedforest none exact": lambda mf, s: ff.FedForestRegressor(
            **kw, max_features=mf, privacy="none", n_bins=None, random_state=s
        ),
        "fedforest secure": lambda mf, s: ff.FedForestRegressor(
            **kw, max_features=mf, random_state=s
        ),
    }
    print("| binary columns | max_features | model | test R^2 | leaves per tree |")
    print("| ---: | ---: | --- | ---: | ---: |")
    for binary in args.binary:
        for mf in (1, 1.0):
            for name, make in models.items():
                r2, leaves = [], []
                for seed in range(args.seeds):
                    rng = np.random.default_rng(seed)
                    X, y = _data(rng, args.rows, binary, args.onehot)
                    y = y + rng.normal(0, 0.1, args.rows)
                    Xt, yt = _data(rng, 2000, binary, args.onehot)
                    model = make(mf, seed).fit(X, y)
                    r2.append(model.score(Xt, yt))
                    leaves.append(np.mean([t.tree_.n_leaves for t in model.estimators_]))
                print(f"| {binary} | {mf} | {name} | {np.mean(r2):.3f} | {np.mean(leaves):.1f} |")


if __name__ == "__main__":
    main()
