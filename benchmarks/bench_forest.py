"""Speed, accuracy, memory and communication of fedforest against other random forests.

For every size n (training rows) x 20 features, fits side by side, with the same forest
hyperparameters (50 trees, max_depth 8, min_samples_leaf 5, a third of the features per
node, bootstrap or its stand-in, 2 threads):

- ``fedforest``: ``FedForestRegressor(n_bins=32, privacy="none")`` fitted with ``client_ids`` (10
  simulated clients of equal size, rows assigned at random); ``--privacy secure`` times the
  default privacy level instead, ``--binning global`` the one-round-a-level grid (with
  ``--fedforest-bins`` bins);
- ``sklearn``: scikit-learn ``RandomForestRegressor`` (exact splits, the reference);
- ``xgboost``: ``XGBRFRegressor`` (histogram splits, 32 bins, subsampling without
  replacement);
- ``lightgbm``: ``LGBMRegressor(boosting_type="rf")`` (histogram splits, 32 bins, bagging
  without replacement).

Each (size, method) runs in a fresh spawned process so that peak memory, thread pools
and OpenMP runtimes do not leak from one method to the next. In that process the data
are generated (seeded, identical for every method), one untimed warm-up fit is made on
500 rows (it excludes numba compilation / cache loading, imports and thread-pool start
up from the timings), then ``--repeats`` timed fits (``time.perf_counter``; the best is
reported, since other processes on a shared machine only ever slow a fit down) and one
timed prediction of the test set follow (each fit's CPU time, of all the process's
threads, is recorded too). The CPU time other processes used during each fit is recorded
(``bg``, from /proc/stat) so that contended timings can be recognised.

Usage::

    python benchmarks/bench_forest.py                       # 2k, 100k and 1M rows
    python benchmarks/bench_forest.py --sizes 2000 100000 --repeats 3 --out results.json
    python benchmarks/bench_forest.py --sizes 2000 20000 100000 1000000 \\
        --markdown section.md --plot docs/img/bench-fit-time.png  # docs/benchmarks.md's
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

try:  # running from a checkout without ``pip install -e .``
    import fedforest  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "fedforest":  # fedforest found but broken: say so, do not fall back
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

METHODS = ("fedforest", "sklearn", "xgboost", "lightgbm")
REFERENCE = "sklearn"

N_FEATURES = 20
N_TREES = 50
MAX_DEPTH = 8
MIN_SAMPLES_LEAF = 5
MAX_FEATURES = 1 / 3
N_BINS = 32
N_CLIENTS = 10
#: Bootstrap stand-in of XGBoost and LightGBM: sampling without replacement of the
#: expected fraction of distinct rows in a bootstrap sample, 1 - 1/e.
SUBSAMPLE = 0.632
TEST_FRACTION = 0.2
MAX_TEST_ROWS = 100_000
WARMUP_ROWS = 500
NOISE_SD = 1.0


# --------------------------------------------------------------------------- data
def n_test_rows(n_train: int) -> int:
    """Test rows for ``n_train`` training rows: 20 % of the total, at most 100k."""
    return min(round(n_train * TEST_FRACTION / (1 - TEST_FRACTION)), MAX_TEST_ROWS)


def friedman20(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Friedman #1 signal on x0..x4 plus a weaker nonlinear term on x5..x9, x ~ U(0, 1)^20.

    y = 10 sin(pi x0 x1) + 20 (x2 - 1/2)^2 + 10 x3 + 5 x4
        + 2 [x5 > 1/2] x6 + 3 cos(2 pi x7) x8 + x9 + N(0, 1);  x10..x19 are pure noise.
    """
    X = rng.random((n, N_FEATURES))
    y = (
        10.0 * np.sin(np.pi * X[:, 0] * X[:, 1])
        + 20.0 * (X[:, 2] - 0.5) ** 2
        + 10.0 * X[:, 3]
        + 5.0 * X[:, 4]
        + 2.0 * (X[:, 5] > 0.5) * X[:, 6]
        + 3.0 * np.cos(2.0 * np.pi * X[:, 7]) * X[:, 8]
        + X[:, 9]
        + rng.normal(0.0, NOISE_SD, n)
    )
    return X, y


def make_data(n_train: int, seed: int) -> dict[str, np.ndarray]:
    """Train/test rows and the client id of every training row (equal sizes, random)."""
    rng = np.random.default_rng([seed, n_train])
    X_train, y_train = friedman20(n_train, rng)
    X_test, y_test = friedman20(n_test_rows(n_train), rng)
    h_train = rng.permutation(np.arange(n_train) % N_CLIENTS)
    return {
        "X_train": X_train,
        "y_train": y_train,
        "h_train": h_train,
        "X_test": X_test,
        "y_test": y_test,
    }


# --------------------------------------------------------------------------- models
def k_features() -> int:
    """Features per node, scikit-learn's rounding of max_features=1/3: int(20/3) = 6."""
    return max(1, int(MAX_FEATURES * N_FEATURES))


def make_model(
    method: str,
    n_jobs: int,
    seed: int,
    privacy: str = "none",
    binning: str = "quantile",
    ff_bins: int = N_BINS,
) -> Any:
    """The estimator of ``method`` with the shared hyperparameters.

    ``binning`` and ``ff_bins`` are fedforest's (``--binning``, ``--fedforest-bins``).
    """
    if method == "fedforest":
        from fedforest import FedForestRegressor

        return FedForestRegressor(
            n_estimators=N_TREES,
            max_depth=MAX_DEPTH,
            min_samples_leaf=MIN_SAMPLES_LEAF,
            max_features=MAX_FEATURES,
            n_bins=ff_bins,
            binning=binning,
            bootstrap=True,
            n_jobs=n_jobs,
            random_state=seed,
            # The tables of docs/benchmarks.md are of the paper's protocol unless they say
            # otherwise (--privacy secure: the estimator's default).
            privacy=privacy,
        )
    if method == "sklearn":
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(
            n_estimators=N_TREES,
            max_depth=MAX_DEPTH,
            min_samples_leaf=MIN_SAMPLES_LEAF,
            max_features=MAX_FEATURES,
            bootstrap=True,
            n_jobs=n_jobs,
            random_state=seed,
        )
    # XGBoost truncates fraction * 20, LightGBM rounds it (1/3 would give 7 features);
    # 6/20 = 0.3 gives both the same 6 features per node as scikit-learn.
    colsample = k_features() / N_FEATURES
    if method == "xgboost":
        from xgboost import XGBRFRegressor

        return XGBRFRegressor(
            n_estimators=N_TREES,  # num_parallel_tree: one round of 50 trees
            max_depth=MAX_DEPTH,
            tree_method="hist",
            max_bin=N_BINS,
            subsample=SUBSAMPLE,
            colsample_bynode=colsample,
            learning_rate=1.0,
            reg_lambda=1e-6,  # leaf value = mean residual, as in a CART leaf
            min_child_weight=MIN_SAMPLES_LEAF,  # hessian 1 per row: >= 5 sampled rows
            n_jobs=n_jobs,
            random_state=seed,
        )
    if method == "lightgbm":
        from lightgbm import LGBMRegressor

        return LGBMRegressor(
            boosting_type="rf",
            n_estimators=N_TREES,
            max_depth=MAX_DEPTH,
            num_leaves=2**MAX_DEPTH,
            min_child_samples=MIN_SAMPLES_LEAF,
            bagging_fraction=SUBSAMPLE,
            bagging_freq=1,
            feature_fraction_bynode=colsample,
            max_bin=N_BINS,
            n_jobs=n_jobs,
            random_state=seed,
            verbose=-1,
        )
    raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")


def fit(model: Any, method: str, X: np.ndarray, y: np.ndarray, h: np.ndarray) -> Any:
    if method == "fedforest":
        return model.fit(X, y, client_ids=h)
    return model.fit(X, y)


# --------------------------------------------------------------------------- memory
def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset the kernel's resident-set high-water mark (Linux >= 4.0); False if unavailable."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_kib() -> int:
    hwm = _status_kib("VmHWM")
    if hwm is not None:
        return hwm
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux


def current_rss_kib() -> int:
    rss = _status_kib("VmRSS")
    return rss if rss is not None else peak_rss_kib()


# --------------------------------------------------------------------------- contention
def system_busy_seconds() -> float | None:
    """CPU seconds all processes have spent busy since boot (Linux /proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def wait_until_idle(max_wait: float, threshold: float = 0.25, sample: float = 2.0) -> float:
    """Wait (at most ``max_wait`` s) until other processes use < ``threshold`` cores.

    Returns the background load of the last sample, in cores (nan if unknown).
    """
    deadline = time.monotonic() + max_wait
    while True:
        busy0 = system_busy_seconds()
        time.sleep(sample)
        busy1 = system_busy_seconds()
        if busy0 is None or busy1 is None:
            return float("nan")
        load = (busy1 - busy0) / sample
        if load < threshold or time.monotonic() >= deadline:
            return load
        print(f"  waiting: other processes use {load:.2f} cores", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- one run
def run_one(
    method: str,
    n_train: int,
    repeats: int,
    n_jobs: int,
    seed: int,
    privacy: str = "none",
    binning: str = "quantile",
    ff_bins: int = N_BINS,
) -> dict[str, Any]:
    """Fit and score ``method`` at ``n_train`` rows (runs in its own process)."""
    data = make_data(n_train, seed)
    X, y, h = data["X_train"], data["y_train"], data["h_train"]

    # Untimed warm-up: numba compilation (or cache loading), imports, thread pools.
    warm = make_data(WARMUP_ROWS, seed + 1)
    warm_model = make_model(method, n_jobs, seed, privacy, binning, ff_bins)
    fit(warm_model, method, warm["X_train"], warm["y_train"], warm["h_train"])

    fit_seconds, background, peak_delta_kib, exact_peak = [], [], None, False
    fit_cpu: list[float] = []  # CPU time of this process (all its threads) per fit
    model = None
    for r in range(repeats):
        model = None  # free the previous fit before measuring the next
        model = make_model(method, n_jobs, seed, privacy, binning, ff_bins)
        if r == 0:
            exact_peak = reset_peak_rss()
            rss_before = current_rss_kib() if exact_peak else peak_rss_kib()
        busy0, cpu0 = system_busy_seconds(), time.process_time()
        start = time.perf_counter()
        fit(model, method, X, y, h)
        wall = time.perf_counter() - start
        busy1, cpu1 = system_busy_seconds(), time.process_time()
        fit_seconds.append(wall)
        fit_cpu.append(cpu1 - cpu0)
        if busy0 is not None and busy1 is not None:
            background.append(max(0.0, (busy1 - busy0) - (cpu1 - cpu0)) / wall)
        if r == 0:
            peak_delta_kib = max(0, peak_rss_kib() - rss_before)
    best = int(np.argmin(fit_seconds))

    start = time.perf_counter()
    y_pred = np.asarray(model.predict(data["X_test"]), dtype=np.float64).ravel()
    predict_seconds = time.perf_counter() - start

    out: dict[str, Any] = {
        "method": method,
        "n_train": n_train,
        "n_test": int(data["y_test"].shape[0]),
        "fit_seconds": fit_seconds,
        "fit_seconds_best": fit_seconds[best],
        "fit_seconds_median": statistics.median(fit_seconds),
        "fit_cpu_seconds": fit_cpu,
        "fit_cpu_seconds_median": statistics.median(fit_cpu),
        "background_cores": background,
        "background_cores_best": background[best] if background else None,
        "predict_seconds": predict_seconds,
        "test_mse": float(np.mean((y_pred - data["y_test"]) ** 2)),
        "peak_rss_delta_mb": None if peak_delta_kib is None else peak_delta_kib * 1024 / 1e6,
        "peak_rss_method": "VmHWM reset" if exact_peak else "ru_maxrss delta (lower bound)",
        "y_pred": y_pred,
    }
    if method == "fedforest":
        ledger = model.communication_
        out["communication"] = {
            "rounds": int(ledger.rounds),
            "upload_bytes": int(ledger.upload_bytes),
            "download_bytes": int(ledger.download_bytes),
        }
    return out


def run_isolated(method: str, n_train: int, args: argparse.Namespace) -> dict[str, Any]:
    """``run_one`` in a fresh spawned process; an error is returned, not raised."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        future = pool.submit(
            run_one,
            method,
            n_train,
            args.repeats,
            args.n_jobs,
            args.seed,
            args.privacy,
            args.binning,
            args.fedforest_bins,
        )
        try:
            return future.result()
        except Exception as exc:  # a failing library should not lose the other results
            return {"method": method, "n_train": n_train, "error": f"{type(exc).__name__}: {exc}"}


# --------------------------------------------------------------------------- report
def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = {"python": platform.python_version()}
    for name in ("numpy", "sklearn", "numba", "xgboost", "lightgbm", "fedforest"):
        try:
            versions[name] = __import__(name).__version__
        except Exception:  # not installed, or (fedforest) mid-edit
            versions[name] = None
    try:
        with open("/proc/meminfo") as f:
            mem_gb = int(f.readline().split()[1]) * 1024 / 1e9
    except (OSError, ValueError, IndexError):
        mem_gb = None
    return {
        "cpu": cpu,
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gb": mem_gb,
        "platform": platform.platform(),
        "versions": versions,
        "fedforest_source": fedforest_source(),
    }


def fedforest_source() -> dict[str, Any]:
    """Where fedforest was imported from: path, hash of its sources, git commit if any.

    The engine changes quickly; the hash identifies the exact code that was timed.
    """
    try:
        import fedforest
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    package = Path(fedforest.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    info: dict[str, Any] = {"path": str(package), "sources_sha256": digest.hexdigest()[:16]}
    try:
        git = ["git", "-C", str(package.parent)]
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
        if head.returncode == 0:
            status = subprocess.run(
                [*git, "status", "--porcelain", "--", str(package)], capture_output=True, text=True
            )
            info["git_commit"] = head.stdout.strip()
            info["git_dirty"] = bool(status.stdout.strip())
    except OSError:
        pass
    return info


def reproduce_command(args: argparse.Namespace) -> str:
    argv = [
        "python",
        "benchmarks/bench_forest.py",
        "--sizes",
        *map(str, args.sizes),
        "--repeats",
        str(args.repeats),
        "--n-jobs",
        str(args.n_jobs),
        "--seed",
        str(args.seed),
        "--wait-idle",
        format(args.wait_idle, "g"),
        "--out",
        str(args.out),
    ]
    if args.privacy != "none":
        argv += ["--privacy", args.privacy]
    if args.binning != "quantile":
        argv += ["--binning", args.binning]
    if args.fedforest_bins != N_BINS:
        argv += ["--fedforest-bins", str(args.fedforest_bins)]
    if args.markdown is not None:
        argv += ["--markdown", str(args.markdown)]
    if args.plot is not None:
        argv += ["--plot", str(args.plot)]
    if args.skip:
        argv += ["--skip", *args.skip]
    return shlex.join(argv)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(n_train: int, results: list[dict[str, Any]]) -> str:
    """One size's table; also stores the ratios and gaps in ``results``."""
    ok = {r["method"]: r for r in results if "error" not in r}
    ref, xgb = ok.get(REFERENCE), ok.get("xgboost")
    n_test = next(iter(ok.values()))["n_test"] if ok else n_test_rows(n_train)
    lines = [
        f"n_train = {n_train:,}  n_test = {n_test:,}  d = {N_FEATURES}",
        f"{'method':<10}{'fit s':>8}{'median':>8}{'cpu s':>7}{'skl/x':>7}{'x/xgb':>7}{'pred s':>8}"
        f"{'test MSE':>9}{'gap %':>8}{'Δpred':>7}{'peak MB':>8}{'bg':>6}  communication",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"{r['method']:<10}  FAILED: {r['error']}")
            continue
        t = r["fit_seconds_best"]
        speedup = ref["fit_seconds_best"] / t if ref else None
        vs_xgb = t / xgb["fit_seconds_best"] if xgb else None
        gap = 100 * (r["test_mse"] - ref["test_mse"]) / ref["test_mse"] if ref else None
        r["speedup_vs_sklearn"] = speedup
        r["time_ratio_vs_xgboost"] = vs_xgb
        r["mse_gap_vs_sklearn_pct"] = gap
        comm = ""
        if "communication" in r:
            c = r["communication"]
            comm = (
                f"{c['rounds']} rounds, up {c['upload_bytes'] / 1e6:.1f} MB, "
                f"down {c['download_bytes'] / 1e6:.1f} MB"
            )
        lines.append(
            f"{r['method']:<10}{t:>8.3f}{r['fit_seconds_median']:>8.3f}"
            f"{r['fit_cpu_seconds_median']:>7.3f}"
            f"{_fmt(speedup, '.2f'):>7}{_fmt(vs_xgb, '.2f'):>7}{r['predict_seconds']:>8.3f}"
            f"{r['test_mse']:>9.4f}{_fmt(gap, '+.2f'):>8}"
            f"{_fmt(r.get('mse_to_sklearn_pred'), '.3f'):>7}"
            f"{_fmt(r['peak_rss_delta_mb'], '.0f'):>8}"
            f"{_fmt(r['background_cores_best'], '.2f'):>6}  {comm}"
        )
    lines.append(
        "fit s: best of the repeats (median: their median); cpu s: median CPU time of the "
        "fitting process (all threads; other processes change it less than wall time); "
        "skl/x: sklearn fit s / method fit s; x/xgb: method fit s / xgboost fit s; "
        "gap %: relative test-MSE gap to sklearn; "
        "Δpred: mean squared difference of the test predictions to sklearn's; peak MB: peak "
        "resident memory added by the first fit; bg: CPU cores used by other processes "
        "during the best fit (contention)."
    )
    return "\n".join(lines)


def add_prediction_distance(results: list[dict[str, Any]]) -> None:
    """Mean squared difference of each method's test predictions to sklearn's; drop them."""
    preds = {r["method"]: r.pop("y_pred", None) for r in results}
    ref = preds.get(REFERENCE)
    for r in results:
        if ref is not None and preds[r["method"]] is not None:
            r["mse_to_sklearn_pred"] = float(np.mean((preds[r["method"]] - ref) ** 2))


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[2000, 100_000, 1_000_000],
        help="training rows per run",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed fits per size and method; the best is reported",
    )
    p.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each method, wait up to this long for other processes to use "
        "< 0.25 cores (shared machines; 0: do not wait)",
    )
    p.add_argument("--n-jobs", type=int, default=2, help="threads of every method")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and models")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("results.json"),
        help="JSON file to write",
    )
    p.add_argument(
        "--privacy",
        choices=["none", "secure"],
        default="none",
        help="fedforest's privacy level (none: the paper's protocol; secure is the "
        "estimator's default)",
    )
    p.add_argument(
        "--binning",
        choices=["quantile", "global"],
        default="quantile",
        help="fedforest's binning (quantile: per-node quantiles in two rounds a "
        "level; global: pooled per-feature quantiles fixed at the handshake, one round a "
        "level, privacy none only)",
    )
    p.add_argument(
        "--fedforest-bins",
        type=int,
        default=N_BINS,
        help="fedforest's n_bins (the default is the other methods' bins)",
    )
    p.add_argument(
        "--markdown",
        type=Path,
        default=None,
        help="also write a Markdown section (command, machine, date, commit, tables)",
    )
    p.add_argument(
        "--plot",
        type=Path,
        default=None,
        help="also write a plot of fit time against rows (PNG), linked from --markdown",
    )
    p.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=METHODS,
        metavar="METHOD",
        help=f"methods to leave out, among {' '.join(METHODS)}",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.repeats < 1:
        raise SystemExit("--repeats must be at least 1")
    methods = [m for m in METHODS if m not in args.skip]
    started = dt.datetime.now(dt.UTC)
    machine = machine_info()
    command = reproduce_command(args)
    print(f"date     {started:%Y-%m-%d %H:%M} UTC")
    print(
        f"machine  {machine['cpu']}, {machine['logical_cores']} logical cores "
        f"({machine['usable_cores']} usable), {_fmt(machine['memory_gb'], '.1f')} GB"
    )
    print("versions " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()))
    src = machine["fedforest_source"]
    if "path" in src:
        where = "not a git checkout"
        if "git_commit" in src:
            dirty = " + uncommitted changes" if src["git_dirty"] else ""
            where = f"git {src['git_commit'][:12]}{dirty}"
        print(f"fedforest {src['path']} (sources sha256 {src['sources_sha256']}, {where})")
    print(f"load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")
    print(
        f"fedforest privacy={args.privacy!r} binning={args.binning!r} n_bins={args.fedforest_bins}"
    )
    print(f"command  {command}\n", flush=True)

    runs = []
    for n in args.sizes:
        results = []
        for method in methods:
            if args.wait_idle > 0:
                wait_until_idle(args.wait_idle)
            print(f"  fitting {method} on {n:,} rows ...", file=sys.stderr, flush=True)
            results.append(run_isolated(method, n, args))
        add_prediction_distance(results)
        print(format_table(n, results) + "\n", flush=True)
        runs.append({"n_train": n, "results": results})

    payload = {
        "date_utc": started.isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": command,
        "machine": machine,
        "load_average_end": os.getloadavg(),
        "settings": {
            "n_features": N_FEATURES,
            "n_estimators": N_TREES,
            "max_depth": MAX_DEPTH,
            "min_samples_leaf": MIN_SAMPLES_LEAF,
            "max_features": MAX_FEATURES,
            "features_per_node": k_features(),
            "n_bins": N_BINS,
            "n_clients": N_CLIENTS,
            "fedforest_privacy": args.privacy,
            "fedforest_binning": args.binning,
            "fedforest_n_bins": args.fedforest_bins,
            "subsample_xgb_lgbm": SUBSAMPLE,
            "n_jobs": args.n_jobs,
            "repeats": args.repeats,
            "seed": args.seed,
            "warmup_rows": WARMUP_ROWS,
        },
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.out}")
    if args.markdown is not None or args.plot is not None:
        from report_forest import write  # benchmarks/, next to this file

        write(payload, args.markdown, args.plot)
        print("wrote " + ", ".join(str(p) for p in (args.markdown, args.plot) if p is not None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
