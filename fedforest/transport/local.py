"""In-process transport: clients are objects; messages are still built, counted and checked."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from joblib import effective_n_jobs

from ..federated.client import Client
from ..federated.federation import Federation, replies_or_failure
from ..federated.protocol import Message

__all__ = ["LocalFederation"]


class LocalFederation(Federation):
    """Clients living in this process, answered in parallel threads.

    The kernels release the GIL, so ``n_jobs`` threads keep as many cores busy.

    Parameters
    ----------
    clients : sequence of Client
        Names must be unique.
    n_jobs : int or None
        Threads; None means 1, -1 means all cores (joblib's convention).
    """

    def __init__(self, clients: Sequence[Client], n_jobs: int | None = None) -> None:
        if len(clients) == 0:
            raise ValueError("LocalFederation needs at least one client.")
        names = [c.name for c in clients]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"Client names must be unique; {dupes[0]!r} appears twice.")
        self.clients = {c.name: c for c in clients}
        self.n_jobs = n_jobs

    @property
    def client_names(self) -> list[str]:
        """Client names, sorted."""
        return sorted(self.clients)

    def send_and_receive(
        self, requests: dict[str, Message], round_index: int
    ) -> dict[str, Message]:
        """Run every client's handler, in parallel threads when ``n_jobs`` allows."""
        names = list(requests)
        n_jobs = effective_n_jobs(self.n_jobs)
        n_threads = min(len(names), n_jobs)
        for name in names:
            # Fewer clients than threads: the spare threads split each client's trees.
            self.clients[name].n_threads = max(1, n_jobs // max(len(names), 1))

        def call(name: str) -> Message | Exception:
            try:
                return self.clients[name].handle(requests[name])
            except ValueError:
                raise
            except Exception as exc:  # noqa: BLE001 - reported with the client's name
                return exc

        if n_threads <= 1:
            answers = [call(name) for name in names]
        else:
            with ThreadPoolExecutor(max_workers=n_threads) as pool:
                answers = list(pool.map(call, names))
        return replies_or_failure(dict(zip(names, answers, strict=True)), requests, round_index)
