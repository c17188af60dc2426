"""Predict's categorical codes: one pass (encode_counted) against two (encode, other_kind_rows).

The rows to predict of a categorical column were read twice, once for their codes and
once for the rows of the other kind (numbers where the levels are text, or the reverse);
``encode_counted`` reads them once. Both are timed side by side in one process (each
repeat runs both; the best of the repeats is printed) on three columns, then a whole
``model.predict`` with the two-pass path put back in ``_inputs`` (predictions compared).

    python benchmarks/bench_category_codes.py --rows 200000 --repeats 7
"""

from __future__ import annotations

import argparse
import os
import timeit
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

import fedforest as ff
import fedforest._inputs as inputs
from fedforest.federated.categorical import encode, encode_counted, other_kind_rows


def _two_passes(raw: Any, cats: list[Any]) -> tuple[Any, int]:
    return encode(raw, cats), other_kind_rows(raw, cats)


def _best(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            times[k].append(timeit.timeit(fn, number=1))
    return {k: min(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000, help="rows of every case")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs; the best is reported")
    args = parser.parse_args()
    n, rng = args.rows, np.random.default_rng(0)
    print(f"python benchmarks/bench_category_codes.py --rows {n} --repeats {args.repeats}")
    print(f"load average: {os.getloadavg()}")
    levels = [f"w{k:02d}" for k in range(20)]
    text = np.array(rng.choice(levels, n), dtype=object)
    text[rng.random(n) < 0.05] = None
    floats = rng.integers(0, 20, n).astype(float)
    floats[rng.random(n) < 0.05] = np.nan
    cases = {
        "text levels, text rows (5 % None)": (text, [*levels, None]),
        "text levels, int rows (codes read back)": (
            np.array(rng.integers(0, 20, n).tolist(), dtype=object),
            [str(k) for k in range(20)],
        ),
        "number levels, float rows (5 % NaN)": (floats.astype(object), list(range(20))),
    }
    for name, (raw, cats) in cases.items():
        (c2, n2), (c1, n1) = _two_passes(raw, cats), encode_counted(raw, cats)
        assert np.array_equal(c1, c2) and n1 == n2
        t = _best(
            {"two": partial(_two_passes, raw, cats), "one": partial(encode_counted, raw, cats)},
            args.repeats,
        )
        print(
            f"{name:40s} two passes {t['two'] * 1e3:8.1f} ms  one pass {t['one'] * 1e3:8.1f} "
            f"ms  {t['two'] / t['one']:5.2f}x"
        )
    X = pd.DataFrame({"x": rng.normal(size=3000), "ward": rng.choice(levels, 3000)})
    y = X["x"].to_numpy() + (X["ward"] == "w03").to_numpy()
    model = ff.FedForestRegressor(n_estimators=10, privacy="none", random_state=0)
    model.fit(X, y, client_ids=np.repeat([0, 1, 2], 1000))
    rows = pd.DataFrame({"x": rng.normal(size=n), "ward": rng.choice(levels, n)})
    preds: dict[str, Any] = {}

    def predict(path: str, fn: Any) -> Callable[[], None]:
        def run() -> None:
            inputs.encode_counted = fn
            try:
                preds[path] = model.predict(rows)
            finally:
                inputs.encode_counted = encode_counted

        return run

    t = _best({"two": predict("two", _two_passes), "one": predict("one", encode_counted)}, 5)
    assert np.array_equal(preds["one"], preds["two"])
    print(
        f"{'model.predict (10 trees, x and text ward)':40s} two passes {t['two'] * 1e3:8.1f} ms  "
        f"one pass {t['one'] * 1e3:8.1f} ms  {t['two'] / t['one']:5.2f}x (predictions identical)"
    )


if __name__ == "__main__":
    main()
