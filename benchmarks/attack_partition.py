"""The suite's ancestor attack (pairs and same-depth partitions) over many bootstraps.

Runs ``tests/test_privacy.py::ancestor_exposure`` (a node's released sums against every
ancestor's on the same feature, and an ancestor's sum less one release of each of its
descendants at a depth where all of them released the feature) on default secure
forests over several shapes (clients x rows x features, trees) and ``random_state``
values, for regression and classification (the median split of the same targets), and
prints what it finds per case and in all. ``--off all`` switches the rules across levels
off (a test-only patch), ``--off partition`` the partition rule alone
(``privacy/partitions.py``; its thresholds still join the grids), to show the attack
can find rows.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_partition.py --seeds 10
    python benchmarks/attack_partition.py --shapes 140x12x20 --seeds 10 --tasks regression
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff  # noqa: E402
from tests.test_privacy import _data, _fit, _in_bag_weights, ancestor_exposure  # noqa: E402


def run(task: str, n_rows: int, d: int, n_trees: int, seed: int) -> dict[str, float]:
    """One case: 10 clients x ``n_rows`` x ``d``, ``n_trees`` trees, ``random_state=seed``."""
    X, y, h = _data(n_clients=10, n_rows=n_rows, d=d)
    kw: dict = {"n_estimators": n_trees, "random_state": seed}
    if task == "classification":
        y = (y > np.median(y)).astype(float)
        model: ff.FedForestRegressor | ff.FedForestClassifier = ff.FedForestClassifier(**kw)
    else:
        model = ff.FedForestRegressor(**kw)
    fed = _fit(model, X, y, h)
    clients = [fed.clients[f"site{k}"] for k in np.unique(h)]
    w = _in_bag_weights(model, clients, h, n_trees, seed)
    return ancestor_exposure(fed, model, X, w, max(10, 2 * model.min_samples_leaf))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--shapes",
        nargs="+",
        default=["100x8x10", "140x12x20", "200x20x5"],
        help="rows per client x features x trees (10 clients)",
    )
    parser.add_argument("--seeds", type=int, default=10, help="random_state 0 to SEEDS - 1")
    parser.add_argument(
        "--tasks", nargs="+", default=["regression", "classification"], help="tasks to run"
    )
    parser.add_argument("--off", choices=["all", "partition"], help="rules switched off")
    args = parser.parse_args()
    from fedforest.federated.server import secure_round_b

    if args.off is not None:
        secure_round_b.partition_filter = lambda *a, **k: None  # type: ignore[assignment]
    if args.off == "all":
        secure_round_b.safe_from_ancestors = lambda cands, *a, **k: np.ones(cands.size, dtype=bool)  # type: ignore[assignment]
    total = {"parent": 0.0, "further": 0.0, "partition": 0.0, "rows": 0.0}
    cases = hit = 0
    start = time.process_time()
    for task in args.tasks:
        for shape in args.shapes:
            n_rows, d, n_trees = (int(v) for v in shape.split("x"))
            for seed in range(args.seeds):
                found = run(task, n_rows, d, n_trees, seed)
                cases += 1
                hit += any(found[k] > 0 for k in total)
                for k in total:
                    total[k] += found[k]
                print(task, shape, "random_state", seed, found, flush=True)
    print(f"{cases} cases, {hit} with a find; totals {total}")
    print(f"CPU {time.process_time() - start:.1f} s")


if __name__ == "__main__":
    main()
