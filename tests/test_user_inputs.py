"""Inputs a scikit-learn user brings, and the errors they meet (docs/sklearn.md, "Inputs").

Each test is a case that failed, or failed unclearly, before: a traceback from deep inside
NumPy or scikit-learn, a message naming no column, or a silent wrong answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from fedforest import Client, FedForestClassifier, FedForestRegressor, LocalFederation

PRIVACY = ["secure", "none"]


def _data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=n)
    labels = np.array(["cat", "dog", "emu"])[np.digitize(X[:, 0], [-0.4, 0.4])]
    return X, y, labels


def _text_column(X: np.ndarray) -> np.ndarray:
    """X as an object array whose last column is text ("u" / "v")."""
    out = X.astype(object)
    out[:, -1] = np.where(X[:, 0] > 0, "v", "u")
    return out


# ------------------------------------------------------------------ arrays with text
def test_array_with_a_text_column_names_the_column_in_fit() -> None:
    # Before: scikit-learn's "could not convert string to float: 'v'", naming no column
    # (a DataFrame's text column is categorical; an array's must be declared).
    X, y, _ = _data()
    with pytest.raises(
        ValueError, match=r"Column 2 of X is not numeric .*'v'.*categorical_features=\[2\]"
    ):
        FedForestRegressor(n_estimators=2, random_state=0).fit(_text_column(X), y)
    with pytest.raises(ValueError, match=r"Column 2 of X is not numeric"):
        FedForestRegressor(n_estimators=2, random_state=0).fit(_text_column(X).tolist(), y)


@pytest.mark.parametrize("privacy", PRIVACY)
def test_array_with_a_declared_text_column_fits_and_predicts(privacy: str) -> None:
    X, y, _ = _data()
    Xo = _text_column(X)
    model = FedForestRegressor(
        n_estimators=3, categorical_features=[2], privacy=privacy, random_state=0
    ).fit(Xo, y)
    assert model.predict(Xo).shape == (len(y),)
    # Text where the model has a numeric column: named, with the reason.
    swapped = Xo[:, [2, 1, 0]]
    with pytest.raises(
        ValueError, match=r"Column 0 of X is not numeric .*trained on it as a numeric"
    ):
        model.predict(swapped)


def test_numeric_model_predicting_text_names_the_column() -> None:
    X, y, _ = _data()
    model = FedForestRegressor(n_estimators=2, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"Column 2 of X is not numeric .*'v'"):
        model.predict(_text_column(X))
    # Numbers held as objects or strings are read as floats, as scikit-learn reads them.
    np.testing.assert_array_equal(model.predict(X.astype(object)), model.predict(X))
    np.testing.assert_array_equal(model.predict(X.astype(str)), model.predict(X))


# ------------------------------------------------------------------ fitted attributes
def test_estimators_before_fit_is_not_fitted_error() -> None:
    # Before: AttributeError "'FedForestRegressor' object has no attribute 'trees_'".
    model = FedForestRegressor()
    with pytest.raises(NotFittedError, match="not fitted yet"):
        model.estimators_  # noqa: B018 (the property raises)
    with pytest.raises(NotFittedError):
        model[0]
    assert not hasattr(model, "estimators_")  # an AttributeError, as scikit-learn's forest


# ------------------------------------------------------------------ pandas sparse columns
@pytest.mark.parametrize("privacy", PRIVACY)
def test_pandas_sparse_columns_are_read_dense(privacy: str) -> None:
    # Before: "Sparse data was passed for X, but dense data is required" (scikit-learn's
    # forests take such frames).
    X, y, _ = _data()
    X[::3, 1] = 0.0
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["s"] = pd.Categorical(np.array(["x", "y", "z"])[np.arange(len(y)) % 3])
    sparse = frame.astype({"a": pd.SparseDtype(float, 0.0), "b": pd.SparseDtype(float, 0.0)})
    kw: dict[str, Any] = dict(n_estimators=3, privacy=privacy, random_state=0)
    dense_model = FedForestRegressor(**kw).fit(frame, y)
    sparse_model = FedForestRegressor(**kw).fit(sparse, y)
    np.testing.assert_array_equal(sparse_model.predict(sparse), dense_model.predict(frame))
    np.testing.assert_array_equal(sparse_model.predict(frame), dense_model.predict(frame))
    assert list(sparse_model.feature_names_in_) == ["a", "b", "c", "s"]
    numeric = frame.drop(columns="s")
    all_sparse = numeric.astype(pd.SparseDtype(float, 0.0))
    dense_model = FedForestRegressor(**kw).fit(numeric, y)
    sparse_model = FedForestRegressor(**kw).fit(all_sparse, y)
    np.testing.assert_array_equal(sparse_model.predict(all_sparse), dense_model.predict(numeric))


# ------------------------------------------------------------------ warm start labels
@pytest.mark.parametrize("privacy", PRIVACY)
def test_warm_start_refuses_other_class_labels(privacy: str) -> None:
    # Before: y with "emu" renamed "fox" fitted, and the earlier trees' "emu" column was
    # reported as "fox" (the trees hold class proportions by position).
    X, _, labels = _data()
    model = FedForestClassifier(
        n_estimators=3, warm_start=True, privacy=privacy, random_state=0
    ).fit(X, labels)
    before = model.predict_proba(X)
    model.set_params(n_estimators=6)
    renamed = np.where(labels == "emu", "fox", labels)
    with pytest.raises(
        ValueError, match=r"warm_start .*\['cat', 'dog', 'emu'\].*\['cat', 'dog', 'fox'\]"
    ):
        model.fit(X, renamed)
    # The estimator keeps the forest it had.
    assert len(model.trees_) == 3 and model.classes_.tolist() == ["cat", "dog", "emu"]
    np.testing.assert_array_equal(model.predict_proba(X), before)
    with pytest.raises(ValueError, match=r"warm_start .*\['cat', 'dog'\]"):
        model.fit(X, np.where(labels == "emu", "cat", labels))
    # The same labels add trees.
    model.fit(X, labels)
    assert len(model.trees_) == 6 and model.classes_.tolist() == ["cat", "dog", "emu"]


def test_warm_start_with_declared_classes_takes_y_missing_one() -> None:
    X, _, labels = _data()
    keep = labels != "emu"
    model = FedForestClassifier(
        n_estimators=3,
        warm_start=True,
        privacy="none",
        classes=["cat", "dog", "emu"],
        random_state=0,
    ).fit(X, labels)
    model.set_params(n_estimators=5)
    model.fit(X[keep], labels[keep])
    assert len(model.trees_) == 5 and model.classes_.tolist() == ["cat", "dog", "emu"]


# ------------------------------------------------------------------ identifiers as text
def test_a_column_of_unique_text_says_why_it_gives_no_split() -> None:
    # A date or an identifier read as text (CSV) is a categorical column whose every level
    # one row holds: under "secure" no level is released and every row is missing.
    X, y, _ = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["day"] = pd.date_range("2020-01-01", periods=len(y)).astype(str)
    with pytest.warns(UserWarning, match="No row of this column keeps its level.*a date"):
        model = FedForestRegressor(n_estimators=2, random_state=0).fit(frame, y)
    assert model.feature_importances_[3] == 0.0


# ------------------------------------------------------------------ missing client labels
@pytest.mark.parametrize(
    "ids",
    [
        pd.Series(["a", "b", "c", "d"] * 50).where(np.arange(200) % 7 != 3),  # NaN
        pd.array([None if i % 7 == 3 else "abcd"[i % 4] for i in range(200)], dtype="string"),
        np.array([None if i % 7 == 3 else i % 4 for i in range(200)], dtype=object),
    ],
    ids=["str-nan", "string-na", "object-none"],
)
def test_client_ids_with_a_missing_label_are_named(ids: Any) -> None:
    # Before: "client_ids must be labels of one sortable type: '<' not supported between
    # instances of 'str' and 'float'" (or "boolean value of NA is ambiguous").
    X, y, _ = _data()
    with pytest.raises(ValueError, match=r"client_ids contains a missing value .*row 3, 29 row"):
        FedForestRegressor(n_estimators=2).fit(X, y, client_ids=ids)


# ------------------------------------------------------------------ pd.NA in object columns
def _with_object_na(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``frame`` with a numeric object column holding pd.NA, and the same as Float64."""
    values = frame["a"].to_numpy().round(1)
    missing = np.arange(len(frame)) % 5 == 0
    obj = pd.Series([pd.NA if m else v for m, v in zip(missing, values, strict=True)], dtype=object)
    nullable = pd.array(
        [None if m else v for m, v in zip(missing, values, strict=True)], dtype="Float64"
    )
    return frame.assign(o=obj.to_numpy()), frame.assign(o=nullable)


@pytest.mark.parametrize("privacy", PRIVACY)
@pytest.mark.parametrize("categorical", [False, True])
def test_object_column_with_pd_na_is_a_numeric_column_with_missing_values(
    privacy: str, categorical: bool
) -> None:
    # Before: TypeError "float() argument must be a string or a real number, not 'NAType'"
    # from pandas, in fit and predict (None in such a column was already missing).
    X, y, _ = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    if categorical:
        frame["s"] = pd.Categorical(np.array(["x", "y"])[np.arange(len(y)) % 2])
    with_obj, with_nullable = _with_object_na(frame)
    h = np.arange(len(y)) % 2
    kw: dict[str, Any] = dict(n_estimators=3, privacy=privacy, random_state=0)
    expected = FedForestRegressor(**kw).fit(with_nullable, y, client_ids=h)
    model = FedForestRegressor(**kw).fit(with_obj, y, client_ids=h)
    np.testing.assert_array_equal(model.predict(with_obj), expected.predict(with_nullable))
    # Rows to predict whose numeric feature is pd.NA in an object column, all of them too.
    unknown = with_obj.assign(o=pd.Series([pd.NA] * len(y), dtype=object).to_numpy())
    np.testing.assert_array_equal(
        model.predict(unknown), expected.predict(with_nullable.assign(o=np.nan))
    )


def test_client_with_pd_na_in_an_object_column() -> None:
    X, y, _ = _data()
    with_obj, with_nullable = _with_object_na(pd.DataFrame(X, columns=["a", "b", "c"]))
    half = np.arange(len(y)) < 100

    def fed(frame: pd.DataFrame) -> Any:
        return LocalFederation(
            [Client(frame[half], y[half], name="a"), Client(frame[~half], y[~half], name="b")]
        )

    kw: dict[str, Any] = dict(n_estimators=3, privacy="none", random_state=0)
    model = FedForestRegressor(**kw).fit_federated(fed(with_obj))
    expected = FedForestRegressor(**kw).fit_federated(fed(with_nullable))
    np.testing.assert_array_equal(model.predict(with_obj), expected.predict(with_nullable))


# ------------------------------------------------------------------ max_features
@pytest.mark.parametrize("privacy", PRIVACY)
def test_max_features_above_the_features_is_refused(privacy: str) -> None:
    # Before: clipped to the 3 features silently; scikit-learn's trees once refused it
    # (1.9.1 takes it and considers every feature: docs/sklearn.md, max_features).
    X, y, _ = _data()
    model = FedForestRegressor(n_estimators=2, max_features=4, privacy=privacy)
    with pytest.raises(ValueError, match=r"max_features must be in \(0, n_features\]; .*=4 .*=3"):
        model.fit(X, y)
    assert not hasattr(model, "trees_")
    clients = [Client(X[:100], y[:100], name="a"), Client(X[100:], y[100:], name="b")]
    with pytest.raises(ValueError, match=r"max_features must be in \(0, n_features\]"):
        model.fit_federated(LocalFederation(clients))
    assert len(model.set_params(max_features=3).fit(X, y).trees_) == 2


# ------------------------------------------------------------------ nullable labels
@pytest.mark.parametrize("dtype", ["Int64", "Int8", "UInt8", "boolean", "Float64", "bool", "int64"])
@pytest.mark.parametrize("privacy", PRIVACY)
def test_nullable_labels_give_scikit_learns_classes_in_both_paths(dtype: str, privacy: str) -> None:
    """pandas' nullable Int64 / boolean labels: scikit-learn's forest reads them as floats;
    ``fit`` did too, but a ``Client`` kept them int (bool), so ``fit_federated`` gave other
    ``classes_`` for the same y. The oracle is scikit-learn's RandomForestClassifier."""
    from sklearn.ensemble import RandomForestClassifier

    X, y, _ = _data()
    labels = pd.Series((y > 0).astype(int)).astype(dtype)
    expected = RandomForestClassifier(n_estimators=2).fit(X, labels).classes_
    kw: dict[str, Any] = {"n_estimators": 2, "privacy": privacy, "random_state": 0}
    fit = FedForestClassifier(**kw).fit(X, labels, client_ids=np.arange(200) % 2)
    clients = [Client(X[k::2], labels[k::2], name=str(k)) for k in range(2)]  # fit's names
    federated = FedForestClassifier(**kw).fit_federated(LocalFederation(clients))
    for model in (fit, federated):
        assert model.classes_.dtype == expected.dtype, (model, dtype)
        assert model.classes_.tolist() == expected.tolist()
    if privacy == "none":  # under "secure" fit's clients hold codes, which seed bootstraps
        assert np.array_equal(fit.predict_proba(X), federated.predict_proba(X))


def test_a_missing_nullable_label_is_refused_naming_the_client() -> None:
    X, y, _ = _data()
    labels = pd.Series((y > 0).astype(int)).astype("Int64")
    labels[5] = pd.NA
    clients = [Client(X[k::2], labels[k::2], name=f"c{k}") for k in range(2)]
    with pytest.raises(ValueError, match=r"Client 'c1'.*NaN"):
        FedForestClassifier(n_estimators=2).fit_federated(LocalFederation(clients))


# ------------------------------------------------------------------ fit_federated's argument
def test_fit_federated_takes_a_list_of_clients_as_their_local_federation() -> None:
    """A list (or tuple) of Clients was refused ("must be a fedforest Federation"): it is
    the LocalFederation of those clients, the same forest; other arguments say what is
    expected, and a list with something else in it names the item."""
    X, _, labels = _data()

    def clients() -> list[Client]:
        return [Client(X[k::2], labels[k::2], name=f"c{k}") for k in range(2)]

    kw: dict[str, Any] = {"n_estimators": 3, "random_state": 0}
    federation = FedForestClassifier(**kw).fit_federated(LocalFederation(clients()))
    for given in (clients(), tuple(clients())):
        model = FedForestClassifier(**kw).fit_federated(given)
        assert np.array_equal(model.predict_proba(X), federation.predict_proba(X))
        assert list(model.clients_) == list(federation.clients_)
    with pytest.raises(ValueError, match="LocalFederation takes Client objects; item 1 is a"):
        FedForestClassifier(**kw).fit_federated([clients()[0], (X, labels)])
    with pytest.raises(ValueError, match=r"Federation \(e.g. LocalFederation\) or a list of"):
        FedForestClassifier(**kw).fit_federated(iter(clients()))
    with pytest.raises(ValueError, match="not a dict; pass list"):
        FedForestClassifier(**kw).fit_federated({c.name: c for c in clients()})


def test_top_l_in_the_verification_mode_is_refused_before_any_round() -> None:
    """It was an InvalidReply naming a client (its exact Round A sends no ranking)."""
    from fedforest.federated.federation import ClientFailure

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=120)
    model = FedForestRegressor(n_estimators=2, privacy="none", n_bins=None, top_l=2)
    with pytest.raises(ValueError, match="top_l is not available with n_bins=None") as info:
        model.fit(X, y, client_ids=rng.integers(0, 3, 120))
    assert not isinstance(info.value, ClientFailure)
