"""Per-pair segments of one flat array: the secure server's state between levels is held so.

:class:`PairSegments` (one segment per (slot, feature) pair of a level, found by the key
``slot * d + feature``), the ``gather_rows`` kernel that copies segments (and its NumPy
twin), and the offsets and index ranges of consecutive segments. Moved out of
``secure_grids.py`` (which re-exports the names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "PairSegments",
    "gather_rows",
    "gather_rows_numpy",
    "offsets",
    "ranges",
]


#: :meth:`PairSegments.find` looks keys up in a table over ``0..max(key)`` when that range
#: holds at most this many entries a key (plus :data:`TABLE_MIN`), else searches them sorted.
TABLE_SPREAD = 8
TABLE_MIN = 4096


@dataclass
class PairSegments:
    """Per (slot, feature) pair of a level, a segment of one flat array.

    Segment ``i`` (``values[off[i]:off[i + 1]]``) belongs to the pair with key ``key[i]``
    (``slot * d + feature``; keys are unique).
    """

    key: NDArray[np.int64]
    off: NDArray[np.int64]
    values: NDArray[np.float64]
    # Made by the first find (a level's releases are looked up at every deeper level, most
    # segments built never): each key's segment in a table over 0..max(key) (-1 past it),
    # unless the keys are few in that range; then the keys' order and the keys in it.
    _table: NDArray[np.int64] | None = field(default=None, init=False, repr=False, compare=False)
    _order: NDArray[np.int64] | None = field(default=None, init=False, repr=False, compare=False)
    _sorted: NDArray[np.int64] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def empty(cls, width: int = 0) -> PairSegments:
        """No segment (values of ``width`` columns; 0: one-dimensional)."""
        values = np.zeros((0, width)) if width else np.zeros(0)
        return cls(np.zeros(0, np.int64), np.zeros(1, np.int64), values)

    @classmethod
    def of(cls, arrays: list[NDArray[np.float64]]) -> PairSegments:
        """One segment per array, keyed by its index."""
        off = offsets([a.size for a in arrays])
        values = np.concatenate(arrays) if arrays else np.zeros(0)
        return cls(np.arange(len(arrays), dtype=np.int64), off, values)

    def find(self, keys: NDArray[np.int64]) -> NDArray[np.int64]:
        """The segment of each key, -1 where there is none."""
        if not self.key.size:
            return np.full(keys.size, -1, dtype=np.int64)
        if self._table is None and self._order is None:
            top = int(self.key.max()) + 1
            if self.key.min() >= 0 and top <= TABLE_SPREAD * self.key.size + TABLE_MIN:
                table = np.full(top + 1, -1, dtype=np.int64)
                table[self.key] = np.arange(self.key.size)
                if np.array_equal(table[self.key], np.arange(self.key.size)):
                    self._table = table  # else a key repeats: the sorted search, as before
            if self._table is None:
                self._order = np.argsort(self.key, kind="stable")
                self._sorted = self.key[self._order]
        if self._table is not None:
            top = self._table.size - 1
            return self._table[np.where((keys >= 0) & (keys < top), keys, top)]
        assert self._order is not None and self._sorted is not None
        order = self._order
        at = order[np.minimum(np.searchsorted(self._sorted, keys), order.size - 1)]
        return np.where(self.key[at] == keys, at, -1).astype(np.int64)

    def take(self, seg: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[Any]]:
        """The segments ``seg`` (``-1``: an empty one), one after the other, and offsets.

        Where ``seg`` asks for every segment in order (a secure level's Round B asks so for
        the ancestors' releases), the rows are ``values`` itself, not a copy: read only.
        """
        found = seg >= 0
        if not found.any():
            return np.zeros(seg.size + 1, dtype=np.int64), self.values[:0]
        start = np.where(found, self.off[np.maximum(seg, 0)], 0)
        end = np.where(found, self.off[np.maximum(seg, 0) + 1], 0)
        out_off = offsets(end - start)
        if int(out_off[-1]) == self.values.shape[0] and _every_segment(seg[found], self.off):
            return out_off, self.values
        if not self.values.flags.c_contiguous:  # columns kept apart: NumPy's gather
            return out_off, self.values[ranges(start, end)]
        out = np.empty((int(out_off[-1]),) + self.values.shape[1:], dtype=self.values.dtype)
        gather_rows(_as_2d(self.values), start, end, out_off, _as_2d(out))
        return out_off, out


def _every_segment(seg: NDArray[np.int64], off: NDArray[np.int64]) -> bool:
    """Whether ``seg`` are the segments with rows (of offsets ``off``), each once, in order."""
    full = np.flatnonzero(np.diff(off) > 0)
    rows = seg[np.diff(off)[seg] > 0]
    return bool(rows.size == full.size and np.array_equal(rows, full))


def _as_2d(a: NDArray[Any]) -> NDArray[Any]:
    """A contiguous view with one column per value (rows of a 1-D array: one each)."""
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))


@numba.njit(nogil=True, cache=True)
def gather_rows(src, start, end, out_off, out):  # type: ignore[no-untyped-def]
    """Rows ``src[start[i]:end[i]]`` into ``out[out_off[i]:]``, for each ``i`` with rows.

    Pairs without rows (``end <= start``) leave ``out`` as it is: two calls with the pairs
    split between two sources fill one output.
    """
    for i in range(start.shape[0]):
        o = out_off[i]
        for r in range(start[i], end[i]):
            for c in range(src.shape[1]):
                out[o, c] = src[r, c]
            o += 1


def gather_rows_numpy(
    src: NDArray[Any],
    start: NDArray[np.int64],
    end: NDArray[np.int64],
    out_off: NDArray[np.int64],
    out: NDArray[Any],
) -> None:
    """NumPy twin of :func:`gather_rows`."""
    n = np.maximum(end - start, 0)
    out[ranges(out_off[:-1], out_off[:-1] + n)] = src[ranges(start, start + n)]


def ranges(start: NDArray[np.int64], end: NDArray[np.int64]) -> NDArray[np.int64]:
    """``np.concatenate([np.arange(a, b) for a, b in zip(start, end)])``, vectorised."""
    n = np.asarray(end - start, dtype=np.int64)
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.cumsum(n) - n
    return np.arange(total, dtype=np.int64) - np.repeat(first - start, n)


def offsets(counts: ArrayLike) -> NDArray[np.int64]:
    """Offsets of consecutive segments of ``counts`` entries (``off[0] == 0``)."""
    counts = np.asarray(counts)
    off = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off
