"""Sums over ``m`` rows whose other rows are known: targets the released model gives back.

Runs ``tests/test_privacy_values.py``'s attacks over several data seeds at the default
settings (the paper's: 50 trees, depth 8, leaf 5, B = 32): on zero-inflated targets (a
share ``p`` of lognormal amounts, 0 elsewhere), the share of all training rows whose exact
target (to 1e-6) the attacker claims from the model's node means and impurities
(``E[y^2] / E[y]``, Poisson ``exp(E[y log y] / E[y])``) or, ``--mean-only``, from the node
means and weights alone (``mean * weight / c`` for a bootstrap count ``c`` of 1 to 3),
keeping values found in nodes of two trees or more; ``--pooled``: the same from what the
server decodes under ``"secure"`` (node summaries and Round B's intervals, squared error);
and, for a class one row holds, how many training rows the box where its leaves
intersect holds.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_values.py --seeds 0 1 2 3 4
    python benchmarks/attack_values.py --seeds 0 1 --privacy secure none dp
    python benchmarks/attack_values.py --pooled --shares 0.05 0.1 0.2 0.3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff  # noqa: E402
from tests.test_privacy import _fit  # noqa: E402
from tests.test_privacy_values import (  # noqa: E402
    claimed_targets,
    node_values,
    pooled_values,
    rare_class_box,
    zero_inflated,
)


def mean_only_values(model: ff.FedForestRegressor) -> np.ndarray:
    """Per node: ``mean * weight / c`` for ``c`` = 1, 2, 3 (no impurity used)."""
    out = []
    for t, est in enumerate(model.estimators_):
        tree = est.tree_
        mu = tree.value.reshape(tree.value.shape[0], -1)[:, 0]
        total = (mu * tree.weighted_n_node_samples)[mu > 0]
        for c in (1, 2, 3):
            out.append(np.column_stack([total / c, np.full(total.size, t)]))
    return np.concatenate(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="data seeds")
    parser.add_argument(
        "--shares",
        type=float,
        nargs="+",
        default=[0.05, 0.1, 0.2],
        help="shares p of nonzero targets",
    )
    parser.add_argument(
        "--privacy", nargs="+", default=["secure", "none"], help="privacy levels (secure, none, dp)"
    )
    parser.add_argument("--epsilon", type=float, default=10.0, help="under dp")
    parser.add_argument("--mean-only", action="store_true", help="node means and weights only")
    parser.add_argument("--pooled", action="store_true", help="secure's decoded sums")
    args = parser.parse_args()
    if args.pooled:
        for p in args.shares:
            got = []
            for seed in args.seeds:
                X, y, h = zero_inflated(seed, p)
                fed = _fit(ff.FedForestRegressor(random_state=seed), X, y, h)
                got.append(claimed_targets(pooled_values(fed), y))
                got.append(float(np.mean(y != 0)))
            print(
                f"pooled sums p={p:.2f} rows' exact targets claimed (of nonzero): "
                + " ".join(f"{a:.2%} ({b:.2%})" for a, b in zip(got[::2], got[1::2], strict=True)),
                flush=True,
            )
        return
    for criterion in ("squared_error", "poisson"):
        for p in args.shares:
            for privacy in args.privacy:
                got = []
                t0 = time.perf_counter()
                for seed in args.seeds:
                    X, y, h = zero_inflated(seed, p)
                    kw = {"epsilon": args.epsilon} if privacy == "dp" else {}
                    model = ff.FedForestRegressor(
                        criterion=criterion, random_state=seed, privacy=privacy, **kw
                    )
                    _fit(model, X, y, h)
                    if args.mean_only:
                        values = mean_only_values(model)
                    else:
                        values = node_values(model, poisson=criterion == "poisson")
                    got.append(claimed_targets(values, y))
                print(
                    f"{criterion:13s} p={p:.2f} {privacy:6s} rows' exact targets claimed: "
                    + " ".join(f"{g:.2%}" for g in got)
                    + f"  ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    for seed in args.seeds:
        inside, holds, trees = rare_class_box(seed)
        print(f"one-row class, seed {seed}: {trees} trees, box holds {inside} rows ({holds=})")


if __name__ == "__main__":
    main()
