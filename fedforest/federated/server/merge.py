"""Server side of the quantile sketches: their mixture-quantile merge into candidates.

Each sketch point stands for ``W_k / B`` of client ``k``'s node weight, so the points of
all clients describe the mixture CDF of the pooled node sample (Section 3.1 of the paper).
The candidates are its ``B - 1`` quantiles at levels ``b / B``, de-duplicated, and only
those below the node maximum (a threshold at the maximum sends nothing right). The
clients' local best thresholds join them (``merge_local_candidates``); the verification
mode's candidates are every midpoint (``midpoint_candidates``).
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from .. import kernel_views
from ..kernel_cache import cache_depends_on
from ..kernel_views import borrowed, keep_alive
from ..threads import thread_map
from .sketch_runs import SketchRuns, dense_runs

__all__ = [
    "merge_local_candidates",
    "merge_local_candidates_numpy",
    "merge_sketch_rows",
    "merge_sketch_runs",
    "merge_sketches",
    "midpoint_candidates",
    "mixture_quantiles",
    "mixture_quantiles_numpy",
    "mixture_quantiles_runs",
]

# scikit-learn does not split between values closer than this (``FEATURE_THRESHOLD``).
FEATURE_THRESHOLD = 1e-7


def merge_sketches(
    sketches: NDArray[np.float64],
    weights: NDArray[np.float64],
    n_bins: int,
    n_threads: int = 1,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Mixture-quantile merge of the clients' sketches into candidate thresholds.

    Parameters
    ----------
    sketches : ndarray of float64, shape (n_clients, n_pairs, B)
        NaN rows for clients with no weight in the node.
    weights : ndarray of float64, shape (n_clients, n_pairs)
        Each client's node weight ``W_k``.
    n_bins : int
        ``B``; at most ``B - 1`` candidates per pair.
    n_threads : int, default=1
        Threads over blocks of pairs (the kernel releases the GIL).

    Returns
    -------
    cand_off : ndarray of int64, shape (n_pairs + 1,)
    cand : ndarray of float64, shape (n_candidates,)
        Sorted, distinct thresholds of pair ``p`` in ``cand[cand_off[p]:cand_off[p + 1]]``.
    """
    return merge_sketch_rows(*_as_rows(sketches), weights, n_bins, n_threads)


def _as_rows(sketches: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Sketches of shape (n_clients, n_pairs, B) as rows, with the (clients, pairs) index."""
    n_clients, n_pairs, n_bins = sketches.shape
    points = np.ascontiguousarray(sketches).reshape(n_clients * n_pairs, n_bins)
    return points, np.arange(n_clients * n_pairs, dtype=np.int64).reshape(n_clients, n_pairs)


#: Pairs per thread below which :func:`merge_sketch_runs` merges in one thread (a level
#: of a 2,000-row fit has 300 to 10,000 pairs, about 1-2 us each).
PARALLEL_PAIRS = 1024


def merge_sketch_rows(
    points: NDArray[np.float64],
    index: NDArray[np.int64],
    weights: NDArray[np.float64],
    n_bins: int,
    n_threads: int = 1,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`merge_sketches` with the sketches as rows of one array.

    ``index[k, p]`` is the row of ``points`` (shape (n_rows, B)) holding client ``k``'s
    sketch of pair ``p``, or -1: the server stacks only the sketches that arrived.
    """
    return merge_sketch_runs(dense_runs(points), index, weights, n_bins, n_threads)


def merge_sketch_runs(
    runs: SketchRuns,
    index: NDArray[np.int64],
    weights: NDArray[np.float64],
    n_bins: int,
    n_threads: int = 1,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`merge_sketch_rows` with the rows as runs of equal values (``SketchRuns``)."""
    n_pairs = index.shape[1]
    out = np.empty((n_pairs, max(n_bins - 1, 0)))
    counts = np.zeros(n_pairs, dtype=np.int64)
    n_parts = max(1, min(n_threads, n_pairs // PARALLEL_PAIRS))
    edges = np.linspace(0, n_pairs, n_parts + 1).astype(int)

    def run(k: int) -> None:
        lo, hi = edges[k], edges[k + 1]
        mixture_quantiles_runs(
            runs.values, runs.lengths, runs.row_off, n_bins,
            index[:, lo:hi], weights[:, lo:hi], out[lo:hi], counts[lo:hi],
        )  # fmt: skip

    thread_map(run, range(edges.size - 1), edges.size - 1)
    cand_off = np.zeros(n_pairs + 1, dtype=np.int64)
    np.cumsum(counts, out=cand_off[1:])
    return cand_off, out[np.arange(out.shape[1])[None, :] < counts[:, None]]


def mixture_quantiles(
    sketches: NDArray[np.float64],
    weights: NDArray[np.float64],
    out: NDArray[np.float64],
    counts: NDArray[np.int64],
) -> None:
    """:func:`mixture_quantiles_runs` on sketches of shape (n_clients, n_pairs, B)."""
    points, index = _as_rows(sketches)
    runs = dense_runs(points)
    n_bins = sketches.shape[2]
    mixture_quantiles_runs(*runs, n_bins, index, weights, out, counts)


@numba.njit(nogil=True, cache=True)
def mixture_quantiles_runs(rv_in, rl_in, row_off, n_bins, index, weights, out, counts):
    """Quantiles ``b / B`` (b = 1..B-1) of the clients' pooled sketch points, per pair.

    A point of client ``k`` weighs ``W_k / B``. Kept: distinct values below the node
    maximum (the largest sketch point), in increasing order. The points are taken in
    increasing order, equal ones by client then level (a stable sort of them, client
    after client); sorted sketch rows (as the server checks them) are merged as they
    are, others sorted (:func:`_quantiles_sorted`: the same order, the same sums).

    Parameters
    ----------
    rv_in : ndarray of float64, shape (n_runs,)  # IN: the sketch rows' runs (SketchRuns)
    rl_in : ndarray of int64, shape (n_runs,)  # IN: their lengths
    row_off : ndarray of int64, shape (n_rows + 1,)  # IN: row ``r``: runs
        ``row_off[r]:row_off[r + 1]``, ``B`` points in all
    n_bins : int  # IN: ``B``
    index : ndarray of int64, shape (n_clients, n_pairs)  # IN: row of each sketch, or -1
    weights : ndarray of float64, shape (n_clients, n_pairs)  # IN
    out : ndarray of float64, shape (n_pairs, B - 1)  # OUT: first ``counts[p]`` entries
    counts : ndarray of int64, shape (n_pairs,)  # OUT
    """
    n_clients, n_pairs = index.shape
    # Whole client weights and B a power of two: every point weighs a multiple of 1 / B
    # and every running sum is exact, so a pair's runs can be taken whole.
    dyadic = n_bins > 0 and (n_bins & (n_bins - 1)) == 0
    hv = np.empty(n_clients)  # scratch of _quantiles_dyadic
    pos = np.empty(n_clients, dtype=np.int64)
    endp = np.empty(n_clients, dtype=np.int64)
    dense = np.empty((n_clients, n_bins))  # the live rows of an unsorted pair
    pw = np.empty(n_clients)
    # Each live client's runs (value, length); client j owns runs hd[j]..end[j] - 1.
    rv = np.empty(n_clients * n_bins)
    rl = np.empty(n_clients * n_bins, dtype=np.int64)
    hd = np.empty(n_clients, dtype=np.int64)
    end = np.empty(n_clients, dtype=np.int64)
    act = np.empty(n_clients, dtype=np.int64)  # clients with runs left, in client order
    # Views numba does not reference-count (kernel_views.borrowed): the arguments, and
    # the scratch kept alive to the end; the helpers take them per pair and run.
    scratch = (hv, pos, endp, dense, pw, rv, rl, hd, end, act)
    hv, pos, endp, dense = borrowed(hv), borrowed(pos), borrowed(endp), borrowed(dense)
    pw, rv, rl, hd = borrowed(pw), borrowed(rv), borrowed(rl), borrowed(hd)
    end, act, rv_in, rl_in = borrowed(end), borrowed(act), borrowed(rv_in), borrowed(rl_in)
    row_off, index, weights = borrowed(row_off), borrowed(index), borrowed(weights)
    out, counts = borrowed(out), borrowed(counts)
    for p in range(n_pairs):
        if dyadic and _quantiles_dyadic(
            rv_in, rl_in, row_off, n_bins, index, weights, out, counts, p, hv, pos, endp, pw
        ):
            continue
        n_live = 0
        total = 0.0
        vmax = -np.inf
        ordered = True
        nr = 0
        for k in range(n_clients):
            wk = weights[k, p]
            r = index[k, p]
            if wk <= 0.0 or r < 0 or np.isnan(rv_in[row_off[r]]):
                continue
            total += wk
            pw[n_live] = wk / n_bins
            lo, hi = row_off[r], row_off[r + 1]
            vmax = max(vmax, rv_in[hi - 1])
            hd[n_live] = nr
            prev = rv_in[lo]
            for j in range(lo, hi):
                v = rv_in[j]
                if not v >= prev:  # unsorted, or NaN
                    ordered = False
                rv[nr] = v
                rl[nr] = rl_in[j]
                nr += 1
                prev = v
            end[n_live] = nr
            act[n_live] = n_live
            n_live += 1
        counts[p] = 0
        if n_live == 0:
            continue
        if not ordered:
            for j in range(n_live):
                b = 0
                for e in range(hd[j], end[j]):
                    for _ in range(rl[e]):
                        dense[j, b] = rv[e]
                        b += 1
            _quantiles_sorted(dense[:n_live], pw[:n_live], total, vmax, out[p], counts, p)
            continue
        # A stable k-way merge of the runs: the smallest head, ties to the first client
        # (a branch-free scan of the clients with runs left); a run is taken point by
        # point, so the running sum adds the same weights in the same order as a sort.
        n_act = n_live
        cur = _smallest_run(rv, hd, act, n_act)
        run_left = rl[hd[cur]] - 1  # points of the run after the current one
        w = pw[cur]
        m = n_live * n_bins
        i = 0
        cum = w
        c = 0
        for q in range(n_bins - 1):
            level = total * (q + 1) / n_bins * (1.0 - 1e-12)
            while cum < level and i < m - 1:
                if run_left > 0:
                    t = 0  # points taken from the run
                    while t < run_left and cum < level:
                        cum += w
                        t += 1
                    run_left -= t
                    i += t
                else:
                    hd[cur] += 1
                    if hd[cur] == end[cur]:  # no runs left: out of the active list
                        a = 0
                        while act[a] != cur:
                            a += 1
                        for e in range(a, n_act - 1):
                            act[e] = act[e + 1]
                        n_act -= 1
                    cur = _smallest_run(rv, hd, act, n_act)
                    run_left = rl[hd[cur]] - 1
                    w = pw[cur]
                    i += 1
                    cum += w
            v = rv[hd[cur]]
            if v < vmax and (c == 0 or v != out[p, c - 1]):
                out[p, c] = v
                c += 1
        counts[p] = c
    keep_alive(scratch)


# Its cached code holds borrowed's (kernel_views): an edit there makes it stale.
cache_depends_on(mixture_quantiles_runs, kernel_views)


#: Client weights up to this take :func:`_quantiles_dyadic` (sums of multiples of 1 / B
#: stay exact far beyond: B <= 2^16, 2^10 clients).
DYADIC_MAX = 2.0**26


@numba.njit(inline="always")
def _quantiles_dyadic(
    rv_in, rl_in, row_off, n_bins, index, weights, out, counts, p, hv, pos, endp, pw
):  # fmt: skip
    """:func:`mixture_quantiles_runs` of pair ``p`` where every running sum is exact.

    Taken when every live client's weight is whole (at most ``DYADIC_MAX``), ``B`` a power
    of two, and the live rows sorted and finite, their runs ``B`` points long; else
    ``False`` is returned and nothing written. Then each point weighs a multiple of
    ``1 / B``, every sum of them is exact, and adding a run's points one by one (as the
    general merge does) gives the same number as adding its length times its weight once:
    the same merge (smallest head first, ties to the first client), a run at a time,
    crosses each level in the same run and writes the same candidates, bit for bit.
    """
    n_clients = index.shape[0]
    n_live = 0
    total = 0.0
    vmax = -np.inf
    for k in range(n_clients):
        wk = weights[k, p]
        r = index[k, p]
        if wk <= 0.0 or r < 0 or np.isnan(rv_in[row_off[r]]):
            continue
        if not (wk <= DYADIC_MAX and wk == np.floor(wk)):
            return False
        lo, hi = row_off[r], row_off[r + 1]
        prev = rv_in[lo]
        n_pts = 0
        for j in range(lo, hi):
            v = rv_in[j]
            if not (v >= prev and v < np.inf and v > -np.inf):  # unsorted, NaN or infinite
                return False
            n_pts += rl_in[j]
            prev = v
        if n_pts != n_bins:
            return False
        total += wk
        vmax = max(vmax, prev)
        pw[n_live] = wk / n_bins
        pos[n_live] = lo
        endp[n_live] = hi
        hv[n_live] = rv_in[lo]
        n_live += 1
    counts[p] = 0
    if n_live == 0:
        return True
    inv = 1.0 / n_bins  # a power of two: x * inv is x / n_bins, bit for bit
    q = 0
    level = total * (q + 1) * inv * (1.0 - 1e-12)
    cum = 0.0
    c = 0
    left = n_live  # clients with runs left
    v = 0.0
    while left > 0 and q < n_bins - 1:
        best = 0  # the smallest head, ties to the first client (done ones hold +inf)
        bv = hv[0]
        for j in range(1, n_live):
            lt = hv[j] < bv
            best = j if lt else best
            bv = hv[j] if lt else bv
        e = pos[best]
        v = rv_in[e]
        cum += rl_in[e] * pw[best]
        while q < n_bins - 1 and cum >= level:
            if v < vmax and (c == 0 or v != out[p, c - 1]):
                out[p, c] = v
                c += 1
            q += 1
            level = total * (q + 1) * inv * (1.0 - 1e-12)
        e += 1
        pos[best] = e
        if e == endp[best]:
            hv[best] = np.inf
            left -= 1
        else:
            hv[best] = rv_in[e]
    for _ in range(q, n_bins - 1):  # past the last point (not reached: the sums are exact)
        if v < vmax and (c == 0 or v != out[p, c - 1]):
            out[p, c] = v
            c += 1
    counts[p] = c
    return True


@numba.njit(nogil=True, cache=True, inline="always")
def _smallest_run(rv, hd, act, n_act):
    """The active client whose next run is smallest (the first of equal ones)."""
    best = act[0]
    bv = rv[hd[best]]
    for e in range(1, n_act):
        j = act[e]
        v = rv[hd[j]]
        lt = v < bv
        best = j if lt else best
        bv = v if lt else bv
    return best


@numba.njit(nogil=True, cache=True)
def _quantiles_sorted(rows, pw_row, total, vmax, out_p, counts, p):
    """:func:`mixture_quantiles_runs` of one pair by a stable sort of its points."""
    n_live, n_bins = rows.shape
    m = n_live * n_bins
    vals = np.empty(m)
    pw = np.empty(m)
    for j in range(n_live):
        for b in range(n_bins):
            vals[j * n_bins + b] = rows[j, b]
            pw[j * n_bins + b] = pw_row[j]
    order = np.argsort(vals, kind="mergesort")
    i = 0
    cum = pw[order[0]]
    c = 0
    for q in range(n_bins - 1):
        level = total * (q + 1) / n_bins * (1.0 - 1e-12)
        while cum < level and i < m - 1:
            i += 1
            cum += pw[order[i]]
        v = vals[order[i]]
        if v < vmax and (c == 0 or v != out_p[c - 1]):
            out_p[c] = v
            c += 1
    counts[p] = c


def mixture_quantiles_numpy(
    sketches: NDArray[np.float64],
    weights: NDArray[np.float64],
    out: NDArray[np.float64],
    counts: NDArray[np.int64],
) -> None:
    """NumPy twin of :func:`mixture_quantiles`."""
    n_clients, n_pairs, b = sketches.shape
    for p in range(n_pairs):
        live = (weights[:, p] > 0) & ~np.isnan(sketches[:, p, 0])
        counts[p] = 0
        if not live.any():
            continue
        vals = sketches[live, p].ravel()
        pw = np.repeat(weights[live, p] / b, b)
        order = np.argsort(vals, kind="stable")
        cum = np.cumsum(pw[order])
        levels = weights[live, p].sum() * np.arange(1, b) / b * (1.0 - 1e-12)
        idx = np.minimum(np.searchsorted(cum, levels, side="left"), vals.size - 1)
        q = vals[order][idx]
        keep = q < sketches[live, p, b - 1].max()
        keep[1:] &= q[1:] != q[:-1]
        counts[p] = keep.sum()
        out[p, : counts[p]] = q[keep]


def midpoint_candidates(values: list[NDArray[np.float64]]) -> NDArray[np.float64]:
    """Every midpoint between consecutive distinct pooled values (verification mode).

    The clients' distinct node values are pooled and the thresholds computed exactly as
    scikit-learn does (``a / 2 + b / 2``, falling back to ``a`` when rounding reaches ``b``),
    skipping gaps scikit-learn would not split (``b <= a + 1e-7``).
    """
    pooled = np.unique(np.concatenate(values)) if values else np.empty(0)
    a, b = pooled[:-1], pooled[1:]
    mid = a / 2.0 + b / 2.0
    mid = np.where((mid == b) | np.isinf(mid), a, mid)
    return np.asarray(mid[b > a + FEATURE_THRESHOLD], dtype=np.float64)


@numba.njit(nogil=True, cache=True)
def merge_local_candidates(cand_off, cand, local, limit, out_off, out):
    """Add the clients' local best thresholds to each pair's candidates.

    Per pair, the distinct local thresholds (NaN: none) join the sorted, distinct
    candidates; when more than ``limit`` distinct ones arrive, ``limit`` of them evenly
    spaced in sorted order are kept, so a pair never gains more than ``limit`` candidates.

    Parameters
    ----------
    cand_off : ndarray of int64, shape (n_pairs + 1,)  # IN
    cand : ndarray of float64, shape (n_cand,)  # IN: sorted and distinct per pair
    local : ndarray of float64, shape (n_clients, n_pairs)  # IN
    limit : int  # IN
    out_off : ndarray of int64, shape (n_pairs + 1,)  # OUT
    out : ndarray of float64, shape (n_cand + n_pairs * limit,)  # OUT: first
        ``out_off[-1]`` entries used
    """
    n_clients, n_pairs = local.shape
    props = np.empty(n_clients)
    out_off[0] = 0
    for p in range(n_pairs):
        m = 0
        for k in range(n_clients):
            v = local[k, p]
            if not np.isnan(v):
                props[m] = v
                m += 1
        if m < 15:  # in place, as numba's np.sort orders so few (an insertion sort)
            for i in range(1, m):
                v = props[i]
                j = i
                while j > 0 and v < props[j - 1]:
                    props[j] = props[j - 1]
                    j -= 1
                props[j] = v
        else:
            props[:m] = np.sort(props[:m])
        n_u = 0  # distinct, in place
        for i in range(m):
            if n_u == 0 or props[i] != props[n_u - 1]:
                props[n_u] = props[i]
                n_u += 1
        take = min(n_u, limit)
        a, b = cand_off[p], cand_off[p + 1]
        o = out_off[p]
        i, j = a, 0  # merge two sorted lists, dropping repeats
        pj = 0.0
        while i < b or j < take:
            if j < take:
                pj = props[j] if take == n_u else props[(j * (n_u - 1)) // max(take - 1, 1)]
            if i < b and (j >= take or cand[i] <= pj):
                v = cand[i]
                i += 1
            else:
                v = pj
                j += 1
            if o == out_off[p] or v != out[o - 1]:
                out[o] = v
                o += 1
        out_off[p + 1] = o


def merge_local_candidates_numpy(
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    local: NDArray[np.float64],
    limit: int,
    out_off: NDArray[np.int64],
    out: NDArray[np.float64],
) -> None:
    """NumPy twin of :func:`merge_local_candidates`."""
    out_off[0] = 0
    for p in range(local.shape[1]):
        props = np.unique(local[:, p][~np.isnan(local[:, p])])
        if props.size > limit:
            props = props[(np.arange(limit) * (props.size - 1)) // max(limit - 1, 1)]
        merged = np.unique(np.concatenate([cand[cand_off[p] : cand_off[p + 1]], props]))
        out[out_off[p] : out_off[p] + merged.size] = merged
        out_off[p + 1] = out_off[p] + merged.size
