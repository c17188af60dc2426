"""A client's out-of-bag round: its rows scored by the trees that did not draw them.

Moved out of ``client.py`` (the 800-line cap): ``Client._oob`` calls :func:`answer_oob`.
Under ``privacy="none"`` the diagnostics also ask for :func:`leaf_sums` (tree 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..tree.apply import apply_forest_sets, predict_forest
from .client_secure import tree_secrets
from .client_targets import correct_rows
from .protocol import OOB, Message, expect_array

if TYPE_CHECKING:
    from .client import Client

__all__ = ["answer_oob", "leaf_sums"]


def _y_sums(v: NDArray[np.float64], w: NDArray[np.float64] | None) -> tuple[float, float]:
    """The out-of-bag sums of ``y`` and ``y^2``, each row weighing ``w`` (None: 1)."""
    if w is None:
        return float(v.sum()), float(np.sum(v * v))
    return float(np.sum(w * v)), float(np.sum(w * v * v))


def answer_oob(client: Client, msg: Message) -> Message:
    """Answer the out-of-bag round: the client's rows scored by trees that did not draw them."""
    if client._oob_setup is None:
        raise ValueError(f"Client {client.name!r}: out-of-bag round before the set-up.")
    _, _, n_classes, y_all, _ = client._oob_setup
    n_trees = int(msg.header["n_trees"])
    tree_off = expect_array(msg, "tree_off", "i", (n_trees + 1,), "server").astype(np.int64)
    n_nodes = int(tree_off[-1])
    feature, threshold, left, right = (
        expect_array(msg, k, kind, (n_nodes,), "server")
        for k, kind in (("feature", "i"), ("threshold", "f"), ("left", "i"), ("right", "i"))
    )
    value = expect_array(msg, "value", "f", (n_nodes, None), "server")
    set_off = expect_array(msg, "set_off", "i", (n_nodes + 1,), "server").astype(np.int64)
    set_code = expect_array(msg, "set_code", "i", (int(set_off[-1]),), "server")
    set_side = expect_array(msg, "set_side", "i", (int(set_off[-1]),), "server")
    weight = expect_array(msg, "weight", "f", (n_nodes,), "server")
    missing_left = expect_array(msg, "missing_left", "iu", (n_nodes,), "server")
    missing_left = missing_left.astype(np.uint8)
    X_aug = np.ascontiguousarray(client.Xt.T)  # features and this client's index H
    pred = np.zeros((client.n_samples, value.shape[1]))
    n_oob = np.zeros(client.n_samples)
    bound = tree_secrets(client._secure if client._fit_secure else None, msg, n_trees, client.name)
    for t in range(n_trees):
        # One tree at a time, bootstrap recomputed from the seed: memory stays O(n_k).
        oob = np.flatnonzero(client._counts(t, bound[t] if bound else None) == 0)
        tree_pred = np.zeros((oob.size, value.shape[1]))
        predict_forest(
            X_aug[oob],
            feature,
            threshold,
            left,
            right,
            set_off,
            set_code,
            set_side,
            weight,
            missing_left,
            value,
            tree_off[t : t + 2],
            tree_pred,
        )
        pred[oob] += tree_pred
        n_oob[oob] += 1
    scored = n_oob > 0
    pred[scored] /= n_oob[scored, None]
    pred[~scored] = np.nan
    client.oob_prediction_ = pred
    y = y_all[scored]
    party = client._secure if client._fit_secure else None
    ys = y if party is None else y_all  # "secure": sums of y over all rows (privacy.md)
    # "secure": those sums weigh each row's secret weight (client_weights.oob_weights)
    w = None if party is None else party.oob_weights(len(ys), msg)
    if n_classes:
        sums = [scored.sum(), correct_rows(pred[scored], y, client._class_sizes).sum()]
    elif y.ndim == 2:  # multi-output: per output, its three sums
        p = pred[scored]
        if party is not None:  # standardised, as y is
            p = party.standardise_prediction(p)
        sums = [scored.sum()]
        for o in range(y.shape[1]):
            sums += [np.sum((y[:, o] - p[:, o]) ** 2), *_y_sums(ys[:, o], w)]
    else:
        p = pred[scored, 0]
        if party is not None:  # targets are standardised under "secure": so are the errors
            p = party.standardise_prediction(p)
        sums = [scored.sum(), np.sum((y - p) ** 2), *_y_sums(ys, w)]
    arrays = {"oob_sums": np.asarray(sums, dtype=np.float64)}
    if party is not None:
        # The growth state goes; what scoring reads stays until the fit's end drops it (a
        # server of before red team 18 sent this round again after a drop; it now
        # releases nothing then: ``server/secure.oob_sums``).
        client._fit = None
        return party.oob(msg, arrays["oob_sums"], n_classes)
    if msg.header.get("leaf_sums"):  # diagnostics ("none" only): per-leaf sums, tree 0
        packed = (
            feature, threshold, left, right, set_off, set_code, set_side, weight, missing_left
        )  # fmt: skip
        arrays["leaf_sums"] = leaf_sums(client, X_aug, packed, tree_off, y_all, n_classes)
    client.finish()
    return Message(OOB, {"name": client.name}, arrays)


def leaf_sums(
    client: Client,
    X_aug: NDArray[np.float64],
    packed: tuple[NDArray[Any], ...],
    tree_off: NDArray[np.int64],
    y: NDArray[np.float64],
    n_classes: int,
) -> NDArray[np.float64]:
    """Per node of the first tree, sums over this client's rows out of its bag.

    The count, then the sums of y and y^2 (regression) or the count of each class: the
    diagnostics' honest cells (the tree never saw these rows).
    """
    oob = np.flatnonzero(client._counts(0) == 0)
    leaf = np.zeros((oob.size, 1), dtype=np.int32)
    feature, threshold, left, right, set_off, set_code, set_side, weight, missing = packed
    apply_forest_sets(
        X_aug[oob],
        feature,
        threshold,
        left,
        right,
        set_off,
        set_code,
        set_side,
        weight,
        missing,
        tree_off[:2],
        leaf,
    )
    n_nodes = int(tree_off[1] - tree_off[0])
    idx = leaf[:, 0] - int(tree_off[0])
    yy = y[oob] if y.ndim == 2 else y[oob, None]
    out = np.zeros((n_nodes, 1 + (n_classes or 2 * yy.shape[1])))
    out[:, 0] = np.bincount(idx, minlength=n_nodes)
    if n_classes:
        for c in range(n_classes):
            out[:, 1 + c] = np.bincount(
                idx, weights=(yy[:, 0] == c).astype(float), minlength=n_nodes
            )
    else:  # per output: sum y, sum y^2
        for o in range(yy.shape[1]):
            out[:, 1 + 2 * o] = np.bincount(idx, weights=yy[:, o], minlength=n_nodes)
            out[:, 2 + 2 * o] = np.bincount(idx, weights=yy[:, o] ** 2, minlength=n_nodes)
    return out
