"""privacy="dp" audited inside a tree: an entry the canary's count moves (root, Round B, deeper).

``tests/_attack_dp_tree.py`` says how: three clients of 20 rows (``--rows``), one tree of
depth 1, the canary's target ``-1e6`` (``D``) or ``+1e6`` (``D'``), each fit run to its first
Round A with seeded secrets (``--where``: its first Round B, or a tree of depth 2 to its
second Round A; ``--task classification``: the canary's label 0 or 1, the class columns'
difference). The statistic is the root's noisy ``sum c z`` less every other row's
exact part (a white-box auditor: everything but the noise), in units of the plan's noise
for that entry. Printed: the report's epsilon and its Gaussian ``mu``; the accountant's
charge for this entry (2 units a replaced row) as a ``mu``; per canary count the measured
``mu`` (D' against D) with its 95 % lower bound; the released noise over the plan's (fits
where the canary is out of the bag); and Clopper-Pearson's 95 % lower bound on epsilon
(threshold chosen on the first half of the fits, rates on the second).

Usage (from the repository root)::

    python benchmarks/attack_dp_tree.py --fits 400 --epsilons 4 64
    python benchmarks/attack_dp_tree.py --fits 400 --epsilons 64 --force 6
    python benchmarks/attack_dp_tree.py --fits 200 --epsilons 64 --force 6 --cap-off
    python benchmarks/attack_dp_tree.py --fits 400 --epsilons 16 64 --where round_b --rows 100
    python benchmarks/attack_dp_tree.py --fits 400 --epsilons 64 --where deep --rows 100
    python benchmarks/attack_dp_tree.py --fits 400 --epsilons 64 --task classification --rows 100
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests._attack_dp_tree import tree_audit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--fits", type=int, default=400, help="fits per side (D and D')")
    parser.add_argument(
        "--epsilons", type=float, nargs="+", default=[4.0, 64.0], help="epsilons asked"
    )
    parser.add_argument("--seed", type=int, default=0, help="data seed (secrets follow it)")
    parser.add_argument(
        "--force", type=int, default=None, help="the canary's raw count in every tree"
    )
    parser.add_argument(
        "--cap-off", action="store_true", help="control: the canary's count not capped"
    )
    parser.add_argument(
        "--noise-factor", type=float, default=1.0, help="control: every noise share scaled"
    )
    parser.add_argument(
        "--where",
        choices=["root", "round_b", "deep", "group"],
        default="root",
        help="the audited entry: the root's Round A summary, its Round B increment holding "
        "the canary, the depth-1 node's summary, or the root's category group holding it "
        "(the feature as a category column of 4 levels)",
    )
    parser.add_argument(
        "--task",
        choices=["regression", "classification"],
        default="regression",
        help="classification: the canary's label 0 or 1, the class columns audited",
    )
    parser.add_argument("--rows", type=int, default=20, help="rows per client (3 clients)")
    args = parser.parse_args()
    print("command: python " + " ".join(sys.argv), f"| load {os.getloadavg()}", flush=True)
    for eps in args.epsilons:
        start = time.perf_counter()
        r = tree_audit(
            args.fits,
            eps,
            task=args.task,
            seed=args.seed,
            force=args.force,
            cap_off=args.cap_off,
            noise_factor=args.noise_factor,
            where=args.where,
            n_rows=args.rows,
        )
        counts = "; ".join(
            f"count {c:g}: mu {v['mu']:.3f} [{v['mu_low']:.3f}] ({v['fits'][0]} fits a side)"
            for c, v in r["by_count"].items()
        )
        print(
            f"epsilon asked {eps:g}: report {r['epsilon']:.3f} (mu {r['mu_fit']:.3f}); "
            f"entry charged mu {r['mu_entry']:.3f}, the capped canary's {r['mu_expected']:.3f}; "
            f"{counts}; noise/plan {r['noise_sd']:.3f}; "
            f"epsilon lower bounds: Gaussian at the top count {r['epsilon_gauss']:.2f}, "
            f"Clopper-Pearson {r['epsilon_cp']:.2f} (fp, tp, n {r['rates']}); "
            f"{time.perf_counter() - start:.0f} s",
            flush=True,
        )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
