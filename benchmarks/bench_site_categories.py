"""A categorical column whose levels each one client holds (a hospital's own wards).

``ward``: ``clients * per_client`` levels of ``rows`` rows, each level held by one
client, beside ``x1`` (signal) and ``x2`` (noise); ``y`` = the ward's effect + ``x1`` +
noise. Five trees, ``max_features=1/3`` (one feature a node), ``random_state=0``; R² on
a new sample of the same wards, the trees that are a single leaf, and each tree's root
feature (-2: a leaf), under ``"secure"`` and ``"none"``. See docs/privacy.md,
"Categories" (a column of few rows per level).

    python benchmarks/bench_site_categories.py --rows 10 20 50 --clients 3 6 12 --per-client 1 2
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import r2_score

import fedforest as ff


def site_data(
    n_clients: int, per_client: int, rows: int, seed: int
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The ward column (each level one client's), x1, x2, y and the client per row."""
    rng = np.random.default_rng(seed)
    n_levels = n_clients * per_client
    level = np.repeat(np.arange(n_levels), rows)
    effect = np.random.default_rng(1000).normal(0, 2, n_levels)
    x1, x2 = rng.normal(size=level.size), rng.normal(size=level.size)
    y = effect[level] + x1 + 0.3 * rng.normal(size=level.size)
    names = [f"w{k}" for k in range(n_levels)]
    ward = pd.Categorical([names[k] for k in level], categories=names)
    return pd.DataFrame({"ward": ward, "x1": x1, "x2": x2}), y, level // per_client


def run(n_clients: int, per_client: int, rows: int, privacy: str) -> dict[str, Any]:
    X, y, h = site_data(n_clients, per_client, rows, 0)
    X_test, y_test, _ = site_data(n_clients, per_client, rows, 1)
    model = ff.FedForestRegressor(n_estimators=5, privacy=privacy, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y, client_ids=h)
    return {
        "r2": r2_score(y_test, model.predict(X_test)),
        "single": sum(t.feature.size == 1 for t in model.trees_),
        "roots": [int(t.feature[0]) for t in model.trees_],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--rows", type=int, nargs="+", default=[10, 20, 50], help="rows a level")
    parser.add_argument("--clients", type=int, nargs="+", default=[3, 6, 12], help="clients")
    parser.add_argument(
        "--per-client", type=int, nargs="+", default=[1, 2], help="levels each client holds"
    )
    args = parser.parse_args()
    for rows in args.rows:
        for n_clients in args.clients:
            for per_client in args.per_client:
                out = []
                for privacy in ("secure", "none"):
                    r = run(n_clients, per_client, rows, privacy)
                    out.append(
                        f"{privacy}: R2 {r['r2']:.3f} single-leaf trees {r['single']}/5 "
                        f"roots {r['roots']}"
                    )
                head = f"rows {rows:2d} clients {n_clients:2d} levels/client {per_client}"
                print(f"{head}: " + " | ".join(out), flush=True)


if __name__ == "__main__":
    main()
