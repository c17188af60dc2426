"""Statistics and figures of the swarm experiment: eq. 25 heatmaps, Friedman/Nemenyi, CD diagram.

The Nemenyi critical difference follows Demšar (2006):
``CD = q_alpha * sqrt(k (k + 1) / (6 N))`` with ``q_alpha`` the studentized range
quantile for ``k`` methods and infinite degrees of freedom divided by ``sqrt(2)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

__all__ = [
    "FriedmanResult",
    "friedman_nemenyi",
    "nemenyi_cd",
    "plot_cd_diagram",
    "plot_heatmaps",
    "relative_improvement",
]


@dataclass(frozen=True)
class FriedmanResult:
    """Friedman test over blocks with the Nemenyi critical difference.

    Attributes
    ----------
    avg_ranks : Series
        Average rank of each method (1 = best), sorted ascending.
    statistic, p_value : float
        Friedman chi-square and its p-value.
    cd : float
        Nemenyi critical difference at ``alpha``.
    n_blocks : int
    alpha : float
    """

    avg_ranks: pd.Series
    statistic: float
    p_value: float
    cd: float
    n_blocks: int
    alpha: float


def nemenyi_cd(k: int, n_blocks: int, alpha: float = 0.05) -> float:
    """Nemenyi critical difference of average ranks for ``k`` methods over ``n_blocks``."""
    from scipy.stats import studentized_range

    q = float(studentized_range.ppf(1.0 - alpha, k, np.inf)) / np.sqrt(2.0)
    return q * float(np.sqrt(k * (k + 1) / (6.0 * n_blocks)))


def friedman_nemenyi(scores: pd.DataFrame, alpha: float = 0.05) -> FriedmanResult:
    """Rank methods per block (higher score = better, ties averaged) and test them.

    Parameters
    ----------
    scores : DataFrame, shape (n_blocks, n_methods)
        One row per block (dataset x scenario), one column per method; rows with a NaN
        are dropped.
    alpha : float, default=0.05
    """
    from scipy.stats import friedmanchisquare, rankdata

    clean = scores.dropna(axis=0, how="any")
    if clean.shape[0] < 2 or clean.shape[1] < 3:
        raise ValueError(
            f"the Friedman test needs at least 2 blocks and 3 methods, got {clean.shape}"
        )
    ranks = rankdata(-clean.to_numpy(), axis=1)  # rank 1 = best score
    avg = pd.Series(ranks.mean(axis=0), index=clean.columns).sort_values()
    stat, p = friedmanchisquare(*[clean[c].to_numpy() for c in clean.columns])
    cd = nemenyi_cd(clean.shape[1], clean.shape[0], alpha)
    return FriedmanResult(avg, float(stat), float(p), cd, int(clean.shape[0]), alpha)


def relative_improvement(
    summary: pd.DataFrame, metric: str, baseline: str = "intersection"
) -> pd.DataFrame:
    """Eq. 25: ``(score_m - score_Int) / score_Int`` per (dataset, peers, jaccard, strategy).

    ``summary`` has columns dataset, peers, jaccard, strategy and ``metric``.
    """
    keys = ["dataset", "peers", "jaccard"]
    base = summary[summary.strategy == baseline].set_index(keys)[metric].rename("base")
    out = summary.join(base, on=keys)
    out["gain"] = (out[metric] - out["base"]) / out["base"]
    return out[out.strategy != baseline][[*keys, "strategy", "gain"]]


def _cliques(ranks: NDArray[np.float64], cd: float) -> list[tuple[int, int]]:
    """Maximal runs [i, j] of sorted ranks whose spread is below the critical difference."""
    out: list[tuple[int, int]] = []
    for i in range(ranks.shape[0]):
        j = int(np.searchsorted(ranks, ranks[i] + cd, side="left")) - 1
        if j > i and not any(a <= i and j <= b for a, b in out):
            out.append((i, j))
    return out


def plot_cd_diagram(result: FriedmanResult, path: Path, title: str = "") -> Path:
    """Demšar-style critical-difference diagram (best method on the left)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, ranks = list(result.avg_ranks.index), result.avg_ranks.to_numpy()
    k = len(names)
    lo, hi = 1, k
    half = (k + 1) // 2
    fig, ax = plt.subplots(figsize=(8, 1.6 + 0.32 * half))
    ax.set_xlim(lo - 0.6, hi + 0.6)
    ax.set_ylim(-(half + 1.5), 1.6)
    ax.axis("off")
    ax.hlines(0, lo, hi, color="black", lw=1)
    for r in range(lo, hi + 1):
        ax.vlines(r, 0, 0.15, color="black", lw=1)
        ax.text(r, 0.3, str(r), ha="center", va="bottom", fontsize=9)
    for i, (name, rank) in enumerate(zip(names, ranks, strict=True)):
        left = i < half
        level = -(i + 1) if left else -(k - i)
        end = lo - 0.45 if left else hi + 0.45
        ax.plot([rank, rank, end], [0, level, level], color="black", lw=0.8)
        ax.text(end, level + 0.08, f"{name} ({rank:.2f})", ha="left" if left else "right",
                va="bottom", fontsize=9)  # fmt: skip
    for n, (i, j) in enumerate(_cliques(ranks, result.cd)):
        y = -0.35 - 0.22 * n
        ax.hlines(y, ranks[i] - 0.03, ranks[j] + 0.03, color="tab:red", lw=3)
    ax.hlines(1.25, lo, lo + result.cd, color="black", lw=1.5)
    ax.text(lo + result.cd / 2, 1.32, f"CD = {result.cd:.2f}", ha="center", va="bottom", fontsize=9)
    ax.set_title(
        title or f"Friedman p = {result.p_value:.2g}, {result.n_blocks} blocks", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def plot_heatmaps(gains: pd.DataFrame, dataset: str, metric: str, path: Path) -> Path:
    """Relative improvement over Intersection (eq. 25), one panel per number of peers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = gains[gains.dataset == dataset]
    peers = sorted(data.peers.unique())
    strategies = list(dict.fromkeys(data.strategy))
    jaccards = sorted(data.jaccard.unique())
    fig, axes = plt.subplots(
        1, len(peers), figsize=(2.9 * len(peers) + 1.6, 3.4), squeeze=False, sharey=True
    )
    fig.subplots_adjust(wspace=0.06)
    vmax = max(float(np.nanmax(np.abs(data.gain.to_numpy()))) * 100, 1.0)
    image = None
    for ax, n in zip(axes[0], peers, strict=True):
        grid = (
            data[data.peers == n]
            .pivot(index="strategy", columns="jaccard", values="gain")
            .reindex(index=strategies, columns=jaccards)
            * 100
        )
        image = ax.imshow(grid.to_numpy(), cmap="RdBu", vmin=-vmax, vmax=vmax, aspect="auto")
        for (r, c), v in np.ndenumerate(grid.to_numpy()):
            if np.isfinite(v):
                ax.text(c, r, f"{v:.0f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(jaccards)), [f"{j:.1f}" for j in jaccards], fontsize=7)
        ax.set_yticks(range(len(strategies)), strategies, fontsize=8)
        ax.tick_params(axis="y", labelleft=ax is axes[0][0])
        ax.set_xlabel("target Jaccard")
        ax.set_title(f"{n} peers", fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), label="% over Intersection", shrink=0.8, pad=0.02)
    fig.suptitle(f"{dataset}: relative {metric.upper()} improvement over Intersection (eq. 25)",
                 fontsize=10)  # fmt: skip
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path
