"""Every ONNX export passes ONNX's own checker in full (strict shape inference).

skl2onnx's graphs passed; fedforest's own graph of a multi-output classifier (ai.onnx.ml 1)
did not: ONNX infers no type for TreeEnsembleRegressor 1's output, and strict inference
refused the Split after it ("Input 0 expected to have type but instead is null"). A tool
that checks a model before running it (``onnx.checker.check_model(full_check=True)``)
refused the file onnxruntime runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import fedforest as ff

onnx = pytest.importorskip("onnx")

N = 240
_rng = np.random.default_rng(0)
X = _rng.normal(size=(N, 3))
H = _rng.integers(0, 3, size=N)
FRAME = pd.DataFrame({"a": X[:, 0], "ward": pd.Categorical(_rng.choice(list("abc"), size=N))})
KINDS = {
    "regressor-2-outputs": (ff.FedForestRegressor(), X, np.column_stack([X[:, 0], X[:, 1]])),
    "binary": (ff.FedForestClassifier(), X, X[:, 0] > 0),
    "one-class": (ff.FedForestClassifier(), X, np.array(["only"] * N)),
    "multi-output": (ff.FedForestClassifier(), X, np.column_stack([X[:, 0] > 0, X[:, 1] > 1])),
    "set-splits": (
        ff.FedForestClassifier(split_on_client=True, privacy="none"),
        FRAME,
        np.where((FRAME["ward"] == "a") | (H == 1), "x", "y"),
    ),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_onnx_export_passes_the_full_check(kind, dtype) -> None:
    estimator, rows, target = KINDS[kind]
    model = clone(estimator).set_params(n_estimators=3, max_depth=3, random_state=0)
    model.fit(rows, target, client_ids=H)
    onnx_model = model.to_onnx(dtype=dtype)
    onnx.checker.check_model(onnx_model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(onnx_model, strict_mode=True)
    assert [o.name for o in inferred.graph.output] == [o.name for o in onnx_model.graph.output]
