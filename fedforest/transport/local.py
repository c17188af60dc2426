"""In-process transport: clients are objects; messages are still built, counted and checked."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait

from joblib import effective_n_jobs

from ..federated.client import Client
from ..federated.client_errors import sanitized
from ..federated.federation import Federation, replies_or_failure
from ..federated.protocol import Message
from ..federated.threads import thread_map

__all__ = ["LocalFederation"]


class LocalFederation(Federation):
    """Clients living in this process, answered in parallel threads.

    The kernels release the GIL, so ``n_jobs`` threads keep as many cores busy.

    Parameters
    ----------
    clients : iterable of Client
        Names must be unique.
    n_jobs : int or None, default=None
        Threads; None means 1, -1 means all cores (joblib's convention).
    timeout : float or None, default=None
        Seconds a round waits for the clients; a client that has not answered by then
        fails the round (a ``TimeoutError`` in the :class:`ClientFailure` that names it).
        Its thread cannot be stopped: it runs on in the background and its late answer
        is ignored. None waits for ever.
    """

    def __init__(
        self, clients: Iterable[Client], n_jobs: int | None = None, timeout: float | None = None
    ) -> None:
        if isinstance(clients, Mapping):  # its iteration gives the keys: say what to pass
            raise ValueError(
                "LocalFederation takes Client objects, not a dict; pass list(d.values()) "
                "(each Client has its own name)."
            )
        clients = list(clients)  # any iterable (a generator had no len())
        if len(clients) == 0:
            raise ValueError("LocalFederation needs at least one client.")
        for k, c in enumerate(clients):
            if not isinstance(c, Client):
                raise ValueError(
                    f"LocalFederation takes Client objects; item {k} is a {type(c).__name__}. "
                    "Build each with fedforest.Client(X, y, name=...)."
                )
        names = [c.name for c in clients]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"Client names must be unique; {dupes[0]!r} appears twice.")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}.")
        self.clients = {c.name: c for c in clients}
        self.n_jobs = n_jobs
        self.timeout = timeout

    @property
    def client_names(self) -> list[str]:
        """Client names, sorted."""
        return sorted(self.clients)

    def send_and_receive(
        self, requests: dict[str, Message], round_index: int
    ) -> dict[str, Message]:
        """Run every client's handler, in parallel threads when ``n_jobs`` allows.

        Whatever a handler raises (``ValueError`` included) is that client's failure. Its
        text is what a remote client would send (:mod:`~fedforest.federated.client_errors`):
        a refusal of fedforest's own, or the step and the type name only, the exception
        itself chained as the stand-in's ``__cause__`` (this process holds the rows anyway).
        """
        names = list(requests)
        n_jobs = effective_n_jobs(self.n_jobs)
        n_threads = min(len(names), n_jobs)
        for name in names:
            # Fewer clients than threads: the spare threads split each client's trees.
            self.clients[name].n_threads = max(1, n_jobs // max(len(names), 1))

        def call(name: str) -> object:
            try:
                return self.clients[name].handle(requests[name])
            except Exception as exc:  # noqa: BLE001 - reported with the client's name
                return sanitized(exc, requests[name].kind)

        if self.timeout is None:  # kept threads (threads.py); in this one if n_threads <= 1
            answers = dict(zip(names, thread_map(call, names, n_threads), strict=True))
        else:
            answers = self._with_timeout(call, names, max(n_threads, 1))
        return replies_or_failure(answers, requests, round_index)

    def _with_timeout(
        self, call: Callable[[str], object], names: list[str], n_threads: int
    ) -> dict[str, object]:
        """Answers in threads; a client still working after ``timeout`` s is a TimeoutError."""
        # One thread per client when there is a timeout: a stuck client must not hold up
        # the others' start (the interpreter still waits for a stuck one at exit).
        pool = ThreadPoolExecutor(
            max_workers=len(names) if self.timeout is not None else n_threads,
            thread_name_prefix="fedforest-client",
        )
        futures = {name: pool.submit(call, name) for name in names}
        done, _ = wait(futures.values(), timeout=self.timeout)
        pool.shutdown(wait=False, cancel_futures=True)
        answers: dict[str, object] = {}
        for name, future in futures.items():
            if future in done:
                answers[name] = future.result()
            else:
                answers[name] = TimeoutError(
                    f"no answer within the federation's timeout of {self.timeout} s"
                )
        return answers
