"""CPU time of red team 16's fuzz draws under ``"secure"`` against ``"none"`` (issue 14).

Each draw (``tests/_attack_fuzz.py``: ``draw(seed)``) is a federation and an estimator a
user could bring. It is fitted on a plain ``LocalFederation`` (no recording) under each
privacy level after one warm-up fit of the same draw and level (so numba's compile and
cache loads are out), CPU time (``time.process_time``) of the next fit. Printed per draw:
the CPU of each level, the ratio secure / none, a hash of each fit's predictions on the
draw's rows (to compare two checkouts' forests) and the draw's description; a draw the
estimator refuses prints the refusal.

Usage (from the repository root, which holds the fuzz's draws)::

    python benchmarks/bench_fuzz_time.py --seeds 15 16
    python benchmarks/bench_fuzz_time.py --first 0 --draws 60 --no-warmup
    python benchmarks/bench_fuzz_time.py --seeds 7 --profile 25
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import os
import pstats
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff  # noqa: E402
from tests._attack_fuzz import add_draw_options, chosen_draws, draw_clients, refusal  # noqa: E402


def _fit(case: dict[str, Any], privacy: str) -> Any:
    """The draw's estimator fitted under ``privacy`` on a ``LocalFederation``."""
    clients = draw_clients(case)
    kind = ff.FedForestClassifier if case["classification"] else ff.FedForestRegressor
    model = kind(**{**case["settings"], "privacy": privacy})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit_federated(ff.LocalFederation(clients))
    return model


def _digest(model: Any, case: dict[str, Any]) -> str:
    """A short hash of the model's predictions (probabilities for a classifier)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = model.predict_proba(case["X"]) if case["classification"] else model.predict(case["X"])
    return hashlib.sha256(np.ascontiguousarray(out, dtype=np.float64).tobytes()).hexdigest()[:12]


def _timed(case: dict[str, Any], privacy: str, warmup: bool, profile: int) -> tuple[float, str]:
    """CPU seconds of one fit (after a warm-up fit) and its predictions' hash."""
    if warmup:
        _fit(case, privacy)
    prof = cProfile.Profile(time.process_time) if profile else None
    start = time.process_time()
    if prof is not None:
        prof.enable()
    model = _fit(case, privacy)
    if prof is not None:
        prof.disable()
    took = time.process_time() - start
    if prof is not None:
        print(f"  profile of {privacy} (CPU seconds):", flush=True)
        pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(profile)
    return took, _digest(model, case)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    add_draw_options(parser)
    parser.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip each draw's warm-up fits (faster; compile lands in the first draws' times)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        help="print this many lines of a cProfile (on process_time) of each timed fit",
    )
    args = parser.parse_args()
    for seed, case in chosen_draws(args):
        cpu: dict[str, float] = {}
        hashes: dict[str, str] = {}
        refused = ""
        for privacy in ("secure", "none"):
            try:
                cpu[privacy], hashes[privacy] = _timed(
                    case, privacy, not args.no_warmup, args.profile
                )
            except (ValueError, TypeError) as exc:
                refused = f"{privacy} refused: {refusal(exc, 160)}"
                break
        if refused:
            print(f"seed {seed:3d} {refused} | {case['describe']}", flush=True)
            continue
        ratio = cpu["secure"] / max(cpu["none"], 1e-9)
        print(
            f"seed {seed:3d} secure {cpu['secure']:7.2f} s none {cpu['none']:6.2f} s "
            f"ratio {ratio:6.1f} | {hashes['secure']} {hashes['none']} | {case['describe']}",
            flush=True,
        )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
