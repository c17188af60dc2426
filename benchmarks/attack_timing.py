"""Timing as a side channel: a secure client's compute time per round against its rows
still in nodes that split.

Two clients of ``--rows`` rows each and five features; the classes are pure where
``x0 <= 0`` (class 0) and vary elsewhere. Client A's ``x0`` is shifted left (its rows
mostly fall into leaves early), client B's right (its rows stay in splitting nodes). Each
client's ``handle`` is timed in process (one thread each, as a site's own machine would
run it), the medians of ``--repeats`` fits are printed per round beside each client's rows
(over all trees) still in a node of that depth that is not a leaf, read from the fitted
trees. This is what a server that times each reply (a Dask actor's call, a Flower
ClientApp's run time) could read, without the transport's own delays.

Usage::

    python benchmarks/attack_timing.py --rows 150000 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections import defaultdict
from typing import Any

import numpy as np

import fedforest as ff
from fedforest.federated.client import Client
from fedforest.federated.protocol import Message


def site(rng: np.random.Generator, shift: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A client's rows: class 0 wherever ``x0 <= 0``, a noisy rule on ``x1`` elsewhere."""
    X = rng.normal(size=(n, 5))
    X[:, 0] += shift
    y = ((X[:, 0] > 0) & (X[:, 1] + 0.3 * rng.normal(size=n) > 0)).astype(int)
    return X, y


def frontier(model: Any, X: np.ndarray) -> np.ndarray:
    """Rows of ``X`` (summed over trees) in a node of depth L that is not a leaf, per L."""
    out = np.zeros(model.max_depth + 1)
    leaves = model.apply(X)
    for j, tree in enumerate(model.trees_):
        depth = np.zeros(len(tree.feature), dtype=int)
        for i in range(len(tree.feature)):  # parents come before their children
            for child in (tree.children_left[i], tree.children_right[i]):
                if child >= 0:
                    depth[child] = depth[i] + 1
        reached = depth[leaves[:, j]]
        out += [(reached > level).sum() for level in range(model.max_depth + 1)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=150_000, help="rows of each client")
    parser.add_argument("--repeats", type=int, default=2, help="fits timed (after a warm-up)")
    parser.add_argument("--trees", type=int, default=10, help="n_estimators")
    args = parser.parse_args()
    print("command: python", " ".join(sys.argv))
    print("load average at start:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    rng = np.random.default_rng(0)
    data = {"A": site(rng, -2.5, args.rows), "B": site(rng, 2.5, args.rows)}
    times: dict[str, list[tuple[str, float]]] = defaultdict(list)
    handle = Client.handle

    def timed(self: Client, msg: Message) -> Message:
        start = time.perf_counter()
        answer = handle(self, msg)
        times[self.name].append((msg.kind, time.perf_counter() - start))
        return answer

    Client.handle = timed  # type: ignore[method-assign]
    runs = []
    for repeat in range(args.repeats + 1):  # the first compiles numba's kernels: left out
        times.clear()
        clients = [ff.Client(*data[name], name) for name in data]
        for client in clients:
            client.n_threads = 1
        model = ff.FedForestClassifier(n_estimators=args.trees, max_depth=8, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit_federated(ff.LocalFederation(clients))
        if repeat:
            runs.append({name: list(v) for name, v in times.items()})
    Client.handle = handle  # type: ignore[method-assign]
    median = {name: np.median([[t for _, t in run[name]] for run in runs], axis=0) for name in data}
    rows = {name: frontier(model, data[name][0]) for name in data}
    level = -1
    print("round       A ms    B ms   B/A   | frontier rows A, B   B/A")
    for i, (kind, _) in enumerate(runs[0]["A"]):
        a, b = 1e3 * median["A"][i], 1e3 * median["B"][i]
        line = f"{kind:9s} {a:7.1f} {b:7.1f} {b / a:5.2f}"
        if kind == "round_a":
            level += 1
        if kind in ("round_a", "round_b"):
            ra, rb = rows["A"][level], rows["B"][level]
            line += f" | {ra:9.0f} {rb:9.0f} {rb / max(ra, 1.0):5.2f}"
        print(line)
    print("load average at end:", " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
