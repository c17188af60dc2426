"""The suite's attacks on data shapes a hospital or bank brings (issue 11, branch ``red5``).

Runs ``tests/test_privacy_shapes.py``'s :func:`measure` over several data seeds at the
default settings (the paper's: 50 trees, depth 8, leaf 5, B = 32), 10 clients x 100 rows
(the tiny-client shapes: four of 250 and one of 5 or 8), under ``"secure"``: raw values in
the replies, the fewest rows of a decoded sum, model nodes of fewer than ``m`` distinct
in-bag rows (ground truth), the differencing attack, thresholds at training values, and
the rows whose exact target the node-value attack claims for one individual. Then, for a
row entered ``--copies`` times and for one huge target, what the attacks give.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_shapes.py --seeds 0 1
    python benchmarks/attack_shapes.py --shapes ordinal ties --trees 10
    python benchmarks/attack_shapes.py --shapes repeated --copies 10 15 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_privacy_shapes import SHAPES, huge_target_error, measure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES), help="data shapes"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="data seeds")
    parser.add_argument("--trees", type=int, default=50, help="trees of the forest")
    parser.add_argument("--copies", type=int, nargs="+", default=[15], help="repeated's")
    parser.add_argument("--factors", type=float, nargs="+", default=[1000.0], help="heavy_tail's")
    args = parser.parse_args()
    for shape in args.shapes:
        for seed in args.seeds:
            t0 = time.process_time()
            if shape == "heavy_tail":
                for factor in args.factors:
                    model_err, pooled_err = huge_target_error(seed, args.trees, factor)
                    print(
                        f"heavy_tail seed {seed} factor {factor:g}: the huge target's best "
                        f"relative error, model {model_err:.2e}, decoded sums {pooled_err:.2e}",
                        flush=True,
                    )
                continue
            options = [{"copies": c} for c in args.copies] if shape == "repeated" else [{}]
            for extra in options:
                got = measure(shape, seed, args.trees, **extra)
                print(
                    f"{shape:22s} seed {seed} {extra or ''} {got} "
                    f"({time.process_time() - t0:.0f} s CPU)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
