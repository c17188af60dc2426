"""Held-out R^2 of one feature at many scales and offsets, under "secure" and "none".

The case of docs/privacy.md's "Guarantees and their limits" (grids for features far from
unit scale): ``y = z0 + 0.1 noise`` with ``z`` standard normal, two features, ``x0 =
transform(z0)`` and ``x1 = z1``; 400 training rows in two clients (alternate rows), 10
trees of default depth, ``max_features=None``, ``random_state = seed``; test R^2 on
2,000 rows of data seed ``100 + seed``. Under "secure" the root grid of ``x0`` comes from
pooled moments of ``asinh(x0)`` and pooled counts on a coarse grid; "none" sees the
clients' own values. Prints one row per transform: each seed's R^2 under both levels.

Usage::

    python benchmarks/bench_scales.py                     # every transform, seeds 0 1 2
    python benchmarks/bench_scales.py --cases "z*1e100" timestamps --seeds 0
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff  # noqa: E402

Transform = Callable[[np.ndarray, np.random.Generator], np.ndarray]

#: The transforms of z0 (a standard normal), by name.
CASES: dict[str, Transform] = {
    "z": lambda z, r: z,
    "z*100": lambda z, r: 100 * z,
    "z*1e10": lambda z, r: z * 1e10,
    "z*1e20": lambda z, r: z * 1e20,
    "z*1e50": lambda z, r: z * 1e50,
    "z*1e100": lambda z, r: z * 1e100,
    "z*1e200": lambda z, r: z * 1e200,
    "z*1e300": lambda z, r: z * 1e300,
    "exp(z)*1e100": lambda z, r: np.exp(z) * 1e100,
    "dollars": lambda z, r: np.sign(z) * np.exp(2 * np.abs(z) + 5),  # signed, heavy tails
    "counts+outliers": lambda z, r: np.where(r.random(z.size) < 0.02, 1e6, np.round(np.exp(z + 2))),
    "nanometres": lambda z, r: (5 + z) * 1e-9,
    "timestamps": lambda z, r: 1.7e9 + 3e7 * z,  # epoch seconds over about two years
    "timestamps 1 h": lambda z, r: 1.7e9 + 3600 * z,
    "timestamps 1 s": lambda z, r: 1.7e9 + z,
    "1e6+z": lambda z, r: 1e6 + z,
    "1e9+z": lambda z, r: 1e9 + z,
    "1e11+z": lambda z, r: 1e11 + z,
    "1e13+z": lambda z, r: 1e13 + z,
    "1e15+z": lambda z, r: 1e15 + z,
    "z*1e-12": lambda z, r: z * 1e-12,
    "z*1e-14": lambda z, r: z * 1e-14,
    "z*1e-16": lambda z, r: z * 1e-16,
    "z*1e-20": lambda z, r: z * 1e-20,
    "z*1e-30": lambda z, r: z * 1e-30,
    "1+z*1e-12": lambda z, r: 1 + z * 1e-12,
}


def rows(n: int, seed: int, transform: Transform) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 2))
    y = Z[:, 0] + 0.1 * rng.normal(size=n)
    X = np.column_stack([transform(Z[:, 0], np.random.default_rng(seed + 7)), Z[:, 1]])
    return X, y


def scores(transform: Transform, seeds: list[int]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"secure": [], "none": []}
    for seed in seeds:
        X, y = rows(400, seed, transform)
        X_test, y_test = rows(2000, 100 + seed, transform)
        for privacy in out:
            model = ff.FedForestRegressor(
                n_estimators=10, max_features=None, random_state=seed, privacy=privacy
            )
            with warnings.catch_warnings():  # the unresolved-feature warning, expected
                warnings.simplefilter("ignore")
                model.fit(X, y, client_ids=np.arange(400) % 2)
            out[privacy].append(float(model.score(X_test, y_test)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--cases", nargs="+", default=list(CASES), choices=list(CASES), help="feature scales"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="data seeds")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print("command: python", shlex.join(sys.argv), f"| commit {commit} | load", os.getloadavg())
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "| fedforest", ff.__file__)
    seeds = " ".join(map(str, args.seeds))
    print(f"{'x0':>16}  {'secure R^2, seeds ' + seeds:>30}  none R^2")
    for name in args.cases:
        r = scores(CASES[name], args.seeds)
        sec = " ".join(f"{v:6.3f}" for v in r["secure"])
        non = " ".join(f"{v:6.3f}" for v in r["none"])
        print(f"{name:>16}  {sec:>30}  {non}", flush=True)


if __name__ == "__main__":
    main()
