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
import sys
import warnings
from pathlib import Path
from typing import Any

from sklearn.metrics import r2_score

import fedforest as ff

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_site_categories import site_data  # noqa: E402  (the tests' data)


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
