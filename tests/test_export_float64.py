"""ONNX with float64 input (``to_onnx(dtype=np.float64)``), against fedforest's own predict.

ONNX's float32 input compares a float32 X with thresholds rounded down to float32: exact
for float32 values, but a float64 value within float32 rounding of a threshold can go the
other way. The held-out rows here sit at the trees' thresholds (the threshold itself and
the float64 values either side of it), with missing values in other rows: the float32
graph routes some of them differently (checked, so the rows do test something), and the
float64 graph, whose thresholds are the trees' own doubles, routes every one as fedforest.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

import fedforest as ff
from fedforest.cli import main

onnxruntime = pytest.importorskip("onnxruntime")

N = 480


def _train(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 4))
    X[rng.random(size=X.shape) < 0.05] = np.nan
    h = rng.integers(0, 3, size=N)
    y = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2 + 0.5 * h + 0.1 * rng.normal(size=N)
    return X, y, h


def _at_thresholds(model, seed: int = 9) -> np.ndarray:
    """Rows at each finite threshold and one float64 step either side; NaN rows; others."""
    rng = np.random.default_rng(seed)
    rows = [rng.normal(size=(100, 4))]
    nan_rows = rng.normal(size=(60, 4))
    nan_rows[rng.random(size=nan_rows.shape) < 0.4] = np.nan
    rows.append(nan_rows)
    for tree in model.trees_:
        split = tree.children_left != -1
        for f, t in zip(tree.feature[split], tree.threshold[split], strict=True):
            if abs(t) > 1e38:  # the "known | missing" split (no value reaches it)
                continue
            at = rng.normal(size=(3, 4))
            at[:, f] = [np.nextafter(t, -np.inf), t, np.nextafter(t, np.inf)]
            rows.append(at)
    return np.vstack(rows)


X, Y, H = _train()
KINDS = {  # an estimator and its targets (privacy="secure" unless said)
    "regressor": (ff.FedForestRegressor(), Y),
    "regressor-2-outputs-none": (
        ff.FedForestRegressor(privacy="none"),
        np.column_stack([Y, np.nan_to_num(X[:, 2])]),
    ),
    "binary-bool": (ff.FedForestClassifier(), Y > 1),
    "3-class-text-entropy": (
        ff.FedForestClassifier(criterion="entropy"),
        np.array(["low", "mid", "high"])[np.digitize(Y, [0.5, 1.8])],
    ),
    "multi-output": (
        ff.FedForestClassifier(),
        np.column_stack([Y > 1, np.digitize(Y, [0.5, 1.8])]).astype(int),
    ),
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def fitted(request):
    estimator, target = KINDS[request.param]
    model = clone(estimator).set_params(n_estimators=5, max_depth=5, random_state=0)
    model.fit(X, target, client_ids=H)
    return model, _at_thresholds(model)


def _run(onnx_model, rows: np.ndarray) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(
        onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"X": rows})


def _proba(model, out: list[np.ndarray]) -> np.ndarray:
    """The ONNX probabilities (or predictions) as one (n, k) array."""
    return np.hstack(out[1:]) if hasattr(model, "classes_") else out[0]


def _expected(model, rows: np.ndarray) -> np.ndarray:
    if hasattr(model, "classes_"):
        proba = model.predict_proba(rows)
        return np.hstack(proba) if isinstance(proba, list) else proba
    return model.predict(rows).reshape(len(rows), -1)


def _differs(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Rows whose outputs differ by more than float32 sums (1e-5 relative) explain."""
    close = np.isclose(got.reshape(expected.shape), expected, rtol=1e-5, atol=1e-6)
    return ~close.all(axis=1)


def test_float64_graph_routes_rows_at_thresholds_as_fedforest(fitted) -> None:
    model, rows = fitted
    expected = _expected(model, rows)
    as32 = _run(model.to_onnx(), rows.astype(np.float32))
    assert _differs(_proba(model, as32), expected).any(), "the rows must test the rounding"
    as64 = _run(model.to_onnx(dtype=np.float64), rows)
    assert not _differs(_proba(model, as64), expected).any()
    if hasattr(model, "classes_"):
        label = as64[0]
        pred = model.predict(rows)
        assert label.shape == pred.shape
        # onnxruntime gives strings as an object array; other labels in predict's dtype.
        assert label.dtype == (object if pred.dtype.kind == "U" else pred.dtype)
        # The probabilities are float32 sums: a tie within their rounding may pick either.
        top2 = np.sort(expected.reshape(len(rows), -1), axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-5
        np.testing.assert_array_equal(label[clear], pred[clear])


def test_float64_graph_declares_its_input_and_outputs(fitted) -> None:
    model, rows = fitted
    graph = model.to_onnx(dtype="float64").graph
    (x,) = graph.input
    assert x.name == "X" and x.type.tensor_type.elem_type == 11  # TensorProto.DOUBLE
    names = [o.name for o in graph.output]
    as32 = [o.name for o in model.to_onnx().graph.output]
    assert names == as32  # the same outputs as the float32 graph's


@pytest.mark.parametrize("dtype", [np.int64, "float16", "str", None])
def test_to_onnx_refuses_another_dtype_naming_it(dtype) -> None:
    model = ff.FedForestRegressor(n_estimators=2, max_depth=2, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match=r"'dtype' parameter of to_onnx\(\) must be numpy"):
        model.to_onnx(dtype=dtype)


def test_float64_graph_needs_ai_onnx_ml_3() -> None:
    model = ff.FedForestRegressor(n_estimators=2, max_depth=2, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match=r"float64 input needs .* ai.onnx.ml 3 to 4"):
        model.to_onnx(dtype=np.float64, target_opset={"": 17, "ai.onnx.ml": 1})
    onnx_model = model.to_onnx(dtype=np.float64, target_opset={"": 15, "ai.onnx.ml": 4})
    assert {o.domain: o.version for o in onnx_model.opset_import} == {"": 15, "ai.onnx.ml": 4}
    (pred,) = _run(onnx_model, X)
    np.testing.assert_allclose(pred[:, 0], model.predict(X), rtol=1e-5, atol=1e-6)


def test_cli_export_dtype_float64(tmp_path, capsys) -> None:
    model = ff.FedForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, Y)
    model.save(tmp_path / "m.ffm")
    out = tmp_path / "m.onnx"
    argv = ["export", str(tmp_path / "m.ffm"), "--to", "onnx", "--out", str(out)]
    assert main([*argv, "--dtype", "float64"]) == 0
    rows = _at_thresholds(model)
    session = onnxruntime.InferenceSession(out.read_bytes(), providers=["CPUExecutionProvider"])
    (pred,) = session.run(None, {"X": rows})
    assert not _differs(pred, model.predict(rows)[:, None]).any()
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "export",
                str(tmp_path / "m.ffm"),
                "--to",
                "treelite",
                "--out",
                str(out),
                "--dtype",
                "float64",
            ]
        )
    assert exc.value.code == 2 and "--dtype goes with --to onnx" in capsys.readouterr().err
