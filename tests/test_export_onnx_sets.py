"""ONNX export of forests with set splits (ai.onnx.ml 5's TreeEnsemble), against fedforest.

A categorical column and the client index H are set splits; the graph reads the columns
of ``export_matrix`` (codes, the client's position last) as Treelite does. Known codes
route as ``predict``; a code a set split has not seen (an unseen category, an unknown
client, a missing category) goes to the heavier child, as ``apply`` sends it. Oracles:
``predict`` / ``predict_proba`` with ``client_ids``, and the mean of the leaves ``apply``
reaches.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.tree.export import to_onnx_graph

onnxruntime = pytest.importorskip("onnxruntime")

N = 480


def _frame(seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=N).astype(np.float32).astype(np.float64),
            "ward": pd.Categorical(rng.choice(["icu", "er", "surgery", "oncology"], size=N)),
        }
    )
    X.loc[rng.random(N) < 0.1, "a"] = np.nan
    h = rng.integers(0, 3, size=N)
    y = X["a"].fillna(0) + 2.0 * X["ward"].isin(["icu", "er"]) + 1.5 * (h == 1)
    return X, (y + 0.1 * rng.normal(size=N)).to_numpy(), h


X, Y, H = _frame(1)
PARAMS = {"n_estimators": 6, "max_depth": 5, "random_state": 0}


@pytest.fixture(
    scope="module", params=["regressor-H", "3-class-H", "regressor-secure", "regressor-2-outputs"]
)
def fitted(request):
    if request.param == "regressor-H":
        model = ff.FedForestRegressor(split_on_client=True, privacy="none", **PARAMS)
        model.fit(X, Y, client_ids=H)
    elif request.param == "3-class-H":
        model = ff.FedForestClassifier(split_on_client=True, privacy="none", **PARAMS)
        model.fit(X, np.array(["lo", "mid", "hi"])[np.digitize(Y, [0.5, 2.0])], client_ids=H)
    elif request.param == "regressor-secure":  # categories grouped from row counts
        model = ff.FedForestRegressor(**PARAMS).fit(X, Y, client_ids=H)
    else:  # a tree's leaves hold two values: the tree is written once per output
        two = np.column_stack([Y, 3.0 * (X["ward"] == "er") + X["a"].fillna(1.0)])
        model = ff.FedForestRegressor(privacy="none", **PARAMS).fit(X, two, client_ids=H)
    assert any((t.set_size > 0).any() for t in model.trees_), "the forest must have set splits"
    return model


def _run(model, rows: np.ndarray, dtype) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(
        model.to_onnx(dtype=dtype).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"X": rows.astype(dtype)})


def _values(model, out: list[np.ndarray]) -> np.ndarray:
    return out[1] if hasattr(model, "classes_") else out[0]


def _expected(model, frame, clients) -> np.ndarray:
    if hasattr(model, "classes_"):
        return model.predict_proba(frame, client_ids=clients)
    return model.predict(frame, client_ids=clients).reshape(len(frame), -1)


@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-9), (np.float32, 1e-5)])
def test_known_codes_route_as_predict(fitted, dtype, rtol) -> None:
    # The values of "a" are float32 values: float32 input routes them exactly too.
    out = _run(fitted, fitted.export_matrix(X, client_ids=H), dtype)
    assert _values(fitted, out).dtype == dtype  # TreeEnsemble's output is its input's type
    expected = _expected(fitted, X, H)
    # A sum of leaf values in float32 errs relative to the leaves' size, not to the sum's:
    # a row predicted near 0 (2.2e-4 among values up to 4) came back 1.3e-8 off, 6e-5 of
    # itself, when the secure bootstraps were drawn anew (2026-12-04).
    np.testing.assert_allclose(
        _values(fitted, out), expected, rtol=rtol, atol=rtol * np.abs(expected).max()
    )


def test_unseen_codes_take_the_heavier_child_as_apply(fitted) -> None:
    rows = X.iloc[:60].copy()
    rows["ward"] = pd.Categorical(["unseen"] * 20 + [None] * 20 + list(rows["ward"][40:]))
    clients = np.array(["nobody"] * 30 + list(H[30:60]), dtype=object)
    leaves = fitted.apply(rows, client_ids=clients)
    by_apply = np.mean([t.value[leaves[:, i]] for i, t in enumerate(fitted.trees_)], axis=0)
    out = _run(fitted, fitted.export_matrix(rows, client_ids=clients), np.float64)
    np.testing.assert_allclose(_values(fitted, out), by_apply, rtol=1e-9, atol=1e-12)


def test_a_tree_of_one_leaf_among_set_splits(fitted) -> None:
    """A root that is a leaf: written as a test whose both branches reach it."""
    if hasattr(fitted, "classes_") or fitted.n_outputs_ > 1:
        pytest.skip("one-output regressors are enough: the leaf handling is the same")
    constant = ff.FedForestRegressor(n_estimators=2, random_state=0)
    constant.fit(X, np.full(N, 7.0), client_ids=H)
    assert all(t.node_count == 1 for t in constant.trees_)
    trees = list(fitted.trees_) + list(constant.trees_)
    rows = fitted.export_matrix(X, client_ids=H)
    graph = to_onnx_graph(trees, rows.shape[1], None, double=True)
    session = onnxruntime.InferenceSession(
        graph.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (got,) = session.run(None, {"X": rows})
    n = len(fitted.trees_)
    expected = (fitted.predict(X, client_ids=H) * n + 7.0 * 2) / (n + 2)
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-9)


def test_set_splits_need_ai_onnx_ml_5(fitted) -> None:
    with pytest.raises(ValueError, match=r"set splits needs .* ai.onnx.ml 5 \(TreeEnsemble"):
        fitted.to_onnx(target_opset={"": 17, "ai.onnx.ml": 4})
