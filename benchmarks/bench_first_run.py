"""First use: ``fedforest simulate`` with a fresh numba cache, as a newcomer's first run.

    python benchmarks/bench_first_run.py [--repeats 2] [--kernels] [--path] [-- SIMULATE OPTIONS]

Each repetition runs ``python -m fedforest simulate`` (the README's quick start, the
default options unless given after ``--``) in a fresh process whose ``NUMBA_CACHE_DIR``
is a new empty directory, so every kernel compiles; then once more with that cache kept
(a second run). Printed per run: the wall-clock time of the whole command, its CPU time
(user + sys of the process), fedforest's ``fit s`` from the table and the compile time
the command announced. ``--kernels`` then runs the command's warm-up (the precompile
lists' kernels, then the tiny fit) and its fedforest fit in another process, on a fresh
cache, and prints the compile time of each kernel and how many signatures it compiled
(numba's compile events, CPU time of the compiling thread; a kernel's time includes what
it compiles inside, e.g. numba's own sort).

``--path`` runs the same command through a wrapper that notes the command process's CPU
time when the second compile process starts and when the command starts waiting for it,
and prints the **CPU critical path**: max(the command's CPU up to its wait, its CPU at
the second process's start + that process's CPU) + the command's CPU after the wait
and at its exit (after the last note: the whole run's CPU, less the rest). That is
what the wall time would be with two free cores (no waiting for a core, no I/O), so it
can be compared across commits on a loaded machine, where wall times say little; it is
an estimate, not a measurement of a quiet machine.

The ``fedforest`` imported is the one next to this file (its repository), whatever is
installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


#: ``fedforest simulate`` run by ``fedforest.cli.main`` with the second compile process's
#: start and wait noted in this process's CPU time (``--path``).
PATH_PROBE = """
import json, resource, subprocess, sys, time
from fedforest.cli import main
marks = {}
init, wait = subprocess.Popen.__init__, subprocess.Popen.wait
def noted_init(self, args, *a, **k):
    if "fedforest.federated.precompile" in " ".join(map(str, args)):
        marks["start"] = time.process_time()
    init(self, args, *a, **k)
def noted_wait(self, *a, **k):
    if "start" in marks and "wait" not in marks:
        marks["wait"] = time.process_time()
        done = wait(self, *a, **k)
        marks["waited"] = time.process_time()
        return done
    return wait(self, *a, **k)
subprocess.Popen.__init__, subprocess.Popen.wait = noted_init, noted_wait
sys.argv = ["fedforest", "simulate", *sys.argv[1:]]
status = main()  # as the program (the exit is part of the run)
end = time.process_time()
child = resource.getrusage(resource.RUSAGE_CHILDREN)
other = child.ru_utime + child.ru_stime
before, after = marks.get("wait", end), end - marks.get("waited", end)
path = max(before, marks.get("start", 0.0) + other) + after
print("critical path: " + json.dumps({"path": path, "command": end, "other": other,
                                      "start": marks.get("start"), "wait": before}))
raise SystemExit(status)
"""


def run_simulate(cache: Path, options: list[str], out: Path, path: bool = False) -> dict[str, Any]:
    """One ``fedforest simulate`` in a new process on numba cache ``cache``."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    command = ["-c", PATH_PROBE] if path else ["-m", "fedforest", "simulate"]
    args = [sys.executable, *command, "--out", str(out), *options]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True, cwd=out.parent)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    fit = re.search(r"^fedforest\s+\S+\s+(\d+\.\d+)", done.stdout, re.M)
    compiled = re.search(r"kernels compiled in (\d+\.\d+) s", done.stdout)
    probe = re.search(r"^critical path: (.*)$", done.stdout, re.M)
    return {
        "path": _with_exit(json.loads(probe.group(1)), cpu) if probe else None,
        "wall": wall,
        "cpu": cpu,
        "fit": float(fit.group(1)) if fit else float("nan"),
        "compile": float(compiled.group(1)) if compiled else 0.0,
        "announced": "compiling kernels" in done.stderr,
    }


def _with_exit(path: dict[str, Any], cpu: float) -> dict[str, Any]:
    """The critical path plus the command's CPU after the probe's last note (its exit).

    ``cpu`` counts both processes to the end; less the second process and the command's
    CPU at the last note, it leaves the command's exit (module teardown), also serial.
    """
    path["exit"] = max(cpu - path["other"] - path["command"], 0.0)
    path["path"] += path["exit"]
    return path


def kernel_compile_times(options: list[str]) -> list[tuple[str, float, int]]:
    """Compile CPU seconds and signatures per fedforest kernel of the command (fresh cache).

    Watched: the command's untimed warm-up (where a first run compiles; here all in one
    process: the precompile lists' kernels for their types, then the tiny fit), then its
    timed fedforest fit, whose kernels are listed with a ``timed fit:`` prefix if any
    compile there (none should). Without the lists (before this fix) a kernel only they
    compile was listed under the timed fit, and one the tiny fit calls with other types
    once instead of twice.
    """
    code = f"""
import collections, inspect, json, sys, time
from numba.core import event
from fedforest.cli import build_parser
from fedforest.datasets import make_paper_synthetic
from fedforest.simulate import SimulateConfig, _fit_fedforest, warm_up

class Watch(event.Listener):
    # CPU seconds of the compiling thread (compilation holds numba's lock: one at a time)
    def __init__(self):
        self.stack, self.total, self.count = [], collections.Counter(), collections.Counter()
        self.prefix = ""
    def on_start(self, ev):
        f = ev.data["dispatcher"].py_func
        name = self.prefix + f.__module__ + "." + f.__qualname__
        self.count[name] += 1
        self.stack.append((name, time.thread_time()))
    def on_end(self, ev):
        name, start = self.stack.pop()
        if not self.stack:  # a kernel the fit calls; what it compiles inside is included
            self.total[name] += time.thread_time() - start

args = build_parser().parse_args(["simulate", *{options!r}])
c = SimulateConfig(scenario=args.scenario, clients=args.clients,
                   rows_per_client=args.rows_per_client, features=args.features,
                   trees=args.trees, max_depth=args.max_depth, seed=args.seed,
                   n_bins=args.n_bins, n_jobs=args.n_jobs)
data = make_paper_synthetic(c.scenario, n_clients=c.clients, n_per_client=c.rows_per_client,
                            n_features=c.features, random_state=c.seed)
watch = Watch()
with event.install_listener("numba:compile", watch):
    # every kernel in this process (no second one), where the listener sees it: the
    # precompile lists first, with their types, as the command's two processes do
    one = {{"two_processes": False}}
    if "two_processes" not in inspect.signature(warm_up).parameters:
        one = {{}}
    else:
        from fedforest.federated import precompile
        precompile.compile_share(precompile.HERE + precompile.ELSEWHERE)
    warm_up(c, **one)
    watch.prefix = "timed fit: "
    _fit_fedforest(data, c)
print(json.dumps([(n, s, watch.count[n]) for n, s in watch.total.most_common()]))
"""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
            cwd=REPO,
        )  # fmt: skip
    return [(name, float(s), int(n)) for name, s, n in json.loads(done.stdout.splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=2, help="fresh-cache runs")
    parser.add_argument("--kernels", action="store_true", help="compile time per kernel")
    parser.add_argument("--path", action="store_true", help="CPU critical path (see above)")
    parser.add_argument("options", nargs="*", help="fedforest simulate options (after --)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            cache = Path(tmp) / f"cache{r}"
            cache.mkdir()
            for label in ("fresh cache", "second run"):
                res = run_simulate(cache, args.options, Path(tmp) / "out.png", args.path)
                print(
                    f"run {r} {label:11s}: {res['wall']:6.2f} s in all (CPU {res['cpu']:.2f} s); "
                    f"fedforest fit s "
                    f"{res['fit']:.2f}; announced compile {res['compile']:.1f} s"
                    + (" ('compiling kernels' on stderr)" if res["announced"] else "")
                )
                path = res["path"]
                if path is not None:
                    other = path["start"] is not None
                    print(
                        f"  CPU critical path {path['path']:.2f} s: command {path['command']:.2f}"
                        f" + exit {path['exit']:.2f} s"
                        + (
                            f" (waits at {path['wait']:.2f}), second process {path['other']:.2f} s"
                            f" from {path['start']:.2f}"
                            if other
                            else ""
                        )
                    )
    if args.kernels:
        times = kernel_compile_times(args.options)
        total = sum(s for _, s, _ in times)
        print(f"\ncompile CPU s per kernel (signatures), warm-up then timed fit: {total:.2f} s")
        for name, s, n in times:
            print(f"  {s:6.2f} s  ({n})  {name.replace('fedforest.', '')}")
    print(f"(load average {os.getloadavg()[0]:.1f} at the end)")


if __name__ == "__main__":
    main()
