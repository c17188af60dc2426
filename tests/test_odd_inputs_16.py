"""Odd inputs, sixteenth round.

The tests whose names say *refused* failed at the branch's start (e635805); the others
pin what did not change. The refusals:

- ``client_ids`` of dates or durations with a missing one (``NaT``): its rows became a
  client named ``"None"``, silently (NaN, None and ``pd.NA`` were refused); an empty label
  was refused by the ``Client`` built for it, as a "Client name", naming no row;
- a ``Peer`` took a column of text and numbers (an ``object`` column) as categorical, with
  the levels ``(1, 2.5, "a", "b")``: predicting on the very frame it trained on then
  called half the rows' values unavailable; levels neither text nor numbers (``pd.cut``'s
  intervals, timestamps, bytes) were fitted and refused by ``share()`` only, without a fix;
- ``SwarmForest.predict_proba`` on a frame holding none of the pool's columns (renamed,
  upper case, a MultiIndex) gave every row the pooled prior, silently;
- a pyarrow ``Table`` with a text column: ``fit``'s "could not convert string to float", a
  ``Client``'s "not numeric" (and a numeric table's ``Client`` lost its column names), a
  ``Peer``'s ``TypeError``; a pyarrow dictionary column (Parquet's category read with
  ``dtype_backend="pyarrow"``) was refused as not numeric;
- ``Peer.share(shared_features="ab")`` shared the columns ``a`` and ``b``;
- a column of numbers with a missing-value marker (``"?"``) was categorical, a level per
  number, without a word (``fedforest train`` named it; ``fit``, a ``Client`` and a
  ``Peer`` did not; a ``Peer`` did not warn of numbers with a decimal comma either).
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.swarm import Peer, SwarmForest


# ------------------------------------------------------------- client_ids: NaT is missing
@pytest.mark.parametrize(
    "ids",
    [
        pd.Series(pd.to_datetime(["2020-01-01", None, "2021-01-01"] * 10)),
        pd.Series(pd.to_timedelta([1, None, 2] * 10, unit="D")),
        np.array(["2020-01-01", "NaT", "2021-01-01"] * 10, dtype="datetime64[D]"),
    ],
    ids=["datetime", "timedelta", "numpy"],
)
def test_client_ids_with_a_missing_date_are_refused_naming_the_row(ids: Any) -> None:
    rng = np.random.default_rng(16)
    X = rng.normal(size=(30, 2))
    with pytest.raises(ValueError, match=r"client_ids contains a missing value \(NaT, row 1, 10 "):
        ff.FedForestRegressor(n_estimators=2, privacy="none").fit(X, X[:, 0], client_ids=ids)


def test_client_ids_of_dates_without_a_missing_one_still_name_the_clients() -> None:
    rng = np.random.default_rng(16)
    X = rng.normal(size=(30, 2))
    ids = pd.Series(pd.to_datetime(["2020-01-01", "2021-01-01"] * 15))
    model = ff.FedForestRegressor(n_estimators=2, privacy="none").fit(X, X[:, 0], client_ids=ids)
    assert list(model.clients_) == ["2020-01-01 00:00:00", "2021-01-01 00:00:00"]


@pytest.mark.parametrize("empty", ["", "  "])
def test_client_ids_with_an_empty_label_are_refused_naming_the_row(empty: str) -> None:
    """The label reached ``Client``, whose refusal spoke of a "Client name", not of
    ``client_ids`` or a row."""
    rng = np.random.default_rng(16)
    X = rng.normal(size=(30, 2))
    ids = np.array(["a", empty, "b"] * 10)
    said = rf"client_ids contains an empty label \('{empty}', row 1, 10 row"
    with pytest.raises(ValueError, match=said):
        ff.FedForestRegressor(n_estimators=2, privacy="none").fit(X, X[:, 0], client_ids=ids)


# ------------------------------------------------------- a peer's levels, as the estimators
def _site(n: int = 200) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(16)
    X = pd.DataFrame({"age": rng.normal(50, 10, n), "bmi": rng.normal(27, 4, n)})
    return X, (X["age"] + X["bmi"] > 77).to_numpy().astype(int)


@pytest.mark.parametrize(
    ("column", "params", "said"),
    [
        (np.array(["a", 1, "b", 2.5] * 50, dtype=object), {}, r"mixes text and numbers \("),
        (np.array(["a", "b"] * 100, dtype=object), {"categories": {"f": ["a", "b", 1]}}, "mixes"),
        (pd.cut(np.arange(200.0), 4), {}, "holds Interval values"),
        (np.array([b"a", b"b"] * 100, dtype=object), {}, "holds bytes values"),
    ],
    ids=["text-and-numbers", "declared", "intervals", "bytes"],
)
def test_a_peers_levels_neither_all_text_nor_all_numbers_are_refused_at_fit(
    column: Any, params: dict[str, Any], said: str
) -> None:
    X, y = _site()
    with pytest.raises(ValueError, match=f"categorical column 'f' {said}"):
        Peer("A", n_estimators=3, random_state=0).fit(X.assign(f=column), y, **params)


def test_a_peers_text_column_still_fits_and_predicts_on_its_own_frame() -> None:
    X, y = _site()
    X = X.assign(f=np.array(["a", "b", "c", "d"] * 50, dtype=object))
    peer = Peer("A", n_estimators=3, random_state=0).fit(X, y)
    assert peer.share().categories == {"f": ("a", "b", "c", "d")}
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        SwarmForest([peer.share()]).predict_proba(X, strategy="local", site="A")
    assert [str(w.message) for w in said] == []  # no value of its own frame is unavailable


# --------------------------------------------------- a site frame of none of the pool's columns
@pytest.mark.parametrize(
    "columns",
    [["x", "z"], ["AGE", "BMI"], pd.MultiIndex.from_tuples([("g", "age"), ("g", "bmi")])],
    ids=["renamed", "upper-case", "multi-index"],
)
def test_a_site_frame_without_any_pool_column_is_refused(columns: Any) -> None:
    X, y = _site()
    pool = SwarmForest([Peer("A", n_estimators=3, random_state=0).fit(X, y).share()])
    with pytest.raises(ValueError, match=r"X_site has none of the swarm's features"):
        pool.predict_proba(X.set_axis(columns, axis=1), strategy="mp", site="A")
    # one column of the pool is enough: the other is unavailable, as documented
    proba = pool.predict_proba(X.assign(BMI=1.0)[["age", "BMI"]], strategy="mp", site="A")
    assert proba.shape == (200, 2)
    assert not np.allclose(proba, proba[0])  # the rows' own ages, not the prior


# ------------------------------------------- other libraries' frames (pyarrow), read as pandas'
def _table_rows(n: int = 90) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(16)
    X = pd.DataFrame({"a": rng.normal(size=n), "s": np.array(["u", "v", "w"] * (n // 3))})
    return X, X["a"].to_numpy() + (X["s"] == "v").to_numpy()


def test_a_pyarrow_tables_text_column_is_categorical_as_a_frames() -> None:
    pa = pytest.importorskip("pyarrow")
    X, y = _table_rows()
    ids = np.arange(len(y)) % 3
    est = ff.FedForestRegressor(n_estimators=3, random_state=0, privacy="none")
    by_frame = est.fit(X, y, client_ids=ids).predict(X)
    model = ff.FedForestRegressor(n_estimators=3, random_state=0, privacy="none")
    model.fit(pa.table(X), y, client_ids=ids)  # was "could not convert string to float: 'u'"
    assert list(model.feature_names_in_) == ["a", "s"]
    np.testing.assert_array_equal(model.predict(pa.table(X)), by_frame)


def test_a_client_of_a_pyarrow_table_keeps_its_column_names() -> None:
    pa = pytest.importorskip("pyarrow")
    X, y = _table_rows()
    clients = [ff.Client(pa.table(X.iloc[k::3]), y[k::3], name=str(k)) for k in range(3)]
    model = ff.FedForestRegressor(n_estimators=3, random_state=0, privacy="none")
    model.fit_federated(clients)  # its text column was "not numeric (it holds str values)"
    assert list(model.feature_names_in_) == ["a", "s"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "X has feature names, but ... without"
        model.predict(pa.table(X))


def test_a_peer_and_a_site_take_pyarrow_tables() -> None:
    pa = pytest.importorskip("pyarrow")
    X, y = _table_rows()
    labels = (y > 0.5).astype(int)
    peer = Peer("A", n_estimators=3, random_state=0).fit(pa.table(X), labels)  # a TypeError
    assert peer.share().categories == {"s": ("u", "v", "w")}
    pool = SwarmForest([peer.share()])
    np.testing.assert_array_equal(
        pool.predict_proba(pa.table(X), strategy="mp", site="A"),
        pool.predict_proba(X, strategy="mp", site="A"),
    )


def test_diagnose_takes_a_pyarrow_tables_text_column_as_a_frames() -> None:
    pa = pytest.importorskip("pyarrow")
    from fedforest.diagnostics import diagnose

    X, y = _table_rows(150)
    ids = np.arange(len(y)) % 3
    by_frame = diagnose(X, y, ids, privacy="none")  # the table's was "not numeric"
    by_table = diagnose(pa.table(X), y, ids, privacy="none")
    assert by_table.feature_pvalues == by_frame.feature_pvalues


def test_a_polars_frame_is_read_as_its_pandas_twin() -> None:
    """Skipped where polars is not installed (not a test dependency)."""
    pl = pytest.importorskip("polars")
    X, y = _table_rows()
    ids = np.arange(len(y)) % 3
    by_frame = ff.FedForestRegressor(n_estimators=3, random_state=0, privacy="none")
    by_frame.fit(X, y, client_ids=ids)
    text = pl.from_pandas(X)
    for table in (text, text.with_columns(pl.col("s").cast(pl.Categorical))):
        model = ff.FedForestRegressor(n_estimators=3, random_state=0, privacy="none")
        model.fit(table, y, client_ids=ids)
        assert list(model.feature_names_in_) == ["a", "s"]
        np.testing.assert_array_equal(model.predict(table), by_frame.predict(X))


# ------------------------------- pyarrow dictionary columns (Parquet's categories) are category
def test_a_pyarrow_dictionary_column_is_its_category_column(tmp_path: Any) -> None:
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(16)
    levels = np.array(["u", "v", "w"])[np.arange(90) % 3]
    X = pd.DataFrame({"a": rng.normal(size=90), "c": pd.Categorical(levels)})
    y = X["a"].to_numpy() + (levels == "v")
    X.to_parquet(tmp_path / "x.parquet")
    read = pd.read_parquet(tmp_path / "x.parquet", dtype_backend="pyarrow")
    assert "dictionary" in str(read.dtypes["c"])
    ids = np.arange(90) % 3
    est = ff.FedForestRegressor(n_estimators=3, random_state=0, privacy="none")
    by_category = est.fit(X, y, client_ids=ids).predict(X)
    model = ff.FedForestRegressor(n_estimators=3, random_state=0, privacy="none")
    model.fit(read, y, client_ids=ids)  # was "Column 'c' of X has dtype dictionary<..."
    np.testing.assert_array_equal(model.predict(read), by_category)
    assert "dictionary" in str(read.dtypes["c"])  # the user's frame is left as it was
    clients = [ff.Client(read.iloc[k::3], y[k::3], name=str(k)) for k in range(3)]
    by_clients = ff.FedForestRegressor(n_estimators=3, random_state=0, privacy="none")
    np.testing.assert_array_equal(by_clients.fit_federated(clients).predict(read), by_category)
    peer = Peer("A", n_estimators=3, random_state=0).fit(read, (y > 0.5).astype(int))
    assert peer.share().categories == {"c": ("u", "v", "w")}


# ------------------------------------------------ one string where a list of names is expected
def test_shared_features_as_one_string_is_refused() -> None:
    """Its letters were the names: ``"ab"`` shared the columns ``a`` and ``b`` silently,
    ``"age"`` was refused as "['a', 'g', 'e'] are not features"."""
    rng = np.random.default_rng(16)
    X = pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60), "ab": 1.0})
    peer = Peer("A", n_estimators=3, random_state=0).fit(X, np.arange(60) % 2)
    with pytest.raises(ValueError, match=r"got the string 'ab'; give \['ab'\]"):
        peer.share(shared_features="ab")
    assert peer.share(shared_features=["ab"]).shared_features == ("ab",)


def test_shared_columns_of_strings_is_refused() -> None:
    """``shared_columns(["age", "bmi"])`` read each name as a peer's list of letters: []."""
    from fedforest.swarm import shared_columns

    with pytest.raises(ValueError, match=r"one item per peer .* got the string 'age'"):
        shared_columns(["age", "bmi"])
    assert shared_columns([["age", "bmi"], ["bmi", "ward"]]) == ["bmi"]


# ------------------------------------- numbers with a missing-value marker ("?") read as text
def _marked(n: int = 90) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(16)
    values = rng.normal(size=n).round(3).astype(object)
    values[[3, 7]] = "?"  # UCI's marker, which read_csv does not know
    X = pd.read_csv(io.StringIO(pd.DataFrame({"a": values}).to_csv(index=False)))
    return X, rng.normal(size=n)


def test_numbers_with_a_missing_value_marker_warn_naming_the_column() -> None:
    """The column was categorical, a level per number, without a word."""
    X, y = _marked()
    said = r"column\(s\) \['a'\] hold text whose values read as numbers but for at most 3"
    with pytest.warns(UserWarning, match=rf"X: {said}"):
        ff.FedForestRegressor(n_estimators=2, privacy="none").fit(X, y)
    with pytest.warns(UserWarning, match=rf"Client 's': {said}"):
        ff.Client(X, y, name="s")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # declared categorical, or read as missing: no word
        ff.FedForestRegressor(n_estimators=2, privacy="none", categorical_features=["a"]).fit(X, y)
        numbers = X.assign(a=pd.to_numeric(X["a"], errors="coerce"))
        ff.FedForestRegressor(n_estimators=2, privacy="none").fit(numbers, y)


def test_a_peers_text_of_numbers_warns_as_the_estimators() -> None:
    """A peer read both kinds of text of numbers as categories without a word."""
    X, y = _marked()
    X = X.assign(b=np.arange(len(y)) % 7)
    labels = np.arange(len(y)) % 2
    with pytest.warns(UserWarning, match=r"X: column\(s\) \['a'\] hold text .* but for at most"):
        Peer("A", n_estimators=2, random_state=0).fit(X, labels)
    commas = X.assign(a=[f"{v:.1f}".replace(".", ",") for v in y])
    with pytest.warns(UserWarning, match=r"\['a'\] hold text .* once the spaces"):
        Peer("A", n_estimators=2, random_state=0).fit(commas, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # declared: no word
        Peer("A", n_estimators=2, random_state=0).fit(X, labels, categorical_features=["a"])


@pytest.mark.parametrize(
    "levels",
    [
        [str(k) for k in range(9)] + ["?"],  # fewer than 10 numbers: codes
        [str(k) for k in range(20)] + ["a", "b", "c", "d"],  # more than 3 other texts
        ["north", "south", "east"],
    ],
    ids=["few-numbers", "many-texts", "words"],
)
def test_text_columns_of_codes_or_words_do_not_warn(levels: list[str]) -> None:
    X = pd.DataFrame({"c": np.array(levels * 10, dtype=object)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ff.FedForestRegressor(n_estimators=2, privacy="none").fit(X, np.arange(len(X)) % 7)


# --------------------------------------- a categories key naming no column, named as categories
@pytest.mark.parametrize("key", ["zz", 5, -1])
def test_a_categories_key_naming_no_column_is_refused_as_categories(key: Any) -> None:
    """``fit`` blamed ``categorical_features``, which the user had not set; the clients of
    ``fit_federated`` said "the declared categories name column ...", as now both do."""
    rng = np.random.default_rng(16)
    X = pd.DataFrame({"a": rng.normal(size=60), "c": np.array(["u", "v", "w"] * 20)})
    est = ff.FedForestRegressor(n_estimators=2, privacy="none", categories={key: ["u"]})
    said = rf"the declared categories name column {key!r}, which is not a column of X"
    with pytest.raises(ValueError, match=said):
        est.fit(X, X["a"])
    with pytest.raises(ValueError, match=rf"the declared categories name column {key!r}"):
        est.fit_federated([ff.Client(X, X["a"], name="s")])


# -------------------- a column missing (almost) everywhere under "secure": drawn past, not a leaf
@pytest.mark.parametrize("known", [0, 6], ids=["all-missing", "known-in-6-rows"])
def test_a_column_without_a_secure_grid_is_drawn_past_as_a_constant_one(known: int) -> None:
    """Known in fewer than ``min_aggregate_rows`` rows, the column gets no grid under
    ``"secure"`` and never splits; a node that drew it (one feature of two per node, the
    regressor's default 1/3) became a leaf: R² -0.008, every tree one leaf."""
    rng = np.random.default_rng(16)
    X = pd.DataFrame({"a": rng.normal(size=120), "z": np.nan})
    X.loc[: known - 1, "z"] = 1.0
    y = X["a"].to_numpy()
    model = ff.FedForestRegressor(n_estimators=5, random_state=0)
    model.fit(X, y, client_ids=np.arange(120) % 3)
    assert all(len(tree.feature) > 1 for tree in model.trees_)
    assert model.score(X, y) > 0.9
