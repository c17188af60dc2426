"""Odd inputs, third round (docs/sklearn.md, "Inputs a user brings"; docs/cli.md).

Each test failed on d13ea5a: a client given X with rows but no column was told it had no
rows; a ``Client`` given an object array whose cells held lists read each such column as
several columns, silently (a cell ``[v]`` as ``v``), where ``fit`` and scikit-learn refuse
it; a nested column (a Parquet list or struct column, lists or dicts in an ``object``
column) declared categorical failed with "unhashable type: 'list'" in ``fit`` and a
``TypeError`` the server could not name under ``fit_federated``, and undeclared it was
refused with advice to declare it categorical; a ``Client`` given complex ``X`` dropped
the imaginary parts with NumPy's warning only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

from fedforest import Client, FedForestClassifier, FedForestRegressor
from fedforest.cli import main
from fedforest.datasets.files import read_client_data
from fedforest.federated.client_errors import error_text

#: A client's refusal in the handshake, its name said once (before, twice: "Client 'a'
#: failed in round 0 (handshake): ValueError: Client 'a': ...").
ONCE = r"failed in round 0 \(handshake\): ValueError: "

PRIVACY = ["secure", "none"]


def _data(n: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(seed).normal(size=(n, 3))
    return X, X[:, 0] + 0.5 * X[:, 1]


def _kw(privacy: str, **extra: Any) -> dict[str, Any]:
    return dict(n_estimators=3, max_depth=3, random_state=0, privacy=privacy, **extra)


# ------------------------------------------------------------------ no columns
@pytest.mark.parametrize("kind", ["array", "frame", "lists"])
def test_a_client_with_rows_but_no_column_is_told_so(kind: str) -> None:
    # Before: "Client 'a' has no rows; remove it from the federation."
    X = {
        "array": np.empty((40, 0)),
        "frame": pd.DataFrame(index=range(40)),
        "lists": [[] for _ in range(40)],
    }[kind]
    with pytest.raises(ValueError, match=r"Client 'a': X has 0 features \(shape \(40, 0\)\)"):
        Client(X, np.zeros(40), "a")
    # fit refuses the same rows with scikit-learn's message.
    with pytest.raises(ValueError, match=r"Found array with 0 feature\(s\)"):
        FedForestRegressor(**_kw("none")).fit(np.empty((40, 0)), np.zeros(40))
    with pytest.raises(ValueError, match="has no rows"):  # no rows is still said first
        Client(np.empty((0, 0)), np.zeros(0), "a")


# ------------------------------------------------------------------ complex X
@pytest.mark.parametrize("frame", [False, True])
def test_a_clients_complex_x_is_refused_as_fit_refuses_it(frame: bool) -> None:
    # Before: the client dropped the imaginary parts, with NumPy's ComplexWarning only.
    X, y = _data()
    Z = X.astype(complex)
    Z[:, 2] += 1j
    with pytest.raises(ValueError, match="Complex data not supported"):
        RandomForestRegressor(n_estimators=2).fit(Z, y)  # the oracle
    with pytest.raises(ValueError, match="Complex data not supported"):
        FedForestRegressor(**_kw("none")).fit(Z, y, client_ids=np.repeat([0, 1], 40))
    given = pd.DataFrame(Z, columns=["a", "b", "c"]) if frame else Z
    column = "'a'" if frame else "0"
    with pytest.raises(ValueError, match=f"Client 's': column {column} of X is complex"):
        Client(given[:40], y[:40], "s")


# ------------------------------------------------------------------ nested cells
def _with_lists(X: np.ndarray, width: int) -> np.ndarray:
    """X as objects, its column 1 replaced by lists of ``width`` numbers."""
    out = X.astype(object)
    out[:, 1] = [[float(v)] * width for v in X[:, 1]]
    return out


@pytest.mark.parametrize("width", [1, 2])
def test_a_clients_object_array_of_lists_is_refused_naming_the_column(width: int) -> None:
    # Before: the client's X had 2 + width columns (a list of two numbers as two columns),
    # and the fit ran on them; fit and scikit-learn's forest refuse the same array.
    X, y = _data()
    odd = _with_lists(X, width)
    with pytest.raises(ValueError, match="setting an array element with a sequence"):
        RandomForestRegressor(n_estimators=2).fit(odd, y)  # the oracle refuses it
    with pytest.raises(ValueError, match="Client 'a': column 1 of X holds list values"):
        Client(odd[:40], y[:40], "a")
    with pytest.raises(ValueError, match="Column 1 of X holds list values"):
        FedForestRegressor(**_kw("none")).fit(odd, y, client_ids=np.repeat([0, 1], 40))
    assert Client(X[:40], y[:40], "a").X.shape == (40, 3)  # the numbers alone make it


def _nested_frame(X: np.ndarray, kind: str) -> pd.DataFrame:
    cell = {"list": lambda v: [v, v], "dict": lambda v: {"u": v}, "ndarray": np.atleast_1d}
    return pd.DataFrame({"a": X[:, 0], "n": [cell[kind](v) for v in X[:, 1]], "c": X[:, 2]})


@pytest.mark.parametrize("privacy", PRIVACY)
@pytest.mark.parametrize("kind", ["list", "dict", "ndarray"])
@pytest.mark.parametrize("declared", [False, True])
def test_a_nested_column_is_refused_naming_it(privacy: str, kind: str, declared: bool) -> None:
    # Before: declared categorical, TypeError "unhashable type: 'list'" in fit (an array
    # column was taken as categories), and under fit_federated the client's handshake
    # failed with a TypeError whose text stayed with the client; undeclared, the refusal
    # advised declaring it categorical.
    X, y = _data()
    frame = _nested_frame(X, kind)
    cat = ["n"] if declared else None
    expected = f"olumn 'n' of X holds {kind} values"
    error = TypeError if kind == "dict" else ValueError  # NumPy's, as scikit-learn's
    with pytest.raises(error, match=f"^C{expected}"):
        FedForestRegressor(**_kw(privacy), categorical_features=cat).fit(
            frame, y, client_ids=np.repeat(["a", "b"], 40)
        )
    with pytest.raises(ValueError, match=f"^Client 'a': c{expected}"):
        Client(frame.iloc[:40], y[:40], "a", categorical_features=cat)


def test_predicting_a_nested_column_names_it() -> None:
    X, y = _data()
    frame = pd.DataFrame(X, columns=["a", "n", "c"])
    model = FedForestClassifier(**_kw("none")).fit(frame, y > 0, client_ids=np.repeat([0, 1], 40))
    odd = _nested_frame(X, "list")
    for method in (model.predict, model.predict_proba, model.apply, model.decision_path):
        with pytest.raises(ValueError, match="Column 'n' of X holds list values"):
            method(odd)
    assert model.predict(frame).shape == (80,)


def test_a_parquet_list_column_names_the_file_the_client_and_the_column(
    tmp_path: Path, capsys: Any
) -> None:
    pytest.importorskip("pyarrow")
    X, y = _data(40)
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(visits=[[1, 2]] * 20 + [[3]] * 20, y=y)
    path, other = tmp_path / "site-a.parquet", tmp_path / "site-b.parquet"
    frame.to_parquet(path)
    frame.to_parquet(other)  # one file for two clients is refused (its rows twice)
    X_file, y_file = read_client_data(path, "y")
    with pytest.raises(ValueError, match="Client 'site-a': column 'visits' of X holds ndarray"):
        Client(X_file, y_file, "site-a")
    argv = ["train", "--target", "y", "--trees", "2", "--out", str(tmp_path / "m.ffm")]
    with pytest.raises(SystemExit) as exc:  # the command: a usage error naming the file
        main([*argv, f"--client=site-a={path}", f"--client=site-b={other}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{str(path)!r}: Client 'site-a': column 'visits' of X holds ndarray values" in err
    pytest.importorskip("flwr")
    from fedforest.transport.flower import client_from_node_config

    config = {"data-path": str(path), "target": "y", "name": "site-a"}
    with pytest.raises(ValueError) as info:
        client_from_node_config(config)
    text = str(info.value)
    assert text.startswith(repr(str(path))) and "column 'visits' of X holds" in text
    assert error_text(info.value, "loading its data", log=False) == text  # sent as it is
    frame.drop(columns="visits").to_parquet(path)  # without it, the file makes the client
    assert client_from_node_config(config).n_samples == 40


# ------------------------------------------------------------------ files
def test_a_csv_with_spaces_after_its_commas_says_so(tmp_path: Path, capsys: Any) -> None:
    # Before: "has no target column 'y'; its columns are ['a', ' b', ' y']", the spaces
    # easy to miss in the quotes (pandas keeps them in the names).
    X, y = _data(40)
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(y=y)
    spaced = tmp_path / "spaced.csv"
    spaced.write_text(frame.to_csv(index=False).replace(",", ", "))
    spaced_b = tmp_path / "spaced_b.csv"  # one file for two clients is refused
    spaced_b.write_text(spaced.read_text())
    with pytest.raises(ValueError, match=r"names \[' y'\] have spaces around them"):
        read_client_data(spaced, "y")
    out = str(tmp_path / "m.ffm")
    argv = ["train", "--target", "y", "--trees", "20", "--max-depth", "2", "--privacy", "none"]
    argv += ["--out", out]
    with pytest.raises(SystemExit) as exc:
        main([*argv, f"--client=a={spaced}", f"--client=b={spaced_b}"])
    assert exc.value.code == 2
    assert "have spaces around them" in capsys.readouterr().err
    plain, plain_b = tmp_path / "plain.csv", tmp_path / "plain_b.csv"
    frame.to_csv(plain, index=False)
    frame.to_csv(plain_b, index=False)
    assert main([*argv, f"--client=a={plain}", f"--client=b={plain_b}"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:  # predict: the model's columns, spaced in the file
        main(["predict", out, str(spaced), "--out", str(tmp_path / "p.csv")])
    assert exc.value.code == 2
    assert "names [' b', ' c'] have spaces around them" in capsys.readouterr().err


# ------------------------------------------------------------------ parameters
@pytest.mark.parametrize("privacy", PRIVACY)
@pytest.mark.parametrize("scalar", [np.float16, np.longdouble])
def test_ccp_alpha_as_any_numpy_float_prunes_as_a_float(privacy: str, scalar: Any) -> None:
    # Before: numba's NotImplementedError "float16" (a TypingError for a long double) from
    # inside the pruning kernel; scikit-learn's forest takes both.
    X, y = _data()
    alpha = scalar(0.05)
    RandomForestRegressor(n_estimators=2, ccp_alpha=alpha).fit(X, y)  # the oracle takes it
    ids = np.repeat(["a", "b"], 40)
    odd = FedForestRegressor(**_kw(privacy), ccp_alpha=alpha).fit(X, y, client_ids=ids)
    plain = FedForestRegressor(**_kw(privacy), ccp_alpha=float(alpha)).fit(X, y, client_ids=ids)
    assert np.array_equal(odd.predict(X), plain.predict(X))
    unpruned = FedForestRegressor(**_kw(privacy)).fit(X, y, client_ids=ids)
    leaves = [sum(t.children_left == -1) for t in (odd.trees_ + unpruned.trees_)]
    assert sum(leaves[:3]) < sum(leaves[3:])  # it pruned


@pytest.mark.parametrize("privacy", PRIVACY)
def test_numpy_numbers_as_parameters_fit_the_forest_of_python_numbers(privacy: str) -> None:
    # Before: n_bins, tree_batch_size or min_aggregate_rows as NumPy integers (a grid's
    # np.arange) failed with "Object of type int64 is not JSON serializable" from a
    # message header, and a long double min_weight_fraction_leaf with numba's TypingError
    # (under "secure" a RecursionError in the settings digest).
    X, y = _data()
    ids = np.repeat(["a", "b"], 40)
    given = dict(n_bins=16, tree_batch_size=2, min_aggregate_rows=12, ccp_alpha=0.05)
    given |= dict(min_weight_fraction_leaf=0.125, min_impurity_decrease=0.001)
    numpy = {k: (np.int64(v) if isinstance(v, int) else np.longdouble(v)) for k, v in given.items()}
    odd = FedForestRegressor(**_kw(privacy), **numpy).fit(X, y, client_ids=ids)
    plain = FedForestRegressor(**_kw(privacy), **given).fit(X, y, client_ids=ids)
    assert np.array_equal(odd.predict(X), plain.predict(X))


def test_grid_search_over_numpy_n_bins() -> None:
    from sklearn.model_selection import GridSearchCV

    X, y = _data()
    model = FedForestRegressor(n_estimators=3, max_depth=3, random_state=0)
    grid = GridSearchCV(model, {"n_bins": np.arange(16, 48, 16)}, cv=2, error_score="raise")
    grid.fit(X, y, client_ids=np.tile(["a", "b"], 40))
    assert grid.best_params_["n_bins"] in (16, 32)


# ------------------------------------------------------------------ labels
@pytest.mark.parametrize("privacy", PRIVACY)
def test_a_clients_long_double_labels_are_its_own_error(privacy: str) -> None:
    # Before: the server refused the client's handshake as an invalid reply ("header field
    # 'labels' holds np.longdouble('0.0')"), blaming the client as if it were hostile.
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("a long double is a float64 on this platform")
    X, y = _data()
    labels = (y > 0).astype(np.longdouble)
    name = np.dtype(np.longdouble).name
    clients = [Client(X[:40], labels[:40], "a"), Client(X[40:], labels[40:], "b")]
    with pytest.raises(ValueError, match=rf"Client 'a' {ONCE}y has dtype {name} \(long double\)"):
        FedForestClassifier(**_kw(privacy)).fit_federated(clients)
    clients = [Client(X[:40], labels[:40].astype(np.float64), "a"), clients[1]]
    with pytest.raises(ValueError, match=rf"Client 'b' {ONCE}y has dtype {name}"):  # only b now
        FedForestClassifier(**_kw(privacy)).fit_federated(clients)


# ------------------------------------------------------------------ pandas indexes
def test_series_indexes_are_ignored_rows_go_by_position_as_in_scikit_learn() -> None:
    # A pin, not a fix (it held on d13ea5a): y, sample_weight and client_ids as Series whose
    # index does not match X's are read by position, as scikit-learn's forest reads y.
    X, y = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    ids = np.repeat(["a", "b"], 40)
    other = np.arange(80)[::-1] + 1000
    kw = _kw("none")
    plain = FedForestRegressor(**kw).fit(frame, y, client_ids=ids, sample_weight=np.ones(80))
    series = FedForestRegressor(**kw).fit(
        frame,
        pd.Series(y, index=other),
        client_ids=pd.Series(ids, index=other),
        sample_weight=pd.Series(np.ones(80), index=other),
    )
    assert np.array_equal(plain.predict(frame), series.predict(frame))
    clients = [
        Client(frame.iloc[:40], pd.Series(y[:40], index=other[:40]), "a"),
        Client(frame.iloc[40:], pd.Series(y[40:], index=other[40:]), "b"),
    ]
    federated = FedForestRegressor(**kw).fit_federated(clients)
    assert np.array_equal(plain.predict(frame), federated.predict(frame))
    oracle = RandomForestRegressor(n_estimators=2, random_state=0)
    a = oracle.fit(frame, y).predict(frame)
    b = oracle.fit(frame, pd.Series(y, index=other)).predict(frame)
    assert np.array_equal(a, b)  # scikit-learn ignores the index too


# ------------------------------------------------------------------ the derived floor
def test_a_too_small_federation_is_told_where_its_floor_comes_from() -> None:
    # min_samples_leaf=0.6 of 80 rows is 48 rows, so the floor is 96 (above the 80 rows), a
    # number the user never wrote: the refusal says it is the default and how it is derived.
    X, y = _data()
    clients = [Client(X[:40], y[:40], "a"), Client(X[40:], y[40:], "b")]
    with pytest.raises(ValueError, match=r"min_aggregate_rows = 96 \(unless set, max\(10, 2 \*"):
        FedForestRegressor(n_estimators=2, min_samples_leaf=0.6).fit_federated(clients)
