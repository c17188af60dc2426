"""ONNX export of a multi-output classifier (extra fedforest[export]), against fedforest.

skl2onnx 1.20 mis-converts a multi-output RandomForestClassifier, so fedforest builds this
graph itself (fedforest.tree.export.to_onnx_multi_output): one TreeEnsembleRegressor of
every output's class proportions, split per output, an ArgMax and a label table each. The
features are float32 values, so ONNX's float32 comparisons route every row as fedforest's
float64 ones; the sums are float32, hence the tolerance (1e-5 relative, as
tests/test_export.py for one output).
"""

from __future__ import annotations

import numpy as np
import pytest

import fedforest as ff
from fedforest.tree.export import missing_left
from tests.test_multi_output_classification import _data

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")


def _labels(X: np.ndarray, kind: str) -> np.ndarray:
    """Three outputs: strings (2, 3 and 2 classes), integers (2, 4, 3) or bools (2 each)."""
    if kind == "str":
        return _data(len(X), 1)[1]  # the labels _data drew for these rows (before the NaN)
    x = np.nan_to_num(X)
    if kind == "int":  # labels other than 0..k-1
        return np.column_stack(
            [
                np.where(x[:, 0] > 0, 7, -1),
                np.digitize(x[:, 1] + x[:, 2], [-1.0, 0.0, 1.0]) * 10,
                np.digitize(x[:, 3], [-0.5, 0.5]) + 100,
            ]
        )
    return np.column_stack([x[:, 0] > 0, x[:, 3] * x[:, 0] > 0, x[:, 1] + x[:, 2] > 0.5])


def _fit(kind: str, missing: float) -> tuple[ff.FedForestClassifier, np.ndarray]:
    X, _ = _data(600, 1, missing=missing)
    X = X.astype(np.float32).astype(np.float64)  # NaN stays NaN
    Y = _labels(X, kind)
    model = ff.FedForestClassifier(n_estimators=12, max_depth=6, privacy="none", random_state=0)
    clients = np.repeat(np.arange(3), 200)
    return model.fit(X, Y, client_ids=clients), X


def _run(onnx_model, X: np.ndarray) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(
        onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"X": X.astype(np.float32)})


def _assert_as_fedforest(model: ff.FedForestClassifier, X: np.ndarray, out) -> None:
    label, proba = out[0], out[1:]
    expected = model.predict_proba(X)
    assert len(proba) == len(expected) == len(model.classes_)
    clear = np.ones(len(X), dtype=bool)
    for p, q in zip(proba, expected, strict=True):
        assert p.dtype == np.float32 and p.shape == q.shape
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
        top2 = np.sort(q, axis=1)[:, -2:]
        clear &= top2[:, 1] - top2[:, 0] > 1e-5  # no near-tie the float32 sums could flip
    assert clear.mean() > 0.9
    predicted = model.predict(X)
    assert label.shape == predicted.shape == (len(X), len(model.classes_))
    np.testing.assert_array_equal(label[clear], predicted[clear])


@pytest.mark.parametrize("missing", [0.0, 0.1])
@pytest.mark.parametrize("kind", ["str", "int", "bool"])
def test_onnx_gives_predict_and_predict_proba_of_every_output(kind: str, missing: float) -> None:
    model, X = _fit(kind, missing)
    onnx_model = model.to_onnx()
    onnx.checker.check_model(onnx_model, full_check=True)
    names = [o.name for o in onnx_model.graph.output]
    assert names == ["label", "probabilities_0", "probabilities_1", "probabilities_2"]
    out = _run(onnx_model, X)
    _assert_as_fedforest(model, X, out)
    if kind == "str":  # ONNX strings come back as Python str objects
        assert out[0].dtype == object and all(isinstance(v, str) for v in out[0].ravel())
    else:
        assert out[0].dtype == model.predict(X[:1]).dtype == {"int": np.int64, "bool": bool}[kind]
    if missing:  # some split sends NaN left: a graph ignoring the sides would send it right
        nan_left = [missing_left(t)[t.children_left >= 0] for t in model.trees_]
        assert any(side.any() for side in nan_left)
        assert np.isnan(X).any(axis=1).mean() > 0.3


def test_onnx_nan_sides_matter() -> None:
    # The same graph with every NaN sent right disagrees with fedforest on NaN rows.
    model, X = _fit("int", 0.1)
    onnx_model = model.to_onnx()
    (ensemble,) = [n for n in onnx_model.graph.node if n.op_type == "TreeEnsembleRegressor"]
    (tracks,) = [a for a in ensemble.attribute if a.name == "nodes_missing_value_tracks_true"]
    right = [0] * len(tracks.ints)
    del tracks.ints[:]
    tracks.ints.extend(right)
    proba = _run(onnx_model, X)[1:]
    gap = max(np.abs(p - q).max() for p, q in zip(proba, model.predict_proba(X), strict=True))
    assert gap > 1e-3


def test_onnx_target_opset_of_a_multi_output_classifier() -> None:
    model, X = _fit("str", 0.1)
    for target in (13, {"": 15, "ai.onnx.ml": 3}):
        onnx_model = model.to_onnx(target_opset=target)
        opsets = {o.domain: o.version for o in onnx_model.opset_import}
        assert opsets == ({"": 13, "ai.onnx.ml": 1} if target == 13 else {"": 15, "ai.onnx.ml": 3})
        _assert_as_fedforest(model, X, _run(onnx_model, X))
    for target in (12, {"": 17, "ai.onnx.ml": 5}):
        with pytest.raises(ValueError, match="opset 13 or later.*ai.onnx.ml 1 to 4"):
            model.to_onnx(target_opset=target)


def test_onnx_of_a_model_file(tmp_path) -> None:
    model, X = _fit("str", 0.1)
    model.save(tmp_path / "m.ffm")
    loaded = ff.load(tmp_path / "m.ffm")
    _assert_as_fedforest(model, X, _run(loaded.to_onnx(), X))


def test_onnx_set_splits_of_a_multi_output_classifier() -> None:
    X, Y = _data(300, 1)
    clients = np.repeat(np.arange(3), 100)
    Y[:, 0] = np.where(clients == 1, "y", Y[:, 0])  # a client effect: splits on H
    model = ff.FedForestClassifier(
        n_estimators=3, split_on_client=True, privacy="none", random_state=0
    ).fit(X, Y, client_ids=clients)
    assert any((t.feature == X.shape[1]).any() for t in model.trees_)
    # ai.onnx.ml 5's TreeEnsemble reads export_matrix's columns (the client's code last).
    rows = model.export_matrix(X, client_ids=clients)
    session = onnxruntime.InferenceSession(
        model.to_onnx(dtype=np.float64).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    out = session.run(None, {"X": rows})
    assert out[0].shape == Y.shape and out[1].dtype == np.float64
    expected = model.predict_proba(X, client_ids=clients)
    for got, want in zip(out[1:], expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(out[0], model.predict(X, client_ids=clients))
