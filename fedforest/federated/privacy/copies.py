"""Columns that order the rows alike are fitted as one under ``privacy="secure"``.

Two numeric columns whose rows sort alike -- a copy, a change of unit (kg and lb,
Celsius and Fahrenheit), a logarithm, any increasing or decreasing transform, and a
coarsening (a flag ``age >= 65``, a rounded copy) -- cut a node's rows into *nested*
sets: its sum below ``e`` on one column and below ``e'`` on the other differ by the rows
between, however far apart each column's own thresholds are. The rules on released sums
(``server/secure_cousins.py``, ``secure_derived.py``) work column by column, so a copy
of a column gave the server sums over single rows (one exact target;
docs/privacy-findings.md, "Copies of a column").

Nesting is a matter of order: two columns nest where no pair of rows is *discordant*
(one higher on the first column, lower on the second; rows tied on either column count
neither way). The moments round adds, per column pair, each client's rate of
concordant less discordant pairs and of pairs ordered on both, times its rows; per
column, the rate of its pairs not tied; the same for the pairs' indicators of a missing
value (:func:`order_sums`): the server sees their sums over the clients. Columns are
taken from the finest (fewest ties) on; one whose pooled rate of disorder with a kept
column is at most :data:`COPY_DISORDER` (discordant pairs, or concordant ones for a
decreasing pair), and whose order that column explains (of its ordered pairs, at most
:data:`COPY_UNEXPLAINED` tied on the kept column: it is nearly a monotone function of
it), is fitted as that column (:func:`representatives`): where the server draws it
for a node, it asks for the kept column's candidates
(:func:`fitted_as_one`), so no sum on it is ever released. The draws are
scikit-learn's as before; for an exact transform the trees' partitions are the same, for
a coarsening the finer column offers every split the coarse one did. A kept column keeps
the columns less alike than that (a chain of gradually changing columns keeps one
every few).

A categorical column that bins a numeric one (age bands beside age) nests the same way
(its groups' sums against the numeric column's): per categorical and numeric column,
each client orders its categories by their mean value of the numeric one and the pair's
rates are taken in that order; a categorical column alike with a numeric one is fitted
as that one's kept column.

Columns in order that neither explains (one-hot columns of one category: disjoint
sets, which leave a category's rows at a node) are not merged, which would lose the
categories' splits; :func:`nested_pairs` gives them, and the columns whose missing
values nest, to :func:`nested_apart` (Round B), which keeps their candidates
at one node ``m`` rows apart. Two categorical columns one of which groups the other's
levels (a code and its chapter) are never asked at one node together
(:func:`dependent_categories`, :func:`one_of_each`). Not covered: columns less alike
still nest now and then in a small node, and any of these relations across nodes
(measured in the findings).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numba
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from .rules import MISSING_SPLIT

__all__ = [
    "COPY_DISORDER",
    "COPY_MERGE",
    "COPY_UNEXPLAINED",
    "MIN_ORDERED",
    "ORDER_FRAC_BITS",
    "ORDER_ROWS",
    "check_order_sums",
    "dependent_categories",
    "one_of_each",
    "fitted_as_one",
    "nested_apart",
    "nested_pairs",
    "order_categories",
    "order_sums",
    "representatives",
]

#: Two columns whose pooled rate of discordant pairs (among the pairs ordered on both) is
#: at most this are in order (Kendall's tau of 0.8): at one node their candidates stay
#: ``m`` rows apart (:func:`nested_apart`); a categorical column in order with a numeric
#: one (explained by it: below) is fitted as that column.
COPY_DISORDER = 0.1

#: A numeric column whose rate of discordant pairs with a kept numeric column is at most
#: this (and whose order that column explains) is fitted as that column (Kendall's tau of
#: 0.99: a copy, a change of unit, a rounding or a flag of it, nearly exactly); one more
#: loosely in order keeps its own splits, its candidates apart from the other's.
COPY_MERGE = 1e-4

#: ... and whose ordered pairs that column leaves tied are at most this part of them (the
#: column explains its order: a flag of a column is fitted as the column; one-hot columns
#: of one category, in order but none a function of another, are not merged).
COPY_UNEXPLAINED = 0.1

#: A pair is judged on pairs of rows it orders on both columns in at least this part of
#: the pairs (weighted by rows); rarer evidence (two rarely missing columns) is none.
MIN_ORDERED = 0.005

#: Fractional bits of a client's rows times a rate (a sum over clients, exact to 2^-24).
ORDER_FRAC_BITS = 24

#: A client compares the pairs of at most this many of its rows (evenly spaced), and of
#: no fewer than the next for many columns.
ORDER_ROWS = 1_000
MIN_ORDER_ROWS = 30

#: A category takes part in a client's order against a numeric column from this many of
#: its rows (one of a few rows is in order with any column).
MIN_CATEGORY_ROWS = 5


def order_sums(
    x: NDArray[np.float64], n_rows: int, cats: Sequence[NDArray[Any]] = ()
) -> NDArray[np.float64]:
    """A client's order statistics of its columns, times its rows.

    ``x``: its rows of the grid's ``p`` numeric columns (a missing value, not finite, is
    tied with every row); ``cats``: its raw values of ``q`` categorical columns. The
    pairs of at most :data:`ORDER_ROWS` rows (fewer for many columns), evenly spaced.
    Per numeric pair ``i < j`` (row after row of the upper triangle): the rate of the
    pairs of rows ordered on both, concordant less discordant (``(C - D) / P``, ``P`` the
    pairs), then the rate ordered on both (``(C + D) / P``);
    per numeric column the rate of pairs it orders; per categorical column and numeric
    one (row after row) the two rates of the pair, the categories' order being that of
    their mean value of the numeric one (:func:`_category_ranks`): first every
    ``(C - D) / P``, then every ``(C + D) / P``, then every rate of pairs in different
    categories; per numeric pair, the two rates of their indicators of a missing value;
    last, per categorical pair, :func:`_category_pairs` (over all of its rows). Each
    times ``n_rows``; shape ``(2 p (p - 1) + p + 3 q p + 2 q (q - 1),)``.
    """
    n, p = x.shape
    q = len(cats)
    width = p * p + q * p
    # Many columns compare fewer rows: about n^2 (p^2 + q p) / 2 <= 1e8 multiply-adds, and
    # at least MIN_ORDER_ROWS (an exact copy has no discordant pair among any rows).
    limit = min(ORDER_ROWS, max(MIN_ORDER_ROWS, int(14_142 // max(np.sqrt(width), 1.0))))
    rows = np.linspace(0, n - 1, limit).astype(np.int64) if n > limit else np.arange(n)
    codes = [pd.factorize(pd.Series(c, dtype=object), use_na_sentinel=True)[0] for c in cats]
    ranked = [_category_ranks(c, x[:, a]) for c in codes for a in range(p)]
    paired = np.column_stack([r[rows] for r in ranked]) if ranked else np.zeros((rows.size, 0))
    x = x[rows]
    n = rows.size
    cat_pairs = _category_pairs(codes) * float(n_rows)
    if n < 2:
        return np.concatenate([np.zeros(2 * p * (p - 1) + p + 3 * q * p), cat_pairs])
    upper = np.triu_indices(p, 1)
    signed = np.zeros((p, p))  # sum over pairs of sign(a) sign(b): C - D
    ordered = np.zeros((p, p))  # of |sign(a) sign(b)|: C + D
    cat_signed, cat_ordered, cat_own = np.zeros(q * p), np.zeros(q * p), np.zeros(q * p)
    m_signed, m_ordered = np.zeros((p, p)), np.zeros((p, p))  # the missing indicators'
    known, known_c = np.isfinite(x), np.isfinite(paired)
    gaps = bool((~known).any())
    filled, filled_c = np.where(known, x, 0.0), np.where(known_c, paired, 0.0)
    for i in range(n - 1):  # row i against the rows after it: (n - 1 - i, p) a step
        # float32: whole sums of at most n^2 / 2 < 2^24 pairs stay exact, BLAS twice as fast
        s = (np.sign(filled[i + 1 :] - filled[i]) * (known[i + 1 :] & known[i])).astype(np.float32)
        signed += s.T @ s
        a = np.abs(s)
        ordered += a.T @ a
        if q and p:  # each categorical column against each numeric one (its own order)
            sc = np.sign(filled_c[i + 1 :] - filled_c[i]) * (known_c[i + 1 :] & known_c[i])
            sc = sc.astype(np.float32).reshape(-1, q, p)
            cat_signed += np.einsum("mqp,mp->qp", sc, s).ravel()
            cat_ordered += np.einsum("mqp,mp->qp", np.abs(sc), a).ravel()
            cat_own += np.abs(sc).sum(axis=0).ravel()
        if gaps:  # which columns miss values on the same rows
            sm = (known[i] ^ known[i + 1 :]).astype(np.float32) * np.where(known[i], 1, -1)
            m_signed += sm.T @ sm
            am = np.abs(sm)
            m_ordered += am.T @ am
    pairs = n * (n - 1) / 2
    parts = [signed[upper], ordered[upper], np.diag(ordered), cat_signed, cat_ordered, cat_own]
    parts += [m_signed[upper], m_ordered[upper]]
    out = np.concatenate(parts) / pairs
    return np.concatenate([np.clip(out, -1.0, 1.0) * float(n_rows), cat_pairs])


def _category_pairs(codes: Sequence[NDArray[np.int64]]) -> NDArray[np.float64]:
    """Per categorical pair ``i < j``: how far each is a function of the other.

    Over the client's pairs of rows (``P``): those equal on ``i`` but not on ``j``, those
    equal on ``i``, those equal on ``j`` but not on ``i``, those equal on ``j``, each over
    ``P`` (a missing value is a level of its own). ``j`` is a function of ``i`` where the
    first is 0 (a chapter of its codes). Shape ``(4 * q * (q - 1) / 2,)``, pair after pair.
    """
    q = len(codes)
    n = codes[0].size if q else 0
    if q < 2 or n < 2:
        return np.zeros(2 * q * (q - 1))
    pairs = n * (n - 1) / 2

    def equal(*cols: NDArray[np.int64]) -> float:
        joint = np.zeros(n, dtype=np.int64)
        for c in cols:
            joint = joint * (int(c.max()) + 2) + (c + 1)
        counts = np.unique(joint, return_counts=True)[1].astype(np.float64)
        return float((counts * (counts - 1) / 2).sum())

    own = [equal(c) for c in codes]
    out = []
    for a, b in zip(*np.triu_indices(q, 1), strict=True):
        i, j = int(a), int(b)
        both = equal(codes[i], codes[j])
        out += [own[i] - both, own[i], own[j] - both, own[j]]
    return np.asarray(out) / pairs


def _category_ranks(codes: NDArray[np.int64], a: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per row, its category's place in the order of the categories' mean ``a``.

    ``codes``: each row's category (-1: missing). Only categories with at least
    :data:`MIN_CATEGORY_ROWS` rows known on ``a`` (a category of one row is trivially in
    order with anything); the other rows, and those missing either value, get NaN.
    """
    known = (codes >= 0) & np.isfinite(a)
    out = np.full(a.size, np.nan)
    if not known.any():
        return out
    k = int(codes.max()) + 1
    count = np.bincount(codes[known], minlength=k)
    mean = np.bincount(codes[known], weights=a[known], minlength=k) / np.maximum(count, 1)
    place = np.full(k, np.nan)
    big = count >= MIN_CATEGORY_ROWS
    place[big] = np.argsort(np.argsort(mean[big], kind="stable"), kind="stable")
    out[known] = place[codes[known]]
    return out


def order_categories(cat_raw: dict[int, NDArray[Any]], listed: Any, who: str) -> list:
    """The raw values of the categorical columns the server lists (``order_sums``)."""
    if not isinstance(listed, list) or not all(
        isinstance(j, int) and not isinstance(j, bool) and j in cat_raw for j in listed
    ):
        raise ValueError(
            f"{who}: the server's order_sums is not a list of this client's categorical "
            "columns (by column index)."
        )
    return [cat_raw[j] for j in listed]


def check_order_sums(
    pooled: NDArray[np.float64], p: int, q: int, n_rows: float, n_clients: int
) -> None:
    """The pooled sums of :func:`order_sums` (``p`` numeric, ``q`` categorical columns).

    Each within ``[-rows, rows]``, the rates of pairs within ``[0, rows]``, and a pair's
    concordant less discordant pairs at most its ordered ones.

    Raises
    ------
    ValueError
        Naming the field, when a sum is out of range (a client's reply was malformed).
    """
    slack = n_clients * 2.0**-ORDER_FRAC_BITS
    signed, ordered, own, cat_signed, cat_ordered, cat_own, m_signed, m_ordered, cat_pairs = (
        _blocks(pooled, p, q)
    )
    bad = ~np.isfinite(pooled) | (np.abs(pooled) > n_rows + slack)
    rates = np.concatenate([ordered, own, cat_ordered, cat_own, m_ordered, cat_pairs])
    unequal, equal = cat_pairs.reshape(-1, 2).T  # equal on one, not the other; equal on one
    over_pairs = unequal > equal + slack
    pairs = ((signed, ordered), (cat_signed, cat_ordered), (m_signed, m_ordered))
    over = np.concatenate([np.abs(a) > b + slack for a, b in pairs])
    if bad.any() or over.any() or over_pairs.any() or (rates < -slack).any():
        raise ValueError(
            "The moments round's pooled order statistics ('order_sums') are out of range: "
            "not finite, beyond the federation's rows, rates below 0, or more pairs in "
            "order than ordered: some client sent a malformed reply (secure aggregation "
            "hides which)."
        )


def _blocks(pooled: NDArray[np.float64], p: int, q: int) -> list[NDArray[np.float64]]:
    """:func:`order_sums`' nine blocks."""
    half = p * (p - 1) // 2
    sizes = [half, half, p, q * p, q * p, q * p, half, half, 2 * q * (q - 1)]
    return np.split(pooled, np.cumsum(sizes)[:-1])


def _in_order(
    signed: NDArray[np.float64],
    ordered: NDArray[np.float64],
    n_rows: float,
    disorder: float | None = None,
) -> NDArray[np.bool_]:
    """Pairs in order: disorder at most ``disorder``, on enough evidence.

    ``disorder`` None: :data:`COPY_DISORDER`. Enough: ordered on both in
    :data:`MIN_ORDERED` of the pairs or more (weighted by rows; ``n_rows`` the
    federation's).
    """
    limit = COPY_DISORDER if disorder is None else disorder
    fewer = (ordered - np.abs(signed)) / 2  # min(C, D)
    evidence = ordered >= MIN_ORDERED * n_rows
    return np.asarray(evidence & (fewer <= limit * np.where(evidence, ordered, 1.0)))


def _alike(
    signed: NDArray[np.float64],
    ordered: NDArray[np.float64],
    own: NDArray[np.float64],
    n_rows: float,
    disorder: float | None = None,
) -> NDArray[np.bool_]:
    """Pairs in order whose second column's order the first explains.

    In order: disorder at most ``disorder`` (:func:`_in_order`); explained: of the second
    column's ordered pairs (``own``), at most :data:`COPY_UNEXPLAINED` tied on the first.
    A pair no client orders is not alike.
    """
    unexplained = np.maximum(own - ordered, 0.0)
    in_order = _in_order(signed, ordered, n_rows, disorder)
    return in_order & (unexplained <= COPY_UNEXPLAINED * own)


def representatives(
    pooled: NDArray[np.float64],
    feats: NDArray[np.int64],
    d: int,
    cat_feats: Sequence[int] = (),
    n_rows: float = 1.0,
) -> NDArray[np.int64] | None:
    """Per feature, the feature it is fitted as (itself, unless a copy); None: no copies.

    ``pooled``: the sums of :func:`order_sums` over the clients for the numeric columns
    ``feats`` and categorical ones ``cat_feats`` (in their order). Numeric columns are
    taken from the finest on (the most pairs ordered, then the lowest index); each is
    fitted as the first kept column it is alike with, else kept. A categorical column
    alike with a numeric one is fitted as that one's (the first in the same order). A
    pair no client orders (constant in every client) is not alike.
    """
    p = feats.size
    signed, ordered, own, cat_signed, cat_ordered, cat_own = _blocks(pooled, p, len(cat_feats))[:6]
    pair_signed, pair_ordered = _square(signed, p), _square(ordered, p)
    # alike[i, j]: j in order with i, and its order explained by i's (j fitted as i).
    alike = _alike(
        pair_signed,
        pair_ordered,
        np.broadcast_to(own, (p, p)),
        n_rows,
        min(COPY_MERGE, COPY_DISORDER),
    )
    np.fill_diagonal(alike, False)
    finest = np.lexsort((np.arange(p), -own))
    own_rep = np.arange(p)
    kept: list[int] = []
    for j in finest:
        close = [i for i in kept if alike[i, j]]
        if close:
            own_rep[j] = close[0]
        else:
            kept.append(int(j))
    rep = np.arange(d, dtype=np.int64)
    rep[feats] = feats[own_rep]
    cat_alike = _alike(cat_signed, cat_ordered, cat_own, n_rows).reshape(len(cat_feats), p)
    for c, row in zip(cat_feats, cat_alike, strict=True):
        close = [a for a in finest if row[a]]
        if close:
            rep[c] = rep[feats[close[0]]]
    return None if (rep == np.arange(d)).all() else rep


def _square(upper: NDArray[np.float64], p: int) -> NDArray[np.float64]:
    """A symmetric ``(p, p)`` matrix from its upper triangle (row after row)."""
    out = np.zeros((p, p))
    out[np.triu_indices(p, 1)] = upper
    return out + out.T


def nested_pairs(
    pooled: NDArray[np.float64], feats: NDArray[np.int64], d: int, q: int, n_rows: float = 1.0
) -> tuple[NDArray[np.int8], NDArray[np.int8]] | None:
    """Pairs of numeric features whose rows nest: by their values, by their missing ones.

    From :func:`order_sums`: ``(d, d)`` matrices, +1 where the pair is in order
    increasing, -1 decreasing (disorder at most :data:`COPY_DISORDER`), 0 elsewhere; the
    first for the values (pairs fitted as one never release both), the second for the
    indicators of a missing value. None: no pair. At one node, two such features'
    candidates release sums whose difference is the rows between them
    (:func:`nested_apart`).
    """
    p = feats.size
    blocks = _blocks(pooled, p, q)
    signed, ordered, m_signed, m_ordered = blocks[0], blocks[1], blocks[6], blocks[7]
    i, j = np.triu_indices(p, 1)
    out = []
    for a, b in ((signed, ordered), (m_signed, m_ordered)):
        rel = np.zeros((d, d), dtype=np.int8)
        keep = _in_order(a, b, n_rows)
        rel[feats[i[keep]], feats[j[keep]]] = np.where(a[keep] >= 0, 1, -1)
        out.append(rel + rel.T)
    if not (out[0].any() or out[1].any()):
        return None
    return out[0], out[1]


def dependent_categories(
    pooled: NDArray[np.float64],
    p: int,
    cat_feats: Sequence[int],
    d: int,
    n_rows: float,
    n_clients: int,
) -> NDArray[np.bool_] | None:
    """Pairs of categorical features one of which is (nearly) a function of the other.

    From :func:`order_sums`' last block (``p`` numeric columns before): ``j`` is a
    function of ``i`` where at most :data:`COPY_UNEXPLAINED` of the pairs of rows equal on
    ``i`` differ on ``j`` (a chapter of its codes), on evidence: a client's row shares its
    level of ``i`` with :data:`MIN_CATEGORY_ROWS` others or more on average (an
    identifier's levels, one row each, are trivially functions). ``(d, d)``, symmetric;
    None: no pair. Their groups' sums at one node nest (:func:`one_of_each`).
    """
    q = len(cat_feats)
    if q < 2:
        return None
    cat_pairs = _blocks(pooled, p, q)[8].reshape(-1, 4) / max(n_rows, 1.0)
    per_client = n_rows / max(n_clients, 1)
    out = np.zeros((d, d), dtype=bool)
    for (i, j), (u_i, e_i, u_j, e_j) in zip(
        zip(*np.triu_indices(q, 1), strict=True), cat_pairs, strict=True
    ):
        j_of_i = e_i * per_client >= MIN_CATEGORY_ROWS and u_i <= COPY_UNEXPLAINED * e_i
        i_of_j = e_j * per_client >= MIN_CATEGORY_ROWS and u_j <= COPY_UNEXPLAINED * e_j
        if j_of_i or i_of_j:
            a, b = cat_feats[int(i)], cat_feats[int(j)]
            out[a, b] = out[b, a] = True
    return out if out.any() else None


def one_of_each(
    pair_off: NDArray[np.int64], pair_feat: NDArray[np.int32], exclusive: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """A level's drawn features less those drawn after a feature they exclude at a node.

    ``exclusive``: ``(d, d)`` pairs never asked at one node together
    (:func:`dependent_categories`): the first drawn is asked.
    """
    n_slots = pair_off.size - 1
    keep = np.ones(pair_feat.size, dtype=bool)
    for s in range(n_slots):
        a, b = int(pair_off[s]), int(pair_off[s + 1])
        drawn = pair_feat[a:b]
        for k in range(1, drawn.size):
            if exclusive[drawn[k], drawn[:k][keep[a : a + k]]].any():
                keep[a + k] = False
    slot = np.repeat(np.arange(n_slots), np.diff(pair_off))
    out_off = np.zeros(n_slots + 1, dtype=np.int64)
    np.cumsum(np.bincount(slot[keep], minlength=n_slots), out=out_off[1:])
    return out_off, pair_feat[keep]


def nested_apart(
    node: NDArray[np.int64],
    feature: NDArray[np.int64],
    cand: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    below: NDArray[np.float64],
    node_rows: NDArray[np.float64],
    safe: NDArray[np.bool_],
    nested: tuple[NDArray[np.int8], NDArray[np.int8]],
    min_rows: int,
) -> NDArray[np.bool_]:
    """Candidates to drop: 1 to ``min_rows - 1`` rows from a nested feature's at the node.

    Per pair (``node``, ``feature``, the node's rows ``node_rows``) its candidates
    ``cand[cand_off[p]:cand_off[p + 1]]`` and their rows below (``below``). ``nested``
    (:func:`nested_pairs`): per feature pair, +1 / -1 where their values
    nest increasing / decreasing, then the same for their missing values. Two such
    features' candidates at one node release sums over nested rows (a value candidate
    ``x <= e``; a "value known | missing" edge, the known rows): their difference is the
    rows between, counted by ``below`` (or, decreasing, the other's rows above). Taken in
    pair order, a candidate still ``safe`` is dropped where that difference is 1 to
    ``min_rows - 1`` rows from a kept one of its kind.
    """
    drop = np.zeros(cand.size, dtype=bool)
    walk = _apart_walk(node, feature, cand, cand_off, below, node_rows, safe, nested, min_rows)
    if walk is not None:
        cast(Any, _apart_kernel)(*walk, drop)  # numba's stub counts no star-arguments
    return drop


def _apart_walk(
    node: NDArray[np.int64],
    feature: NDArray[np.int64],
    cand: NDArray[np.float64],
    cand_off: NDArray[np.int64],
    below: NDArray[np.float64],
    node_rows: NDArray[np.float64],
    safe: NDArray[np.bool_],
    nested: tuple[NDArray[np.int8], NDArray[np.int8]],
    min_rows: int,
) -> tuple[Any, ...] | None:
    """:func:`nested_apart`'s arguments as its walk reads them (None: nothing to walk).

    The candidates to walk (``safe``, on a feature with a nested partner of their kind),
    ordered by node (stable: pair order within a node), with each node's run, and per
    candidate its feature, kind (a missing-value edge or not) and node rows.
    """
    pair = np.repeat(np.arange(node.size), np.diff(cand_off))
    edge = cand == MISSING_SPLIT
    has = [np.asarray(rel.any(axis=1), dtype=bool)[feature[pair]] for rel in nested]
    at = np.flatnonzero(safe & np.where(edge, has[1], has[0]))
    if at.size < 2:
        return None
    order = at[np.argsort(node[pair[at]], kind="stable")].astype(np.int64)
    nodes = node[pair[order]]
    starts = np.flatnonzero(np.r_[True, nodes[1:] != nodes[:-1]]).astype(np.int64)
    ends = np.r_[starts[1:], order.size].astype(np.int64)
    return (
        order,
        starts,
        ends,
        np.ascontiguousarray(feature[pair], dtype=np.int64),
        edge,
        np.ascontiguousarray(below, dtype=np.float64),
        np.ascontiguousarray(node_rows[pair], dtype=np.float64),
        np.ascontiguousarray(nested[0], dtype=np.int8),
        np.ascontiguousarray(nested[1], dtype=np.int8),
        int(min_rows),
    )


def _apart_kernel_numpy(
    order: NDArray[np.int64],
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    feat: NDArray[np.int64],
    edge: NDArray[np.bool_],
    below: NDArray[np.float64],
    rows: NDArray[np.float64],
    values: NDArray[np.int8],
    missing: NDArray[np.int8],
    min_rows: int,
    drop: NDArray[np.bool_],
) -> None:
    """NumPy twin of :func:`_apart_kernel` (same arguments, same ``drop``).

    Per node, each candidate against the kept ones of its kind at once.
    """
    for a, b in zip(starts, ends, strict=True):
        kept: list[int] = []
        for i in order[a:b]:
            k = np.asarray(kept, dtype=np.int64)
            k = k[edge[k] == edge[i]]
            r = (missing if edge[i] else values)[feat[i], feat[k]]
            other = np.where(r > 0, below[k], rows[i] - below[k])
            gap = np.abs(below[i] - other)
            if ((r != 0) & (gap >= 0.5) & (gap < min_rows - 0.5)).any():
                drop[i] = True
            else:
                kept.append(int(i))


@numba.njit(nogil=True, cache=True)
def _apart_kernel(
    order: NDArray[np.int64],
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    feat: NDArray[np.int64],
    edge: NDArray[np.bool_],
    below: NDArray[np.float64],
    rows: NDArray[np.float64],
    values: NDArray[np.int8],
    missing: NDArray[np.int8],
    min_rows: int,
    drop: NDArray[np.bool_],
) -> None:  # pragma: no cover - compiled (tests/test_copies.py: against its twin)
    """:func:`nested_apart`'s walk over each node's candidates, in pair order.

    Sets ``drop[i]`` where candidate ``i`` is 1 to ``min_rows - 1`` rows from a kept one
    of its kind on a nested feature (``values`` or ``missing``: +1, -1 or 0 per pair).
    """
    kept = np.empty(order.size, dtype=np.int64)
    for g in range(starts.size):
        n_kept = 0
        for t in range(starts[g], ends[g]):
            i = order[t]
            rel = missing if edge[i] else values
            n = rows[i]
            dropped = False
            for u in range(n_kept):
                k = kept[u]
                if edge[k] != edge[i]:
                    continue
                r = rel[feat[i], feat[k]]
                if r == 0:
                    continue
                other = below[k] if r > 0 else n - below[k]
                gap = abs(below[i] - other)
                if 0.5 <= gap < min_rows - 0.5:
                    dropped = True
                    break
            if dropped:
                drop[i] = True
            else:
                kept[n_kept] = i
                n_kept += 1


def fitted_as_one(
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    rep: NDArray[np.int64],
    constant: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """A level's drawn features with each copy replaced by its representative.

    Per slot, a representative drawn twice (itself and a copy, or two copies) once, at its
    first place; one known to be constant in the node (``constant``, per slot) not at all.
    """
    n_slots = pair_off.size - 1
    slot = np.repeat(np.arange(n_slots), np.diff(pair_off))
    feat = rep[pair_feat]
    d = rep.size
    _, first = np.unique(slot * d + feat, return_index=True)
    keep = np.zeros(feat.size, dtype=bool)
    keep[first] = True
    if constant is not None:
        keep &= ~constant[slot, feat]
    out_off = np.zeros(n_slots + 1, dtype=np.int64)
    np.cumsum(np.bincount(slot[keep], minlength=n_slots), out=out_off[1:])
    return out_off, feat[keep].astype(np.int32)
