"""Server side: the out-of-bag round, where the clients score their own rows.

The trees travel once; each client answers with sums over its rows out of the bag: (scored,
correct) for classification, or the scored count and per output (squared error, sum y,
sum y^2) for regression; under ``"secure"`` and ``"dp"`` the sums of y run over all of a
client's rows, so that no two fits' releases differ by a few rows' targets. The server
turns the pooled sums into the OOB score (accuracy, or R^2 averaged over the outputs as
scikit-learn's ``r2_score``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._common import TREE_LEAF
from ...tree.arrays import Tree, pack_forest, pack_sets
from ..federation import Federation
from ..privacy.dp import DpPlan
from ..protocol import OOB, TREE_DIGEST, CommunicationLedger, Message, expect_array
from . import secure
from .checks import ClientRecords
from .config import ForestResult, GrowerConfig
from .dp_checks import check_noisy_oob
from .rounds import exchange as _exchange

__all__ = ["oob_r2", "oob_round", "oob_width", "scoring_arrays"]


def _sum_in_order(
    replies: list[tuple[str, Message]], name: str, shape: tuple[int, ...]
) -> NDArray[np.float64]:
    """Sum one array over the clients in canonical order (results never depend on arrival)."""
    total = np.zeros(shape)
    for sender, msg in replies:
        total += expect_array(msg, name, "f", shape, sender)
    return total


def check_pooled_oob(sums: NDArray[np.float64], task: str, n_rows: int) -> None:
    """Under "secure": the pooled out-of-bag sums are those of at most ``n_rows`` rows.

    The scored count is whole and within ``[0, n_rows]`` (the rows the clients declared),
    the correct count whole and within ``[0, scored]``, squared errors and sums of squares
    >= 0. Each client's sums are masked, so a violation means some client lied (secure
    aggregation hides which); unchecked, it gave an accuracy above 1 or an R^2 of 1.
    """
    scored = sums[0]
    if task == "classification":
        ok = bool(np.isfinite(sums).all()) and sums[1] == round(sums[1]) and 0 <= sums[1] <= scored
    else:
        ok = bool(np.isfinite(sums).all() and np.all(sums[1::3] >= 0) and np.all(sums[3::3] >= 0))
    if not (ok and scored == round(scored) and 0 <= scored <= n_rows):
        raise ValueError(
            f"The pooled out-of-bag sums {sums.tolist()} are not those of at most the {n_rows} "
            "rows the clients declared (a whole count of scored rows, no more correct than "
            "scored, errors and squares >= 0): some client lied (secure aggregation hides which)."
        )


def oob_width(task: str, n_outputs: int) -> int:
    """Length of a client's ``oob_sums``: 2, or 1 + 3 per regression output."""
    return 2 if task == "classification" else 1 + 3 * n_outputs


def oob_r2(sums: NDArray[np.float64], n_rows: float | None = None) -> float:
    """R^2 of the pooled regression sums, averaged over the outputs where it is defined.

    An output whose total sum of squares is not positive (a constant target, or under
    ``privacy="dp"`` noisy sums of an output with a small spread) has no R^2 and is left
    out of the mean; NaN when no output has one. With ``n_rows`` (``"secure"`` and
    ``"dp"``) the sums of y run over all ``n_rows`` rows, not the scored ones: the scored
    rows' total sum of squares is taken as their share of all rows' (the same when every
    row is scored; see docs/privacy.md, "Out of bag").
    """
    n = float(sums[0])
    se, sy, syy = sums[1::3], sums[2::3], sums[3::3]
    sst = syy - sy**2 / n if n_rows is None else (syy - sy**2 / n_rows) * (n / n_rows)
    defined = sst > 0
    if not defined.any():
        return float("nan")
    return float(np.mean(1.0 - se[defined] / sst[defined]))


def scoring_arrays(
    left: NDArray[np.int32],
    right: NDArray[np.int32],
    set_off: NDArray[np.int64],
    value: NDArray[np.float64],
    weight: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``value`` and ``weight`` as scoring reads them, zeros elsewhere.

    Scoring reads the leaves' values and the weights of set splits' children (the marginal
    rule of an unseen code). Every node's mean and draws let a client subtract its own
    in-bag rows and read a node where one other row is left (docs/privacy-findings.md,
    "Red team 6"); the scores are the same, since prediction reads nothing else.
    """
    sets = np.flatnonzero(np.diff(set_off) > 0)
    marginal = np.zeros(weight.size, dtype=bool)
    marginal[left[sets]] = marginal[right[sets]] = True
    return np.where((left == TREE_LEAF)[:, None], value, 0.0), np.where(marginal, weight, 0.0)


def oob_round(
    fed: Federation,
    ledger: CommunicationLedger,
    trees: list[Tree],
    cfg: GrowerConfig,
    result: ForestResult,
    records: ClientRecords,
    plan: DpPlan | None = None,
    digests: NDArray[np.uint8] | None = None,
) -> None:
    """Clients score their own rows with the trees that did not draw them; sums come back.

    ``plan``: under "dp", the fit's noise, against which the noisy sums are checked.
    ``digests``: per tree, the settings digest its bootstrap was bound to, when a drop
    gave the batches several (``batch_setup.tree_digests``; sent as ``tree_digest``).
    """
    feature, threshold, left, right, value, offsets = pack_forest(trees)
    set_off, set_code, set_side, weight, missing_left = pack_sets(trees)
    if cfg.privacy != "none":  # what scoring reads, nothing more
        value, weight = scoring_arrays(left, right, set_off, value, weight)
    header: dict[str, Any] = {"n_trees": len(trees)}
    if cfg.oob_leaf_sums:
        header["leaf_sums"] = True
    msg = Message(
        OOB,
        header,
        {
            "feature": feature,
            "threshold": threshold,
            "left": left,
            "right": right,
            "value": value,
            "tree_off": offsets,
            "set_off": set_off,
            "set_code": set_code,
            "set_side": set_side,
            "weight": weight,
            "missing_left": missing_left,
            **({TREE_DIGEST: digests} if digests is not None else {}),
        },
    )
    width = oob_width(cfg.task, int(value.shape[1]))
    if cfg.privacy != "none":
        classification, weighted = cfg.task == "classification", cfg.privacy == "secure"
        secured = secure.oob_sums(fed, ledger, msg, width, classification, weighted)
        if secured is None:  # "secure", a drop: nothing released (secure.oob_sums)
            warnings.warn(
                "A client was lost in the out-of-bag round: under privacy='secure' the "
                "survivors' sums are not released (with the same trees, they would give the "
                "lost client's own), so the model has no out-of-bag score (oob_score_ is NaN).",
                UserWarning,
                stacklevel=4,
            )
            result.oob_n_scored, result.oob_score = 0, float("nan")
            return
        sums = secured
    else:
        leaves = int(offsets[1]) if cfg.oob_leaf_sums else 0
        leaf_width = 3 if cfg.task == "regression" else 1 + int(value.shape[1])
        check = records.oob(width, (leaves, leaf_width))
        replies = _exchange(fed, ledger, msg, check)
        result.leaf_sums = {name: m.arrays["leaf_sums"] for name, m in replies if leaves}
        sums = _sum_in_order(replies, "oob_sums", (width,))
    alive = set(fed.client_names)
    total = sum(n for name, n in result.client_n_samples.items() if name in alive)
    if cfg.privacy == "secure":
        check_pooled_oob(sums, cfg.task, total)
    if plan is not None:
        check_noisy_oob(sums, cfg.task == "classification", total, plan)
    if cfg.privacy == "dp":  # noisy sums: a count is at least 1, sums of squares >= 0
        sums = (
            np.maximum(sums, [1.0] + [0.0] * (sums.size - 1)) if cfg.task != "regression" else sums
        )
        sums[0] = max(round(float(sums[0])), 1)
        if cfg.task != "regression":  # post-processing: no more correct rows than scored
            sums[1] = min(sums[1], sums[0])
    n_scored = int(sums[0])
    if n_scored < total and cfg.privacy != "dp":  # under "dp" the count is noisy
        warnings.warn(
            f"{total - n_scored} of {total} rows were drawn by every tree and have no out-of-bag "
            "prediction; the OOB score uses the others. Use more trees for a complete estimate.",
            UserWarning,
            stacklevel=4,
        )
    result.oob_n_scored = n_scored
    if n_scored == 0:
        result.oob_score = float("nan")
    elif cfg.task == "classification":
        result.oob_score = float(sums[1] / n_scored)
    else:
        result.oob_score = oob_r2(sums, None if cfg.privacy == "none" else float(total))
