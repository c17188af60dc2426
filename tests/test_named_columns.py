"""One column-name resolver (``federated/categorical.py::named_columns``) and its two callers.

``fit`` refuses an entry of ``categorical_features`` that names no column
(``categorical_columns``); ``fit_federated`` warns of it (``warn_numeric_declared``). Both
resolve entries as scikit-learn's ``_check_categorical_features`` does (the oracle: a mask,
indices in ``[0, n_features)``, names); a negative index names no column (scikit-learn
refuses it), which ``fit_federated`` had read as counted from the end.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.validation import _check_categorical_features

from fedforest import Client, FedForestRegressor
from fedforest.federated.categorical import categorical_columns, named_columns

NAMES = ["a", "b", "c"]


def test_indices_names_and_masks_resolve_as_scikit_learn() -> None:
    frame = pd.DataFrame(np.zeros((2, 3)), columns=NAMES)
    for given in ([0, 2], ["a", "c"], [True, False, True], np.array([0, 2]), pd.Index(["a", "c"])):
        expected = np.flatnonzero(_check_categorical_features(frame, given)).tolist()
        assert [j for _, j in named_columns(given, 3, NAMES)] == expected == [0, 2]
    # NumPy scalars are plain Python entries (the warning shows 2, not np.int64(2)).
    entries = named_columns(np.array([True, False, True]), 3, None)
    assert entries == [(0, 0), (2, 2)] and all(type(f) is int for f, _ in entries)
    assert named_columns([np.str_("b")], 3, NAMES) == [("b", 1)]
    assert named_columns(None, 3, NAMES) == []


def test_out_of_range_and_negative_indices_and_unknown_names_name_no_column() -> None:
    frame = pd.DataFrame(np.zeros((2, 3)), columns=NAMES)
    for bad in ([-1], [3], ["nope"]):
        with pytest.raises(ValueError):
            _check_categorical_features(frame, bad)  # the oracle refuses each
        assert named_columns(bad, 3, NAMES) == [(bad[0], None)]
    assert named_columns(["a"], 3, None) == [("a", None)]  # a table without names
    # A mask longer than the table: its positions beyond it name no column.
    assert named_columns([False, False, False, True], 3, NAMES) == [(3, None)]


def test_entries_keep_their_order_and_repeats() -> None:
    got = named_columns(["c", 0, "c", 2, -3], 3, NAMES)
    assert got == [("c", 2), (0, 0), ("c", 2), (2, 2), (-3, None)]


def test_fit_refuses_what_names_no_column_and_counts_a_column_once() -> None:
    frame = pd.DataFrame(np.zeros((2, 3)), columns=NAMES)
    with pytest.raises(ValueError, match=r"names column -1, but X has 3 columns"):
        categorical_columns(frame, [-1], 3)
    with pytest.raises(ValueError, match=r"names 'nope', which is not a column of X \(columns"):
        categorical_columns(frame, ["nope"], 3)
    with pytest.raises(ValueError, match="boolean mask of 2 entries, but X has 3 columns"):
        categorical_columns(frame, [True, False], 3)
    assert categorical_columns(frame, ["c", 2, "a", 0], 3) == [0, 2]


def _fit_federated(categorical_features: list[object], declared: list[int]) -> list[str]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    X[:, 2] = np.arange(80) % 3
    y = X[:, 0] + 0.1 * rng.normal(size=80)
    clients = [
        Client(X[k::2], y[k::2], f"c{k}", categorical_features=declared or None) for k in range(2)
    ]
    model = FedForestRegressor(
        n_estimators=2, max_depth=2, random_state=0, privacy="none"
    ).set_params(categorical_features=categorical_features)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit_federated(clients)
    assert list(model.categories_) == declared
    return [str(w.message) for w in caught if "which the clients gave" in str(w.message)]


def test_fit_federated_warns_of_a_negative_index_as_of_any_other_non_column() -> None:
    # Before: -1 was read as the last column, so this fit (the clients' column 2
    # categorical) said nothing, while fit with the same estimator refuses -1.
    (message,) = _fit_federated([-1], declared=[2])
    assert message.startswith("categorical_features names [-1], which the clients")
    (message,) = _fit_federated(["nope", 2, np.int64(1)], declared=[2])
    assert message.startswith("categorical_features names ['nope', 1], which the clients")
    assert _fit_federated([False, False, True], declared=[2]) == []  # followed: no warning
