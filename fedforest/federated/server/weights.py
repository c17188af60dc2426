"""``class_weight``: classes reweighted in the pooled statistics, on the server alone.

A classification statistic is (rows, weight, weight of each class). Weighting class ``c``
by ``w_c`` scales its column and makes the weight column their sum; the row count (what
``min_samples_leaf`` counts) is unchanged. This is exactly scikit-learn's
``sample_weight * class_weight[y]`` summed per node, so the server applies it to the pooled
sums it already has: no client sends anything more, whatever the privacy level.

- a dict ``{label: weight}``: those weights (1 for a label not named);
- ``"balanced"``: ``n / (n_classes * n_c)`` from the pooled class counts of the training
  rows (under ``"none"`` the handshake's label counts, under ``"secure"`` a masked sum in
  the first grid round);
- ``"balanced_subsample"``: scikit-learn's ``n / (n_present * n_c)`` from each tree's
  bootstrap (``n_present``: the classes drawn), read off its pooled root when no client
  weighs its rows (the root's class columns are then the draws of each class; under
  ``"dp"`` noisy, so every class counts as present). With sample weights the root holds
  weighted sums, where scikit-learn counts draws: then the bootstrap round below, as for
  multi-output y (:func:`rows_weighed_per_tree`).

Multi-output y: scikit-learn weighs a row by the product of its outputs' class weights (a
list of one dict per output, or ``"balanced"`` per output), which no reweighting of pooled
per-output counts gives; the server sends each output's class weights in the set-up instead
(:func:`output_class_weights`) and every client multiplies its rows' weights by them
(``client_targets.class_row_weights``). Under ``"balanced"`` the counts are the handshake's
(``"none"``) or a masked sum of each output's class counts in the first grid round
(``"secure"``). Under ``"balanced_subsample"`` the weights differ per tree (each tree's
bootstrap): a bootstrap round before each batch's first level pools each tree's class
counts and the first Round A carries each tree's weights (:mod:`.bootstrap`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import STAT_TASK, STAT_WEIGHT
from .config import GrowerConfig

__all__ = [
    "balanced",
    "fixed_class_weights",
    "named_class_weights",
    "output_class_weights",
    "rows_hist",
    "rows_weighed_per_tree",
    "set_up_class_weights",
    "weigh",
    "weigh_level",
]


def balanced(class_counts: NDArray[np.float64], present: bool = False) -> NDArray[np.float64]:
    """``n / (n_classes * n_c)``; a class without rows gets 0 (it weighs nothing anyway).

    ``present``: ``n_classes`` counts the classes with rows only, as scikit-learn's
    ``compute_sample_weight("balanced", y, indices=...)`` counts those of a tree's draws.
    """
    counts = np.asarray(class_counts, dtype=np.float64)
    total = counts.sum()
    k = int((counts > 0).sum()) if present else counts.size
    with np.errstate(divide="ignore"):
        return np.where(counts > 0, total / (k * np.maximum(counts, 1e-300)), 0.0)


def fixed_class_weights(
    class_weight: Any, classes: list[Any], class_counts: NDArray[np.float64] | None
) -> NDArray[np.float64] | None:
    """Per-class weights of a dict or ``"balanced"`` (None for None / balanced_subsample)."""
    if class_weight is None or class_weight == "balanced_subsample":
        return None
    if class_weight == "balanced":
        assert class_counts is not None
        return balanced(class_counts)
    if not isinstance(class_weight, dict):
        raise ValueError(
            f"class_weight is a list ({class_weight!r}), the form for multi-output y, but y "
            "has one output; give a dict {label: weight}."
        )
    class_weight = named_class_weights(class_weight, classes)
    weights = np.array([float(class_weight.get(label, 1.0)) for label in classes])
    if not np.any(weights > 0):  # every row would weigh 0: NaN or zero probabilities
        raise ValueError(
            f"class_weight gives every class weight 0 (classes {classes}); no row would weigh."
        )
    return weights


def named_class_weights(class_weight: dict[Any, Any], classes: list[Any]) -> dict[Any, Any]:
    """A ``class_weight`` dict's entries for ``classes``, by scikit-learn's rule.

    A label no class has is ignored when the dict names every class; when it leaves some
    class out, scikit-learn's error (``compute_class_weight``). fedforest refused any such
    label until 2026-12-05, where scikit-learn's forests fit (``tests/test_odd_inputs_14.py``).
    """
    named = {label: w for label, w in class_weight.items() if label in classes}
    missing = [label for label in classes if label not in class_weight]
    if len(named) < len(class_weight) and missing:
        unknown = next(label for label in class_weight if label not in classes)
        raise ValueError(
            f"The classes, {missing}, are not in class_weight (which names {unknown!r}, not "
            f"a class: the classes are {classes}){_type_hint(class_weight, classes)}."
        )
    return named


def _type_hint(class_weight: dict[Any, Any], classes: list[Any]) -> str:
    """Why a key that reads as a class is none: its type (``1`` for ``"1"``, or the reverse).

    A key is matched to a label equal to it, as a dict does (``1``, ``1.0`` and ``True``
    alike; ``"1"`` another), as scikit-learn did until 1.9, whose ``int(label)`` took ``1``
    for ``"1"`` and refused ``{"1": w}`` for it (scikit-learn issue 34883).
    """
    text = {str(c): c for c in classes}
    key = next((k for k in class_weight if k not in classes and str(k) in text), None)
    if key is None:
        return ""
    same_text = text[str(key)]
    return (
        f"; the key {key!r} is of type {type(key).__name__}, the class {same_text!r} of "
        f"type {type(same_text).__name__}: write the keys as y's labels ({same_text!r})"
    )


def output_class_weights(
    class_weight: Any, classes: list[list[Any]], class_counts: list[NDArray[np.float64]] | None
) -> list[list[float]]:
    """Multi-output ``class_weight``: each output's per-class weights, in its class order.

    A list of one dict per output (1 for a label not named), or ``"balanced"`` from each
    output's pooled class counts; otherwise scikit-learn's errors.
    """
    if isinstance(class_weight, dict):
        raise ValueError(
            "For multi-output, class_weight should be a list of dicts, or the string 'balanced'."
        )
    if class_weight == "balanced":
        assert class_counts is not None  # the handshake's, or the masked grid round's
        return [balanced(counts).tolist() for counts in class_counts]
    if len(class_weight) != len(classes):
        raise ValueError(
            "For multi-output, number of elements in class_weight should match number of "
            f"outputs. Got {len(class_weight)} element(s) while having {len(classes)} outputs."
        )
    out = []
    for k, (weights, labels) in enumerate(zip(class_weight, classes, strict=True)):
        if not isinstance(weights, dict):
            raise ValueError(f"class_weight[{k}] is {weights!r}, not a dict of label weights.")
        fixed = fixed_class_weights(weights, labels, None)
        assert fixed is not None
        out.append(fixed.tolist())
    return out


def rows_weighed_per_tree(cfg: GrowerConfig, weighted: bool) -> bool:
    """Whether ``class_weight`` needs the bootstrap round (and the clients weigh rows).

    ``"balanced_subsample"`` with multi-output y (a product of per-output weights), or with
    sample weights (``weighted``: some client weighs its rows; scikit-learn counts each
    tree's draws without them, which the pooled root's weighted class sums do not give).
    """
    return cfg.class_weight == "balanced_subsample" and (cfg.class_outputs > 1 or weighted)


def set_up_class_weights(
    cfg: GrowerConfig, schema: dict[str, Any], ctx: dict[str, Any]
) -> GrowerConfig:
    """``class_weight`` once the class counts are known (after the grid rounds).

    One output: the per-class weights the server applies to the pooled sums
    (``ctx["class_w"]``). Several: each output's weights for the set-up
    (``schema["class_weights"]``, applied by the clients to their rows), or under
    ``"balanced_subsample"`` ``ctx["subsample"]`` (a bootstrap round per batch); the
    returned configuration then has no ``class_weight`` left for the server to apply.
    """
    if cfg.class_weight is None:
        return cfg
    counts = schema["class_counts"]
    if counts is None and cfg.class_weight == "balanced":
        counts = ctx["secure"].class_counts  # a masked sum of the first grid round
        if cfg.class_outputs > 1:  # one block of counts per output
            counts = np.split(counts, np.cumsum(cfg.class_sizes)[:-1])
    if cfg.class_outputs > 1 or rows_weighed_per_tree(cfg, bool(schema["weighted"])):
        ctx["rows_hist"] = cfg.privacy == "secure"  # the clients weigh rows by class
    if rows_weighed_per_tree(cfg, bool(schema["weighted"])):
        # Each tree's weights from a bootstrap round per batch (bootstrap.py), whose
        # replies are checked against the clients' draws.
        ctx["subsample"] = {"n_samples": schema["n_samples"], "draws": schema["draws"]}
        return replace(cfg, class_weight=None)
    if cfg.class_outputs > 1:
        schema["class_weights"] = output_class_weights(cfg.class_weight, schema["classes"], counts)
        return replace(cfg, class_weight=None)
    ctx["class_weight"] = cfg.class_weight
    ctx["class_w"] = fixed_class_weights(cfg.class_weight, schema["classes"], counts)
    ctx["class_w_present"] = cfg.privacy != "dp"  # balanced_subsample: the classes drawn
    return cfg


def rows_hist(ctx: dict[str, Any]) -> dict[str, bool]:
    """Round A's header entry asking for rows in the histograms' weight column, if needed.

    Where the clients weigh their rows by class (multi-output ``class_weight``,
    ``"balanced_subsample"`` with the bootstrap round), a row's weight is its bootstrap
    count times its classes' weights, and a bin of Round A's count histograms (which may
    hold fewer than ``min_aggregate_rows`` rows, even one) would give away its rows'
    classes by its weight; with sample weights it gives a row's weight (times its
    bootstrap count), a value of the client's data. Under ``"secure"`` the weight column
    then counts rows (its candidates are the node's row quantiles); under ``"dp"`` its
    noise hides them (``ctx["weighted"]``: some client's rows weigh other than their
    bootstrap counts).
    """
    weighted = ctx.get("rows_hist") or (ctx.get("weighted") and "dp" not in ctx)
    return {"hist_rows": True} if weighted else {}


def weigh(stats: NDArray[np.float64], w: NDArray[np.float64] | None) -> NDArray[np.float64]:
    """Statistics with class ``c``'s column scaled by ``w[..., c]`` and the weight their sum.

    ``w`` broadcasts against ``stats[..., STAT_TASK:]`` (one row per node, or one for all);
    None returns ``stats`` unchanged.
    """
    if w is None:
        return stats
    out = np.array(stats, dtype=np.float64, copy=True)
    out[..., STAT_TASK:] *= w
    out[..., STAT_WEIGHT] = out[..., STAT_TASK:].sum(axis=-1)
    return out


def weigh_level(
    pooled: NDArray[np.float64],
    builders: list[Any],
    trees: NDArray[np.int64],
    depth: int,
    ctx: dict[str, Any],
) -> NDArray[np.float64]:
    """A level's pooled node statistics reweighted; ``ctx["class_w_nodes"]`` set for it.

    At the roots (``depth == 0``) every tree's builder gets its weights: the fixed ones,
    or under ``"balanced_subsample"`` those of its bootstrap (the pooled root's classes).
    """
    if depth == 0:
        for t, st in zip(trees, pooled, strict=True):
            fixed = ctx["class_w"]
            if fixed is None:  # balanced_subsample: the tree's draws of each class
                builders[t].class_w = balanced(st[STAT_TASK:], ctx["class_w_present"])
            else:
                builders[t].class_w = fixed
    w = np.array([builders[t].class_w for t in trees]).reshape(len(pooled), -1)
    ctx["class_w_nodes"] = w
    return weigh(pooled, w)


def check_some_weight(pooled: NDArray[np.float64], depth: int, ctx: dict[str, Any]) -> None:
    """Refuse roots that all weigh 0: every client's sample weights are zero.

    scikit-learn refuses such weights ("Sample weights must contain at least one non-zero
    number"); ``fit`` does, but under ``fit_federated`` each client only knows its own
    (a client whose rows all weigh 0 takes no part), and the forest was single leaves
    predicting 0, silently. The server sees each root's pooled weight anyway; under "dp"
    it is noisy, not checked.
    """
    if depth > 0 or not ctx["weighted"] or "dp" in ctx or np.any(pooled[:, STAT_WEIGHT] > 0):
        return
    raise ValueError(
        "Sample weights must contain at least one non-zero number: every tree's root "
        "weighs 0 in all (every client's sample_weight is zero, or its bootstraps drew only "
        "rows of weight 0). Give some rows a positive weight."
    )
