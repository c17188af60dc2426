"""A local Flower deployment's ports (``fedforest/transport/flower/_deployment.py``).

Shared by tests/test_flower.py's ``Deployment`` and examples/flower/measure.py: ports below
the ephemeral range, a process up once its own log says it listens, started again on
another port when its port was taken. Here a real SuperLink meets a taken port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr")

from fedforest.transport.flower._deployment import (  # noqa: E402
    flower_env,
    free_ports,
    listening,
)


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    ports = free_ports(20)
    assert len(set(ports)) == 20
    assert all(10000 <= p < _ephemeral_low() for p in ports)
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free: binding it does not raise


def test_a_superlink_whose_port_is_taken_starts_again_on_another(tmp_path: Path) -> None:
    env = flower_env(tmp_path / "home", Path(__file__).resolve().parents[1])
    log = tmp_path / "superlink.log"
    procs: list[subprocess.Popen[Any]] = []

    def start(port: int) -> subprocess.Popen[Any]:
        with open(log, "wb") as out:
            procs.append(
                subprocess.Popen(
                    ["flower-superlink", "--insecure", "--port", str(port),
                     "--disable-runtime-dependency-installation"],
                    env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                )
            )  # fmt: skip
        return procs[-1]

    def restart(port: int) -> subprocess.Popen[Any]:
        os.killpg(procs[-1].pid, signal.SIGKILL)
        procs[-1].wait()
        return start(port)

    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", free_ports(1)[0]))
        taken.listen()
        port_taken = taken.getsockname()[1]
        port, proc = listening(start(port_taken), port_taken, log, restart, timeout=120)
        assert len(procs) == 2 and proc is procs[1]  # started again, once
        assert port != port_taken
        assert f"running on http://127.0.0.1:{port}" in log.read_text(errors="replace")
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # the SuperLink answers on the new port
    finally:
        taken.close()
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
