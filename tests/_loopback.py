"""Servers the tests start on 127.0.0.1, and timeouts a busy machine does not trip."""

from __future__ import annotations

import os
from typing import Any


def scaled(seconds: float) -> float:
    """A timeout that grows with the machine's load: a busy 2-core box must not flake.

    A round that waits for CPU is not a dead node. ``FEDFOREST_TEST_SLOWDOWN`` (default 1)
    multiplies it further for slower machines.
    """
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * max(1.0, load) * float(os.environ.get("FEDFOREST_TEST_SLOWDOWN", "1"))


def loopback_cluster(n_workers: int, **kwargs: Any) -> Any:
    """A Dask ``LocalCluster`` of single-threaded worker processes on 127.0.0.1 only.

    Without a dashboard the scheduler still serves HTTP (health, metrics), on 8787 by
    default: a free loopback port instead, so that another cluster there is no warning
    and nothing listens beyond 127.0.0.1. ``kwargs`` override any of these.
    """
    import dask
    from distributed import LocalCluster

    # A LocalCluster closes a worker's nanny for good when no worker of its name is back
    # ``lost-worker-timeout`` (15 s) after a removal, checking then, not for that worker:
    # a test that kills a worker about 15 s after another test killed the same one met
    # the first removal's check while the nanny was restarting it, and the nanny closed
    # ("Only 1/2 workers arrived", twice in rehearsals on 2026-12-05). The tests' nannies
    # restart their workers; the check is for job-queue clusters. Process-wide: the
    # cluster reads it at each removal.
    dask.config.set({"distributed.deploy.lost-worker-timeout": "1 hour"})
    settings: dict[str, Any] = {
        "n_workers": n_workers,
        "processes": True,
        "threads_per_worker": 1,
        "host": "127.0.0.1",
        "dashboard_address": None,
        "scheduler_kwargs": {"dashboard_address": "127.0.0.1:0"},
    }
    return LocalCluster(**{**settings, **kwargs})


def dask_module_client(module: Any) -> Any:
    """A generator for a module-scoped fixture: a Client of two single-threaded worker
    processes on 127.0.0.1, with ``module``'s classes and functions sent to the workers by
    value (not by import); after it, the workers' processes are checked gone."""
    import time

    import cloudpickle
    import psutil
    from distributed import Client

    cloudpickle.register_pickle_by_value(module)
    with (
        loopback_cluster(2) as cluster,
        Client(cluster, timeout=scaled(60)) as client,
    ):
        client.wait_for_workers(2, timeout=scaled(60))
        yield client
        pids = list(client.run(os.getpid).values())
    cloudpickle.unregister_pickle_by_value(module)
    deadline = time.monotonic() + scaled(10)
    while any(psutil.pid_exists(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if psutil.pid_exists(p)], "worker processes outlived the cluster"
