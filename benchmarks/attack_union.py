"""Issue 11's grid, every single-fit attack of the suite on one recording, united.

Per configuration (regression and classification x {plain, ``split_on_client=True``, a
categorical column}) one recording fit of the suite's 10 clients x 200 rows x 20 features
per seed, under ``"secure"`` and ``"none"`` (the control); every attack that applies runs
on the same recording and the same fitted model (``tests/_attack_union.py`` lists them).
A row counts as rebuilt when ANY attack gives its exact target and ANY attack gives one
exact feature value of that same row. Printed per case: the shares of the training rows
with an exact target, with an exact feature value, with both (rebuilt), rebuilt within a
single attack, and rebuilt only by linking claims of different attacks; then each
attack's (target, feature) row counts. The defaults are the paper's settings (50 trees,
depth 8, leaf 5, B = 32), so the issue's two settings are one fit here.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_union.py --seeds 0 1 2
    python benchmarks/attack_union.py --seeds 0 --tasks regression --variants plain --fast
    python benchmarks/attack_union.py --seeds 0 1 --variants rare_level --trees 20 --max-samples 0.6
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff  # noqa: E402
from tests._attack_union import PAPER, Tally, add_privacy_option, shares, union_fit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1, 2], help="data and forest seeds"
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=["regression", "classification"],
        choices=["regression", "classification"],
        help="the estimators attacked",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["plain", "split_on_client", "categorical"],
        choices=["plain", "split_on_client", "categorical", "rare_level"],
        help="configurations of issue 11's grid (split_on_client is refused under secure; "
        "rare_level: the categorical column with a level 3 rows hold and 2 values missing)",
    )
    add_privacy_option(parser)
    parser.add_argument("--fast", action="store_true", help="leave out the slow attacks")
    parser.add_argument(
        "--trees", type=int, default=None, help="n_estimators (default: the paper's 50)"
    )
    parser.add_argument("--n-bins", type=int, default=None, help="n_bins (default: 32)")
    parser.add_argument(
        "--max-samples", type=float, default=None, help="max_samples (default: a full bootstrap)"
    )
    args = parser.parse_args()
    settings = {
        k: v
        for k, v in (
            ("n_estimators", args.trees),
            ("n_bins", args.n_bins),
            ("max_samples", args.max_samples),
        )
        if v is not None
    }
    print(f"command: python {' '.join(sys.argv)} | load {os.getloadavg()}", flush=True)
    model = ff.FedForestRegressor()
    assert {k: getattr(model, k) for k in PAPER} == PAPER, "the defaults are no longer the paper's"
    tally = Tally()
    for task in args.tasks:
        for variant in args.variants:
            for privacy in args.privacy:
                for seed in args.seeds:
                    start = time.perf_counter()
                    got = union_fit(task, variant, privacy, seed, settings, slow=not args.fast)
                    took = time.perf_counter() - start
                    case = f"{task:14s} {variant:15s} {privacy:6s} seed {seed}"
                    if "refused" in got:
                        print(f"{case}: refused ({got['refused']})", flush=True)
                        continue
                    print(f"{case}: {shares(got)} ({took:.0f} s)\n    {got['attacks']}", flush=True)
                    tally.add(privacy, got)
    for privacy, share in tally.worst.items():
        print(f"most rows rebuilt under {privacy!r} in any case: {100 * share:.2f}%")


if __name__ == "__main__":
    main()
