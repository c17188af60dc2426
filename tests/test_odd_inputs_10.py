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

(The ``privacy="none"`` cases are controls: they passed.)
"""

from __future__ import annotations

import io
import json
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
