"""numba's disk cache of fedforest's kernels: its staleness and what it holds.

Both functions read numba's cache internals (the cache file's source stamp and index),
which numba does not document; each does nothing harmful if they are not as expected.
:func:`cache_depends_on` makes a kernel's cache stale when a module it inlines from
changes (numba stamps a kernel with its own source file only); :func:`is_cached` tells
whether a kernel is cached for given types without loading it (``precompile``).
:data:`inner_kernel` compiles a kernel's helper without what only a Python call needs.
"""

from __future__ import annotations

import hashlib
from types import ModuleType
from typing import Any

import numba

__all__ = ["cache_depends_on", "inner_kernel", "is_cached"]

#: Decorator of an njit helper that only kernels call, never Python: compiled without
#: numba's Python and C entry points (``no_cpython_wrapper``, ``no_cfunc_wrapper``, as
#: numba's own ``@overload`` implementations are) and without a disk cache of its own
#: (the cache of each kernel calling it holds its code; numba cannot load a helper
#: without entry point from disk anyway). The entry point that unboxes each argument
#: from Python (a tuple of arrays: every array's fields) was about a third of a small
#: helper's compile CPU, paid by every helper on the first run. **Calling such a helper
#: from Python crashes the interpreter** (its entry point is null): only kernels may.
_NO_ENTRY: dict[str, Any] = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
inner_kernel: Any = numba.njit(nogil=True, **_NO_ENTRY)  # options numba's stubs omit


def cache_depends_on(kernel: Any, *modules: ModuleType) -> None:
    """Make numba's disk cache of ``kernel`` stale when one of ``modules`` changes too.

    numba stamps a cached kernel with its own source file only, but the machine code it
    keeps holds every njit function the kernel calls or inlines from other modules: after
    an edit there, a cached run would go on with the old code. The stamp becomes the
    kernel's own and the SHA-256 of each module's source (numba's own stamp is the source
    file's hash); it is compared when the index is read and stored when it is written.
    Nothing happens without a disk cache (or if numba's internals are not as expected).
    """
    try:
        cache_file = kernel._cache._cache_file
        stamps = [cache_file._source_stamp]
    except AttributeError:  # no disk cache (NUMBA_DISABLE_JIT) or other numba internals
        return
    for module in modules:
        with open(str(module.__file__), "rb") as fh:
            stamps.append(hashlib.sha256(fh.read()).digest())
    cache_file._source_stamp = tuple(stamps)


def is_cached(kernel: Any, args: tuple[Any, ...]) -> bool | None:
    """Whether numba's disk cache holds ``kernel`` for ``args`` (nothing is loaded).

    The same lookup as numba's own (the cache index's key: signature, target, bytecode,
    with the source file's stamp checked) without loading the machine code. ``None`` if
    the kernel is not cached to disk at all, or numba's cache internals are not as
    expected (another numba version).
    """
    try:
        cache = kernel._cache
        if not cache._enabled:  # nothing is cached: a second process would not help
            return None
        key = cache._index_key(args, kernel.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # numba internals changed: the listener still starts it when needed
        return None
