"""The warning when every tree of a forest is one leaf: the minimum-rows rule, or dp's noise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._inputs import warn_caller
from ..federated.privacy.rules import default_min_rows
from ..federated.server.config import ForestResult, GrowerConfig
from ..federated.server.resolve import bootstrap_draws, resolve_sizes
from ..tree.arrays import Tree

__all__ = ["SINGLE_LEAF_ADVICE", "noisy_leaves", "single_leaves", "warn_single_leaves"]


def single_leaves(
    trees: Sequence[Tree], privacy: str, cfg: GrowerConfig, n_samples: Mapping[str, int]
) -> str | None:
    """Why every tree is one leaf when the minimum-rows rule is the cause, else None.

    Under "secure"/"dp" no node splits unless each child keeps ``min_aggregate_rows``
    (m) distinct rows (the grower raises ``min_samples_leaf`` to it), so no root of fewer
    than 2 m splits. Said only when every tree is one leaf, every impure root held fewer
    and one of them rows enough for ``min_samples_leaf`` and ``min_samples_split`` alone:
    pure roots, too few rows for those, or roots the rule let split that did not (a target
    varying too little, 250 rows in a test) give scikit-learn one-leaf trees too. Under
    "dp" the roots' counts and impurities are noisy releases (22 rows at epsilon 5: noisy
    roots of 0 to 106 rows, some "pure", and no warning), so the roots' distinct rows are
    the bootstrap's expectation from the clients' public row counts (``n_samples``, the
    handshake's): ``n_k (1 - (1 - 1 / n_k)^draws_k)`` summed; the text quotes the largest
    noisy root as an estimate.
    """
    if privacy == "none" or any(t.feature.size > 1 for t in trees):
        return None
    n_rows = sum(n_samples.values())
    sizes = resolve_sizes(cfg, n_rows)
    leaf, split = sizes.min_samples_leaf, sizes.min_samples_split
    m = cfg.min_aggregate_rows or default_min_rows(leaf)
    if privacy == "dp":
        largest = max((int(t.n_node_samples[0]) for t in trees), default=0)
        roots = [round(_distinct_rows(cfg, n_samples))]
    else:  # impure beyond the rounding of secure sums (a constant y's root: 7e-14 seen)
        roots = [int(t.n_node_samples[0]) for t in trees if t.impurity[0] > _pure(t)]
    if not roots or max(roots) >= 2 * m or max(roots) < max(2 * leaf, split):
        return None
    how = "" if cfg.min_aggregate_rows else " (max(10, 2 * min_samples_leaf) unless set)"
    # Under "dp" a root's row count is a noisy release: quoted as an estimate, not a count,
    # beside the bootstrap's expected distinct rows (from the public row counts).
    held = (
        f"about {largest} rows (a noisy count, privacy='dp'), and a tree's bootstrap draws "
        f"about {max(roots)} distinct rows of the {n_rows}"
        if privacy == "dp"
        else f"{max(roots)}"
    )
    return (
        f"every tree of this forest is a single leaf (it predicts the training prior): under "
        f"privacy={privacy!r} a node splits only if each child keeps min_aggregate_rows = "
        f"{m}{how} distinct rows, and the largest root held {held}, fewer than 2 * {m}."
    )


def noisy_leaves(
    trees: Sequence[Tree],
    cfg: GrowerConfig,
    n_samples: Mapping[str, int],
    report: Mapping[str, Any] | None,
) -> str | None:
    """Under "dp", why every tree is one leaf when rows enough for every rule gave none.

    Said when every tree is one leaf and a tree's bootstrap draws, in expectation, at
    least ``2 m`` distinct rows and enough for ``min_samples_leaf`` and
    ``min_samples_split`` (fewer is :func:`single_leaves`' case or scikit-learn's: never
    both), unless a setting stops splits by itself (``min_impurity_decrease``,
    ``ccp_alpha``). The noise is then what no split stood out of (1,200 rows at epsilon 1,
    10 trees of depth 4: noise of 234 rows on each count; a test); a target with nothing to
    split is not told apart, its roots being noisy releases.
    """
    if cfg.privacy != "dp" or report is None or any(t.feature.size > 1 for t in trees):
        return None
    if cfg.min_impurity_decrease > 0 or cfg.ccp_alpha > 0:
        return None
    n_rows = sum(n_samples.values())
    sizes = resolve_sizes(cfg, n_rows)
    m = cfg.min_aggregate_rows or default_min_rows(sizes.min_samples_leaf)
    need = max(2 * m, 2 * sizes.min_samples_leaf, sizes.min_samples_split)
    if round(_distinct_rows(cfg, n_samples)) < need:
        return None
    return (
        f"every tree of this forest is a single leaf (it predicts the training prior): under "
        f"privacy='dp' with epsilon={report['epsilon']:g} no split stood out of the noise "
        f"on the released sums (a standard deviation of {report['sigma']:.3g} rows on each "
        f"row count, privacy_report_['sigma'], for {n_rows} rows in all). Use a larger "
        "epsilon, more rows, or fewer trees or a smaller max_depth (each tree and "
        f"level takes a share of the budget, here n_estimators={cfg.n_estimators} x "
        f"max_depth={cfg.max_depth}, beside the fit's fixed share: its grid rounds and a "
        "regressor's targets' histogram; "
        "docs/privacy.md)."
    )


def _distinct_rows(cfg: GrowerConfig, n_samples: Mapping[str, int]) -> float:
    """The distinct rows a tree's client-stratified bootstrap draws, in expectation."""
    draws = bootstrap_draws(cfg, dict(n_samples))
    if not cfg.bootstrap:
        return float(sum(n_samples.values()))
    return float(
        sum(n * (1.0 - (1.0 - 1.0 / n) ** draws.get(c, n)) for c, n in n_samples.items() if n)
    )


#: What :func:`warn_single_leaves` advises (a swarm ``Peer`` sets its own on its estimator).
SINGLE_LEAF_ADVICE = (
    "Give each tree more rows (more rows per client, more clients), lower "
    "min_aggregate_rows (below 10 warns: a sum over few rows tells much about each row, "
    'docs/privacy.md), or use privacy="none" where the server may see the rows.'
)


def _pure(tree: Tree) -> float:
    """The root impurity below which it counts as pure (relative to its values' scale)."""
    return 1e-9 * max(1.0, float(np.abs(tree.value[0]).max()) ** 2)


def warn_single_leaves(est: Any, result: ForestResult) -> None:
    """Warn (UserWarning) when the minimum-rows rule, or dp's noise, left every tree one leaf.

    Not for a classifier whose every output has one class (nothing to split, public at
    the handshake).
    """
    cfg, n_samples = est._config(), result.client_n_samples
    why = single_leaves(est.trees_, est.privacy, cfg, n_samples)
    if why is not None:
        advice = getattr(est, "_single_leaf_advice", SINGLE_LEAF_ADVICE)
        warn_caller(f"{why} {advice}", UserWarning)
        return
    if np.all(np.asarray(getattr(est, "n_classes_", 2)) <= 1):
        return
    why = noisy_leaves(est.trees_, cfg, n_samples, result.privacy_report)
    if why is not None:
        warn_caller(why, UserWarning)
