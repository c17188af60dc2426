"""A batch's set-up: the header that opens it, and the settings digest it is bound to.

Every batch of trees starts with a set-up: its first request (its first Round A, or the
bootstrap round) carries the fit's settings, the targets' standardisation and, under
``"secure"`` and ``"dp"``, the settings digest each client binds its bootstrap to
(:mod:`.digest`). The digest is taken per batch over the clients present and the drops so
far (:func:`batch_digest`): without a drop every batch has the fit's digest; after one,
the survivors draw bootstraps that no fit without that drop (nor one without the dropped
client from the start) draws, so the server cannot difference two fits' sums over the
same survivors' rows into the dropped client's.

Under ``"secure"`` and ``"dp"`` a drop in a batch's set-up (its bootstrap round or its
roots' Round A) is not recovered: the round raises :class:`.secure_sums.SetUpDropped`,
and the grower sets the batch up again from scratch under the survivors' digest (the
set-up round again, in place of the recovery round), so no sum over the survivors' rows
under the full set's bootstraps is released, and under ``"dp"`` no sum short of the
dropped client's noise share (docs/privacy.md, "Drops").
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..federation import Federation
from .config import GrowerConfig
from .digest import settings_digest

__all__ = ["batch_digest", "fit_digest", "setup_header", "tree_digests"]


def setup_header(
    cfg: GrowerConfig, schema: dict[str, Any], first: int, n_trees: int
) -> dict[str, Any]:
    """The set-up the batch of trees ``first .. first + n_trees - 1`` opens with."""
    return {
        "classes": schema["classes"],
        "first_tree": first,
        "n_trees": n_trees,
        "seed": cfg.seed,
        "bootstrap": cfg.bootstrap,
        "draws": schema["draws"],
        "n_bins": cfg.n_bins,
        "binning": cfg.binning,
        "local_candidates": cfg.uses_local_candidates,
        "min_samples_leaf": cfg.min_samples_leaf,
        "clients": schema["clients"],
        "categories": schema["categories"],
        "split_rule": cfg.split_rule,
        "top_l": cfg.top_l,
        "criterion": cfg.criterion,
        "privacy": cfg.privacy,
        "weighted": schema["weighted"],
        **({"class_weights": schema["class_weights"]} if "class_weights" in schema else {}),
        **_secure_setup(schema),
        **_client_sample(cfg, len(schema["clients"]), first, n_trees),
    }


def _secure_setup(schema: dict[str, Any]) -> dict[str, Any]:
    """Under "secure": the targets' pooled standardisation and the sample weights' band."""
    state = schema.get("secure")
    if state is None:
        return {}
    center, scale = state.y_center, state.y_scale  # floats, or per output (as lists)
    out = {"y_center": np.asarray(center).tolist(), "y_scale": np.asarray(scale).tolist()}
    if state.weight_band is not None:  # the clients trim their sample weights to it
        out["weight_band"] = list(state.weight_band)
    if state.code_map:  # codes few rows hold, merged (rare_codes.py)
        out["code_map"] = {str(j): code.tolist() for j, code in state.code_map.items()}
    return out


def _client_sample(cfg: GrowerConfig, n_clients: int, first: int, n_trees: int) -> dict[str, Any]:
    """Client subsampling: per tree, the clients (canonical indices) that take part.

    Drawn on the server from (seed, tree): the same for any transport or client order. The
    other clients give that tree zero weight.
    """
    if cfg.client_fraction >= 1.0:
        return {}
    m = max(1, int(round(cfg.client_fraction * n_clients)))
    chosen = [
        sorted(np.random.default_rng([cfg.seed, t, 2]).choice(n_clients, m, replace=False).tolist())
        for t in range(first, first + n_trees)
    ]
    return {"tree_clients": chosen}


def batch_digest(
    cfg: GrowerConfig, schema: dict[str, Any], fed: Federation, d: int, first_sum: int
) -> NDArray[np.uint8]:
    """The settings digest of a batch set up now: over the clients present and the drops.

    ``fed.dropped`` (``on_client_failure="drop"``) lists each dropped client and the round
    it failed in; those after the fit's first masked round (``first_sum``, its index) are
    bound: the state a set-up grows on (the grids, the earlier trees and their guides) then
    holds sums over that client's rows, and it is the same in two fits with the same
    settings and the same drops, so the same digest goes with the same releases. A client
    dropped by then took part in no released sum: the fit is the survivors' (their digest).
    """
    live = {n: k for n, k in schema["n_samples"].items() if n in fed.client_names}
    dropped = [(n, r) for n, r in getattr(fed, "dropped", []) if r > first_sum]
    # Columns of one level never split: such a column and a constant numeric one grow alike.
    split_as_sets = [int(j) for j, levels in schema["categories"].items() if len(levels) > 1]
    state = schema.get("secure")
    tag = None if state is None else state.data_tag
    classes = schema.get("classes")
    return settings_digest(
        cfg, live, schema["draws"], d, dropped, split_as_sets, tag, class_list=classes
    )


def tree_digests(
    batches: list[tuple[int, NDArray[np.uint8]]],
    first: int,
    n_trees: int,
    prior: NDArray[np.uint8] | None = None,
) -> NDArray[np.uint8] | None:
    """Per tree (of ``n_trees`` from tree 0), the digest its bootstrap was bound to.

    ``batches``: each batch's first tree and digest, in order; the trees before ``first``
    (a warm start's) have ``prior``, the digest the fit began with, which
    ``digest.check_warm_digest`` found to be theirs. None when every tree has the same
    (the clients keep the set-up's).
    """
    if not batches:
        return None
    earlier = [prior] if first > 0 and prior is not None else []
    if len({b.tobytes() for b in [*earlier, *(d for _, d in batches)]}) <= 1:
        return None
    out = np.empty((n_trees, batches[0][1].size), dtype=np.uint8)
    out[:first] = prior if prior is not None else batches[0][1]
    for i, (start, digest) in enumerate(batches):
        stop = batches[i + 1][0] if i + 1 < len(batches) else n_trees
        out[start:stop] = digest
    return out


def fit_digest(batches: list[tuple[int, NDArray[np.uint8]]], digest: Any) -> str | None:
    """The fit's digest as the model keeps it: ``""`` when its batches had several."""
    if digest is None:
        return None
    if len({b.tobytes() for _, b in batches}) > 1:
        return ""
    return str(np.asarray(digest).tobytes().hex())
