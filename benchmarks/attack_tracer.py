"""A value one row holds follows that row down the trees (issue 11, branch ``red8``).

Runs ``tests/test_privacy_red8.py``'s :func:`tracer_exposure`: the suite's data (10
clients x 100 rows, 8 features and the categorical ``ward``), one row of ``site3`` marked
by ``--tracers`` (``missing``: its ``x2`` missing; ``sparse``: ``x2`` 0 in every other
row; ``rare``: its ``ward`` a level no other row holds, undeclared, so sent as the missing
category; ``declared``: the same level among the declared ``categories``), a default
secure regressor of ``--trees`` trees. The server follows the nodes whose Round A count
of the marker is 1 and intersects their boxes. Prints the trees followed, the training
rows inside every box (1: the row singled out), whether the marked row is among them, and
how many of its other numeric features the boxes bound on both sides.

The fix (branch ``tracer``: rare codes merged, no missing edge for a column missing in
fewer than ``m`` rows, node grid edges keep ``m`` rows either side) leaves nothing to
follow; ``--fix-off`` switches its three parts off (``tracer_fix_off``, the tests'
control), as main was before it.

``--second``: ``x2`` missing in a row of ``site6`` too. The deepest nodes whose count says 1
are then either row's; two such boxes that hold no training row in common are two rows'
(a graph coloured in two, each part's boxes intersected). Prints each part's training
rows and the marked rows among them.

``--weights W ...``: no marker; row 317 weighs ``W`` times the others instead, and the
model alone gives its leaves (:func:`heavy_leaves`): prints the trees whose leaf was
found, the training rows inside every such leaf's box and whether row 317 is.

``--residual CASE`` (red team 10, ``tests/test_privacy_red10.py``): the tracer fix's four
unmeasured cases (``adjacent``: ``x2`` capped at 0 and ``--k`` rows just above the tie;
``two``: one-row levels in two columns, one row or ``--k 2`` rows; ``warm``: a warm start
after the code map changed; ``bucket``: a merged code of ``m`` rows; ``tail``: ``x2`` as
drawn, its largest value's row followed by the edges between the two largest values).
Prints the trees followed, per marked row the training rows in every box holding it
alone (given the grouping), the server's own greedy grouping's right and wrong single
rows, and ``x2``'s grid ends; ``--fix-off`` as above.

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_tracer.py --seeds 0 1 2 3 4 5 6 7 8 9
    python benchmarks/attack_tracer.py --seeds 0 1 2 3 4 --fix-off
    python benchmarks/attack_tracer.py --seeds 0 1 2 3 4 --trees 10
    python benchmarks/attack_tracer.py --tracers missing --second --seeds 0 1 2 3 4
    python benchmarks/attack_tracer.py --weights 5 10 20 50 --seeds 0 1 2 3 4
    python benchmarks/attack_tracer.py --residual adjacent --k 2 --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.test_privacy_red8 as red8  # noqa: E402
from tests.test_privacy_red8 import (  # noqa: E402
    TRACERS,
    tracer_exposure,
    tracer_fix_off,
    weight_trace_exposure,
)
from tests.test_privacy_red10 import CASES, deepest, residual_exposure  # noqa: E402


def two_rows(seed: int, trees: int) -> list[tuple[int, list[int]]]:
    """``x2`` missing in one row of ``site3`` and one of ``site6``: per part of the boxes,
    its training rows and the marked rows among them."""
    plain = red8._data

    def data(**kwargs):  # noqa: ANN003, ANN202
        X, y, h = plain(**kwargs)
        X.iloc[int(np.random.default_rng(seed + 200).choice(np.flatnonzero(h == 6))), 2] = np.nan
        return X, y, h

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(red8, "_data", data)
        X, row, model, levels, _, j, count = red8._tracer_fit(monkeypatch, seed, trees)
    marked = set(np.flatnonzero(X["x2"].isna().to_numpy()).tolist())
    numeric = [
        f for f in range(X.shape[1]) if f != j and pd.api.types.is_float_dtype(X.dtypes.iloc[f])
    ]
    boxes = []
    for t, nd in deepest(model, red8.followed_nodes(model, levels, j, count)):
        lo, hi = red8._box(model.trees_[t], nd)
        inside = np.ones(len(X), dtype=bool)
        for f in numeric:
            x = X.iloc[:, f].to_numpy(dtype=np.float64)
            inside &= (x > lo.get(f, -np.inf)) & (x <= hi.get(f, np.inf))
        boxes.append(inside)
    apart = [[not (a & b).any() for b in boxes] for a in boxes]
    part = [-1] * len(boxes)
    for start in range(len(boxes)):
        if part[start] >= 0:
            continue
        part[start], stack = 0, [start]
        while stack:
            a = stack.pop()
            for b in range(len(boxes)):
                if apart[a][b] and part[b] < 0:
                    part[b] = 1 - part[a]
                    stack.append(b)
    out = []
    for side in (0, 1):
        inside = np.ones(len(X), dtype=bool)
        for a in range(len(boxes)):
            inside &= boxes[a] if part[a] == side else True
        out.append((int(inside.sum()), sorted(marked & set(np.flatnonzero(inside).tolist()))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--tracers", nargs="+", default=TRACERS, choices=TRACERS, help="markers of site3's row"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds of the fits")
    parser.add_argument("--trees", type=int, default=50, help="trees of the forest")
    parser.add_argument("--second", action="store_true", help="x2 missing in two rows")
    parser.add_argument("--fix-off", action="store_true", help="the tracer fix switched off")
    parser.add_argument("--weights", type=float, nargs="+", help="row 317's weight instead")
    parser.add_argument("--residual", choices=CASES, help="red team 10's case instead")
    parser.add_argument("--k", type=int, default=1, help="--residual: marked rows (adjacent, two)")
    args = parser.parse_args()
    if args.residual:
        for seed in args.seeds:
            t0 = time.perf_counter()
            with pytest.MonkeyPatch.context() as monkeypatch:
                out = residual_exposure(
                    monkeypatch, args.residual, seed, args.trees, args.k, args.fix_off
                )
            print(
                f"{args.residual} k={args.k}{' (fix off)' if args.fix_off else ''}, "
                f"seed {seed}, {args.trees} trees: {out['followed']} trees followed "
                f"({out['wrong']} boxes without a marked row); per marked row, the training "
                f"rows in every box holding it alone: {out['alone']}; the server's own "
                f"grouping (groups of one marked row, of one other row): {out['claims']}; "
                f"x2's grid ends {out['ends']} ({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
        return
    if args.weights:
        for weight, seed in itertools.product(args.weights, args.seeds):
            found, inside, right = weight_trace_exposure(seed, weight, args.trees)
            print(
                f"row 317 weighing {weight:g}, seed {seed}, {args.trees} trees: {found} leaves "
                f"found, {inside} training rows in every box, row 317 among them: {right}",
                flush=True,
            )
        return
    if args.second:
        for seed in args.seeds:
            parts = two_rows(seed, args.trees)
            print(f"two rows missing x2, seed {seed}, {args.trees} trees: {parts}", flush=True)
        return
    for tracer, seed in itertools.product(args.tracers, args.seeds):
        t0 = time.perf_counter()
        with pytest.MonkeyPatch.context() as monkeypatch:
            if args.fix_off:
                tracer_fix_off(monkeypatch)
            followed, inside, right, bounded = tracer_exposure(
                monkeypatch, seed, args.trees, tracer
            )
        print(
            f"{tracer}{' (fix off)' if args.fix_off else ''}, seed {seed}, {args.trees} trees: "
            f"{followed} trees followed, {inside} "
            f"training rows in every box, the row among them: {right}, {bounded} of its "
            f"other numeric features bounded both sides ({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
