"""``fedforest export`` on a model file of each kind, read back by the tools themselves.

Each written file is loaded by its tool (onnxruntime, Treelite's deserializer and GTIL, a
CSV of SHAP values) and compared with the model's own predictions on held-out rows with
missing values; a forest with set splits exports to Treelite and ONNX and is refused,
saying why, by SHAP; an unknown format is a usage error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import fedforest as ff
from fedforest.cli import main

onnxruntime = pytest.importorskip("onnxruntime")
treelite = pytest.importorskip("treelite")
gtil = pytest.importorskip("treelite.gtil")
pytest.importorskip("shap")

N = 300


def _frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.normal(size=N), "b": rng.normal(size=N)})
    frame.loc[rng.random(N) < 0.1, "a"] = np.nan
    return frame


TRAIN, HELD_OUT = _frame(0), _frame(1)
SIGNAL = TRAIN["a"].fillna(0).to_numpy() + TRAIN["b"].to_numpy() ** 2
KINDS = {
    "regressor-2-outputs": (ff.FedForestRegressor(), np.column_stack([SIGNAL, TRAIN["b"]])),
    "3-class-text": (
        ff.FedForestClassifier(),
        np.array(["low", "mid", "high"])[np.digitize(SIGNAL, [0.5, 1.5])],
    ),
    "one-class": (ff.FedForestClassifier(), np.array(["only"] * N)),
    "multi-output": (ff.FedForestClassifier(), np.column_stack([SIGNAL > 1, SIGNAL > 2])),
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def model_file(request, tmp_path_factory):
    estimator, target = KINDS[request.param]
    model = clone(estimator).set_params(n_estimators=3, max_depth=4, random_state=0)
    model.fit(TRAIN, target)
    folder = tmp_path_factory.mktemp(request.param)
    model.save(folder / "m.ffm")
    HELD_OUT.to_csv(folder / "rows.csv", index=False)
    return model, folder


def _expected(model) -> np.ndarray:
    if hasattr(model, "classes_"):
        proba = model.predict_proba(HELD_OUT)
        return np.hstack(proba) if isinstance(proba, list) else proba
    return np.reshape(model.predict(HELD_OUT), (N, -1))


def _export(folder, to: str, *extra: str) -> int:
    return main(["export", str(folder / "m.ffm"), "--to", to, "--out", str(folder / to), *extra])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_onnx_file_runs_as_the_model(model_file, dtype, capsys) -> None:
    model, folder = model_file
    assert _export(folder, "onnx", "--dtype", dtype) == 0
    assert "heavier child" not in capsys.readouterr().err  # numeric splits: as predict
    session = onnxruntime.InferenceSession(
        (folder / "onnx").read_bytes(), providers=["CPUExecutionProvider"]
    )
    out = session.run(None, {"X": HELD_OUT.to_numpy(np.dtype(dtype))})
    got = np.hstack(out[1:]) if hasattr(model, "classes_") else out[0]
    # Random rows: float32 input routes them as fedforest here too (none at a threshold).
    np.testing.assert_allclose(got, _expected(model), rtol=1e-5, atol=1e-6)
    if hasattr(model, "classes_"):
        pred = model.predict(HELD_OUT)
        np.testing.assert_array_equal(out[0].reshape(pred.shape).astype(pred.dtype), pred)


def test_treelite_file_loads_and_predicts_as_the_model(model_file) -> None:
    model, folder = model_file
    assert _export(folder, "treelite") == 0
    back = treelite.Model.deserialize(str(folder / "treelite"))
    out = gtil.predict(back, model.export_matrix(HELD_OUT))
    classes = getattr(model, "classes_", None)
    if isinstance(classes, list):  # (n, n_outputs, max n_classes), zero padded
        out = np.hstack([out[:, o, : len(c)] for o, c in enumerate(classes)])
    np.testing.assert_allclose(out.reshape(N, -1), _expected(model), rtol=1e-9, atol=1e-12)


def test_shap_file_adds_up_to_the_model(model_file) -> None:
    model, folder = model_file
    assert _export(folder, "shap", "--data", str(folder / "rows.csv")) == 0
    frame = pd.read_csv(folder / "shap")
    bases = [c for c in frame.columns if c.startswith("base_value")]
    totals = []
    for base in bases:  # each base_value<tag> with its shap_<feature><tag> columns
        tag = base[len("base_value") :]
        columns = [f"shap_{name}{tag}" for name in TRAIN.columns]
        totals.append(frame[columns].sum(axis=1) + frame[base])
    np.testing.assert_allclose(np.column_stack(totals), _expected(model), rtol=1e-9, atol=1e-9)


def test_set_splits_export_to_treelite_onnx_and_shap(tmp_path, capsys):
    rng = np.random.default_rng(2)
    frame = TRAIN.assign(ward=pd.Categorical(rng.choice(["icu", "er", "ward"], size=N)))
    y = SIGNAL + 3.0 * (frame["ward"] == "icu")
    model = ff.FedForestRegressor(n_estimators=3, max_depth=4, privacy="none", random_state=0)
    model.fit(frame, y).save(tmp_path / "m.ffm")
    assert any((t.set_size > 0).any() for t in model.trees_), "the forest must have set splits"
    frame.to_csv(tmp_path / "rows.csv", index=False)
    assert _export(tmp_path, "treelite") == 0
    warned = capsys.readouterr().err
    assert _export(tmp_path, "onnx", "--dtype", "float64") == 0
    said = capsys.readouterr()
    assert (
        "its input X holds the columns of export_matrix: a, b, ward (code in categories_)"
        in said.out
    )
    # One line on stderr says where the export differs from predict (silent before).
    for err in (warned, said.err):
        lines = [line for line in err.splitlines() if "heavier child" in line]
        assert len(lines) == 1 and lines[0].startswith("fedforest: warning: set splits on ward:")
        assert "missing or unseen category" in lines[0] and "predict blends both" in lines[0]
    session = onnxruntime.InferenceSession(
        (tmp_path / "onnx").read_bytes(), providers=["CPUExecutionProvider"]
    )
    (got,) = session.run(None, {"X": model.export_matrix(frame)})
    np.testing.assert_allclose(got[:, 0], model.predict(frame), rtol=1e-9, atol=1e-12)
    # SHAP values too (refused before: "handles numeric splits only"), adding up to predict.
    assert _export(tmp_path, "shap", "--data", str(tmp_path / "rows.csv")) == 0
    shap_values = pd.read_csv(tmp_path / "shap")
    np.testing.assert_allclose(shap_values.sum(axis=1), model.predict(frame), atol=1e-9)
    # export --help says so: every format takes set splits.
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert (
        "--to onnx writes an ONNX model and --to treelite a Treelite checkpoint "
        "(numeric and set splits)" in help_text
    )
    assert "(numeric and set splits; from the trees' node statistics" in help_text
    with pytest.raises(SystemExit) as exc:
        _export(tmp_path, "pmml")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "invalid choice: 'pmml'" in err and "'treelite'" in err
