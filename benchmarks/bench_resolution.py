"""Held-out R^2 where resolution matters: one client, y = 3 x + noise (tests/test_forest.py).

The case that measures what a minimum-rows rule costs in small nodes
(docs/privacy.md, "Combinations of more than two sums"): ``tests/test_forest.py``'s
``regression_data`` (5 normal features, ``y = 3 x_2 + 0.1 noise``), one client, 8 trees
of depth 4 on all features, ``privacy="secure"``; training rows from data seed ``s``,
``random_state = s``, 1,000 held-out rows from seed ``100 + s``, seeds 0-5. Prints each
seed's R^2, their mean and standard deviation, and the mean bytes sent both ways.

Usage::

    python benchmarks/bench_resolution.py               # 240 and 1,000 rows
    python benchmarks/bench_resolution.py --sizes 240 --privacy none
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff  # noqa: E402
from tests.test_forest import regression_data  # noqa: E402


def run(n: int, privacy: str, seeds: range) -> None:
    scores, sent = [], []
    for s in seeds:
        X, y = regression_data(n=n, seed=s)
        X_test, y_test = regression_data(n=1000, seed=100 + s)
        model = ff.FedForestRegressor(
            n_estimators=8, max_depth=4, max_features=None, random_state=s, privacy=privacy
        ).fit(X, y)
        scores.append(model.score(X_test, y_test))
        ledger = model.communication_
        sent.append(ledger.upload_bytes + ledger.download_bytes)
    r2 = np.array(scores)
    print(
        f"{n} rows, {privacy}: R^2 {' '.join(f'{v:.4f}' for v in r2)}; "
        f"mean {r2.mean():.4f} sd {r2.std(ddof=1):.4f}; bytes {np.mean(sent) / 1e3:.1f} kB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[240, 1000], help="training rows per run"
    )
    parser.add_argument("--privacy", default="secure", help="fedforest's privacy")
    parser.add_argument("--seeds", type=int, default=6, help="data seeds 0 to SEEDS - 1")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print("command: python", shlex.join(sys.argv), f"| commit {commit} | load", os.getloadavg())
    for n in args.sizes:
        run(n, args.privacy, range(args.seeds))


if __name__ == "__main__":
    main()
