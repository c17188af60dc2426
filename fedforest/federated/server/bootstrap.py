"""``class_weight="balanced_subsample"`` with multi-output y or sample weights: the bootstrap round.

scikit-learn weighs a row of tree ``t`` by the product over the outputs of its class's
``n / (n_classes * n_c)``, counted on the tree's bootstrap (``compute_sample_weight(
"balanced", y, indices=...)`` in ``_parallel_build_trees``: draws with multiplicity, the
classes present in the bootstrap, sample weights left out). A product of per-output
weights is no reweighting of pooled per-output statistics, and with sample weights the
pooled root holds weighted class sums, not draws (one output without sample weights is a
reweighting of the pooled root: weights.py), so the clients must weigh their rows, and
they need the weights before a tree's first level. Hence one more round per batch of
trees, before its first Round A:

- server -> clients: the batch's set-up (which otherwise comes with its first Round A);
- clients -> server: ``tree_class_counts``, per tree of the batch and class of each output,
  the client's bootstrap draws of that class; under ``"secure"`` masked (the server
  decodes their sum over the clients only), under ``"dp"`` with noise too;
- the server sums them and sends each tree's per-class weights (``tree_class_weights``,
  :func:`subsample_weights`) in the header of the batch's first Round A.

The pooled counts are the class columns of each tree's root summary without sample
weights: sums over every in-bag row of the tree.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..federation import Federation
from ..protocol import BOOTSTRAP, CommunicationLedger, Message
from .checks import Check, InvalidReply
from .config import GrowerConfig
from .digest import digest_arrays
from .rounds import exchange
from .secure_sums import SetUpDropped, sums_unless_dropped

__all__ = ["bootstrap_round", "check_bootstrap", "subsample_weights"]


def subsample_weights(
    counts: NDArray[np.float64], sizes: tuple[int, ...], noisy: bool = False
) -> NDArray[np.float64]:
    """Per tree (row) and class (column, one block per output), scikit-learn's weights.

    ``n / (n_present * n_c)`` per output, with ``n`` the tree's draws and ``n_present``
    the classes drawn at least once (scikit-learn's ``compute_class_weight`` on
    ``y[indices]``); a class not drawn gets 0 (no in-bag row has it). ``noisy`` (under
    ``"dp"``): counts with noise, each taken as at least 1 and every class as present.
    """
    counts = np.asarray(counts, dtype=np.float64)
    out = np.zeros(counts.shape)
    start = 0
    for size in sizes:
        block = counts[:, start : start + size]
        if noisy:
            block = np.maximum(block, 1.0)
        present = block > 0
        n = block.sum(axis=1, keepdims=True)
        k = present.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = n / (np.maximum(k, 1) * block)
        out[:, start : start + size] = np.where(present, w, 0.0)
        start += size
    return out


def check_bootstrap(
    n_trees: int, n_columns: int, sizes: tuple[int, ...], expected: dict[str, int]
) -> Check:
    """Under ``"none"``: the checks of a client's bootstrap-round reply.

    Its counts are whole, >= 0, and each output's block adds up to the client's draws of
    the tree (0 for a tree it sits out: ``client_fraction``).
    """
    starts = np.cumsum((0, *sizes[:-1]))

    def check(name: str, request: Message, reply: Message) -> None:
        arr = reply.arrays.get("tree_class_counts")
        field = "array 'tree_class_counts'"
        if arr is None:
            raise InvalidReply(name, BOOTSTRAP, field, "is missing")
        if arr.dtype.kind not in "fiu" or arr.shape != (n_trees, n_columns):
            raise InvalidReply(
                name, BOOTSTRAP, field, f"has shape {arr.shape}, not ({n_trees}, {n_columns})"
            )
        a = np.asarray(arr, dtype=np.float64)
        if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a != np.round(a)):
            raise InvalidReply(name, BOOTSTRAP, field, "is not whole counts >= 0")
        totals = np.add.reduceat(a, starts, axis=1) if n_trees else np.zeros((0, len(sizes)))
        n = expected.get(name, -1)
        if np.any((totals != n) & (totals != 0)) or np.any(totals != totals[:, :1]):
            raise InvalidReply(
                name, BOOTSTRAP, field, f"has class counts that do not add up to its {n} draws"
            )

    return check


def bootstrap_round(
    fed: Federation,
    ledger: CommunicationLedger,
    cfg: GrowerConfig,
    setup: dict[str, Any],
    ctx: dict[str, Any],
) -> dict[str, Any]:
    """The bootstrap round of a batch; returns the header of its first Round A.

    The set-up, then each tree's pooled class counts; the header carries the set-up no
    more (the clients have it) but each tree's class weights.
    """
    n_trees, sizes = int(setup["n_trees"]), cfg.class_sizes
    n_columns = int(sum(sizes))
    msg = Message(BOOTSTRAP, {"setup": setup}, digest_arrays({"setup": setup}, ctx))
    if cfg.privacy == "none":
        draws = ctx["subsample"]["draws"]  # the handshake's, under max_samples
        expected = {
            name: int(draws.get(name, n)) if cfg.bootstrap else int(n)
            for name, n in ctx["subsample"]["n_samples"].items()
        }
        check = check_bootstrap(n_trees, n_columns, sizes, expected)
        replies = exchange(fed, ledger, msg, check)
        counts = np.zeros((n_trees, n_columns))
        for _, reply in replies:  # in canonical order
            counts += np.asarray(reply.arrays["tree_class_counts"], dtype=np.float64)
    else:
        specs: dict[str, tuple[tuple[int, ...], Any]] = {
            "tree_class_counts": ((n_trees, n_columns), 0)
        }
        # A drop here is not recovered: the batch is set up again under the survivors'
        # digest (batch_setup.py; under "dp" too, so no release lacks a noise share).
        sums = sums_unless_dropped(fed, ledger, msg, specs)
        if sums is None:
            raise SetUpDropped("a client dropped in the bootstrap round")
        counts = sums["tree_class_counts"]
        if cfg.privacy == "secure":
            check_pooled_bootstrap(counts, sizes)
        elif "dp" in ctx:  # a row's class in each output's block, per tree
            ctx["dp_released"][0] += n_trees * cfg.class_outputs
    ctx["tree_class_counts"] = counts
    weights = subsample_weights(counts, sizes, noisy=cfg.privacy == "dp")
    blocks = np.cumsum(sizes)[:-1]  # per tree, one list per output (the set-up's form)
    return {"tree_class_weights": [[b.tolist() for b in np.split(w, blocks)] for w in weights]}


def check_pooled_bootstrap(counts: NDArray[np.float64], sizes: tuple[int, ...]) -> None:
    """Under ``"secure"``: the pooled bootstrap class counts, checked.

    Whole, >= 0, and every output's block of a tree adds up to the same draws. A violation
    means some client sent counts that no bootstrap has (secure aggregation hides which).
    """
    starts = np.cumsum((0, *sizes[:-1]))
    totals = np.add.reduceat(counts, starts, axis=1) if counts.size else np.zeros((0, 1))
    if (
        not np.all(np.isfinite(counts))
        or np.any(counts < 0)
        or np.any(counts != np.round(counts))
        or np.any(totals != totals[:, :1])
    ):
        raise ValueError(
            "The pooled bootstrap class counts are not whole non-negative counts whose blocks "
            "add up to the same draws per tree: some client sent counts that no bootstrap has "
            "(secure aggregation hides which)."
        )
