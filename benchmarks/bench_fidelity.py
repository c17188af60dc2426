"""Depth-3 fidelity against pooled CART, per random_state: how robust is the 98.5 % target?

The setting of
``tests/test_secure.py::test_splits_are_the_best_released_candidates_at_scale`` (which
checks Theorem 3.2's exact statement: each split the best of the released candidates;
issue 11's 98.5 % agreement with pooled CART is measured here, as it holds for some
bootstraps only): 200,000 rows in 10 clients with shifted covariates, one tree, depth 4,
every feature, B = 100. Each depth-3 node's split, applied to the node's in-bag rows, is
compared with scikit-learn's best split of those rows (same weights, same leaf rule);
agreement is the share of rows both send the same way. Printed per ``random_state`` and
privacy level: the least agreeing node, its feature and thresholds against CART's, the
weighted rank of both thresholds in the node, and the gain of our split as a share of
CART's.

"CART vs CART" is the scale of the noise CART's own choice carries: the least, over three
draws, agreement of CART on the same rows with its weights times a fresh Poisson(1) draw
(another bootstrap of the node's rows) with CART on the rows as drawn. Where it is well
below 98.5 %, CART's threshold moves by more than 1.5 % of the node's rows from one
bootstrap to the next: the gain is flat near its best, and its exact argmax is noise.

``--oracle`` takes the protocol out: on the same nodes (those of the secure tree), the
best split over ``B - 1`` exact weighted quantiles ``(b - 1 + u) / B`` of the node's rows
per feature (no grid, no privacy rule; offsets ``u`` of 0.25, 0.5, 0.75 and 1), for ``B``
of 100 to 1,000 and every midpoint, against CART's: the share of (node, offset) cases
below 98.5 %.

``--why`` records each fit's messages (``"secure"`` only) and, for every depth-3 node
below 98.5 % whose split is on CART's feature, counts the candidates released on that
feature that would have agreed on 98.5 % of the rows ("in band") and the gain of the best
of them as a share of the split's: below 1, a candidate near CART's threshold was there
and lost to one farther away by that much; none in band, the candidates missed CART's
threshold. ``--ablate MODE`` patches the server as ``ablate_secure.py``'s mode ``MODE``
does (``no-rules``, ``no-guides``; UNSAFE ones for measurement only).

Usage::

    python benchmarks/bench_fidelity.py                          # seeds 0-4, secure and none
    python benchmarks/bench_fidelity.py --seeds 0 1 --privacy secure
    python benchmarks/bench_fidelity.py --oracle
    python benchmarks/bench_fidelity.py --privacy secure --why --seeds $(seq 0 29)
    python benchmarks/bench_fidelity.py --privacy secure --why --ablate no-rules
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

try:  # running from a checkout without ``pip install -e .``
    import fedforest  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "fedforest":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.tree import DecisionTreeRegressor

import fedforest as ff
from fedforest.federated.client import bootstrap_counts
from fedforest.federated.federation import Federation
from fedforest.federated.grid_wire import sent_candidates
from fedforest.federated.protocol import ROUND_A, ROUND_B, Message


class Recorder(Federation):
    """Delivers every message and keeps the requests of the depth-3 level (``--why``)."""

    def __init__(self, inner: Federation, record: bool) -> None:
        self.inner, self.record, self.level, self.round_a = inner, record, -1, None
        self.depth3: tuple[np.ndarray, ...] | None = None

    @property
    def client_names(self) -> list[str]:
        return self.inner.client_names

    def send_and_receive(self, requests: dict[str, Message], round_index: int):  # type: ignore[no-untyped-def]
        req = next(iter(requests.values()))
        if req.kind == ROUND_A:
            self.level, self.round_a = self.level + 1, req
        elif req.kind == ROUND_B and self.record and self.level == 3 and self.round_a is not None:
            a = self.round_a.arrays
            cand = sent_candidates(self.round_a, req)
            self.depth3 = (a["pair_off"], a["pair_feat"], req.arrays["cand_off"], cand)
        return self.inner.send_and_receive(requests, round_index)


def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The test's rows: 200,000 x 6, 10 clients with shifted covariates."""
    rng = np.random.default_rng(0)
    n, k, d = 200_000, 10, 6
    h = rng.integers(0, k, n)
    X = rng.normal(size=(n, d)) + (h[:, None] - k / 2) * 0.3
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 1.5 * (X[:, 2] > 0.5) + X[:, 3] * X[:, 4]
    return X, y + rng.normal(scale=0.3, size=n), h


def gain(x: np.ndarray, y: np.ndarray, w: np.ndarray, t: float) -> float:
    """Weighted variance reduction (times the weight) of the split ``x <= t``."""
    left = x <= t

    def part(m: np.ndarray) -> float:
        return float((w[m] * y[m]).sum() ** 2 / w[m].sum())

    return part(left) + part(~left) - float((w * y).sum() ** 2 / w.sum())


def cart(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[int, float]:
    ref = DecisionTreeRegressor(max_depth=1, min_samples_leaf=10).fit(X, y, sample_weight=w)
    return int(ref.tree_.feature[0]), float(ref.tree_.threshold[0])


def quantile_split(
    X: np.ndarray, y: np.ndarray, w: np.ndarray, n_bins: int | None, u: float
) -> tuple[int, float]:
    """Best split over exact weighted quantile thresholds (every midpoint for None)."""
    best, out = -np.inf, (0, 0.0)
    total_w, total_s = w.sum(), (w * y).sum()
    for f in range(X.shape[1]):
        order = np.argsort(X[:, f], kind="stable")
        x = X[order, f]
        cw, cs = np.cumsum(w[order]), np.cumsum(w[order] * y[order])
        ends = np.flatnonzero(np.r_[x[1:] != x[:-1], False])  # last of each run of equals
        idx = ends
        if n_bins is not None:
            levels = total_w * (np.arange(1, n_bins) - 1 + u) / n_bins
            j = np.searchsorted(ends, np.searchsorted(cw, levels, side="left"))
            idx = np.unique(ends[j[j < ends.size]])
        idx = idx[(idx + 1 >= 10) & (x.size - idx - 1 >= 10)]  # the leaf rule, 10 rows
        if idx.size == 0:
            continue
        g = cs[idx] ** 2 / cw[idx] + (total_s - cs[idx]) ** 2 / (total_w - cw[idx])
        k = int(np.argmax(g))
        if g[k] > best:
            best, out = g[k], (f, float((x[idx[k]] + x[idx[k] + 1]) / 2))
    return out


def in_band(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, cands: np.ndarray, cart_left: np.ndarray, t: float
) -> tuple[int, float]:
    """Candidates on CART's feature agreeing with CART on 98.5 % of the rows; their best gain.

    The gain is a share of the split's (``t`` on the same feature); NaN when none is in band.
    """
    band = [
        c
        for c in cands
        if max(np.mean((x <= c) == cart_left), np.mean((x <= c) != cart_left)) >= 0.985
    ]
    if not band:
        return 0, float("nan")
    sides = [x[x <= c].size for c in band]  # the leaf rule: 10 rows a side
    best = max(
        (gain(x, y, w, c) for c, k in zip(band, sides, strict=True) if 10 <= k <= x.size - 10),
        default=float("nan"),
    )
    return len(band), best / gain(x, y, w, t)


def run(
    seed: int,
    privacy: str,
    X: np.ndarray,
    y: np.ndarray,
    h: np.ndarray,
    with_oracle: bool,
    why: bool = False,
) -> dict:
    parts = [np.flatnonzero(h == c) for c in range(int(h.max()) + 1)]
    clients = [ff.Client(X[i], y[i], str(c)) for c, i in enumerate(parts)]
    model = ff.FedForestRegressor(
        n_estimators=1, max_depth=4, max_features=None, n_bins=100, random_state=seed, n_jobs=2
    )
    fed = Recorder(ff.LocalFederation(clients), why and privacy != "none")
    model.set_params(privacy=privacy).fit_federated(fed)
    tree = model.trees_[0]
    tree_seed = int(np.random.RandomState(seed).randint(np.iinfo(np.int32).max))
    w = np.zeros(len(y))
    for c, idx in enumerate(parts):  # the in-bag weights (the clients' secrets: test only)
        party = clients[c]._secure
        secret = None if party is None else party.bootstrap_secret()
        w[idx] = bootstrap_counts(tree_seed, 0, str(c), idx.size, secret)
    members, depth, nodes = {0: np.flatnonzero(w > 0)}, {0: 0}, []
    for i in range(tree.node_count):
        if tree.children_left[i] < 0 or i not in members:
            continue
        rows, f, t = members[i], int(tree.feature[i]), float(tree.threshold[i])
        go = X[rows, f] <= t
        members[tree.children_left[i]], members[tree.children_right[i]] = rows[go], rows[~go]
        depth[tree.children_left[i]] = depth[tree.children_right[i]] = depth[i] + 1
        if depth[i] != 3:
            continue
        cf, ct = cart(X[rows], y[rows], w[rows])
        theirs = X[rows, cf] <= ct
        agree = max(np.mean(go == theirs), np.mean(go != theirs))
        noise = []
        for r in range(3):
            w2 = w[rows] * np.random.default_rng(100 + r).poisson(1.0, rows.size)
            f2, t2 = cart(X[rows], y[rows], w2)
            other = X[rows, f2] <= t2
            noise.append(max(np.mean(other == theirs), np.mean(other != theirs)))
        oracle = {}
        for n_bins in (100, 200, 400, 1000, None) if with_oracle else ():
            for u in (1.0,) if n_bins is None else (0.25, 0.5, 0.75, 1.0):
                of, ot = quantile_split(X[rows], y[rows], w[rows], n_bins, u)
                mine = X[rows, of] <= ot
                oracle[(n_bins, u)] = max(np.mean(mine == theirs), np.mean(mine != theirs))
        x, ww = X[rows, f], w[rows]
        band = (-1, float("nan"))  # (candidates in band, their best gain / the split's)
        if why and fed.depth3 is not None and agree < 0.985 and f == cf:
            pair_off, pair_feat, cand_off, cand = fed.depth3
            slot = sorted(k for k, v in depth.items() if v == 3).index(i)  # level-wise ids
            p = next(q for q in range(pair_off[slot], pair_off[slot + 1]) if pair_feat[q] == cf)
            band = in_band(x, y[rows], ww, cand[cand_off[p] : cand_off[p + 1]], theirs, t)
        order = np.argsort(x)
        cum = np.cumsum(ww[order]) / ww.sum()
        nodes.append(
            dict(
                node=i,
                rows=rows.size,
                agree=agree,
                feature=(f, cf),
                threshold=(t, ct),
                rank=(float(np.interp(t, x[order], cum)), float(np.interp(ct, x[order], cum))),
                gain=gain(x, y[rows], ww, t) / gain(X[rows, cf], y[rows], ww, ct),
                cart_noise=min(noise),
                oracle=oracle,
                band=band,
            )
        )
    return dict(nodes=nodes, worst=min(nodes, key=lambda r: r["agree"]))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds of the fits"
    )
    ap.add_argument("--privacy", nargs="+", default=["secure", "none"], help="privacy levels")
    ap.add_argument("--oracle", action="store_true", help="exact quantile candidates, no protocol")
    ap.add_argument("--why", action="store_true", help="candidates near CART's threshold (secure)")
    ap.add_argument(
        "--ablate", default=None, help="a mode of ablate_secure.py (patches the server)"
    )
    args = ap.parse_args()
    if args.ablate:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from ablate_secure import _patch

        _patch(args.ablate)
    if args.oracle:
        args.privacy = ["secure"]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent,
    ).stdout.strip()
    print("$ python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(
        f"# {platform.node()} {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, "
        f"commit {commit or '?'}, fedforest {ff.__version__}"
    )
    X, y, h = data()
    noise: list[float] = []
    oracle: dict[tuple[int | None, float], list[float]] = {}
    fails: dict[str, list[dict]] = {}
    passed: dict[str, int] = {}  # fits whose depth-3 nodes all agree on 98.5 %
    print(
        "privacy seed  worst  nodes<98.5%  feature(ours,CART)  rank(ours,CART)  gain  CART-vs-CART"
    )
    for privacy in args.privacy:
        for seed in args.seeds:
            start = time.perf_counter()
            out = run(seed, privacy, X, y, h, args.oracle, args.why)
            r = out["worst"]
            fails.setdefault(privacy, []).extend(n for n in out["nodes"] if n["agree"] < 0.985)
            passed[privacy] = passed.get(privacy, 0) + all(
                n["agree"] >= 0.985 for n in out["nodes"]
            )
            noise += [n["cart_noise"] for n in out["nodes"]]
            for n in out["nodes"]:
                for key, agree in n["oracle"].items():
                    oracle.setdefault(key, []).append(agree)
            below = sum(n["agree"] < 0.985 for n in out["nodes"])
            print(
                f"{privacy:7s} {seed:4d}  {r['agree']:.4f}  {below:2d} of {len(out['nodes']):2d}"
                f"        {r['feature']!s:9s}         ({r['rank'][0]:.3f}, {r['rank'][1]:.3f})"
                f"   {r['gain']:.4f}  {r['cart_noise']:.4f}"
                f"  ({time.perf_counter() - start:.0f} s)"
            )
    for privacy, below in fails.items():
        same = [n for n in below if n["feature"][0] == n["feature"][1]]
        print(
            f"# {privacy}: {passed[privacy]} of {len(args.seeds)} fits pass; {len(below)} depth-3 "
            f"nodes below 98.5 %, {len(below) - len(same)} of them on another feature than CART's"
        )
        if args.why and privacy != "none":
            banded = [n for n in same if n["band"][0] > 0]
            short = 100 * (1 - np.array([n["band"][1] for n in banded] or [np.nan]))
            print(
                f"#   of the {len(same)} on CART's feature, {len(banded)} had candidates in band "
                f"(median {np.median([n['band'][0] for n in banded] or [0]):.0f}); their best "
                f"gained less than the split by {np.nanmin(short):.3f} % to {np.nanmax(short):.3f} "
                f"% (median {np.nanmedian(short):.3f} %)"
            )
    print("# CART-vs-CART: CART on the worst node's rows reweighted by Poisson(1), least of 3")
    print(
        f"# CART-vs-CART over all {len(noise)} depth-3 nodes: median {np.median(noise):.4f}, "
        f"{sum(v < 0.985 for v in noise)} below 0.985"
    )
    if not args.oracle:
        return
    print("# exact weighted quantile candidates per feature, no protocol, the same nodes:")
    for n_bins in (100, 200, 400, 1000, None):
        agree = [v for (b, _), vs in oracle.items() if b == n_bins for v in vs]
        below = sum(v < 0.985 for v in agree)
        print(
            f"B = {n_bins or 'every midpoint'}: {len(agree)} node x offset cases, least "
            f"{min(agree):.4f}, {below} below 0.985 ({below / len(agree):.1%})"
        )


if __name__ == "__main__":
    main()
