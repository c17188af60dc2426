"""A colluding client's rows subtracted from the model (issue 11, branch ``red6``).

Runs ``tests/test_privacy_red6.py``'s :func:`collusion_attack`: nine sites of 100 rows and
``site0`` of ``--big`` rows (the suite's data, 8 features), a default secure regressor
(``--trees``; with ``--classes`` a classifier of that many declared classes, shares in
proportion to 0.75^k), ``site0`` (with ``--colluders`` the next sites too) colluding with
the server. Prints the nodes whose honest part is one row, the honest rows whose exact
target (to 1e-6) or class those nodes give, and the claims that were wrong (the clients'
own bootstraps as ground truth).

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_collusion.py --big 100 500 1000 --seeds 0 1 2
    python benchmarks/attack_collusion.py --classes 12 --seeds 0 1 2
    python benchmarks/attack_collusion.py --big 100 --colluders 1 2 3 5 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_privacy_red6 import collusion_attack  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--big", type=int, nargs="+", default=[1000], help="site0's rows")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="data seeds")
    parser.add_argument("--trees", type=int, default=50, help="trees of the forest")
    parser.add_argument("--colluders", type=int, nargs="+", default=[1], help="site0 on")
    parser.add_argument("--classes", type=int, default=0, help="a classifier's (0: regression)")
    args = parser.parse_args()
    for big, colluders, seed in itertools.product(args.big, args.colluders, args.seeds):
        t0 = time.perf_counter()
        claims, rebuilt, got = collusion_attack(seed, args.trees, colluders, big, args.classes)
        honest = 900 - 100 * (colluders - 1)
        print(
            f"site0 {big} rows, {colluders} colluding, seed {seed}, {args.trees} trees: "
            f"{len(claims)} nodes of one honest row, {int(rebuilt.sum())} of {honest} honest "
            f"rows' targets, {got['wrong']} wrong claims ({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
