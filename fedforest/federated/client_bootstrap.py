"""A client's bootstrap: each tree's draws, and the bootstrap round of ``balanced_subsample``.

:func:`bootstrap_counts` draws how often each of the client's rows is in a tree's
bootstrap (moved here from ``client.py``, which re-exports it).

``class_weight="balanced_subsample"`` with multi-output y or sample weights: scikit-learn
weighs a row of tree ``t`` by the product over the outputs of ``n / (n_classes * n_c)``
computed on that tree's bootstrap (``compute_sample_weight("balanced", y, indices=...)``,
draws counted without sample weights), which no reweighting of pooled per-output (or
weighted) statistics gives. Before a batch's first level the
server therefore asks every client for its bootstrap's class counts per tree and output
(:func:`answer_bootstrap`: the set-up travels with that round; masked, and noisy under
``"dp"``), sums them, and sends each tree's per-class weights with the batch's first
Round A; the client multiplies its in-bag rows' weights by them (:func:`weigh_trees`).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .client_secure import class_factor
from .client_targets import class_row_weights
from .privacy.secagg import to_fixed
from .protocol import BOOTSTRAP, Message

if TYPE_CHECKING:
    from .client import Client, _Fit

__all__ = ["answer_bootstrap", "bootstrap_counts", "tree_class_counts", "weigh_trees"]


def bootstrap_counts(
    seed: int, tree: int, name: str, n: int, secret: int | None = None, draws: int | None = None
) -> NDArray[np.int64]:
    """Client-stratified bootstrap: how often each of the client's rows is drawn.

    Seeded from (random_state, tree index, client name) so that the same forest comes out
    whatever the transport or client order. Row ``i`` is drawn ``counts[i]`` times. Under
    ``privacy="secure"`` the client adds a ``secret`` of its own (derived from its data), so
    that the server, which knows the seed, cannot recompute the draws. ``draws`` (default
    ``n``) is the bootstrap's size (``max_samples``).
    """
    words = [seed, tree, zlib.crc32(name.encode("utf-8"))]
    if secret is not None:
        words += [secret & 0xFFFFFFFFFFFFFFFF, secret >> 64]
    rng = np.random.default_rng(words)
    size = n if draws is None else draws
    return np.bincount(rng.integers(0, n, size=size), minlength=n).astype(np.int64)


def tree_class_counts(client: Client, fit: _Fit, first_tree: int) -> NDArray[np.float64]:
    """Per tree of the batch, the bootstrap's draws of each class of each output.

    Row ``t`` holds, in the class columns' order (one block per output), the number of
    draws of tree ``first_tree + t`` whose label is that class: counts with multiplicity,
    as scikit-learn's ``compute_sample_weight`` counts ``y[indices]``. Sample weights take
    no part (nor do they there); rows of weight 0 count when drawn, as there. Under
    ``"dp"`` a row's count is capped at ``max_weight`` (``Client._counts``).
    """
    n_columns = fit.n_classes
    codes = fit.y.astype(np.int64).reshape(fit.y.shape[0], -1)  # one column per output
    out = np.zeros((fit.n_trees, n_columns))
    for t in range(fit.n_trees):
        counts = client._counts(first_tree + t).astype(np.float64)
        for o in range(codes.shape[1]):
            out[t] += np.bincount(codes[:, o], weights=counts, minlength=n_columns)
    return out


def answer_bootstrap(client: Client, msg: Message) -> Message:
    """The bootstrap round: the set-up, then each tree's class counts (masked if secure)."""
    setup = msg.header.get("setup")
    if not isinstance(setup, dict):
        raise ValueError(f"Client {client.name!r}: a bootstrap round without its set-up.")
    fit = client._fit = client._setup(msg)
    if fit.n_classes == 0:
        raise ValueError(f"Client {client.name!r}: the bootstrap round is for classification.")
    counts = tree_class_counts(client, fit, int(setup.get("first_tree", 0)))
    if not fit.secure:
        return Message(BOOTSTRAP, {"name": client.name}, {"tree_class_counts": counts})
    party = client._secure_party()
    if party.dp is not None:  # a row adds at most max_weight to its class in each block
        counts = party.noisy(msg, counts, float(party.dp["max_weight"]), frac_bits=0)
    return party._masked(msg, BOOTSTRAP, {"tree_class_counts": to_fixed(counts, 0)})


def weigh_trees(client: Client, fit: _Fit, weights: Any) -> None:
    """Each in-bag row's weight times the product of its outputs' class weights, per tree.

    ``weights`` (the first Round A's ``tree_class_weights``) holds per tree of the batch
    what the set-up's ``class_weights`` holds for every tree under ``"balanced"``: one list
    of per-class weights per output. Under ``"dp"`` a row then weighs at most
    ``max_weight`` times the largest, over the batch's trees, product of each output's
    largest class weight (``class_factor``), which scales every entry's noise.
    """
    # One column of class codes per output (one output: y's codes as a column).
    codes = fit.y.reshape(fit.y.shape[0], -1) if fit.n_classes else np.zeros((0, 0))
    if not isinstance(weights, list) or len(weights) != fit.n_trees:
        raise ValueError(f"Client {client.name!r}: tree class weights for another batch.")
    factors = []
    for t, per_output in enumerate(weights):
        factors.append(class_factor(per_output, client.name))  # finite, >= 0
        sizes = [len(w) for w in per_output]
        low = np.cumsum([0, *sizes[:-1]])
        if len(sizes) != codes.shape[1] or np.any(codes < low) or np.any(codes >= low + sizes):
            raise ValueError(
                f"Client {client.name!r}: tree class weights of tree {t} do not match the "
                "classes of every output."
            )
        a, b = int(fit.tree_rows[t]), int(fit.tree_rows[t + 1])
        fit.w[a:b] = class_row_weights(fit.w[a:b], codes[fit.rows[a:b]], per_output)
    party = client._secure
    if party is not None and party.dp is not None:
        party.dp["class_factor"] = max(factors, default=1.0)
