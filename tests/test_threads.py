"""The kept worker threads (fedforest/federated/threads.py)."""

from __future__ import annotations

import os
import threading

import pytest

from fedforest.federated import threads


def test_thread_map_is_map_in_order_and_reuses_its_threads() -> None:
    seen: list[str] = []

    def work(i: int) -> int:
        seen.append(threading.current_thread().name)
        return i * i

    assert threads.thread_map(work, range(20), 2) == [i * i for i in range(20)]
    assert threads.thread_map(work, range(20), 2) == [i * i for i in range(20)]
    workers = {n for n in seen if n != threading.current_thread().name}
    assert workers and len(workers) <= 2  # the same two threads both times
    assert threads.thread_map(work, [], 2) == []


def test_serial_cases_run_in_the_callers_thread() -> None:
    me = threading.current_thread().name
    assert threads.thread_map(lambda _: threading.current_thread().name, range(3), 1) == [me] * 3
    assert threads.thread_map(lambda _: threading.current_thread().name, [0], 4) == [me]


def test_a_worker_calling_thread_map_does_not_wait_on_its_own_pool() -> None:
    # Two outer tasks fill a two-thread pool; each maps again: run inline, no deadlock.
    def outer(i: int) -> list[int]:
        return threads.thread_map(lambda j: i * 10 + j, range(3), 2)

    assert threads.thread_map(outer, range(2), 2) == [[0, 1, 2], [10, 11, 12]]


def test_exceptions_propagate() -> None:
    def boom(i: int) -> int:
        if i == 3:
            raise ValueError("three")
        return i

    with pytest.raises(ValueError, match="three"):
        threads.thread_map(boom, range(6), 2)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_starts_its_own_pools() -> None:
    threads.thread_map(abs, range(4), 2)  # the parent holds a pool
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = threads.thread_map(abs, range(-4, 0), 2) == [4, 3, 2, 1]
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
