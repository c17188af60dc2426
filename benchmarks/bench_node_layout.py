"""What a node-contiguous layout of a client's rows could save its kernels (issue 14).

The client kernels (``left_stats_ranked``, ``left_increments_ranked``,
``sketch_pairs_ranked``) group a call's in-bag rows by node (a counting sort by slot), gather
each node's row indices, then each (node, feature) pair's values by row index
(``xx[k] = Xt[f, ii[k]]``). The alternative, as scikit-learn's splitter partitions its
samples: keep per tree the in-bag rows' values in node order, partitioned after each level,
so a pair's values are read in place. A child may draw any feature, so every column moves.

One client of ``bench_forest.py``'s fit (its rows: ``--rows`` / 10 clients; 20 features,
50 trees, bootstrap: distinct in-bag rows, counts as weights; 6 of the 20 features drawn
per node; levels 0-7, every node of at least 10 rows split at a random in-bag row's value
of a random feature). Per level, all trees, ``time.thread_time``, best of ``--repeats``:

- now: what the kernels do per call and the layout would remove (the counting sort, the
  rows' gather, each pair's values gathered), the values then summed (a sink);
- layout: the per-call read of each pair's values in place (the same sink; the sums are
  checked equal) and, per level, the stable partition of every column, the rows and the
  weights in node order;
- rows only: rows and weights kept partitioned (no counting sort a call), values still
  gathered by row index.

A level makes two such calls (Round A and B under ``"secure"``; the sketch and the
increments under ``"none"``). Not the library's code: the parts timed alone, bit-for-bit
the same values in the same order, to bound what the layout could save.

    python benchmarks/bench_node_layout.py --rows 100000
    python benchmarks/bench_node_layout.py --rows 1400
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

N_CLIENTS, N_FEATURES, N_TREES, DEPTH, MTRY, MIN_LEAF = 10, 20, 50, 8, 6, 5


@numba.njit
def _group_rows(slot, n, order, start):  # type: ignore[no-untyped-def]
    start[:] = 0
    for r in range(slot.shape[0]):
        if slot[r] >= 0:
            start[slot[r] + 1] += 1
    for i in range(n):
        start[i + 1] += start[i]
    fill = start[:-1].copy()
    for r in range(slot.shape[0]):
        s = slot[r]
        if s >= 0:
            order[fill[s]] = r
            fill[s] += 1


@numba.njit
def now_call(Xt, rows, slot, n, pair_off, pair_feat, order, start, ii, xx):  # type: ignore[no-untyped-def]
    """A call's grouping and gathers as the kernels make them; the values summed."""
    _group_rows(slot, n, order, start)
    acc = 0.0
    for s in range(n):
        a, c = start[s], start[s + 1] - start[s]
        for k in range(c):
            ii[k] = rows[order[a + k]]
        for p in range(pair_off[s], pair_off[s + 1]):
            xf = Xt[pair_feat[p]]
            for k in range(c):
                xx[k] = xf[ii[k]]
            for k in range(c):
                acc += xx[k]
    return acc


@numba.njit
def rows_call(Xt, rows_p, n, start, pair_off, pair_feat, xx):  # type: ignore[no-untyped-def]
    """Rows kept in node order: no grouping, each pair's values still gathered."""
    acc = 0.0
    for s in range(n):
        a, c = start[s], start[s + 1] - start[s]
        for p in range(pair_off[s], pair_off[s + 1]):
            xf = Xt[pair_feat[p]]
            for k in range(c):
                xx[k] = xf[rows_p[a + k]]
            for k in range(c):
                acc += xx[k]
    return acc


@numba.njit
def layout_call(Xp, n, start, pair_off, pair_feat):  # type: ignore[no-untyped-def]
    """Values kept in node order: each pair's read in place."""
    acc = 0.0
    for s in range(n):
        for p in range(pair_off[s], pair_off[s + 1]):
            xf = Xp[pair_feat[p]]
            for k in range(start[s], start[s + 1]):
                acc += xf[k]
    return acc


@numba.njit
def partition(Xp, rows_p, w_p, new_slot, n_new, start, Xq, rows_q, w_q):  # type: ignore[no-untyped-def]
    """Stable partition of positions by their new slot: columns, rows, weights."""
    start[:] = 0
    for r in range(new_slot.shape[0]):
        if new_slot[r] >= 0:
            start[new_slot[r] + 1] += 1
    for i in range(n_new):
        start[i + 1] += start[i]
    fill = start[:-1].copy()
    dest = np.empty(new_slot.shape[0], dtype=np.int64)
    for r in range(new_slot.shape[0]):
        s = new_slot[r]
        dest[r] = fill[s] if s >= 0 else -1
        if s >= 0:
            fill[s] += 1
    for r in range(new_slot.shape[0]):
        if dest[r] >= 0:
            rows_q[dest[r]] = rows_p[r]
            w_q[dest[r]] = w_p[r]
    for f in range(Xp.shape[0]):
        xp, xq = Xp[f], Xq[f]
        for r in range(new_slot.shape[0]):
            if dest[r] >= 0:
                xq[dest[r]] = xp[r]


def best_of(repeats: int, call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """The least thread CPU time of ``repeats`` calls ``call(*args)``, and its result."""
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.thread_time()
        out = call(*args)
        best = min(best, time.thread_time() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="training rows, all clients")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs; the best is reported")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and draws")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    n_rows = args.rows // N_CLIENTS
    Xt = np.ascontiguousarray(rng.normal(size=(N_FEATURES, n_rows)))
    ms = np.zeros((DEPTH, 5))  # now, layout read, partition, rows-only read, its partition
    for _ in range(N_TREES):
        count = np.bincount(rng.integers(0, n_rows, n_rows), minlength=n_rows)
        rows = np.flatnonzero(count)
        w = count[rows].astype(np.float64)
        slot, n = np.zeros(rows.size, dtype=np.int64), 1
        Xp, rows_p, w_p = np.ascontiguousarray(Xt[:, rows]), rows.copy(), w.copy()
        start_p = np.array([0, rows.size])
        for level in range(DEPTH):
            feats = np.concatenate([rng.choice(N_FEATURES, MTRY, replace=False) for _ in range(n)])
            pair_off = np.arange(0, MTRY * n + 1, MTRY)
            order, start = np.empty(rows.size, np.int64), np.zeros(n + 1, np.int64)
            ii, xx = np.empty(rows.size, np.int64), np.empty(rows.size)
            r = args.repeats
            t_now, a_now = best_of(
                r, now_call, Xt, rows, slot, n, pair_off, feats, order, start, ii, xx
            )
            t_lay, a_lay = best_of(r, layout_call, Xp, n, start_p, pair_off, feats)
            t_rows, a_rows = best_of(r, rows_call, Xt, rows_p, n, start_p, pair_off, feats, xx)
            assert a_now == a_lay == a_rows, "the same values in the same order"
            # The next level: nodes of at least 2 MIN_LEAF rows split at a random row's value.
            f_split = rng.integers(0, N_FEATURES, n)
            thr, left = np.zeros(n), np.full(n, -1)
            n_new = 0
            for s in range(n):
                mine = np.flatnonzero(slot == s)
                if mine.size >= 2 * MIN_LEAF:
                    thr[s], left[s] = Xt[f_split[s], rows[rng.choice(mine)]], n_new
                    n_new += 2
            new_slot = np.full(rows.size, -1, np.int64)
            on = np.flatnonzero((slot >= 0) & (left[np.maximum(slot, 0)] >= 0))
            go_right = Xt[f_split[slot[on]], rows[on]] > thr[slot[on]]
            new_slot[on] = left[slot[on]] + go_right
            position = np.empty(n_rows, np.int64)
            position[rows] = np.arange(rows.size)
            new_slot_p = new_slot[position[rows_p[: start_p[-1]]]]
            Xq, rows_q, w_q = np.empty_like(Xp), np.empty_like(rows_p), np.empty_like(w_p)
            start_q = np.zeros(n_new + 1, np.int64)
            rest = (rows_p, w_p, new_slot_p, n_new, start_q)
            t_prow = best_of(r, partition, Xp[:0], *rest, Xq[:0], rows_q, w_q)[0]
            t_part = best_of(r, partition, Xp, *rest, Xq, rows_q, w_q)[0]
            ms[level] += 1e3 * np.array([t_now, t_lay, t_part, t_rows, t_prow])
            Xp, rows_p, w_p, start_p = Xq, rows_q, w_q, start_q
            slot, n = new_slot, n_new
            if n == 0:
                break
    print(
        f"one client of {args.rows:,} rows ({n_rows:,} rows, {N_TREES} trees, {MTRY} of "
        f"{N_FEATURES} features a node); ms per level, all trees, best of {args.repeats}"
    )
    print("level | now a call | layout: read a call, partition a level | rows only: read, part.")
    for level, (now, lay, part_, rows_read, prow) in enumerate(ms):
        print(f"{level} | {now:.2f} | {lay:.2f}, {part_:.2f} | {rows_read:.2f}, {prow:.2f}")
    now, lay = 2 * ms[:, 0].sum(), 2 * ms[:, 1].sum() + ms[:, 2].sum()
    rows_only = 2 * ms[:, 3].sum() + ms[:, 4].sum()
    print(
        f"a fit (two calls a level): now {now:.1f} ms a client, layout {lay:.1f} ms "
        f"({now - lay:+.1f} saved), rows only {rows_only:.1f} ms ({now - rows_only:+.1f})"
    )
    print(f"layout's memory: {2 * Xp.nbytes * N_TREES / 1e6:.0f} MB a client (two buffers)")


if __name__ == "__main__":
    main()
