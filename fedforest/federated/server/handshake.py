"""The handshake: the clients' schemas checked against each other; the global class list."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..federation import Federation
from ..label_dtypes import pooled_dtype
from ..protocol import HANDSHAKE, PROTOCOL_VERSION, CommunicationLedger, Message, expect_array
from .checks import Check, InvalidReply, check_handshake, label_type
from .config import GrowerConfig
from .domains import check_declared_classes, domain_request, unify_categories
from .merge import merge_sketch_rows
from .rounds import exchange
from .secure_setup import refuse_small_federation
from .target_scale import ZERO_SUM

__all__ = ["check_warm_schema", "handshake"]


def handshake(fed: Federation, cfg: GrowerConfig, ledger: CommunicationLedger) -> dict[str, Any]:
    """Check that the clients' schemas agree; fix the global class list."""
    check_declared_classes(cfg)
    request = {
        "protocol": PROTOCOL_VERSION,
        "task": cfg.task,
        # Per-feature min and max: under "none" (data values are no secret there) for the
        # histogram baseline and for the features constant over all rows.
        "ranges": cfg.privacy == "none",
        "privacy": cfg.privacy,
        **domain_request(cfg),  # declared levels and classes; under "secure" the level rule
    }
    if cfg.criterion == "poisson":  # targets >= 0: a client refuses others here, not later
        request["criterion"] = "poisson"
    if cfg.binning == "global":  # per-feature quantile sketches of every client's rows
        request["feature_sketch"] = int(cfg.n_bins or 32)
    ranges = cfg.privacy == "none"
    check = check_handshake(cfg.task, cfg.privacy, ranges)
    if cfg.binning == "global":
        check = _with_feature_sketch(check, int(cfg.n_bins or 32))
    replies = exchange(fed, ledger, Message(HANDSHAKE, request), check)
    _check_schemas(replies)
    first_name, first = replies[0]
    names = first.header["feature_names"]
    if names is not None and any(rep.header["feature_names"] != names for _, rep in replies):
        # The same names in another order: every client puts its columns in the first
        # client's order and answers the handshake again (one more round, only then).
        request = {**request, "feature_order": names}
        replies = exchange(fed, ledger, Message(HANDSHAKE, request), check)
        _check_schemas(replies)
        first_name, first = replies[0]
        names = first.header["feature_names"]
        for name, rep in replies:
            if rep.header["feature_names"] != names:
                raise ValueError(
                    f"Client {name!r} did not put its columns in the federation's order {names}."
                )
    # Too few rows for any sum refused first: no client then names a label (under
    # "secure" only those of m rows), and the labels' refusal hid the cause.
    refuse_small_federation(cfg, {name: int(rep.header["n_samples"]) for name, rep in replies})
    if cfg.criterion == "poisson" and cfg.privacy == "none":  # scikit-learn's np.sum(y) > 0
        if not any(rep.header["targets_positive"] for _, rep in replies):
            raise ValueError(ZERO_SUM)  # (under "secure"/"dp": the grid round's sums)
    d = first.header["n_features"]
    categories = unify_categories(replies, names, cfg)
    n_outputs = _n_outputs(replies, cfg)
    clients = [name for name, _ in replies]
    check_warm_schema(cfg.warm_schema, d, names, categories, n_outputs, clients)
    classes: list[Any] | None = None
    class_counts: Any = None  # an array, or one per output
    if cfg.task == "classification":
        per_output = [
            _classes(replies, cfg, o if n_outputs > 1 else None) for o in range(n_outputs)
        ]
        if n_outputs == 1:
            classes, class_counts = per_output[0]
        else:  # one class list (and under "none" its counts) per output
            classes = [c for c, _ in per_output]
            class_counts = [n for _, n in per_output] if cfg.privacy == "none" else None
    edges = pooled = None
    if ranges:
        lo = np.min([expect_array(m, "feature_min", "f", (d,), n) for n, m in replies], axis=0)
        hi = np.max([expect_array(m, "feature_max", "f", (d,), n) for n, m in replies], axis=0)
        pooled = (lo, hi)
    if cfg.binning == "histogram":
        assert pooled is not None
        lo, hi = pooled
        b = cfg.n_bins or 32
        edges = lo[:, None] + (hi - lo)[:, None] * (np.arange(1, b) / b)[None, :]
    if cfg.binning == "global":
        edges = global_grid(replies, d, int(cfg.n_bins or 32), categories)
    # Checked with the labels (checks.check_handshake): only a classifier's count.
    codes = [rep.header["label_dtype"] for _, rep in replies if "label_dtype" in rep.header]
    missing = np.zeros(d, dtype=bool)  # columns with a missing value at some client
    for _, rep in replies:
        missing[rep.header.get("missing_features", [])] = True
    return {
        "missing": missing,
        # Some client's rows carry sample weights (the weights themselves stay there).
        "weighted": any(rep.header.get("weighted", False) for _, rep in replies),
        "sample_weighted": any(rep.header.get("weighted", False) for _, rep in replies),
        "client_missing": {name: rep.header.get("missing_features", []) for name, rep in replies},
        "clients": clients,
        "categories": categories,
        "edges": edges,
        "ranges": pooled,
        "n_features": int(d),
        "n_outputs": n_outputs,
        "feature_names": names,
        "classes": classes,
        # The dtype of the clients' y together (scikit-learn's classes_'), unless declared.
        "label_dtype": pooled_dtype(codes) if classes and cfg.classes is None else None,
        "class_counts": class_counts,
        "n_samples": {name: int(rep.header["n_samples"]) for name, rep in replies},
        "public_keys": public_keys(replies) if cfg.privacy != "none" else {},
    }


def check_warm_schema(
    warm: Any,
    d: int,
    names: list[str] | None,
    categories: dict[str, list[Any]] | None,
    n_outputs: int | None = None,
    clients: list[str] | None = None,
) -> None:
    """Under ``warm_start``, the clients' columns must be the earlier trees' columns.

    The trees hold column positions and category codes (positions in the sorted category
    lists): other columns, the same in another order, or a category level more or less
    gave the earlier trees other features or categories, silently (fewer columns under
    "secure" crashed in the guides). ``categories`` None: the names only (``fit``). The
    targets per row too (``n_outputs``, from the handshake): a y of another number of
    columns grew a forest, then failed in NumPy's concatenation of the trees' values.
    And the clients (from the handshake), when the earlier trees split on the client index
    H: its set splits hold clients by position in ``clients_``, which a warm fit on other
    clients replaced, so that the earlier trees routed one client's rows as another's.
    """
    if warm is None:
        return
    n_old, names_old, cats_old, outputs_old, clients_old = warm
    if clients is not None and clients_old is not None and tuple(clients) != clients_old:
        raise ValueError(
            "warm_start adds trees to a forest whose trees split on the client index, which "
            f"reads clients by position; the clients differ from the first fit's: clients "
            f"{list(clients_old)} then {list(clients)}. Fit on the first fit's clients, or "
            "set warm_start=False to fit a new forest."
        )
    if n_outputs is not None and n_outputs != outputs_old:
        raise ValueError(
            f"warm_start adds trees to a forest fitted on y of {outputs_old} output(s), but "
            f"the clients' y has {n_outputs}; give y the first fit's columns, or set "
            "warm_start=False to fit a new forest."
        )
    cats = cats_old if categories is None else tuple((j, tuple(v)) for j, v in categories.items())
    found = []
    if d != n_old or (names is not None and names_old is not None and tuple(names) != names_old):
        found.append(f"{n_old} columns {list(names_old or [])} then {d} {names or []}")
    if dict(cats) != dict(cats_old):
        found.append(f"categories {dict(cats_old)} then {dict(cats)} (by column index)")
    if found:
        raise ValueError(
            "warm_start adds trees to a forest whose trees read columns by position and "
            f"categories by code; the clients' columns differ from the first fit's: "
            f"{'; '.join(found)}. Give the first fit's columns, in its order, with the same "
            "categories, or set warm_start=False to fit a new forest."
        )


def _classes(
    replies: list[tuple[str, Message]], cfg: GrowerConfig, output: int | None
) -> tuple[list[Any], NDArray[np.float64] | None]:
    """The union of the clients' labels (of ``output``), and under "none" their counts.

    ``output`` is None for one output; the counts serve class_weight="balanced".
    """

    def own(rep: Message, key: str) -> list[Any]:
        value = rep.header[key]
        return list(value if output is None else value[output])

    first_name = replies[0][0]
    if cfg.classes is not None and cfg.privacy != "none":  # declared: no labels travel
        return sorted(set(cfg.classes if output is None else cfg.classes[output])), None
    # Under "secure" a client names the labels it holds in m rows: maybe none.
    kinds = {name: label_type(own(rep, "labels")[0]) for name, rep in replies if own(rep, "labels")}
    first_name = next(iter(kinds), first_name)
    other = next((name for name in kinds if kinds[name] != kinds[first_name]), None)
    if other is not None:
        where = "" if output is None else f" for output {output}"
        raise ValueError(
            f"Client {other!r} has {kinds[other]} class labels{where} but client "
            f"{first_name!r} has {kinds[first_name]} ones; encode y the same way on every client."
        )
    if not kinds:  # the clients' set-up would refuse each row (client_targets.unnamed_label)
        raise ValueError(
            "No client holds any class label in min_aggregate_rows rows or more, and under "
            'privacy="secure" a client names only such labels (a label fewer rows hold is '
            "their value). Declare every label on the estimator (classes=[...], a list per "
            "output for multi-output y)."
        )
    declared = cfg.classes if output is None or cfg.classes is None else cfg.classes[output]
    if declared is not None:  # the user's labels (the clients checked theirs are among them)
        classes = sorted(set(declared))
    else:
        classes = sorted({label for _, rep in replies for label in own(rep, "labels")})
    if cfg.privacy != "none":
        return classes, None
    index = {label: i for i, label in enumerate(classes)}
    class_counts = np.zeros(len(classes))
    for name, rep in replies:
        for label, count in zip(own(rep, "labels"), own(rep, "label_counts"), strict=True):
            if label not in index:
                raise ValueError(f"Client {name!r} has labels outside the declared classes.")
            class_counts[index[label]] += count
    return classes, class_counts


def _n_outputs(replies: list[tuple[str, Message]], cfg: GrowerConfig) -> int:
    """The targets per row (multi-output y), the same at every client, in the same order.

    A client whose y is a DataFrame names its columns (``target_names``): the outputs are
    summed by position, so two clients' y of the same columns in another order mixed them.
    """
    first_name, first = replies[0]
    k = int(first.header.get("n_outputs", 1))
    for name, rep in replies[1:]:
        if int(rep.header.get("n_outputs", 1)) != k:
            raise ValueError(
                f"Client {name!r} has {rep.header.get('n_outputs', 1)} target columns but "
                f"client {first_name!r} has {k}; every client's y has the same outputs."
            )
    named = []  # a multi-output y DataFrame's column names (checked here, as received)
    for name, rep in replies:
        outputs = rep.header.get("target_names")
        if outputs is None:
            continue
        if not (
            isinstance(outputs, list)
            and k > 1
            and len(outputs) == k
            and all(isinstance(c, str) for c in outputs)
            and len(set(outputs)) == k
        ):
            field = "header field 'target_names'"
            raise InvalidReply(name, HANDSHAKE, field, f"is not {k} distinct strings")
        named.append((name, outputs))
    for name, outputs in named[1:]:
        if outputs != named[0][1]:
            raise ValueError(
                f"Client {name!r}'s y has the columns {outputs} but client {named[0][0]!r}'s "
                f"{named[0][1]}; the trees' outputs are by position: give every client's y "
                "the same columns in the same order."
            )
    return k


def global_grid(
    replies: list[tuple[str, Message]], d: int, n_bins: int, categories: dict[str, Any]
) -> list[NDArray[np.float64]]:
    """``binning="global"``: per feature, the candidate thresholds of every node of the fit.

    Quantiles ``b / B`` of the pooled rows (the clients' per-feature sketches mixed with
    their rows' weights, as the per-node sketches are), fixed once: a level then needs one
    round. Categorical features get none (their candidates are their codes).
    """
    # Checked in the handshake round (_with_feature_sketch).
    points = np.stack([expect_array(m, "feature_sketch", "f", (d, n_bins), n) for n, m in replies])
    weights = np.stack([expect_array(m, "feature_rows", "f", (d,), n) for n, m in replies])
    known = weights > 0
    for j in categories:
        weights[:, int(j)] = 0.0
    index = np.where(known, np.arange(len(replies) * d).reshape(len(replies), d), -1)
    off, cand = merge_sketch_rows(
        np.where(known[..., None], points, 0.0).reshape(-1, n_bins), index, weights, n_bins
    )
    return [cand[off[j] : off[j + 1]] for j in range(d)]


def _with_feature_sketch(check: Check, n_bins: int) -> Check:
    """``binning="global"``: the handshake's check, then each client's feature sketches.

    Checked with the reply (an :class:`InvalidReply` naming the client and the array, which
    ``on_client_failure="drop"`` drops), not later when the grid is made.
    """

    def checked(name: str, request: Message, reply: Message) -> None:
        check(name, request, reply)
        d, n_rows = reply.header["n_features"], reply.header["n_samples"]
        w = expect_array(reply, "feature_rows", "f", (d,), name)
        points = expect_array(reply, "feature_sketch", "f", (d, n_bins), name)
        if not np.all(np.isfinite(w)) or np.any((w < 0) | (w > n_rows) | (w != np.round(w))):
            raise InvalidReply(name, HANDSHAKE, "array 'feature_rows'", "is not row counts")
        row = points[w > 0]
        if not np.all(np.isfinite(row)) or np.any(np.diff(row, axis=1) < 0):
            raise InvalidReply(name, HANDSHAKE, "array 'feature_sketch'", "has a bad row")

    return checked


def _check_schemas(replies: list[tuple[str, Message]]) -> None:
    """The clients share the same columns: as many, all named or none, the same names.

    The names may come in another order (the caller aligns them).
    """
    first_name, first = replies[0]
    d, names = first.header["n_features"], first.header["feature_names"]
    for name, rep in replies[1:]:
        other = rep.header["feature_names"]
        if rep.header["n_features"] != d:
            raise ValueError(
                f"Client {name!r} has {rep.header['n_features']} features but client "
                f"{first_name!r} has {d}{_name_difference(names, other, name, first_name)}; "
                "all clients must share the same columns."
            )
        if (names is None) != (other is None):
            raise ValueError(
                f"Client {name!r} and client {first_name!r} disagree on feature names: one "
                "passed a DataFrame with column names, the other an unnamed array."
            )
        if names is not None and set(other) != set(names):
            j = next(i for i, (a, b) in enumerate(zip(names, other, strict=True)) if a != b)
            raise ValueError(
                f"Client {name!r} has feature {other[j]!r} at position {j} where client "
                f"{first_name!r} has {names[j]!r}"
                f"{_name_difference(names, other, name, first_name)}; all clients must share "
                "the same column names (their order may differ)."
            )


def _name_difference(
    names: list[str] | None, other: list[str] | None, name: str, first_name: str
) -> str:
    """``": client 'b' lacks feature 'x'"``-style detail when both sides have names."""
    if names is None or other is None:
        return ""
    missing = [f for f in names if f not in other]
    extra = [f for f in other if f not in names]
    parts = []
    if missing:
        parts.append(f"lacks feature{'s' if len(missing) > 1 else ''} {_listed(missing)}")
    if extra:
        parts.append(f"has the extra feature{'s' if len(extra) > 1 else ''} {_listed(extra)}")
    return f": client {name!r} " + " and ".join(parts) if parts else ""


def _listed(names: list[str], at_most: int = 5) -> str:
    """``'a', 'b' and 'c'`` (at most ``at_most`` names, then how many more)."""
    shown = [repr(f) for f in names[:at_most]]
    if len(names) > at_most:
        shown.append(f"{len(names) - at_most} more")
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def public_keys(replies: list[tuple[str, Message]]) -> dict[str, str]:
    """The clients' public keys from their handshake replies (validated), as hex."""
    keys = {}
    for name, msg in replies:
        raw = np.asarray(msg.arrays.get("public_key", np.zeros(0)))
        if raw.dtype != np.uint8 or raw.shape != (32,):
            raise ValueError(
                f"Client {name!r} sent no valid public key in the handshake (expected 32 bytes "
                f'as uint8 under privacy="secure", got dtype {raw.dtype} shape {raw.shape}).'
            )
        keys[name] = raw.tobytes().hex()
    return keys
