"""Random forests on a Dask LocalCluster: fedforest's DaskFederation, XGBoost, scikit-learn.

The data are bench_forest.py's (Friedman #1 plus noise features, 20 features), generated
on the workers partition by partition (seeded by size and partition), so the rows start
where they live; the test set (100 000 rows) is generated in the process that runs the
server. Every (method, rows, partitions) runs in a fresh process with a fresh
``LocalCluster`` (``--workers`` worker processes, one thread each, 127.0.0.1), after one
untimed warm-up fit on 2 000 rows (imports, numba compilation or cache loading, thread
pools). Methods, with bench_forest.py's hyperparameters (50 trees, depth 8, leaf 5, 6 of
20 features per node, 32 bins):

- ``fedforest`` (regime 2, rows stay on the workers): ``DaskFederation.from_collections``
  with one client per partition, then ``FedForestRegressor(...).fit_federated``; under
  ``privacy="none"`` (the paper's protocol) and ``"secure"`` (the default), or one of them;
- ``xgboost`` (regime 2 too, histograms all-reduced between workers):
  ``xgboost.dask.DaskXGBRFRegressor`` on the same Dask arrays;
- ``sklearn`` (regime 1): the rows are gathered into this process and scikit-learn's
  ``RandomForestRegressor(n_jobs=-1)`` fits its trees through joblib's Dask backend, which
  ships the whole data set to every worker and gathers the trees.

Measured: set-up seconds (fedforest: building the actors, i.e. the clients copying their
partitions; sklearn: gathering the rows here), fit seconds, peak resident memory of each
worker during set-up and fit (VmHWM after a reset, data included) and of this process
(which also runs the scheduler), bytes moved (fedforest: the protocol frames it sends and
receives, exactly; every method: bytes Dask moved between workers, and the loopback
interface's traffic during the fit, which counts every process on the machine and so is an
upper bound on a shared machine), the test MSE, and the CPU other processes used during
the fit (``bg``, cores; well above 0 means contended timings). Memory in all: every
process of the run (this one, which also runs the scheduler and the nannies, the workers,
helpers) read from /proc every 0.05 s from the data's creation to the fit's end, the peak
of their sum at one moment, with what each process held then, after the warm-up (the
imports), with the data and with the clients built (the JSON's ``*_mb`` fields).

``--data`` says where the rows come from (fedforest only): ``persisted`` (the default, as
before: persisted on the workers and kept there during the fit), ``lazy`` (the same graph
computed on the workers while the clients are built, then released, as a
``dd.read_parquet`` collection would be), ``shipped`` (made in this process and sent, as
``dd.from_pandas`` does) or ``factories`` (``DaskFederation(factories)``: each client makes
its rows on its worker, client ``i`` on worker ``i mod workers``). The clients and their rows
are the same in all four, so is the forest.

Usage::

    python benchmarks/bench_scale.py                                  # 1M rows, 4 partitions
    python benchmarks/bench_scale.py --rows 100000 300000 1000000 --plot docs/img/scale-fit-time.png
    python benchmarks/bench_scale.py --rows 1000000 --partitions 2 4 8 --skip xgboost sklearn
    python benchmarks/bench_scale.py --rows 300000 --trees 100 --depth 10 --skip sklearn
    python benchmarks/bench_scale.py --rows 10000000 --privacy none --skip sklearn --memory-limit 9
    python benchmarks/bench_scale.py --partitions 10 --skip xgboost sklearn --data lazy

``--memory-limit GB`` caps every worker (Dask's ``memory_limit``; the nanny kills a worker
past 95 % of it, and no spilling or pausing changes what is measured) and, before each
run, waits (up to ``--wait-idle`` seconds) until the machine has ``workers x GB + 2`` GB
available; a run that would not fit is recorded as skipped, not started. The data of
every size are generated on the workers, one partition per task: no process ever holds
the whole training set, the one that runs the server included.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
try:  # running from a checkout without ``pip install -e .``
    import fedforest  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "fedforest":
        raise
    sys.path.insert(0, str(HERE.parent))

import bench_forest as bf  # noqa: E402  (the data, the hyperparameters, the machine report)

METHODS = ("fedforest", "xgboost", "sklearn")
#: Where the rows come from: persisted on the workers (kept there during the fit), lazy
#: (computed on the workers as the clients are built, then released), shipped (made in
#: this process and sent), factories (each client makes its own rows on its worker).
DATA = ("persisted", "lazy", "shipped", "factories")
SAMPLER: RssSampler | None = None  # the run's sampler, for the snapshot after the set-up
BUILT: dict[int, float] = {}
N_TEST = 100_000
WARMUP_ROWS = 2_000


# --------------------------------------------------------------------------- data
def make_partition(seed: int, rows: int, part: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Partition ``part`` (``n`` rows) of the ``rows``-row data set; run on a worker."""
    return bf.friedman20(n, np.random.default_rng([seed, rows, part]))


def _sizes(rows: int, partitions: int) -> list[int]:
    return [rows // partitions + (i < rows % partitions) for i in range(partitions)]


def dask_data(
    client: Any, rows: int, partitions: int, seed: int, how: str = "persisted"
) -> tuple[Any, Any]:
    """X and y as Dask Arrays (``how``: see ``DATA``); factories for ``"factories"``."""
    import dask
    import dask.array as da
    from distributed import wait

    sizes = _sizes(rows, partitions)
    if how == "factories":
        return {str(i): (seed, rows, i, n) for i, n in enumerate(sizes)}, None
    if how == "shipped":  # made here, then sent to the workers (dd.from_pandas does that)
        blocks = [make_partition(seed, rows, i, n) for i, n in enumerate(sizes)]
        X_here = np.concatenate([b[0] for b in blocks])
        y_here = np.concatenate([b[1] for b in blocks])
        del blocks
        return da.from_array(X_here, chunks=(tuple(sizes), -1)), da.from_array(
            y_here, chunks=(tuple(sizes),)
        )
    parts = [dask.delayed(make_partition, nout=2)(seed, rows, i, n) for i, n in enumerate(sizes)]
    X = da.concatenate(
        [
            da.from_delayed(p[0], shape=(n, bf.N_FEATURES), dtype=np.float64)
            for p, n in zip(parts, sizes, strict=True)
        ]
    )
    y = da.concatenate(
        [
            da.from_delayed(p[1], shape=(n,), dtype=np.float64)
            for p, n in zip(parts, sizes, strict=True)
        ]
    )
    if how == "lazy":  # computed on the workers as the clients are built, then released
        return X, y
    X, y = client.persist([X, y])
    wait([X, y])
    return X, y


def partition_client(seed: int, rows: int, part: int, n: int) -> Any:
    """Client ``part`` of its partition, made on the worker (``--data factories``)."""
    import fedforest as ff

    X, y = make_partition(seed, rows, part, n)
    return ff.Client(X, y, name=str(part))


# --------------------------------------------------------------------------- memory
def _reset_peak() -> bool:
    return bf.reset_peak_rss()


def _peak_mb() -> float:
    return bf.peak_rss_kib() * 1024 / 1e6


def _moved(dask_worker: Any) -> int:
    return int(dask_worker.transfer_outgoing_bytes_total)


def _rss_mb(pid: int) -> float | None:
    """Resident memory of process ``pid`` now, in MB (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except (OSError, ValueError):
        return None
    return None


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo += children.get(out[-1], [])
    return out


class RssSampler:
    """The resident memory of this process and all its descendants, every ``period`` s.

    Records each process's peak and the peak of their sum at one moment ("in all"), with
    what each process held then: the cluster's processes (the workers are this process's
    descendants; the scheduler and the nannies run in it) are read together.
    """

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self.peaks: dict[int, float] = {}
        self.total_peak = 0.0
        self.at_peak: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def snapshot(self) -> dict[int, float]:
        """Every process's resident MB now."""
        now = {pid: _rss_mb(pid) for pid in _descendants(os.getpid())}
        return {pid: mb for pid, mb in now.items() if mb is not None}

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self.snapshot()
            for pid, mb in now.items():
                self.peaks[pid] = max(self.peaks.get(pid, 0.0), mb)
            if sum(now.values()) > self.total_peak:
                self.total_peak, self.at_peak = sum(now.values()), now
            self._stop.wait(self.period)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _by_role(mb: dict[int, float], roles: dict[int, str]) -> dict[str, float]:
    """Process id -> MB as role -> MB (the processes not named summed as ``other``)."""
    out: dict[str, float] = {}
    for pid, value in mb.items():
        role = roles.get(pid, "other")
        out[role] = round(out.get(role, 0.0) + value, 1)
    return out


def loopback_bytes() -> int | None:
    """Bytes through the loopback interface so far (every process), or None."""
    try:
        import psutil

        lo = psutil.net_io_counters(pernic=True).get("lo")
    except ImportError:
        return None
    return None if lo is None else int(lo.bytes_sent)


# --------------------------------------------------------------------------- methods
def fit_fedforest(client: Any, X: Any, y: Any, spec: dict[str, Any]) -> tuple[Any, dict]:
    from fedforest.transport.dask import DaskFederation

    start = time.perf_counter()
    if y is None:  # --data factories: client i built on worker i mod workers
        import functools

        addresses = sorted(client.scheduler_info()["workers"])
        fed = DaskFederation(
            {name: functools.partial(partition_client, *args) for name, args in X.items()},
            client=client,
            workers={name: addresses[int(name) % len(addresses)] for name in X},
        )
    else:
        fed = DaskFederation.from_collections(X, y, client=client)
    setup = time.perf_counter() - start
    if SAMPLER is not None:
        BUILT.update(SAMPLER.snapshot())
    model = make_model("fedforest", 1, spec).set_params(
        privacy=spec["privacy"], tree_batch_size=spec.get("tree_batch_size")
    )
    model.fit_federated(fed)
    extra = {
        "setup_seconds": setup,
        "frame_bytes": fed.bytes_sent + fed.bytes_received,
        "rounds": model.communication_.rounds,
        "ledger_bytes": model.communication_.upload_bytes + model.communication_.download_bytes,
        "clients": len(fed.client_names),
        "workers_used": len(set(fed.placement.values())),
        # Per round: its kind, the MB the clients sent and the MB the server sent.
        "round_mb": [
            (r.kind, round(r.upload_bytes / 1e6, 1), round(r.download_bytes / 1e6, 1))
            for r in model.communication_.records
        ],
    }
    fed.close()
    return model, extra


def fit_xgboost(client: Any, X: Any, y: Any, spec: dict[str, Any]) -> tuple[Any, dict]:
    from xgboost import dask as dxgb

    params = make_model("xgboost", 1, spec).get_params()
    model = dxgb.DaskXGBRFRegressor(**params)
    model.client = client
    model.fit(X, y)
    return model, {}


def fit_sklearn(client: Any, X: Any, y: Any, spec: dict[str, Any]) -> tuple[Any, dict]:
    from joblib import parallel_config

    start = time.perf_counter()
    X_here, y_here = client.compute([X, y], sync=True)  # regime 1: every worker gets it all
    setup = time.perf_counter() - start
    model = make_model("sklearn", -1, spec)
    with parallel_config(backend="dask"):
        model.fit(X_here, y_here)
    return model, {"setup_seconds": setup, "data_bytes": int(X_here.nbytes + y_here.nbytes)}


def make_model(method: str, n_jobs: int, spec: dict[str, Any]) -> Any:
    """bench_forest.py's estimator, with this run's number of trees and depth."""
    model = bf.make_model(method, n_jobs, spec["seed"])
    return model.set_params(n_estimators=spec["trees"], max_depth=spec["depth"])


FIT = {"fedforest": fit_fedforest, "xgboost": fit_xgboost, "sklearn": fit_sklearn}


def predict(method: str, model: Any, X_test: np.ndarray) -> np.ndarray:
    if method == "xgboost":
        return np.asarray(model.get_booster().inplace_predict(X_test))
    return np.asarray(model.predict(X_test))


# --------------------------------------------------------------------------- one run
def run_one(
    method: str,
    rows: int,
    partitions: int,
    workers: int,
    seed: int,
    privacy: str,
    trees: int = bf.N_TREES,
    depth: int = bf.MAX_DEPTH,
    memory_limit_gb: float | None = None,
    data: str = "persisted",
    tree_batch_size: int | None = None,
) -> dict[str, Any]:
    """One method on a fresh LocalCluster (this runs in its own process)."""
    if data != "persisted" and method != "fedforest":
        raise ValueError(f"--data {data} is fedforest's only; {method} takes persisted data.")
    spec = {"seed": seed, "privacy": privacy, "trees": trees, "depth": depth}
    spec["tree_batch_size"] = tree_batch_size
    import cloudpickle
    import dask
    from distributed import Client, LocalCluster

    cloudpickle.register_pickle_by_value(bf)  # the workers need not find bench_forest.py
    limit: dict[str, Any] = {}
    if memory_limit_gb is not None:
        limit["memory_limit"] = int(memory_limit_gb * 1e9)
        # A guard only: the nanny kills a worker past 95 % of the limit; no spilling or
        # pausing, which would change what is measured.
        dask.config.set(
            {
                "distributed.worker.memory.target": False,
                "distributed.worker.memory.spill": False,
                "distributed.worker.memory.pause": False,
                "distributed.worker.memory.terminate": 0.95,
            }
        )
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            **limit,
        ) as cluster,
        Client(cluster) as client,
    ):
        X_test, y_test = bf.friedman20(N_TEST, np.random.default_rng([seed, rows, 2**31]))
        warm_X, warm_y = dask_data(client, WARMUP_ROWS, partitions, seed + 1, data)
        FIT[method](client, warm_X, warm_y, spec)
        del warm_X, warm_y

        global SAMPLER
        roles = {os.getpid(): "server"}
        pids = sorted(client.run(os.getpid).values())
        roles.update({pid: f"worker {i}" for i, pid in enumerate(pids, 1)})
        sampler = SAMPLER = RssSampler()
        imports = sampler.snapshot()  # after the warm-up fit: imports, compiled kernels
        sampler.__enter__()
        X, y = dask_data(client, rows, partitions, seed, data)
        with_data = sampler.snapshot()
        client.run(_reset_peak)
        local_peak = _reset_peak()
        moved0 = sum(client.run(_moved).values())
        lo0 = loopback_bytes()
        busy0, cpu0 = bf.system_busy_seconds(), time.process_time()
        worker_cpu0 = sum(client.run(time.process_time).values())
        start = time.perf_counter()
        model, extra = FIT[method](client, X, y, spec)
        total = time.perf_counter() - start
        worker_cpu1 = sum(client.run(time.process_time).values())
        busy1, cpu1 = bf.system_busy_seconds(), time.process_time()
        lo1 = loopback_bytes()
        moved1 = sum(client.run(_moved).values())
        peaks = client.run(_peak_mb)
        sampler.__exit__()
        y_pred = predict(method, model, X_test)
    ours = (cpu1 - cpu0) + (worker_cpu1 - worker_cpu0)
    bg = None
    if busy0 is not None and busy1 is not None:
        bg = max(0.0, (busy1 - busy0) - ours) / total
    return {
        "method": method if method != "fedforest" else f"fedforest ({privacy})",
        "rows": rows,
        "partitions": partitions,
        "workers": workers,
        "trees": trees,
        "depth": depth,
        "total_seconds": total,
        "setup_seconds": extra.pop("setup_seconds", None),
        "worker_peak_mb": sorted(peaks.values()),
        "server_peak_mb": _peak_mb() if local_peak else None,
        "dask_moved_bytes": moved1 - moved0,
        "loopback_bytes": None if lo0 is None or lo1 is None else lo1 - lo0,
        "test_mse": float(np.mean((y_pred - y_test) ** 2)),
        "background_cores": bg,
        "memory_limit_gb": memory_limit_gb,
        "data": data,
        "tree_batch_size": tree_batch_size,
        # Sampled every 0.05 s from the data's creation to the fit's end, per role (MB):
        "in_all_peak_mb": sampler.total_peak,
        "at_peak_mb": _by_role(sampler.at_peak, roles),
        "sampled_peak_mb": _by_role(sampler.peaks, roles),
        "imports_mb": _by_role(imports, roles),
        "with_data_mb": _by_role(with_data, roles),
        "built_mb": _by_role(BUILT, roles),
        **extra,
    }


def available_gb() -> float | None:
    """Memory the machine has available now (MemAvailable), in GB, or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 / 1e9
    except (OSError, ValueError):
        pass
    return None


def wait_for_memory(need_gb: float, max_wait: float) -> float | None:
    """Wait (at most ``max_wait`` s) until ``need_gb`` GB are available; the last reading."""
    deadline = time.monotonic() + max_wait
    while True:
        have = available_gb()
        if have is None or have >= need_gb or time.monotonic() >= deadline:
            return have
        print(f"  waiting: {have:.1f} GB available, {need_gb:.1f} GB needed", file=sys.stderr)
        time.sleep(10)


def run_isolated(
    method: str, rows: int, partitions: int, args: argparse.Namespace, privacy: str
) -> dict[str, Any]:
    """``run_one`` in a fresh process; an error is returned, not raised."""
    if args.memory_limit is not None:
        need = args.workers * args.memory_limit + 2.0
        have = wait_for_memory(need, args.wait_idle)
        if have is not None and have < need:
            return {
                "method": method,
                "rows": rows,
                "partitions": partitions,
                "error": f"not run: {have:.1f} GB available, {need:.1f} GB needed",
            }
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--one",
            json.dumps(
                [
                    method,
                    rows,
                    partitions,
                    args.workers,
                    args.seed,
                    privacy,
                    args.trees,
                    args.depth,
                    args.memory_limit,
                    args.data,
                    args.tree_batch_size,
                ]
            ),
            "--out",
            str(out),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {
                "method": method,
                "rows": rows,
                "partitions": partitions,
                "error": " | ".join(tail),
            }
        return json.loads(out.read_text())


# --------------------------------------------------------------------------- report
def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(results: list[dict[str, Any]]) -> str:
    head = (
        f"{'method':<20}{'rows':>10}{'parts':>6}{'forest':>7}{'set-up s':>9}{'total s':>9}"
        f"{'test MSE':>9}"
        f"{'worker peak MB':>16}{'server MB':>10}{'in all MB':>10}{'frames MB':>10}"
        f"{'dask MB':>8}{'lo MB':>8}{'bg':>6}"
    )
    lines = [head]
    for r in results:
        if "error" in r:
            lines.append(
                f"{r['method']:<20}{r['rows']:>10,}{r['partitions']:>6}  FAILED: {r['error']}"
            )
            continue
        peaks = "/".join(f"{p:.0f}" for p in r["worker_peak_mb"])
        frames = r.get("frame_bytes")
        lo = r.get("loopback_bytes")
        forest = f"{r['trees']}x{r['depth']}"
        lines.append(
            f"{r['method']:<20}{r['rows']:>10,}{r['partitions']:>6}{forest:>7}"
            f"{_fmt(r['setup_seconds'], '.1f'):>9}{r['total_seconds']:>9.1f}{r['test_mse']:>9.4f}"
            f"{peaks:>16}{_fmt(r['server_peak_mb'], '.0f'):>10}"
            f"{_fmt(r.get('in_all_peak_mb'), '.0f'):>10}"
            f"{_fmt(None if frames is None else frames / 1e6, '.1f'):>10}"
            f"{r['dask_moved_bytes'] / 1e6:>8.1f}{_fmt(None if lo is None else lo / 1e6, '.0f'):>8}"
            f"{_fmt(r['background_cores'], '.2f'):>6}"
        )
    for r in results:
        if "at_peak_mb" in r:
            lines.append(f"{r['method']} {r['rows']:,} rows, --data {r['data']}, MB per process:")
            for stage in ("imports_mb", "with_data_mb", "built_mb", "at_peak_mb"):
                parts = ", ".join(f"{k} {v:.0f}" for k, v in sorted(r[stage].items()))
                lines.append(f"  {stage[:-3]:<10} {sum(r[stage].values()):>6.0f}: {parts}")
    lines.append(
        "forest: trees x max_depth; set-up s: fedforest's actors built (clients copy their "
        "partitions), sklearn's rows gathered here; total s: set-up plus training; worker "
        "peak MB: each worker's peak "
        "resident memory (data included); server MB: this process's (the scheduler too); "
        "in all MB: the peak of every process's resident memory summed at one moment (sampled "
        "every 0.05 s from the data's creation on; the workers, this process, helpers); "
        "frames MB: fedforest's protocol frames, both ways; dask MB: bytes Dask moved between "
        "workers; lo MB: loopback traffic during the fit, every process on the machine; bg: "
        "cores other processes used."
    )
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ok = [r for r in results if "error" not in r]
    parts = sorted({r["partitions"] for r in ok})
    for method in sorted({r["method"] for r in ok}):
        for p in parts:
            pts = sorted(
                (r["rows"], r["total_seconds"])
                for r in ok
                if r["method"] == method and r["partitions"] == p
            )
            if len(pts) < 2:
                continue
            label = method if len(parts) == 1 else f"{method}, {p} partitions"
            ax.plot(*zip(*pts, strict=True), marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training rows (20 features)")
    ax.set_ylabel("fit time, s (set-up included)")
    workers = ok[0]["workers"] if ok else "?"
    shape = f"{ok[0].get('trees', 50)} trees of depth {ok[0].get('depth', 8)}" if ok else ""
    ax.set_title(f"LocalCluster, {workers} workers x 1 thread, {shape}")
    bg = [r["background_cores"] for r in ok if r.get("background_cores") is not None]
    if bg:  # contention: other processes' share of the cores during the fits
        note = f"other processes used {min(bg):.1f} to {max(bg):.1f} cores during the fits"
        ax.text(0.99, 0.02, note, transform=ax.transAxes, ha="right", fontsize=7, alpha=0.8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def reproduce_command(args: argparse.Namespace) -> str:
    argv = ["python", "benchmarks/bench_scale.py", "--rows", *map(str, args.rows)]
    argv += ["--partitions", *map(str, args.partitions), "--workers", str(args.workers)]
    argv += ["--privacy", *args.privacy, "--trees", str(args.trees), "--depth", str(args.depth)]
    argv += ["--seed", str(args.seed), "--out", str(args.out)]
    if args.wait_idle:
        argv += ["--wait-idle", format(args.wait_idle, "g")]
    if args.memory_limit is not None:
        argv += ["--memory-limit", format(args.memory_limit, "g")]
    if args.tree_batch_size is not None:
        argv += ["--tree-batch-size", str(args.tree_batch_size)]
    if args.data != "persisted":
        argv += ["--data", args.data]
    if args.skip:
        argv += ["--skip", *args.skip]
    if args.plot:
        argv += ["--plot", str(args.plot)]
    return shlex.join(argv)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000], help="training rows")
    p.add_argument("--partitions", type=int, nargs="+", default=[4], help="Dask partitions")
    p.add_argument("--workers", type=int, default=2, help="worker processes (1 thread each)")
    p.add_argument(
        "--privacy",
        nargs="+",
        default=["none", "secure"],
        choices=["none", "secure"],
        help="fedforest's privacy levels to run",
    )
    p.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=METHODS,
        metavar="METHOD",
        help="methods to leave out",
    )
    p.add_argument("--trees", type=int, default=bf.N_TREES, help="trees of every forest")
    p.add_argument("--depth", type=int, default=bf.MAX_DEPTH, help="max_depth of every tree")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and models")
    p.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each run, wait up to this long for other processes to use < 0.25 cores",
    )
    p.add_argument(
        "--memory-limit",
        type=float,
        default=None,
        metavar="GB",
        help="memory_limit of every worker (killed past 95 %%); runs wait for the memory",
    )
    p.add_argument(
        "--tree-batch-size",
        type=int,
        default=None,
        help="fedforest's tree_batch_size (trees grown at once; the same forest, less memory, "
        "more rounds); default: all trees at once",
    )
    p.add_argument(
        "--data",
        default="persisted",
        choices=DATA,
        help="where the rows come from: persisted on the workers and kept during the fit; "
        "lazy (computed on the workers while the clients are built, then released); shipped "
        "(made in this process and sent); factories (each client makes its rows on its "
        "worker, DaskFederation(factories)); not persisted: fedforest only",
    )
    p.add_argument(
        "--out", type=Path, default=Path("results_scale.json"), help="JSON file to write"
    )
    p.add_argument("--plot", type=Path, default=None, help="PNG of fit time against rows")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.one is not None:  # a child: one run, its result to --out
        result = run_one(*json.loads(args.one))
        args.out.write_text(json.dumps(result))
        return 0
    started = dt.datetime.now(dt.UTC)
    machine = bf.machine_info()
    command = reproduce_command(args)
    print(f"date     {started:%Y-%m-%d %H:%M} UTC")
    print(
        f"machine  {machine['cpu']}, {machine['logical_cores']} logical cores, "
        f"{_fmt(machine['memory_gb'], '.1f')} GB; load avg "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    import dask
    import distributed

    print(
        "versions "
        + ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
        + f", dask {dask.__version__}, distributed {distributed.__version__}"
    )
    src = machine["fedforest_source"]
    where = "not a git checkout"
    if "git_commit" in src:
        where = (
            f"git {src['git_commit'][:12]}{' + uncommitted changes' if src['git_dirty'] else ''}"
        )
    print(f"fedforest {src.get('path')} (sources sha256 {src.get('sources_sha256')}, {where})")
    print(f"command  {command}\n", flush=True)
    results = []
    for rows in args.rows:
        for partitions in args.partitions:
            for method in METHODS:
                if method in args.skip:
                    continue
                for privacy in args.privacy if method == "fedforest" else ["-"]:
                    label = method if privacy == "-" else f"{method} ({privacy})"
                    print(
                        f"  {label}: {rows:,} rows, {partitions} partitions ...",
                        file=sys.stderr,
                        flush=True,
                    )
                    if args.wait_idle > 0:
                        bf.wait_until_idle(args.wait_idle)
                    results.append(run_isolated(method, rows, partitions, args, privacy))
                    print(format_table(results[-1:]).splitlines()[1], file=sys.stderr, flush=True)
    print(format_table(results))
    print(f"\nload avg at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    payload = {
        "date_utc": started.isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": command,
        "machine": machine,
        "results": results,
    }
    args.out.write_text(json.dumps(payload, indent=1))
    if args.plot:
        plot(results, args.plot)
        print(f"plot     {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
