"""CPU time of fedforest fits of bench_forest.py's model and data, one process, no rivals.

Each fit is timed with ``time.process_time()`` (all threads of this process), after one
untimed warm-up fit (numba kernels loaded or compiled). Prints the median and the least,
and of the same fits the system CPU and minor page faults (``resource.getrusage``: first
writes to fresh memory); run it with ``PYTHONPATH`` set to each checkout to compare,
alternately, on a busy machine.

    python benchmarks/bench_fit_cpu.py --privacy none --rows 2000 --fits 7 --n-jobs 1
    python benchmarks/bench_fit_cpu.py --binning global --rows 100000 --fits 3 --n-jobs 2
    python benchmarks/bench_fit_cpu.py --privacy secure --rows 1400 --fits 5 --sklearn

``--sklearn`` fits scikit-learn's RandomForestRegressor (bench_forest.py's model, the same
``n_jobs``) after each fedforest fit, in the same process, and prints the ratio of the
median CPU times.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_forest as bf  # noqa: E402

import fedforest  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--privacy", choices=["none", "secure"], default="none", help="fedforest's privacy"
    )
    parser.add_argument(
        "--binning", choices=["quantile", "global"], default="quantile", help="fedforest's binning"
    )
    parser.add_argument("--rows", type=int, default=2000, help="training rows")
    parser.add_argument("--fits", type=int, default=7, help="timed fits")
    parser.add_argument("--n-jobs", type=int, default=1, help="threads")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and models")
    parser.add_argument("--sklearn", action="store_true", help="interleave scikit-learn's fits")
    args = parser.parse_args()
    data = bf.make_data(args.rows, args.seed)
    warm = bf.make_data(bf.WARMUP_ROWS, args.seed + 1)
    model = bf.make_model("fedforest", args.n_jobs, args.seed, args.privacy, args.binning)
    bf.fit(model, "fedforest", warm["X_train"], warm["y_train"], warm["h_train"])
    if args.sklearn:
        bf.fit(bf.make_model("sklearn", args.n_jobs, args.seed), "sklearn", warm["X_train"],
               warm["y_train"], warm["h_train"])  # fmt: skip
    cpu, wall, sk_cpu, sys_cpu, faults = [], [], [], [], []
    for _ in range(args.fits):
        model = bf.make_model("fedforest", args.n_jobs, args.seed, args.privacy, args.binning)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        start, start_wall = time.process_time(), time.perf_counter()
        bf.fit(model, "fedforest", data["X_train"], data["y_train"], data["h_train"])
        cpu.append(time.process_time() - start)
        wall.append(time.perf_counter() - start_wall)
        after = resource.getrusage(resource.RUSAGE_SELF)
        sys_cpu.append(after.ru_stime - usage.ru_stime)
        faults.append(after.ru_minflt - usage.ru_minflt)
        if args.sklearn:
            sk = bf.make_model("sklearn", args.n_jobs, args.seed)
            start = time.process_time()
            bf.fit(sk, "sklearn", data["X_train"], data["y_train"], data["h_train"])
            sk_cpu.append(time.process_time() - start)
    print(
        f"{args.privacy} binning={args.binning} rows={args.rows} n_jobs={args.n_jobs}: CPU s "
        f"median {statistics.median(cpu):.3f}, least {min(cpu):.3f}; wall s least "
        f"{min(wall):.3f}; system CPU s median {statistics.median(sys_cpu):.3f}, minor faults "
        f"median {statistics.median(faults):.0f} ({args.fits} fits; load average "
        f"{os.getloadavg()[0]:.1f}; "
        f"fedforest {Path(fedforest.__file__).parent})"
    )
    if args.sklearn:
        ratio = statistics.median(cpu) / statistics.median(sk_cpu)
        print(
            f"scikit-learn CPU s median {statistics.median(sk_cpu):.3f}, least {min(sk_cpu):.3f}; "
            f"fedforest / scikit-learn (medians) {ratio:.2f}x"
        )


if __name__ == "__main__":
    main()
