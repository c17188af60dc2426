"""Exports (extra fedforest[export]): Treelite, ONNX and SHAP, each against fedforest itself.

Forests: regressors and classifiers (binary, three classes with text labels), the default
(privacy="secure", quantile candidates), the verification mode (n_bins=None), set splits
(a categorical column and the client index H) and privacy="dp" (noisy node counts).
Features are float32 values, so that ONNX's float32 comparisons route every row as
fedforest does and only the float32 outputs differ (rounding).
"""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.tree.export import consistent_nodes

onnxruntime = pytest.importorskip("onnxruntime")
shap = pytest.importorskip("shap")
treelite = pytest.importorskip("treelite")
gtil = pytest.importorskip("treelite.gtil")

N = 480


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 4)).astype(np.float32).astype(np.float64)
    h = rng.integers(0, 3, size=N)
    y = X[:, 0] + X[:, 1] ** 2 + 0.5 * h + 0.1 * rng.normal(size=N)
    return X, y, h


def _fit(kind, **params):
    X, y, h = _data()
    params = {"n_estimators": 6, "max_depth": 5, "random_state": 0, **params}
    if kind == "regressor":
        return ff.FedForestRegressor(**params).fit(X, y, client_ids=h), X, h
    labels = np.digitize(y, [0.5, 1.8]) if kind == "3-class" else (y > 1).astype(int)
    if kind == "3-class":
        labels = np.array(["low", "mid", "high"])[labels]
    return ff.FedForestClassifier(**params).fit(X, labels, client_ids=h), X, h


NUMERIC = {
    "regressor-default": ("regressor", {}),
    "regressor-exact": ("regressor", {"n_bins": None, "privacy": "none"}),
    "binary-default": ("binary", {}),
    "3-class-default": ("3-class", {}),
    "3-class-exact": ("3-class", {"n_bins": None, "privacy": "none"}),
    "regressor-dp": ("regressor", {"privacy": "dp", "epsilon": 5.0}),
}


@pytest.fixture(scope="module", params=sorted(NUMERIC))
def numeric(request):
    kind, params = NUMERIC[request.param]
    return _fit(kind, **params)


def _set_split_data(seed=1):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=N),
            "b": rng.normal(size=N),
            "ward": pd.Categorical(rng.choice(["icu", "er", "surgery", "oncology"], size=N)),
        }
    )
    h = rng.integers(0, 3, size=N)
    y = X["a"] + 2.0 * X["ward"].isin(["icu", "er"]) + 1.5 * (h == 1) + 0.1 * rng.normal(size=N)
    return X, y.to_numpy(), h


@pytest.fixture(scope="module", params=["regressor", "3-class", "binary-exact"])
def with_sets(request):
    X, y, h = _set_split_data()
    params = {
        "n_estimators": 6,
        "max_depth": 5,
        "split_on_client": True,
        "privacy": "none",
        "random_state": 0,
    }
    if request.param == "regressor":
        model = ff.FedForestRegressor(**params).fit(X, y, client_ids=h)
    elif request.param == "3-class":
        labels = np.array(["a", "b", "c"])[np.digitize(y, [0.5, 2.0])]
        model = ff.FedForestClassifier(**params).fit(X, labels, client_ids=h)
    else:
        model = ff.FedForestClassifier(n_bins=None, **params).fit(X, y > 1.0, client_ids=h)
    kinds = [t.set_size > 0 for t in model.trees_]
    assert any(k.any() for k in kinds), "the fixture must have set splits"
    splits_h = any(np.any(t.feature == model.n_features_in_) for t in model.trees_)
    assert splits_h, "the fixture must split on the client index"
    return model, X, h


def _expected(model, X, client_ids=None):
    if hasattr(model, "classes_"):
        return model.predict_proba(X, client_ids=client_ids)
    return model.predict(X, client_ids=client_ids)[:, None]


# ---------------------------------------------------------------------------------- Treelite
def _treelite_predict(model, X, client_ids=None):
    out = gtil.predict(model.to_treelite(), model.export_matrix(X, client_ids=client_ids))
    assert out.shape[:2] == (len(X), 1)
    return out[:, 0, :]


def test_treelite_numeric_forests_predict_as_fedforest(numeric):
    model, X, _ = numeric
    np.testing.assert_allclose(_treelite_predict(model, X), _expected(model, X), rtol=1e-6)


def test_treelite_set_splits_predict_as_fedforest(with_sets):
    model, X, h = with_sets
    exported = model.to_treelite()
    assert exported.num_feature == model.n_features_in_ + 1  # the client code column
    np.testing.assert_allclose(
        _treelite_predict(model, X, h), _expected(model, X, h), rtol=1e-6, atol=1e-12
    )


def test_treelite_unseen_codes_take_the_heavier_child_as_apply(with_sets):
    model, X, h = with_sets
    rows = X.iloc[:40].copy()
    rows["ward"] = pd.Categorical(["unseen"] * 40)
    clients = np.array(["nobody"] * 40)
    leaves = model.apply(rows, client_ids=clients)
    by_apply = np.mean([t.value[leaves[:, i]] for i, t in enumerate(model.trees_)], axis=0)
    np.testing.assert_allclose(_treelite_predict(model, rows, clients), by_apply, rtol=1e-6)


def test_treelite_model_survives_its_own_serialisation(with_sets):
    model, X, h = with_sets
    again = treelite.Model.deserialize_bytes(model.to_treelite().serialize_bytes())
    out = gtil.predict(again, model.export_matrix(X, client_ids=h))[:, 0, :]
    np.testing.assert_allclose(out, _expected(model, X, h), rtol=1e-6, atol=1e-12)


def test_export_matrix_without_client_split_has_the_features_only(numeric):
    model, X, _ = numeric
    assert model.export_matrix(X).shape == X.shape


# ---------------------------------------------------------------------------------- ONNX
def _onnx_run(model, X):
    session = onnxruntime.InferenceSession(
        model.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"X": np.asarray(X, dtype=np.float32)})


def test_onnx_predicts_as_fedforest_within_float32(numeric):
    model, X, _ = numeric
    out = _onnx_run(model, X)
    if hasattr(model, "classes_"):
        label, proba = out
        assert proba.dtype == np.float32
        expected = model.predict_proba(X)
        np.testing.assert_allclose(proba, expected, rtol=1e-5, atol=1e-6)
        top2 = np.sort(expected, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-5  # no near-tie the float32 sum could flip
        np.testing.assert_array_equal(label[clear], model.predict(X)[clear])
    else:
        (pred,) = out
        assert pred.shape == (len(X), 1) and pred.dtype == np.float32
        np.testing.assert_allclose(pred[:, 0], model.predict(X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("labels", ["bool", "float", "int32", "uint8"])
def test_onnx_labels_are_predicts_bools_and_floats(labels):
    # skl2onnx wrote them as int64: 0 / 1 for False / True, 2 for 2.0, int64 for int32.
    X, y, h = _data()
    classes = np.digitize(y, [0.5, 1.8])
    target = {
        "bool": y > 1,
        "float": classes + 2.0,
        "int32": (classes - 1).astype(np.int32),
        "uint8": (classes + 200).astype(np.uint8),
    }[labels]
    model = ff.FedForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, target)
    label, proba = _onnx_run(model, X)
    assert label.dtype == model.predict(X).dtype and label.shape == (len(X),)
    top2 = np.sort(model.predict_proba(X), axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-5
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(label[clear], model.predict(X)[clear])


def test_onnx_set_splits_predict_as_fedforest(with_sets):
    """ai.onnx.ml 5's TreeEnsemble on export_matrix's columns (float64: sums to rounding)."""
    model, X, h = with_sets
    onnx_model = model.to_onnx(dtype=np.float64)
    assert {o.domain: o.version for o in onnx_model.opset_import}["ai.onnx.ml"] == 5
    session = onnxruntime.InferenceSession(
        onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    out = session.run(None, {"X": model.export_matrix(X, client_ids=h)})
    got = out[1] if hasattr(model, "classes_") else out[0]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _expected(model, X, h), rtol=1e-9, atol=1e-12)
    if hasattr(model, "classes_"):
        np.testing.assert_array_equal(out[0], model.predict(X, client_ids=h))


# ---------------------------------------------------------------------------------- SHAP
def test_shap_values_add_up_to_the_prediction(numeric):
    model, X, _ = numeric
    values = model.shap_values(X)
    expected_value = np.asarray(model.shap_explainer().expected_value)
    n_out = len(model.classes_) if hasattr(model, "classes_") else None
    assert values.shape == ((len(X), X.shape[1]) if n_out is None else (len(X), X.shape[1], n_out))
    total = values.sum(axis=1) + expected_value
    np.testing.assert_allclose(
        total.reshape(len(X), -1), _expected(model, X), rtol=1e-9, atol=1e-12
    )


def test_shap_matches_treeexplainer_on_the_sklearn_export(numeric):
    """scikit-learn's route gives the same values where the node counts are consistent."""
    model, X, _ = numeric
    forest = model.to_sklearn()
    for tree, sk in zip(model.trees_, forest.estimators_, strict=True):  # the federated counts
        np.testing.assert_array_equal(sk.tree_.n_node_samples, tree.n_node_samples)
        np.testing.assert_array_equal(
            sk.tree_.weighted_n_node_samples, tree.weighted_n_node_samples
        )
    if model.privacy == "dp":
        pytest.skip("noisy node counts: shap's additivity check refuses the sklearn route")
    for tree in model.trees_:
        weight, _ = consistent_nodes(tree)
        np.testing.assert_allclose(weight, tree.weighted_n_node_samples, rtol=1e-12)
    via_sklearn = np.asarray(shap.TreeExplainer(forest).shap_values(X))
    np.testing.assert_allclose(via_sklearn, model.shap_values(X), rtol=1e-6, atol=1e-9)


def test_shap_values_of_set_splits_add_up_and_shap_s_explainer_refuses_them(with_sets):
    """shap_values refused set splits; it explains them now (tests/test_shap_sets.py), and
    shap's own explainer, which cannot take them, still refuses, saying why."""
    model, X, _ = with_sets
    with pytest.raises(ValueError, match=r"shap_explainer\(\) handles numeric splits only"):
        model.shap_explainer()
    values = model.shap_values(X)
    base = model.shap_expected_value_
    if hasattr(model, "classes_"):
        np.testing.assert_allclose(values.sum(axis=1) + base, model.predict_proba(X), atol=1e-12)
    else:
        np.testing.assert_allclose(values.sum(axis=1) + base[0], model.predict(X), atol=1e-12)


def test_one_class_forest_exports_with_its_class_axis():
    X, _, _ = _data()
    model = ff.FedForestClassifier(n_estimators=3, random_state=0).fit(X, np.zeros(N, int))
    np.testing.assert_allclose(_treelite_predict(model, X), 1.0)
    assert model.shap_values(X[:5]).shape == (5, X.shape[1], 1)


# ---------------------------------------------------------------------------------- NaN
def test_missing_values_route_as_the_trees_record():
    """Where fedforest accepts NaN, every export sends it where the tree does."""
    X, y, h = _data()
    X[::5, 1] = np.nan
    try:
        model = ff.FedForestRegressor(
            n_estimators=4, max_depth=4, privacy="none", random_state=0
        ).fit(X, y, client_ids=h)
    except ValueError as exc:
        if "NaN" not in str(exc):
            raise
        pytest.skip("this build of fedforest refuses missing values in X")
    expected = model.predict(X)
    np.testing.assert_allclose(_treelite_predict(model, X)[:, 0], expected, rtol=1e-6)
    np.testing.assert_allclose(model.to_sklearn().predict(X), expected, rtol=1e-6)
    (onnx_pred,) = _onnx_run(model, X)
    np.testing.assert_allclose(onnx_pred[:, 0], expected, rtol=1e-5, atol=1e-6)
    total = model.shap_values(X).sum(axis=1) + model.shap_explainer().expected_value
    np.testing.assert_allclose(total, expected, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------------- imports
def test_missing_library_names_the_extra(monkeypatch, numeric):
    model, _, _ = numeric
    monkeypatch.setitem(sys.modules, "treelite.model_builder", None)
    with pytest.raises(ImportError, match=r"fedforest\[export\]"):
        model.to_treelite()


def test_import_fedforest_loads_no_export_library():
    code = (
        "import sys, numpy as np, fedforest as ff\n"
        "X = np.random.default_rng(0).normal(size=(60, 2))\n"
        "m = ff.FedForestRegressor(n_estimators=2, max_depth=2).fit(X, X[:, 0])\n"
        "m.to_sklearn()\n"
        "loaded = {'treelite', 'onnx', 'skl2onnx', 'onnxruntime', 'shap'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
