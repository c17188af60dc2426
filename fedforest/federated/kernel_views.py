"""Views of a kernel's arrays that numba does not reference-count, and their owners' keep.

:func:`borrowed` and :func:`keep_alive` are numba intrinsics, usable only inside kernels.
Moved out of ``kernel_cache.py`` (numba's disk cache), a job of their own. A kernel that
uses them holds their code in its disk cache: ``kernel_cache.cache_depends_on(kernel,
kernel_views)`` makes it stale when this module changes.
"""

from __future__ import annotations

import numba
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["borrowed", "keep_alive"]


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
