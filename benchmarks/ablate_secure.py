"""Ablations of privacy="secure" in the paper's synthetic settings (docs/privacy.md).

Each mode patches the server in this process only, to measure what one part of the
secure protocol costs; several patches weaken the rules and exist for measurement only:

- ``default``: privacy="secure" as shipped (guides: the best thresholds of the trees
  ``<= t`` at depths ``< L`` for a node of tree ``t`` at depth ``L``, server/guides.py);
- ``own-tree``: guides of the node's own tree only (main before shared guides);
- ``no-guides``: without guided candidates (the quantile candidates alone; the roots keep
  their ``4 B - 1``, which the guides' state switches on);
- ``all-trees``: guides from every tree of the batch at depths ``< L`` (the forest would
  then depend on ``tree_batch_size``);
- ``oracle``: the true thresholds of ``paper_f`` (0 on x1, x2, x4; -3 and 3 on x3) as the
  only guides, under the same rules (``--jitter SD``: each tree's moved by a normal draw
  of standard deviation ``SD``, the same for a tree and feature at every node;
  ``--data-steps``: each data seed's own best splits instead, found by CART on all its
  training rows, x2's where ``x1 <= 0`` and x4's where ``x1 > 0``, x3's -3 and 3 kept;
  ``--oracle-features F ...``: the oracle's guides on those features, the shipped guides
  on the others);
- ``no-across-levels``: the rules across levels switched off (UNSAFE); the counts say
  how many candidates they would have dropped;
- ``no-rules``: ``no-across-levels`` and the partition rule off too (UNSAFE);
- ``dense``: candidates and node grids spaced 1 row apart instead of ``m`` (UNSAFE: the
  leaves, summaries and groups keep ``m``; combine with ``no-rules``, whose checks would
  drop most of them);
- ``oracle-levels``: the oracle's guides at the levels ``--oracle-levels A B`` (depths
  ``A <= L < B``), the shipped guides at the others; the thresholds chosen are recorded
  as usual, so deeper levels inherit what the oracle's levels found;
- ``spaced10``: candidates and node grids spaced 10 rows apart whatever ``--m`` (with
  ``--m 5``: the leaf floor and the rules at 5 rows, the spacing at the default's 10;
  UNSAFE with ``no-rules``);
- ``no-grid-ends``: node grids keep their edges with fewer than ``m`` rows of the
  federation on one side (UNSAFE: main before the tracer fix, ``secure_grids._within``);
- ``no-grid-gaps``: node grids keep their edges around a group of fewer than ``m`` rows
  beside an empty coarse bin inside a column (UNSAFE: main before red team 11,
  ``secure_setup.grid_gaps``).

Modes joined by "+" combine (``no-rules+dense``). ``--m`` sets ``min_aggregate_rows``
(also the leaf floor). ``--none`` first prints the ``"none"`` variants of the
decomposition in docs/privacy.md: the paper's protocol, with leaves of 10 rows (the
secure floor), without local candidates (the paper's quantiles), and both.

Prints, per mode, the test MSE relative to scikit-learn's forest (leaf 5) over the seeds
(ratio of mean MSEs), the per-seed ratios and their standard deviation, and the
candidates placed and kept. ``--forest-seeds N`` fits ``N`` forests per data seed
(``random_state`` the seed, the seed + 1000, ...; scikit-learn's too) and takes each seed's
mean MSE: one secure forest's MSE moves by about 4 % with its ``random_state`` alone
(docs/privacy.md, "What it costs"), so single fits cannot rank variants a point apart.
The paper's forest: 50 trees, depth 8, leaf 5, a third of the features, B = 32, one
thread.

Usage::

    python benchmarks/ablate_secure.py                      # every mode, seeds 0 1 2
    python benchmarks/ablate_secure.py --none default own-tree no-rules no-rules+dense \
        oracle --seeds 0 1 2 3 4                            # the decomposition table
    python benchmarks/ablate_secure.py oracle --jitter 0.05
    python benchmarks/ablate_secure.py oracle --data-steps --oracle-features 0
    python benchmarks/ablate_secure.py default --seeds 0 1 2 3 4 5 6 7 8 9 --forest-seeds 3
    python benchmarks/ablate_secure.py default no-grid-gaps --setting covariate-shift
    python benchmarks/ablate_secure.py default one-row-draws --one-row-clients 300

``--one-row-clients N``: the first ``N`` training rows of each data seed, each row a client
of its own (a device per person); ``one-row-draws`` draws a client of one row once in every
tree, as before red team 13 (its fix changes no forest whose clients hold two rows or more).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
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
import fedforest.federated.client_bootstrap as client_bootstrap
import fedforest.federated.server.guides as guides_module
import fedforest.federated.server.secure_round_a as secure_round_a
import fedforest.federated.server.secure_round_b as secure_round_b
import fedforest.federated.server.secure_setup as secure_setup
from fedforest.datasets import make_paper_synthetic
from fedforest.federated.server.guides import Guides

MODES = (
    "default",
    "own-tree",
    "no-guides",
    "all-trees",
    "oracle",
    "no-across-levels",
    "no-rules",
    "dense",
    "spaced10",
    "oracle-levels",
    "no-grid-ends",
    "no-grid-gaps",
    "one-row-draws",
    "root-refined",
    "root-refined-se",
    "top-median",
    "depth-median",
    "ladder",
)
KW: dict[str, Any] = dict(n_estimators=50, max_depth=8, min_samples_leaf=5, max_features=1 / 3)
TRUE = {0: [0.0], 1: [0.0], 2: [-3.0, 3.0], 3: [0.0]}  # paper_f's thresholds per feature
COUNTS = {"placed": 0, "kept": 0}
JITTER = {"sd": 0.0}  # --jitter: the oracle's thresholds moved per tree by N(0, sd^2)
ORACLE_LEVELS = [0, 1]  # --oracle-levels: the depths where oracle-levels uses the oracle
ORACLE_FEATURES: list[int] = []  # --oracle-features: the oracle only on these
TOP_K = [5]  # top-median: --top-k
MEDIAN_DEPTH = ["parent"]  # depth-median: --median-depth
LADDER = [2]  # ladder: --ladder
ROOT_SE = [np.inf]  # root-refined: no bound; root-refined-se: --root-se
#: Where each patched function is looked up when the server calls it.
_HOME: dict[str, Any] = {
    "guided_in_threads": secure_round_b,
    "safe_from_ancestors": secure_round_b,
    "partition_filter": secure_round_b,
    "secure_candidates": secure_round_b,
    "guided_candidates": guides_module,  # called by guides.guided_in_threads
    "node_grids": secure_round_a,
}
_ORIGINAL = {name: getattr(home, name) for name, home in _HOME.items()}
_DRAWS = client_bootstrap._draws  # one-row-draws: a client of one row, once a tree
_TREES = 1024  # own-tree: each tree's features apart (fewer trees than this)


class OwnTree(Guides):
    """Guides of the node's own tree only: each (tree, feature) a feature of its own."""

    def __init__(self, d: int) -> None:
        super().__init__(d * _TREES)
        self.d0 = d

    def add(self, tree, depth, feature, thr, gain):  # type: ignore[no-untyped-def]
        super().add(tree, depth, np.asarray(tree) * self.d0 + feature, thr, gain)

    def find(self, tree, feature, lo, hi):  # type: ignore[no-untyped-def]
        return super().find(tree, np.asarray(tree) * self.d0 + feature, lo, hi)

    def set_root(self, *a):  # type: ignore[no-untyped-def]
        pass  # own-tree: the guides before root medians


class NoGuides(Guides):
    """No guided candidates: nothing found, nothing recorded."""

    def find(self, tree, feature, lo, hi):  # type: ignore[no-untyped-def]
        return np.zeros(len(tree) + 1, dtype=np.int64), np.zeros(0)

    def record(self, *a, **k):  # type: ignore[no-untyped-def]
        pass


class AllTrees(Guides):
    """Guides from every tree of the batch (any tree index)."""

    def find(self, tree, *a):  # type: ignore[no-untyped-def]
        return super().find(np.full_like(tree, 1 << 40), *a)


class Oracle(Guides):
    """paper_f's true thresholds as the only guides (moved by --jitter per tree)."""

    def record(self, *a, **k):  # type: ignore[no-untyped-def]
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


class OracleFeatures(Guides):
    """The oracle's guides on the features ORACLE_FEATURES, the shipped guides elsewhere."""

    def find(self, tree, feature, lo, hi):  # type: ignore[no-untyped-def]
        o1, g1 = super().find(tree, feature, lo, hi)
        o2, g2 = Oracle.find(self, tree, feature, lo, hi)  # type: ignore[arg-type]
        use = np.isin(feature, ORACLE_FEATURES)
        per = [g2[o2[i] : o2[i + 1]] if u else g1[o1[i] : o1[i + 1]] for i, u in enumerate(use)]
        off = np.zeros(len(per) + 1, dtype=np.int64)
        np.cumsum([p.size for p in per], out=off[1:])
        return off, np.concatenate([np.zeros(0), *per])


def _data_steps(X: np.ndarray, y: np.ndarray) -> dict[int, list[float]]:
    """The training rows' own best splits at paper_f's steps (exhaustive CART, squared error)."""

    def best(x: np.ndarray, t: np.ndarray) -> float:
        o = np.argsort(x, kind="stable")
        x, c = x[o], np.cumsum(t[o])
        k = np.arange(1, x.size)
        score = c[:-1] ** 2 / k + (c[-1] - c[:-1]) ** 2 / (x.size - k)
        score[x[1:] == x[:-1]] = -np.inf
        i = int(np.argmax(score))
        return float(0.5 * (x[i] + x[i + 1]))

    left = X[:, 0] <= 0
    return {
        0: [best(X[:, 0], y)],
        1: [best(X[left, 1], y[left])],
        2: [-3.0, 3.0],
        3: [best(X[~left, 3], y[~left])],
    }


class OracleLevels(Guides):
    """The oracle's guides at depths in ``ORACLE_LEVELS``, the shipped guides elsewhere."""

    def find(self, tree, feature, lo, hi):  # type: ignore[no-untyped-def]
        if ORACLE_LEVELS[0] <= self.level < ORACLE_LEVELS[1]:
            return Oracle.find(self, tree, feature, lo, hi)  # type: ignore[arg-type]
        return super().find(tree, feature, lo, hi)


class RootRefined(Guides):
    """The roots' bests recorded at their step estimates (standard error below ROOT_SE)."""

    def record(self, *a, **k):  # type: ignore[no-untyped-def]
        se = guides_module.REFINE_SE
        if self.level == 0:
            guides_module.REFINE_SE = ROOT_SE[0]
        try:
            super().record(*a, **k)
        finally:
            guides_module.REFINE_SE = se


def _shipped_top(guides, tree, feature, lo, hi):  # type: ignore[no-untyped-def]
    """Guides.find's first step, as shipped: each pair's top guides in its path bounds.

    Returns the sorted entries, the arrays as float and int, the kernel's leading arguments,
    and ``out_off``, ``out``: the top guides of every pair.
    """
    e_off, e_tree, e_depth, e_thr, s_thr, s_at = guides._sorted()
    tree, feature = np.asarray(tree, dtype=np.int64), np.asarray(feature, dtype=np.int64)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    k = guides_module.GUIDES_PER_PAIR
    out_off = np.zeros(tree.size + 1, dtype=np.int64)
    out = np.empty(tree.size * k)
    args = (e_off, e_tree, e_depth, e_thr, s_thr, s_at, tree, feature)
    guides_module.top_guides(*args, lo, hi, guides.level, k, out_off, out)
    sorted_ = (e_off, e_tree, e_depth, e_thr, s_thr, s_at)
    return sorted_, tree, feature, lo, hi, args, out_off, out


class TopMedian(Guides):
    """The first guide the median of the TOP_K entries of largest gain in its window."""

    def find(self, tree, feature, lo, hi):  # type: ignore[no-untyped-def]
        sorted_, tree, feature, lo, hi, args, out_off, out = _shipped_top(
            self, tree, feature, lo, hi
        )
        e_off, e_tree, e_depth, e_thr, s_thr, s_at = sorted_
        if self.root_cdf is None or not out_off[-1]:
            return out_off, out[: out_off[-1]]
        w_lo, w_hi = self._window(feature, out[out_off[:-1]], out_off)
        top_off = np.zeros(tree.size + 1, dtype=np.int64)
        top = np.empty(tree.size * TOP_K[0])
        a, b = np.maximum(lo, w_lo - 1e-300), np.minimum(hi, w_hi + 1e-300)
        guides_module.top_guides(*args, a, b, self.level, TOP_K[0], top_off, top)
        for i in np.flatnonzero(np.diff(top_off) >= guides_module.MEDIAN_OF):
            v = float(np.median(top[top_off[i] : top_off[i + 1]]))
            k0, k1 = out_off[i], out_off[i + 1]
            if k1 > k0 and lo[i] < v < hi[i] and v not in out[k0 + 1 : k1]:
                out[k0] = v
        return out_off, out[: out_off[-1]]


class DepthMedian(Guides):
    """The first guide the median of one depth's entries in its window (MEDIAN_DEPTH)."""

    def find(self, tree, feature, lo, hi):  # type: ignore[no-untyped-def]
        sorted_, tree, feature, lo, hi, args, out_off, out = _shipped_top(
            self, tree, feature, lo, hi
        )
        e_off, e_tree, e_depth, e_thr, s_thr, s_at = sorted_
        if self.root_cdf is None or not out_off[-1]:
            return out_off, out[: out_off[-1]]
        w_lo, w_hi = self._window(feature, out[out_off[:-1]], out_off)
        rest = (tree, feature, lo, hi, w_lo, w_hi, out_off, out)
        guides_module.root_medians(e_off, e_tree, e_depth, s_thr, s_at, *rest)
        depth = self.level - 1 if MEDIAN_DEPTH[0] == "parent" else 1
        if self.level >= 2:  # that depth's entries as the kernel's depth 0
            shifted = e_depth - depth
            guides_module.root_medians(e_off, e_tree, shifted, s_thr, s_at, *rest)
        return out_off, out[: out_off[-1]]


def _laddered(grid, grid_off, cum_rows, node_rows, quant, quant_off, guide, guide_off, *a):  # type: ignore[no-untyped-def]
    """guided_in_threads with LADDER[0] grid edges each side of every first guide added."""
    out: list[float] = []
    off = [0]
    for p in range(guide_off.size - 1):
        g = guide[guide_off[p] : guide_off[p + 1]]
        out.extend(g)
        if g.size:
            lo, hi = grid_off[p], grid_off[p + 1]
            j = lo + int(np.searchsorted(grid[lo:hi], g[0]))
            if j < hi and grid[j] == g[0]:
                for k in range(1, LADDER[0] + 1):
                    out.extend(grid[i] for i in (j - k, j + k) if lo <= i < hi)
        off.append(len(out))
    guide, guide_off = np.asarray(out, dtype=np.float64), np.asarray(off, dtype=np.int64)
    args = (grid, grid_off, cum_rows, node_rows, quant, quant_off, guide, guide_off, *a)
    return _ORIGINAL["guided_in_threads"](*args)


def _one_row_apart(name: str, at: int, rows: int = 1):  # type: ignore[no-untyped-def]
    """The server's ``<name>`` with its ``min_rows`` argument (position ``at``) set to ``rows``."""
    original = _ORIGINAL[name]

    def patched(*a):  # type: ignore[no-untyped-def]
        return original(*a[:at], rows, *a[at + 1 :])

    return patched


def _spaced_grids(rows: int):  # type: ignore[no-untyped-def]
    def grids(state, *a, **k):  # type: ignore[no-untyped-def]
        m = state.min_rows
        state.min_rows = rows  # node grids of n_node / rows (capped) edges, not n_node / m
        try:
            return _ORIGINAL["node_grids"](state, *a, **k)
        finally:
            state.min_rows = m

    return grids


def _no_grid_ends(state, *a, **k):  # type: ignore[no-untyped-def]
    edge_lo = state.edge_lo
    state.edge_lo = None  # node grids with every quantile edge (before the tracer fix)
    try:
        return _ORIGINAL["node_grids"](state, *a, **k)
    finally:
        state.edge_lo = edge_lo


def _no_grid_gaps(state, *a, **k):  # type: ignore[no-untyped-def]
    gaps = state.gaps
    state.gaps = None  # node grids with edges around a group apart (before red team 11)
    try:
        return _ORIGINAL["node_grids"](state, *a, **k)
    finally:
        state.gaps = gaps


def _patch(mode: str) -> None:
    """Set the server's functions for ``mode`` (modes joined by "+" combine)."""
    parts = set(mode.split("+"))
    for name, fn in _ORIGINAL.items():
        setattr(_HOME[name], name, fn)
    guides = {"no-guides": NoGuides, "own-tree": OwnTree, "all-trees": AllTrees}
    secure_setup.Guides = Guides  # type: ignore[attr-defined]
    guides["root-refined"] = guides["root-refined-se"] = RootRefined
    guides["top-median"] = TopMedian
    guides["depth-median"] = DepthMedian
    for part, cls in {**guides, "oracle": Oracle, "oracle-levels": OracleLevels}.items():
        if part in parts:
            secure_setup.Guides = cls  # type: ignore[attr-defined]
    if "oracle" in parts and ORACLE_FEATURES:
        secure_setup.Guides = OracleFeatures  # type: ignore[attr-defined]
    rules_off = bool({"no-across-levels", "no-rules"} & parts)

    def counted(*a):  # type: ignore[no-untyped-def]
        safe = _ORIGINAL["safe_from_ancestors"](*a)
        COUNTS["placed"] += safe.size
        COUNTS["kept"] += int(safe.sum())
        return np.ones_like(safe) if rules_off else safe

    secure_round_b.safe_from_ancestors = counted
    if "no-rules" in parts:
        secure_round_b.partition_filter = lambda *a: None
    for part, rows in (("dense", 1), ("spaced10", 10)):
        if part in parts:
            secure_round_b.secure_candidates = _one_row_apart("secure_candidates", 8, rows)
            guides_module.guided_candidates = _one_row_apart("guided_candidates", 8, rows)
            secure_round_a.node_grids = _spaced_grids(rows)
    if "ladder" in parts:
        secure_round_b.guided_in_threads = _laddered
    if "no-grid-ends" in parts:
        secure_round_a.node_grids = _no_grid_ends
    if "no-grid-gaps" in parts:
        secure_round_a.node_grids = _no_grid_gaps
    client_bootstrap._draws = (  # type: ignore[assignment]
        (lambda rng, n, size, secret: _DRAWS(rng, n, size, False))
        if "one-row-draws" in parts
        else _DRAWS
    )


def _row(name: str, mse: list[float], ref: list[float], counts: str = "| |") -> None:
    r = np.asarray(mse) / np.asarray(ref)
    per = ", ".join(f"{v:.3f}" for v in r)
    sd = float(r.std(ddof=1)) if r.size > 1 else 0.0
    print(f"| {name} | {np.mean(mse) / np.mean(ref):.3f} | {per} | {sd:.3f} {counts}", flush=True)


def _forest_seeds(seed: int, n: int) -> list[int]:
    """The forests' random states for a data seed: the seed itself first (``--forest-seeds``)."""
    return [seed + 1000 * i for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("modes", nargs="*", help=f"any of {', '.join(MODES)} (none given: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="data seeds")
    parser.add_argument(
        "--setting",
        default="homogeneous",
        choices=["homogeneous", "covariate-shift", "outcome-shift"],
        help="the paper's synthetic setting",
    )
    parser.add_argument("--n-bins", type=int, default=32, help="B of the secure forests")
    parser.add_argument("--m", type=int, default=None, help="min_aggregate_rows (None: default)")
    parser.add_argument("--none", action="store_true", help='first the "none" variants')
    parser.add_argument(
        "--forest-seeds",
        type=int,
        default=1,
        help="forests per data seed (random_state seed + 1000 i, i < N); per seed the mean",
    )
    parser.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        help="oracle: move each tree's thresholds by N(0, sd^2)",
    )
    parser.add_argument(
        "--oracle-levels",
        type=int,
        nargs=2,
        default=[0, 1],
        metavar=("A", "B"),
        help="oracle-levels: the oracle's guides at depths A <= L < B",
    )
    parser.add_argument(
        "--one-row-clients",
        type=int,
        default=None,
        metavar="N",
        help="the first N training rows, each a client of one row",
    )
    parser.add_argument(
        "--root-se",
        type=float,
        default=0.3,
        help="root-refined-se: the roots' step estimates of standard error below this",
    )
    parser.add_argument("--top-k", type=int, default=5, help="top-median: entries")
    parser.add_argument("--ladder", type=int, default=2, help="ladder: edges each side")
    parser.add_argument(
        "--median-depth", default="parent", choices=["parent", "1"], help="depth-median: whose"
    )
    parser.add_argument(
        "--data-steps",
        action="store_true",
        help="oracle: each data seed's own best splits at the steps, not the true ones",
    )
    parser.add_argument(
        "--oracle-features",
        type=int,
        nargs="+",
        default=[],
        help="oracle: its guides on these features only (0-based), shipped ones elsewhere",
    )
    args = parser.parse_args()
    ORACLE_FEATURES[:] = args.oracle_features
    TOP_K[0] = args.top_k
    MEDIAN_DEPTH[0] = args.median_depth
    LADDER[0] = args.ladder
    JITTER["sd"] = args.jitter
    ORACLE_LEVELS[:] = args.oracle_levels
    for mode in args.modes:
        if not set(mode.split("+")) <= set(MODES):
            parser.error(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")
    data = [make_paper_synthetic(args.setting, random_state=s) for s in args.seeds]
    if args.one_row_clients:
        n = args.one_row_clients
        data = [
            replace(d, X_train=d.X_train[:n], y_train=d.y_train[:n], h_train=np.arange(n))
            for d in data
        ]
    ref = []
    for s, d in zip(args.seeds, data, strict=True):
        per = []
        for r in _forest_seeds(s, args.forest_seeds):
            sk = RandomForestRegressor(random_state=r, n_jobs=1, **KW).fit(d.X_train, d.y_train)
            per.append(float(np.mean((sk.predict(d.X_test) - d.y_test) ** 2)))
        ref.append(float(np.mean(per)))
    print(f"scikit-learn's test MSE, seeds {args.seeds}: {np.mean(ref):.4f}")
    print("| mode | MSE / scikit-learn | per seed | sd | candidates placed | kept |")
    print("|---|---:|---|---:|---:|---:|")
    if args.none:
        variants = {
            '"none"': {},
            '"none", leaf 10': {"min_samples_leaf": 10},
            '"none", no local candidates': {"local_candidates": False},
            '"none", no local candidates, leaf 10': {
                "local_candidates": False,
                "min_samples_leaf": 10,
            },
        }
        for name, extra in variants.items():
            mse = []
            for s, d in zip(args.seeds, data, strict=True):
                kw = {**KW, "n_bins": args.n_bins, **extra}
                per = []
                for r in _forest_seeds(s, args.forest_seeds):
                    m = ff.FedForestRegressor(random_state=r, n_jobs=1, privacy="none", **kw)
                    m.fit(d.X_train, d.y_train, client_ids=d.h_train)
                    per.append(float(np.mean((m.predict(d.X_test) - d.y_test) ** 2)))
                mse.append(float(np.mean(per)))
            _row(name, mse, ref)
    for mode in args.modes or MODES:
        _patch(mode)
        ROOT_SE[0] = args.root_se if "root-refined-se" in mode.split("+") else np.inf
        COUNTS.update(placed=0, kept=0)
        mse = []
        for s, d in zip(args.seeds, data, strict=True):
            if args.data_steps:
                TRUE.clear()
                TRUE.update(_data_steps(d.X_train, d.y_train))
            per = []
            for r in _forest_seeds(s, args.forest_seeds):
                m = ff.FedForestRegressor(
                    random_state=r,
                    n_jobs=1,
                    privacy="secure",
                    n_bins=args.n_bins,
                    min_aggregate_rows=args.m,
                    **KW,
                )
                m.fit(d.X_train, d.y_train, client_ids=d.h_train)
                per.append(float(np.mean((m.predict(d.X_test) - d.y_test) ** 2)))
            mse.append(float(np.mean(per)))
        _row(mode, mse, ref, f"| {COUNTS['placed']:,} | {COUNTS['kept']:,} |")
    _patch("default")


if __name__ == "__main__":
    main()
