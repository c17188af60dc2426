"""Category levels under privacy="secure": the level rule's cost, and declaring the levels.

10 clients x 200 rows, four numeric features and a column of Zipf(1.6)-distributed codes
over 200 levels, each level with its own N(0, 1) effect on y (many levels rare at every
client, and they matter); 20 trees, test MSE on 1,000 fresh rows, seeds 0-2. Fits:
``"secure"`` with the level rule (the default: a client names only levels it holds in
``min_aggregate_rows`` rows, the rows of levels no client names count as missing), the
rule switched off (a patch of the handshake request: every client names every level it
holds, as before the rule), the levels declared (``categories={"icd": [...]}``) and
``"none"``. docs/privacy.md, "Category levels and class labels at the handshake".

Usage::

    python benchmarks/bench_domains.py
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

try:  # running from a checkout without ``pip install -e .``
    import fedforest  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "fedforest":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff
from fedforest.federated.server import domains, handshake

LEVELS = [f"D{c:03d}" for c in range(200)]


def _rule_off(cfg: Any) -> dict[str, Any]:
    return {k: v for k, v in domains.domain_request(cfg).items() if k != "min_level_rows"}


def data(n: int, rng: np.random.Generator, effect: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    codes = np.minimum(rng.zipf(1.6, size=n), 199)
    X = pd.DataFrame({f"x{j}": rng.normal(size=n) for j in range(4)})
    X["icd"] = [LEVELS[c] for c in codes]
    y = X["x0"] + 0.5 * X["x1"] + effect[codes] + 0.3 * rng.normal(size=n)
    return X, y.to_numpy()


def main() -> None:
    warnings.simplefilter("ignore")
    results: dict[str, list[float]] = {"rule on": [], "rule off": [], "declared": [], "none": []}
    for seed in range(3):
        rng = np.random.default_rng(seed)
        effect = rng.normal(size=200)
        X, y = data(2000, rng, effect)
        X_test, y_test = data(1000, rng, effect)
        clients = np.repeat(np.arange(10), 200)
        for name, scores in results.items():
            kw: dict[str, Any] = {"n_estimators": 20, "random_state": seed}
            if name == "declared":
                kw["categories"] = {"icd": LEVELS}
            if name == "none":
                kw["privacy"] = "none"
            handshake.domain_request = _rule_off if name == "rule off" else domains.domain_request  # type: ignore[assignment]
            try:
                model = ff.FedForestRegressor(**kw).fit(X, y, client_ids=clients)
            finally:
                handshake.domain_request = domains.domain_request  # type: ignore[assignment]
            scores.append(float(np.mean((model.predict(X_test) - y_test) ** 2)))
    for name, scores in results.items():
        print(f"{name:9s} test MSE {np.round(scores, 4)} mean {np.mean(scores):.3f}")


if __name__ == "__main__":
    main()
