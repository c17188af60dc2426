"""privacy="dp" audited: a canary row in or out, many fits, epsilon's lower bounds.

Per budget and data seed, ``--fits`` fits of each of two neighbouring federations (three
clients of 20 rows; row 0 of ``c0`` replaced by a row whose target is 1e6), the server
recording every reply; the Neyman-Pearson test for the canary on the first grid round's
targets' histogram (``tests/_attack_dp.py``). Printed: the report's epsilon and its
Gaussian ``mu``, the canary's ``mu`` under the plan's noise, the released noise over the
plan's (the statistic's deviation without the canary) and what the report charges (below
1 after a drop), the measured ``mu`` with its
95 % lower bound and that bound as an epsilon, and the Clopper-Pearson lower bound on
epsilon (threshold chosen on half the fits, rates counted on the other half). No bound
may exceed the report's epsilon. ``--noise-factor`` below 1 is the control: every noise
share scaled down, the accountant's figures unchanged.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_dp_audit.py --fits 1000 --epsilons 1 4 16
    python benchmarks/attack_dp_audit.py --fits 200 --epsilons 4 --noise-factor 0.4
    python benchmarks/attack_dp_audit.py --fits 1000 --epsilons 4 --drop
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest  # noqa: E402

from tests._attack_dp import audit, scaled_noise, seeded_secrets  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--fits", type=int, default=1000, help="fits of each federation")
    parser.add_argument(
        "--epsilons", type=float, nargs="+", default=[1.0, 4.0, 16.0], help="budgets audited"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="data seeds")
    parser.add_argument(
        "--noise-factor",
        type=float,
        default=1.0,
        help="every noise share scaled by this (below 1: the control, which must be caught)",
    )
    parser.add_argument(
        "--drop",
        action="store_true",
        help="client c2 is lost in the first grid round (recovered without its noise share)",
    )
    parser.add_argument(
        "--secret-seed",
        type=int,
        default=None,
        help="the clients' secrets from this seed (repeatable); default the OS's generator",
    )
    args = parser.parse_args()
    print("command: python", " ".join(sys.argv))
    print("load average at start:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(
        f"{'eps':>6} {'seed':>4} {'mu_fit':>7} {'mu_canary':>9} {'noise':>6} {'charged':>7} "
        f"{'mu_hat':>7} {'mu_low':>7} {'eps_gauss':>9} {'eps_cp':>7} {'fp/tp/n':>12} {'s':>6}"
    )
    for epsilon in args.epsilons:
        for seed in args.seeds:
            with pytest.MonkeyPatch.context() as mp:
                if args.secret_seed is not None:
                    seeded_secrets(mp, args.secret_seed)
                if args.noise_factor != 1.0:
                    scaled_noise(mp, args.noise_factor)
                start = time.perf_counter()
                a = audit(args.fits, epsilon, seed, args.drop)
                took = time.perf_counter() - start
            fp, tp, n = a.rates
            print(
                f"{a.epsilon:6.2f} {seed:4d} {a.mu_fit:7.3f} {a.mu_canary:9.3f} {a.noise_sd:6.3f} "
                f"{a.noise_charged:7.3f} {a.mu_hat:7.3g} {a.mu_low:7.3g} {a.epsilon_gauss:9.3f} "
                f"{a.epsilon_cp:7.3f} {f'{fp}/{tp}/{n}':>12} {took:6.0f}",
                flush=True,
            )
    print("load average at end:", " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
