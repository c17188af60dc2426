"""Where a client's time goes in one fit: the client kernels, per call, in CPU time.

Fits ``FedForestRegressor`` on the Friedman data of ``bench_forest.py`` (10 clients of equal
size, 20 features, depth 8, ``min_samples_leaf=5``, a third of the features per node, 32
bins) with one thread, and wraps the client's kernels and rounds with timers: CPU time of
the calling thread (``time.thread_time``; other processes on a shared machine change it
less than wall time), summed over the clients and levels, and for ``left_stats`` and
``sketch_pairs`` the nanoseconds per in-bag row and sampled feature (each pair's node rows,
summed). The best of ``--repeats`` fits is reported (its wall time and the kernels' times
of that fit).

Run it on another checkout of fedforest (before / after a change) with
``PYTHONPATH=/path/to/other/checkout``; the fedforest path and commit are printed.

Usage::

    python benchmarks/bench_kernels.py --rows 200000 --trees 30 --privacy none
    python benchmarks/bench_kernels.py --rows 200000 --trees 30 --privacy secure
    python benchmarks/bench_kernels.py --rows 200000 --trees 30 --binning global
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_forest import make_data  # noqa: E402


def row_pairs(slot: np.ndarray, pair_off: np.ndarray, lo: int, hi: int) -> int:
    """In-bag rows times sampled features over the slots ``lo..hi`` (the rows a kernel reads)."""
    rows = np.bincount(slot[slot >= 0] - lo, minlength=hi - lo)[: hi - lo]
    return int((rows * np.diff(pair_off)[lo:hi]).sum())


def instrument(seconds: dict[str, float], calls: dict[str, int], work: dict[str, int]) -> None:
    """Wrap the client's kernels and rounds with CPU-time counters (in place)."""
    from fedforest.federated import client as C
    from fedforest.federated import client_kernels as K

    try:  # Round B's one-pass answer (privacy="none"), and the masks ("secure")
        from fedforest.federated import client_increments as CI
        from fedforest.federated.privacy import secagg as SA
    except ImportError:  # an older checkout
        CI = SA = None

    def wrap(owner: Any, name: str, label: str, pairs: Any = None) -> None:
        if not hasattr(owner, name):  # an older checkout (``PYTHONPATH``) without it
            return
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[label] += time.thread_time() - start
                calls[label] += 1
                if pairs is not None:
                    work[label] += pairs(args)

        setattr(owner, name, timed)

    wrap(K, "left_stats", "left_stats", lambda a: row_pairs(a[6], a[9], a[13], a[14]))
    wrap(C, "sketch_pairs", "sketch_pairs", lambda a: row_pairs(a[9], a[10], a[12], a[13]))
    # binning="global": a one-round answer from the grid codes (all the level's slots).
    wrap(C, "pack_coded", "pack_coded", lambda a: row_pairs(a[3], a[6], 0, a[6].size - 1))
    if CI is not None:
        lir = "left_increments_ranked"
        wrap(CI, lir, lir, lambda a: row_pairs(a[9], a[12], a[17], a[18]))
        # Round A's sketches, called from client_increments.pair_sketches since 34dd9fe.
        wrap(CI, "sketch_pairs", "sketch_pairs", lambda a: row_pairs(a[9], a[10], a[12], a[13]))
        wrap(SA.MaskingKeys, "mask", "MaskingKeys.mask")
    wrap(C, "route_rows", "route_rows")  # client_route's, as client.py calls it
    wrap(K, "route_rows", "route_rows")  # an older checkout: client_kernels'
    wrap(K, "node_summaries", "node_summaries")
    wrap(C, "fine_codes", "fine_codes")
    for method in ("_round_a", "_round_b", "_setup"):
        wrap(C.Client, method, f"Client.{method}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=200_000, help="training rows")
    p.add_argument("--trees", type=int, default=30, help="trees")
    p.add_argument("--n-jobs", type=int, default=1, help="threads")
    p.add_argument(
        "--privacy", choices=["none", "secure"], default="none", help="fedforest's privacy"
    )
    p.add_argument(
        "--binning",
        choices=["quantile", "global"],
        default="quantile",
        help='fedforest\'s binning (global: one round a level, privacy "none" only)',
    )
    p.add_argument("--bins", type=int, default=32, help="n_bins")
    p.add_argument("--repeats", type=int, default=2, help="timed fits; the best is reported")
    args = p.parse_args(argv)

    import fedforest

    package = Path(fedforest.__file__).resolve().parent
    head = subprocess.run(
        ["git", "-C", str(package.parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    )
    commit = head.stdout.strip() if head.returncode == 0 else "not a git checkout"
    print(f"fedforest {package} ({commit}); load avg {os.getloadavg()[0]:.2f}")

    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    work: dict[str, int] = defaultdict(int)
    instrument(seconds, calls, work)
    data = make_data(args.rows, 0)
    X, y, h = data["X_train"], data["y_train"], data["h_train"]

    def model(n_trees: int) -> Any:
        return fedforest.FedForestRegressor(
            n_estimators=n_trees,
            max_depth=8,
            min_samples_leaf=5,
            max_features=1 / 3,
            n_bins=args.bins,
            binning=args.binning,
            n_jobs=args.n_jobs,
            random_state=0,
            privacy=args.privacy,
        )

    model(2).fit(X[:500], y[:500], client_ids=h[:500])  # compile / load the kernels
    best: tuple[float, dict[str, float], dict[str, int], dict[str, int]] | None = None
    for _ in range(args.repeats):
        seconds.clear(), calls.clear(), work.clear()
        start, start_cpu = time.perf_counter(), time.process_time()
        fitted = model(args.trees).fit(X, y, client_ids=h)
        wall = time.perf_counter() - start
        seconds["(whole fit)"] = time.process_time() - start_cpu
        if best is None or wall < best[0]:
            best = (wall, dict(seconds), dict(calls), dict(work))
    assert best is not None
    wall, sec, n_calls, n_work = best
    mse = float(np.mean((fitted.predict(data["X_test"]) - data["y_test"]) ** 2))
    print(
        f"privacy={args.privacy} binning={args.binning} n_bins={args.bins} "
        f"rows={args.rows:,} trees={args.trees} ({args.n_jobs} thread(s)): "
        f"fit {wall:.2f} s wall, test MSE {mse:.4f}, load avg {os.getloadavg()[0]:.2f}"
    )
    for label, s in sorted(sec.items(), key=lambda kv: -kv[1]):
        per = ""
        if n_work.get(label):
            per = f"  {s / n_work[label] * 1e9:6.2f} ns per in-bag row and sampled feature"
        print(f"  {label:<18}{s:8.3f} s CPU  {n_calls.get(label, 1):5d} calls{per}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
