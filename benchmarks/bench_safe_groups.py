"""``safe_groups``' numba kernel against an earlier commit's, on a fuzz draw's own nodes (issue 14).

The draw (``tests/_attack_fuzz.py``) is fitted once under ``"secure"``, every call of
``safe_groups`` recorded (a node's category groups, its rows and its ancestors'); then the
merging kernel of this checkout (``group_merges.safe_groups_counts``) and that of
``--against`` (the file read with ``git show``, compiled here) run on every recorded call,
side by side in each repeat (the best repeat printed), their groups compared. Printed: the
calls, their categories, CPU seconds of each kernel (``time.process_time``) and the ratio;
the slowest call's.

Usage (from the repository root)::

    python benchmarks/bench_safe_groups.py --seed 28 --against 9c32fea
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import fedforest as ff  # noqa: E402
from fedforest.federated.privacy import group_merges, rules  # noqa: E402
from fedforest.federated.server import secure_round_b  # noqa: E402
from tests._attack_fuzz import draw, draw_clients  # noqa: E402

_PATH = "fedforest/federated/privacy/group_merges.py"


def _kernel_at(rev: str, where: Path) -> ModuleType:
    """``group_merges`` as it was at ``rev``, imported from a copy in ``where``."""
    text = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{_PATH}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = where / "group_merges_then.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("group_merges_then", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recorded(seed: int) -> list[tuple[Any, ...]]:
    """The kernel's arguments of every ``safe_groups`` call of the draw's secure fit."""
    calls: list[tuple[Any, ...]] = []
    real = secure_round_b.safe_groups

    def record(groups: Any, rows: Any, ancestors: Any, m: int) -> Any:
        counted = rules._counted(rows, groups, ancestors, m)
        if counted is not None:
            off = np.arange(len(ancestors) + 1, dtype=np.int64) * groups.size
            calls.append(
                (groups.astype(np.int64), rows.astype(np.float64), *counted, off, int(m), 14)
            )
        return real(groups, rows, ancestors, m)

    case = draw(seed)
    clients = draw_clients(case)
    kind = ff.FedForestClassifier if case["classification"] else ff.FedForestRegressor
    secure_round_b.safe_groups = record  # type: ignore[assignment]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kind(**{**case["settings"], "privacy": "secure"}).fit_federated(
                ff.LocalFederation(clients)
            )
    finally:
        secure_round_b.safe_groups = real
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=28, help="the fuzz draw fitted")
    parser.add_argument("--against", default="main", help="the commit whose kernel is timed too")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best is reported")
    args = parser.parse_args()
    print("command: python " + " ".join(sys.argv), f"| load {os.getloadavg()}", flush=True)
    calls = _recorded(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        kernels = {"then": _kernel_at(args.against, Path(tmp)).safe_groups_counts}
        kernels["now"] = group_merges.safe_groups_counts
        for fn in kernels.values():  # compiled (or loaded) before any timing
            fn(*calls[0])
        best = {name: np.full(len(calls), np.inf) for name in kernels}
        for _ in range(args.repeats):
            for name, fn in kernels.items():
                for c, call in enumerate(calls):
                    start = time.process_time()
                    out = fn(*call)
                    best[name][c] = min(best[name][c], time.process_time() - start)
                    if name == "now":
                        assert np.array_equal(out, kernels["then"](*call)), f"call {c} differs"
    then, now = best["then"].sum(), best["now"].sum()
    slow = int(np.argmax(best["then"]))
    sizes = [call[0].size for call in calls]
    print(
        f"seed {args.seed}: {len(calls)} calls, {min(sizes)} to {max(sizes)} categories; "
        f"{args.against} {then:.3f} s, this checkout {now:.3f} s, {then / max(now, 1e-9):.1f}x; "
        f"slowest call ({sizes[slow]} categories, {len(calls[slow][4]) - 1} ancestors): "
        f"{best['then'][slow]:.3f} s against {best['now'][slow]:.4f} s; groups equal"
    )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
