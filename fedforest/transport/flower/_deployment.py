"""A Flower deployment on 127.0.0.1: its ports, its processes' environment.

Shared by tests/test_flower.py and examples/flower/measure.py.

A port the kernel hands out (``bind(("127.0.0.1", 0))``) goes back to its pool once
closed, and any outgoing connection or ``bind(0)`` of another process (the deployment's own
HTTP clients, a Dask cluster next to it) may take it before the SuperLink or SuperNode binds
it. So ports are drawn below the kernel's ephemeral range, where only a process that names
the port takes it; a process is up once its own log says it listens on its port (another
process listening there would answer a connection too), and one that found its port taken
anyway is started again on another (:func:`listening`).

Not used by fedforest's apps themselves (Flower's processes bind the ports they are given);
here so the tests and the example share one way of starting them.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["flower_env", "free_ports", "listening", "wait_listening"]

#: Ports are drawn from the OS's randomness: the tests' conftest seeds Python's and NumPy's
#: global generators before every test, so they would give every test and xdist worker the
#: same ports.
_PORT_DRAWS = random.SystemRandom()

#: What a SuperLink's or SuperNode's log says once its HTTP API listens (uvicorn's line),
#: and what it says when the port was taken.
_LISTENING = "running on http{s}://127.0.0.1:{port}"
_TAKEN = "address already in use"


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now, below the kernel's ephemeral range.

    Drawn uniformly from 10000 up to the range's start (``bind(0)``'s port where that
    leaves fewer than 1000).
    """
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        low = int(text.split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    ports: list[int] = []
    while len(ports) < n:
        port = _PORT_DRAWS.randrange(10000, low) if low > 11000 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            port = s.getsockname()[1]
        if port not in ports:
            ports.append(port)
    return ports


def wait_listening(
    port: int, tls: bool, proc: subprocess.Popen[Any], log: Path, timeout: float
) -> bool:
    """True once ``proc`` says it listens on ``port``; False if it found the port taken.

    Raises
    ------
    RuntimeError
        If ``proc`` exited first (the end of its log in the message).
    TimeoutError
        If it said neither within ``timeout`` seconds.
    """
    line = _LISTENING.format(s="s" if tls else "", port=port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if line in text:
            return True
        if _TAKEN in text.lower():
            return False
        if proc.poll() is not None:
            raise RuntimeError(f"{log.stem} exited early:\n{text[-3000:]}")
        time.sleep(0.1)
    raise TimeoutError(f"{log.stem} did not listen on {port}:\n{log.read_text()[-3000:]}")


def listening(
    proc: subprocess.Popen[Any],
    port: int,
    log: Path,
    restart: Callable[[int], subprocess.Popen[Any]],
    *,
    tls: bool = False,
    timeout: float = 60.0,
    attempts: int = 5,
) -> tuple[int, subprocess.Popen[Any]]:
    """The port and process once ``proc`` (started on ``port``, writing ``log``) listens.

    While the port was taken, ``restart(new_port)`` stops the process and starts it again
    on a newly drawn port (writing ``log`` afresh), ``attempts`` starts in all.

    Raises
    ------
    RuntimeError
        If every start found its port taken (or as :func:`wait_listening`).
    """
    for attempt in range(attempts):
        if attempt:
            port = free_ports(1)[0]
            proc = restart(port)
        if wait_listening(port, tls, proc, log, timeout):
            return port, proc
    raise RuntimeError(f"{log.stem} found {attempts} ports taken")


def flower_env(home: Path, pythonpath: Path) -> dict[str, str]:
    """The environment of one Flower process: its own ``FLWR_HOME``, nothing phoned home.

    SuperExec polls for tasks every 0.1 s; ``pythonpath`` (the fedforest checkout under
    test) comes first on ``PYTHONPATH`` and this interpreter's scripts (``flower-*``,
    ``flwr``, ``fedforest``) first on ``PATH``. ``home`` is made if missing.
    """
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        FLWR_HOME=str(home),
        FLWR_TELEMETRY_ENABLED="0",
        FLWR_DISABLE_UPDATE_CHECK="1",
        FLWR_SUPEREXEC_TASK_POLL_INTERVAL="0.1",
        PYTHONPATH=os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH")) if p),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env
