"""DaskFederation: the grower's rounds as calls to Dask actors that hold the clients."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from distributed import Client as DaskClient
from distributed import Future, get_client
from distributed.actor import Actor

from ...federated.client import Client
from ...federated.codec import error_from_header
from ...federated.federation import Federation, Fold, replies_or_failure, without_client
from ...federated.protocol import Message
from ._actor import (
    ShardActor,
    Spec,
    build_here,
    client_from_factory,
    client_waiting,
    forget_waiting,
)
from ._wire import ERROR, HELLO, from_bytes, to_bytes

__all__ = ["DaskFederation", "default_client"]

logger = logging.getLogger(__name__)


class DaskFederation(Federation):
    """Clients as Dask actors, each on the worker that holds its rows.

    Every round is one actor call per addressed client, all in flight at once; requests
    and replies travel as bytes in fedforest's frame format and the server decodes and
    validates every reply (it never unpickles what a client sends). A client keeps its
    per-fit state (bootstrap rows, node slots, codes, masking keys) in its actor between
    rounds. A worker that dies, or an actor that fails, fails its clients' round with a
    :class:`~fedforest.federated.federation.ClientFailure` naming them, which
    ``on_client_failure="drop"`` turns into training on without them.

    Build one from Dask collections with :meth:`from_collections` (the estimators'
    ``fit`` does that for Dask input), or from factories each worker runs.

    Parameters
    ----------
    factories : mapping of str to callable
        Client name -> a picklable function of no argument that returns the
        :class:`~fedforest.Client` of that name, run on the worker (e.g.
        ``functools.partial(read_my_shard, "/data/site-a.parquet")``).
    client : distributed.Client, optional
        The Dask client to use; default: the current one (``distributed.get_client()``).
    workers : mapping of str to str, optional
        Client name -> the address (or name) of the worker that must hold it; clients
        not named go where the scheduler puts them.
    timeout : float or None, default=600.0
        Seconds a round waits for the actors; an actor that has not answered by then
        fails the round (a ``TimeoutError`` in the failure). None waits for ever.
    start_timeout : float, default=600.0
        Seconds to wait for the actors to be built (the clients to read their rows).

    Attributes
    ----------
    bytes_sent, bytes_received : int
        Frame bytes sent to and received from the actors over the federation's life.
    round_seconds : list of float
        Wall-clock duration of each round, from the first call to the last reply.
    placement : dict of str to str
        Client name -> address of the worker holding its actor.
    """

    def __init__(
        self,
        factories: Mapping[str, Callable[[], Client]],
        *,
        client: DaskClient | None = None,
        workers: Mapping[str, str] | None = None,
        timeout: float | None = 600.0,
        start_timeout: float = 600.0,
    ) -> None:
        workers = dict(workers or {})
        unknown = sorted(set(workers) - set(factories))
        if unknown:
            raise ValueError(f"workers names client {unknown[0]!r}, which has no factory.")
        specs: dict[str, Spec] = {
            str(name): (workers.get(name), client_from_factory, (factory,))
            for name, factory in factories.items()
        }
        self._start(specs, client, timeout, start_timeout)

    @classmethod
    def from_collections(
        cls,
        X: Any,
        y: Any,
        *,
        client_ids: Any = None,
        partitions_as: str = "partition",
        categorical_features: Sequence[Any] | None = None,
        client: DaskClient | None = None,
        timeout: float | None = 600.0,
        start_timeout: float = 600.0,
    ) -> DaskFederation:
        """Clients from the partitions of a Dask DataFrame or Array (rows stay on workers).

        Parameters
        ----------
        X : dask DataFrame or dask Array, shape (n_samples, n_features)
            The features; a DataFrame keeps its column names and ``category`` columns.
        y : dask Series, one-column DataFrame or 1-D dask Array, shape (n_samples,)
            The targets, partitioned as ``X`` (the same number of partitions and rows).
        client_ids : dask Series or 1-D dask Array, optional
            One client label per row, partitioned as ``X``: one client per distinct label,
            named ``str(label)``, holding its rows in their original order (so the forest
            equals ``fit(X, y, client_ids=...)`` on the same rows in memory). Rows of a
            label move, worker to worker, to the worker that holds most of them.
        partitions_as : {"partition", "worker"}, default="partition"
            Without ``client_ids``: one client per partition (named ``"0"``, ``"1"``, ...
            by partition number) or one per worker holding partitions (named
            ``"worker-<name>"``, its partitions in order; which partitions a worker holds
            is the scheduler's choice, so that forest depends on the placement).
        categorical_features : list of column names or indices, optional
            As :class:`~fedforest.Client`'s.
        client : distributed.Client, optional
            The Dask client whose workers hold the partitions; default: the current one
            (``distributed.get_client()``).
        timeout : float or None, default=600.0
            Seconds a round waits for the actors; an actor that has not answered by then
            fails the round (a ``TimeoutError`` in the failure). None waits for ever.
        start_timeout : float, default=600.0
            Seconds to wait for the actors to be built (each client from its rows).

        Returns
        -------
        DaskFederation
            One client per label, partition or worker (as above), each an actor on the
            worker that holds its rows.
        """
        from ._collections import client_specs  # the collections half needs dask's collections

        dask_client = default_client(client)
        specs = client_specs(dask_client, X, y, client_ids, partitions_as, categorical_features)
        fed = cls.__new__(cls)
        fed._start(specs, dask_client, timeout, start_timeout)
        return fed

    # ------------------------------------------------------------------ set-up
    def _start(
        self,
        specs: Mapping[str, Spec],
        client: DaskClient | None,
        timeout: float | None,
        start_timeout: float,
    ) -> None:
        if not specs:
            raise ValueError("DaskFederation needs at least one client.")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}.")
        if not start_timeout > 0:
            raise ValueError(f"start_timeout must be positive seconds, got {start_timeout!r}.")
        self.dask_client = default_client(client)
        _check_workers(self.dask_client, specs)
        self.timeout = timeout
        self.bytes_sent = 0
        self.bytes_received = 0
        self.round_seconds: list[float] = []
        self._futures: dict[str, Future] = {}
        self._actors: dict[str, Any] = {}
        tokens: dict[str, str] = {}
        try:
            # A client pinned to a worker (its partitions', or workers=) is built there by a
            # plain task first: Dask keeps an actor task's inputs for the actor's life, and
            # a task's until every task that depends on it is gone, so the actor must not
            # depend on the build either (it takes the client by token, once built).
            built = {}
            for name, (worker, build, args) in sorted(specs.items()):
                if worker is not None:
                    tokens[name] = f"fedforest-build-{name}-{uuid.uuid4().hex}"
                    built[name] = self.dask_client.submit(
                        build_here,
                        tokens[name],
                        build,
                        args,
                        pure=False,
                        key=tokens[name],
                        workers=[worker],
                        allow_other_workers=False,
                    )
            self._futures = dict(built)
            deadline = time.monotonic() + start_timeout
            self._wait_built(specs, start_timeout, deadline)
            for name, (worker, build, args) in sorted(specs.items()):
                if name in tokens:
                    build, args = client_waiting, (tokens[name],)
                self._futures[name] = self.dask_client.submit(
                    ShardActor,
                    name,
                    build,
                    args,
                    actor=True,
                    pure=False,
                    key=f"fedforest-client-{name}-{uuid.uuid4().hex}",
                    workers=None if worker is None else [worker],
                    allow_other_workers=False,
                )
            self._wait_built(specs, start_timeout, deadline)
            self.placement = _placement(self.dask_client, self._futures)
            # The handles are made here, not fetched: fetching one makes its worker open a
            # client of its own, which then holds up the worker's shutdown.
            with self.dask_client.as_current():
                self._actors = {
                    name: _DirectActor(ShardActor, self.placement[name], future.key)
                    for name, future in self._futures.items()
                }
            self._hello(start_timeout)
        except BaseException:
            if tokens:
                self._forget(list(tokens.values()))
            self.close()
            raise

    def _forget(self, tokens: list[str]) -> None:
        """Drop, on every worker, the clients built for actors that were never built."""
        try:
            self.dask_client.run(forget_waiting, tokens)
        except Exception:  # noqa: BLE001 - best effort: a worker may be gone
            logger.debug("fedforest: could not drop the clients built", exc_info=True)

    def _wait_built(self, specs: Mapping[str, Spec], start_timeout: float, deadline: float) -> None:
        """Until every actor is built; a client pinned to a worker address that left fails.

        Its actor can then never be built (Dask keeps it for that address, which a
        restarted worker does not take): before, the wait ran out ``start_timeout`` (600 s
        by default). A worker pinned by name may come back under it: that one is waited for.
        """
        while True:
            # Polled, not distributed.wait's TimeoutError: its traceback holds the futures in
            # a reference cycle, and so the partitions on the workers, until a collection.
            check = time.monotonic() + max(min(1.0, deadline - time.monotonic()), 0.001)
            while not (done := all(f.done() for f in self._futures.values())):
                if time.monotonic() >= check:
                    break
                time.sleep(0.01)
            if done:
                return
            pending = sorted(n for n, f in self._futures.items() if f.status == "pending")
            pinned = {n: specs[n][0] for n in pending if "://" in str(specs[n][0] or "")}
            if pinned:
                alive = set(self.dask_client.scheduler_info(n_workers=-1).get("workers", {}))
                gone = {n: w for n, w in pinned.items() if w not in alive}
                if gone:
                    name, worker = next(iter(gone.items()))
                    raise ConnectionError(
                        f"The Dask worker {worker} that must build client {name!r} left the "
                        f"cluster before its actor was built (clients waiting on a worker that "
                        f"left: {sorted(gone)}); it was pinned there (its partitions, or "
                        "workers=): build the federation again."
                    )
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"The actors of clients {pending} were not built within start_timeout="
                    f"{start_timeout} s: their factories are slow or their workers busy or "
                    "gone; raise start_timeout or check the workers."
                )

    def _hello(self, timeout: float) -> None:
        """Every actor's client was built; else one ValueError naming each that was not."""
        calls = {name: actor.hello() for name, actor in self._actors.items()}
        # What went wrong -> the clients it went wrong for: a column every partition has
        # (a datetime one, say) was the same sentence once per client, 100 for 100.
        problems: dict[str, list[str]] = {}
        self.n_samples: dict[str, int] = {}
        for name, call in calls.items():
            answer = from_bytes(call.result(timeout=timeout), name)
            if answer.kind == ERROR:
                said = without_client(str(error_from_header(answer.header, name)), name)
                problems.setdefault(said.removesuffix("."), []).append(repr(name))
            elif answer.kind == HELLO:
                self.n_samples[name] = int(answer.header["n_samples"])
            else:
                problems.setdefault(f"it answered a {answer.kind!r} message", []).append(repr(name))
        if problems:
            said = "; ".join(f"{', '.join(names)}: {text}" for text, names in problems.items())
            raise ValueError(f"Dask clients could not be built: {said}.")

    # ------------------------------------------------------------------ Federation
    @property
    def client_names(self) -> list[str]:
        """Client names, sorted."""
        self._check_open()
        return sorted(self._actors)

    def _check_open(self) -> None:
        if not self._actors:
            raise RuntimeError("This DaskFederation is closed: build a new one to train again.")
        if self.dask_client.status in _CLOSED:  # not a lost worker: the actors died with it
            raise RuntimeError(_CLOSED_CLIENT)

    def send_and_receive(
        self, requests: dict[str, Message], round_index: int
    ) -> dict[str, Message]:
        """One actor call per named client, all in flight at once; their replies by name."""
        return self._round(requests, round_index, _keep)

    def send_and_fold(
        self, requests: dict[str, Message], round_index: int, fold: Fold
    ) -> dict[str, Message]:
        """As :meth:`send_and_receive`, each reply folded as it arrives and then let go.

        The masked sums add each reply in as it comes: the server holds one or two
        replies at a time, not the round's (at 1M rows in 10 clients, the last Round B's
        replies were about 0.2 GB). A subclass that overrides :meth:`send_and_receive`
        (to watch or change rounds) has every round go through it, folded once it returns.
        """
        if type(self).send_and_receive is not DaskFederation.send_and_receive:
            return super().send_and_fold(requests, round_index, fold)
        return self._round(requests, round_index, fold)

    def _round(
        self, requests: dict[str, Message], round_index: int, fold: Fold
    ) -> dict[str, Message]:
        self._check_open()
        start = time.perf_counter()
        frames: dict[int, bytearray] = {}
        calls: dict[str, Any] = {}
        answers: dict[str, Message | Exception] = {}
        for name, msg in requests.items():
            frame = frames.setdefault(id(msg), to_bytes(msg))  # a broadcast is encoded once
            self.bytes_sent += len(frame)
            try:
                calls[name] = self._actors[name].handle(frame)
            except Exception as exc:  # noqa: BLE001 - the worker holding it is gone
                answers[name] = _lost(name, exc)
        del frames
        answers.update(self._collect(calls, fold))
        self.round_seconds.append(time.perf_counter() - start)
        return replies_or_failure(answers, requests, round_index)

    def _collect(self, calls: dict[str, Any], fold: Fold) -> dict[str, Message | Exception]:
        """Every call's answer, folded as it comes; a client whose worker left fails at once.

        A call to a dead worker would wait for Dask's connect timeout (30 s); the scheduler
        tells much sooner that the worker, and so its actor, is gone.
        """
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        answers: dict[str, Message | Exception] = {}
        pause = 0.001
        while calls:
            for name in list(calls):
                if calls[name].done():  # popped: its frame is let go once folded
                    answer = self._answer(name, calls.pop(name))
                    answers[name] = fold(name, answer) if isinstance(answer, Message) else answer
                    del answer
                elif self._futures[name].status != "finished":
                    answers[name] = _lost(name, RuntimeError(self._futures[name].status))
                    del calls[name]
            if calls and deadline is not None and time.monotonic() >= deadline:
                late = f"no answer within the federation's timeout of {self.timeout} s"
                answers.update({name: TimeoutError(late) for name in calls})
                break
            if calls:
                time.sleep(pause)
                pause = min(2 * pause, 0.02)
        return answers

    def _answer(self, name: str, call: Any) -> Message | Exception:
        """The reply of a finished call, or the exception that says why there is none."""
        try:
            frame = call.result()
        except Exception as exc:  # noqa: BLE001 - the call could not reach the worker
            return _lost(name, exc)
        if not isinstance(frame, bytes | bytearray | memoryview):
            return TypeError(f"its actor answered a {type(frame).__name__}, not bytes")
        self.bytes_received += len(frame)
        try:
            # Decoded in place: Dask hands the reply over as a bytearray of its own.
            reply = from_bytes(frame, name, owned=True)
        except ValueError as exc:  # a malformed reply: this client's failure
            return exc
        if reply.kind == ERROR:  # a ValueError is invalid data: a ClientDataError
            return error_from_header(reply.header, name)
        return reply

    # ------------------------------------------------------------------ end
    def close(self) -> None:
        """Drop the actors (and the rows they hold); the federation cannot be used after."""
        if self.dask_client.status in _CLOSED:  # the actors went with it; nothing to cancel
            self._actors = {}
            self._futures = {}
            return
        live = [(n, a) for n, a in self._actors.items() if self._futures[n].status == "finished"]
        for name, actor in live:
            try:
                frame = actor.finish().result(timeout=10)
            except Exception:  # noqa: BLE001 - best effort: the actors are released anyway
                logger.debug("fedforest: an actor did not confirm the end", exc_info=True)
                continue
            if frame is not None:  # its error frame: what client_errors lets travel
                said = from_bytes(frame, name).header.get("error")
                logger.debug("fedforest: client %r failed to end its fit: %s", name, said)
        if self._futures:
            keys = [future.key for future in self._futures.values()]
            self.dask_client.cancel(list(self._futures.values()))
            self._wait_forgotten(keys)
        self._actors = {}
        self._futures = {}

    def _wait_forgotten(self, keys: list[Any], timeout: float = 10.0) -> None:
        """Wait (at most ``timeout`` s) until the scheduler has forgotten ``keys``.

        ``cancel`` only queues its message; a ``distributed.Client`` connected in the
        meantime could get the scheduler's report of it with its first message, which
        distributed asserts is alone (seen in a test on 2026-12-05). Asks the scheduler's
        ``get_task_status`` handler (distributed 2026.8.0): no code runs there.
        """
        deadline = time.monotonic() + timeout
        ask = self.dask_client.scheduler.get_task_status
        while True:
            try:
                status = self.dask_client.sync(ask, keys=keys)
            except Exception:  # noqa: BLE001 - best effort, as the cancellation itself
                logger.debug("fedforest: the scheduler did not say what it holds", exc_info=True)
                return
            if all(state is None for state in status.values()):
                return
            if time.monotonic() >= deadline:
                logger.debug("fedforest: the scheduler still holds %s after close()", status)
                return
            time.sleep(0.01)

    def __enter__(self) -> DaskFederation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        n_workers = len(set(getattr(self, "placement", {}).values()))
        return f"DaskFederation({len(self._actors)} clients on {n_workers} workers)"


def _keep(name: str, reply: Message) -> Message:
    """The fold of :meth:`DaskFederation.send_and_receive`: the reply as it is."""
    return reply


_CLOSED = ("closing", "closed")  # distributed.Client.status once close() was called
# Said to both callers: ``fit`` on Dask collections builds (and closes) a federation its
# user never sees, so "close the federation first" told them of nothing they held.
_CLOSED_CLIENT = (
    "The Dask client was closed while fedforest was using it, and the clients' actors "
    "(with the rows they held) went with it: keep the Dask client open until `fit` on Dask "
    "collections returns, or until you close a DaskFederation you built; then train again "
    "with an open Dask client (a DaskFederation you built must be built again)."
)


class _DirectActor(Actor):
    """An actor handle that calls its worker directly, not through the scheduler's proxy.

    Dask routes actor calls through the scheduler unless the client was made with
    ``direct_to_workers=True``; fedforest's frames go straight to the worker instead (the
    scheduler carries no protocol traffic). Relies on ``Actor``'s ``_client`` and
    ``_address`` (distributed 2026.8.0, pinned).
    """

    @property
    def _worker_rpc(self) -> Any:
        return self._client.rpc(self._address)


def _placement(client: DaskClient, futures: Mapping[str, Future]) -> dict[str, str]:
    """Client name -> address of the worker its actor lives on (its build error if none)."""
    who = client.who_has(list(futures.values()))
    out = {}
    for name, future in futures.items():
        if future.status == "error":
            future.result()  # the actor's constructor never raises: a Dask error
        if not who.get(future.key):
            raise RuntimeError(f"The actor of client {name!r} is on no worker ({future.status}).")
        out[name] = sorted(who[future.key])[0]
    return out


def _check_workers(client: DaskClient, specs: Mapping[str, Spec]) -> None:
    """A ValueError if the cluster has no worker, or a client is pinned to no worker of it.

    Either would otherwise leave the actors unplaced until ``start_timeout`` (600 s by
    default) runs out, with an empty ``TimeoutError``.
    """
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    if not workers:
        raise ValueError(
            f"The Dask cluster at {client.scheduler.address} has no workers: start some "
            "(e.g. LocalCluster(n_workers=2), or `dask worker <scheduler address>`) or wait "
            "for them with client.wait_for_workers(n) before building the federation."
        )
    known = set(workers) | {str(info.get("name")) for info in workers.values()}
    for name, (worker, _, _) in sorted(specs.items()):
        if worker is not None and str(worker) not in known:
            raise ValueError(
                f"Client {name!r} is pinned to worker {worker!r}, which is not in the Dask "
                f"cluster (its workers: {sorted(workers)})."
            )


def _lost(name: str, exc: BaseException) -> ConnectionError:
    """The failure of a client whose worker is gone (or could not be reached)."""
    return ConnectionError(
        f"the Dask worker holding client {name!r} was lost or unreachable "
        f"({type(exc).__name__}: {exc})"
    )


def default_client(client: DaskClient | None) -> DaskClient:
    """``client``, or the current Dask client; a ValueError saying how to start one."""
    if client is not None:
        if not isinstance(client, DaskClient):
            raise ValueError(f"client must be a distributed.Client, got {type(client).__name__}.")
        return client
    try:
        return get_client()
    except ValueError as exc:
        raise ValueError(
            "fedforest's Dask transport needs a distributed Client (its clients are actors "
            "on workers): start one first, e.g. distributed.Client(distributed.LocalCluster())"
            " or distributed.Client('tcp://scheduler:8786'); a Client made with "
            "set_as_default=False is used inside `with client.as_current():`."
        ) from exc
