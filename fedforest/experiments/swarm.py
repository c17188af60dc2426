"""Swarm forests under partial feature overlap (``papers/001_e1da37c0892c910f.txt``, Section IV).

For every dataset, number of peers ``N`` in {2, 3, 4, 6}, target pairwise Jaccard ``J`` in
{0.2, ..., 0.9} and repetition: the rows are spread evenly at random over the peers; each
peer keeps 75 % for training and 25 % for testing (stratified when possible); ``O``
features (eq. 24, rounded, at least 1) chosen at random are shared by every peer and the
others are dealt out as private features in a balanced way. Each peer trains a forest
and shares its bundle; each peer then scores its own test rows with every strategy. The
Intersection baseline retrains every peer on the ``O`` shared features. Metrics: AUPRC,
AUC (one-vs-rest macro for multiclass) and MCC, averaged over peers and repetitions.

Outputs (``--out``): ``results.csv`` (one row per repetition, peer and strategy),
``summary.csv`` (means), ``table_<dataset>_<metric>.md`` (the layout of Tables II/III),
``heatmap_<dataset>_<metric>.png`` (eq. 25), ``cd_<metric>.png`` (Friedman + Nemenyi over
all datasets and scenarios) and ``ranks_<metric>.csv``.

Run it with ``fedforest experiment swarm-overlap`` or ``python -m fedforest.experiments.swarm``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from .._argtypes import DefaultsHelpFormatter, out_directory, unwritable_directory

__all__ = [
    "PEERS",
    "JACCARDS",
    "PAPER_STRATEGIES",
    "SwarmConfig",
    "add_swarm_subcommand",
    "assign_features",
    "overlap_size",
    "run_scenario",
    "run_swarm",
    "run_swarm_experiment",
    "main",
]

PEERS = (2, 3, 4, 6)
JACCARDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: The eight methods of the paper's Tables II/III and CD diagram (MI is not evaluated there).
PAPER_STRATEGIES = ("local", "intersection", "park", "fpv", "pr", "ipr", "mp", "ss")
METRICS = ("auprc", "auc", "mcc")
DEFAULT_DATASETS = ("S-500-Mix", "breast-cancer", "wine")
SUBCOMMAND = "swarm-overlap"


@dataclass(frozen=True)
class SwarmConfig:
    """Settings of one run (the command-line options)."""

    datasets: tuple[str, ...] = DEFAULT_DATASETS
    peers: tuple[int, ...] = PEERS
    jaccards: tuple[float, ...] = JACCARDS
    reps: int = 2
    trees: int = 50
    seed: int = 0
    strategies: tuple[str, ...] = PAPER_STRATEGIES
    d_thresh: int = 2
    engine: str = "sklearn"
    n_jobs: int = 2
    out: Path = Path("swarm_results")

    def command(self) -> str:
        """The command line that reproduces this run."""
        parts = [
            "fedforest", "experiment", SUBCOMMAND,
            "--datasets", *self.datasets, "--peers", *map(str, self.peers),
            "--jaccards", *(f"{j:g}" for j in self.jaccards), "--reps", str(self.reps),
            "--trees", str(self.trees), "--seed", str(self.seed),
            "--strategies", *self.strategies, "--d-thresh", str(self.d_thresh),
            "--engine", self.engine, "--n-jobs", str(self.n_jobs), "--out", str(self.out),
        ]  # fmt: skip
        return shlex.join(parts)


# ----------------------------------------------------------------------- scenario design
def overlap_size(n_features: int, n_peers: int, jaccard: float) -> int:
    """Eq. 24: shared features ``O = F / (1 + N (1/(2J) - 1/2))``, rounded, at least 1."""
    o = n_features / (1.0 + n_peers * (1.0 / (2.0 * jaccard) - 0.5))
    return int(min(max(round(o), 1), n_features))


def assign_features(
    columns: Sequence[str], n_peers: int, jaccard: float, rng: np.random.Generator
) -> tuple[list[str], list[list[str]]]:
    """Shared features and each peer's feature list (eq. 23-24).

    A random subset of :func:`overlap_size` columns is shared by all; the other columns,
    shuffled, are dealt to the peers in turn (balanced: sizes differ by at most one).
    """
    cols = list(columns)
    order = rng.permutation(len(cols))
    o = overlap_size(len(cols), n_peers, jaccard)
    shared = [cols[i] for i in sorted(order[:o])]
    private = [cols[i] for i in order[o:]]
    per_peer = [shared + sorted(private[k::n_peers]) for k in range(n_peers)]
    return shared, per_peer


def achieved_jaccard(feature_sets: Sequence[Sequence[str]]) -> float:
    """Mean pairwise Jaccard similarity of the peers' feature sets."""
    sets = [set(s) for s in feature_sets]
    pairs = [len(a & b) / len(a | b) for i, a in enumerate(sets) for b in sets[i + 1 :] if a | b]
    return float(np.mean(pairs)) if pairs else 1.0


def _train_test(y: NDArray[Any], idx: NDArray[np.int64], rng: np.random.Generator) -> tuple[
    NDArray[np.int64], NDArray[np.int64]
]:  # fmt: skip
    from sklearn.model_selection import train_test_split

    seed = int(rng.integers(2**31 - 1))
    _, counts = np.unique(y[idx], return_counts=True)
    strat = y[idx] if counts.min() >= 2 and counts.size * 2 <= idx.size // 4 else None
    tr, te = train_test_split(idx, test_size=0.25, random_state=seed, stratify=strat)
    return np.asarray(tr), np.asarray(te)


# ----------------------------------------------------------------------- metrics
def scores(y: NDArray[Any], proba: NDArray[np.float64], classes: NDArray[Any]) -> dict[str, float]:
    """AUPRC, AUC (one-vs-rest macro over the classes present) and MCC of one peer."""
    from sklearn.metrics import average_precision_score, matthews_corrcoef, roc_auc_score

    auprc, auc = [], []
    cols = range(1, 2) if classes.shape[0] == 2 else range(classes.shape[0])
    for c in cols:
        pos = y == classes[c]
        if 0 < pos.sum() < pos.shape[0]:
            auprc.append(average_precision_score(pos, proba[:, c]))
            auc.append(roc_auc_score(pos, proba[:, c]))
    pred = classes[np.argmax(proba, axis=1)]
    return {
        "auprc": float(np.mean(auprc)) if auprc else np.nan,
        "auc": float(np.mean(auc)) if auc else np.nan,
        "mcc": float(matthews_corrcoef(y, pred)),
    }


# ----------------------------------------------------------------------- one scenario
_DATA_CACHE: dict[str, Any] = {}
MIN_ROWS_PER_PEER = 8  # 6 to train on, 2 to score (a 75/25 split)


def _dataset(name: str) -> Any:
    from fedforest.swarm.data import load_swarm_dataset

    if name not in _DATA_CACHE:
        _DATA_CACHE[name] = load_swarm_dataset(name)
    return _DATA_CACHE[name]


def run_scenario(
    dataset: str, n_peers: int, jaccard: float, rep: int, config: SwarmConfig
) -> list[dict[str, Any]]:
    """Train the peers of one scenario and score every strategy at every peer."""
    from fedforest.swarm import Peer, SwarmForest, fit_intersection

    ds = _dataset(dataset)
    key = [config.seed, sum(map(ord, dataset)), n_peers, round(jaccard * 100), rep]
    rng = np.random.default_rng(key)
    shared, feature_sets = assign_features(list(ds.X.columns), n_peers, jaccard, rng)
    parts = np.array_split(rng.permutation(len(ds.y)), n_peers)
    peers, tests = [], []
    for k, (idx, cols) in enumerate(zip(parts, feature_sets, strict=True)):
        tr, te = _train_test(ds.y, idx, rng)
        cats = [c for c in cols if c in ds.categorical]
        peer = Peer(f"peer{k}", config.trees, random_state=int(rng.integers(2**31 - 1)),
                    engine=config.engine)  # fmt: skip
        peers.append(peer.fit(ds.X.iloc[tr][cols], ds.y[tr], categorical_features=cats))
        tests.append((ds.X.iloc[te][cols], ds.y[te]))
    swarm = SwarmForest([p.share(shared_features=shared) for p in peers])
    inter = None
    if "intersection" in config.strategies:
        inter_peers = fit_intersection(peers)
        inter = SwarmForest([p.share(surrogates=False, imputers=False) for p in inter_peers])
    base = {"dataset": dataset, "peers": n_peers, "jaccard": jaccard, "rep": rep,
            "overlap": len(shared), "jaccard_achieved": achieved_jaccard(feature_sets)}  # fmt: skip
    rows = []
    for k, (X_te, y_te) in enumerate(tests):
        for strategy in config.strategies:
            model = inter if strategy == "intersection" else swarm
            assert model is not None
            proba = model.predict_proba(
                X_te, strategy=strategy, site=f"peer{k}", d_thresh=config.d_thresh,
                random_state=int(rng.integers(2**31 - 1)),
            )  # fmt: skip
            rows.append({**base, "site": k, "strategy": strategy,
                         **scores(y_te, proba, model.classes_)})  # fmt: skip
    return rows


# ----------------------------------------------------------------------- the whole grid
def run_swarm(config: SwarmConfig, progress: bool = True) -> pd.DataFrame:
    """Every (dataset, peers, jaccard, repetition) scenario, in ``n_jobs`` processes."""
    from joblib import Parallel, delayed

    from .._progress import progress_bar

    tasks = list(product(config.datasets, config.peers, config.jaccards, range(config.reps)))
    jobs = (delayed(run_scenario)(d, n, j, r, config) for d, n, j, r in tasks)
    if config.n_jobs == 1:
        results = (run_scenario(d, n, j, r, config) for d, n, j, r in tasks)
    else:
        results = Parallel(n_jobs=config.n_jobs, return_as="generator_unordered")(jobs)
    rows: list[dict[str, Any]] = []
    bar = progress_bar(results, total=len(tasks), desc="swarm scenarios", disable=not progress)
    for chunk in bar:
        rows.extend(chunk)
    order = {s: i for i, s in enumerate(config.strategies)}
    frame = pd.DataFrame(rows)
    frame["_o"] = frame.strategy.map(order)
    keys = ["dataset", "peers", "jaccard", "rep", "site", "_o"]
    return frame.sort_values(keys).drop(columns="_o").reset_index(drop=True)


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Mean of every metric over peers and repetitions, per scenario and strategy."""
    keys = ["dataset", "peers", "jaccard", "strategy"]
    cols = [*METRICS, "overlap", "jaccard_achieved"]
    return results.groupby(keys, sort=False)[cols].mean().reset_index()


def table(summary: pd.DataFrame, dataset: str, metric: str, jaccards: Sequence[float]) -> str:
    """Markdown table in the layout of the paper's Tables II/III."""
    data = summary[(summary.dataset == dataset) & summary.jaccard.isin(list(jaccards))]
    grid = data.pivot_table(index=["peers", "jaccard"], columns="strategy", values=metric)
    grid = grid[[s for s in dict.fromkeys(data.strategy)]]
    head = "| Peers | Jaccard | " + " | ".join(grid.columns) + " |"
    lines = [head, "|" + "---|" * (grid.shape[1] + 2)]
    for (n, j), row in grid.iterrows():
        lines.append(f"| {n} | {j:.1f} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    return "\n".join(lines)


def write_outputs(results: pd.DataFrame, config: SwarmConfig) -> list[Path]:
    """CSV, tables, heatmaps and CD diagrams; returns the files written."""
    from ._swarm_stats import friedman_nemenyi, plot_cd_diagram, plot_heatmaps, relative_improvement

    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(results)
    written = [out / "results.csv", out / "summary.csv"]
    results.to_csv(written[0], index=False)
    summary.to_csv(written[1], index=False)
    shown = [j for j in config.jaccards if round(j, 1) in (0.3, 0.7)] or list(config.jaccards)
    for dataset, metric in product(config.datasets, METRICS):
        path = out / f"table_{dataset}_{metric}.md"
        path.write_text(table(summary, dataset, metric, shown) + "\n")
        written.append(path)
        if "intersection" in config.strategies:
            gains = relative_improvement(summary, metric)
            written.append(
                plot_heatmaps(gains, dataset, metric, out / f"heatmap_{dataset}_{metric}.png")
            )
    for metric in METRICS:
        blocks = summary.pivot_table(index=["dataset", "peers", "jaccard"], columns="strategy",
                                     values=metric)  # fmt: skip
        try:
            res = friedman_nemenyi(blocks[list(config.strategies)])
        except ValueError as exc:
            print(f"{metric}: no Friedman test ({exc})")
            continue
        ranks = res.avg_ranks.rename("avg_rank").to_frame()
        ranks["friedman_chi2"], ranks["p_value"], ranks["cd"] = res.statistic, res.p_value, res.cd
        ranks.to_csv(out / f"ranks_{metric}.csv")
        title = (f"{metric.upper()}: Friedman p = {res.p_value:.2g} over {res.n_blocks} blocks, "
                 f"Nemenyi CD = {res.cd:.2f}")  # fmt: skip
        written += [
            out / f"ranks_{metric}.csv",
            plot_cd_diagram(res, out / f"cd_{metric}.png", title),
        ]
    return written


# ----------------------------------------------------------------------- command line
def add_swarm_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``swarm-overlap`` to an ``add_subparsers()`` object (e.g. ``fedforest experiment``)."""
    from fedforest.swarm import STRATEGIES
    from fedforest.swarm.data import SWARM_DATASETS

    p = subparsers.add_parser(
        SUBCOMMAND,
        help="swarm forests under partial feature overlap (Tables II/III, CD diagram)",
        description=__doc__.split("\n\n")[1],
        formatter_class=DefaultsHelpFormatter,
    )
    d = SwarmConfig()
    p.add_argument("--datasets", nargs="+", choices=SWARM_DATASETS, default=list(d.datasets),
                   help="datasets to run (docs/swarm.md)")  # fmt: skip
    p.add_argument("--peers", nargs="+", type=int, default=list(d.peers), help="numbers of peers")
    p.add_argument("--jaccards", nargs="+", type=float, default=list(d.jaccards),
                   help="target pairwise Jaccard similarities (0, 1]")  # fmt: skip
    p.add_argument("--reps", type=int, default=d.reps, help="repetitions (the paper: 100)")
    p.add_argument("--trees", type=int, default=d.trees, help="trees per peer")
    p.add_argument("--seed", type=int, default=d.seed, help="base seed of the scenarios")
    p.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(d.strategies),
                   help="pooling strategies to score")  # fmt: skip
    p.add_argument("--d-thresh", type=int, default=d.d_thresh, help="PR depth threshold")
    p.add_argument("--engine", choices=("sklearn", "fedforest"), default=d.engine,
                   help="forest implementation each peer trains")  # fmt: skip
    p.add_argument("--n-jobs", type=int, default=d.n_jobs, help="worker processes")
    p.add_argument("--out", type=out_directory, default=d.out, help="output directory")
    p.set_defaults(handler=_handler)
    return p


def _handler(args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> int:
    """``handler(args, parser)`` as ``fedforest.cli.main`` calls it; bad options exit 2."""
    try:
        config_from_args(args)
        if why := unwritable_directory(args.out):  # it ran, then lost all in a traceback
            raise ValueError(f"argument --out: {why}")
    except ValueError as exc:
        if parser is None:
            raise
        parser.error(str(exc))
    return run_swarm_experiment(args)


def config_from_args(args: argparse.Namespace) -> SwarmConfig:
    """Validated :class:`SwarmConfig` from parsed options."""
    if any(n < 2 for n in args.peers):
        raise ValueError(f"--peers must be >= 2, got {args.peers}")
    if any(not 0 < j <= 1 for j in args.jaccards):
        raise ValueError(f"--jaccards must be in (0, 1], got {args.jaccards}")
    if args.reps < 1 or args.trees < 1 or args.d_thresh < 0 or args.n_jobs == 0:
        raise ValueError("--reps and --trees must be >= 1, --d-thresh >= 0, --n-jobs != 0")
    if args.seed < 0:  # NumPy's seeds are non-negative: it was a traceback
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    for option in ("datasets", "peers", "jaccards", "strategies"):
        # A repeated value ran its scenarios twice (and counted them twice in the Friedman
        # test), or, for a strategy, ended in a TypeError.
        values = getattr(args, option)
        twice = sorted({str(v) for v in values if values.count(v) > 1})
        if twice:
            raise ValueError(f"--{option} gives {', '.join(twice)} more than once; give each once")
    for name in args.datasets:  # each peer needs rows to train on and to score
        n_rows = len(_dataset(name).y)
        if n_rows // max(args.peers) < MIN_ROWS_PER_PEER:
            raise ValueError(
                f"--peers {max(args.peers)} leaves a peer fewer than {MIN_ROWS_PER_PEER} of "
                f"{name}'s {n_rows} rows; use at most {n_rows // MIN_ROWS_PER_PEER} peers"
            )
    return SwarmConfig(
        datasets=tuple(args.datasets), peers=tuple(args.peers), jaccards=tuple(args.jaccards),
        reps=args.reps, trees=args.trees, seed=args.seed, strategies=tuple(args.strategies),
        d_thresh=args.d_thresh, engine=args.engine, n_jobs=args.n_jobs, out=args.out,
    )  # fmt: skip


def run_swarm_experiment(args: argparse.Namespace) -> int:
    """Run the experiment described by parsed options; print tables, files and the command."""
    config = config_from_args(args)
    start = time.perf_counter()
    results = run_swarm(config)
    written = write_outputs(results, config)
    summary = summarize(results)
    shown = [j for j in config.jaccards if round(j, 1) in (0.3, 0.7)] or list(config.jaccards)
    for dataset in config.datasets:
        print(f"\n{dataset}: mean AUPRC over peers and {config.reps} repetition(s)")
        print(table(summary, dataset, "auprc", shown))
    ranks = config.out / "ranks_auprc.csv"
    if ranks in written:  # not an earlier run's file: this run may have had no Friedman test
        print("\naverage AUPRC rank over all datasets and scenarios (1 = best):")
        print(pd.read_csv(ranks, index_col=0).round(3).to_string())
    print(f"\nwrote {len(written)} files to {config.out} in {time.perf_counter() - start:.0f} s")
    print(f"reproduce: {config.command()}")
    options = config.command().split(SUBCOMMAND, 1)[1].strip()
    print(f"       or: python -m fedforest.experiments.swarm {options}")
    return 0


def run_interruptible(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The command's handler; Ctrl-C ends it with a line (exit status 130), not a traceback."""
    try:
        return _handler(args, parser)
    except KeyboardInterrupt:
        print(
            f"\nfedforest experiment {SUBCOMMAND}: interrupted; it writes its files once every "
            "scenario has run, so nothing of this run was written; the same command starts "
            "it again",
            file=sys.stderr,
        )
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fedforest.experiments.swarm [options]``."""
    parser = argparse.ArgumentParser(prog="python -m fedforest.experiments.swarm")
    sub = parser.add_subparsers(dest="command")
    add_swarm_subcommand(sub)
    # The subcommand is implied here: usage and errors name the module alone (they said
    # "python -m fedforest.experiments.swarm swarm-overlap", which the module refuses).
    sub.choices[SUBCOMMAND].prog = parser.prog
    args = parser.parse_args([SUBCOMMAND, *(sys.argv[1:] if argv is None else argv)])
    return run_interruptible(args, parser)


if __name__ == "__main__":
    raise SystemExit(main())
