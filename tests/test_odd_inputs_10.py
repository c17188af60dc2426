"""Odd inputs, tenth round: the swarm's column-vector y, model files' unknown fields, labels.

Each test failed on main at 442e755:

- ``Peer.fit`` (and ``Peer.from_fitted``) refused ``y`` of shape (n, 1), "expected (n,)",
  where the estimators and scikit-learn take it with a ``DataConversionWarning``
  (``from_fitted`` took any shape, a y of another length too, unchecked);
- a model file (or share bundle) whose ``__header__`` record, or whose model header, held
  a field this fedforest does not know loaded, the field skipped silently: a newer
  fedforest's file or a damaged one. Refused now, naming the file and the field;
- under ``privacy="secure"``, ``fit_federated`` on clients holding text class labels (or
  numbers other than 0 to k - 1, or booleans) grew another forest than ``fit`` on the same
  rows split the same way: the bootstrap secret read the labels' text, where ``fit``'s
  clients hold the class indices; and so did declared ``classes`` or a ``class_weight``
  dict, which the settings digest read as labels, where ``fit`` declares codes.

- a model file whose header names a field twice in one JSON object loaded with the last
  value, silently.

(The ``privacy="none"`` cases are controls: they passed.) And pins: a model file written
big-endian loads and predicts as its little-endian twin; sample weights under ``"secure"``.
"""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import DataConversionWarning

import fedforest
from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.swarm import Peer, ShareBundle


def _frame(n: int = 120, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    return X, np.where(X["a"] > 0, "yes", "no")


_COLUMNS: dict[str, Callable[[np.ndarray], Any]] = {
    "ndarray (n, 1)": lambda y: y.reshape(-1, 1),
    "DataFrame": lambda y: pd.DataFrame({"t": y}),
    "category DataFrame": lambda y: pd.DataFrame({"t": y}).astype("category"),
}


@pytest.mark.parametrize("engine", ["sklearn", "fedforest"])
@pytest.mark.parametrize("kind", sorted(_COLUMNS))
def test_a_peers_column_vector_y_is_taken_as_scikit_learn_takes_it(kind: str, engine: str) -> None:
    X, y = _frame()
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        peer = Peer("p", n_estimators=3, engine=engine, random_state=0).fit(X, _COLUMNS[kind](y))
    flat = Peer("p", n_estimators=3, engine=engine, random_state=0).fit(X, y)
    np.testing.assert_array_equal(peer.y_, flat.y_)
    np.testing.assert_array_equal(peer.classes_, flat.classes_)
    for mine, theirs in zip(peer.trees_, flat.trees_, strict=True):
        np.testing.assert_array_equal(mine.value, theirs.value)
    with pytest.raises(ValueError, match=r"y has shape \(120, 2\); expected \(120,\)"):
        Peer("p", n_estimators=3, engine=engine).fit(X, np.column_stack([y, y]))


def test_from_fitted_checks_y_as_fit_does() -> None:
    from sklearn.ensemble import RandomForestClassifier

    X, y = _frame()
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X.to_numpy(), y)
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        peer = Peer.from_fitted("p", forest, X, y.reshape(-1, 1))
    np.testing.assert_array_equal(peer.y_, y)
    with pytest.raises(ValueError, match=r"y has shape \(60,\); expected \(120,\)"):
        Peer.from_fitted("p", forest, X, y[:60])


def _rewritten(path: Path, out: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """``path``'s file with ``change`` applied to its ``__header__`` record."""
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "__header__.npy":
                with zin.open(item.filename) as f:
                    meta = json.loads(np.lib.format.read_array(f, allow_pickle=False).tobytes())
                change(meta)
                buf = io.BytesIO()
                np.save(buf, np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
                data = buf.getvalue()
            zout.writestr(item.filename, data)
    return out


_FIELDS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "record": (lambda m: m.update(compression="zstd"), "'__header__' has fields ['compression']"),
    "model header": (
        lambda m: m["header"].update(target_scale=[1.0, 2.0]),
        "header has fields ['target_scale']",
    ),
}


@pytest.mark.parametrize("where", sorted(_FIELDS))
@pytest.mark.parametrize("cls", [FedForestRegressor, FedForestClassifier])
def test_a_model_file_with_a_field_this_version_lacks_is_refused(
    cls: Any, where: str, tmp_path: Path
) -> None:
    X, y = _frame()
    path = tmp_path / "m.ffm"
    cls(n_estimators=2, random_state=0).fit(X, X["a"] > 0).save(path)
    same = _rewritten(path, tmp_path / "same.ffm", lambda m: None)  # the control
    np.testing.assert_array_equal(fedforest.load(same).predict(X), fedforest.load(path).predict(X))
    change, field = _FIELDS[where]
    newer = _rewritten(path, tmp_path / "newer.ffm", change)
    with pytest.raises(ValueError) as info:
        fedforest.load(newer)
    text = str(info.value)
    assert str(newer) in text and field in text and "upgrade fedforest" in text.lower()


@pytest.mark.parametrize("where", sorted(_FIELDS))
def test_a_bundle_with_a_field_this_version_lacks_is_refused(where: str, tmp_path: Path) -> None:
    X, y = _frame()
    path = tmp_path / "p.ffb"
    Peer("p", n_estimators=2, random_state=0).fit(X, y).share().save(path)
    ShareBundle.load(_rewritten(path, tmp_path / "same.ffb", lambda m: None))  # the control
    change, field = _FIELDS[where]
    newer = _rewritten(path, tmp_path / "newer.ffb", change)
    with pytest.raises(ValueError) as info:
        ShareBundle.load(newer)
    assert str(newer) in str(info.value) and field in str(info.value)


@pytest.mark.parametrize("where", ["record", "model header", "nested"])
def test_a_model_file_naming_a_field_twice_is_refused(where: str, tmp_path: Path) -> None:
    X, _ = _frame()
    path = tmp_path / "m.ffm"
    FedForestRegressor(n_estimators=2, random_state=0).fit(X, X["a"]).save(path)
    field = {"record": "n_trees", "model header": "n_clients", "nested": "max_depth"}[where]
    twice = tmp_path / "twice.ffm"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(twice, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "__header__.npy":
                with zin.open(item.filename) as f:
                    text = np.lib.format.read_array(f, allow_pickle=False).tobytes().decode()
                assert f'"{field}": ' in text
                text = text.replace(f'"{field}": ', f'"{field}": 7, "{field}": ', 1)
                buf = io.BytesIO()
                np.save(buf, np.frombuffer(text.encode(), dtype=np.uint8))
                data = buf.getvalue()
            zout.writestr(item.filename, data)
    with pytest.raises(ValueError) as info:
        fedforest.load(twice)
    assert str(twice) in str(info.value) and f"names the field {field!r} twice" in str(info.value)


_LABELS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "text": lambda x: np.where(x > 0.5, "high", np.where(x > -0.5, "mid", "low")),
    "ints 3, 7": lambda x: np.where(x > 0, 3, 7),
    "bools": lambda x: x > 0,
    "object text": lambda x: np.where(x > 0, "a", "b").astype(object),
}


@pytest.mark.parametrize("kind", sorted(_LABELS))
@pytest.mark.parametrize("privacy", ["secure", "none"])
def test_fit_federated_on_class_labels_of_any_kind_is_fit(kind: str, privacy: str) -> None:
    X, _ = _frame(240)
    x = X.to_numpy()
    y = _LABELS[kind](x[:, 0] + 0.3 * x[:, 1])
    ids = np.arange(240) % 3
    est = FedForestClassifier(n_estimators=5, privacy=privacy, random_state=0)
    fitted = est.fit(x, y, client_ids=ids).predict_proba(x)
    clients = [fedforest.Client(x[ids == k], y[ids == k], name=str(k)) for k in range(3)]
    federated = est.fit_federated(clients).predict_proba(x)
    np.testing.assert_array_equal(federated, fitted)


@pytest.mark.parametrize(
    "setting",
    [
        {"classes": ["low", "mid", "high", "none of them"]},
        {"class_weight": "balanced"},
        {"class_weight": {"low": 2.0, "high": 0.5}},
        {"max_samples": 0.5},
    ],
    ids=["declared classes", "balanced", "class_weight dict", "max_samples"],
)
def test_fit_federated_on_text_labels_is_fit_under_other_settings(setting: dict[str, Any]) -> None:
    X, _ = _frame(240)
    x = X.to_numpy()
    y = _LABELS["text"](x[:, 0])
    ids = np.arange(240) % 2
    est = FedForestClassifier(n_estimators=5, random_state=1, **setting)
    fitted = est.fit(x, y, client_ids=ids).predict_proba(x)
    clients = [fedforest.Client(x[ids == k], y[ids == k], name=str(k)) for k in range(2)]
    np.testing.assert_array_equal(est.fit_federated(clients).predict_proba(x), fitted)


def test_fit_federated_on_multi_output_text_labels_is_fit() -> None:
    X, _ = _frame(240)
    x = X.to_numpy()
    Y = np.column_stack([_LABELS["text"](x[:, 0]), np.where(x[:, 1] > 0, "u", "v")])
    ids = np.arange(240) % 2
    est = FedForestClassifier(n_estimators=4, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few rows per class and client: the floor's warning
        fitted = est.fit(x, Y, client_ids=ids).predict_proba(x)
        clients = [fedforest.Client(x[ids == k], Y[ids == k], name=str(k)) for k in range(2)]
        federated = est.fit_federated(clients).predict_proba(x)
    for mine, theirs in zip(federated, fitted, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_the_digest_reads_declared_classes_and_class_weights_by_position() -> None:
    from dataclasses import replace

    from fedforest.federated.server.config import GrowerConfig
    from fedforest.federated.server.digest import settings_digest

    base = GrowerConfig(
        task="classification", criterion="gini", n_estimators=10, max_depth=4,
        min_samples_split=2, min_samples_leaf=10, min_impurity_decrease=0.0,
        max_features=1.0, n_bins=32, bootstrap=True, oob_score=False, seed=7,
        privacy="secure",
    )  # fmt: skip

    def digest(classes: Any, class_weight: Any, class_list: Any) -> bytes:
        cfg = replace(base, classes=classes, class_weight=class_weight)
        return settings_digest(cfg, {"a": 50}, {}, 3, class_list=class_list).tobytes()

    codes = digest([0, 1, 2], {0: 2.0}, [0, 1, 2])  # fit's: its codes
    assert digest(["a", "b", "z"], {"a": 2.0}, ["a", "b", "z"]) == codes  # fit_federated's
    assert digest(["a", "b", "z"], {"b": 2.0}, ["a", "b", "z"]) != codes  # another class
    assert digest(["a", "b"], {"a": 2.0}, ["a", "b"]) != codes  # fewer classes
    assert digest(["a", "b", "z"], {"a": 3.0}, ["a", "b", "z"]) != codes  # another weight


def _big_endian(path: Path, out: Path) -> Path:
    """``path``'s file with every multi-byte numeric array written big-endian."""
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w") as zout:
        for item in zin.infolist():
            with zin.open(item.filename) as f:
                arr = np.lib.format.read_array(f, allow_pickle=False)
            if arr.dtype.itemsize > 1 and arr.dtype.kind in "iuf":
                arr = arr.astype(arr.dtype.newbyteorder(">"))
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            zout.writestr(item.filename, buf.getvalue())
    return out


def test_pin_a_big_endian_model_file_predicts_as_its_little_endian_twin(tmp_path: Path) -> None:
    """A pin (it passed on main): a file written on a big-endian machine loads, predicts
    the same, and saves again in the canonical (little-endian) dtypes."""
    X, y = _frame()
    model = FedForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    model.save(tmp_path / "m.ffm")
    big = fedforest.load(_big_endian(tmp_path / "m.ffm", tmp_path / "big.ffm"))
    np.testing.assert_array_equal(big.predict_proba(X), model.predict_proba(X))
    assert {t.value.dtype.str for t in big.trees_} == {"<f8"}
    big.save(tmp_path / "again.ffm")
    again = fedforest.load(tmp_path / "again.ffm")
    np.testing.assert_array_equal(again.predict(X), model.predict(X))


def test_pin_fit_federated_grows_fits_forest_for_weights_fit_leaves_alone() -> None:
    """A pin of what docs/sklearn.md says (it held on main): under "secure" ``fit`` scales the
    weights by the power of two that puts the largest in [0.5, 1); clients given weights so
    scaled grow its forest, clients given them as they were another (fixed-point rounding)."""
    X, _ = _frame(300)
    x = X.to_numpy()
    y = x[:, 0] + 0.1 * np.random.default_rng(1).normal(size=300)
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=300)
    ids = np.arange(300) % 3
    est = FedForestRegressor(n_estimators=4, random_state=0)
    fitted = est.fit(x, y, client_ids=ids, sample_weight=w).predict(x)

    def federated(weights: np.ndarray) -> np.ndarray:
        clients = [
            fedforest.Client(x[ids == k], y[ids == k], name=str(k), sample_weight=weights[ids == k])
            for k in range(3)
        ]
        return est.fit_federated(clients).predict(x)

    scaled = np.ldexp(w, -np.frexp(w.max())[1])  # the largest weight in [0.5, 1)
    assert 0.5 <= scaled.max() < 1.0
    np.testing.assert_array_equal(federated(scaled), fitted)
    assert not np.array_equal(federated(w), fitted)
