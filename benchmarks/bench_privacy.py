"""What privacy="secure" costs against "none": fit time, bytes, rounds and accuracy.

For each size (training rows x 20 features, 10 clients with shifted covariates, the
paper's forest: 50 trees, depth 8, leaf 5, B = 32, 2 threads) both levels are fitted side
by side in this process, after one untimed warm-up fit of each on 500 rows (numba's
compilation and cache loading are not fit time). Reported: the best of ``--repeats``
fit times, the bytes both ways and the rounds from ``model.communication_``, and the
test MSE, with scikit-learn's RandomForestRegressor on the same rows as the reference.

With ``--dp-curve PNG`` it instead fits ``privacy="dp"`` at epsilon 0.5 to 50 (5 seeds)
on three tasks and plots test MSE / accuracy against epsilon, with "secure" and "none" as
reference lines: the paper's homogeneous setting (1,400 rows, the paper's forest), the same
setting with 14,000 rows and a small forest (10 trees, depth 5), and a 3-class
``make_classification`` problem (1,400 training rows, the paper's forest). It prints the
references and, per epsilon, the mean, the lowest and the highest of the seeds.

Usage::

    python benchmarks/bench_privacy.py                      # 1,400 and 20,000 rows
    python benchmarks/bench_privacy.py --sizes 1400 200000 --repeats 3
    python benchmarks/bench_privacy.py --dp-curve docs/img/privacy-dp-utility.png
    python benchmarks/bench_privacy.py --accuracy           # the paper's settings, FedHeart
    python benchmarks/bench_privacy.py --dp-colluders 0 1 3  # what dp_colluders costs

``--accuracy`` prints, on the paper's three synthetic settings (1,400 rows, the paper's
forest, ``--seeds``, default 0 to 2), test MSE relative to scikit-learn's forest for
"none", "secure" and their leaf-size / min_aggregate_rows variants (``--quick``: "none"
and "secure" only), each seed's ratio, and FedHeart's accuracy (``--heart-seeds``,
default 0 to 4; none skips it). One seed's secure forest moves by a few percent of MSE
with its grids (any change of the grid round's moments redraws them): compare variants
over many seeds, e.g. ``--accuracy --quick --seeds 0 1 2 3 4 5 6 7 8 9 10 11``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
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

from sklearn.ensemble import RandomForestRegressor

import fedforest as ff

KW = dict(n_estimators=50, max_depth=8, min_samples_leaf=5, max_features=1 / 3)


def data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    n_test = 5000
    h = rng.integers(0, 10, n + n_test)
    X = rng.normal(size=(n + n_test, 20)) + 0.5 * h[:, None] / 10  # shifted covariates
    y = X[:, 0] + np.sin(2 * X[:, 1]) + (X[:, 2] > 0.5) + 0.3 * rng.normal(size=len(h))
    return X[:n], y[:n], h[:n], X[n:], y[n:]


def fit(privacy: str, X, y, h, repeats: int):
    best, model = np.inf, None
    for _ in range(repeats):
        model = ff.FedForestRegressor(random_state=0, n_jobs=2, privacy=privacy, **KW)
        start = time.perf_counter()
        model.fit(X, y, client_ids=h)
        best = min(best, time.perf_counter() - start)
    return best, model


EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)


def dp_curve(out: str, n_seeds: int = 5) -> None:
    """Utility of privacy="dp" against epsilon, beside "secure" and "none".

    Each point is the mean over ``n_seeds`` data draws; the band spans the lowest to the
    highest of them. The noise comes from the operating system's generator, so a rerun
    draws another curve: the band shows how far one draw can land from the mean.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from sklearn.datasets import make_classification

    from fedforest.datasets import make_paper_synthetic

    def regression(n_per_client: int, forest: dict) -> tuple:
        def run(privacy: str, eps: float | None, seed: int) -> float:
            d = make_paper_synthetic("homogeneous", n_per_client=n_per_client, random_state=seed)
            m = ff.FedForestRegressor(random_state=seed, privacy=privacy, epsilon=eps, **forest)
            m.fit(d.X_train, d.y_train, client_ids=d.h_train)
            return float(np.mean((m.predict(d.X_test) - d.y_test) ** 2))

        return run

    def classification(privacy: str, eps: float | None, seed: int) -> float:
        X, y = make_classification(2000, 20, n_informative=8, n_classes=3, random_state=seed)
        h = np.random.default_rng(seed).integers(0, 10, len(y))
        kw = {**KW, "max_features": "sqrt"}
        m = ff.FedForestClassifier(random_state=seed, privacy=privacy, epsilon=eps, **kw)
        m.fit(X[:1400], y[:1400], client_ids=h[:1400])
        return float(m.score(X[1400:], y[1400:]))

    small = {"n_estimators": 10, "max_depth": 5, "min_samples_leaf": 5, "max_features": 1 / 3}
    tasks = [
        ("regression, 1,400 rows, 50 trees depth 8", regression(140, KW), "test MSE"),
        ("regression, 14,000 rows, 10 trees depth 5", regression(1400, small), "test MSE"),
        ("3 classes, 1,400 rows, 50 trees depth 8", classification, "test accuracy"),
    ]
    fig = Figure(figsize=(13, 3.8))
    for i, (title, run, metric) in enumerate(tasks):
        ax = fig.add_subplot(1, 3, i + 1)
        seeds = range(n_seeds)
        runs = np.array([[run("dp", e, s) for s in seeds] for e in EPSILONS])
        curve = runs.mean(axis=1)
        ax.plot(EPSILONS, curve, "o-", label=f'privacy="dp" (mean of {n_seeds})')
        ax.fill_between(EPSILONS, runs.min(axis=1), runs.max(axis=1), alpha=0.25, lw=0)
        for privacy, style in (("secure", "--"), ("none", ":")):
            ref = np.mean([run(privacy, None, s) for s in seeds])
            ax.axhline(ref, linestyle=style, color="k", label=f'"{privacy}"')
            print(title, f'"{privacy}" (mean of {n_seeds})', round(float(ref), 4))
        print(title, "mean", dict(zip(EPSILONS, np.round(curve, 4), strict=True)))
        print(" " * len(title), "min ", dict(zip(EPSILONS, np.round(runs.min(1), 4), strict=True)))
        print(" " * len(title), "max ", dict(zip(EPSILONS, np.round(runs.max(1), 4), strict=True)))
        ax.set_xscale("log")
        if "MSE" in metric:
            ax.set_yscale("log")  # small budgets: the noise drowns even the standardisation
        ax.set_xlabel("epsilon (whole fit, delta = min(1e-5, 0.1 / n))")
        ax.set_ylabel(metric + (" (lower is better)" if "MSE" in metric else " (higher is better)"))
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    FigureCanvasAgg(fig).print_png(out)
    print(f"wrote {out}")


def dp_colluders(colluders: list[int], n_seeds: int, epsilons: tuple[float, ...]) -> None:
    """What ``dp_colluders`` costs: the dp curve's 14,000-row setting at each ``t``.

    10 clients of 1,400 rows (the paper's homogeneous data), 10 trees of depth 5; per
    epsilon and ``t``, test MSE over ``n_seeds`` data draws (mean, lowest, highest), the
    seeds alternated over ``t`` so that load changes fall on every ``t`` alike.
    """
    from fedforest.datasets import make_paper_synthetic

    small = {"n_estimators": 10, "max_depth": 5, "min_samples_leaf": 5, "max_features": 1 / 3}
    mse: dict[tuple[float, int], list[float]] = {}
    for seed in range(n_seeds):
        d = make_paper_synthetic("homogeneous", n_per_client=1400, random_state=seed)
        for eps in epsilons:
            for t in colluders:
                m = ff.FedForestRegressor(
                    random_state=seed, privacy="dp", epsilon=eps, dp_colluders=t, **small
                )
                m.fit(d.X_train, d.y_train, client_ids=d.h_train)
                err = float(np.mean((m.predict(d.X_test) - d.y_test) ** 2))
                mse.setdefault((eps, t), []).append(err)
                print(f"seed {seed} epsilon {eps:g} t {t}: test MSE {err:.4f}", flush=True)
    print("| epsilon | dp_colluders | noise sd x | test MSE mean | lowest | highest |")
    print("|---:|---:|---:|---:|---:|---:|")
    for (eps, t), v in mse.items():
        noise = np.sqrt(10 / (10 - t))
        print(f"| {eps:g} | {t} | {noise:.3f} | {np.mean(v):.4f} | {min(v):.4f} | {max(v):.4f} |")


def accuracy(seeds: list[int], heart_seeds: list[int], quick: bool = False) -> None:
    """The accuracy table of docs/privacy.md (``quick``: "none" and "secure" only).

    Per setting: the mean MSE of each variant over ``seeds`` relative to scikit-learn's,
    then each seed's ratio (one seed's forest moves by a few percent with its grids, so
    compare variants over many seeds).
    """
    from sklearn.ensemble import RandomForestClassifier

    from fedforest.datasets import (
        fed_heart_disease_split,
        load_fed_heart_disease,
        make_paper_synthetic,
    )

    variants: dict[str, dict[str, object]] = {
        "none": dict(privacy="none"),
        "secure": dict(privacy="secure"),
    }
    if not quick:
        variants["none, leaf 10"] = dict(privacy="none", min_samples_leaf=10)
        variants["secure, m = 5"] = dict(privacy="secure", min_aggregate_rows=5)
    kw = dict(n_estimators=50, max_depth=8, max_features=1 / 3, n_jobs=2)
    for setting in ("homogeneous", "covariate-shift", "outcome-shift"):
        names = ["sklearn", *([] if quick else ["sklearn, leaf 10"]), *variants]
        mse: dict[str, list[float]] = {name: [] for name in names}
        for seed in seeds:
            d = make_paper_synthetic(setting, random_state=seed)
            for name, v in variants.items():
                m = ff.FedForestRegressor(random_state=seed, **{"min_samples_leaf": 5, **kw, **v})
                m.fit(d.X_train, d.y_train, client_ids=d.h_train)
                mse[name].append(float(np.mean((m.predict(d.X_test) - d.y_test) ** 2)))
            for leaf, name in ((5, "sklearn"), (10, "sklearn, leaf 10"))[: 1 if quick else 2]:
                ref = RandomForestRegressor(random_state=seed, min_samples_leaf=leaf, **kw)
                ref.fit(d.X_train, d.y_train)
                mse[name].append(float(np.mean((ref.predict(d.X_test) - d.y_test) ** 2)))
        base = np.mean(mse["sklearn"])
        print(setting, {k: round(float(np.mean(v) / base), 3) for k, v in mse.items()})
        if len(seeds) > 1:
            sk_mse = np.array(mse["sklearn"])
            per_seed = {k: np.round(np.array(v) / sk_mse, 3).tolist() for k, v in mse.items()}
            print("  per seed", seeds, {k: v for k, v in per_seed.items() if k != "sklearn"})
    if not heart_seeds:
        return
    df = load_fed_heart_disease()
    train = fed_heart_disease_split(df)
    X = df.drop(columns=["target", "center"]).to_numpy(float)
    y, h = df["target"].to_numpy(), df["center"].to_numpy()
    acc: dict[str, float] = {}
    each: dict[str, list[float]] = {}
    for privacy in ("none", "secure"):
        scores = []
        for seed in heart_seeds:
            m = ff.FedForestClassifier(random_state=seed, privacy=privacy)
            m.fit(X[train], y[train], client_ids=h[train])
            scores.append(m.score(X[~train], y[~train]))
        acc[privacy], each[privacy] = float(np.mean(scores)), np.round(scores, 3).tolist()
    sk = [
        RandomForestClassifier(50, max_depth=8, min_samples_leaf=5, random_state=seed)
        .fit(X[train], y[train])
        .score(X[~train], y[~train])
        for seed in heart_seeds
    ]
    acc["sklearn"] = float(np.mean(sk))
    print("FedHeart accuracy", {k: round(v, 3) for k, v in acc.items()})
    if len(heart_seeds) > 1:
        print("  per seed", heart_seeds, each)


def decompose() -> None:
    """Where secure's accuracy goes in the homogeneous setting (docs/privacy.md)."""
    from fedforest.datasets import make_paper_synthetic

    variants = {
        "none": dict(privacy="none"),
        "none, no local candidates": dict(privacy="none", local_candidates=False),
        "none, no local candidates, leaf 10": dict(
            privacy="none", local_candidates=False, min_samples_leaf=10
        ),
        "secure, m = 1": dict(privacy="secure", min_aggregate_rows=1),
        "secure, m = 5": dict(privacy="secure", min_aggregate_rows=5),
        "secure, m = 10 (default)": dict(privacy="secure"),
        "secure, B = 128": dict(privacy="secure", n_bins=128),
    }
    kw = dict(n_estimators=50, max_depth=8, max_features=1 / 3, n_jobs=1)
    mse: dict[str, list[float]] = {"sklearn, leaf 10": [], **{name: [] for name in variants}}
    ref = []
    for seed in range(3):
        d = make_paper_synthetic("homogeneous", random_state=seed)
        for leaf in (5, 10):
            sk = RandomForestRegressor(random_state=seed, min_samples_leaf=leaf, **kw)
            err = float(np.mean((sk.fit(d.X_train, d.y_train).predict(d.X_test) - d.y_test) ** 2))
            (ref if leaf == 5 else mse["sklearn, leaf 10"]).append(err)
        for name, extra in variants.items():
            m = ff.FedForestRegressor(random_state=seed, **{"min_samples_leaf": 5, **kw, **extra})
            m.fit(d.X_train, d.y_train, client_ids=d.h_train)
            mse[name].append(float(np.mean((m.predict(d.X_test) - d.y_test) ** 2)))
    print(f"scikit-learn's test MSE (leaf 5, 3 seeds): {np.mean(ref):.4f}")
    for name, values in mse.items():
        print(f"| {name} | {np.mean(values) / np.mean(ref):.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1400, 20000], help="training rows per run"
    )
    parser.add_argument("--repeats", type=int, default=2, help="timed fits; the best is reported")
    parser.add_argument("--dp-curve", metavar="PNG", help="plot the dp utility curve instead")
    parser.add_argument("--accuracy", action="store_true", help="print the accuracy table")
    parser.add_argument(
        "--dp-colluders",
        type=int,
        nargs="+",
        metavar="T",
        help="test MSE of the dp curve's 14,000-row setting at each dp_colluders T "
        "(epsilon 10 and 50; --seeds one number, the data draws, 3 without it)",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="--accuracy's synthetic seeds (0 1 2 without it); with --dp-curve one number, the "
        "data draws per point (5 without it)",
    )
    parser.add_argument(
        "--heart-seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4], help="FedHeart's seeds"
    )
    parser.add_argument(
        "--quick", action="store_true", help='--accuracy with "none" and "secure" only'
    )
    parser.add_argument(
        "--decompose", action="store_true", help="where secure's accuracy goes (homogeneous)"
    )
    args = parser.parse_args()
    if args.decompose:
        decompose()
        return
    if args.dp_colluders:
        if args.seeds is not None and len(args.seeds) != 1:
            parser.error("--dp-colluders takes one --seeds number: the data draws")
        print(f"# python benchmarks/bench_privacy.py {shlex.join(sys.argv[1:])}")
        dp_colluders(args.dp_colluders, args.seeds[0] if args.seeds else 3, (10.0, 50.0))
        return
    if args.accuracy:
        accuracy(args.seeds or [0, 1, 2], args.heart_seeds, args.quick)
        return
    if args.dp_curve:
        if args.seeds is not None and len(args.seeds) != 1:
            parser.error("--dp-curve takes one --seeds number: the data draws per point")
        dp_curve(args.dp_curve, args.seeds[0] if args.seeds else 5)
        return
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    )
    print(f"# python benchmarks/bench_privacy.py {shlex.join(sys.argv[1:])}")
    Xw, yw, hw, _, _ = data(500, 1)
    for privacy in ("none", "secure"):
        ff.FedForestRegressor(n_estimators=2, privacy=privacy).fit(Xw, yw, client_ids=hw)
    print("| rows | privacy | fit s | MB | rounds | test MSE | MSE / sklearn |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        X, y, h, Xt, yt = data(n)
        ref = RandomForestRegressor(random_state=0, n_jobs=2, **KW).fit(X, y)
        ref_mse = float(np.mean((ref.predict(Xt) - yt) ** 2))
        rows = {}
        for privacy in ("none", "secure"):
            seconds, model = fit(privacy, X, y, h, args.repeats)
            led = model.communication_
            mse = float(np.mean((model.predict(Xt) - yt) ** 2))
            rows[privacy] = (seconds, led.total_megabytes, led.rounds)
            print(
                f"| {n:,} | {privacy} | {seconds:.2f} | {led.total_megabytes:.1f} | "
                f"{led.rounds} | {mse:.4f} | {mse / ref_mse:.3f} |"
            )
        t = rows["secure"][0] / rows["none"][0]
        b = rows["secure"][1] / rows["none"][1]
        print(f"|  | secure / none | {t:.2f}x | {b:.2f}x | | | |")


if __name__ == "__main__":
    main()
