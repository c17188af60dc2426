"""Experiments on real data: FedHeart (Fig. 2(d)), fragmentation (Table 3), Appendix B.

Every dataset ships with fedforest or scikit-learn (see ``fedforest/datasets/data/README.md``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from fedforest.datasets import (
    PANEL_DATASETS,
    PanelDataset,
    fed_heart_disease_split,
    load_fed_heart_disease,
    load_fragmentation_dataset,
    load_panel_dataset,
    partition_by_column,
    partition_dirichlet,
    partition_iid,
    partition_sorted,
    split_within_clients,
)

from ._catalog import CATALOG
from ._methods import (
    AVGIMP,
    CENTRAL,
    FEDAVG_LR,
    HISTOGRAM,
    LOCAL,
    LOCAL_ENSEMBLE,
    METHOD_ORDER,
    POOLED_LR,
    QUANTILES,
    Fold,
    evaluate,
    run_methods,
    score,
)
from ._plots import box_plot, line_plot, panel_plot
from ._runner import Experiment

__all__ = ["REAL_EXPERIMENTS"]

#: FedHeart compares every method, in the tables' order.
FEDHEART_METHODS = METHOD_ORDER
FRAGMENTATION_METHODS = (CENTRAL, QUANTILES, AVGIMP, HISTOGRAM, LOCAL_ENSEMBLE, LOCAL)
FRAGMENTATION_K = (1, 2, 5, 10, 20, 50, 100)
PANEL_METHODS = (CENTRAL, QUANTILES, AVGIMP, HISTOGRAM, LOCAL_ENSEMBLE, LOCAL)
#: Clients of a panel dataset without a natural site column.
PANEL_CLIENTS = 5
#: Dirichlet concentration of the label-skew partition of panel classification data.
PANEL_DIRICHLET_ALPHA = 1.0
#: FLamby's FedHeart split seed; repetition r of seed s uses 43 + 1000 s + r.
_FLAMBY_SEED = 43


def run_fedheart(
    _setting: Any,
    rep: int,
    seed: int,
    n_jobs: int | None,
    *,
    methods: tuple[str, ...] = FEDHEART_METHODS,
    forest: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """FedHeart with FLamby's split (seed 43 at repetition 0); accuracy pooled and per center.

    One record per method for the pooled test set (``group="all"``) and one per center.
    """
    frame = load_fed_heart_disease()
    is_test = fed_heart_disease_split(frame, random_state=_FLAMBY_SEED + seed)
    X = frame.drop(columns=["target", "center"]).to_numpy(dtype=np.float64)
    y, h = frame["target"].to_numpy(), frame["center"].to_numpy(dtype=str)
    fold = Fold(
        X[~is_test], y[~is_test], h[~is_test], X[is_test], y[is_test], h[is_test], "classification"
    )
    records = []
    for method in methods:
        out = evaluate(method, fold, seed, n_jobs, forest)
        base = {
            "method": method,
            "metric": "accuracy",
            "rounds": out.rounds,
            "megabytes": out.megabytes,
            "fit_seconds": out.fit_seconds,
            "note": out.note,
        }
        records.append(
            {**base, "group": "all", "score": score("accuracy", fold.y_test, out.prediction)}
        )
        for center in np.unique(fold.h_test).tolist():
            rows = fold.h_test == center
            pred = None if out.prediction is None else out.prediction[rows]
            records.append(
                {**base, "group": center, "score": score("accuracy", fold.y_test[rows], pred)}
            )
    return records


@cache
def _fragmentation_data() -> PanelDataset:
    return load_fragmentation_dataset()


def _subsample(X: Any, y: Any, n_rows: int | None, seed: int) -> tuple[Any, Any]:
    if n_rows is None or n_rows >= len(y):
        return X, y
    rows = np.sort(np.random.default_rng(seed).choice(len(y), size=n_rows, replace=False))
    return X[rows], y[rows]


def run_fragmentation(
    n_clients: int,
    rep: int,
    seed: int,
    n_jobs: int | None,
    *,
    methods: tuple[str, ...] = FRAGMENTATION_METHODS,
    n_rows: int | None = None,
    forest: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The Banknote stand-in split iid over ``n_clients`` clients, 30 % of each held out."""
    data = _fragmentation_data()
    X, y = _subsample(data.X, data.y, n_rows, seed)
    h = partition_iid(len(y), n_clients, random_state=seed)
    is_test = split_within_clients(h, 0.3, stratify=y, random_state=seed)
    fold = Fold(
        X[~is_test], y[~is_test], h[~is_test], X[is_test], y[is_test], h[is_test], "classification"
    )
    return run_methods(methods, fold, "accuracy", seed, n_jobs, forest, K=n_clients)


def panel_partition(data: PanelDataset, seed: int) -> tuple[np.ndarray, str]:
    """Clients of a panel dataset and the partition's name.

    A natural site column when there is one; else Dirichlet label skew (classification)
    or covariate-sorted blocks along the first feature with more than 10 distinct values
    (regression), with :data:`PANEL_CLIENTS` clients.
    """
    if data.site is not None:
        return partition_by_column(data.site), "site"
    if data.task == "classification":
        ids = partition_dirichlet(data.y, PANEL_CLIENTS, PANEL_DIRICHLET_ALPHA, seed)
        return ids, f"dirichlet({PANEL_DIRICHLET_ALPHA:g})"
    distinct = [np.unique(data.X[:, j]).size for j in range(data.X.shape[1])]
    j = next((j for j, n in enumerate(distinct) if n > 10), 0)
    return partition_sorted(data.X[:, j], PANEL_CLIENTS), f"sorted({data.feature_names[j]})"


def run_panel(
    name: str,
    rep: int,
    seed: int,
    n_jobs: int | None,
    *,
    methods: tuple[str, ...] = PANEL_METHODS,
    forest: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One panel dataset: partition, 30 % of every client held out, every method."""
    data = load_panel_dataset(name)
    h, kind = panel_partition(data, seed)
    classify = data.task == "classification"
    is_test = split_within_clients(h, 0.3, stratify=data.y if classify else None, random_state=seed)
    X, y = data.X, data.y
    fold = Fold(
        X[~is_test], y[~is_test], h[~is_test], X[is_test], y[is_test], h[is_test], data.task
    )
    metric = "accuracy" if classify else "r2"
    return run_methods(methods, fold, metric, seed, n_jobs, forest, dataset=name, partition=kind)


REAL_EXPERIMENTS: dict[str, Experiment] = {
    "fedheart": Experiment(
        name="fedheart",
        title="Fig. 2(d) FedHeart (FLamby): test accuracy, 4 centers, 740 patients",
        run=run_fedheart,
        plot=box_plot,
        metric="accuracy",
        default_reps=CATALOG["fedheart"].default_reps,
        paper_reps=CATALOG["fedheart"].paper_reps,
        paper={FEDAVG_LR: {"": 0.748}, POOLED_LR: {"": 0.795}},
        reference="FLamby",
        notes="FLamby's FedHeart: per-center stratified 66/34 split (repetition 0 uses "
        "FLamby's seed 43). FedAvg: FLamby's protocol (batch 4, 100 local SGD steps, 15 "
        "rounds, lr 1e-3, per-center standardisation). Pooled LR: scikit-learn "
        "LogisticRegression on the pooled standardised rows. The paper's reference values "
        "are FLamby's (pooled LR 0.795, FedAvg LR 0.748).",
    ),
    "table3-fragmentation": Experiment(
        name="table3-fragmentation",
        title="Table 3 fragmentation: accuracy over the number of clients K "
        "(heart-attack data standing in for Banknote)",
        run=run_fragmentation,
        plot=line_plot,
        settings=FRAGMENTATION_K,
        x="K",
        metric="accuracy",
        default_reps=CATALOG["table3-fragmentation"].default_reps,
        paper_reps=CATALOG["table3-fragmentation"].paper_reps,
        notes="Banknote Authentication is not shipped by any installable package; the "
        "Zheen heart-attack data (1,319 rows, 8 numeric features, binary) stands in. Rows "
        "are split iid over K clients and 30% of every client is held out.",
    ),
    "appendix-b": Experiment(
        name="appendix-b",
        title="Appendix B: real tabular datasets (accuracy or R²)",
        run=run_panel,
        plot=panel_plot,
        settings=tuple(PANEL_DATASETS),
        x="dataset",
        metric="accuracy",
        default_reps=CATALOG["appendix-b"].default_reps,
        paper_reps=CATALOG["appendix-b"].paper_reps,
        notes=f"{len(PANEL_DATASETS)} datasets shipped with fedforest or scikit-learn. "
        f"Clients: the natural site column when there is one, else {PANEL_CLIENTS} clients "
        f"by Dirichlet({PANEL_DIRICHLET_ALPHA:g}) label skew (classification) or sorted "
        "blocks of the first feature with > 10 distinct values (regression); 30% of every "
        "client held out. Regression is scored by R², classification by accuracy.",
    ),
}
