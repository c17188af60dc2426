"""Accuracy of weighted secure forests with the sample weights' band on and off (issue 11).

Under ``privacy="secure"`` the clients trim their sample weights to within
``WEIGHT_RATIO`` times the pooled geometric mean either way
(``fedforest/federated/privacy/weight_band.py``). This measures what that costs on a
weighted task: 10 clients x 200 rows, 6 features, ``y = x0 + sin(2 x1) + x2 x3 + u +
noise`` with ``u`` standard normal and not a feature, each row's weight ``exp(s (x0 +
u))`` (importance weights of log-spread ``s`` that follow a feature and ``u``: the
weighted mean of ``y`` given ``x`` is ``s`` above the unweighted one, so trimming the
weights costs accuracy), scored by the weighted mean squared error on 4,000 held-out rows under
their own (untrimmed) weights; ``mse_plain`` is the secure forest without weights (what the
weights buy). Per seed the data, the forest's ``random_state`` and the
clients are the same in each run (paired); the band off is ``WEIGHT_RATIO = 1e100`` (the
weights as given); ``"none"`` trims nothing.

Usage (from the repository root)::

    python benchmarks/bench_weight_band.py --seeds 0 1 2 3 4 --spreads 0.5 1 1.5
    python benchmarks/bench_weight_band.py --seeds 0 1 2 3 4 --spreads 1 --ratio 3
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings

import numpy as np

import fedforest as ff
from fedforest.federated.privacy import weight_band


def data(seed: int, n: int, spread: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    u = rng.normal(size=n)  # not a feature: only the weights correct for it
    y = X[:, 0] + np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 3] + u + 0.3 * rng.normal(size=n)
    w = np.exp(spread * (X[:, 0] + u))
    return X, y, w


def run(
    seed: int, spread: float, privacy: str, band: bool, ratio: float, weighted: bool = True
) -> tuple[float, float]:
    """(weighted test MSE, share of the training weights the band trims)."""
    X, y, w = data(seed, 2000, spread)
    Xt, yt, wt = data(seed + 1000, 4000, spread)
    h = np.repeat(np.arange(10), 200)
    default = weight_band.WEIGHT_RATIO
    weight_band.WEIGHT_RATIO = ratio if band else 1e100
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model = ff.FedForestRegressor(n_estimators=30, random_state=seed, privacy=privacy)
            model.fit(X, y, client_ids=h, sample_weight=w if weighted else None)
    finally:
        weight_band.WEIGHT_RATIO = default
    g = np.exp(np.log(w).mean())
    trimmed = float(np.mean((w < g / ratio) | (w > g * ratio)))
    return float(np.average((model.predict(Xt) - yt) ** 2, weights=wt)), trimmed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="data seeds")
    parser.add_argument(
        "--spreads", type=float, nargs="+", default=[0.5, 1.0, 1.5], help="spreads of the weights"
    )
    parser.add_argument(
        "--ratio", type=float, default=weight_band.WEIGHT_RATIO, help="the band's WEIGHT_RATIO"
    )
    args = parser.parse_args()
    logging.getLogger("fedforest.client").setLevel(logging.ERROR)  # the clients' trim notes
    print("python", " ".join(sys.argv))
    print("spread seed trimmed  mse_band  mse_off  mse_none  mse_plain  band/off")
    for spread in args.spreads:
        ratios = []
        for seed in args.seeds:
            start = time.time()
            on, trimmed = run(seed, spread, "secure", True, args.ratio)
            off, _ = run(seed, spread, "secure", False, args.ratio)
            none, _ = run(seed, spread, "none", True, args.ratio)
            plain, _ = run(seed, spread, "secure", True, args.ratio, weighted=False)
            ratios.append(on / off)
            print(
                f"{spread:6.2f} {seed:4d} {trimmed:7.3f} {on:9.4f} {off:8.4f} {none:9.4f} "
                f"{plain:9.4f} {on / off:9.4f}  ({time.time() - start:.0f} s)",
                flush=True,
            )
        print(
            f"spread {spread}: band/off mean {np.mean(ratios):.4f}, range "
            f"{min(ratios):.4f} to {max(ratios):.4f}"
        )


if __name__ == "__main__":
    main()
