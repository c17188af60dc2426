"""Heterogeneity diagnostics (the FedForest paper's Appendix F.4), run through the protocol.

- **Covariate shift** (H0: X independent of the client H). A federated forest classifier
  learns to predict each row's client from X; its out-of-bag accuracy is compared with the
  rate of always guessing the largest client (one-sided binomial test). Under H0 no
  classifier beats that rate.
- **Outcome heterogeneity** (H0: E[Y | X, H] = E[Y | X]). Two forests with the same seed
  (so the same bootstrap draws), one allowed to split on H and one not, are compared out of
  bag on paired per-row losses (squared error, or the Brier score for classification). Each
  client sums the differences and their squares over its rows; the server forms a one-sided
  paired t statistic. Under H0, H-splits do not lower the loss.

Only sums and counts leave the clients, exactly as in training.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from sklearn.utils import check_random_state

from ._inputs import client_index
from .federated.client import Client
from .federated.federation import Federation
from .federated.server.config import GrowerConfig
from .federated.server.grower import grow_forest
from .transport.local import LocalFederation

__all__ = ["DiagnosticReport", "diagnose"]


@dataclass(frozen=True)
class DiagnosticReport:
    """Outcome of :func:`diagnose`.

    Attributes
    ----------
    covariate_shift_pvalue : float
        One-sided binomial p-value of "the client can be predicted from X".
    outcome_heterogeneity_pvalue : float
        One-sided paired t-test p-value of "splits on the client lower the OOB loss".
    client_accuracy, majority_rate : float
        OOB accuracy of the client classifier, and the largest client's share of rows.
    loss_without_client, loss_with_client : float
        Mean paired OOB loss of the forests without and with splits on H.
    n_paired : int
        Rows out of bag in both forests.
    alpha : float
        Level at which :attr:`covariate_shift` and :attr:`outcome_heterogeneity` reject.
    rounds, megabytes : int, float
        Communication spent on the three diagnostic forests.
    """

    covariate_shift_pvalue: float
    outcome_heterogeneity_pvalue: float
    client_accuracy: float
    majority_rate: float
    loss_without_client: float
    loss_with_client: float
    n_paired: int
    alpha: float = 0.05
    rounds: int = 0
    megabytes: float = 0.0

    @property
    def covariate_shift(self) -> bool:
        """Whether the covariate-shift test rejects at ``alpha``."""
        return bool(self.covariate_shift_pvalue < self.alpha)

    @property
    def outcome_heterogeneity(self) -> bool:
        """Whether the outcome-heterogeneity test rejects at ``alpha``."""
        return bool(self.outcome_heterogeneity_pvalue < self.alpha)

    def __str__(self) -> str:
        def verdict(flag: bool) -> str:
            return "REJECTED" if flag else "not rejected"

        return "\n".join(
            [
                "fedforest heterogeneity diagnostics",
                f"  covariate shift (X depends on the client): "
                f"p = {self.covariate_shift_pvalue:.3g} -> H0 {verdict(self.covariate_shift)} "
                f"at {self.alpha:g}",
                f"    OOB accuracy predicting the client {self.client_accuracy:.3f} vs largest "
                f"client {self.majority_rate:.3f}",
                f"  outcome heterogeneity (Y|X depends on the client): "
                f"p = {self.outcome_heterogeneity_pvalue:.3g} -> H0 "
                f"{verdict(self.outcome_heterogeneity)} at {self.alpha:g}",
                f"    paired OOB loss without H {self.loss_without_client:.4g}, with H "
                f"{self.loss_with_client:.4g} ({self.n_paired} rows)",
                f"  cost: {self.rounds} rounds, {self.megabytes:.2f} MB",
            ]
        )


def _federation(
    X: ArrayLike | None,
    y: ArrayLike | None,
    client_ids: ArrayLike | None,
    federation: Federation | None,
    n_jobs: int | None,
) -> Federation:
    if federation is not None:
        if X is not None or y is not None:
            raise ValueError("Pass either a federation or X, y, client_ids to diagnose, not both.")
        return federation
    if X is None or y is None or client_ids is None:
        raise ValueError("diagnose needs X, y and client_ids (or a federation=).")
    X_arr, y_arr = np.asarray(X), np.asarray(y)
    inverse, names = client_index(client_ids, X_arr.shape[0])
    return LocalFederation(
        [Client(X_arr[inverse == k], y_arr[inverse == k], name) for k, name in enumerate(names)],
        n_jobs=n_jobs,
    )


def _config(
    task: str, n_estimators: int, max_depth: int | None, min_samples_leaf: int, random_state: Any
) -> GrowerConfig:
    """A diagnostic forest: the estimators' defaults for ``task``, with an OOB round."""
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    regression = task == "regression"
    return GrowerConfig(
        task=task,
        criterion="squared_error" if regression else "gini",
        n_estimators=n_estimators,
        max_depth=max_depth,
        min_samples_split=2,
        min_samples_leaf=min_samples_leaf,
        min_impurity_decrease=0.0,
        max_features=1 / 3 if regression else "sqrt",
        n_bins=32,
        local_candidates=True,
        bootstrap=True,
        oob_score=True,
        seed=seed,
    )


def diagnose(
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    client_ids: ArrayLike | None = None,
    *,
    federation: Federation | None = None,
    task: str = "regression",
    n_estimators: int = 50,
    max_depth: int | None = 8,
    min_samples_leaf: int = 5,
    alpha: float = 0.05,
    random_state: int | None = 0,
    n_jobs: int | None = None,
    privacy: str = "secure",
) -> DiagnosticReport:
    """Test a federation for covariate shift and outcome heterogeneity.

    Parameters
    ----------
    X, y, client_ids : array-like, optional
        Simulation mode: rows partitioned by client (as in ``fit``).
    federation : Federation, optional
        Real clients instead (their rows stay where they are).
    task : {"regression", "classification"}
    n_estimators, max_depth, min_samples_leaf : forest size of the diagnostic forests.
    alpha : float
        Test level for the report's verdicts.
    privacy : {"none"}, default="secure"
        The diagnostics run the paper's protocol (``privacy="none"``): the server sees
        per-client statistics. Pass ``"none"`` to run them; the default refuses.
    """
    if privacy != "none":
        raise ValueError(
            f"diagnose needs per-client statistics (a forest predicting the client, per-row "
            f"losses compared per client), which privacy={privacy!r} does not release; pass "
            'privacy="none" to run it knowing the server sees them (docs/privacy.md).'
        )
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}.")
    fed = _federation(X, y, client_ids, federation, n_jobs)
    size = (n_estimators, max_depth, min_samples_leaf, random_state)
    shift = grow_forest(fed, dataclasses.replace(_config("classification", *size), target="client"))
    n_rows = np.array(list(shift.client_n_samples.values()), dtype=float)
    majority = float(n_rows.max() / n_rows.sum())
    accuracy = float(shift.oob_score) if shift.oob_score is not None else float("nan")
    n_scored = max(shift.oob_n_scored, 1)
    p_shift = float(
        stats.binomtest(
            int(round(accuracy * n_scored)), n_scored, majority, alternative="greater"
        ).pvalue
    )
    base = _config(task, *size)
    without = grow_forest(fed, dataclasses.replace(base, oob_store_as="diagnose/no-h"))
    with_h = grow_forest(
        fed, dataclasses.replace(base, split_on_client=True, oob_compare_to="diagnose/no-h")
    )
    assert with_h.paired_sums is not None
    n, total, squares, loss_with = (float(v) for v in with_h.paired_sums)
    p_outcome, mean = _paired_t(n, total, squares)
    ledgers = (shift.ledger, without.ledger, with_h.ledger)
    loss_h = loss_with / n if n else float("nan")
    return DiagnosticReport(
        covariate_shift_pvalue=p_shift,
        outcome_heterogeneity_pvalue=p_outcome,
        client_accuracy=accuracy,
        majority_rate=majority,
        loss_without_client=loss_h + mean if n else float("nan"),
        loss_with_client=loss_h,
        n_paired=int(n),
        alpha=alpha,
        rounds=sum(led.rounds for led in ledgers),
        megabytes=sum(led.total_megabytes for led in ledgers),
    )


def _paired_t(n: float, total: float, squares: float) -> tuple[float, float]:
    """One-sided paired t-test of mean difference > 0 from (n, sum d, sum d^2)."""
    if n < 2:
        return float("nan"), float("nan")
    mean = total / n
    var = max(squares / n - mean**2, 0.0) * n / (n - 1)
    if var == 0.0:
        return (0.0 if mean > 0 else 1.0), mean
    t = mean / np.sqrt(var / n)
    return float(stats.t.sf(t, df=n - 1)), mean
