"""The kernels of a default fit, with their argument types: compiled in two processes.

A first fit after install compiles fedforest's numba kernels (``cache=True``: later runs
load them from disk). numba compiles under one global lock, so threads cannot share that
work, but processes can: :func:`compile_kernels` compiles :data:`HERE` in this process and,
once the first of them turns out not to be cached, starts ``python -m
fedforest.federated.precompile``, which compiles :data:`ELSEWHERE` (a client's left
statistics and routing, the prediction, the server's split scan, its partition rule,
its fallback thresholds and its rule on derived sums: about half the compile time)
into the same cache. :func:`start_early` starts that process sooner, as soon as the
cache index shows one of its kernels missing (``fedforest simulate`` calls it before
importing scikit-learn and matplotlib); :class:`Ahead` lets this process work between
compiling its share and waiting for the other. On a cached run nothing compiles and nothing starts.

The kernels and types are those of ``FedForestRegressor()`` (``privacy="secure"``, the
default) fitted on float64 rows and of its ``predict``: the path of ``fedforest
simulate``. ``tests/test_precompile.py`` checks that such a fit calls each kernel with
exactly these types; a kernel left out, or a type that changed, is compiled by the fit
itself, in this process, as before.
"""

from __future__ import annotations

import atexit
import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from numba import types
from numba.core import event

from ..tree.apply import predict_forest
from . import client_kept, client_kernels, client_route, client_sketch, grid_wire
from .kernel_cache import is_cached
from .privacy import grids, intervals, partitions, rules, secagg
from .server import (
    check_kernels,
    draws,
    fallback,
    grid_bounds,
    guides,
    secure_ancestors,
    secure_cousins,
    secure_derived,
    secure_segments,
    splitter,
)

__all__ = [
    "HERE",
    "ELSEWHERE",
    "Ahead",
    "compile_kernels",
    "compile_share",
    "is_cached",
    "start_early",
]

_F = types.float64[::1]
_F2 = types.float64[:, ::1]
_F2_COLUMNS = types.float64[::1, :]  # Fortran order
_I32 = types.int32[::1]
_I32_2 = types.int32[:, ::1]
_I64 = types.int64[::1]
_I64_2 = types.int64[:, ::1]
_I8 = types.int8[::1]
_U8 = types.uint8[::1]
_B = types.bool_[::1]
_I = types.int64
_R = types.float64
#: ``secure_derived``'s tree (nodes' parents, children, splits, rows; features missing),
#: release pool and scratch.
_TREE = types.Tuple((_I64, _I64, _I64, _I64, _F, _B, _F, _F, _B))
_POOL = types.Tuple((_I64, _F, _F, _I64))
_SCRATCH = types.Tuple((_I64, _F, _I64, _F))

#: Compiled in this process: most of the server's kernels, and a client's node summaries.
HERE: list[tuple[Any, tuple[Any, ...]]] = [
    (secagg._encode, (_F, _F, _I64)),
    (secagg._encode_packed, (_F2, _F, types.uint64[:, ::1])),
    (check_kernels.cumulative_problem, (_F2, _I64, _F, _F2, _F)),
    (grid_bounds.within_edges, (_F, _I64, _F, _F, _F, _F, _F, _I64)),
    (secure_ancestors.ancestors_kept, (_F2, _I64_2, _I64_2, _F, _I, _I64, _F2_COLUMNS)),
    (draws.floyd_draws, (types.uint64[::1], _I, _I, _I, _I, _I64_2)),
    (grids.quantile_grids_at, (_F, _I64, _F, _I64, _I64, _F, _F, _I64, _F, _I64, _F)),
    (grids.merge_thresholds, (_F, _I64, _B, _F, _I64, _F, _I64, _B, _B)),
    (grids.displaced_edges, (_F, _I64, _F, _I64, _I64, _B)),
    (rules.secure_candidates, (_F, _I64, _F, _F, _F, _F, _F, _I, _I, _I64, _F)),
    (guides.guided_candidates, (_F, _I64, _F, _F, _F, _I64, _F, _I64, _I, _I64, _F)),
    (guides.top_guides, (_I64, _I64, _I64, _F, _F, _I64, _I64, _I64, _F, _F, _I, _I, _I64, _F)),
    (guides.root_medians, (_I64, _I64, _I64, _F, _I64, _I64, _I64, _F, _F, _F, _F, _I64, _F)),
    (secure_cousins.keep_atoms, (_I64, _I64, _F, _F, _I, _B)),
    (secure_cousins.nearest_releases, (_F2, _I64_2, _I64_2, _F, _I64, _B, _I64)),
    (secure_derived.derived_split, (_TREE, _POOL, _I, _I, _I64, _I, _SCRATCH)),
    (secure_segments.gather_rows, (_F2, _I64, _I64, _I64, _F2)),
    (intervals.both_rules, (_F, _I64, _F, _I64, _F, _F, _F, _F, _F, _I64, _F, _F, _F, _I, _B)),
    (grids.searchsorted_segments, (_F, _I64, _F, _I64, _I64)),
    (grids._libm_map, (_F, types.boolean, _F)),
    (client_kernels.node_summaries, (_I32, _F, _I32, _F, _I, _F2)),
    (
        client_sketch.fine_codes_kernel,
        (_F2, _I64_2, _I, _F, _F, types.uint8[:, ::1], _F2, _F2, _I32_2, _I64_2, _F, _I64),
    ),
    (grid_wire.encode_lattice, (_F, _I64, _I64, _B, _F, _F, _B, _B, types.uint32[::1], _F)),
    (grid_wire.decode_lattice, (_U8, _F, types.uint32[::1], _F, _F, _B, _I64, _I64, _F)),
    (grid_wire.half_pack, (types.uint64[::1], _I64, _B, types.uint64[::1])),
    (grid_wire.half_unpack, (types.uint64[::1], _I64, _B, _F2)),
]  # fmt: skip

#: Compiled by the second process: a client's left statistics (as the secure answers'
#: packed words: ``left_stats_ranked`` given a scale, keeping Round A's bins, and Round B
#: from them, ``client_kept.left_stats_kept``) and routing, the prediction, and the
#: server's split scan, partition rule, fallback thresholds and the rule on derived
#: sums' candidate kernel (about half the compile CPU, balanced
#: against this process's share plus its imports and baselines, docs/benchmarks.md:
#: ``fedforest simulate`` starts this process before its heavy imports).
ELSEWHERE: list[tuple[Any, tuple[Any, ...]]] = [
    (
        client_kernels.left_stats_ranked,
        (_F2, _F2, _F2, _I32_2, _F, _I64, _I64_2, _I32, _F, _I32, _F, _I,
         _I64, _I32, _I64, _F, _I, _I, types.uint64[:, ::1], _F, _U8, _I64, _U8),
    ),
    (
        client_kept.left_stats_kept,
        (_I32, _F, _I32, _F, _I, _I64, _I64, _I64, _I64, _U8, _I64, _U8, _I, _I,
         types.uint64[:, ::1], _F),
    ),
    (
        client_route.route_rows,
        (_F2, _I32, _I32, _I32, _F, _I32, _I32, _I64, _I32, _I8, _U8),
    ),
    (predict_forest, (_F2, _I32, _F, _I32, _I32, _I64, _I32, _I8, _F, _U8, _F2, _I64, _F2)),
    (splitter.scan_nodes, (_F2, _I64, _I64, _F2, _I, _I, _I, _F, _U8, types.float64, _F, _F, _I64)),
    (
        partitions.partition_safe,
        (_F, _I64, _F, _I64, _F, _F, _F, _F, _I64, _I64, _I64, _F, _I, _B),
    ),
    (fallback.spaced_thresholds, (_I64, _F, _I64, _F, _F2, _I64, _F, _F, _F, _R, _F, _I64)),
    (
        secure_derived.derived_filter,
        (_TREE, _POOL, _I, _I, _I64, _I64, _F, _I64, _F, _I, _B, _I, _SCRATCH),
    ),
]  # fmt: skip


def compile_share(share: list[tuple[Any, tuple[Any, ...]]]) -> None:
    """Compile (or load from the cache) every kernel of ``share`` for its types."""
    for kernel, args in share:
        kernel.compile(args)


def _other_process() -> subprocess.Popen[bytes] | None:
    """``python -m fedforest.federated.precompile`` started, compiling :data:`ELSEWHERE`."""
    # The fedforest next to this file, whatever the other process's path holds.
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, path) if p))
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:  # no interpreter to start: the fit compiles them here
        return None
    if not _started:
        atexit.register(_stop_started)  # this process ends (or fails) before waiting
    _started.append(process)
    return process


#: Every second process started here; any still running when this process exits is
#: stopped (a command that failed between starting it and waiting for it).
_started: list[subprocess.Popen[bytes]] = []


def _stop_started() -> None:
    for process in _started:
        if process.poll() is None:
            process.kill()
            process.wait()


#: The second process, if :func:`start_early` started it (a cold cache).
_early: list[subprocess.Popen[bytes]] = []


def start_early() -> bool:
    """Start the second process now if a kernel of :data:`ELSEWHERE` is not cached.

    Called by ``fedforest simulate`` before its heavy imports (scikit-learn, matplotlib),
    so that the second process compiles while this one imports; :func:`compile_kernels`
    then waits for it rather than starting another. It reads only the cache index files
    (a cached run starts nothing). Returns whether it started the process.
    """
    if _early or all(is_cached(kernel, args) is not False for kernel, args in ELSEWHERE):
        return False
    process = _other_process()
    if process is None:
        return False
    _early.append(process)
    return True


class _StartOther(event.Listener):
    """Starts the second process at the first compilation (the cache is cold)."""

    def __init__(self) -> None:
        self.compiled = False
        self.process: subprocess.Popen[bytes] | None = _early.pop() if _early else None
        self.started_early = self.process is not None

    def on_start(self, ev: event.Event) -> None:
        if self.compiled:
            return
        self.compiled = True
        if self.process is None:
            self.process = _other_process()

    def on_end(self, ev: event.Event) -> None:
        pass


class Ahead:
    """:func:`compile_kernels` in two steps, so that this process can work in between.

    :meth:`compile_here` compiles :data:`HERE` (and starts the second process at its
    first compilation unless :func:`start_early` did); :meth:`wait` waits for the second
    process. Between the two this process may do anything that needs none of
    :data:`ELSEWHERE`'s kernels (``fedforest simulate`` fits its scikit-learn baselines).
    """

    def __init__(self) -> None:
        self._other = _StartOther()

    @property
    def started_early(self) -> bool:
        """Whether the second process was already running (:func:`start_early`)."""
        return self._other.started_early

    def compile_here(self) -> None:
        """Compile (or load) :data:`HERE` in this process."""
        try:
            with event.install_listener("numba:compile", self._other):
                compile_share(HERE)
        except BaseException:
            self._stop()
            raise

    def wait(self) -> bool:
        """Wait for the second process; whether anything was compiled, here or there."""
        try:
            if self._other.process is not None:
                self._other.process.wait()
        finally:
            self._stop()
        return self._other.compiled or self._other.started_early

    def _stop(self) -> None:
        process = self._other.process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()


def compile_kernels() -> bool:
    """Compile :data:`HERE` here and :data:`ELSEWHERE` in a second process, at once.

    The second process starts only if something needs compiling (a fresh cache): here
    at the first compilation, or earlier by :func:`start_early`; this waits for it. If it
    fails, the kernels it would have compiled are compiled by the fit that first calls
    them.

    Returns
    -------
    compiled : bool
        Whether anything was compiled (rather than loaded from the cache), here or in
        the second process.
    """
    ahead = Ahead()
    ahead.compile_here()
    return ahead.wait()


if __name__ == "__main__":
    compile_share(ELSEWHERE)
    gc.freeze()  # the process ends: no garbage-collector passes over numba's objects at exit
