"""Dtypes, sentinels and small rules shared by every module (as scikit-learn's common.pyx)."""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

#: Feature values and thresholds.
X_DTYPE = np.float64
#: Node indices (children, routing slots).
NODE_DTYPE = np.int32
#: Feature indices in trees and requests.
FEATURE_DTYPE = np.int32
#: Additive sufficient statistics.
STAT_DTYPE = np.float64
#: Per-client fine quantile codes used for the sketches (at most 256 fine bins per feature).
CODE_DTYPE = np.uint8
N_FINE_BINS = 256

#: ``children_left`` / ``children_right`` of a leaf (scikit-learn's ``TREE_LEAF``).
TREE_LEAF = -1
#: ``feature`` of a leaf (scikit-learn's ``TREE_UNDEFINED``).
TREE_UNDEFINED = -2

#: Column layout of the additive statistics ``s``: distinct in-bag rows, bootstrap weight,
#: then the task part, (sum w*y, sum w*y^2) for regression (one pair per output with
#: multi-output y) or the weighted count of each class for classification (with several
#: outputs, one block of class columns per output, in output order). The row count
#: carries scikit-learn's ``min_samples_leaf`` semantics (it counts distinct rows, not
#: bootstrap weight).
STAT_ROWS = 0
STAT_WEIGHT = 1
STAT_TASK = 2


def n_stats(task: str, n_classes: int, n_outputs: int = 1) -> int:
    """Number of columns of the additive statistics for a task.

    Regression has one (sum w*y, sum w*y^2) pair per output: ``STAT_TASK + 2 * n_outputs``.
    """
    return STAT_TASK + (2 * n_outputs if task == "regression" else n_classes)


def count_columns(n_classes: int, weighted: bool = False) -> int:
    """Number of leading statistic columns that are integers (sent as int32).

    Rows and weight, plus every class weight for classification: bootstrap weights are
    whole numbers. With sample weights (``weighted``) only the row count is.
    """
    return 1 if weighted else STAT_TASK + n_classes


def class_sizes(classes: object) -> tuple[int, ...]:
    """Classes per output: ``(len(classes),)``, or one entry per list of a list of lists.

    A multi-output classifier's class list holds one list (or array) of labels per output;
    its statistics hold one block of class columns per output, of these sizes.
    """
    labels = list(classes)  # type: ignore[call-overload]
    if labels and np.ndim(labels[0]) == 1:
        return tuple(len(c) for c in labels)
    return (len(labels),)


def resolve_max_features(max_features: Any, n_features: int) -> int:
    """Number of features sampled per node, with scikit-learn's rules (its ``max_features_``).

    The server draws that many per node (``federated/server/resolve.py``); ``to_sklearn``
    reports it on each tree.
    """
    if max_features is None:
        return n_features
    if max_features == "sqrt":
        return max(1, int(np.sqrt(n_features)))
    if max_features == "log2":
        return max(1, int(np.log2(n_features)))
    if isinstance(max_features, (int, np.integer)) and not isinstance(max_features, bool):
        return int(min(max_features, n_features))
    return max(1, int(float(max_features) * n_features))


def is_int_in(
    value: Any, low: int = 0, high: int | None = None, *, numpy: bool = False
) -> TypeGuard[int]:
    """Whether ``value`` is an int, never a bool, with ``low <= value`` (and ``< high``).

    The one test of a count read from a file, a message or an argument; each caller keeps
    its own error, naming its file or field. JSON gives Python ints: ``numpy=True`` takes
    NumPy's integers too (a caller's argument), which such a caller turns into an int.
    """
    kinds = (int, np.integer) if numpy else (int,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        return False
    return bool(low <= value and (high is None or value < high))
