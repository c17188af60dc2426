"""ONNX export of a classifier of one class (extra fedforest[export]), against fedforest.

skl2onnx writes it as a TreeEnsembleClassifier with one class label, which onnxruntime
reads as a binary classifier: every row's label was the index 1 (the integer 1 for the
class 7), and past the end of a one-string label list onnxruntime aborted the process (a
C++ assertion). fedforest builds this graph itself (``to_onnx_one_class``).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import fedforest as ff
from fedforest.cli import main

onnxruntime = pytest.importorskip("onnxruntime")


def _one_class(label: object) -> tuple[ff.FedForestClassifier, np.ndarray]:
    X = np.random.default_rng(0).normal(size=(200, 3))
    model = ff.FedForestClassifier(n_estimators=3, max_depth=3, random_state=0)
    return model.fit(X, np.full(200, label)), X


def _run(onnx_bytes: bytes, X: np.ndarray) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    return session.run(None, {"X": X.astype(np.float32)})


@pytest.mark.parametrize("label", [7, True, 2.0], ids=["int", "bool", "float"])
def test_one_class_onnx_label_is_the_class(label) -> None:
    model, X = _one_class(label)
    label_out, proba = _run(model.to_onnx().SerializeToString(), X)
    expected = model.predict(X)
    assert label_out.shape == (len(X),) and label_out.dtype == expected.dtype
    np.testing.assert_array_equal(label_out, expected)  # main: 1 on every row (7 -> 1)
    assert proba.shape == (len(X), 1) and proba.dtype == np.float32
    np.testing.assert_array_equal(proba, model.predict_proba(X))  # every leaf holds 1


def test_one_class_onnx_with_a_text_label_runs_in_onnxruntime(tmp_path) -> None:
    """Through the command line; onnxruntime runs in a child, which aborted on main."""
    model, X = _one_class("healthy")
    model.save(tmp_path / "m.ffm")
    onnx_path = tmp_path / "m.onnx"
    assert main(["export", str(tmp_path / "m.ffm"), "--to", "onnx", "--out", str(onnx_path)]) == 0
    np.save(tmp_path / "X.npy", X.astype(np.float32))
    code = (
        "import sys, numpy as np, onnxruntime\n"
        "s = onnxruntime.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
        "label, proba = s.run(None, {'X': np.load(sys.argv[2])})\n"
        "print(sorted(set(label.tolist())), label.shape, float(proba.min()), proba.shape)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(onnx_path), str(tmp_path / "X.npy")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["['healthy']", "(200,)", "1.0", "(200,", "1)"]
