"""Worker threads kept for the process's lifetime: one pool per size, reused by every call.

A fit at the papers' scale runs some fifty short parallel steps (each round's clients, the
reply checks, the sketch merge, the Round B sums); a new ``ThreadPoolExecutor`` for each
cost about 0.5 ms of CPU and 1 ms of wall time to start and join its threads. The pools
here start their threads once. A call from one of a pool's own workers runs in the
caller's thread instead (no task waits on a pool it occupies); a forked child starts
afresh (the parent's threads do not exist there).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = ["thread_map", "work_ranges"]

T = TypeVar("T")
R = TypeVar("R")

_POOLS: dict[int, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()
_LOCAL = threading.local()


def _mark_worker() -> None:
    _LOCAL.worker = True


def _pool(n_threads: int) -> ThreadPoolExecutor:
    with _LOCK:
        pool = _POOLS.get(n_threads)
        if pool is None:
            pool = ThreadPoolExecutor(
                n_threads, thread_name_prefix="fedforest", initializer=_mark_worker
            )
            _POOLS[n_threads] = pool
        return pool


def thread_map(fn: Callable[[T], R], items: Iterable[T], n_threads: int) -> list[R]:
    """``list(map(fn, items))``, in up to ``n_threads`` kept threads.

    In this thread when ``n_threads <= 1``, for fewer than two items, or when called from
    a worker of these pools. Exceptions propagate as from ``map``.
    """
    items = list(items)
    if n_threads <= 1 or len(items) < 2 or getattr(_LOCAL, "worker", False):
        return [fn(item) for item in items]
    return list(_pool(min(n_threads, len(items))).map(fn, items))


def work_ranges(work: NDArray[np.int64], n_parts: int) -> list[tuple[int, int]]:
    """Contiguous ranges ``lo:hi`` of ``work``'s items, each with about ``1 / n_parts`` of it.

    For kernels whose items (pairs) are independent, run on those ranges in threads; empty
    ranges are left out (so fewer than ``n_parts`` may come back, one for no work at all).
    """
    if n_parts <= 1:  # one range (every call at n_jobs=1): no cumulative sum, no search
        return [(0, int(work.size))]
    cum = np.cumsum(work, dtype=np.float64)
    total = float(cum[-1]) if cum.size else 0.0
    cuts = np.searchsorted(cum, total * np.arange(1, max(n_parts, 1)) / max(n_parts, 1))
    edges = np.unique(np.concatenate([[0], cuts, [work.size]]).astype(np.int64))
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)] or [(0, 0)]


def join_ranges(
    done: list[tuple[NDArray[Any], NDArray[np.int64]]],
) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Join per-range results ``(values, off)`` (``off`` from 0 within its range), in order.

    The ranges are :func:`work_ranges`' over segmented outputs (pair ``p``'s values in
    ``values[off[p]:off[p + 1]]``); returns the offsets and values of one call over all.
    """
    if len(done) == 1:
        return done[0][1].astype(np.int64, copy=False), done[0][0]
    base = np.cumsum([0] + [part.size for part, _ in done[:-1]])
    tails = [off[1:] + at for (_, off), at in zip(done, base, strict=True)]
    out_off = np.concatenate([np.zeros(1, dtype=np.int64), *tails]).astype(np.int64)
    return out_off, np.concatenate([part for part, _ in done])


def _forget_pools() -> None:  # in a forked child: the threads stayed with the parent
    global _LOCK
    _POOLS.clear()
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # pragma: no branch - POSIX
    os.register_at_fork(after_in_child=_forget_pools)
