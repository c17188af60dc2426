"""Scratch memory a thread reuses across levels, rounds and the clients it answers for.

A fit at 100,000 rows spent a large share of its CPU faulting in the pages of fresh
per-level arrays (numpy asks for huge pages from 4 MB; docs/scale.md, "transparent huge
pages"): a level's arrays are larger than the level before's, so every level's were new
memory, and in one process every client's too. :func:`scratch` hands out a view of a
buffer kept per thread and name, grown (with room) when a level needs more: its pages are
faulted in once per thread, not once per client and level.

A scratch view is valid until the same thread asks for the same name again. It must
never leave the call that asked for it: never in a reply (a recording federation keeps
every reply; the server's sums must not change under it), never in state kept across
rounds. The caller copies what it hands over (into a fresh array).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from numpy.typing import DTypeLike, NDArray

__all__ = ["ROOM", "release", "scratch"]

#: A buffer made anew holds this many times the items asked for (levels grow about 1.5 to
#: 2 times; room never written costs no memory).
ROOM = 2

_LOCK = threading.Lock()
#: Per thread (its ident), per name: the buffer.
_BUFFERS: dict[int, dict[str, NDArray[Any]]] = {}


def scratch(name: str, n: int, dtype: DTypeLike) -> NDArray[Any]:
    """``n`` items of ``dtype`` (1-D, uninitialised): this thread's buffer ``name``.

    The buffer is kept for the next call with the same name from this thread; a longer
    request (or another dtype) replaces it with a new one, ``ROOM`` times as long.
    """
    dtype = np.dtype(dtype)
    ident = threading.get_ident()
    with _LOCK:
        mine = _BUFFERS.setdefault(ident, {})
        buf = mine.get(name)
        if buf is None or buf.dtype != dtype or buf.size < n:
            buf = np.empty(max(ROOM * n, 1), dtype=dtype)
            mine[name] = buf
    return buf[:n]


def release() -> None:
    """Drop every thread's buffers (at a fit's end: their memory goes back to the system).

    A thread still using a view keeps its buffer alive until it lets the view go.
    """
    with _LOCK:
        _BUFFERS.clear()
