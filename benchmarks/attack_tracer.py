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

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_tracer.py --seeds 0 1 2 3 4 5 6 7 8 9
    python benchmarks/attack_tracer.py --seeds 0 1 2 3 4 --trees 10
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_privacy_red8 import TRACERS, tracer_exposure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tracers", nargs="+", default=TRACERS, choices=TRACERS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--trees", type=int, default=50)
    args = parser.parse_args()
    for tracer, seed in itertools.product(args.tracers, args.seeds):
        t0 = time.perf_counter()
        with pytest.MonkeyPatch.context() as monkeypatch:
            followed, inside, right, bounded = tracer_exposure(
                monkeypatch, seed, args.trees, tracer
            )
        print(
            f"{tracer}, seed {seed}, {args.trees} trees: {followed} trees followed, {inside} "
            f"training rows in every box, the row among them: {right}, {bounded} of its "
            f"other numeric features bounded both sides ({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
