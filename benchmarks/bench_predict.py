"""CPU time of ``predict``: fedforest's forest and scikit-learn's, one thread, one process.

Both fitted on bench_forest.py's data and hyperparameters (``--rows`` training rows,
fedforest's ``--privacy``), then each ``predict`` on ``--predict-rows`` rows (the test
set tiled), timed with ``time.process_time()`` after one untimed call; prints the least
of ``--repeats`` and the ratio. Run it with ``PYTHONPATH`` set to each checkout to
compare, alternately.

    python benchmarks/bench_predict.py --rows 20000 --predict-rows 100000 --repeats 3
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_forest as bf  # noqa: E402

import fedforest  # noqa: E402


def _least_cpu(predict: Callable[[np.ndarray], Any], X: np.ndarray, repeats: int) -> float:
    predict(X[:100])  # kernels loaded, thread pools up
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        predict(X)
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=20_000, help="training rows")
    parser.add_argument("--predict-rows", type=int, default=100_000, help="rows predicted")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls (the least kept)")
    parser.add_argument(
        "--privacy", choices=["none", "secure"], default="none", help="fedforest's privacy"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and models")
    args = parser.parse_args()
    data = bf.make_data(args.rows, args.seed)
    reps = -(-args.predict_rows // len(data["X_test"]))
    X = np.ascontiguousarray(np.tile(data["X_test"], (reps, 1))[: args.predict_rows])
    ours = bf.make_model("fedforest", 1, args.seed, args.privacy)
    bf.fit(ours, "fedforest", data["X_train"], data["y_train"], data["h_train"])
    theirs = bf.make_model("sklearn", 1, args.seed)
    bf.fit(theirs, "sklearn", data["X_train"], data["y_train"], data["h_train"])
    t_ours = _least_cpu(ours.predict, X, args.repeats)
    t_theirs = _least_cpu(theirs.predict, X, args.repeats)
    print(
        f"predict {len(X):,} rows, {bf.N_TREES} trees of depth {bf.MAX_DEPTH}, one thread: "
        f"fedforest {t_ours:.3f} s CPU, scikit-learn {t_theirs:.3f} s ({t_ours / t_theirs:.2f}x); "
        f"fedforest {Path(fedforest.__file__).parent}"
    )


if __name__ == "__main__":
    main()
