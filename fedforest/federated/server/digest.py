"""The settings digest: what a secure fit's bootstraps are bound to.

Under ``privacy="secure"`` a client seeds its bootstrap with a secret derived from its
data, so two fits with the same ``random_state`` drew the same rows whatever their other
settings, and the server could difference the two fits' releases (another ``n_bins``
puts other candidates over the same root rows) into sums over a few rows. The server
therefore sends, with the set-up, a SHA-256 digest of the resolved settings that shape
what is released (:data:`~..protocol.SETTINGS_DIGEST`), and each client binds its
bootstrap secret to it (``client_secure.bind_secret``): fits with other settings draw
independent bootstraps, the same settings the same forest.

The digest covers every field of the resolved :class:`GrowerConfig` but those that do not
shape the releases of growth (:data:`UNBOUND`), with ``max_samples`` as the bootstrap
sizes it resolves to per client and ``max_features`` as the features drawn per node. A
field added to the configuration is covered unless it is named here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import resolve_max_features
from ..protocol import SETTINGS_DIGEST
from .config import GrowerConfig

__all__ = [
    "UNBOUND",
    "check_warm_digest",
    "digest_arrays",
    "settings_digest",
    "warm_history",
    "with_history",
]

#: Fields left out: pruning follows growth (``ccp_alpha``), the number of trees and the
#: first one (``warm_start``: a tree's bootstrap is the one it has in one fit; the earlier
#: trees' digest and columns, checked apart), the seed
#: (already in the draws), how the work is run (threads, progress, batches of trees,
#: failures) and the out-of-bag score (asked after growth, over every row under
#: ``"secure"``). ``max_samples`` enters as the resolved sizes, ``max_features`` as ``k``.
UNBOUND = frozenset(
    (
        "ccp_alpha",
        "n_estimators",
        "first_tree",
        "warm_digest",
        "warm_schema",
        "seed",
        "n_jobs",
        "verbose",
        "tree_batch_size",
        "oob_score",
        "on_client_failure",
        "max_samples",
        "max_features",
        "classes_from_rows",
    )
)
_DOMAIN = b"fedforest settings digest v1\x00"
#: Fields covered only when ``oob_score`` is set and they differ from their default:
#: ``ccp_alpha`` prunes the trees the out-of-bag round scores, so two fits one pruning
#: apart (the same bootstraps) released squared errors that differed by the out-of-bag
#: rows of the pruned branch, often fewer than ``min_aggregate_rows`` (docs/privacy-findings.md,
#: "Fits with the same ``random_state`` and other settings"). A fit without the score,
#: or unpruned, keeps its digest.
_WITH_OOB = {"ccp_alpha": 0.0}
#: Fields covered only when set (declared categories and classes): a fit without them
#: keeps the digest, so the bootstraps, it had before the fields existed. Classes ``fit``
#: declared from its rows (``classes_from_rows``: the codes 0..K-1, which the class sizes
#: cover) are left out too, so declaring them changed no fit's digest.
_WHEN_SET = frozenset(("categories", "classes"))
#: Fields covered only when they differ from their default (added later: a fit at the
#: default keeps the digest, so the bootstraps, it had before the field existed).
_UNLESS_DEFAULT = {"dp_colluders": 0}


def _plain(value: Any) -> Any:
    """``value`` as JSON-able plain values, with one text per meaning (dict keys sorted)."""
    if isinstance(value, dict):
        items = sorted((json.dumps(_plain(k), sort_keys=True), _plain(v)) for k, v in value.items())
        return {"dict": [list(kv) for kv in items]}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in np.asarray(value, dtype=object).tolist()]
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, float):
        return {"float": value.hex()}  # exact; 1.0 and 1 stay apart as the code tells them
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"settings digest: cannot read a {type(value).__name__} setting")


def _positions(classes: Any) -> list[Any]:
    """Declared classes as their positions (one list per output for multi-output y)."""
    if classes and isinstance(classes[0], list | tuple | np.ndarray):
        return [list(range(len(c))) for c in classes]
    return list(range(len(classes)))


def settings_digest(
    cfg: GrowerConfig,
    n_samples: dict[str, int],
    draws: dict[str, int],
    n_features: int,
    dropped: list[tuple[str, int]] | None = None,
    categorical: list[int] | None = None,
    data_tag: NDArray[np.uint64] | None = None,
    class_list: Any = None,
) -> NDArray[np.uint8]:
    """SHA-256 of the resolved settings that shape a fit's releases (32 bytes).

    ``cfg`` is the configuration as the grower resolved it (sizes in rows, the minimum
    aggregate rows, the class sizes); ``draws`` each client's bootstrap size under
    ``max_samples`` (missing: its ``n_samples``); ``dropped`` the clients dropped so far
    and the rounds they failed in (``on_client_failure="drop"``; covered only when there
    are some, so a fit without a drop keeps its digest); ``categorical`` the columns split
    as categories (set splits) that have two levels or more (covered when there are some:
    the data secret of a column of codes 0..k-1 is its numeric one, so without them a refit
    that only made such a column categorical drew the same bootstraps and other splits,
    and nested nodes of the two models gave rows' targets; docs/privacy-findings.md, "Red
    team 7"); ``data_tag`` the pooled sum of the clients' data tags (``"secure"``: one value
    changed at any client changes it, so every client redraws; without it a refit after a
    value corrected in place redrew that client's bootstrap only, and nested nodes of the
    two models isolated other clients' rows: docs/privacy-findings.md, "Red team 6").
    ``class_list``: the fit's classes (the handshake's); declared classes, and a
    ``class_weight`` dict's labels, enter as their positions in it, as ``fit``'s clients
    hold them (its codes 0..K-1): ``fit_federated`` on clients holding the labels (text,
    say) drew other bootstraps than ``fit`` on their rows.
    """
    fields = {
        f.name: _plain(getattr(cfg, f.name))
        for f in dataclasses.fields(cfg)
        if f.name not in UNBOUND
        and not (f.name in _WHEN_SET and getattr(cfg, f.name) is None)
        and not (f.name in _UNLESS_DEFAULT and getattr(cfg, f.name) == _UNLESS_DEFAULT[f.name])
    }
    if cfg.classes_from_rows:
        fields.pop("classes", None)
    elif cfg.classes is not None:
        fields["classes"] = _positions(cfg.classes)
    if isinstance(cfg.class_weight, dict) and class_list is not None:
        # The weights as used: floats (fit's are), of the classes only (scikit-learn ignores
        # a label no class has); fit_federated's {0: 1} drew other bootstraps than fit's.
        index = {label: i for i, label in enumerate(class_list)}
        weights = {index[k]: float(v) for k, v in cfg.class_weight.items() if k in index}
        fields["class_weight"] = _plain(weights)
    if cfg.oob_score:
        fields.update(
            {k: _plain(getattr(cfg, k)) for k, v in _WITH_OOB.items() if getattr(cfg, k) != v}
        )
    fields["bootstrap_draws"] = {
        name: int(draws.get(name, n)) if cfg.bootstrap else int(n)
        for name, n in sorted(n_samples.items())
    }
    fields["features_per_node"] = resolve_max_features(cfg.max_features, n_features)
    if categorical:
        fields["categorical_columns"] = sorted(int(j) for j in categorical)
    if data_tag is not None:
        fields["data_tag"] = np.asarray(data_tag, dtype="<u8").tobytes().hex()
    if dropped:
        fields["dropped"] = [[str(name), int(r)] for name, r in dropped]
    text = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return np.frombuffer(hashlib.sha256(_DOMAIN + text).digest(), dtype=np.uint8).copy()


def warm_history(
    cfg: GrowerConfig, digest: NDArray[np.uint8], guides: dict[str, NDArray[Any]] | None
) -> bytes | None:
    """A warm start's earlier trees, when they were grown under other settings (else None).

    The new trees' digest leaves out ``first_tree`` and the earlier trees' digest, so that
    a warm start with the same settings draws the bootstraps of one fit and grows its
    forest. After a change of settings the new trees would still draw the bootstraps of a
    fit with the new settings from scratch, but grow on other guides (the earlier trees'
    best thresholds, ``guides.py``): other candidates over the same rows, whose sums the
    server differences across the two fits into rows' targets (docs/privacy-findings.md,
    "Red team 6"). So the digest then covers the earlier trees' digest and their guides:
    fits with other histories draw independent bootstraps, the same history the same.
    """
    if cfg.first_tree == 0 or cfg.warm_digest is None:
        return None
    if cfg.warm_digest == digest.tobytes().hex():  # the same settings: one fit's forest
        return None
    h = hashlib.sha256(_DOMAIN + b"warm history\x00" + cfg.warm_digest.encode("ascii"))
    for name, entries in sorted((guides or {}).items()):
        h.update(name.encode("ascii"))
        h.update(np.ascontiguousarray(np.asarray(entries, dtype=np.float64)).tobytes())
    return h.digest()


def with_history(digest: NDArray[np.uint8], history: bytes | None) -> NDArray[np.uint8]:
    """``digest`` covering a warm start's :func:`warm_history` (unchanged without one)."""
    if history is None:
        return digest
    folded = hashlib.sha256(_DOMAIN + b"with history\x00" + digest.tobytes() + history)
    return np.frombuffer(folded.digest(), dtype=np.uint8).copy()


def digest_arrays(msg_header: dict[str, Any], ctx: dict[str, Any]) -> dict[str, NDArray[Any]]:
    """The digest as a request's array when the request carries the set-up (else none)."""
    if "setup" in msg_header and SETTINGS_DIGEST in ctx:
        return {SETTINGS_DIGEST: ctx[SETTINGS_DIGEST]}
    return {}


def check_warm_digest(cfg: GrowerConfig, digest: NDArray[np.uint8]) -> None:
    """Under ``warm_start`` with ``oob_score``: refuse settings the earlier trees lack.

    The out-of-bag round has each client recompute every tree's bootstrap from the
    current digest: earlier trees grown under another digest (other settings, or other
    clients present) would be scored on the wrong rows, silently. Under ``"dp"`` the
    clients' secret is random per fit, so no earlier tree's bootstrap can be recomputed.
    """
    if cfg.first_tree == 0 or not cfg.oob_score or cfg.warm_digest is None:
        return
    if cfg.privacy == "dp":
        raise ValueError(
            "warm_start with oob_score under privacy='dp': each fit's clients draw their "
            "bootstraps from a fresh random secret (one row must not change them), so the "
            f"first {cfg.first_tree} trees' out-of-bag rows cannot be recomputed. Set "
            "oob_score=False, or fit anew with warm_start=False."
        )
    if cfg.warm_digest != digest.tobytes().hex():
        raise ValueError(
            f"warm_start with oob_score under privacy={cfg.privacy!r}: the settings that "
            "bind the bootstraps (every parameter but n_estimators, random_state, n_jobs, "
            "verbose, tree_batch_size, oob_score, on_client_failure, and ccp_alpha unless "
            "oob_score is set), the clients present, or their data (under 'secure' "
            f"the digest covers the clients' data tags), differ from those the first "
            f"{cfg.first_tree} trees were grown with, so their out-of-bag rows cannot be "
            "recomputed. Keep the settings and data, set oob_score=False, or fit anew with "
            "warm_start=False."
        )
