"""numba's disk cache written by one process at a time (several processes share it).

numba saves a kernel's new compiled version (an overload) by reading the cache index,
picking the first free data file name, writing the index, then the data file, with no
lock (numba 0.68, ``numba.core.caching.IndexDataCacheFile.save``). Two processes that
compile two versions of one kernel at once on a cold cache (pytest's two workers,
``GridSearchCV(n_jobs=2)``, Dask workers or Flower SuperNodes on one machine) can both
pick the same file name: the index then sends one version's argument types to the other
version's machine code, and the next process that loads it crashes (a segmentation fault;
numba issues 4807 and 10128). :func:`serialize_cache_writes` makes each such save hold an
exclusive ``flock`` on a lock file beside the index, so the second process reads the
index the first one wrote and picks another name. Loading takes no lock: files are
replaced atomically and a name, once in the index, keeps its version.

It reads numba's internals, which numba does not document: if they are not as expected
(another numba version, a platform without ``fcntl``), nothing is changed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["serialize_cache_writes"]

_LOCKED = "_fedforest_locked"


@contextlib.contextmanager
def _exclusive(path: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created), or no lock where it cannot be had."""
    try:
        import fcntl

        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except (ImportError, OSError):  # no fcntl (Windows), or a read-only cache directory
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def serialize_cache_writes() -> None:
    """Wrap numba's cache saves in a lock beside each index (once per process)."""
    try:
        from numba.core.caching import IndexDataCacheFile
    except ImportError:
        return
    save = getattr(IndexDataCacheFile, "save", None)
    if save is None or getattr(save, _LOCKED, False):
        return

    def locked_save(self: Any, key: Any, data: Any) -> None:
        index = getattr(self, "_index_path", None)
        if not isinstance(index, str):
            save(self, key, data)
            return
        with _exclusive(index + ".lock"):
            save(self, key, data)  # reads the index inside the lock

    setattr(locked_save, _LOCKED, True)
    locked_save.__doc__ = save.__doc__
    locked_save.__wrapped__ = save  # type: ignore[attr-defined]
    IndexDataCacheFile.save = locked_save  # type: ignore[method-assign]
