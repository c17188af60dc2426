"""What the released counts cover: distinct rows against draws, and "dp"'s noise on counts.

``draws`` (the default): a default secure fit at the paper's settings (10 clients x 200
rows x 20 features, 50 trees of depth 8, leaf 5, B = 32); each client's in-bag rows and
draws are taken from its own set-up (ground truth the server never sees) and routed
through the fitted trees; prints the nodes, those whose ``n_node_samples`` or
``weighted_n_node_samples`` differ from the clients' distinct rows and draws, and the
distinct rows of every node under ``min_aggregate_rows`` (10). ``--draws-as-rows``: the
clients count every draw as a row (the protection off).

``dp``: a ``privacy="dp"`` regression fit on 10 clients x 140 rows x 4 features; the
recording server decodes the targets' histogram and the second grid round's counts and
subtracts the data's own counts: the noise each release carried, against the plan's.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_counts.py draws --task regression classification
    python benchmarks/attack_counts.py draws --draws-as-rows
    python benchmarks/attack_counts.py dp --epsilon 50 --trees 3 --depth 3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff  # noqa: E402
from fedforest.federated.client_secure import target_grid  # noqa: E402
from fedforest.federated.privacy.dp import ASINH_CLIP, TARGET_NOISE_RATIO  # noqa: E402
from fedforest.federated.privacy.grids import libm_arcsinh  # noqa: E402
from tests.test_privacy import RecordingFederation, _data, _fit  # noqa: E402
from tests.test_privacy_counts import (  # noqa: E402
    M,
    _capture_in_bag,
    _grid_releases,
    _nodes_against_ground_truth,
)


def draws(task: str, trees: int, seed: int, draws_as_rows: bool) -> None:
    X, y, h = _data(n_clients=10, n_rows=200, d=20, seed=seed)
    est = ff.FedForestRegressor
    if task == "classification":
        y, est = (y > np.median(y)).astype(int), ff.FedForestClassifier
    with pytest.MonkeyPatch.context() as patch:
        captured = _capture_in_bag(patch, draws_as_rows)
        model = est(n_estimators=trees, random_state=seed)
        _fit(model, X, y, h)
    nodes, wrong, small = _nodes_against_ground_truth(model, X, h, captured)
    print(
        f"{task}, seed {seed}, draws counted as rows: {draws_as_rows}: {nodes} nodes, "
        f"{wrong} counts unlike the clients' own, {len(small)} nodes under {M} distinct rows "
        f"(of each size 0..{M - 1}: {np.bincount(small, minlength=M).tolist()})"
    )


def dp(epsilon: float, trees: int, depth: int, n_clients: int) -> None:
    rng = np.random.default_rng(0)
    n = 140
    X = rng.normal(size=(n_clients * n, 4))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=X.shape[0])
    h = np.repeat(np.arange(n_clients), n)
    clients = [ff.Client(X[h == k], y[h == k], name=f"c{k}") for k in range(n_clients)]
    fed = RecordingFederation(ff.LocalFederation(clients))
    model = ff.FedForestRegressor(
        n_estimators=trees, max_depth=depth, max_features=2, privacy="dp", epsilon=epsilon,
        random_state=0,
    ).fit_federated(fed)  # fmt: skip
    plan = model.privacy_report_
    y_hist, hist, edges, feats = _grid_releases(fed)
    exact = np.histogram(np.clip(libm_arcsinh(y), -ASINH_CLIP, ASINH_CLIP), bins=target_grid())[0]
    noise = y_hist - exact
    least = plan.get("min_sigma", 0.0)  # main has none
    unfloored = plan["noise_multiplier"] * plan["sensitivity"]  # the trees' sigma without it
    planned = max(plan["sigma"] / TARGET_NOISE_RATIO, least)
    print(
        f"epsilon {epsilon}, {trees} trees of depth {depth}, {n_clients} clients: trees' sigma "
        f"{plan['sigma']:.3f} ({unfloored:.3f} without a least noise), least noise {least:.3f}; "
        f"targets' histogram: asked {planned:.3f} (shares {planned / np.sqrt(n_clients):.3f}), "
        f"read {noise.std():.3f}, {int((noise == 0).sum())} of {noise.size} bins exact"
    )
    columns = [np.sort(X[:, j]) for j in feats]
    counts = np.array(
        [np.searchsorted(c, e, side="right") for c, e in zip(columns, edges, strict=True)]
    )
    noise = hist - np.diff(counts, axis=1, prepend=0)
    planned = max(plan["sigma"] / 3.0, least)
    print(
        f"  grid counts: asked {planned:.3f} (shares {planned / np.sqrt(n_clients):.3f}), "
        f"read {noise.std():.3f}, {int((noise == 0).sum())} of {noise.size} exact"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    sub = parser.add_subparsers(dest="attack", help="the attack (draws without one)")
    p = sub.add_parser(
        "draws",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="node counts against the clients' in-bag rows",
    )
    p.add_argument("--task", nargs="+", default=["regression"], help="regression, classification")
    p.add_argument("--trees", type=int, default=50, help="trees of the forest")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="random_state of the fits")
    p.add_argument(
        "--draws-as-rows",
        action="store_true",
        help="clients count every draw as a row (protection off)",
    )
    q = sub.add_parser(
        "dp",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help='the noise "dp"\'s count releases carry',
    )
    q.add_argument("--epsilon", type=float, default=50.0, help="the fit's epsilon")
    q.add_argument("--trees", type=int, default=3, help="trees of the forest")
    q.add_argument("--depth", type=int, default=3, help="max_depth")
    q.add_argument("--clients", type=int, default=10, help="clients of 140 rows each")
    args = parser.parse_args()
    if args.attack == "dp":
        dp(args.epsilon, args.trees, args.depth, args.clients)
        return
    for task in getattr(args, "task", ["regression"]):
        for seed in getattr(args, "seeds", [0]):
            draws(task, getattr(args, "trees", 50), seed, getattr(args, "draws_as_rows", False))


if __name__ == "__main__":
    main()
