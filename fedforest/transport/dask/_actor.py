"""The Dask actor that holds one fedforest client on a worker, and how it is built there.

The actor answers the server with bytes only (:mod:`._wire`): every failure on the
worker, invalid data included, becomes an ``error`` frame saying what went wrong, so the
server never receives (or unpickles) a client's exception. What the frame says is
:mod:`fedforest.federated.client_errors`' choice: a refusal of fedforest's own keeps its
text, anything else sends its type name and step (its traceback logged on the worker).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...federated.client import Client
from ...federated.client_errors import error_header
from ...federated.protocol import Message
from ._wire import ERROR, HELLO, from_bytes, to_bytes

__all__ = [
    "ShardActor",
    "Spec",
    "build_here",
    "client_from_factory",
    "client_from_pieces",
    "client_waiting",
    "forget_waiting",
    "select_rows",
]

#: What builds one client on a worker: (worker address or None, build, its arguments).
Spec = tuple[str | None, Callable[..., Client], tuple[Any, ...]]


class ShardActor:
    """One client living on the worker that holds its rows; its state stays between rounds.

    Parameters
    ----------
    name : str
        The client's name (it seeds the client's bootstrap).
    build : callable
        Run on the worker: ``build(*args)`` returns the :class:`~fedforest.Client`.
    args : tuple
        Its arguments; Dask has replaced any futures in them by their data, on this worker.
    """

    def __init__(self, name: str, build: Callable[..., Client], args: Sequence[Any]) -> None:
        self.name = name
        self.client: Client | None = None
        self.error: Message | None = None
        try:
            client = build(*args)
            if not isinstance(client, Client):
                raise TypeError(f"its factory returned a {type(client).__name__}, not a Client")
            if client.name != name:
                raise ValueError(
                    f"its factory built a client named {client.name!r}; the federation "
                    f"names it {name!r} (the name seeds the bootstrap: make them equal)"
                )
            client.n_threads = _worker_threads()
            self.client = client
        except Exception as exc:  # noqa: BLE001 - reported to the server as a frame
            self.error = _error(exc, "building its client", name)

    def hello(self) -> bytearray:
        """The client's name and row count, or why it could not be built."""
        if self.error is not None:
            return to_bytes(self.error)
        assert self.client is not None
        return to_bytes(Message(HELLO, {"name": self.name, "n_samples": self.client.n_samples}))

    def handle(self, request: bytes) -> bytearray:
        """Answer one protocol message (a frame) with a frame; never raises."""
        step = "reading the request"
        try:
            if self.client is None:
                raise RuntimeError(f"client {self.name!r} was never built")
            message = from_bytes(request, "the server")
            step = message.kind
            return to_bytes(self.client.handle(message))
        except Exception as exc:  # noqa: BLE001 - reported to the server as a frame
            return to_bytes(_error(exc, step, self.name))

    def finish(self) -> bytearray | None:
        """Drop the per-fit state (the fit is over); the rows stay. Never raises.

        A failure comes back as :meth:`handle`'s do, an error frame (not the exception,
        whose text Dask would carry to the server whole); None when it went well.
        """
        try:
            if self.client is not None:
                self.client.finish()
        except Exception as exc:  # noqa: BLE001 - reported to the server as a frame
            return to_bytes(_error(exc, "finish", self.name))
        return None


def _error(exc: BaseException, step: str, name: str) -> Message:
    """An error frame: its type and the text ``client_errors`` allows (refusals' own)."""
    return Message(ERROR, error_header(exc, step, name))


def _worker_threads() -> int:
    """Threads of this worker: its actors run one at a time, each may use them all."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError):
        return 1


def select_rows(x: Any, y: Any, ids: Any, label: Any) -> tuple[Any, Any]:
    """The rows of one partition whose client label is ``label`` (run where it lives)."""
    mask = np.asarray(ids) == label
    if isinstance(x, pd.DataFrame):
        return x.iloc[np.flatnonzero(mask)], np.asarray(y)[mask]
    return np.asarray(x)[mask], np.asarray(y)[mask]


def client_from_pieces(
    name: str, pieces: Sequence[tuple[Any, Any]], categorical_features: Sequence[Any] | None
) -> Client:
    """A client of ``(X, y)`` pieces (partitions, or their rows of one label), in order."""
    xs = [x for x, _ in pieces]
    frames = [x for x in xs if isinstance(x, pd.DataFrame)]
    if frames and len(frames) != len(xs):
        raise ValueError(f"Client {name!r}: X mixes DataFrame and array partitions.")
    if len(xs) == 1:
        X: Any = xs[0]
    elif frames:
        X = pd.concat(frames, axis=0)
    else:
        X = np.concatenate([np.asarray(x) for x in xs], axis=0)
    y = np.concatenate([np.asarray(v).reshape(-1) for _, v in pieces])
    return Client(X, y, name=name, categorical_features=categorical_features)


#: Clients built on this worker by :func:`build_here`, each waiting for its actor (token ->
#: the client, or the exception its build raised).
_WAITING: dict[str, Client | Exception] = {}


def build_here(token: str, build: Callable[..., Client], args: Sequence[Any]) -> None:
    """Build a client on this worker, for its actor to take (:func:`client_waiting`).

    Run as a plain task, not in the actor's constructor: Dask keeps an actor task's inputs
    on its worker for as long as the actor lives, so the partitions a client copies would
    stay there beside its copy (168 MB at 1M rows x 20 features); a plain task's inputs
    are let go once it is done and no future holds them.
    """
    try:
        _WAITING[token] = build(*args)
    except Exception as exc:  # noqa: BLE001 - the actor reports it, as its own build's
        _WAITING[token] = exc


def client_waiting(token: str) -> Client:
    """The client :func:`build_here` left under ``token`` on this worker (it has run)."""
    found = _WAITING.pop(token)
    if isinstance(found, Exception):
        raise found
    return found


def forget_waiting(tokens: Sequence[str]) -> None:
    """Drop the clients whose actors were never built (the federation failed to start)."""
    for token in tokens:
        _WAITING.pop(token, None)


def client_from_factory(factory: Callable[[], Client]) -> Client:
    """A client of a factory run on the worker (it reads the worker's own file, say)."""
    return factory()
