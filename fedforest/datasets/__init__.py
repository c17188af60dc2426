"""Federated datasets: the paper's synthetic generator, shipped real data, partitioners.

- The generator of the FedForest paper's Section 5 (``papers/000_944673a25e3d6d51.txt``):
  ``K`` clients with Gaussian covariates whose means and spreads differ by client
  (covariate shift) and outcomes with client-specific offsets (outcome shift), on top of
  a piecewise-constant (tree-based) regression function :func:`paper_f`; the Appendix F
  variants (:func:`make_shift_benchmark`, :func:`add_feature_outliers`).
- Real data that ships with fedforest or scikit-learn (nothing is downloaded):
  :func:`load_fed_heart_disease` (FLamby's FedHeart), the Appendix B panel
  (:data:`PANEL_DATASETS`) and the stand-in for Banknote
  (:func:`load_fragmentation_dataset`). Sources and licences: ``fedforest/datasets/data/README.md``.
- Partitioners that assign pooled rows to clients: :func:`partition_by_column`,
  :func:`partition_iid`, :func:`partition_dirichlet`, :func:`partition_sorted`.

Names load on first use (PEP 562): reading a client's file (``datasets.files``, a
Flower ClientApp does on every message) does not import scikit-learn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from .partition import (
        partition_by_column,
        partition_dirichlet,
        partition_iid,
        partition_sorted,
        split_within_clients,
    )
    from .real import (
        FED_HEART_CENTERS,
        PANEL_DATASETS,
        PanelDataset,
        fed_heart_disease_split,
        load_fed_heart_disease,
        load_fragmentation_dataset,
        load_panel_dataset,
    )
    from .synthetic import (
        SETTINGS,
        SHIFT_BENCHMARKS,
        FederatedSplit,
        ShiftBenchmark,
        add_feature_outliers,
        make_paper_synthetic,
        make_shift_benchmark,
        paper_f,
    )

__all__ = [
    "FED_HEART_CENTERS",
    "PANEL_DATASETS",
    "SETTINGS",
    "SHIFT_BENCHMARKS",
    "FederatedSplit",
    "ShiftBenchmark",
    "PanelDataset",
    "add_feature_outliers",
    "fed_heart_disease_split",
    "load_fed_heart_disease",
    "load_fragmentation_dataset",
    "load_panel_dataset",
    "make_paper_synthetic",
    "make_shift_benchmark",
    "paper_f",
    "partition_by_column",
    "partition_dirichlet",
    "partition_iid",
    "partition_sorted",
    "split_within_clients",
]

_WHERE = {
    "partition_by_column": ".partition",
    "partition_dirichlet": ".partition",
    "partition_iid": ".partition",
    "partition_sorted": ".partition",
    "split_within_clients": ".partition",
    "FED_HEART_CENTERS": ".real",
    "PANEL_DATASETS": ".real",
    "PanelDataset": ".real",
    "fed_heart_disease_split": ".real",
    "load_fed_heart_disease": ".real",
    "load_fragmentation_dataset": ".real",
    "load_panel_dataset": ".real",
    "SETTINGS": ".synthetic",
    "SHIFT_BENCHMARKS": ".synthetic",
    "FederatedSplit": ".synthetic",
    "ShiftBenchmark": ".synthetic",
    "add_feature_outliers": ".synthetic",
    "make_paper_synthetic": ".synthetic",
    "make_shift_benchmark": ".synthetic",
    "paper_f": ".synthetic",
}


__getattr__, __dir__ = _lazy_names(globals(), _WHERE)
