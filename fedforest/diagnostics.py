"""Heterogeneity diagnostics (the FedForest paper's Appendix F.4), run through the protocol.

One light diagnostic tree (the paper's "lightweight diagnostic step at the root node of the
first tree"): a single federated CART tree on the bootstrap sample, every feature at every
node, grown with the ordinary rounds; then one out-of-bag round.

- **Covariate shift** (H0: X independent of the client H). At the tree's root the server
  already holds each client's row counts between consecutive candidate thresholds of every
  feature (Round B's left statistics): a K x bins contingency table per feature. A
  chi-square test of homogeneity per feature (adjacent bins merged until every expected
  count is at least 5), combined over the features by Simes' method.
- **Outcome heterogeneity** (H0: E[Y | X, H] = E[Y | X]). The tree's leaves are cells of X
  in which E[Y | X] is nearly constant, chosen on the in-bag rows only. Each client returns,
  per leaf, the count and the sums of y and y^2 of its *out-of-bag* rows (which the tree
  never saw), and the server tests whether client means differ within leaves: an F test
  per leaf, combined over the leaves by Fisher's method (classification: per leaf, a
  randomized permutation test of client x class association, exact whatever the counts).
  Splitting on H never enters, so a client that
  merely predicts X (covariate shift) cannot make the test reject.

Both tests are calibrated by simulation (``benchmarks/bench_diagnostics.py``, results in
docs/heterogeneity.md). Only sums and counts leave the clients, as in training, under
``privacy="none"`` (per-client statistics): the default ``"secure"`` refuses.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from sklearn.utils import check_random_state

from ._common import STAT_ROWS, STAT_TASK, count_columns, is_int_in
from ._inputs import take_rows
from .federated.categorical import pandas_frame
from .federated.client import Client
from .federated.federation import Federation
from .federated.protocol import HANDSHAKE, ROUND_A, ROUND_B, Message, unpack_increments
from .federated.row_clients import client_index
from .federated.server.config import GrowerConfig
from .federated.server.grower import grow_forest
from .transport.local import LocalFederation

__all__ = ["DiagnosticReport", "diagnose"]

#: Adjacent bins are merged until each client's expected count is at least this.
MIN_EXPECTED = 5.0


@dataclass(frozen=True)
class DiagnosticReport:
    """Outcome of :func:`diagnose`.

    Attributes
    ----------
    covariate_shift_pvalue : float
        Simes-combined p-value of the per-feature chi-square tests of "the client's
        distribution of x_j differs" at the diagnostic tree's root (NaN: nothing to test).
    outcome_heterogeneity_pvalue : float
        Fisher-combined p-value of the leaves' F tests of "client means differ" on
        out-of-bag rows.
    feature_pvalues : tuple of float
        Each feature's chi-square p-value (NaN where a feature had a single bin).
    outcome_f, outcome_df : float, tuple of int
        The F statistic (the smallest p-value's, for classification) and its degrees of
        freedom (client-within-leaf effects, residual).
    n_cells, n_scored : int
        Leaves shared by two or more clients' out-of-bag rows, and the rows scored.
    alpha : float
        Level at which :attr:`covariate_shift` and :attr:`outcome_heterogeneity` reject.
    rounds, megabytes : int, float
        Communication spent on the diagnostic tree.
    n_features : int
        The federation's features (``split_rule="auto"`` caps its Top-L at them).
    """

    covariate_shift_pvalue: float
    outcome_heterogeneity_pvalue: float
    feature_pvalues: tuple[float, ...] = ()
    outcome_f: float = float("nan")
    outcome_df: tuple[int, int] = (0, 0)
    n_cells: int = 0
    n_scored: int = 0
    alpha: float = 0.05
    rounds: int = 0
    megabytes: float = 0.0
    n_features: int = 0

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

        tested = [p for p in self.feature_pvalues if np.isfinite(p)]
        return "\n".join(
            [
                "fedforest heterogeneity diagnostics",
                f"  covariate shift (X depends on the client): "
                f"p = {self.covariate_shift_pvalue:.3g} -> H0 {verdict(self.covariate_shift)} "
                f"at {self.alpha:g}",
                f"    chi-square per feature at the root, Simes over {len(tested)}",
                f"  outcome heterogeneity (Y|X depends on the client): "
                f"p = {self.outcome_heterogeneity_pvalue:.3g} -> H0 "
                f"{verdict(self.outcome_heterogeneity)} at {self.alpha:g}",
                f"    F = {self.outcome_f:.4g} on {self.outcome_df} df: client means within "
                f"{self.n_cells} shared leaves, {self.n_scored} out-of-bag rows",
                f"  cost: {self.rounds} rounds, {self.megabytes:.3f} MB",
            ]
        )


class MultiOutputTargets(ValueError):
    """diagnose on a y of several columns: its tests read one output.

    A multi-output regression y failed its out-of-bag round as a client's invalid reply; a
    multi-output classification y gave the outcome test a NaN p-value (F on (0, 0) df).
    """


class _RootRecorder(Federation):
    """Passes messages through; keeps the first Round A and B (the diagnostic tree's root).

    These are what the server receives anyway under ``privacy="none"``.
    """

    def __init__(self, inner: Federation, task: str) -> None:
        self.inner, self.task = inner, task
        self.seen: dict[str, tuple[dict[str, Message], dict[str, Message]]] = {}

    @property
    def client_names(self) -> list[str]:
        """The inner federation's clients."""
        return self.inner.client_names

    @property
    def clients(self) -> dict[str, Any]:
        """In-process client objects (empty for remote transports)."""
        return dict(getattr(self.inner, "clients", {}))

    def send_and_receive(
        self, requests: dict[str, Message], round_index: int
    ) -> dict[str, Message]:
        """The inner federation's replies; the root's rounds are kept."""
        replies = self.inner.send_and_receive(requests, round_index)
        kind = next(iter(requests.values())).kind
        if kind in (HANDSHAKE, ROUND_A, ROUND_B) and kind not in self.seen:
            self.seen[kind] = (dict(requests), dict(replies))
        if kind == HANDSHAKE:  # before the tree grows (see MultiOutputTargets)
            for name in sorted(replies):
                outputs = replies[name].header.get("n_outputs", 1)
                if isinstance(outputs, int) and outputs > 1:
                    raise MultiOutputTargets(
                        f"diagnose tests one output, but client {name!r} holds a y of "
                        f"{outputs} columns; give one column (y[:, j]) to test that output."
                    )
        return replies


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
    # A DataFrame's rows go as they are, as fit's: its category and text columns stay
    # categorical (np.asarray made them strings the clients refused as "not numeric").
    X = pandas_frame(X)  # a pyarrow Table's text columns too
    X_in = X if isinstance(X, pd.DataFrame) else np.asarray(X)
    y_arr = np.asarray(y)
    inverse, names = client_index(client_ids, X_in.shape[0])
    return LocalFederation(
        [
            Client(
                take_rows(X_in, inverse == k)
                if isinstance(X_in, pd.DataFrame)
                else X_in[inverse == k],
                y_arr[inverse == k],
                name,
            )
            for k, name in enumerate(names)
        ],
        n_jobs=n_jobs,
    )


def _config(task: str, max_depth: int | None, min_samples_leaf: int, seed: int) -> GrowerConfig:
    """The diagnostic tree: one CART tree, every feature at every node, an OOB round."""
    regression = task == "regression"
    return GrowerConfig(
        task=task,
        criterion="squared_error" if regression else "gini",
        n_estimators=1,
        max_depth=max_depth,
        min_samples_split=2,
        min_samples_leaf=min_samples_leaf,
        min_impurity_decrease=0.0,
        max_features=None,
        n_bins=32,
        local_candidates=False,
        bootstrap=True,
        oob_score=True,
        oob_leaf_sums=True,
        seed=seed,
    )


def diagnose(
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    client_ids: ArrayLike | None = None,
    *,
    federation: Federation | None = None,
    task: str = "regression",
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
    task : {"regression", "classification"}, default="regression"
    max_depth, min_samples_leaf : int, default=8, 5
        Size of the diagnostic tree (its leaves are the outcome test's cells).
    alpha : float, default=0.05
        Test level for the report's verdicts.
    random_state : int, RandomState or None, default=0
        Seeds the diagnostic tree's bootstrap.
    n_jobs : int or None, default=None
        Threads for the in-process clients of simulation mode.
    privacy : {"none"}, default="secure"
        The diagnostics read per-client statistics (``privacy="none"``): pass ``"none"`` to
        run them knowing the server sees them; the default refuses.
    """
    if privacy != "none":
        raise ValueError(
            f"diagnose needs per-client statistics (each client's counts per bin at the root "
            f"and per leaf), which privacy={privacy!r} does not release; pass "
            'privacy="none" to run it knowing the server sees them (docs/privacy.md).'
        )
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}.")
    _check_sizes(max_depth, min_samples_leaf, alpha)
    max_depth = None if max_depth is None else int(max_depth)
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    fed = _RootRecorder(_federation(X, y, client_ids, federation, n_jobs), task)
    with warnings.catch_warnings():
        # One tree: about a third of the rows is in its bag, as intended (the OOB round's
        # "drawn by every tree" warning is for forests).
        warnings.filterwarnings("ignore", ".* have no out-of-bag prediction", UserWarning)
        result = grow_forest(fed, _config(task, max_depth, int(min_samples_leaf), seed))
    feature_p = _root_chi_square(fed.seen, task)
    p_shift = _simes([p for p in feature_p if np.isfinite(p)])
    p_outcome, f, df, cells, scored = _leaf_f_test(result.leaf_sums, task, seed)
    return DiagnosticReport(
        covariate_shift_pvalue=float(p_shift),
        outcome_heterogeneity_pvalue=p_outcome,
        feature_pvalues=tuple(feature_p),
        outcome_f=f,
        outcome_df=df,
        n_cells=cells,
        n_scored=scored,
        alpha=alpha,
        rounds=result.ledger.rounds,
        megabytes=result.ledger.total_megabytes,
        n_features=result.n_features,
    )


def _check_sizes(max_depth: Any, min_samples_leaf: Any, alpha: Any) -> None:
    """The tree's sizes and the test level, named as the estimators' parameters are.

    ``max_depth=2.5`` grew a tree of depth 3, ``min_samples_leaf=0`` and ``alpha=5`` ran,
    without a word. NumPy's integers are ints (scikit-learn's ``Integral``); bools are not.
    """
    if max_depth is not None and not is_int_in(max_depth, 1, numpy=True):
        raise ValueError(
            f"The 'max_depth' parameter of diagnose must be None or an int >= 1. Got "
            f"{max_depth!r} instead."
        )
    if not is_int_in(min_samples_leaf, 1, numpy=True):
        raise ValueError(
            f"The 'min_samples_leaf' parameter of diagnose must be an int >= 1. Got "
            f"{min_samples_leaf!r} instead."
        )
    number = isinstance(alpha, (int, float, np.number)) and not isinstance(alpha, bool)
    if not (number and 0.0 < float(alpha) < 1.0):
        raise ValueError(f"The 'alpha' parameter of diagnose must be in (0, 1). Got {alpha!r}.")


# --------------------------------------------------------------------------- covariate shift
def _simes(pvalues: list[float]) -> float:
    """Simes' combination of p-values (valid for independent or positively dependent tests).

    Less conservative than Bonferroni, which rejected 2 % of homogeneous draws at 5 %.
    """
    if not pvalues:
        return float("nan")
    p = np.sort(np.asarray(pvalues))
    return float(min(1.0, (p.size * p / np.arange(1, p.size + 1)).min()))


def _root_tables(
    seen: dict[str, tuple[dict[str, Message], dict[str, Message]]], task: str
) -> list[NDArray[np.float64]]:
    """Per sampled feature of the root: the clients x bins table of in-bag row counts."""
    if ROUND_B not in seen:
        return []
    requests_a, replies_a = seen[ROUND_A]
    requests_b, replies_b = seen[ROUND_B]
    request_a = next(iter(requests_a.values()))
    pair_off = np.asarray(request_a.arrays["pair_off"], dtype=np.int64)
    n_pairs = int(pair_off[1] - pair_off[0])  # the first tree's root: slot 0
    per_feature: list[list[NDArray[np.float64]]] = [[] for _ in range(n_pairs)]
    # With sample weights only the row count is an integer column (it read every class
    # count as one: "left_counts ... has shape (54, 1); expected (54, 5)").
    weighted = any(rep.header.get("weighted", False) for rep in seen[HANDSHAKE][1].values())
    for name in sorted(replies_b):
        summary = np.asarray(replies_a[name].arrays["summary"])
        s = summary.shape[1]
        n_count = count_columns(0 if task == "regression" else s - STAT_TASK, weighted)
        cand_off = np.asarray(requests_b[name].arrays["cand_off"], dtype=np.int64)
        n_cand = int(cand_off[-1])
        pos, counts, _ = unpack_increments(replies_b[name], "left", n_cand, s, n_count, name)
        inc = np.zeros(n_cand)
        inc[pos] = counts[:, STAT_ROWS]
        root_rows = float(summary[0, STAT_ROWS])
        for p in range(n_pairs):
            lo, hi = int(cand_off[p]), int(cand_off[p + 1])
            if hi == lo:
                continue
            bins = inc[lo:hi]
            per_feature[p].append(np.append(bins, root_rows - bins.sum()))
    return [np.vstack(rows) for rows in per_feature if len(rows) > 1]


def _merge_bins(table: NDArray[np.float64]) -> NDArray[np.float64]:
    """Merge adjacent bins until every client's expected count is at least MIN_EXPECTED."""
    n_k = table.sum(axis=1)
    need = MIN_EXPECTED * table.sum() / n_k.min()  # pooled rows a bin needs
    cols: list[NDArray[np.float64]] = []
    acc = np.zeros(table.shape[0])
    for j in range(table.shape[1]):
        acc = acc + table[:, j]
        if acc.sum() >= need:
            cols.append(acc)
            acc = np.zeros(table.shape[0])
    if acc.sum() > 0:
        if cols:
            cols[-1] = cols[-1] + acc
        else:
            cols.append(acc)
    return np.column_stack(cols)


def _root_chi_square(
    seen: dict[str, tuple[dict[str, Message], dict[str, Message]]], task: str
) -> list[float]:
    """Chi-square p-value of homogeneity across clients, per feature of the root."""
    out = []
    for table in _root_tables(seen, task):
        table = table[table.sum(axis=1) > 0]
        merged = _merge_bins(table) if table.shape[0] > 1 else table
        if merged.shape[0] < 2 or merged.shape[1] < 2:
            out.append(float("nan"))
            continue
        out.append(float(stats.chi2_contingency(merged, correction=False).pvalue))
    return out


# --------------------------------------------------------------------------- outcome
def _leaf_f_test(
    leaf_sums: dict[str, NDArray[np.float64]], task: str, seed: int = 0
) -> tuple[float, float, tuple[int, int], int, int]:
    """F test of client-within-leaf effects on out-of-bag rows (see the module docstring).

    Returns the p-value, the F statistic, its degrees of freedom, the shared leaves and
    the rows scored.
    """
    if not leaf_sums:
        return float("nan"), float("nan"), (0, 0), 0, 0
    sums = np.stack([leaf_sums[name] for name in sorted(leaf_sums)])  # client, leaf, col
    n = sums[:, :, 0]
    shared = int(((n > 0).sum(axis=0) >= 2).sum())
    if task == "regression":
        p, f, df = _f_within_leaves(n, sums[:, :, 1], sums[:, :, 2])
    else:
        p, f, df = _leaf_permutation_tests(np.transpose(sums[:, :, 1:], (1, 0, 2)), seed)
    return p, f, df, shared, int(n.sum())


def _f_within_leaves(
    n: NDArray[np.float64], s: NDArray[np.float64], q: NDArray[np.float64]
) -> tuple[float, float, tuple[int, int]]:
    """Client effect within leaves from cell counts, sums and sums of squares (client x leaf).

    Each leaf shared by two or more clients (with rows to spare) gives a one-way F test of
    its client means, exact under normal errors of one variance *within* the leaf; the
    leaves' p-values are independent given the tree (out-of-bag rows) and are combined by
    Fisher's method, so leaves of different variances do not bias the test (a pooled
    two-way F test rejected 9-10 % of homogeneous draws at 5 %). Returns the combined
    p-value, the pooled two-way F statistic and its degrees of freedom (reported).
    """
    cell = n > 0
    n_l = n.sum(axis=0)
    k_l = cell.sum(axis=0)
    safe = np.where(cell, n, 1.0)
    ss_cells = (np.where(cell, s * s / safe, 0.0)).sum(axis=0)
    ss_leaf = np.where(n_l > 0, s.sum(axis=0) ** 2 / np.where(n_l > 0, n_l, 1.0), 0.0)
    between = np.maximum(ss_cells - ss_leaf, 0.0)
    within = np.maximum(q.sum(axis=0) - ss_cells, 0.0)
    df1 = k_l - 1
    df2 = n_l - k_l
    used = (df1 >= 1) & (df2 >= 1) & (within > 0)
    if not used.any():
        return float("nan"), float("nan"), (0, 0)
    f_l = (between[used] / df1[used]) / (within[used] / df2[used])
    p_l = np.clip(stats.f.sf(f_l, df1[used], df2[used]), 1e-300, 1.0)
    p = float(stats.chi2.sf(-2.0 * np.log(p_l).sum(), 2 * int(used.sum())))
    d1, d2 = int(df1[used].sum()), int(df2[used].sum())
    f = float((between[used].sum() / d1) / (within[used].sum() / d2))
    return p, f, (d1, d2)


#: Permutations per leaf of the classification test.
N_PERMUTATIONS = 199


def _leaf_permutation_tests(
    tables: NDArray[np.float64], seed: int
) -> tuple[float, float, tuple[int, int]]:
    """Per leaf (client x class table), a permutation test of association; Fisher-combined.

    Under H0 the classes of a leaf's rows are exchangeable across its clients given the
    margins, so permuting them gives the statistic's exact null distribution; ties are
    broken at random (a randomized p-value, exactly uniform), so the leaves' p-values are
    independent uniforms and Fisher's combination is exact. (The per-leaf F test of class
    indicators is discrete on nearly pure leaves and rejected 0 of 200 homogeneous draws;
    the Cochran-Mantel-Haenszel test pools small biases across leaves and rejected 16-26 %
    of covariate-shifted null draws.) Returns the p-value, Fisher's statistic and
    (leaves tested, 0).
    """
    rng = np.random.default_rng([seed, 7])
    logs = []
    for table in tables:
        table = np.rint(table).astype(np.int64)
        table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
        if table.shape[0] < 2 or table.shape[1] < 2:
            continue
        client = np.repeat(np.arange(table.shape[0]), table.sum(axis=1))
        label = np.concatenate([np.repeat(np.arange(table.shape[1]), row) for row in table])
        perm = rng.permuted(np.tile(label, (N_PERMUTATIONS, 1)), axis=1)
        sims = np.zeros((N_PERMUTATIONS, table.size), dtype=np.int64)
        cells = client[None, :] * table.shape[1] + perm
        for i in range(N_PERMUTATIONS):
            sims[i] = np.bincount(cells[i], minlength=table.size)
        obs = _pearson(table.ravel()[None, :], table.shape)[0]
        null = _pearson(sims, table.shape)
        above = int((null > obs + 1e-9).sum())
        ties = int((np.abs(null - obs) <= 1e-9).sum())
        logs.append(np.log((above + rng.uniform() * (ties + 1)) / (N_PERMUTATIONS + 1)))
    if not logs:
        return float("nan"), float("nan"), (0, 0)
    stat = -2.0 * float(np.sum(logs))
    return float(stats.chi2.sf(stat, 2 * len(logs))), stat, (len(logs), 0)


def _pearson(cells: NDArray[np.int64], shape: tuple[int, int]) -> NDArray[np.float64]:
    """Pearson's chi-square statistic of each row of flattened tables (same margins)."""
    t = cells.reshape(-1, *shape).astype(float)
    total = t[0].sum()
    expected = t[0].sum(axis=1)[:, None] * t[0].sum(axis=0)[None, :] / total
    return np.asarray(((t - expected) ** 2 / expected).sum(axis=(1, 2)))
