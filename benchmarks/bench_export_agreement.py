"""Exports against fedforest's own predict, on held-out rows at the trees' thresholds.

For every kind of numeric forest (regressors and classifiers at each privacy level and
criterion, missing values, multi-output y, class weights, sample weights, one class),
fitted on 600 rows of 4 float64 features in 3 clients (5 trees, depth 5), the share of
held-out rows whose export disagrees with ``predict`` / ``predict_proba``, in three
groups: 400 random rows; rows at each threshold (the threshold, one float64 step either
side and its float32 rounding: four rows a split); 200 rows with 40 % of values missing.
A row disagrees when an output differs by more than 1e-9 relative (Treelite, SHAP's sum,
scikit-learn) or 1e-5 (ONNX, whose sums are float32).

- ``treelite``: ``treelite.gtil.predict`` on ``export_matrix(X)``;
- ``onnx32``: ``to_onnx()`` on X cast to float32 (the default input);
- ``onnx64``: ``to_onnx(dtype=np.float64)`` on X;
- ``sklearn``: ``to_sklearn()`` (float32 comparisons, as ONNX's default);
- ``shap``: ``shap_values(X).sum(axis=1) + expected_value`` (additivity).

Needs the ``export`` extra and onnxruntime (the ``test`` extra pins both). Usage::

    python benchmarks/bench_export_agreement.py
"""

from __future__ import annotations

import platform
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

try:  # running from a checkout without ``pip install -e .``
    import fedforest  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "fedforest":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff

N, D = 600, 4


def _data(n: int, seed: int, missing: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    h = rng.integers(0, 3, size=n)
    y = X[:, 0] + X[:, 1] ** 2 + 0.5 * h + 0.1 * rng.normal(size=n)
    if missing:
        X[rng.random(size=X.shape) < missing] = np.nan
    return X, y, h


def _held_out(model: Any, seed: int = 9) -> tuple[np.ndarray, list[slice]]:
    rng = np.random.default_rng(seed)
    at = []
    for tree in model.trees_:
        split = (tree.children_left != -1) & (tree.set_size == 0)
        for f, t in zip(tree.feature[split], tree.threshold[split], strict=True):
            if abs(t) > 1e38:  # the "known | missing" split: no value reaches it
                continue
            rows = rng.normal(size=(4, D))
            rows[:, f] = [np.nextafter(t, -np.inf), t, np.nextafter(t, np.inf), np.float32(t)]
            at.append(rows)
    random_rows = rng.normal(size=(400, D))
    nan_rows = rng.normal(size=(200, D))
    nan_rows[rng.random(size=nan_rows.shape) < 0.4] = np.nan
    parts = [random_rows, np.vstack(at) if at else np.empty((0, D)), nan_rows]
    bounds = np.cumsum([0, *[len(p) for p in parts]])
    return np.vstack(parts), [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _flat(out: Any, n: int) -> np.ndarray:
    return np.hstack(out).reshape(n, -1) if isinstance(out, list) else np.reshape(out, (n, -1))


def _expected(model: Any, X: np.ndarray) -> np.ndarray:
    if hasattr(model, "classes_"):
        return _flat(model.predict_proba(X), len(X))
    return _flat(model.predict(X), len(X))


def _exports(model: Any, X: np.ndarray) -> dict[str, np.ndarray]:
    import onnxruntime
    import treelite.gtil

    n, clf = len(X), hasattr(model, "classes_")
    classes = getattr(model, "classes_", None)
    tl = treelite.gtil.predict(model.to_treelite(), model.export_matrix(X))
    if isinstance(classes, list):
        tl = np.hstack([tl[:, o, : len(c)] for o, c in enumerate(classes)])
    out = {"treelite": _flat(tl, n)}
    for name, dtype in (("onnx32", np.float32), ("onnx64", np.float64)):
        graph = model.to_onnx(dtype=dtype).SerializeToString()
        session = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"])
        res = session.run(None, {"X": X.astype(dtype)})
        out[name] = _flat(res[1:] if clf else res[0], n)
    sk = model.to_sklearn()
    out["sklearn"] = _flat(sk.predict_proba(X) if clf else sk.predict(X), n)
    values = model.shap_values(X)
    base = np.asarray(model.shap_explainer().expected_value)
    total = [v.sum(axis=1) for v in values] if isinstance(values, list) else values.sum(axis=1)
    out["shap"] = _flat(total, n) + base
    return out


def main() -> int:
    warnings.filterwarnings("ignore")
    X, y, h = _data(N, 0)
    Xn, yn, _ = _data(N, 0, missing=0.1)
    three = np.digitize(y, [0.5, 1.8])
    R, C = ff.FedForestRegressor, ff.FedForestClassifier
    cases: list[tuple[str, Any, np.ndarray, np.ndarray, dict[str, Any]]] = [
        ("regressor secure", R(), X, y, {}),
        ("regressor none", R(privacy="none"), X, y, {}),
        ("regressor n_bins=None", R(privacy="none", n_bins=None), X, y, {}),
        ("regressor dp", R(privacy="dp", epsilon=5.0), X, y, {}),
        ("regressor poisson", R(criterion="poisson"), X, np.exp(y / 3), {}),
        ("regressor binning=global", R(binning="global", privacy="none"), X, y, {}),
        ("regressor NaN in training", R(), Xn, yn, {}),
        ("regressor 2 outputs", R(), X, np.column_stack([y, X[:, 2]]), {}),
        ("regressor monotonic_cst", R(monotonic_cst=[1, 0, 0, 0], privacy="none"), X, y, {}),
        ("regressor sample weights", R(), X, y, {"sample_weight": np.linspace(0.5, 2, N)}),
        ("binary bool", C(), X, y > 1, {}),
        ("3 classes text", C(), X, np.array(["lo", "mid", "hi"])[three], {}),
        ("3 classes entropy", C(criterion="entropy"), X, three, {}),
        ("3 classes dp", C(privacy="dp", epsilon=5.0), X, three, {}),
        ("3 classes balanced_subsample", C(class_weight="balanced_subsample"), X, three, {}),
        ("3 classes NaN in training", C(), Xn, np.digitize(yn, [0.5, 1.8]), {}),
        ("one class", C(), X, np.zeros(N, int), {}),
        ("2 outputs", C(), X, np.column_stack([y > 1, three]).astype(int), {}),
    ]
    names = ["treelite", "onnx32", "onnx64", "sklearn", "shap"]
    head = "random / at thresholds / NaN rows that disagree (%)"
    print(f"{'forest':<30} {'rows':>14}  " + "  ".join(f"{n:>14}" for n in names) + f"  ({head})")
    for label, model, Xt, yt, fit_params in cases:
        model.set_params(n_estimators=5, max_depth=5, random_state=0)
        model.fit(Xt, yt, client_ids=h, **fit_params)
        rows, groups = _held_out(model)
        expected = _expected(model, rows)
        got = _exports(model, rows)
        cells = []
        for name in names:
            tol = 1e-5 if name.startswith("onnx") else 1e-9
            bad = ~np.isclose(got[name], expected, rtol=tol, atol=tol).all(axis=1)
            cells.append(
                "/".join(f"{100 * bad[g].mean():.0f}" if len(bad[g]) else "-" for g in groups)
            )
        sizes = "/".join(str(g.stop - g.start) for g in groups)
        print(f"{label:<30} {sizes:>14}  " + "  ".join(f"{c:>14}" for c in cells), flush=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(
        f"# {platform.machine()}, {platform.python_version()}, fedforest {ff.__version__}, {commit}"
    )
    print("# python benchmarks/bench_export_agreement.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
