"""Server side: the features known to be constant in each frontier node.

scikit-learn's rule (``draws.sample_features``) skips a drawn feature known to be constant
in the node and draws on when every drawn one is. A node inherits its parent's constant
features; in verification mode (``n_bins=None``) the server also knows, for certain,
that the split feature is constant in a child whose side of the threshold holds a single
value: the sketches it already has are every distinct node value of that feature. A 0/1
column below a split on itself is the common case (it made such children leaves when
they drew it, where scikit-learn draws another feature).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..protocol import Message, expect_array
from .merge import FEATURE_THRESHOLD

__all__ = [
    "children_constant",
    "deferred_slots",
    "exact_split_sides_constant",
    "first_pair_only",
]


def children_constant(
    constant: NDArray[np.bool_],
    routes: dict[str, NDArray[Any]],
    n_next: int,
    sides: tuple[NDArray[np.bool_], NDArray[np.bool_]] | None = None,
    feature: NDArray[np.int32] | None = None,
) -> NDArray[np.bool_]:
    """A feature constant in a node is constant in its children (new frontier slots).

    ``sides`` (per slot: the left, the right child holds a single value of the split
    feature ``feature``) adds the split feature to those children's constants.
    """
    out = np.zeros((n_next, constant.shape[1]), dtype=bool)
    for k, route in enumerate((routes["route_left"], routes["route_right"])):
        has = route >= 0
        out[route[has]] = constant[has]
        if sides is not None and feature is not None:
            one = has & sides[k]
            out[route[one], feature[one]] = True
    return out


def exact_split_sides_constant(
    replies: list[tuple[str, Message]],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    plain: NDArray[np.bool_],
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Per slot, whether its left and its right child hold one value of the split feature.

    Verification mode only: each client's ``sketch`` (every distinct node value of each
    pair, ``sketch_off``) pooled for the pair of the slot's split feature, cut at its
    threshold (``x <= threshold`` goes left), each side constant by scikit-learn's test
    (``max <= min + FEATURE_THRESHOLD``). ``plain`` (per feature) marks the numeric
    features without missing values: splits on others (categorical, the client index,
    a column with missing values, whose rows may go to either side) are left alone.
    """
    n_slots = pair_off.size - 1
    left = np.zeros(n_slots, dtype=bool)
    right = np.zeros(n_slots, dtype=bool)
    n_pairs = int(pair_off[-1])
    split = np.flatnonzero((feature >= 0) & (feature < plain.size))
    split = split[plain[feature[split]]]
    if not split.size or not replies:
        return left, right
    offs = [expect_array(m, "sketch_off", "i", (n_pairs + 1,), n) for n, m in replies]
    vals = [
        expect_array(m, "sketch", "f", (int(o[-1]),), n)
        for o, (n, m) in zip(offs, replies, strict=True)
    ]
    for i in split.tolist():
        lo, hi = int(pair_off[i]), int(pair_off[i + 1])
        at = np.flatnonzero(pair_feat[lo:hi] == feature[i])
        if not at.size:
            continue
        p = lo + int(at[0])
        pooled = np.concatenate([v[o[p] : o[p + 1]] for o, v in zip(offs, vals, strict=True)])
        below = pooled <= threshold[i]
        for side, values in ((left, pooled[below]), (right, pooled[~below])):
            if values.size:
                side[i] = bool(values.max() <= values.min() + FEATURE_THRESHOLD)
    return left, right


def deferred_slots(
    no_split: NDArray[np.bool_],
    pair_off: NDArray[np.int64],
    pair_feat: NDArray[np.int32],
    constant: NDArray[np.bool_],
    last_level: bool,
) -> NDArray[np.bool_]:
    """Slots that draw on at the next level: scikit-learn's continued draw (verification mode).

    A node that could split (``no_split``: splittable, no split found) whose drawn
    features all proved constant (``constant``, per slot, already holds them) is not a leaf
    in scikit-learn: it draws further features until one is not constant. Here it stays
    in the frontier, its rows passed through, and draws at the next level's rounds, unless
    every feature is known constant in it or that level is the last (``last_level``: its
    nodes split no more), where it stays a leaf.
    """
    pair_node = np.repeat(np.arange(pair_off.size - 1), np.diff(pair_off))
    all_constant = np.ones(pair_off.size - 1, dtype=bool)
    np.logical_and.at(all_constant, pair_node, constant[pair_node, pair_feat])
    drew = np.diff(pair_off) > 0
    out = no_split & drew & all_constant & ~constant.all(axis=1)
    return out if not last_level else np.zeros_like(out)


def first_pair_only(
    pair_off: NDArray[np.int64], pair_feat: NDArray[np.int32], continued: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """A continued draw sends only the first feature drawn that is not known constant.

    scikit-learn evaluates the first non-constant feature it draws after ``max_features``
    constant ones, and stops there.
    """
    size = np.diff(pair_off)
    keep = np.ones(pair_feat.size, dtype=bool)
    for i in np.flatnonzero(continued & (size > 1)).tolist():
        keep[pair_off[i] + 1 : pair_off[i + 1]] = False
    new_off = np.zeros_like(pair_off)
    np.cumsum(np.where(continued, np.minimum(size, 1), size), out=new_off[1:])
    return new_off, pair_feat[keep]
