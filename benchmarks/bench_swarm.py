"""Prediction speed of the swarm strategies on a pooled 400-tree forest.

Four peers (100 scikit-learn trees each, unlimited depth) train on 2,500 rows each of the
S-500-Num generator scaled up (16 numeric features, target Jaccard 0.3: 3 shared
features, the others private). Peer 0 then predicts 10,000 rows of its own columns with
every strategy: for ``mp`` every split on one of the 13 features it lacks is explored on
both sides, exactly. One untimed call per strategy warms up numba (compilation or cache
load); the best of ``--repeats`` timed calls is reported.

Usage::

    python benchmarks/bench_swarm.py
    python benchmarks/bench_swarm.py --rows 10000 --trees 100 --peers 4 --n-jobs 1 2
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
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fedforest.experiments.swarm import assign_features
from fedforest.swarm import Peer, SwarmForest
from fedforest.swarm.data import make_s500

STRATEGIES = ("fpv", "pr", "mi", "ipr", "ss", "mp")


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if "model name" in line)
    except (OSError, StopIteration):
        pass
    import numba
    import sklearn

    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"numpy {np.__version__}, numba {numba.__version__}, scikit-learn {sklearn.__version__}"
    )


def build(args: argparse.Namespace) -> tuple[SwarmForest, object]:
    n_train = args.peers * args.train_rows
    ds = make_s500("num", n_samples=n_train + args.rows, random_state=args.seed)
    rng = np.random.default_rng(args.seed)
    shared, cols = assign_features(list(ds.X.columns), args.peers, args.jaccard, rng)
    bundles = []
    for k in range(args.peers):
        rows = np.arange(k * args.train_rows, (k + 1) * args.train_rows)
        peer = Peer(f"peer{k}", args.trees, random_state=k, n_jobs=2)
        bundles.append(peer.fit(ds.X.iloc[rows][cols[k]], ds.y[rows]).share(shared))
    test = ds.X.iloc[n_train:][cols[0]]
    return SwarmForest(bundles), test


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000, help="rows to predict")
    parser.add_argument("--trees", type=int, default=100, help="trees per peer")
    parser.add_argument("--peers", type=int, default=4, help="peers (sites)")
    parser.add_argument("--train-rows", type=int, default=2_500, help="training rows per peer")
    parser.add_argument(
        "--jaccard", type=float, default=0.3, help="Jaccard index of the peers' features"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed predictions per strategy and n_jobs; the best is reported",
    )
    parser.add_argument(
        "--n-jobs", type=int, nargs="+", default=[1, 2], help="thread counts to time"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the data")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"command: python benchmarks/bench_swarm.py {shlex.join(sys.argv[1:])}".rstrip())
    start = time.perf_counter()
    swarm, test = build(args)
    nodes = int(swarm._forest["offsets"][-1])
    missing = len(swarm.feature_names_) - test.shape[1]
    print(
        f"pooled forest: {swarm.n_trees_} trees, {nodes} nodes, max depth {swarm._max_depth}; "
        f"site has {test.shape[1]} of {len(swarm.feature_names_)} features ({missing} missing); "
        f"built in {time.perf_counter() - start:.1f} s"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average before timing: {load:.1f} (above the core count: timings are contended)")
    print(f"{'strategy':>8} {'n_jobs':>6} {'seconds':>8} {'rows/s':>10}")
    for strategy in STRATEGIES:
        for n_jobs in args.n_jobs:
            swarm.n_jobs = n_jobs
            swarm.predict_proba(test.iloc[:64], strategy, random_state=0)  # warm-up
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                swarm.predict_proba(test, strategy, random_state=0)
                times.append(time.perf_counter() - t0)
            best = min(times)
            print(f"{strategy:>8} {n_jobs:>6} {best:>8.3f} {len(test) / best:>10,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
