"""Red team 16: the union attack on random federations and settings (issue 11).

Each draw (``tests/_attack_fuzz.py``: ``draw(seed)``) is a federation and an estimator a
user could bring: 2 to 30 clients of 1 to 500 rows (often one of 1 to 3 rows beside large
ones), 1 to 30 features of mixed kinds (continuous, integers of few levels, binary, a tie
at one value, outliers of 1e9, missing values, pandas categoricals with a rare level and
with many levels, a column constant but for one row, a row id), a target (continuous,
counts, zero-inflated, equal to a feature, binary, multiclass with a class of 1 to 3 rows,
text labels) and settings (``max_depth=None``, ``min_samples_leaf=1``, ``n_bins`` 8 to 255,
``max_features``, ``split_on_client``, ``class_weight``, ``sample_weight``, ``oob_score``,
``max_samples``, rows copied across clients). Each is fitted under ``"secure"`` and
``"none"`` (the control) on the suite's recording server, and every single-fit attack of
the suite runs on the recording and the model (``tests/_attack_union.py``; ``--slow`` adds
the isolation attacks under ``"secure"``). Printed per draw: its seed and description, then
per level the share of rows with an exact target, an exact feature value and both
(rebuilt), each attack's (target, feature) row counts, or the refusal's text.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_fuzz.py --seeds 0 1 2 3 --slow
    python benchmarks/attack_fuzz.py --draws 20 --first 100
    python benchmarks/attack_fuzz.py --seeds 6 13 14 --slow --declare-classes
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests._attack_fuzz import add_draw_options, chosen_draws, fuzz_fit  # noqa: E402
from tests._attack_union import Tally, add_privacy_option, shares  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    add_draw_options(parser)
    add_privacy_option(parser)
    parser.add_argument(
        "--slow", action="store_true", help="add the isolation attacks (ancestor, interval)"
    )
    parser.add_argument(
        "--declare-classes",
        action="store_true",
        help="give a classifier its labels (classes=), as a rare label's refusal asks",
    )
    args = parser.parse_args()
    tally = Tally()
    for _, case in chosen_draws(args):
        print(case["describe"], flush=True)
        for privacy in args.privacy:
            start = time.perf_counter()
            got = fuzz_fit(case, privacy, slow=args.slow, declare=args.declare_classes)
            took = time.perf_counter() - start
            if "refused" in got:
                print(f"  {privacy:6s} refused: {got['refused']}", flush=True)
                continue
            rows = shares(got, ("target", "feature", "rebuilt"))
            hits = {k: v for k, v in got["attacks"].items() if v != (0, 0)}
            print(
                f"  {privacy:6s} {rows} | {hits} | isolation {got['isolation']} | {took:.0f} s",
                flush=True,
            )
            tally.add(privacy, got)
    for privacy, share in tally.worst.items():
        n = tally.found[privacy]
        print(f"{privacy}: rebuilt in {n} draws, at most {100 * share:.2f}% of rows")
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
