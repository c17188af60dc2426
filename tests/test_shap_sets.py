"""SHAP values of forests with set splits (categorical features, the client index).

``shap_values`` refused them ("handles numeric splits only"): a text column on the command
line, the common case, could not be explained. The oracles: shap's own TreeExplainer on a
numeric forest, Shapley values by enumeration of every coalition on the path-dependent
game (written here from the definition), and additivity to ``predict``.
"""

from itertools import combinations
from math import factorial

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.cli import main
from fedforest.tree.shap_sets import shap_base_value, shap_values_sets

pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")


def _frame(n: int = 400, seed: int = 3) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "ward": rng.choice(["cardio", "neuro", "onco", "icu", "ent"], n),
            "b": rng.normal(size=n),
        }
    )
    X.loc[rng.random(n) < 0.1, "b"] = np.nan
    y = X["a"] + 2.0 * X["ward"].isin(["neuro", "icu"]) + rng.normal(0, 0.3, n)
    return X, y.to_numpy(), rng.integers(0, 3, n)


def _weights(tree, node: int) -> float:
    """A node's weight as the sum of its leaves' (what path-dependent TreeSHAP assumes)."""
    if tree.children_left[node] == -1:
        return float(tree.weighted_n_node_samples[node])
    return _weights(tree, tree.children_left[node]) + _weights(tree, tree.children_right[node])


def _expectation(tree, node: int, x: np.ndarray, coalition: set) -> np.ndarray:
    """E[f(x) | x_S] on the tree's own distribution: S's features follow x, the others
    (and a code the split has not seen: predict's marginal rule) both children, weighted."""
    left, right = tree.children_left[node], tree.children_right[node]
    if left == -1:
        return tree.value[node].astype(float)
    j = int(tree.feature[node])
    codes_left, codes_right = tree.split_set(node)
    if codes_left.size + codes_right.size:
        side = 0 if x[j] in codes_left else 1 if x[j] in codes_right else None
    elif np.isnan(x[j]):
        side = 0 if tree.missing_go_to_left[node] else 1
    else:
        side = 0 if x[j] <= tree.threshold[node] else 1
    if side is not None and j in coalition:
        return _expectation(tree, (left, right)[side], x, coalition)
    wl, wr = _weights(tree, left), _weights(tree, right)
    return (
        wl * _expectation(tree, left, x, coalition) + wr * _expectation(tree, right, x, coalition)
    ) / (wl + wr)


def _enumerated_shapley(trees, x: np.ndarray) -> np.ndarray:
    d = x.shape[0]
    phi = np.zeros((d, trees[0].value.shape[1]))
    for i in range(d):
        others = [k for k in range(d) if k != i]
        for size in range(d):
            w = factorial(size) * factorial(d - size - 1) / factorial(d)
            for S in combinations(others, size):
                for tree in trees:
                    gain = _expectation(tree, 0, x, {*S, i}) - _expectation(tree, 0, x, set(S))
                    phi[i] += w * gain / len(trees)
    return phi


def test_on_a_numeric_forest_they_are_shap_s_own() -> None:
    pytest.importorskip("shap")
    X, y, h = _frame()
    X = X.drop(columns="ward")
    model = ff.FedForestRegressor(n_estimators=8, privacy="none", random_state=0)
    model.fit(X, y, client_ids=h)
    rows = model.export_matrix(X)
    ours = shap_values_sets(model.trees_, rows.shape[1], rows)[:, :, 0]
    np.testing.assert_allclose(ours, model.shap_values(X), rtol=1e-9, atol=1e-12)
    expected = model.shap_explainer().expected_value
    np.testing.assert_allclose(shap_base_value(model.trees_), np.atleast_1d(expected))


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_they_are_the_enumerated_shapley_values_with_set_splits(privacy) -> None:
    X, y, h = _frame()
    model = ff.FedForestRegressor(n_estimators=4, max_depth=4, privacy=privacy, random_state=0)
    model.fit(X, y, client_ids=h)
    assert any(np.any(t.set_size > 0) for t in model.trees_)
    rows = X.iloc[:12].copy()
    rows.loc[rows.index[:3], "ward"] = "psych"  # unseen: the marginal rule at every set split
    values = model.shap_values(rows)
    matrix = model.export_matrix(rows)
    for r in range(len(rows)):
        oracle = _enumerated_shapley(model.trees_, matrix[r])[:, 0]
        np.testing.assert_allclose(values[r], oracle, rtol=1e-9, atol=1e-12)
    assert np.all(values[:3, 1] == 0.0)  # an unseen ward takes no part in any split
    base = model.shap_expected_value_
    np.testing.assert_allclose(values.sum(axis=1) + base[0], model.predict(rows), atol=1e-12)


def test_they_add_up_for_a_text_label_classifier_and_a_client_split() -> None:
    X, y, h = _frame()
    labels = np.where(y > 1.5, "high", "low")
    model = ff.FedForestClassifier(n_estimators=10, random_state=0).fit(X, labels, client_ids=h)
    values = model.shap_values(X)
    assert values.shape == (len(X), 3, 2)
    total = values.sum(axis=1) + model.shap_expected_value_
    np.testing.assert_allclose(total, model.predict_proba(X), atol=1e-12)
    model = ff.FedForestRegressor(
        n_estimators=6, split_on_client=True, privacy="none", random_state=0
    ).fit(X, y + h, client_ids=h)
    assert any(np.any(t.feature == model.n_features_in_) for t in model.trees_)
    values = model.shap_values(X)  # no client given: predict's marginal rule at H
    total = values.sum(axis=1) + model.shap_expected_value_[0]
    np.testing.assert_allclose(total, model.predict(X), atol=1e-12)


def test_the_command_exports_shap_values_of_a_text_column(tmp_path, capsys) -> None:
    X, y, _ = _frame(n=120)
    paths = []
    for k, part in enumerate(np.array_split(np.arange(len(X)), 2)):
        frame = X.iloc[part].assign(y=y[part])
        paths.append(tmp_path / f"s{k}.csv")
        frame.to_csv(paths[-1], index=False)
    model = tmp_path / "m.ffm"
    argv = ["train", "--target", "y", "--trees", "3", "--out", str(model)]
    assert main([*argv, "--client", f"a={paths[0]}", "--client", f"b={paths[1]}"]) == 0
    out = tmp_path / "shap.csv"
    argv = ["export", str(model), "--to", "shap", "--data", str(paths[0]), "--out", str(out)]
    assert main(argv) == 0  # was: "handles numeric splits only"
    got = pd.read_csv(out)
    assert list(got.columns) == ["shap_a", "shap_ward", "shap_b", "base_value"]
    fitted = ff.load(model)
    rows = pd.read_csv(paths[0]).drop(columns="y")
    np.testing.assert_allclose(got.sum(axis=1), fitted.predict(rows), atol=1e-9)
