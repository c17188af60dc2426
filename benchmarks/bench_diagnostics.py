"""Calibration and power of ``fedforest.diagnose`` by simulation (docs/heterogeneity.md).

For each scenario, ``--draws`` independent datasets (seeds 0..draws-1); each is diagnosed
once and the rejection rate of both tests at ``alpha`` is reported with a 95 % Wilson
interval. Under a true null hypothesis the rate is the false-positive rate (target: within
[0.02, 0.08] at alpha = 0.05); otherwise it is the power.

Scenarios (K clients; the paper's generator has K = 10, n_k = 200, d = 20):

- paper homogeneous / covariate shift (gamma=3, alpha=0.5) / outcome shift (delta=1.5) /
  both, regression;
- the same homogeneous and covariate-shifted data as classification (y > its median);
- the review's null: 4 clients, x1 ~ N(+-3, 0.5) by client, y = 2 1[x1 > 0] + 0.5 x2 +
  noise, so E[Y | X, H] = E[Y | X] under strong covariate shift;
- weak outcome shift (delta = 0.3): power where the signal is small.

Run: python benchmarks/bench_diagnostics.py --draws 200 --out results/diagnostics.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from typing import Any

import numpy as np
from joblib import Parallel, delayed

import fedforest as ff
from fedforest.datasets import make_paper_synthetic

#: name -> (data maker, task, H0 of covariate test true?, H0 of outcome test true?)
SCENARIOS: dict[str, tuple[str, str, bool, bool]] = {
    "homogeneous": ("homogeneous", "regression", True, True),
    "covariate shift": ("covariate-shift", "regression", False, True),
    "outcome shift": ("outcome-shift", "regression", True, False),
    "both shifts": ("both-shifts", "regression", False, False),
    "homogeneous, classification": ("homogeneous", "classification", True, True),
    "covariate shift, classification": ("covariate-shift", "classification", False, True),
    "outcome shift, classification": ("outcome-shift", "classification", True, False),
    "review's null (x1 ~ N(+-3, .5) by client)": ("review-null", "regression", False, True),
    "weak outcome shift (delta = 0.3)": ("weak-outcome", "regression", True, False),
}


def make(kind: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One draw of a scenario's data: X, y, client ids."""
    if kind == "review-null":
        rng = np.random.default_rng(seed)
        n = 2000
        h = np.arange(n) % 4
        x1 = rng.normal(np.where(h % 2 == 0, 3.0, -3.0), 0.5)
        X = np.column_stack([x1, rng.normal(size=(n, 4))])
        return X, 2.0 * (x1 > 0) + 0.5 * X[:, 1] + rng.normal(size=n), h
    if kind == "weak-outcome":
        d = make_paper_synthetic("outcome-shift", delta=0.3, random_state=seed)
    else:
        d = make_paper_synthetic(kind, random_state=seed)
    return d.X_train, d.y_train, d.h_train


def one(name: str, seed: int, alpha: float) -> dict[str, Any]:
    kind, task, _, _ = SCENARIOS[name]
    X, y, h = make(kind, seed)
    if task == "classification":
        y = (y > np.median(y)).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # rows in every bag: expected
        r = ff.diagnose(X, y, h, task=task, random_state=seed, alpha=alpha, privacy="none")
    return {
        "p_shift": r.covariate_shift_pvalue,
        "p_outcome": r.outcome_heterogeneity_pvalue,
        "rounds": r.rounds,
        "megabytes": r.megabytes,
    }


def wilson(k: int, n: int) -> tuple[float, float]:
    """95 % Wilson interval of a rate."""
    if n == 0:
        return float("nan"), float("nan")
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--draws", type=int, default=200, help="data draws per scenario")
    ap.add_argument("--alpha", type=float, default=0.05, help="test level")
    ap.add_argument("--n-jobs", type=int, default=2, help="parallel draws")
    ap.add_argument("--scenarios", nargs="*", default=None, help="subset (names as above)")
    ap.add_argument("--out", default="results/diagnostics.json", help="JSON file to write")
    args = ap.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.scenarios or s in args.scenarios]
    t0 = time.time()
    rows = []
    print("| scenario | H0 true | covariate-shift test rejects | outcome test rejects |")
    print("|---|---|---|---|")
    for name in chosen:
        runs = Parallel(n_jobs=args.n_jobs)(
            delayed(one)(name, seed, args.alpha) for seed in range(args.draws)
        )
        _, _, shift_null, outcome_null = SCENARIOS[name]
        cells = []
        row: dict[str, Any] = {"scenario": name, "draws": args.draws}
        for key, null in (("p_shift", shift_null), ("p_outcome", outcome_null)):
            p = np.array([r[key] for r in runs])
            k = int((p < args.alpha).sum())
            lo, hi = wilson(k, len(p))
            row[key] = {"rejections": k, "rate": k / len(p), "wilson95": [lo, hi], "null": null}
            label = "FPR" if null else "power"
            cells.append(f"{label} {k / len(p):.3f} [{lo:.3f}, {hi:.3f}]")
        row["rounds"] = float(np.median([r["rounds"] for r in runs]))
        row["megabytes"] = float(np.median([r["megabytes"] for r in runs]))
        nulls = ", ".join(
            n for n, t in (("X⊥H", shift_null), ("E[Y|X,H]=E[Y|X]", outcome_null)) if t
        )
        print(f"| {name} | {nulls or '—'} | {cells[0]} | {cells[1]} |", flush=True)
        rows.append(row)
    meta = {
        "command": "python benchmarks/bench_diagnostics.py " + " ".join(argv or sys.argv[1:]),
        "machine": platform.platform(),
        "python": sys.version.split()[0],
        "fedforest": ff.__version__,
        "seconds": time.time() - t0,
    }
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "results": rows}, fh, indent=1)
    print(f"{time.time() - t0:.0f} s; written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
