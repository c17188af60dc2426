"""What a configuration means for a given federation, once the handshake has counted it.

Features per node (``max_features``), fractional sizes in rows, each client's bootstrap
draws (``max_samples``) and the features constant over the pooled rows: small pure
functions of the configuration and of what the server learnt at the handshake.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import resolve_max_features
from .config import GrowerConfig

__all__ = [
    "bootstrap_draws",
    "check_combinations",
    "check_max_features",
    "check_top_l",
    "resolve_max_features",
    "resolve_sizes",
    "root_constant",
]


def resolve_sizes(cfg: GrowerConfig, n_rows: int) -> GrowerConfig:
    """Fractional ``min_samples_leaf`` / ``min_samples_split`` as scikit-learn reads them.

    A float is a fraction of the pooled rows (the handshake's counts, a sum):
    ``ceil(f * n)`` rows per leaf, ``max(2, ceil(f * n))`` to split.
    """
    leaf: float = cfg.min_samples_leaf
    split: float = cfg.min_samples_split
    if isinstance(leaf, float):
        leaf = max(1, int(np.ceil(leaf * n_rows)))
    if isinstance(split, float):
        split = max(2, int(np.ceil(split * n_rows)))
    return replace(cfg, min_samples_leaf=int(leaf), min_samples_split=int(split))


def check_top_l(top_l: int | None, n_features: int) -> None:
    """``top_l`` is at most the number of features, as ``max_features``.

    Its shortlist holds features: each client allocated its rankings at ``top_l``
    columns, so ``top_l=10**9`` hung the fit.
    """
    if top_l is not None and top_l > n_features:
        raise ValueError(
            f"top_l must be in [1, n_features]; got top_l={top_l} with n_features={n_features}."
        )


def check_max_features(max_features: Any, n_features: int) -> None:
    """An int ``max_features`` is at most the number of features (scikit-learn's rule).

    It was clipped to the features silently, where scikit-learn's forest refuses it.
    """
    is_int = isinstance(max_features, (int, np.integer)) and not isinstance(max_features, bool)
    if is_int and max_features > n_features:
        raise ValueError(
            f"max_features must be in (0, n_features]; got max_features={max_features} "
            f"with n_features={n_features}."
        )


def bootstrap_draws(cfg: GrowerConfig, n_samples: dict[str, int]) -> dict[str, int]:
    """Each client's bootstrap size under ``max_samples`` (empty: n_k, the default).

    Stratified by client like the bootstrap itself: ``round(f * n_k)``, at least 1, with
    ``f`` the fraction (a float) or ``max_samples / n`` (an int, at most n).
    """
    if cfg.max_samples is None or not cfg.bootstrap:
        return {}
    n = sum(n_samples.values())
    if isinstance(cfg.max_samples, float):
        frac = cfg.max_samples
    else:
        if cfg.max_samples > n:
            raise ValueError(
                f"max_samples must be <= n_samples={n} (the pooled rows), got {cfg.max_samples}."
            )
        frac = cfg.max_samples / n
    return {name: max(1, int(round(frac * n_k))) for name, n_k in n_samples.items()}


def root_constant(schema: dict[str, Any], ctx: dict[str, Any]) -> NDArray[np.bool_]:
    """Features constant over the pooled rows, from what the server already has.

    A categorical feature whose pooled category union (the handshake's, at every privacy
    level) holds one category. Numeric features: under "none" the clients' ranges
    (handshake); under "secure" the pooled coarse histogram (all rows in one bin: its edges
    come from the feature's moments, whose variance is 0), and a column known in fewer than
    ``min_aggregate_rows`` rows, which has no grid, and (under "secure") a categorical
    column whose pooled rows per code form no two category groups (``rare_codes``);
    under "dp" (noisy counts) none are known.
    """
    numeric = ctx["n_categories"] == 0
    one_category = ctx["n_categories"] == 1
    if schema.get("ranges") is not None:
        lo, hi = schema["ranges"]
        return np.asarray(one_category | (numeric & (lo == hi)))
    state = ctx.get("secure")
    if state is None or "dp" in ctx:
        return np.asarray(one_category)
    one_bin = np.array([m.size > 0 and int((m > 0).sum()) == 1 for m in state.root_mass])
    # A numeric column known in fewer than m rows has no grid (sparse_columns.known_enough,
    # missing everywhere, say): it never splits, as a constant one. Drawn as a candidate, it
    # made a node whose drawn features were all such a leaf (a tree of one leaf whenever
    # the root drew an all-NaN column; scikit-learn draws on past a constant feature).
    no_grid = np.array([m.size == 0 for m in state.root_mass])
    # A categorical column whose codes form no two groups of m rows over the whole
    # federation (the first grid round's pooled rows per code) splits no node either.
    groupless = np.zeros(numeric.size, dtype=bool)
    groupless[state.groupless] = True
    return np.asarray(one_category | groupless | (numeric & (one_bin | no_grid)))


def check_combinations(cfg: GrowerConfig) -> None:
    """Refuse settings that do not go together (before anything is sent)."""
    if (cfg.class_weight is not None or cfg.min_weight_fraction_leaf) and (
        cfg.split_rule == "avgimp"
    ):
        raise ValueError(
            'class_weight and min_weight_fraction_leaf are not available with split_rule="avgimp"'
            ": AvgImp sums the clients' own local gains and left rows, without the weights."
        )
    if cfg.binning == "global" and cfg.top_l:
        raise ValueError(
            'top_l is not available with binning="global": its candidates travel before the '
            "clients' rankings that shortlist the features."
        )
    if cfg.n_bins is None and cfg.top_l:
        raise ValueError(
            "top_l is not available with n_bins=None: the verification mode evaluates every "
            "drawn feature at every distinct value (pooled CART's split), and Top-L would "
            "shortlist them by the clients' local rankings. Use one or the other."
        )
    if cfg.criterion == "poisson" and cfg.split_rule == "avgimp":
        raise ValueError(
            'criterion="poisson" is not available with split_rule="avgimp": a client\'s local '
            "Poisson gain is undefined where one of its children holds no positive target."
        )
    if cfg.privacy != "dp" and (cfg.epsilon is not None or cfg.delta is not None):
        which = "epsilon" if cfg.epsilon is not None else "delta"
        raise ValueError(
            f"{which}={getattr(cfg, which)!r} is a privacy budget, used only under "
            f'privacy="dp"; privacy="{cfg.privacy}" adds no noise. Set privacy="dp" for '
            "differential privacy, or leave epsilon and delta at None."
        )
    if cfg.privacy != "dp" and cfg.dp_colluders:
        raise ValueError(
            f'dp_colluders={cfg.dp_colluders!r} scales the noise shares of privacy="dp"; '
            f'privacy="{cfg.privacy}" adds no noise. Set privacy="dp", or leave dp_colluders '
            "at 0."
        )
