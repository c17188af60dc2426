"""privacy="dp": test MSE with and without clipping leaf values to the targets' range.

Under "dp" the server clips every regression node value to where the released noisy
histogram of asinh(y) shows the targets (``server/dp_checks.py``; post-processing, no
privacy cost). This measures what the clip does to honest fits, paired: each forest is
fitted with the clip switched off (a patch of the grower that records the range), and
predicts the test rows with its leaf values as grown and clipped to that range. The
noise comes from the operating system's generator, so each run draws other forests.
Targets: ``uniform`` (``0.8 * 1[x0 > 0] + 0.2 U(0, 1)``, in [0, 1]) and ``normal``
(``x0 + 0.1 noise``, clipped to [-3, 3]); 3 clients, 5 trees of depth 3.

Usage::

    python benchmarks/bench_dp_leaf_range.py [--rows 3000] [--repeats 5] [--epsilon 50]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

try:  # running from a checkout without ``pip install -e .``
    import fedforest  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "fedforest":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff
from fedforest.federated.server import grower


def _data(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.normal(size=(n, 4))
    if kind == "uniform":
        y = np.clip(0.8 * (X[:, 0] > 0) + 0.2 * rng.uniform(size=n), 0.0, 1.0)
    else:
        y = np.clip(X[:, 0] + 0.1 * rng.normal(size=n), -3.0, 3.0)
    return X, y


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=3000, help="training (and test) rows")
    parser.add_argument("--repeats", type=int, default=5, help="fits per case (random_state 0 on)")
    parser.add_argument("--epsilon", type=float, default=50.0, help="epsilon of the dp fits")
    args = parser.parse_args()
    print("command: python benchmarks/bench_dp_leaf_range.py " + " ".join(sys.argv[1:]))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"commit: {commit}")
    clip = grower.clip_leaf_values
    seen: list[tuple[np.ndarray, np.ndarray]] = []

    def keep(tree: Any, lo: np.ndarray, hi: np.ndarray) -> Any:
        seen.append((lo, hi))  # the range the fit found; the trees left unclipped
        return tree

    grower.clip_leaf_values = keep  # type: ignore[assignment]
    try:
        for kind in ("uniform", "normal"):
            ratios, mse = [], {"clip": [], "no clip": []}
            for r in range(args.repeats):
                rng = np.random.default_rng(r)
                X, y = _data(kind, args.rows, rng)
                X_test, y_test = _data(kind, args.rows, rng)
                h = rng.integers(0, 3, size=args.rows)
                seen.clear()
                model = ff.FedForestRegressor(
                    n_estimators=5, max_depth=3, privacy="dp", epsilon=args.epsilon, random_state=r
                ).fit(X, y, client_ids=h)
                lo, hi = seen[0]
                leaves = model.apply(X_test)  # the same forest, its leaves clipped or not
                raw = np.stack([t.value[leaves[:, i], 0] for i, t in enumerate(model.trees_)])
                for name, p in (("no clip", raw), ("clip", np.clip(raw, lo[0], hi[0]))):
                    mse[name].append(float(np.mean((p.mean(axis=0) - y_test) ** 2)))
                ratios.append(mse["clip"][-1] / mse["no clip"][-1])
            print(
                f"{kind:8s} var(y) {np.var(y_test):.4f}  MSE clip {np.mean(mse['clip']):.4f}  "
                f"no clip {np.mean(mse['no clip']):.4f}  clip / no clip per repeat "
                f"{np.round(ratios, 3).tolist()}"
            )
    finally:
        grower.clip_leaf_values = clip


if __name__ == "__main__":
    main()
