"""``np.searchsorted`` of one value in a segment of an array, for the server's kernels.

numba compiles its own ``np.searchsorted`` inside every kernel that calls it, once per
signature (array type, value type, side): the first run pays for each. These two small
kernels give the same answer and compile once per process, whoever calls them.

``search_left(a, lo, hi, v)`` is ``lo + np.searchsorted(a[lo:hi], v, side="left")`` and
``search_right`` the same with ``side="right"``, NaN included (NumPy's order: NaN after
every number, as numba's own does): the same bisection as numba's (and NumPy's) for one
value, step for step, so the same index even where the segment is not sorted.
"""

from __future__ import annotations

import numba

__all__ = ["search_left", "search_right"]


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
