"""Red team 20's cousins' attack on a secure regressor (docs/privacy-findings.md).

An ancestor's cumulative sum at a threshold less those of disjoint descendants that
released the same threshold: the server's own attack on its decoded sums
(``tests.test_privacy_red20.cousin_exposure``). Prints, per seed, the isolating
combinations (1 to ``m - 1`` rows) and the training rows whose exact target a one-row
rest gives.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_cousins.py --seeds 0 1 --trees 50 --paper
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff  # noqa: E402
from tests.test_privacy import _data  # noqa: E402
from tests.test_privacy_red20 import _recorded_fit, cousin_exposure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="data and forest seeds")
    parser.add_argument("--trees", type=int, default=10, help="trees of the forest")
    parser.add_argument("--rows", type=int, default=200, help="rows per client (10 clients)")
    parser.add_argument("--features", type=int, default=20, help="numeric features")
    parser.add_argument(
        "--paper", action="store_true", help="the paper's settings: depth 8, leaf 5, B = 32"
    )
    args = parser.parse_args()
    print("python benchmarks/attack_cousins.py", *sys.argv[1:])
    for seed in args.seeds:
        X, y, h = _data(n_clients=10, n_rows=args.rows, d=args.features, seed=seed)
        kw: dict = {"n_estimators": args.trees, "random_state": seed}
        if args.paper:
            kw.update(max_depth=8, min_samples_leaf=5, n_bins=32)
        model = ff.FedForestRegressor(**kw)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fed, w, V = _recorded_fit(model, X, y, h)
        m = max(10, 2 * model.min_samples_leaf)
        got = cousin_exposure(fed, model, V, w, m, y)
        print(f"seed {seed}: {got} of {len(y)} rows, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
