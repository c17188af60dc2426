"""Client-side routing: a tree's in-bag rows moved to the children of last level's splits.

The kernel (``nogil``, cached) has a NumPy twin with the same signature and result;
``tests/test_kernels.py`` checks they agree. The per-tree state ``rows`` / ``slot`` is
:mod:`~fedforest.federated.client_kernels`'.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["route_rows", "route_rows_numpy"]


@numba.njit(nogil=True, cache=True)
def route_rows(  # type: ignore[no-untyped-def]
    Xt, rows, slot, feature, threshold, left, right, set_off, set_code, set_side, missing_left
):
    """Move rows to the children of last level's splits, in place.

    Parameters
    ----------
    Xt : ndarray of float64, shape (n_columns, n_samples)  # IN: column-major values; set
        features hold codes, and the last row the client's own index when H is split on
    rows : ndarray of int32, shape (n_inbag,)  # IN
    slot : ndarray of int32, shape (n_inbag,)  # IN/OUT: previous slot -> new slot
    feature : ndarray of int32, shape (n_prev_slots,)  # IN: -1 when the node became a leaf
    threshold : ndarray of float64, shape (n_prev_slots,)  # IN
    left, right : ndarray of int32, shape (n_prev_slots,)  # IN: new slots, -1 for a leaf child
    set_off : ndarray of int64, shape (n_prev_slots + 1,)  # IN: set split codes of slot s in
        ``set_code[set_off[s]:set_off[s + 1]]`` (empty: numeric split)
    set_code : ndarray of int32  # IN
    set_side : ndarray of int8  # IN: 0 left, 1 right
    missing_left : ndarray of uint8, shape (n_prev_slots,)  # IN: where a missing value
        (+inf) goes at a numeric split: 1 left, 0 right
    """
    # Branch-free in the usual case (a numeric split, a known value): the side is a select
    # (a data-dependent branch there mispredicts half the time); a missing value or a set
    # split then overrides it (those decide the side whatever the comparison says).
    sets = False
    for s in range(feature.shape[0]):
        sets |= set_off[s + 1] > set_off[s]
    for r in range(rows.shape[0]):
        s = slot[r]
        if s < 0:
            continue
        f = feature[s]
        if f < 0:
            slot[r] = -1
            continue
        x = Xt[f, rows[r]]
        slot[r] = right[s] if x > threshold[s] else left[s]
        if x == np.inf:
            slot[r] = right[s] if missing_left[s] == 0 else left[s]
        if sets and set_off[s + 1] > set_off[s]:
            go_right = False  # a training row always has a known code; left is a safe default
            for k in range(set_off[s], set_off[s + 1]):
                if set_code[k] == int(x):
                    go_right = set_side[k] == 1
            slot[r] = right[s] if go_right else left[s]


def route_rows_numpy(
    Xt: NDArray[np.float64],
    rows: NDArray[np.int32],
    slot: NDArray[np.int32],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    left: NDArray[np.int32],
    right: NDArray[np.int32],
    set_off: NDArray[np.int64],
    set_code: NDArray[np.int32],
    set_side: NDArray[np.int8],
    missing_left: NDArray[np.uint8],
) -> None:
    """NumPy twin of :func:`route_rows`."""
    active = np.flatnonzero(slot >= 0)
    s = slot[active]
    f = feature[s]
    split = f >= 0
    x = np.zeros(active.size)
    x[split] = Xt[f[split], rows[active[split]]]
    go_right = x > threshold[s]
    gone = x == np.inf
    go_right[gone] = missing_left[s[gone]] == 0
    for node in np.unique(s[split]):
        lo, hi = set_off[node], set_off[node + 1]
        if hi > lo:
            mine = s == node
            rights = set_code[lo:hi][set_side[lo:hi] == 1]
            go_right[mine] = np.isin(x[mine].astype(np.int64), rights)
    slot[active] = np.where(split, np.where(go_right, right[s], left[s]), -1)
