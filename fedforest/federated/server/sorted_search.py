"""``np.searchsorted`` of one value in a segment of an array, for the server's kernels.

numba compiles its own ``np.searchsorted`` inside every kernel that calls it, once per
signature (array type, value type, side): the first run pays for each. These two small
kernels give the same answer and compile once per process, whoever calls them.

``search_left(a, lo, hi, v)`` is ``lo + np.searchsorted(a[lo:hi], v, side="left")`` and
``search_right`` the same with ``side="right"``, NaN included (NumPy's order: NaN after
every number, as numba's own does): the same bisection as numba's (and NumPy's) for one
value, step for step, so the same index even where the segment is not sorted.

``sort_floats(a)`` is ``a.sort()`` in a kernel (numba's quicksort, NaN last), ported
step for step for one float64 array: the same order of equal values (-0.0 and 0.0)
whatever the length. numba compiles its generic quicksort (several nested functions)
inside each caller: about 0.6 s of compile CPU on the first run.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernel_cache import inner_kernel

__all__ = ["search_left", "search_right", "sort_floats"]

#: numba's quicksort: an insertion sort below this many, and its stack of partitions.
_SMALL_QUICKSORT = 15
_MAX_STACK = 100


@numba.njit(nogil=True, cache=True)
def search_left(a, lo, hi, v):  # type: ignore[no-untyped-def]
    """The first index ``i`` in ``[lo, hi]`` with ``a[lo:i] < v`` and ``a[i:hi] >= v``.

    Parameters
    ----------
    a : ndarray of float64  # IN, ascending on ``[lo, hi)`` (NaN last)
    lo, hi : int  # IN
    v : float  # IN
    """
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        x = a[mid]
        if x < v or (v != v and x == x):  # x before v, NaN last
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(nogil=True, cache=True)
def search_right(a, lo, hi, v):  # type: ignore[no-untyped-def]
    """The first index ``i`` in ``[lo, hi]`` with ``a[lo:i] <= v`` and ``a[i:hi] > v``.

    Parameters
    ----------
    a : ndarray of float64  # IN, ascending on ``[lo, hi)`` (NaN last)
    lo, hi : int  # IN
    v : float  # IN
    """
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if v != v or a[mid] <= v:  # a[mid] not after v, NaN last
            lo = mid + 1
        else:
            hi = mid
    return lo


@inner_kernel
def _before(a, b):  # type: ignore[no-untyped-def]
    """``a < b``, NaN after every number (numba's ``lt_floats``)."""
    return a < b or (b != b and a == a)


@numba.njit(nogil=True, cache=True)
def sort_floats(a):  # type: ignore[no-untyped-def]
    """``a.sort()`` as numba does it (``numba/misc/quicksort.py``), in place.

    Parameters
    ----------
    a : ndarray of float64, shape (n,)  # IN/OUT, ascending (NaN last) on return
    """
    stack = np.empty((_MAX_STACK, 2), dtype=np.int64)
    if a.size < 2:
        return
    stack[0, 0], stack[0, 1] = 0, a.size - 1
    n = 1
    while n > 0:
        n -= 1
        low, high = stack[n, 0], stack[n, 1]
        while high - low >= _SMALL_QUICKSORT:  # partition around a median of three
            mid = (low + high) >> 1
            if _before(a[mid], a[low]):
                a[low], a[mid] = a[mid], a[low]
            if _before(a[high], a[mid]):
                a[high], a[mid] = a[mid], a[high]
            if _before(a[mid], a[low]):
                a[low], a[mid] = a[mid], a[low]
            pivot = a[mid]
            a[high], a[mid] = a[mid], a[high]
            i, j = low, high - 1
            while True:
                while i < high and _before(a[i], pivot):
                    i += 1
                while j >= low and _before(pivot, a[j]):
                    j -= 1
                if i >= j:
                    break
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
            a[i], a[high] = a[high], a[i]
            if high - i > i - low:  # push the larger side, go on with the smaller
                if high > i:
                    stack[n, 0], stack[n, 1] = i + 1, high
                    n += 1
                high = i - 1
            else:
                if i > low:
                    stack[n, 0], stack[n, 1] = low, i - 1
                    n += 1
                low = i + 1
        for i in range(low + 1, high + 1):  # an insertion sort of a[low:high + 1]
            v = a[i]
            j = i
            while j > low and _before(v, a[j - 1]):
                a[j] = a[j - 1]
                j -= 1
            a[j] = v
