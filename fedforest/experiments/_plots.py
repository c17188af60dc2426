"""Figures in the paper's style: box plots per method, lines over a swept variable."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patheffects import withStroke

from ._methods import METHOD_ORDER

if TYPE_CHECKING:
    from ._runner import Experiment

#: One colour per method, stable across figures. Black is no method's: it marks what
#: belongs to none (the medians, the legend's cross for the printed values).
_COLORS = dict(zip(METHOD_ORDER, [f"C{i}" for i in range(10)] + ["olive", "teal"], strict=True))
_NEUTRAL = "black"
#: A printed value's cross; the white rim keeps it readable on its method's own box or line.
_CROSS: dict[str, Any] = {
    "marker": "x",
    "ms": 10,
    "mew": 2.5,
    "ls": "",
    "path_effects": [withStroke(linewidth=4.5, foreground="white")],
}
#: A method whose median is this many times the best median is left out of a box plot
#: (the paper omits local ensembling under covariate shift for the same reason).
_OMIT_FACTOR = 10.0


def _label(metric: str) -> str:
    """The score axis's label, saying which way is better (as the printed table does)."""
    return {
        "mse": "test MSE (lower is better)",
        "accuracy": "test accuracy (higher is better)",
        "r2": "test R² (higher is better)",
    }.get(metric, metric)


#: The line plots' x axes, named as the titles name them (the axis read "outlier_fraction").
_X_LABELS = {
    "K": "number of clients K",
    "shift": "shift scale gamma of x_1",
    "outlier_fraction": "fraction of training rows with features x 1000",
}


def _reps(n: int) -> str:
    return f"{n} repetition{'' if n == 1 else 's'}"


def _methods(frame: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(frame["method"]))
    return [m for m in METHOD_ORDER if m in present] + [m for m in present if m not in METHOD_ORDER]


def _footnote(fig: Figure, lines: list[str]) -> None:
    if lines:  # supxlabel, unlike fig.text, gets room from the constrained layout
        fig.supxlabel("\n".join(lines), fontsize=7, ha="left", x=0.01)


def _unavailable(frame: pd.DataFrame) -> list[str]:
    bad = frame.groupby("method", sort=False)["score"].apply(lambda s: bool(s.isna().all()))
    return [m for m, none in bad.items() if none]


def _paper_marks(
    ax: Any, paper: dict[str, dict[str, float]], xs: dict[str, float], source: str = "paper"
) -> list[str]:
    """The printed values of ``source`` (the paper, or FLamby) as crosses in each method's colour.

    The legend's cross is black, so that it names every cross (in one method's colour it
    read as that method's). Values far outside the plotted range are not drawn (they would
    flatten the plot); the returned footnote lines list them.
    """
    lo, hi = ax.get_ylim()
    span = hi - lo
    drawn, notes = False, []
    for method, values in paper.items():
        for setting, value in values.items():
            x = xs.get(method) if setting == "" else float(setting)
            if x is None or (setting != "" and method not in xs):
                continue
            if not lo - 2 * span <= value <= hi + 2 * span:
                notes.append(f"{source}: {method} {value:g} (off scale)")
                continue
            color = _COLORS.get(method, "grey")
            ax.plot([x], [value], **_CROSS, color=color, label="_nolegend_")
            drawn = True
    if drawn:  # the legend's entry: no data, so the axis limits are those of the crosses
        label = f"× {source}'s value"
        ax.plot([], [], **_CROSS, color=_NEUTRAL, label=label)
    return notes


def _box_axis(
    ax: Any,
    frame: pd.DataFrame,
    metric: str,
    paper: dict[str, dict[str, float]] | None = None,
    source: str = "paper",
) -> list[str]:
    """Box plot of the score per method on ``ax``; returns footnote lines."""
    notes = [f"not available yet: {m}" for m in _unavailable(frame)]
    data = {
        m: frame.loc[frame["method"] == m, "score"].dropna().to_numpy() for m in _methods(frame)
    }
    data = {m: v for m, v in data.items() if v.size}
    if metric == "mse" and data:
        best = min(float(np.median(v)) for v in data.values())
        for m in [m for m, v in data.items() if np.median(v) > _OMIT_FACTOR * max(best, 1e-12)]:
            notes.append(f"omitted (off scale): {m}, median {np.median(data.pop(m)):.1f}")
    if data:
        # The default median is orange (C1): unreadable on C1's box, Centralized RF + H.
        median = {"color": _NEUTRAL, "linewidth": 1.5}
        parts = ax.boxplot(list(data.values()), patch_artist=True, widths=0.6, medianprops=median)
        for patch, m in zip(parts["boxes"], data, strict=True):
            patch.set_facecolor(_COLORS.get(m, "grey"))
            patch.set_alpha(0.7)
        ax.set_xticks(range(1, len(data) + 1), list(data), rotation=35, ha="right", fontsize=8)
        if paper:
            notes += _paper_marks(ax, paper, {m: i + 1.0 for i, m in enumerate(data)}, source)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8, loc="best")
    ax.set_ylabel(_label(metric))
    ax.grid(axis="y", alpha=0.3)
    return notes


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def box_plot(exp: Experiment, frame: pd.DataFrame, path: Path) -> Path:
    """One box per method (the paper's Figure 2 panels)."""
    main = frame[frame["group"] == "all"] if "group" in frame else frame
    fig = _new_figure(8.0, 5.0)
    ax = fig.subplots()
    notes = _box_axis(ax, main, exp.metric, exp.paper, exp.reference)
    for method, values in exp.paper.items():
        if any(n.startswith(f"omitted (off scale): {method},") for n in notes):
            notes.append(f"{exp.reference}: {method} {values.get('', float('nan')):g}")
    n = main["rep"].nunique() if "rep" in main else 0
    ax.set_title(textwrap.fill(f"{exp.title} ({_reps(n)})", 95), fontsize=10)
    _footnote(fig, notes)
    fig.savefig(path, format="png", dpi=110)
    return path


def line_plot(exp: Experiment, frame: pd.DataFrame, path: Path) -> Path:
    """Mean score ± one standard deviation per method over the swept variable."""
    assert exp.x is not None
    fig = _new_figure(8.0, 5.0)
    ax = fig.subplots()
    stats = frame.groupby(["method", exp.x], sort=False)["score"].agg(["mean", "std"])
    for m in _methods(frame):
        if m in _unavailable(frame):
            continue
        s = stats.loc[m].sort_index()
        ax.errorbar(
            s.index.to_numpy(dtype=float),
            s["mean"],
            yerr=s["std"].fillna(0.0),
            marker="o",
            ms=4,
            capsize=3,
            label=m,
            color=_COLORS.get(m, "grey"),
        )
    paper_notes = _paper_marks(ax, exp.paper, {m: 0.0 for m in _methods(frame)}, exp.reference)
    if exp.x == "K":
        ax.set_xscale("log")
    if exp.metric == "mse" and (stats["mean"].max() > 20 * stats["mean"].min() > 0):
        ax.set_yscale("log")
    ax.set_xlabel(_X_LABELS.get(exp.x, exp.x))
    ax.set_ylabel(_label(exp.metric))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    n = frame["rep"].nunique()
    ax.set_title(textwrap.fill(f"{exp.title} (mean ± 1 sd over {_reps(n)})", 95), fontsize=10)
    _footnote(fig, [f"not available yet: {m}" for m in _unavailable(frame)] + paper_notes)
    fig.savefig(path, format="png", dpi=110)
    return path


def panel_plot(exp: Experiment, frame: pd.DataFrame, path: Path) -> Path:
    """One box-plot panel per dataset (Appendix B)."""
    assert exp.x is not None
    names = list(dict.fromkeys(frame[exp.x]))
    cols = 4
    rows = int(np.ceil(len(names) / cols))
    fig = _new_figure(4.0 * cols, 3.6 * rows)
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    notes: list[str] = []
    for ax, name in zip(axes, names, strict=False):
        part = frame[frame[exp.x] == name]
        metric = str(part["metric"].iloc[0])
        for note in _box_axis(ax, part, metric):
            notes.append(note if note.startswith("not available") else f"{name}: {note}")
        ax.set_title(name, fontsize=9)
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    fig.suptitle(f"{exp.title} ({_reps(frame['rep'].nunique())})", fontsize=11)
    _footnote(fig, sorted(set(notes)))
    fig.savefig(path, format="png", dpi=100)
    return path
