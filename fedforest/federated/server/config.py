"""What the server is asked to grow (GrowerConfig) and what it hands back (ForestResult).

Both the grower and one level's work (``level.py``) read the configuration; keeping it
here lets each import it without importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...tree.arrays import Tree
from ..protocol import CommunicationLedger

__all__ = ["ForestResult", "GrowerConfig"]


@dataclass(frozen=True)
class GrowerConfig:
    """Hyperparameters the server needs (validated by the estimator)."""

    task: str
    criterion: str
    n_estimators: int
    max_depth: int | None
    #: Rows, or (a float) a fraction of the pooled rows: the grower resolves it after the
    #: handshake (``resolve.resolve_sizes``); every other reader sees an int.
    min_samples_split: int
    min_samples_leaf: int
    min_impurity_decrease: float
    max_features: Any
    n_bins: int | None
    bootstrap: bool
    oob_score: bool
    seed: int
    verbose: int = 0
    tree_batch_size: int | None = None
    n_jobs: int | None = None
    #: "quantile": the paper's sketches; "histogram": the Federated Histogram baseline
    #: (Kalloori & Klingler 2022): B fixed-width bins between the global min and max;
    #: "global": quantiles of the pooled rows per feature, fixed at the handshake, so each
    #: level takes one round ("none" only).
    binning: str = "quantile"
    #: binning="global": candidates travel with Round A (False: a Round B of their own,
    #: the same forest in twice the rounds; for tests and measurements).
    one_round: bool = True
    #: Clients add their local best threshold per (node, feature) to the candidates
    #: (quantile binning only; the verification mode's candidates are already exact).
    local_candidates: bool = False
    split_on_client: bool = False
    split_rule: str = "exact"
    top_l: int | None = None
    client_fraction: float = 1.0
    #: Bootstrap size per tree (scikit-learn's max_samples; None: every client's n_k).
    max_samples: float | None = None
    #: warm_start: trees 0..first_tree-1 exist already; grow first_tree..n_estimators-1.
    first_tree: int = 0
    #: warm_start under "secure"/"dp": the earlier trees' settings digest (hex; "" if they
    #: mix several): their out-of-bag rows follow it (digest.check_warm_digest).
    warm_digest: str | None = None
    #: warm_start: the earlier trees' columns (n_features, feature names or None, each
    #: categorical column's categories by index): the handshake refuses others.
    warm_schema: tuple[Any, ...] | None = None
    #: Diagnostics only: the out-of-bag round also returns per-leaf sums of the first tree.
    oob_leaf_sums: bool = False
    #: "raise": a failed client stops training (ClientFailure); "drop": go on without it.
    on_client_failure: str = "raise"
    #: "none": the paper's protocol (per-client sketches and statistics reach the server);
    #: "secure": masked sums over clients only, none over fewer than min_aggregate_rows rows.
    privacy: str = "none"
    #: Under "secure": the fewest rows any released sum covers (None: max(10, 2 * leaf)).
    min_aggregate_rows: int | None = None
    #: Under "dp": the privacy budget of the whole fit (delta None: min(1e-5, 0.1 / n)).
    epsilon: float | None = None
    delta: float | None = None
    #: Under "dp": colluding clients the noise holds against (each share sigma^2 / (K - t)).
    dp_colluders: int = 0
    #: Declared category levels (server/domains.py): None (found from the data), a dict
    #: {column name or index: levels} or "from_dtype" (the clients' pandas categories).
    categories: Any = None
    #: Declared class labels as the clients hold them (a list, one per output for
    #: multi-output y), or None: the labels present (refused under "dp").
    classes: Any = None
    #: ``classes`` were declared by ``fit`` from the rows it holds (codes 0..K-1, under
    #: "secure" and "dp"), not by the user: left out of the settings digest, whose class
    #: sizes say as much, so such a fit keeps the digest (and bootstraps) it had undeclared.
    classes_from_rows: bool = False
    #: Classification: None, a dict {label: weight}, "balanced" or "balanced_subsample"
    #: (server/weights.py).
    class_weight: Any = None
    #: scikit-learn's: a child weighs at least this fraction of its tree's root.
    min_weight_fraction_leaf: float = 0.0
    #: scikit-learn's minimal cost-complexity pruning of each grown tree (tree/prune.py).
    ccp_alpha: float = 0.0
    #: scikit-learn's monotonicity constraints, one of -1, 0, 1 per feature (as given: the
    #: grower checks them, server/monotonic.py); None: none.
    monotonic_cst: Any = None
    #: Classification, set from the handshake: the classes of each output (one entry per
    #: output of multi-output y), the sizes of the statistics' class blocks.
    class_sizes: tuple[int, ...] = ()

    @property
    def class_outputs(self) -> int:
        """Outputs whose class blocks the statistics hold (1 for one output or regression)."""
        return max(len(self.class_sizes), 1)

    @property
    def uses_local_candidates(self) -> bool:
        """Whether clients propose their local best thresholds as extra candidates."""
        return self.local_candidates and self.binning == "quantile" and self.n_bins is not None


@dataclass
class ForestResult:
    """What the server learned: trees, schema, ledger, out-of-bag score."""

    trees: list[Tree]
    n_features: int
    feature_names: list[str] | None
    classes: list[Any] | None
    ledger: CommunicationLedger
    client_n_samples: dict[str, int]
    oob_score: float | None = None
    oob_n_scored: int = 0
    importances: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    #: Each grown tree's weighted impurity decreases per feature (before normalising).
    tree_importances: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 0)))
    clients: list[str] = field(default_factory=list)
    categories: dict[str, list[Any]] = field(default_factory=dict)
    #: The dtype of the clients' labels (``federated/label_dtypes.py``), or None.
    label_dtype: str | None = None
    #: Diagnostics (``oob_leaf_sums``): per client, per node of the first tree, the sums
    #: over its out-of-bag rows (count, then sum y and y^2, or each class's count).
    leaf_sums: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    #: (name, round) of every client dropped under on_client_failure="drop".
    dropped_clients: list[tuple[str, int]] = field(default_factory=list)
    #: Each dropped client's reason (its exception's type and the step, never its text).
    dropped_reasons: dict[str, str] = field(default_factory=dict)
    #: Under "dp": the noise plan and the budget spent (model.privacy_report_).
    privacy_report: dict[str, Any] | None = None
    #: Under "secure"/"dp": the settings digest the grown trees' bootstraps are bound to.
    settings_digest: str | None = None
    #: Under "secure": the guides of the fit (server/guides.py), for a warm start.
    guides: dict[str, NDArray[Any]] | None = None
