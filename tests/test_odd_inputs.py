"""Odd inputs a user brings, and the errors they meet (docs/sklearn.md, "Inputs a user brings").

Each test failed on m16: a silent wrong answer (all-zero sample weights under
fit_federated, negative or NaN class weights, a string of declared levels), a TypeError
from inside the grower (``n_estimators=True``), a hostile-reply error blaming a client for
its duplicate column names, or a CSV error that did not say why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from fedforest import Client, FedForestClassifier, FedForestRegressor
from fedforest.cli import main

#: A client's refusal in the handshake, its name said once (before, twice: "Client 'a'
#: failed in round 0 (handshake): ValueError: Client 'a': ...").
ONCE = r"failed in round 0 \(handshake\): ValueError: "

PRIVACY = ["secure", "none"]


def _data(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, X[:, 0] + 0.1 * rng.normal(size=n), np.where(X[:, 0] > 0, "a", "b")


def _kw(privacy: str) -> dict[str, Any]:
    return dict(n_estimators=3, max_depth=3, random_state=0, privacy=privacy)


def _clients(X: np.ndarray, y: np.ndarray, **kw: Any) -> list[Client]:
    half = X.shape[0] // 2
    return [Client(X[:half], y[:half], "a", **kw), Client(X[half:], y[half:], "b", **kw)]


@pytest.mark.parametrize("privacy", PRIVACY)
def test_every_client_weighing_zero_is_refused_as_scikit_learn(privacy: str) -> None:
    # fit refuses it (scikit-learn's check); fit_federated grew single leaves predicting 0.
    X, y, _ = _data()
    zero = np.zeros(X.shape[0] // 2)
    model = FedForestRegressor(**_kw(privacy))
    with pytest.raises(ValueError, match="at least one non-zero"):
        model.fit_federated(_clients(X, y, sample_weight=zero))
    with pytest.raises(ValueError, match="at least one non-zero"):
        model.fit(X, y, sample_weight=np.zeros(X.shape[0]))
    # One client's rows all weighing 0 is fine: the other's make the forest.
    clients = [
        Client(X[:60], y[:60], "a", sample_weight=zero),
        Client(X[60:], y[60:], "b", sample_weight=np.ones(60)),
    ]
    assert np.ptp(model.fit_federated(clients).predict(X)) > 0


@pytest.mark.parametrize("privacy", PRIVACY)
@pytest.mark.parametrize(
    ("class_weight", "message"),
    [
        ({"a": -1.0}, r"class_weight\['a'\] is -1.0; class weights must be finite"),
        ({"a": np.nan}, r"class_weight\['a'\] is nan"),
        ({"a": np.inf}, r"class_weight\['a'\] is inf"),
        ({"a": "2"}, r"class_weight\['a'\] must be a number"),
        ([{"a": -1.0}], r"class_weight\['a'\] is -1.0"),
        ({"a": 0, "b": 0}, "class_weight gives every class weight 0"),
    ],
)
def test_bad_class_weights_are_refused(privacy: str, class_weight: Any, message: str) -> None:
    # They gave NaN or all-zero probabilities, silently.
    X, _, labels = _data()
    model = FedForestClassifier(**_kw(privacy), class_weight=class_weight)
    with pytest.raises(ValueError, match=message):
        model.fit(X, labels)
    with pytest.raises(ValueError, match=message):
        model.fit_federated(_clients(X, labels))


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ("ab", r"categories\[0\] must be a list of levels, got 'ab' \(\['ab'\] declares"),
        (5, r"categories\[0\] must be a list of levels, got 5\."),
        ([], r"categories\[0\] declares no level"),
    ],
)
def test_declared_levels_must_be_a_non_empty_list(levels: Any, message: str) -> None:
    # "ab" declared the levels "a" and "b"; [] made every value missing; silently.
    X, y, _ = _data()
    model = FedForestRegressor(**_kw("none"), categories={0: levels})
    with pytest.raises(ValueError, match=message):
        model.fit(X, y)
    with pytest.raises(ValueError, match=message):
        model.fit_federated(_clients(X, y))


@pytest.mark.parametrize("privacy", PRIVACY)
def test_n_estimators_true_is_one_tree_as_scikit_learn(privacy: str) -> None:
    # scikit-learn's constraints take True as the int 1; the grower raised a TypeError.
    X, y, _ = _data()
    model = FedForestRegressor(**{**_kw(privacy), "n_estimators": True}).fit(X, y)
    assert len(model.estimators_) == 1


def test_a_bad_max_leaf_nodes_gets_the_parameter_error() -> None:
    # It got the federation's refusal of any number, as if 'x' were one.
    X, y, _ = _data()
    with pytest.raises(InvalidParameterError, match="'max_leaf_nodes' parameter"):
        FedForestRegressor(max_leaf_nodes="x").fit(X, y)


def test_a_client_with_duplicate_column_names_is_refused_at_once() -> None:
    # The handshake refused it as an invalid reply, as if the client were hostile.
    X, y, _ = _data()
    frame = pd.DataFrame(X, columns=["a", "a", "c"])
    with pytest.raises(ValueError, match=r"Client 'x': X has duplicate column names \['a'\]"):
        Client(frame, y, "x")


def test_a_semicolon_separated_csv_says_so(tmp_path: Path, capsys: Any) -> None:
    X, y, _ = _data()
    frame = pd.DataFrame(X, columns=["p", "q", "r"]).assign(y=y)
    for k in range(2):
        frame.to_csv(tmp_path / f"s{k}.csv", sep=";", index=False)
    argv = ["train", "--target", "y", "--trees", "2", "--out", str(tmp_path / "m.ffm")]
    argv += [f"--client=c{k}={tmp_path / f's{k}.csv'}" for k in range(2)]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "the file looks ';'-separated" in capsys.readouterr().err


def test_fit_federated_warns_of_categorical_features_the_clients_did_not_follow() -> None:
    # The estimator's categorical_features is fit's: under fit_federated it was ignored,
    # silently, and the column split as numbers.
    X, y, _ = _data()
    X[:, 1] = np.arange(X.shape[0]) % 3
    model = FedForestRegressor(**_kw("none"), categorical_features=[1])
    with pytest.warns(UserWarning, match=r"categorical_features names \[1\], which the clients"):
        model.fit_federated(_clients(X, y))
    assert model.categories_ == {}
    model.fit_federated(_clients(X, y, categorical_features=[1]))  # followed: no warning
    assert list(model.categories_) == [1]


@pytest.mark.parametrize("privacy", PRIVACY)
def test_declared_classes_of_the_wrong_shape_name_the_client(privacy: str) -> None:
    # A list per output for one output was a TypeError inside the client's handshake
    # (RuntimeError "handshake failed with TypeError", naming nothing).
    X, _, labels = _data()
    model = FedForestClassifier(**_kw(privacy), classes=[["a", "b"]])
    with pytest.raises(
        ValueError, match=rf"Client 'a' {ONCE}the declared classes are not one list"
    ):
        model.fit_federated(_clients(X, labels))
    both = np.c_[labels, labels]
    with pytest.raises(ValueError, match="declare a list of labels per output"):
        model.set_params(classes=["a", "b"]).fit_federated(_clients(X, both))
    model.set_params(classes=[["a", "b"], ["a", "b"]]).fit_federated(_clients(X, both))
    assert [list(c) for c in model.classes_] == [["a", "b"], ["a", "b"]]


def test_top_l_above_the_features_is_refused_as_max_features() -> None:
    # Each client allocated its rankings at top_l columns: top_l=10**9 hung the fit.
    X, y, _ = _data()
    with pytest.raises(ValueError, match=r"top_l must be in \[1, n_features\]; got top_l=4"):
        FedForestRegressor(**_kw("none"), top_l=4).fit(X, y)
    assert len(FedForestRegressor(**_kw("none"), top_l=3).fit(X, y).estimators_) == 3


def test_a_clients_non_string_column_names_are_positions_as_in_scikit_learn() -> None:
    # A Client made them names ("0", "1", ...): fit_federated's model then warned "X does
    # not have valid feature names" at predict on the very frame the clients came from,
    # and a client given the same columns as an array was refused; fit has no names.
    X, y, _ = _data()
    frames = [pd.DataFrame(X[:60]), pd.DataFrame(X[60:])]
    model = FedForestRegressor(**_kw("none"))
    model.fit_federated([Client(frames[0], y[:60], "a"), Client(frames[1], y[60:], "b")])
    assert not hasattr(model, "feature_names_in_")
    assert np.array_equal(model.predict(pd.DataFrame(X)), model.predict(X))  # no warning
    array_too = [Client(frames[0], y[:60], "a"), Client(X[60:], y[60:], "b")]
    assert np.array_equal(model.fit_federated(array_too).predict(X), model.predict(X))
    with pytest.raises(TypeError, match="Client 'm': feature names are only supported if all"):
        Client(pd.DataFrame(X, columns=["a", 1, "c"]), y, "m")  # scikit-learn's TypeError
