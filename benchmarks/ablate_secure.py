"""Ablations of privacy="secure" in the paper's homogeneous setting (docs/privacy.md).

Each mode patches the server in this process only, to measure what one part of the
secure protocol costs; several patches weaken the rules and exist for measurement only:

- ``default``: privacy="secure" as shipped (guided candidates);
- ``no-guides``: without guided candidates (the quantile candidates alone);
- ``earlier-trees``: a node of tree ``t`` at level ``L`` guided by the trees ``<= t`` at
  levels ``< L`` (the same whatever ``tree_batch_size``; not shipped: it fails
  ``tests/test_secure.py::test_narrow_signal_is_found``);
- ``all-trees``: guides from every tree of the batch, not only the tree's own (the forest
  would then depend on ``tree_batch_size``);
- ``oracle``: the true thresholds of ``paper_f`` (0 on x1, x2, x4; -3 and 3 on x3) as the
  only guides, under the same rules (``--jitter SD``: each tree's moved by a normal draw
  of standard deviation ``SD``, the same for a tree and feature at every node);
- ``no-across-levels``: the rules across levels switched off (UNSAFE); the counts say
  how many candidates they would have dropped.

Modes joined by "+" combine (``no-guides+no-across-levels``).

Prints, per mode, the test MSE relative to scikit-learn's forest (leaf 5) over the seeds,
and the candidates placed and kept. The paper's forest: 50 trees, depth 8, leaf 5, a third
of the features, B = 32, one thread.

Usage::

    python benchmarks/ablate_secure.py                      # every mode, seeds 0 1 2
    python benchmarks/ablate_secure.py oracle --seeds 0 1 2 3 4 5
    python benchmarks/ablate_secure.py earlier-trees --n-bins 128
    python benchmarks/ablate_secure.py oracle --jitter 0.05
"""

from __future__ import annotations

import argparse
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

from sklearn.ensemble import RandomForestRegressor

import fedforest as ff
import fedforest.federated.server.secure as secure
from fedforest.datasets import make_paper_synthetic
from fedforest.federated.server.guides import GUIDES_PER_PAIR, Guides, pair_best
from fedforest.federated.server.missing import MISSING_SPLIT

MODES = ("default", "no-guides", "earlier-trees", "all-trees", "oracle", "no-across-levels")
KW: dict[str, Any] = dict(n_estimators=50, max_depth=8, min_samples_leaf=5, max_features=1 / 3)
TRUE = {0: [0.0], 1: [0.0], 2: [-3.0, 3.0], 3: [0.0]}  # paper_f's thresholds per feature
COUNTS = {"placed": 0, "kept": 0}
JITTER = {"sd": 0.0}  # --jitter: the oracle's thresholds moved per tree by N(0, sd^2)


def _patch(mode: str) -> None:
    """Set the server's functions for ``mode`` (modes joined by "+" combine)."""
    parts = set(mode.split("+"))
    secure.Guides = Guides  # type: ignore[attr-defined]
    if "no-guides" in parts:
        secure.Guides = lambda d: None  # type: ignore[attr-defined]
    elif "all-trees" in parts:

        class AllTrees(Guides):
            def record(self, tree, *a):  # type: ignore[no-untyped-def]
                super().record(tree * 0, *a)

            def find(self, tree, *a):  # type: ignore[no-untyped-def]
                return super().find(tree * 0, *a)

        secure.Guides = AllTrees  # type: ignore[attr-defined]
    elif "earlier-trees" in parts:
        secure.Guides = EarlierTrees  # type: ignore[attr-defined]
    elif "oracle" in parts:

        class Oracle(Guides):
            def record(self, *a):  # type: ignore[no-untyped-def]
                pass

            def find(self, tree, feature, lo, hi):  # type: ignore[no-untyped-def]
                per = []
                for t, f, a, b in zip(tree, feature, lo, hi, strict=True):
                    rng = np.random.default_rng(int(t) * 100 + int(f))  # per tree and feature
                    moved = [x + JITTER["sd"] * rng.normal() for x in TRUE.get(int(f), [])]
                    per.append([x for x in moved if a < x < b])
                off = np.zeros(len(per) + 1, dtype=np.int64)
                np.cumsum([len(p) for p in per], out=off[1:])
                return off, np.asarray([t for p in per for t in p], dtype=float)

        secure.Guides = Oracle  # type: ignore[attr-defined]
    rules_off = "no-across-levels" in parts

    def counted(*a):  # type: ignore[no-untyped-def]
        safe = _SAFE(*a)
        COUNTS["placed"] += safe.size
        COUNTS["kept"] += int(safe.sum())
        return np.ones_like(safe) if rules_off else safe

    secure.safe_from_ancestors = counted


_SAFE = secure.safe_from_ancestors
LEVEL: dict[int, int] = {}  # earlier-trees: each tree's current level (round A calls)
_ROUND_A = secure.round_a


def _round_a(fed, ledger, cfg, ctx, *a):  # type: ignore[no-untyped-def]
    for t in np.unique(ctx["secure_slots"][0]):
        LEVEL[int(t)] = LEVEL.get(int(t), -1) + 1
    return _ROUND_A(fed, ledger, cfg, ctx, *a)


secure.round_a = _round_a


class EarlierTrees(Guides):
    """Guides of trees ``<= t`` at levels ``< L`` (per feature, best gain first)."""

    def __init__(self, d: int) -> None:
        super().__init__(d)
        LEVEL.clear()
        self.entries: dict[int, list[tuple[int, int, float, float]]] = {}

    def record(self, tree, feature, cand_off, cand, gain):  # type: ignore[no-untyped-def]
        pairs, thr, g = pair_best(cand_off, cand, gain)
        for p, t, gg in zip(pairs, thr, g, strict=True):
            if t != MISSING_SPLIT:
                tr = int(tree[p])
                self.entries.setdefault(int(feature[p]), []).append((tr, LEVEL[tr], gg, t))

    def find(self, tree, feature, lo, hi):  # type: ignore[no-untyped-def]
        arrays = {f: np.array(v) for f, v in self.entries.items()}
        per = []
        for t, f, a, b in zip(tree, feature, lo, hi, strict=True):
            e = arrays.get(int(f))
            if e is None:
                per.append([])
                continue
            ok = (e[:, 0] <= t) & (e[:, 1] < LEVEL[int(t)]) & (e[:, 3] > a) & (e[:, 3] < b)
            e = e[ok]
            per.append(list(e[np.argsort(-e[:, 2], kind="stable")][:GUIDES_PER_PAIR, 3]))
        off = np.zeros(len(per) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in per], out=off[1:])
        return off, np.asarray([x for p in per for x in p], dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modes", nargs="*", help=f"any of {', '.join(MODES)} (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n-bins", type=int, default=32, help="B of the secure forests")
    parser.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        help="oracle: move each tree's thresholds by N(0, sd^2)",
    )
    args = parser.parse_args()
    JITTER["sd"] = args.jitter
    for mode in args.modes:
        if not set(mode.split("+")) <= set(MODES):
            parser.error(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")
    data = [make_paper_synthetic("homogeneous", random_state=s) for s in args.seeds]
    ref = []
    for s, d in zip(args.seeds, data, strict=True):
        sk = RandomForestRegressor(random_state=s, n_jobs=1, **KW).fit(d.X_train, d.y_train)
        ref.append(float(np.mean((sk.predict(d.X_test) - d.y_test) ** 2)))
    print(f"scikit-learn's test MSE, seeds {args.seeds}: {np.mean(ref):.4f}")
    print("| mode | MSE / scikit-learn | per seed | candidates placed | kept |")
    print("|---|---:|---|---:|---:|")
    for mode in args.modes or MODES:
        _patch(mode)
        COUNTS.update(placed=0, kept=0)
        mse = []
        for s, d in zip(args.seeds, data, strict=True):
            m = ff.FedForestRegressor(
                random_state=s, n_jobs=1, privacy="secure", n_bins=args.n_bins, **KW
            )
            m.fit(d.X_train, d.y_train, client_ids=d.h_train)
            mse.append(float(np.mean((m.predict(d.X_test) - d.y_test) ** 2)))
        per = ", ".join(f"{v / r:.3f}" for v, r in zip(mse, ref, strict=True))
        print(
            f"| {mode} | {np.mean(mse) / np.mean(ref):.3f} | {per} | "
            f"{COUNTS['placed']:,} | {COUNTS['kept']:,} |",
            flush=True,
        )
    _patch("default")


if __name__ == "__main__":
    main()
