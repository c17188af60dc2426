"""The methods the paper compares, built with the paper's hyperparameters, and scoring.

A method is a name; :func:`evaluate` builds its estimator, fits it on a
:class:`Fold`, scores it on the test rows and reads its communication ledger. A
FedForest variant whose parameters the estimators do not accept yet is reported as not
available (score NaN, with the reason) instead of failing the experiment.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from fedforest.experiments import baselines as bl
from fedforest.forest import FedForestClassifier, FedForestRegressor

CENTRAL = "Centralized RF"
CENTRAL_H = "Centralized RF + H"
QUANTILES = "FedForest Quantiles"
QUANTILES_H = "FedForest Quantiles + H"
AVGIMP = "FedForest AvgImp/Top-L"
AVGIMP_H = "FedForest AvgImp/Top-L + H"
HISTOGRAM = "Fed Histogram"
LOCAL_ENSEMBLE = "Local Ensembling"
LOCAL = "Local Learning"
FEDAVG_LR = "FedAvg LR"
FEDAVG_NN = "FedAvg NN"
POOLED_LR = "Pooled LR"

#: The paper's Section 5 settings, shared by every forest.
PAPER_FOREST = MappingProxyType({"n_estimators": 50, "max_depth": 8, "min_samples_leaf": 5})
#: Quantile candidates per feature (FedForest) and fixed-width bins (Fed Histogram).
N_BINS = 32
#: Features shortlisted per node by Top-L.
TOP_L = 3
#: Privacy level of every FedForest fit here: the paper's protocol. The server then sees
#: per-client statistics and data values; the "+ H" and AvgImp/Top-L variants (and the Fed
#: Histogram baseline, always "none") are refused under fedforest's default "secure".
PRIVACY = "none"

#: FedForest variants: estimator parameters on top of the paper's forest settings.
_FEDFOREST_VARIANTS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        QUANTILES: {},
        QUANTILES_H: {"split_on_client": True},
        AVGIMP: {"split_rule": "avgimp", "top_l": TOP_L},
        AVGIMP_H: {"split_rule": "avgimp", "top_l": TOP_L, "split_on_client": True},
    }
)

#: Order of the methods in tables and figures.
METHOD_ORDER = (
    CENTRAL,
    CENTRAL_H,
    QUANTILES,
    QUANTILES_H,
    AVGIMP,
    AVGIMP_H,
    HISTOGRAM,
    LOCAL_ENSEMBLE,
    LOCAL,
    FEDAVG_LR,
    FEDAVG_NN,
    POOLED_LR,
)


class NotAvailableError(RuntimeError):
    """The estimators do not offer this method yet."""


@dataclass(frozen=True, eq=False)
class Fold:
    """Train and test rows with their clients and the task.

    Attributes
    ----------
    X_train, y_train, h_train, X_test, y_test, h_test : ndarray
    task : {"regression", "classification"}
    """

    X_train: NDArray[np.float64]
    y_train: NDArray[Any]
    h_train: NDArray[Any]
    X_test: NDArray[np.float64]
    y_test: NDArray[Any]
    h_test: NDArray[Any]
    task: str


@dataclass(frozen=True, eq=False)
class Outcome:
    """One method on one fold: predictions, cost and communication.

    ``prediction`` is None when the method is not available (``note`` says why).
    """

    method: str
    prediction: NDArray[Any] | None
    rounds: float
    megabytes: float
    fit_seconds: float
    note: str = ""
    extra: dict[str, float] = field(default_factory=dict)


def _forest_params(task: str, seed: int, n_jobs: int | None) -> dict[str, Any]:
    max_features = 1 / 3 if task == "regression" else "sqrt"
    return {**PAPER_FOREST, "max_features": max_features, "random_state": seed, "n_jobs": n_jobs}


def build_estimator(
    method: str,
    task: str,
    seed: int,
    n_jobs: int | None = None,
    forest: Mapping[str, Any] | None = None,
) -> Any:
    """The estimator of ``method`` with the paper's settings.

    Parameters
    ----------
    method : str
        One of :data:`METHOD_ORDER` except :data:`POOLED_LR`.
    task : {"regression", "classification"}
    seed : int
    n_jobs : int or None
    forest : mapping or None
        Overrides of the paper's forest settings (e.g. fewer trees in tests).

    Raises
    ------
    NotAvailableError
        When the FedForest estimators do not accept the variant's parameters yet.
    """
    reg = task == "regression"
    params = {**_forest_params(task, seed, n_jobs), **(forest or {})}
    if method in _FEDFOREST_VARIANTS:
        cls_ff: Any = FedForestRegressor if reg else FedForestClassifier
        try:
            # The paper's protocol (privacy="none"): quantile candidates only (no local
            # candidates), per-client statistics for the H and AvgImp variants.
            variant = {"local_candidates": False, "privacy": PRIVACY, **_FEDFOREST_VARIANTS[method]}
            return cls_ff(n_bins=N_BINS, **params, **variant)
        except TypeError as exc:
            raise NotAvailableError(f"not available yet: {exc}") from exc
    if method in (CENTRAL, CENTRAL_H):
        cls: Any = bl.CentralizedForestRegressor if reg else bl.CentralizedForestClassifier
        return cls(use_client=method == CENTRAL_H, **params)
    if method == HISTOGRAM:
        cls = bl.FederatedHistogramRegressor if reg else bl.FederatedHistogramClassifier
        return cls(n_bins=N_BINS, privacy=PRIVACY, **params)
    if method == LOCAL_ENSEMBLE:
        return (bl.LocalEnsembleRegressor if reg else bl.LocalEnsembleClassifier)(**params)
    if method == LOCAL:
        return (bl.LocalLearningRegressor if reg else bl.LocalLearningClassifier)(**params)
    if method == FEDAVG_LR:
        return bl.FedAvgLogisticRegression(random_state=seed)
    if method == FEDAVG_NN:
        return bl.FedAvgMLPClassifier(random_state=seed)
    raise ValueError(f"Unknown method {method!r}; choose one of {METHOD_ORDER}.")


def _accepts_client_ids(bound_method: Any) -> bool:
    try:
        return "client_ids" in inspect.signature(bound_method).parameters
    except (TypeError, ValueError):
        return False


def _predict(model: Any, X: NDArray[np.float64], h: NDArray[Any]) -> NDArray[Any]:
    if _accepts_client_ids(model.predict):
        return np.asarray(model.predict(X, client_ids=h))
    return np.asarray(model.predict(X))


def _pooled_lr(fold: Fold) -> Outcome:
    """scikit-learn logistic regression on the pooled, standardised training rows."""
    start = time.perf_counter()
    scaler = StandardScaler().fit(fold.X_train)
    model = LogisticRegression(max_iter=1000).fit(scaler.transform(fold.X_train), fold.y_train)
    seconds = time.perf_counter() - start
    pred = model.predict(scaler.transform(fold.X_test))
    megabytes = (fold.X_train.nbytes + fold.y_train.nbytes) / 1e6
    return Outcome(POOLED_LR, pred, 1.0, megabytes, seconds)


def evaluate(
    method: str,
    fold: Fold,
    seed: int,
    n_jobs: int | None = None,
    forest: Mapping[str, Any] | None = None,
) -> Outcome:
    """Fit ``method`` on the fold's training rows and predict its test rows.

    Parameters
    ----------
    method : str
        One of :data:`METHOD_ORDER`.
    fold : Fold
    seed : int
        ``random_state`` of the estimator.
    n_jobs : int or None
        Threads inside the estimator.
    forest : mapping or None
        Overrides of the paper's forest settings.

    Returns
    -------
    outcome : Outcome
        ``prediction`` is None (and ``note`` set) when the method is not available.
    """
    if method == POOLED_LR:
        return _pooled_lr(fold)
    try:
        model = build_estimator(method, fold.task, seed, n_jobs, forest)
        start = time.perf_counter()
        model.fit(fold.X_train, fold.y_train, client_ids=fold.h_train)
        seconds = time.perf_counter() - start
    except NotAvailableError as exc:
        return Outcome(method, None, np.nan, np.nan, np.nan, str(exc))
    except (InvalidParameterError, NotImplementedError) as exc:
        return Outcome(method, None, np.nan, np.nan, np.nan, f"not available yet: {exc}")
    ledger = model.communication_
    return Outcome(
        method,
        _predict(model, fold.X_test, fold.h_test),
        float(ledger.rounds),
        float(ledger.total_megabytes),
        seconds,
    )


def score(metric: str, y_true: NDArray[Any], y_pred: NDArray[Any] | None) -> float:
    """``"mse"``, ``"accuracy"`` or ``"r2"`` of a prediction; NaN when there is none."""
    if y_pred is None or len(y_true) == 0:
        return float("nan")
    if metric == "mse":
        return float(np.mean((np.asarray(y_true, float) - np.asarray(y_pred, float)) ** 2))
    if metric == "accuracy":
        return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))
    if metric == "r2":
        y = np.asarray(y_true, dtype=np.float64)
        return float(1.0 - np.sum((y - y_pred) ** 2) / np.sum((y - y.mean()) ** 2))
    raise ValueError(f"Unknown metric {metric!r}; choose 'mse', 'accuracy' or 'r2'.")


def run_methods(
    methods: tuple[str, ...],
    fold: Fold,
    metric: str,
    seed: int,
    n_jobs: int | None = None,
    forest: Mapping[str, Any] | None = None,
    **context: Any,
) -> list[dict[str, Any]]:
    """Evaluate every method on one fold; one record per method.

    ``forest`` overrides the paper's forest settings; ``context`` (e.g. ``K=10``) is
    copied into every record.
    """
    records = []
    for method in methods:
        out = evaluate(method, fold, seed, n_jobs, forest)
        records.append(
            {
                **context,
                "method": method,
                "metric": metric,
                "score": score(metric, fold.y_test, out.prediction),
                "rounds": out.rounds,
                "megabytes": out.megabytes,
                "fit_seconds": out.fit_seconds,
                "note": out.note,
            }
        )
    return records
