"""Cost and effect of the local candidates (``local_candidates=True``, the default).

For each size n (training rows, 20 features, 10 clients of equal size, rows assigned at
random; y = x0 + sin(3 x1) + 1[x2 > 0.3] + N(0, 0.25) noise), fits the default
``FedForestRegressor`` with and without local candidates, alternating, ``--repeats``
times each after one untimed warm-up fit, and reports the best fit time, the bytes
uploaded and downloaded (``communication_``), the rounds and the test MSE on 20,000
fresh rows.

Usage::

    python benchmarks/bench_local_candidates.py --sizes 2000 100000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

import fedforest as ff


def make(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.normal(size=(n, 20))
    y = X[:, 0] + np.sin(3 * X[:, 1]) + (X[:, 2] > 0.3) + rng.normal(0, 0.5, n)
    return X, y


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument(
        "--sizes", type=int, nargs="+", default=[2000, 100_000], help="training rows per run"
    )
    ap.add_argument("--repeats", type=int, default=3, help="timed fits per size and setting")
    ap.add_argument("--n-jobs", type=int, default=2, help="threads of every fit")
    ap.add_argument("--out", default="results/local_candidates.json", help="JSON file to write")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    X_test, y_test = make(20_000, rng)
    rows = []
    for n in args.sizes:
        X, y = make(n, rng)
        h = rng.integers(0, 10, n)
        ff.FedForestRegressor(n_estimators=2).fit(X[:500], y[:500], client_ids=h[:500])
        runs: dict[bool, list[tuple[float, ff.FedForestRegressor]]] = {True: [], False: []}
        for _ in range(args.repeats):
            for local in (False, True):
                kw = dict(
                    random_state=0, n_jobs=args.n_jobs, local_candidates=local, privacy="none"
                )
                m = ff.FedForestRegressor(**kw)
                start = time.perf_counter()
                m.fit(X, y, client_ids=h)
                runs[local].append((time.perf_counter() - start, m))
        for local, fits in runs.items():
            best, model = min(fits, key=lambda r: r[0])
            ledger = model.communication_
            rows.append(
                {
                    "n": n,
                    "local_candidates": local,
                    "fit_seconds_best": best,
                    "fit_seconds_all": [round(t, 3) for t, _ in fits],
                    "upload_MB": ledger.upload_bytes / 1e6,
                    "download_MB": ledger.download_bytes / 1e6,
                    "rounds": ledger.rounds,
                    "test_mse": float(np.mean((model.predict(X_test) - y_test) ** 2)),
                }
            )
            r = rows[-1]
            print(
                f"n={n:>8} local_candidates={local!s:5} fit {best:6.2f} s (best of "
                f"{args.repeats})  upload {r['upload_MB']:7.0f} MB  download "
                f"{r['download_MB']:6.0f} MB  rounds {r['rounds']}  test MSE {r['test_mse']:.4f}"
            )
    meta = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "python": sys.version.split()[0],
        "command": "python " + " ".join(sys.argv),
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    print(f"wrote {args.out}; reproduce: {meta['command']}")


if __name__ == "__main__":
    main()
