"""The kernels of a default fit, with their argument types: compiled in two processes.

A first fit after install compiles fedforest's numba kernels (``cache=True``: later runs
load them from disk). numba compiles under one global lock, so threads cannot share that
work, but processes can: :func:`compile_kernels` compiles :data:`HERE` in this process and,
once the first of them turns out not to be cached, starts ``python -m
fedforest.federated.precompile``, which compiles :data:`ELSEWHERE` (the client's row
kernels and the prediction, about half the compile time) into the same cache. On a cached
run it compiles nothing and starts nothing.

The kernels and types are those of ``FedForestRegressor()`` (``privacy="secure"``, the
default) fitted on float64 rows and of its ``predict``: the path of ``fedforest
simulate``. ``tests/test_precompile.py`` checks that such a fit calls each kernel with
exactly these types; a kernel left out, or a type that changed, is compiled by the fit
itself, in this process, as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from numba import types
from numba.core import event

from ..tree.apply import predict_forest
from . import client_kernels
from .privacy import grids, rules, secagg
from .server import draws, splitter

__all__ = ["HERE", "ELSEWHERE", "compile_kernels", "compile_share"]

_F = types.float64[::1]
_F2 = types.float64[:, ::1]
_I32 = types.int32[::1]
_I32_2 = types.int32[:, ::1]
_I64 = types.int64[::1]
_I64_2 = types.int64[:, ::1]
_I8 = types.int8[::1]
_U8 = types.uint8[::1]
_B = types.bool_[::1]
_I = types.int64

#: Compiled in this process, in the order a fit calls them.
HERE: list[tuple[Any, tuple[Any, ...]]] = [
    (secagg._encode, (_F, _F, _I64)),
    (draws.floyd_draws, (types.uint64[::1], _I, _I, _I, _I, _I64_2)),
    (grids.quantile_grids_at, (_F, _I64, _F, _I64, _I64, _F, _F, _I64, _F, _I64, _F)),
    (grids.merge_thresholds, (_F, _I64, _B, _F, _I64, _F, _I64)),
    (rules.secure_candidates, (_F, _I64, _F, _F, _F, _F, _F, _I, _I, _I64, _F)),
    (rules.ancestor_safe, (_F, _I64, _F, _I64, _F, _F, _F, _F, _F, _I64, _F, _F, _F, _I, _B)),
    (rules.interval_safe, (_F, _I64, _F, _I64, _F, _F, _F, _F, _I64, _F, _F, _F, _I, _B)),
    (grids.searchsorted_segments, (_F, _I64, _F, _I64, _I64)),
    (splitter.scan_nodes, (_F2, _I64, _I64, _F2, _I, _I, _I, _F, _U8, types.float64, _F, _F, _I64)),
]  # fmt: skip

#: Compiled by the second process: the client's row kernels and the prediction.
ELSEWHERE: list[tuple[Any, tuple[Any, ...]]] = [
    (
        client_kernels.left_stats_ranked,
        (_F2, _F2, _F2, _I32_2, _F, _I64, _I64_2, _I32, _F, _I32, _F, _I,
         _I64, _I32, _I64, _F, _I, _I, _F2),
    ),
    (client_kernels.node_summaries, (_I32, _F, _I32, _F, _I, _F2)),
    (
        client_kernels.route_rows,
        (_F2, _I32, _I32, _I32, _F, _I32, _I32, _I64, _I32, _I8, _U8),
    ),
    (predict_forest, (_F2, _I32, _F, _I32, _I32, _I64, _I32, _I8, _F, _U8, _F2, _I64, _F2)),
]  # fmt: skip


def compile_share(share: list[tuple[Any, tuple[Any, ...]]]) -> None:
    """Compile (or load from the cache) every kernel of ``share`` for its types."""
    for kernel, args in share:
        kernel.compile(args)


class _StartOther(event.Listener):
    """Starts the second process at the first compilation (the cache is cold)."""

    def __init__(self) -> None:
        self.compiled = False
        self.process: subprocess.Popen[bytes] | None = None

    def on_start(self, ev: event.Event) -> None:
        if self.compiled:
            return
        self.compiled = True
        # The fedforest next to this file, whatever the other process's path holds.
        root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, path) if p))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:  # no interpreter to start: the fit compiles them here
            self.process = None

    def on_end(self, ev: event.Event) -> None:
        pass


def compile_kernels() -> bool:
    """Compile :data:`HERE` here and :data:`ELSEWHERE` in a second process, at once.

    The second process starts only if something here needs compiling (a fresh cache);
    this waits for it. If it fails, the kernels it would have compiled are compiled by
    the fit that first calls them.

    Returns
    -------
    compiled : bool
        Whether anything was compiled (rather than loaded from the cache).
    """
    other = _StartOther()
    try:
        with event.install_listener("numba:compile", other):
            compile_share(HERE)
        if other.process is not None:
            other.process.wait()
    finally:
        if other.process is not None and other.process.poll() is None:
            other.process.kill()
            other.process.wait()
    return other.compiled


if __name__ == "__main__":
    compile_share(ELSEWHERE)
