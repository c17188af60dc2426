"""Red team 20's cell attack on secure regressors, over cases and seeds (docs/privacy-findings.md).

Per tree and numeric feature, every release (a node's total, its cumulative sums at its
candidates) as a sum over (leaf, interval) cells, the cells Round A's counts show empty
dropped: the cells whose indicator lies in the span are sums the server computes
(``tests.test_privacy_red20.cell_exposure``). Prints, per case and seed, the cells of 1 to
``m - 1`` in-bag rows found, their rows, and the rows alone in one (an exact target), and
the cousins' combinations (``cousin_exposure``) beside them.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_cells.py --seeds 0 1 2 3 --trees 10
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_privacy_red20 import (  # noqa: E402
    _case,
    _recorded_fit,
    cell_exposure,
    cousin_exposure,
)

CASES = ("plain", "missing", "site")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="data and forest seeds")
    parser.add_argument("--trees", type=int, default=10, help="trees of each forest")
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=CASES,
        default=list(CASES),
        help="plain: 10 x 100 rows, 8 numeric features; missing: with a category column and "
        "20 %% missing values; site: a one-level-per-client column, 12 x 20 rows",
    )
    args = parser.parse_args()
    print("python benchmarks/attack_cells.py", *sys.argv[1:])
    print("| case | seed | cells | rows | alone | cousins' combinations | s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for case in args.cases:
        for seed in args.seeds:
            start = time.perf_counter()
            model, X, y, h = _case(case, seed=seed, trees=args.trees)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fed, w, V = _recorded_fit(model, X, y, h)
            cells = cell_exposure(fed, model, V, w, 10)
            cousins = "-" if case == "site" else cousin_exposure(fed, model, V, w, 10, y)
            combos = cousins if cousins == "-" else cousins["combinations"]
            print(
                f"| {case} | {seed} | {cells['cells']} | {cells['rows']} | {cells['alone']} "
                f"| {combos} | {time.perf_counter() - start:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
