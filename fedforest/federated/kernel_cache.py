"""numba's disk cache of fedforest's kernels: its staleness and what it holds.

Both functions read numba's cache internals (the cache file's source stamp and index),
which numba does not document; each does nothing harmful if they are not as expected.
:func:`cache_depends_on` makes a kernel's cache stale when a module it inlines from
changes (numba stamps a kernel with its own source file only); :func:`is_cached` tells
whether a kernel is cached for given types without loading it (``precompile``).
:data:`inner_kernel` compiles a kernel's helper without what only a Python call needs;
:func:`borrowed` gives a kernel views of its arrays that numba does not reference-count.
"""

from __future__ import annotations

import hashlib
from types import ModuleType
from typing import Any

import numba
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["borrowed", "cache_depends_on", "inner_kernel", "is_cached", "keep_alive"]

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


@intrinsic
def borrowed(typingctx, arr):  # type: ignore[no-untyped-def]
    """In a kernel, a view of array ``arr`` that numba does not reference-count.

    numba counts references to an array's memory: each array a helper is given (where
    LLVM does not inline it: most helpers with loops and branches), each slice or row
    taken, each name bound, costs an atomic increment and later a decrement (a call to
    ``NRT_incref`` / ``NRT_decref``, 20 to 40 cycles a pair). In kernels that call
    helpers per node, pair or candidate those were a third of the time (perf on
    ``left_stats_ranked`` at 100,000 rows, 2026-12-06). The view returned has the same
    data, shape and strides and no owner (a null ``meminfo``): numba skips the counting
    for it and everything sliced from it, and LLVM drops the calls.

    **Only for memory that outlives every use of the view**: a kernel's arguments (its
    caller holds them for the call), or an array the kernel keeps alive under another
    name until after the view's last use (numba frees an array after the last use of the
    name that owns it). Never return a view, or anything sliced from it, to Python, nor
    store it where it outlives the call: NumPy would get memory nobody owns.
    """
    if not isinstance(arr, numba.types.Array):
        return None

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        src = context.make_array(arr)(context, builder, value=args[0])
        view = context.make_array(arr)(context, builder)
        for name in ("nitems", "itemsize", "data", "shape", "strides"):
            setattr(view, name, getattr(src, name))
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()

    return arr(arr), codegen


@intrinsic
def keep_alive(typingctx, owners):  # type: ignore[no-untyped-def]
    """In a kernel, nothing: a use of ``owners`` (an array or a tuple of arrays).

    numba frees an array after the last use of the name that owns it; called after the
    last use of :func:`borrowed` views of them, it keeps their memory until then.
    """

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        return context.get_dummy_value()

    return numba.types.none(owners), codegen


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
