"""Tests of saving and loading fitted estimators (``model.save`` / ``fedforest.load``)."""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest
from fedforest import Client, FedForestClassifier, FedForestRegressor, LocalFederation

# Small forests with oob_score=True: some rows are in every bag (expected here).
pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")

N_TREES = 12


def regression_frame(n: int = 200, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["age", "dose", "weight", "height"])
    y = 2.0 * X["dose"].to_numpy() + 0.3 * rng.normal(size=n) + 10.0
    return X, y


def classification_frame(n: int = 200, seed: int = 1) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["a", "b", "c", "d"])
    y = np.array(["high", "low", "mid"])[np.digitize(X["b"].to_numpy(), [-0.5, 0.5])]
    return X, y


@pytest.fixture(scope="module")
def regressor() -> FedForestRegressor:
    X, y = regression_frame()
    model = FedForestRegressor(n_estimators=N_TREES, max_depth=5, oob_score=True, random_state=3)
    return model.fit(X, y, client_ids=np.arange(len(y)) % 3)


@pytest.fixture(scope="module")
def classifier() -> FedForestClassifier:
    X, y = classification_frame()
    model = FedForestClassifier(n_estimators=N_TREES, max_depth=5, oob_score=True, random_state=4)
    return model.fit(X, y, client_ids=np.arange(len(y)) % 2)


def assert_same_model(a: Any, b: Any, X: Any) -> None:
    assert type(a) is type(b)
    assert a.get_params() == b.get_params()
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.apply(X), b.apply(X))
    assert a.n_features_in_ == b.n_features_in_
    np.testing.assert_array_equal(a.feature_importances_, b.feature_importances_)
    assert a.communication_.rounds == b.communication_.rounds
    assert a.communication_.upload_bytes == b.communication_.upload_bytes
    assert a.n_clients_ == b.n_clients_
    assert len(a.trees_) == len(b.trees_)
    for ta, tb in zip(a.trees_, b.trees_, strict=True):
        for name, arr in ta.as_dict().items():
            np.testing.assert_array_equal(arr, getattr(tb, name))
    if hasattr(a, "feature_names_in_"):
        np.testing.assert_array_equal(a.feature_names_in_, b.feature_names_in_)
    else:
        assert not hasattr(b, "feature_names_in_")
    if hasattr(a, "oob_score_"):
        np.testing.assert_equal(a.oob_score_, b.oob_score_)
    else:
        assert not hasattr(b, "oob_score_")


def test_round_trip_regressor(regressor: FedForestRegressor, tmp_path: Path) -> None:
    path = tmp_path / "reg.ffm"
    regressor.save(path)
    loaded = fedforest.load(path)
    X, _ = regression_frame(seed=9)
    assert_same_model(regressor, loaded, X)
    assert loaded.oob_score_ == regressor.oob_score_
    assert list(loaded.feature_names_in_) == ["age", "dose", "weight", "height"]
    assert not hasattr(loaded, "classes_")


def test_round_trip_classifier_with_string_labels(
    classifier: FedForestClassifier, tmp_path: Path
) -> None:
    path = tmp_path / "clf.ffm"
    classifier.save(str(path))
    loaded = fedforest.load(str(path))
    X, _ = classification_frame(seed=9)
    assert_same_model(classifier, loaded, X)
    np.testing.assert_array_equal(loaded.classes_, ["high", "low", "mid"])
    assert loaded.classes_.dtype.kind == "U"
    assert loaded.n_classes_ == 3
    np.testing.assert_array_equal(loaded.predict_proba(X), classifier.predict_proba(X))
    assert loaded.oob_score_ == classifier.oob_score_


def test_round_trip_integer_labels_and_federated_fit(tmp_path: Path) -> None:
    X, y = classification_frame()
    yi = np.digitize(X["b"].to_numpy(), [0.0]) * 5 + 1  # labels 1 and 6
    Xa = X.to_numpy()
    fed = LocalFederation([Client(Xa[:90], yi[:90], "a"), Client(Xa[90:], yi[90:], "b")])
    model = FedForestClassifier(n_estimators=5, random_state=np.random.RandomState(0))
    model.fit_federated(fed)
    model.save(tmp_path / "m.ffm")
    loaded = fedforest.load(tmp_path / "m.ffm")
    assert loaded.random_state is None  # a RandomState is not stored; the trees are
    np.testing.assert_array_equal(loaded.classes_, [1, 6])
    np.testing.assert_array_equal(loaded.predict(Xa), model.predict(Xa))
    assert not hasattr(loaded, "feature_names_in_")


def test_nan_oob_score_round_trips(tmp_path: Path) -> None:
    X, _ = regression_frame()
    model = FedForestRegressor(privacy="none", n_estimators=20, oob_score=True, random_state=0)
    model.fit(X, np.full(X.shape[0], 3.0))  # constant target: R^2 is undefined
    assert np.isnan(model.oob_score_)
    model.save(tmp_path / "nan.ffm")
    assert np.isnan(fedforest.load(tmp_path / "nan.ffm").oob_score_)


def test_pickle_file_is_refused(regressor: FedForestRegressor, tmp_path: Path) -> None:
    path = tmp_path / "model.pkl"
    with open(path, "wb") as fh:
        pickle.dump(regressor, fh)
    with pytest.raises(ValueError, match="pickle"):
        fedforest.load(path)


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9, 0.999])
def test_truncated_file_is_refused(
    classifier: FedForestClassifier, tmp_path: Path, fraction: float
) -> None:
    path = tmp_path / "clf.ffm"
    classifier.save(path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ValueError, match="cannot load model file"):
        fedforest.load(path)


def rewrite_header(src: Path, dst: Path, edit: Any) -> None:
    """Copy the model archive ``src`` to ``dst`` with its JSON header passed through ``edit``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "__header__.npy":
                raw = np.load(io.BytesIO(data), allow_pickle=False)
                meta = json.loads(raw.tobytes().decode("utf-8"))
                edit(meta)
                text = json.dumps(meta).encode("utf-8")
                buf = io.BytesIO()
                np.save(buf, np.frombuffer(text, dtype=np.uint8), allow_pickle=False)
                data = buf.getvalue()
            zout.writestr(item, data)


def claim_classifier(meta: dict[str, Any]) -> None:
    meta["kind"] = meta["header"]["kind"] = "FedForestClassifier"
    meta["header"]["params"]["criterion"] = "gini"


def claim_classifier_with_classes(meta: dict[str, Any]) -> None:
    claim_classifier(meta)
    meta["header"]["classes"] = ["only"]  # one class, one value per node: shapes agree


def claim_regressor(meta: dict[str, Any]) -> None:
    meta["kind"] = meta["header"]["kind"] = "FedForestRegressor"
    meta["header"]["params"]["criterion"] = "squared_error"
    meta["header"]["classes"] = None


@pytest.mark.parametrize(
    ("which", "edit", "match"),
    [
        ("regressor", claim_classifier, "class"),
        ("regressor", claim_classifier_with_classes, "class proportions"),
        ("classifier", claim_regressor, "regressor"),
    ],
)
def test_header_claiming_the_other_kind_is_refused(
    request: pytest.FixtureRequest, tmp_path: Path, which: str, edit: Any, match: str
) -> None:
    model = request.getfixturevalue(which)
    model.save(tmp_path / "good.ffm")
    rewrite_header(tmp_path / "good.ffm", tmp_path / "forged.ffm", lambda meta: None)
    fedforest.load(tmp_path / "forged.ffm")  # the rewriting itself keeps a valid file
    rewrite_header(tmp_path / "good.ffm", tmp_path / "forged.ffm", edit)
    with pytest.raises(ValueError, match=match):
        fedforest.load(tmp_path / "forged.ffm")


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m["header"].update(params={"n_estimators": 0}),
        lambda m: m["header"].update(params="not a dict"),
        lambda m: m["header"].update(feature_names_in=["x"]),
        lambda m: m["header"].update(communication=[1, 2]),
        lambda m: m["header"].update(n_features_in=True),
        lambda m: m["header"].update(kind="Other") or m.update(kind="Other"),
    ],
)
def test_inconsistent_header_is_refused(
    regressor: FedForestRegressor, tmp_path: Path, edit: Any
) -> None:
    regressor.save(tmp_path / "good.ffm")
    rewrite_header(tmp_path / "good.ffm", tmp_path / "bad.ffm", edit)
    with pytest.raises(ValueError, match="cannot load model file"):
        fedforest.load(tmp_path / "bad.ffm")


def test_loading_never_unpickles(
    regressor: FedForestRegressor,
    classifier: FedForestClassifier,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    regressor.save(tmp_path / "reg.ffm")
    classifier.save(tmp_path / "clf.ffm")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle was called while loading a model file")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    X, _ = regression_frame()
    np.testing.assert_array_equal(
        fedforest.load(tmp_path / "reg.ffm").predict(X), regressor.predict(X)
    )
    Xc, _ = classification_frame()
    np.testing.assert_array_equal(
        fedforest.load(tmp_path / "clf.ffm").predict(Xc), classifier.predict(Xc)
    )


def test_save_needs_a_fitted_model(tmp_path: Path) -> None:
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        FedForestRegressor().save(tmp_path / "x.ffm")
    assert not (tmp_path / "x.ffm").exists()


def test_save_into_a_missing_directory_or_onto_one_names_the_path(
    regressor: FedForestRegressor, tmp_path: Path
) -> None:
    # Both errors named a hidden temp file ('.m.ffm.q8l5kqn3.tmp') the user never asked for.
    target = tmp_path / "no" / "such" / "m.ffm"
    with pytest.raises(FileNotFoundError, match=r"the directory .*such' does not exist") as info:
        regressor.save(target)
    assert ".tmp" not in str(info.value) and str(target) in str(info.value)
    with pytest.raises(IsADirectoryError, match="it is a directory") as info:
        regressor.save(tmp_path)
    assert ".tmp" not in str(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing left behind
