"""Frictions a user meets, found in session 29 (branch fric29): each test failed before.

1. Under ``privacy="dp"`` the single-leaf warning quoted the largest root's noisy row
   count as if exact.
2. A negative target under ``criterion="poisson"`` stopped a ``fit_federated`` in round 3,
   after the two grid rounds (under ``"dp"``, after spending budget on them): its client
   now refuses at the handshake, naming itself, y and the domain.
3. ``fit_federated`` under warm_start adding no tree skipped the settings' checks and the
   class_weight preset's warning that ``fit`` and scikit-learn's forest give; ``fit`` gave
   the two warnings in the other order than scikit-learn.
4. The ``export`` extra installed onnxruntime, which no export imports (the tests and the
   docs' examples run the ONNX files with it: the ``test`` extra pins it).
"""

from __future__ import annotations

import ast
import tomllib
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.ensemble import RandomForestClassifier

from fedforest import Client, FedForestClassifier, FedForestRegressor, LocalFederation
from fedforest.federated import client_secure


def _wine(n: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_wine(return_X_y=True)
    rows = np.random.default_rng(0).permutation(len(y))[:n]
    return X[rows], y[rows]


# ------------------------------------------------------- 1. dp's single-leaf warning
def test_dp_single_leaf_warning_calls_the_root_count_noisy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The dp noise and bootstrap come from secrets.randbits: fixed here, so the fit is
    # reproducible (16 rows: roots of about 10 distinct rows, far below 2 * 10).
    monkeypatch.setattr(client_secure.secrets, "randbits", lambda k: 0x5EED)
    X, y = _wine(16)
    est = FedForestClassifier(n_estimators=3, random_state=0, privacy="dp", epsilon=1000.0)
    with pytest.warns(UserWarning, match="single leaf") as got:
        est.fit(X, y)
    (text,) = [str(w.message) for w in got if "single leaf" in str(w.message)]
    largest = max(int(t.n_node_samples[0]) for t in est.trees_)
    assert f"the largest root held about {largest} rows (a noisy count, privacy='dp')" in text


def test_secure_single_leaf_warning_keeps_the_exact_count() -> None:
    X, y = _wine(22)
    est = FedForestClassifier(n_estimators=5, random_state=0)
    with pytest.warns(UserWarning, match="single leaf") as got:
        est.fit(X, y)
    (text,) = [str(w.message) for w in got if "single leaf" in str(w.message)]
    largest = max(int(t.n_node_samples[0]) for t in est.trees_)
    assert f"the largest root held {largest}, fewer than 2 * 10." in text
    assert "noisy" not in text


# --------------------------------------------- 2. Poisson's domain at the handshake
def _counts(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4))
    return X, rng.poisson(np.exp(0.5 * X[:, 0])).astype(np.float64)


HANDSHAKE_REFUSAL = (
    r"Client 'b' failed in round 0 \(handshake\): ValueError: Some value\(s\) of y are "
    r"negative which is not allowed for Poisson regression \(criterion=\"poisson\" takes "
    r"targets >= 0"
)


@pytest.mark.parametrize("privacy", ["dp", "secure", "none"])
def test_a_negative_poisson_target_is_refused_at_the_handshake(privacy: str) -> None:
    # Before: round 3 (Round A, after the two grid rounds) under "dp"/"secure", round 1
    # under "none".
    X, y = _counts(300)
    y_b = y[150:].copy()
    y_b[7] = -1.0
    clients = [Client(X[:150], y[:150], name="a"), Client(X[150:], y_b, name="b")]
    kw = {"epsilon": 5.0} if privacy == "dp" else {}
    est = FedForestRegressor(
        n_estimators=3, max_depth=3, criterion="poisson", privacy=privacy, random_state=0, **kw
    )
    with pytest.raises(ValueError, match=HANDSHAKE_REFUSAL):
        est.fit_federated(LocalFederation(clients))


def test_a_negative_target_of_a_second_output_is_refused_at_the_handshake_too() -> None:
    X, y = _counts(300)
    Y = np.c_[y, y]
    Y[160, 1] = -2.0
    clients = [Client(X[:150], Y[:150], name="a"), Client(X[150:], Y[150:], name="b")]
    est = FedForestRegressor(
        n_estimators=2, max_depth=3, criterion="poisson", privacy="dp", epsilon=5.0
    )
    with pytest.raises(ValueError, match=HANDSHAKE_REFUSAL):
        est.fit_federated(LocalFederation(clients))


def test_fit_refuses_before_any_client_and_other_criteria_take_negative_targets() -> None:
    X, y = _counts(300)
    with pytest.raises(ValueError, match="^Some value\\(s\\) of y are negative"):
        FedForestRegressor(criterion="poisson", privacy="dp", epsilon=5.0).fit(X, y - 1)
    # The check is Poisson's alone: squared_error's clients answer negative targets.
    clients = [Client(X[:150], y[:150] - 1, name="a"), Client(X[150:], y[150:] - 1, name="b")]
    est = FedForestRegressor(n_estimators=2, max_depth=2, privacy="none", random_state=0)
    assert est.fit_federated(LocalFederation(clients)).predict(X).min() < 0


# ------------------------------------------- 3. warm_start that adds no tree: warnings
def _said(fit: Any, here: bool = False) -> list[tuple[type[Warning], str]]:
    """The warnings ``fit()`` gives; ``here``: each at the caller's line (this file)."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fit()
    assert not here or all(w.filename == __file__ for w in got), [w.filename for w in got]
    return [(w.category, str(w.message)) for w in got]


@pytest.mark.parametrize("class_weight", ["balanced", "balanced_subsample", None, {0: 1, 1: 2}])
def test_warm_start_adding_no_tree_warns_as_scikit_learn_does(class_weight: Any) -> None:
    # The oracle: scikit-learn's forest refitted on the same rows, n_estimators unchanged.
    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] + rng.normal(0, 0.5, 80) > 0).astype(int)
    theirs = RandomForestClassifier(n_estimators=2, warm_start=True, class_weight=class_weight)
    _said(lambda: theirs.fit(X, y))
    expected = _said(lambda: theirs.fit(X, y))
    assert expected[-1][1].startswith("Warm-start fitting without increasing n_estimators")
    params = {"n_estimators": 3, "max_depth": 3, "privacy": "none", "random_state": 0}
    ours = FedForestClassifier(**params, warm_start=True, class_weight=class_weight)
    _said(lambda: ours.fit(X, y))
    before = ours.predict_proba(X)
    assert _said(lambda: ours.fit(X, y), here=True) == expected
    clients = [Client(X[:40], y[:40], name="a"), Client(X[40:], y[40:], name="b")]
    assert _said(lambda: ours.fit_federated(clients), here=True) == expected
    np.testing.assert_array_equal(ours.predict_proba(X), before)  # no tree added


def test_fit_federated_adding_no_tree_checks_the_settings_as_fit_does() -> None:
    X, y = _wine(60)
    est = FedForestClassifier(n_estimators=2, max_depth=2, privacy="none", warm_start=True)
    est.fit(X, y)
    est.set_params(max_depth=-1)  # scikit-learn's forest refuses it at any fit
    for fit in (lambda: est.fit(X, y), lambda: est.fit_federated([Client(X, y, name="s")])):
        with pytest.raises(ValueError, match="'max_depth' parameter"):
            fit()


# -------------------------------------------------- 4. what the export extra installs
ROOT = Path(__file__).resolve().parents[1]


def _extras() -> dict[str, list[str]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras: dict[str, list[str]] = tomllib.load(f)["project"]["optional-dependencies"]
    return extras


def _imported_by_the_package() -> set[str]:
    """Top-level modules fedforest/ imports: import statements and ``import_extra`` calls."""
    names = set()
    for path in (ROOT / "fedforest").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", "")) == "import_extra"
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(str(node.args[0].value).split(".")[0])
    return names


def test_the_export_extra_installs_only_what_an_export_imports() -> None:
    extras, imported = _extras(), _imported_by_the_package()
    export = [r.split("==")[0] for r in extras["export"]]
    assert {"treelite", "onnx", "skl2onnx", "shap"} <= imported  # the scan finds the exports'
    assert [name for name in export if name not in imported] == []
    # onnxruntime stays pinned for the tests (and beside the export pins there)
    assert "onnxruntime==1.32.0" in extras["test"]
    assert set(extras["export"]) <= set(extras["test"])
