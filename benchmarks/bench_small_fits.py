"""fedforest against scikit-learn at the papers' scale: interleaved fits in one process.

For each size, the fits alternate (scikit-learn, fedforest ``"none"``, fedforest
``"secure"``, then again), so that a busy machine slows all of them alike; each fit's
CPU time (all threads of this process), the CPU time of the calling thread (the
server's serial share: clients run in worker threads) and wall time are kept, and the
ratios to the scikit-learn fit of the same repeat are printed (medians). Models and data
are ``bench_forest.py``'s (50 trees, depth 8, leaf 5, 6 of 20 features, 10 clients);
one untimed warm-up fit per system first.

    python benchmarks/bench_small_fits.py --sizes 1400 2000 --repeats 7 --n-jobs 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_forest as bf  # noqa: E402

import fedforest  # noqa: E402

SYSTEMS = ("sklearn", "none", "secure")


def _model(system: str, n_jobs: int, seed: int) -> tuple[object, str]:
    if system == "sklearn":
        return bf.make_model("sklearn", n_jobs, seed), "sklearn"
    return bf.make_model("fedforest", n_jobs, seed, system), "fedforest"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1400, 2000], help="training rows per run"
    )
    parser.add_argument("--repeats", type=int, default=7, help="timed fits per size and system")
    parser.add_argument("--n-jobs", type=int, default=2, help="threads of every fit")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and models")
    args = parser.parse_args()
    warm = bf.make_data(bf.WARMUP_ROWS, args.seed + 1)
    for system in SYSTEMS:
        model, method = _model(system, args.n_jobs, args.seed)
        bf.fit(model, method, warm["X_train"], warm["y_train"], warm["h_train"])
    load0 = os.getloadavg()[0]
    times: dict[tuple[int, str], list[tuple[float, float, float]]] = {}
    for n in args.sizes:
        data = bf.make_data(n, args.seed)
        for _ in range(args.repeats):
            for system in SYSTEMS:
                model, method = _model(system, args.n_jobs, args.seed)
                cpu, main, wall = time.process_time(), time.thread_time(), time.perf_counter()
                bf.fit(model, method, data["X_train"], data["y_train"], data["h_train"])
                times.setdefault((n, system), []).append(
                    (
                        time.process_time() - cpu,
                        time.thread_time() - main,
                        time.perf_counter() - wall,
                    )
                )
    print(
        f"fedforest {Path(fedforest.__file__).parent}; n_jobs={args.n_jobs}, "
        f"{args.repeats} repeats; load average {load0:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end"
    )
    print(
        "rows  system  CPU s  calling-thread CPU s  wall s  (medians) | / scikit-learn: CPU  wall"
    )
    for n in args.sizes:
        ref = times[(n, "sklearn")]
        for system in SYSTEMS:
            got = times[(n, system)]
            med = [statistics.median(t[i] for t in got) for i in range(3)]
            line = f"{n:5d}  {system:7s} {med[0]:.3f}  {med[1]:.3f}  {med[2]:.3f}"
            if system != "sklearn":
                cpu = statistics.median(a[0] / b[0] for a, b in zip(got, ref, strict=True))
                wall = statistics.median(a[2] / b[2] for a, b in zip(got, ref, strict=True))
                line += f" | {cpu:.2f}x  {wall:.2f}x"
            print(line)


if __name__ == "__main__":
    main()
