"""Server side: the best split of every frontier node from the clients' summed statistics."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numba
import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_ROWS, STAT_TASK, STAT_WEIGHT
from ..criteria import CRITERION_CODES, s_log_mean, weighted_gain, weighted_impurity
from .monotonic import LevelBounds, allowed

__all__ = [
    "BestSplits",
    "BestSetSplits",
    "best_splits",
    "best_avgimp_splits",
    "best_set_splits",
    "categorical_splits",
    "principal_keys",
    "scan_nodes",
    "scan_nodes_numpy",
    "with_set_splits",
]

# scikit-learn's EPSILON in the split acceptance rule.
EPSILON = float(np.finfo(np.float64).eps)
_TIE_RTOL = 1e-12


@dataclass(frozen=True)
class BestSplits:
    """One entry per frontier node; ``feature == -1`` means the node becomes a leaf.

    Attributes
    ----------
    feature : ndarray of int32, shape (n_nodes,)
    threshold : ndarray of float64, shape (n_nodes,)
    gain : ndarray of float64, shape (n_nodes,)
        Weighted impurity decrease ``W Psi(s) - W_L Psi(s_L) - W_R Psi(s_R)``.
    left, right : ndarray of float64, shape (n_nodes, n_stats)
        Pooled statistics of the children (zeros where there is no split).
    """

    feature: NDArray[np.int32]
    threshold: NDArray[np.float64]
    gain: NDArray[np.float64]
    left: NDArray[np.float64]
    right: NDArray[np.float64]
    #: Set splits by node index: (codes, sides) with side 0 left, 1 right.
    sets: dict[int, tuple[NDArray[np.int32], NDArray[np.int8]]] = field(default_factory=dict)
    #: Where missing values go at each numeric split (1 left), when the split was chosen
    #: knowing them; None: every node's missing values go to its child with more rows.
    missing_left: NDArray[np.uint8] | None = None

    def missing_sides(self) -> NDArray[np.uint8]:
        """``missing_left``, or the side of the child with more rows where it is None."""
        if self.missing_left is not None:
            return self.missing_left
        return (self.left[:, STAT_ROWS] > self.right[:, STAT_ROWS]).astype(np.uint8)

    @classmethod
    def none(cls, n_nodes: int, n_stats: int) -> BestSplits:
        """No split anywhere (every node a leaf)."""
        return cls(
            np.full(n_nodes, -1, dtype=np.int32),
            np.full(n_nodes, np.nan),
            np.zeros(n_nodes),
            np.zeros((n_nodes, n_stats)),
            np.zeros((n_nodes, n_stats)),
        )


def best_splits(
    parent: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    left: NDArray[np.float64],
    *,
    criterion: str,
    min_samples_leaf: int,
    min_impurity_decrease: float,
    root_weight: NDArray[np.float64],
    missing_side: NDArray[np.int8] | None = None,
    min_weight_fraction_leaf: float = 0.0,
    n_outputs: int = 1,
    bounds: LevelBounds | None = None,
    gain_out: NDArray[np.float64] | None = None,
) -> BestSplits:
    """Evaluate every candidate of every node and keep each node's best.

    Follows scikit-learn's rules: a candidate is admissible when both children keep at
    least ``min_samples_leaf`` distinct rows and positive weight; the best admissible
    candidate is kept unless ``gain / root_weight + EPSILON < min_impurity_decrease``.
    Ties (gains within 1e-12 of the magnitude of the terms they are computed from, the
    rounding of summing in another client partition) go to the first candidate in the
    request order (sampled feature order, then increasing threshold), which depends only
    on the seed, never on the clients.

    Parameters
    ----------
    parent : ndarray of float64, shape (n_nodes, n_stats)
        Pooled node statistics.
    pair_off : ndarray of int64, shape (n_nodes + 1,)
        Node ``i`` owns pairs ``pair_off[i]:pair_off[i + 1]``.
    pair_feat : ndarray of int32, shape (n_pairs,)
    cand_off : ndarray of int64, shape (n_pairs + 1,)
    cand : ndarray of float64, shape (n_candidates,)
    left : ndarray of float64, shape (n_candidates, n_stats)
        Pooled left-child statistics at each candidate.
    root_weight : ndarray of float64, shape (n_nodes,)
        Weight at the root of each node's tree.
    missing_side : ndarray of int8, shape (n_candidates,), optional
        Where each candidate sends missing values: 0 right, 1 left, -1 the child with more
        rows (see :func:`~fedforest.federated.server.missing.with_missing_sides`); None
        without missing values.
    min_weight_fraction_leaf : float
        scikit-learn's: both children weigh at least this fraction of the tree's root.
    n_outputs : int
        Gini and entropy: the outputs of multi-output y, one block of class columns each
        (the gain is the mean of theirs). Squared error and Poisson read their outputs off
        the columns.
    bounds : LevelBounds, optional
        ``monotonic_cst``: the constraints and each node's value interval; a candidate on
        a constrained feature whose children break them is not admissible
        (:func:`~fedforest.federated.server.monotonic.allowed`).
    gain_out : ndarray of float64, shape (n_candidates,), optional
        Filled with every candidate's gain (-inf where inadmissible).
    """
    n_nodes, n_stats = parent.shape
    if criterion in ("squared_error", "poisson"):
        n_outputs = (n_stats - STAT_TASK) // 2
    # scikit-learn's min_weight_leaf: a fraction of the weight at each node's tree root.
    least = min_weight_fraction_leaf * np.asarray(root_weight, dtype=np.float64)
    gain = np.empty(left.shape[0]) if gain_out is None else gain_out
    best = np.empty(n_nodes)
    chosen = np.empty(n_nodes, dtype=np.int64)
    ok = (
        np.zeros(0, np.uint8)  # every candidate
        if bounds is None
        else allowed(parent, pair_off, pair_feat, cand_off, left, bounds)
    )
    scan_nodes(
        np.ascontiguousarray(parent),
        pair_off,
        cand_off,
        np.ascontiguousarray(left),
        CRITERION_CODES[criterion],
        n_outputs,
        min_samples_leaf,
        np.ascontiguousarray(least),
        ok,
        _TIE_RTOL,
        gain,
        best,
        chosen,
    )
    nodes = np.flatnonzero(chosen >= 0)
    nodes = nodes[best[nodes] / root_weight[nodes] + EPSILON >= min_impurity_decrease]
    pick = chosen[nodes]
    cand_pair = np.repeat(np.arange(pair_feat.size), np.diff(cand_off))
    feature = np.full(n_nodes, -1, dtype=np.int32)
    threshold = np.full(n_nodes, np.nan)
    out_left = np.zeros((n_nodes, n_stats))
    feature[nodes] = pair_feat[cand_pair[pick]]
    threshold[nodes] = cand[pick]
    out_left[nodes] = left[pick]
    out_right = np.where(feature[:, None] >= 0, parent - out_left, 0.0)
    missing_left = None
    if missing_side is not None:
        missing_left = np.zeros(n_nodes, dtype=np.uint8)
        side = missing_side[pick]
        larger = out_left[nodes, STAT_ROWS] > out_right[nodes, STAT_ROWS]
        missing_left[nodes] = np.where(side < 0, larger, side == 1)
    return BestSplits(
        feature,
        threshold,
        np.where(feature >= 0, best, 0.0),
        out_left,
        out_right,
        missing_left=missing_left,
    )


@numba.njit(inline="always")
def _weighted_impurity(st, criterion, n_out):  # type: ignore[no-untyped-def]
    # W * Psi(s) of one statistics row, as criteria.weighted_impurity (Gini, entropy): the
    # mean over the n_out outputs whose class blocks the row holds.
    w = st[STAT_WEIGHT]
    if w <= 0.0:
        return 0.0
    if criterion == 1:
        sq = 0.0
        for q in range(STAT_TASK, st.shape[0]):
            sq += st[q] * st[q]
        return max(w - sq / w / n_out, 0.0)
    h = 0.0
    for q in range(STAT_TASK, st.shape[0]):
        if st[q] > 0.0:
            h += st[q] * np.log2(st[q] / w)
    return -h / n_out


@numba.njit(nogil=True, cache=True)
def scan_nodes(  # type: ignore[no-untyped-def]
    parent,
    pair_off,
    cand_off,
    left,
    criterion,
    n_out,
    min_rows,
    min_weight,
    allowed,
    tie_rtol,
    gain,
    best,
    chosen,
):
    """Each node's best admissible candidate (the first within ``tie_rtol`` of the best).

    Parameters
    ----------
    parent : ndarray of float64, shape (n_nodes, n_stats)  # IN
    pair_off : ndarray of int64, shape (n_nodes + 1,)  # IN
    cand_off : ndarray of int64, shape (n_pairs + 1,)  # IN
    left : ndarray of float64, shape (n_candidates, n_stats)  # IN
    criterion : int  # IN: 0 squared error, 1 Gini, 2 entropy, 3 Poisson (``CRITERION_CODES``)
    n_out : int  # IN: outputs (squared error, Poisson: column pairs; Gini, entropy: blocks)
    min_rows : int  # IN: ``min_samples_leaf`` distinct rows on both sides
    min_weight : ndarray of float64, shape (n_nodes,)  # IN: least weight of either child
    allowed : ndarray of uint8, shape (n_candidates,) or (0,)  # IN: 0 refuses a candidate
        (``monotonic_cst``); empty: every candidate may be chosen
    tie_rtol : float  # IN
    gain : ndarray of float64, shape (n_candidates,)  # OUT: -inf where inadmissible
    best : ndarray of float64, shape (n_nodes,)  # OUT: -inf where none is admissible
    chosen : ndarray of int64, shape (n_nodes,)  # OUT: candidate index, or -1
    """
    n_stats = parent.shape[1]
    # Squared error and Poisson: one column pair per output; the gain is their mean (as for
    # Gini and entropy, whose impurities are means over the outputs already).
    p_div = n_out if criterion == 0 or criterion == 3 else 1
    right = np.empty(n_stats)
    check = allowed.shape[0] > 0
    for i in range(parent.shape[0]):
        best[i] = -np.inf
        chosen[i] = -1
        lo, hi = cand_off[pair_off[i]], cand_off[pair_off[i + 1]]
        p_w = parent[i, STAT_WEIGHT]
        if criterion == 0:
            p_term = 0.0
            if p_w > 0.0:
                for o in range(n_out):
                    p_term += parent[i, STAT_TASK + 2 * o] ** 2 / p_w
        elif criterion == 3:  # Poisson: S log(S / W), summed over the outputs
            p_term = 0.0
            for o in range(n_out):
                p_s = parent[i, STAT_TASK + 2 * o]
                p_term += p_s * np.log(p_s / p_w) if p_s > 0.0 and p_w > 0.0 else 0.0
        else:
            p_term = _weighted_impurity(parent[i], criterion, n_out)
        for c in range(lo, hi):
            if check and allowed[c] == 0:
                gain[c] = -np.inf
                continue
            for q in range(n_stats):
                right[q] = parent[i, q] - left[c, q]
            l_w, r_w = left[c, STAT_WEIGHT], right[STAT_WEIGHT]
            if (
                left[c, STAT_ROWS] < min_rows
                or right[STAT_ROWS] < min_rows
                or not l_w > 0.0
                or not r_w > 0.0
                or l_w < min_weight[i]
                or r_w < min_weight[i]
            ):
                gain[c] = -np.inf
                continue
            if criterion == 0:
                acc = 0.0
                for o in range(n_out):
                    k = STAT_TASK + 2 * o
                    acc += left[c, k] ** 2 / l_w + right[k] ** 2 / r_w
                g = (acc - p_term) / n_out
            elif criterion == 3:
                acc = 0.0
                for o in range(n_out):
                    l_s, r_s = left[c, STAT_TASK + 2 * o], right[STAT_TASK + 2 * o]
                    if l_s <= EPSILON or r_s <= EPSILON:  # scikit-learn's rule, any output
                        acc = -np.inf
                        break
                    acc += l_s * np.log(l_s / l_w) + r_s * np.log(r_s / r_w)
                if acc == -np.inf:
                    gain[c] = -np.inf
                    continue
                g = (acc - p_term) / n_out
            else:
                g = (p_term - _weighted_impurity(left[c], criterion, n_out)) - _weighted_impurity(
                    right, criterion, n_out
                )
            gain[c] = g
            if g > best[i]:
                best[i] = g
        if best[i] > -np.inf:
            # Relative to the terms the gain is a difference of (its rounding), not to the
            # gain: a tiny gain of large terms differs in more of its last bits.
            slack = tie_rtol * (abs(best[i]) + abs(p_term) / p_div)
            for c in range(lo, hi):
                if gain[c] >= best[i] - slack and np.isfinite(gain[c]):
                    chosen[i] = c
                    break


def scan_nodes_numpy(
    parent: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    cand_off: NDArray[np.int64],
    left: NDArray[np.float64],
    criterion: int,
    n_out: int,
    min_rows: int,
    min_weight: NDArray[np.float64],
    allowed: NDArray[np.uint8],
    tie_rtol: float,
    gain: NDArray[np.float64],
    best: NDArray[np.float64],
    chosen: NDArray[np.int64],
) -> None:
    """NumPy twin of :func:`scan_nodes`."""
    name = {v: k for k, v in CRITERION_CODES.items()}[criterion]
    n_nodes = parent.shape[0]
    cand_pair = np.repeat(np.arange(pair_off[-1]), np.diff(cand_off))
    cand_node = np.repeat(np.arange(n_nodes), np.diff(pair_off))[cand_pair]
    par = parent[cand_node]
    right = par - left
    ok = (
        (left[:, STAT_ROWS] >= min_rows)
        & (right[:, STAT_ROWS] >= min_rows)
        & (left[:, STAT_WEIGHT] > 0)
        & (right[:, STAT_WEIGHT] > 0)
        & (left[:, STAT_WEIGHT] >= min_weight[cand_node])
        & (right[:, STAT_WEIGHT] >= min_weight[cand_node])
    )
    if allowed.size:
        ok &= allowed.astype(bool)
    gain[:] = np.where(ok, weighted_gain(par, left, name, n_out), -np.inf)
    best[:] = -np.inf
    np.maximum.at(best, cand_node, gain)
    p_div = 1
    if name == "squared_error":
        p_div = n_out
        p_term = np.where(
            parent[:, STAT_WEIGHT] > 0,
            (parent[:, STAT_TASK::2] ** 2 / np.maximum(parent[:, STAT_WEIGHT, None], 1e-300)).sum(
                axis=1
            ),
            0.0,
        )
    elif name == "poisson":
        p_div = n_out
        p_term = s_log_mean(parent[:, STAT_TASK::2], parent[:, STAT_WEIGHT, None]).sum(axis=1)
    else:
        p_term = weighted_impurity(parent, name, n_out)
    slack = tie_rtol * (np.abs(best) + np.abs(p_term) / p_div)[cand_node]
    hits = np.flatnonzero((gain >= best[cand_node] - slack) & np.isfinite(gain))
    nodes, first = np.unique(cand_node[hits], return_index=True)
    chosen[:] = -1
    chosen[nodes] = hits[first]


def _pick(
    gain: NDArray[np.float64],
    cand_node: NDArray[np.int64],
    n_nodes: int,
    root_weight: NDArray[np.float64],
    min_impurity_decrease: float,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Per node, the first candidate of (nearly) maximal gain, if it passes the decrease rule.

    Returns the nodes that split, their chosen candidates, and every node's best gain.
    """
    best = np.full(n_nodes, -np.inf)
    np.maximum.at(best, cand_node, gain)
    # Equal partitions reached through different clients' sums differ in the last bits:
    # gains within a relative 1e-12 of the best are ties, broken by request order.
    slack = _TIE_RTOL * np.abs(best[cand_node])
    hits = np.flatnonzero((gain >= best[cand_node] - slack) & np.isfinite(gain))
    nodes, first = np.unique(cand_node[hits], return_index=True)
    chosen = hits[first]
    accept = best[nodes] / root_weight[nodes] + EPSILON >= min_impurity_decrease
    return nodes[accept], chosen[accept], best


def best_avgimp_splits(
    parent: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    cand: NDArray[np.float64],
    gain_sum: NDArray[np.float64],
    left_rows: NDArray[np.float64],
    *,
    min_samples_leaf: int,
    min_impurity_decrease: float,
    root_weight: NDArray[np.float64],
) -> BestSplits:
    """AvgImp: the best candidate by the average of the clients' local impurity decreases.

    ``gain_sum`` is the clients' summed local weighted gains at each candidate; dividing by
    the pooled node weight averages their local decreases weighted by ``n_{nu,k}``. The
    children's statistics are unknown here (zeros): the next Round A brings them.
    """
    n_nodes, n_stats = parent.shape
    pair_node = np.repeat(np.arange(n_nodes), np.diff(pair_off))
    cand_pair = np.repeat(np.arange(pair_feat.size), np.diff(cand_off))
    cand_node = pair_node[cand_pair]
    rows = parent[cand_node, STAT_ROWS]
    ok = (left_rows >= min_samples_leaf) & (rows - left_rows >= min_samples_leaf)
    # Summed local weighted gains: the n_{nu,k}-weighted average of the local decreases
    # times the node weight, on the same scale as exact gains (min_impurity_decrease).
    gain = np.where(ok, gain_sum, -np.inf)
    nodes, chosen, best = _pick(gain, cand_node, n_nodes, root_weight, min_impurity_decrease)
    feature = np.full(n_nodes, -1, dtype=np.int32)
    threshold = np.full(n_nodes, np.nan)
    feature[nodes] = pair_feat[cand_pair[chosen]]
    threshold[nodes] = cand[chosen]
    zeros = np.zeros((n_nodes, n_stats))
    return BestSplits(feature, threshold, np.where(feature >= 0, best, 0.0), zeros, zeros.copy())


#: Up to this many categories (or clients), multiclass and multi-output set splits are
#: searched exhaustively; beyond, categories are ordered by a documented key (multiclass:
#: their share of the node's majority class; multi-output: :func:`principal_keys`) and
#: contiguous cuts scanned (a heuristic).
MAX_EXHAUSTIVE = 10


@dataclass(frozen=True)
class BestSetSplits:
    """Best partition of the categories (or clients) of each node.

    Attributes
    ----------
    gain : ndarray of float64, shape (n_nodes,)
        ``-inf`` where no admissible partition exists.
    left : ndarray of bool, shape (n_nodes, n_categories)
        Categories sent left; ``present & ~left`` go right, the rest are unseen.
    present : ndarray of bool, shape (n_nodes, n_categories)
    left_stats, total : ndarray of float64, shape (n_nodes, n_stats)
        Statistics of the left side and of the whole node.
    """

    gain: NDArray[np.float64]
    left: NDArray[np.bool_]
    present: NDArray[np.bool_]
    left_stats: NDArray[np.float64]
    total: NDArray[np.float64]


def _order_keys(stats: NDArray[np.float64], n_classes: int) -> NDArray[np.float64]:
    """Fisher ordering key of each category: mean outcome, class-1 share, or majority share."""
    w = np.maximum(stats[..., STAT_WEIGHT], 1e-300)
    if n_classes == 0:
        return np.asarray(stats[..., 2] / w)
    if n_classes == 2:
        return np.asarray(stats[..., 3] / w)
    majority = np.argmax(stats[..., 2:].sum(axis=1), axis=1)  # per node
    return np.asarray(
        np.take_along_axis(stats[..., 2:], majority[:, None, None], axis=2)[..., 0] / w
    )


def principal_keys(
    stats: NDArray[np.float64], criterion: str, present: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """Multi-output ordering key: the categories' mean vectors on their first principal axis.

    A category's mean vector is its mean target of every output (regression: ``sum w y / W``
    per output, in the targets' units) or its share of every class of every output
    (classification: the class blocks side by side). The axis is the leading eigenvector
    of the row-weighted scatter ``sum_c W_c (m_c - m)(m_c - m)^T`` of the present
    categories about their weighted mean ``m``, signed so that its largest component is
    positive; the key is ``(m_c - m) . v``. Unstandardised on purpose: squared error's and
    Gini's gains of a two-way partition are the between-group scatter of exactly these
    vectors in these units (averaged over outputs), so the axis is the direction along
    which the categories differ most in what the gain measures (Coppersmith, Hong and
    Hosking, 1999, for Gini); with one output it orders as the mean / class-1 share does.

    Parameters
    ----------
    stats : ndarray of float64, shape (n_nodes, n_categories, n_stats)
    criterion : str
        "squared_error" or "poisson" (one ``(sum, second)`` column pair per output), or a
        classification criterion (class columns).
    present : ndarray of bool, shape (n_nodes, n_categories)

    Returns
    -------
    ndarray of float64, shape (n_nodes, n_categories)
        The key of every category (0 where absent: the caller puts those last).
    """
    w = np.where(present, stats[..., STAT_WEIGHT], 0.0)
    regression = criterion in ("squared_error", "poisson")
    task = stats[..., STAT_TASK::2] if regression else stats[..., STAT_TASK:]
    means = np.where(present[..., None], task / np.maximum(w, 1e-300)[..., None], 0.0)
    total = np.maximum(w.sum(axis=1), 1e-300)
    center = np.einsum("nm,nmk->nk", w, means) / total[:, None]
    dev = np.where(present[..., None], means - center[:, None, :], 0.0)
    scaled = dev * np.sqrt(w)[..., None]
    _, vecs = np.linalg.eigh(np.einsum("nmk,nml->nkl", scaled, scaled))
    axis = vecs[..., -1]  # the largest eigenvalue's (eigh sorts them ascending)
    lead = np.take_along_axis(axis, np.argmax(np.abs(axis), axis=1)[:, None], axis=1)
    axis = axis * np.where(lead < 0, -1.0, 1.0)
    return np.asarray(np.einsum("nmk,nk->nm", dev, axis))


def _finish(
    gain: NDArray[np.float64],
    left: NDArray[np.float64],
    masks: NDArray[np.bool_],
    msl: int,
    parent: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    right = parent[:, None, :] - left
    ok = (left[..., STAT_ROWS] >= msl) & (right[..., STAT_ROWS] >= msl)
    ok &= (left[..., STAT_WEIGHT] > 0) & (right[..., STAT_WEIGHT] > 0)
    gain = np.where(ok, gain, -np.inf)
    return gain.max(axis=1) if gain.shape[1] else np.full(gain.shape[0], -np.inf), (
        gain.argmax(axis=1) if gain.shape[1] else np.zeros(gain.shape[0], np.int64)
    )


def best_set_splits(
    stats: NDArray[np.float64],
    *,
    criterion: str,
    n_classes: int,
    min_samples_leaf: int,
    n_outputs: int = 1,
) -> BestSetSplits:
    """Best two-way partition of the categories present at each node.

    Regression and binary classification: categories sorted by mean outcome / class-1
    share, contiguous cuts scanned (Fisher, 1958: optimal for these criteria). Multiclass
    and multi-output y: every partition while the node has at most :data:`MAX_EXHAUSTIVE`
    categories (gains: the mean over the outputs, as for numeric splits), else contiguous
    cuts of an ordering: the majority-class share (multiclass) or :func:`principal_keys`
    (multi-output).

    Parameters
    ----------
    stats : ndarray of float64, shape (n_nodes, n_categories, n_stats)
        Pooled statistics of each category (or client) in each node.
    n_outputs : int
        Gini and entropy: the class blocks of multi-output y. Regression reads its outputs
        off the columns.
    """
    n_nodes, m, s = stats.shape
    present = stats[..., STAT_WEIGHT] > 0
    parent = stats.sum(axis=1)
    n_present = present.sum(axis=1)
    if criterion in ("squared_error", "poisson"):
        n_outputs = (s - STAT_TASK) // 2
    multi = n_outputs > 1
    exhaustive = (n_classes > 2 or multi) and m <= MAX_EXHAUSTIVE
    if exhaustive:
        codes = np.arange(1, 2 ** max(m - 1, 0), dtype=np.int64)
        masks = ((codes[:, None] >> np.arange(m)[None, :]) & 1).astype(bool)  # (n_masks, m)
        left = np.einsum("cm,nms->ncs", masks.astype(float), stats)
        gain = weighted_gain(
            parent[:, None, :].repeat(masks.shape[0], 1).reshape(-1, s),
            left.reshape(-1, s),
            criterion,
            n_outputs,
        ).reshape(n_nodes, masks.shape[0])  # explicit: no node (n_nodes 0) is a valid shape
        best, arg = _finish(gain, left, masks, min_samples_leaf, parent)
        left_mask = masks[arg] & present if masks.shape[0] else np.zeros((n_nodes, m), bool)
    else:
        key = principal_keys(stats, criterion, present) if multi else _order_keys(stats, n_classes)
        key = np.where(present, key, np.inf)
        order = np.argsort(key, axis=1, kind="stable")
        cum = np.cumsum(np.take_along_axis(stats, order[..., None], axis=1), axis=1)[:, :-1]
        gain = weighted_gain(
            parent[:, None, :].repeat(max(m - 1, 0), 1).reshape(-1, s),
            cum.reshape(-1, s),
            criterion,
            n_outputs,
        ).reshape(n_nodes, max(m - 1, 0))
        gain = np.where(np.arange(max(m - 1, 0))[None, :] < (n_present - 1)[:, None], gain, -np.inf)
        best, arg = _finish(gain, cum, present, min_samples_leaf, parent)
        rank = np.argsort(order, axis=1)
        left_mask = (rank <= arg[:, None]) & present
    left_stats = np.where(left_mask[..., None], stats, 0.0).sum(axis=1)
    return BestSetSplits(best, left_mask, present, left_stats, parent)


def with_set_splits(
    best: BestSplits,
    cand: BestSetSplits,
    feature: int | NDArray[np.int64],
    eligible: NDArray[np.bool_],
    *,
    root_weight: NDArray[np.float64],
    min_impurity_decrease: float,
    min_weight_fraction_leaf: float = 0.0,
) -> BestSplits:
    """Take the set split of a node where it beats the node's best split so far.

    A set split wins on a strictly larger gain (ties keep the earlier split), if the node is
    ``eligible``, the gain passes ``min_impurity_decrease`` with scikit-learn's rule and
    both children weigh at least ``min_weight_fraction_leaf`` of the root.
    """
    current = np.where(best.feature >= 0, best.gain, -np.inf)
    win = eligible & np.isfinite(cand.gain) & (cand.gain > current)
    win &= cand.gain / np.maximum(root_weight, 1e-300) + EPSILON >= min_impurity_decrease
    if min_weight_fraction_leaf > 0:
        l_w = cand.left_stats[:, STAT_WEIGHT]
        least = min_weight_fraction_leaf * root_weight
        win &= (l_w >= least) & (cand.total[:, STAT_WEIGHT] - l_w >= least)
    if not win.any():
        return best
    feat, thr, gain = best.feature.copy(), best.threshold.copy(), best.gain.copy()
    left, right = best.left.copy(), best.right.copy()
    sets = dict(best.sets)
    feature_of = np.broadcast_to(np.asarray(feature), win.shape)
    for i in np.flatnonzero(win):
        feat[i], thr[i], gain[i] = feature_of[i], -2.0, cand.gain[i]
        left[i], right[i] = cand.left_stats[i], cand.total[i] - cand.left_stats[i]
        codes = np.flatnonzero(cand.present[i]).astype(np.int32)
        sets[int(i)] = (codes, np.where(cand.left[i, codes], 0, 1).astype(np.int8))
    return replace(best, feature=feat, threshold=thr, gain=gain, left=left, right=right, sets=sets)


def categorical_splits(
    parent: NDArray[np.float64],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    cand_off: NDArray[np.int64],
    left: NDArray[np.float64],
    n_categories: NDArray[np.int64],
    *,
    criterion: str,
    n_classes: int,
    min_samples_leaf: int,
    n_outputs: int = 1,
) -> tuple[BestSetSplits, NDArray[np.int64]]:
    """Best categorical split of every node, and its feature (-1: none).

    A categorical pair's candidates are the codes ``0..C-2``, so its cumulative left
    statistics give every category's statistics, the last from the node total.
    """
    n_nodes, s = parent.shape
    n_cat = n_categories[pair_feat]
    pair_node = np.repeat(np.arange(n_nodes), np.diff(pair_off))
    ok = (n_cat >= 2) & (np.diff(cand_off) == n_cat - 1)
    idx = np.flatnonzero(ok)
    c_max = int(n_cat[idx].max()) if idx.size else 1
    per_cat = np.zeros((idx.size, c_max, s))
    for c in np.unique(n_cat[idx]):
        sel = np.flatnonzero(n_cat[idx] == c)
        rows = cand_off[idx[sel], None] + np.arange(c - 1)[None, :]
        cum = np.concatenate(
            [np.zeros((sel.size, 1, s)), left[rows], parent[pair_node[idx[sel]], None, :]], axis=1
        )
        per_cat[sel, :c] = np.diff(cum, axis=1)
    pairs = best_set_splits(
        per_cat,
        criterion=criterion,
        n_classes=n_classes,
        min_samples_leaf=min_samples_leaf,
        n_outputs=n_outputs,
    )
    # Per node, its best categorical pair (first in request order on ties).
    best_pair = np.full(n_nodes, -1)
    best_gain = np.full(n_nodes, -np.inf)
    finite = np.flatnonzero(np.isfinite(pairs.gain))
    nodes = pair_node[idx[finite]]
    order = np.lexsort((finite, -pairs.gain[finite], nodes))
    first_nodes, first = np.unique(nodes[order], return_index=True)
    best_pair[first_nodes] = finite[order[first]]
    best_gain[first_nodes] = pairs.gain[best_pair[first_nodes]]
    has = best_pair >= 0
    take = np.where(has, best_pair, 0)
    gather = (
        (lambda a: a[take]) if idx.size else (lambda a: np.zeros((n_nodes, *a.shape[1:]), a.dtype))
    )
    result = BestSetSplits(
        np.where(has, best_gain, -np.inf),
        gather(pairs.left) & has[:, None],
        gather(pairs.present) & has[:, None],
        gather(pairs.left_stats),
        gather(pairs.total),
    )
    return result, np.where(has, pair_feat[idx[take]] if idx.size else -1, -1)
