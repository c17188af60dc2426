"""Time fedforest on a real Flower deployment on this machine (docs/flower.md, "Timings").

    python examples/flower/measure.py [--rows 5000] [--features 10] [--n-estimators 50]
                                      [--max-depth 6] [--workdir DIR] [--privacy secure]
                                      [--binning quantile] [--n-bins 32]
                                      [--isolation subprocess|worker]
                                      [--supernode-sleep-cap SECONDS]

Writes three sites' CSV files (make_data.py), starts a SuperLink and three SuperNodes on
127.0.0.1 (insecure, one FLWR_HOME each, telemetry and update checks off; ports drawn
below the ephemeral range, each process waited for until its log says it listens, and
started again on another port if its port was taken), runs this app with ``flwr run
--stream``, prints the time of every round and of the whole forest, checks the forest
equals the local simulation's, and stops every process it started (by process group),
also on error or Ctrl-C. ``--isolation worker`` starts each SuperNode with ``--isolation
process`` and a ``fedforest flower-worker`` next to it (one long-lived ClientApp process
per site) instead of Flower's process per message. ``--supernode-sleep-cap`` runs the
SuperNodes through ``supernode_short_sleep.py`` (an experiment that patches Flower's idle
sleeps; not for deployments).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import fedforest as ff
from fedforest.transport.flower import client_from_node_config
from fedforest.transport.flower._deployment import flower_env, free_ports, listening

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_data import SITES, write_sites  # noqa: E402

APP = Path(__file__).resolve().parent
REPO = APP.parents[1]


def spawn(args: list[str], home: Path, log: Path) -> subprocess.Popen[bytes]:
    """Start ``args`` in its own process group, output to ``log``."""
    print("$", " ".join(args), file=sys.stderr)
    with open(log, "wb") as out:
        return subprocess.Popen(
            args,
            env=flower_env(home, REPO),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every process group, then SIGKILL what is still there after 10 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.2)


def start(args: list[str], port: int, home: Path, log: Path) -> subprocess.Popen[bytes]:
    """Start ``args`` with ``"{port}"`` made ``port``."""
    return spawn([a.replace("{port}", str(port)) for a in args], home, log)


def deploy(
    work: Path, data: list[Path], isolation: str = "subprocess", sleep_cap: float | None = None
) -> tuple[int, list[subprocess.Popen[bytes]]]:
    """A SuperLink and one SuperNode per data file; returns the SuperLink port.

    Ports are drawn below the ephemeral range and a process is up once its log says it
    listens; one that found its port taken starts again on another (the tests' way,
    ``fedforest/transport/flower/_deployment.py``). Under ``isolation="worker"`` each
    SuperNode gets a ``fedforest flower-worker`` once it listens.
    """
    port, *node_ports = free_ports(1 + len(data))
    procs: list[subprocess.Popen[bytes]] = []

    def restarter(
        i: int, args: list[str], home: Path, log: Path
    ) -> Callable[[int], subprocess.Popen[bytes]]:
        def restart(new_port: int) -> subprocess.Popen[bytes]:
            stop([procs[i]])
            procs[i] = start(args, new_port, home, log)
            return procs[i]

        return restart

    try:
        superlink = ["flower-superlink", "--insecure", "--port", "{port}",
                     "--disable-runtime-dependency-installation"]  # fmt: skip
        home, log = work / "superlink", work / "superlink.log"
        procs.append(start(superlink, port, home, log))
        port, _ = listening(procs[0], port, log, restarter(0, superlink, home, log), timeout=120)
        mode = ["--isolation", "process"] if isolation == "worker" else []
        command = ["flower-supernode"]
        if sleep_cap is not None:
            script = str(APP / "supernode_short_sleep.py")
            command = [sys.executable, script, "--cap", str(sleep_cap), "--"]
        nodes = []
        for site, path, node_port in zip(SITES, data, node_ports, strict=True):
            args = [*command, "--insecure", "--superlink", f"127.0.0.1:{port}",
                    "--port", "{port}", *mode,
                    "--node-config", f'data-path="{path}" target="y" name="{site}"']  # fmt: skip
            home, log = work / site, work / f"{site}.log"
            nodes.append((len(procs), args, home, log, site, node_port))
            procs.append(start(args, node_port, home, log))
        for i, args, home, log, site, node_port in nodes:  # all starting; each waited for
            restart = restarter(i, args, home, log)
            node_port, _ = listening(procs[i], node_port, log, restart, timeout=120)
            if isolation == "worker":
                procs.append(
                    spawn(
                        ["fedforest", "flower-worker", "--insecure",
                         "--runtime-api-address", f"127.0.0.1:{node_port}"],
                        work / site, work / f"{site}-worker.log",
                    )
                )  # fmt: skip
    except BaseException:
        stop(procs)
        raise
    return port, procs


def run_app(work: Path, port: int, config: dict[str, Any]) -> None:
    """``flwr run --stream`` of this app on the SuperLink at ``port``."""
    cli = work / "cli"
    cli.mkdir(exist_ok=True)
    (cli / "config.toml").write_text(
        f'[superlink]\ndefault = "local"\n\n[superlink.local]\n'
        f'address = "127.0.0.1:{port}"\ninsecure = true\n'
    )
    overrides = " ".join(f"{k}={json.dumps(v)}" for k, v in config.items())
    args = ["flwr", "run", str(APP), "local", "--stream", "--run-config", overrides]
    print("$", " ".join(args[:5]), repr(overrides), file=sys.stderr)
    subprocess.run(args, env=flower_env(cli, REPO), check=True, timeout=3600)


def report(metrics: dict[str, Any], local_seconds: float, same: bool) -> None:
    """Print the time of every round and of the whole forest."""
    rounds = np.asarray(metrics["round_seconds"])
    for r, (rec, sec) in enumerate(zip(metrics["per_round"], rounds, strict=True)):
        print(f"round {r:2d} {rec['kind']:9s} {sec:6.2f} s  {rec['upload_bytes']:>10d} B up")
    print(
        f"\n{metrics['n_estimators']} trees, depth {metrics['max_depth']}: "
        f"{metrics['rounds']} rounds, forest in {metrics['fit_seconds']:.1f} s on Flower "
        f"(median round {np.median(rounds):.2f} s, min {rounds.min():.2f} s, "
        f"max {rounds.max():.2f} s; the end-of-fit notice {metrics['finish_seconds']:.1f} s "
        f"of it; the discovery before it {metrics['discovery_seconds']:.1f} s); "
        f"local simulation {local_seconds:.2f} s; identical forest: {same}"
    )


def warm_up(clients: list[ff.Client], args: argparse.Namespace) -> None:
    """Fit two small trees locally first, untimed: the workers then load numba's kernels.

    The kernels are ``cache=True``; without this, a checkout's first deployment compiles
    them inside the sites' processes during the first rounds (measured: 306 s instead of
    about 70 s for the ``"secure"`` forest), and the forest's time would count it.
    """
    start = time.perf_counter()
    print("warming numba's kernel cache with a local fit (untimed)...", file=sys.stderr)
    ff.FedForestRegressor(
        n_estimators=2, max_depth=args.max_depth, random_state=0,
        privacy=args.privacy, binning=args.binning, n_bins=args.n_bins,
    ).fit_federated(ff.LocalFederation(clients))  # fmt: skip
    print(f"warm-up done in {time.perf_counter() - start:.1f} s", file=sys.stderr)


def main() -> None:
    """Deploy, train, time, compare, stop."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5000, help="rows per site")
    parser.add_argument("--features", type=int, default=10, help="features of every site")
    parser.add_argument("--n-estimators", type=int, default=50, help="trees of the forest")
    parser.add_argument("--max-depth", type=int, default=6, help="max_depth of every tree")
    parser.add_argument(
        "--workdir", type=Path, default=None,
        help="folder of the data, the Flower homes and logs, the model and metrics "
        "(None: a new temporary folder)",
    )  # fmt: skip
    parser.add_argument(
        "--privacy", default="secure", choices=["secure", "none"], help="fedforest's privacy"
    )  # fmt: skip
    parser.add_argument(
        "--binning", default="quantile", choices=["quantile", "global"],
        help='"global": one round a level (privacy "none" only)',
    )  # fmt: skip
    parser.add_argument("--n-bins", type=int, default=32, help="fedforest's n_bins")
    parser.add_argument(
        "--isolation", default="subprocess", choices=["subprocess", "worker"],
        help='"worker": SuperNodes with --isolation process and a fedforest flower-worker each',
    )  # fmt: skip
    parser.add_argument(
        "--keep-awake", default="auto", choices=["auto", "true", "false"],
        help="the run config's keep-awake: keep-awake messages behind each round "
        '("auto": to the SuperNodes served by a fedforest flower-worker)',
    )  # fmt: skip
    parser.add_argument(
        "--supernode-sleep-cap", type=float, default=None, metavar="SECONDS",
        help="cap the SuperNodes' fixed sleeps (patches Flower: supernode_short_sleep.py)",
    )  # fmt: skip
    args = parser.parse_args()
    work = (args.workdir or Path(tempfile.mkdtemp(prefix="fedforest-flower-"))).resolve()
    data = write_sites(work / "data", args.rows, args.features)
    config = {
        "n-estimators": args.n_estimators,
        "max-depth": args.max_depth,
        "seed": 0,
        "privacy": args.privacy,
        "binning": args.binning,
        "n-bins": args.n_bins,
        "min-nodes": 3,
        "keep-awake": args.keep_awake,
        "model-path": str(work / "model.ffm"),
        "metrics-path": str(work / "metrics.json"),
    }
    clients = [
        client_from_node_config({"data-path": str(p), "target": "y", "name": s})
        for s, p in zip(SITES, data, strict=True)
    ]
    warm_up(clients, args)
    load_before = os.getloadavg()[0]
    port, procs = deploy(work, data, args.isolation, args.supernode_sleep_cap)
    try:
        run_app(work, port, config)
    finally:
        stop(procs)
    load_after = os.getloadavg()[0]
    start = time.perf_counter()
    local = ff.FedForestRegressor(
        n_estimators=args.n_estimators, max_depth=args.max_depth, random_state=0,
        privacy=args.privacy, binning=args.binning, n_bins=args.n_bins,
    ).fit_federated(ff.LocalFederation(clients))  # fmt: skip
    local_seconds = time.perf_counter() - start
    remote = ff.load(work / "model.ffm")
    same = all(
        np.array_equal(a.threshold, b.threshold, equal_nan=True)
        and np.array_equal(a.value, b.value)
        for a, b in zip(remote.trees_, local.trees_, strict=True)
    )
    report(json.loads((work / "metrics.json").read_text()), local_seconds, same)
    cap = args.supernode_sleep_cap
    sleeps = f"capped at {cap:g} s" if cap is not None else "as Flower has them"
    waits = json.loads((work / "metrics.json").read_text())["wait_messages"]
    print(
        f"(isolation {args.isolation}; keep-awake {args.keep_awake}, {waits} keep-awake "
        f"messages; SuperNode sleeps {sleeps}; load average "
        f"{load_before:.1f} before, {load_after:.1f} after, on "
        f"{os.cpu_count()} cores; logs and files in {work})"
    )


if __name__ == "__main__":
    main()
