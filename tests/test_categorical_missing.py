"""Missing values in a categorical column: a category of its own (JSON null), last in the list.

A set split learns the side of the missing rows from the pooled statistics as it does for
any category, so a forest on NaN categories equals one on the same data with the missing
values written as an explicit category that sorts last.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.federated.categorical import (
    MISSING_CATEGORY,
    encode,
    encode_counted,
    other_kind_rows,
    sort_categories,
)
from fedforest.federated.protocol import HANDSHAKE, PROTOCOL_VERSION, Message
from fedforest.federated.server.checks import InvalidReply, check_handshake


def _data(n: int, seed: int, missing: object) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.choice(["p", "q", "r"], n).astype(object)
    y = np.where(a == "q", 1.0, 0.0) + rng.normal(size=n) * 0.3
    gone = rng.random(n) < 0.2
    a[gone] = missing
    y[gone] += 5.0
    b = rng.normal(size=n)
    explicit = a.copy()
    explicit[gone] = "zz"  # sorts after every other text category, as the missing one
    return (
        pd.DataFrame({"a": a, "b": b}),
        pd.DataFrame({"a": explicit, "b": b}),
        y,
    )


@pytest.mark.parametrize("privacy", ["none", "secure"])
@pytest.mark.parametrize("missing", [None, np.nan, pd.NA])
def test_missing_categories_grow_the_forest_of_an_explicit_category(
    privacy: str, missing: object
) -> None:
    X, X_explicit, y = _data(600, 0, missing)
    cid = np.repeat([0, 1, 2], 200)
    kw = dict(n_estimators=5, privacy=privacy, random_state=0)
    ours = ff.FedForestRegressor(**kw).fit(X, y, client_ids=cid)
    ref = ff.FedForestRegressor(**kw).fit(X_explicit, y, client_ids=cid)
    assert ours.categories_[0] == ["p", "q", "r", MISSING_CATEGORY]
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X_explicit))
    gone = X["a"].isna().to_numpy()
    # The missing rows' own mean (about 5) is learnt, not the others' (about 0.3).
    assert ours.predict(X)[gone].mean() > 4.0 > 1.0 > ours.predict(X)[~gone].mean()


@pytest.mark.parametrize("missing", [None, np.nan, pd.NA])
def test_an_object_column_of_text_with_missing_values_is_categorical(missing: object) -> None:
    # is_string_dtype said no to an object column with a missing value: it was refused
    # ("Column 'a' of X has dtype object; fedforest needs numeric features").
    X, _, y = _data(300, 2, missing)
    as_object = X.astype({"a": object})
    assert as_object["a"].dtype == object
    kw = dict(n_estimators=3, random_state=0)
    ours = ff.FedForestRegressor(**kw).fit(as_object, y)
    ref = ff.FedForestRegressor(**kw).fit(X.astype({"a": "category"}), y)
    assert ours.categories_[0] == ["p", "q", "r", MISSING_CATEGORY]
    np.testing.assert_array_equal(ours.predict(as_object), ref.predict(X))
    with pytest.raises(ValueError, match="Column 'm' of X mixes text and numbers"):  # refused
        ff.FedForestRegressor(**kw).fit(as_object.assign(m=[1, "a"] * 150), y)


def test_an_object_column_of_numbers_is_numeric_as_in_scikit_learn() -> None:
    # It was refused ("has dtype object; fedforest needs numeric features"); scikit-learn
    # reads it as floats (None as NaN).
    X, _, y = _data(300, 3, "zz")
    numbers = X.assign(b=X["b"].astype(object))
    numbers.loc[::7, "b"] = None
    floats = numbers.assign(b=numbers["b"].astype(float))
    kw = dict(n_estimators=3, random_state=0)
    for frame in (numbers, numbers.assign(a=numbers["a"].astype("category"))):
        ours = ff.FedForestRegressor(**kw).fit(frame, y)
        ref = ff.FedForestRegressor(**kw).fit(floats, y)
        np.testing.assert_array_equal(ours.predict(frame), ref.predict(floats))
    clients = [ff.Client(numbers[:150], y[:150], "a"), ff.Client(numbers[150:], y[150:], "b")]
    model = ff.FedForestRegressor(**kw).fit_federated(ff.LocalFederation(clients))
    assert model.categories_ == {0: ["p", "q", "r", "zz"]}


def test_a_classifier_and_a_saved_model_keep_the_missing_category(tmp_path) -> None:
    X, _, y = _data(600, 1, None)
    labels = (y > 2.5).astype(int)
    model = ff.FedForestClassifier(n_estimators=5, privacy="none", random_state=0)
    model.fit(X, labels, client_ids=np.repeat([0, 1, 2], 200))
    assert model.score(X, labels) > 0.95
    model.save(tmp_path / "m.ffm")
    back = ff.load(tmp_path / "m.ffm")
    assert back.categories_ == model.categories_
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))


def test_a_missing_value_never_seen_in_training_is_an_unknown_category() -> None:
    X, _, y = _data(600, 2, None)
    known = X["a"].notna().to_numpy()
    model = ff.FedForestRegressor(n_estimators=5, privacy="none", random_state=0)
    model.fit(X[known], y[known], client_ids=np.repeat([0, 1, 2], 200)[known])
    assert MISSING_CATEGORY not in model.categories_[0]
    rows = X[~known].iloc[:20]
    unseen = rows.assign(a="never seen")
    np.testing.assert_array_equal(model.predict(rows), model.predict(unseen))


def test_every_kind_of_missing_value_is_one_category_sorted_last() -> None:
    cats = sort_categories(["b", None, np.nan, pd.NA, "a", float("nan")])
    assert cats == ["a", "b", None]
    raw = np.array(["a", np.nan, None, "b", pd.NA, "c"], dtype=object)
    np.testing.assert_array_equal(encode(raw, cats), [0, 2, 2, 1, 2, -1])


#: Values of every kind a column to predict can hold: plain and NumPy text and numbers,
#: bools, each missing value, huge (2**53 + 1 is 2.0**53 as a float) and negative-zero
#: numbers, and types of neither kind.
ODD_VALUES = [
    "a", "b", "zz", np.str_("a"), "1", "", 1, 2, 0, -0.0, 1.0, 2.5, np.int64(2),
    np.float32(1.0), np.float64(2.5), True, False, 10**20, 2**53 + 1, None, np.nan,
    float("nan"), pd.NA, pd.NaT, np.datetime64("NaT"), np.float64("nan"), Decimal("1"), b"a",
    pd.Timestamp(0),
]  # fmt: skip


@pytest.mark.parametrize(
    "cats",
    [
        ["a", "b", None],
        ["", "1", "a", "zz"],
        [0, 1, 2, None],
        [-1.5, 1, 2.5, 1e20, 2.0**53],
        [None],
        [],
    ],
    ids=["text", "text-numbers", "numbers", "floats", "missing-only", "none"],
)
def test_one_pass_codes_and_count_are_the_two_passes(cats: list[object]) -> None:
    """``encode_counted`` (predict's one pass) against ``encode`` and ``other_kind_rows``."""
    rng = np.random.default_rng(0)
    for size in (0, 1, 50, 400):
        raw = np.empty(size, dtype=object)
        raw[:] = [ODD_VALUES[k] for k in rng.integers(0, len(ODD_VALUES), size)]
        codes, n = encode_counted(raw, cats)
        np.testing.assert_array_equal(codes, encode(raw, cats))
        assert codes.dtype == np.float64 and n == other_kind_rows(raw, cats), (cats, size)
    every = np.empty(len(ODD_VALUES), dtype=object)
    every[:] = ODD_VALUES
    codes, n = encode_counted(every, cats)
    np.testing.assert_array_equal(codes, encode(every, cats))
    assert n == other_kind_rows(every, cats)


def test_a_client_cannot_claim_the_missing_category_twice() -> None:
    check = check_handshake("regression", "none", ranges=True)
    header = {
        "protocol": PROTOCOL_VERSION, "n_samples": 10, "n_features": 1, "feature_names": None,
        "categories": {"0": ["a", None, None]},
    }  # fmt: skip
    with pytest.raises(InvalidReply, match="repeats null"):
        check("c", Message(HANDSHAKE, {}), Message(HANDSHAKE, header))


def test_a_model_file_with_bad_categories_is_refused(tmp_path) -> None:
    X, _, y = _data(300, 3, None)
    model = ff.FedForestRegressor(n_estimators=2, privacy="none", random_state=0).fit(X, y)
    from fedforest._io import _categories

    trees = model.trees_
    with pytest.raises(ValueError, match="at most one null"):
        _categories({"0": ["p", "q", "r", None, None]}, 2, trees)
    with pytest.raises(ValueError, match="at most one null"):
        _categories({"0": ["p", {"x": 1}, "r", None]}, 2, trees)
