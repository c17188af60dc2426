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
"""

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
