"""The ``fedforest simulate`` experiment: fedforest against centralized and local forests.

Kept out of :mod:`fedforest.cli` so it can be called and tested without argparse.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numba.core import event as numba_event
from numpy.typing import NDArray
from sklearn.ensemble import RandomForestRegressor
from tqdm import tqdm

from fedforest._progress import ProgressBar
from fedforest.datasets import FederatedSplit, make_paper_synthetic
from fedforest.federated.precompile import Ahead
from fedforest.federated.privacy.rules import default_min_rows
from fedforest.federated.server.secure_setup import check_config
from fedforest.forest import FedForestRegressor

FEDFOREST = "fedforest"
CENTRALIZED = "centralized RF"
LOCAL = "local learning"

#: Hyperparameters fixed by the paper's Section 5 (the CLI exposes the others).
MIN_SAMPLES_LEAF = 5
MAX_FEATURES = 1 / 3


@dataclass(frozen=True)
class SimulateConfig:
    """Parameters of one ``fedforest simulate`` run (the CLI's options)."""

    scenario: str = "covariate-shift"
    clients: int = 10
    rows_per_client: int = 200
    features: int = 20
    trees: int = 50
    max_depth: int = 8
    seed: int = 0
    n_bins: int = 32
    n_jobs: int | None = None
    #: fedforest's privacy level, its budget under ``"dp"``, and its candidates' binning.
    privacy: str = "secure"
    epsilon: float | None = None
    binning: str = "quantile"
    #: Under ``"dp"``: the colluding clients the noise holds against.
    dp_colluders: int = 0


@dataclass(frozen=True)
class MethodResult:
    """Score, cost and communication of one method; ``None`` when not federated."""

    name: str
    mse: float
    fit_seconds: float
    rounds: int | None = None
    mb_sent: float | None = None
    #: Under ``privacy="dp"``: the fit's guarantee, ``(epsilon, delta)``.
    guarantee: tuple[float, float] | None = None


@dataclass(frozen=True, eq=False)
class SimulateResult:
    """Everything ``fedforest simulate`` reports and plots.

    ``predictions`` maps a method name to its predictions on ``y_test``'s rows (every
    method; local learning predicts each row with its own client's forest).
    """

    config: SimulateConfig
    methods: tuple[MethodResult, ...]
    y_test: NDArray[np.float64]
    predictions: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    #: Seconds the untimed warm-up spent compiling kernels (0.0 when they were cached).
    compile_seconds: float = 0.0

    def mse(self, name: str) -> float:
        """Test MSE of the method called ``name``."""
        return next(m.mse for m in self.methods if m.name == name)

    @property
    def relative_gap(self) -> float:
        """Relative test-MSE gap of fedforest over centralized RF, in percent."""
        central = self.mse(CENTRALIZED)
        return 100.0 * (self.mse(FEDFOREST) - central) / central


def run_simulation(
    config: SimulateConfig,
    *,
    progress: bool = True,
    announce: Callable[[str], None] | None = None,
) -> SimulateResult:
    """Generate the scenario's data and train and score the three methods.

    Before fedforest's timed fit, an untimed warm-up (:func:`warm_up`'s two halves) fits
    a tiny forest, so that the fit time never includes the compilation of the kernels
    (first run after install only). On such a run the scikit-learn baselines are fitted
    between the halves, while the second process of
    :class:`~fedforest.federated.precompile.Ahead` still compiles (they need none of its
    kernels); every method's result is the same in any order.

    Parameters
    ----------
    config : SimulateConfig
    progress : bool, default=True
        Show a tqdm progress bar over the steps on stderr.
    announce : callable or None, default=None
        Called with :data:`COMPILING` when the warm-up starts compiling; None writes it to
        stderr when ``progress`` is on.

    Returns
    -------
    result : SimulateResult
    """
    check_fedforest(config)  # before the warm-up and the baselines spend any time
    baselines: list[tuple[str, Callable[[FederatedSplit, SimulateConfig], _Fitted]]] = [
        (CENTRALIZED, _fit_centralized),
        (LOCAL, _fit_local),
    ]
    bar = ProgressBar(
        total=len(baselines) + 3, desc="simulate", file=sys.stderr, disable=not progress
    )
    with bar:
        if announce is None and progress:
            announce = _write_to_stderr
        bar.set_postfix_str("kernels")
        warming = _WarmUp(config, announce)
        warming.compile_here()
        bar.set_postfix_str("data")
        data = scenario_data(config)
        bar.update()
        fitted: dict[str, _Fitted] = {}
        for name, fit in baselines:
            bar.set_postfix_str(name)
            fitted[name] = fit(data, config)
            bar.update()
        bar.set_postfix_str("kernels")
        compile_seconds = warming.finish()
        bar.update()
        bar.set_postfix_str(FEDFOREST)
        fitted[FEDFOREST] = _fit_fedforest(data, config)
        bar.update()
    methods, predictions = [], {}
    for name in (FEDFOREST, CENTRALIZED, LOCAL):
        method, y_pred = fitted[name]
        methods.append(method)
        if y_pred is not None:
            predictions[name] = y_pred
    return SimulateResult(config, tuple(methods), data.y_test, predictions, compile_seconds)


def scenario_data(config: SimulateConfig) -> FederatedSplit:
    """The run's federation: the paper's synthetic scenario with ``config``'s sizes and seed."""
    return make_paper_synthetic(
        config.scenario,
        n_clients=config.clients,
        n_per_client=config.rows_per_client,
        n_features=config.features,
        random_state=config.seed,
    )


#: Announced when the warm-up compiles (a fresh numba cache: the first run after install).
COMPILING = "compiling kernels (first run only)…"


def warm_up(
    config: SimulateConfig,
    announce: Callable[[str], None] | None = None,
    *,
    two_processes: bool = True,
) -> float:
    """Fit and predict a tiny forest with ``config``'s settings, untimed.

    The first fit after install compiles fedforest's numba kernels (``cache=True``: later
    runs load them from disk). The tiny forest takes the same code paths, so the timed
    fits compile nothing. Before it, the default fit's kernels are compiled in two
    processes at once (:class:`~fedforest.federated.precompile.Ahead`; not with
    ``two_processes=False``). ``announce`` is called with :data:`COMPILING` once, when
    the first kernel starts compiling (or the second process was started early, by
    :func:`~fedforest.federated.precompile.start_early`).

    Returns
    -------
    seconds : float
        The warm-up's duration if it compiled anything, else 0.0.
    """
    warming = _WarmUp(config, announce, two_processes=two_processes)
    warming.compile_here()
    return warming.finish()


class _WarmUp:
    """:func:`warm_up` in two halves: this process's kernels, then the rest.

    Between :meth:`compile_here` and :meth:`finish` the caller may run anything that
    needs no fedforest kernel; the seconds returned count the two halves only.
    """

    def __init__(
        self,
        config: SimulateConfig,
        announce: Callable[[str], None] | None,
        *,
        two_processes: bool = True,
    ) -> None:
        self.config = config
        self.watch = _CompileWatch(announce)
        self.ahead = Ahead() if two_processes else None
        self.seconds = 0.0

    def compile_here(self) -> None:
        """Compile this process's share of the kernels (none without two processes)."""
        start = time.perf_counter()
        if self.ahead is not None:
            if self.ahead.started_early:
                self.watch.note()
            with numba_event.install_listener("numba:compile", self.watch):
                self.ahead.compile_here()
        self.seconds += time.perf_counter() - start

    def finish(self) -> float:
        """Wait for the second process, fit and predict the tiny forest; the seconds.

        0.0 if nothing was compiled (a cached run), else the time of both halves.
        """
        start = time.perf_counter()
        small = replace(
            self.config,
            clients=min(self.config.clients, 3),
            trees=2,
            max_depth=min(self.config.max_depth, 4),
        )
        with numba_event.install_listener("numba:compile", self.watch):
            if self.ahead is not None:
                self.ahead.wait()
            tiny = make_paper_synthetic(
                small.scenario,
                n_clients=small.clients,
                n_per_client=100,
                n_features=small.features,
                random_state=small.seed,
            )
            model = FedForestRegressor(**_fedforest_params(small))
            model.fit(tiny.X_train, tiny.y_train, client_ids=tiny.h_train)
            model.predict(tiny.X_test)
        self.seconds += time.perf_counter() - start
        return self.seconds if self.watch.compiled else 0.0


class _CompileWatch(numba_event.Listener):
    """Notes whether numba compiled anything; announces the first compilation."""

    def __init__(self, announce: Callable[[str], None] | None) -> None:
        self.announce = announce
        self.compiled = False

    def on_start(self, event: numba_event.Event) -> None:
        self.note()

    def note(self) -> None:
        """Something compiles (here, or in the second process started early)."""
        if not self.compiled:
            self.compiled = True
            if self.announce is not None:
                self.announce(COMPILING)

    def on_end(self, event: numba_event.Event) -> None:
        pass


def _write_to_stderr(text: str) -> None:
    tqdm.write(text, file=sys.stderr)


_Fitted = tuple[MethodResult, NDArray[np.float64] | None]


def _forest_params(config: SimulateConfig) -> dict[str, Any]:
    """Hyperparameters shared by every forest of the comparison."""
    return {
        "n_estimators": config.trees,
        "max_depth": config.max_depth,
        "min_samples_leaf": MIN_SAMPLES_LEAF,
        "max_features": MAX_FEATURES,
        "bootstrap": True,
        "random_state": config.seed,
        "n_jobs": config.n_jobs,
    }


def _fedforest_params(config: SimulateConfig) -> dict[str, Any]:
    """The settings of fedforest's estimator: :func:`_forest_params` and its own."""
    return {
        "n_bins": config.n_bins,
        "privacy": config.privacy,
        "epsilon": config.epsilon,
        "dp_colluders": config.dp_colluders,
        "binning": config.binning,
        **_forest_params(config),
    }


def check_fedforest(config: SimulateConfig) -> None:
    """Refuse fedforest's settings as its fit would (a ``ValueError``), before any work.

    E.g. ``privacy="dp"`` without ``epsilon``, or ``binning="global"`` under ``"secure"``.
    """
    model = FedForestRegressor(**_fedforest_params(config))
    model._check_settings()
    if config.privacy != "none":  # as the fit does
        check_config(model._config())


def _mse(y_true: NDArray[np.float64], y_pred: NDArray[np.float64]) -> float:
    return float(np.mean((np.asarray(y_true) - np.asarray(y_pred)) ** 2))


def _fit_fedforest(data: FederatedSplit, config: SimulateConfig) -> _Fitted:
    model = FedForestRegressor(**_fedforest_params(config))
    start = time.perf_counter()
    model.fit(data.X_train, data.y_train, client_ids=data.h_train)
    seconds = time.perf_counter() - start
    y_pred = np.asarray(model.predict(data.X_test), dtype=np.float64)
    ledger = model.communication_
    mb_sent = (ledger.upload_bytes + ledger.download_bytes) / 1e6
    report = getattr(model, "privacy_report_", None)
    guarantee = None if report is None else (report["epsilon_guarantee"], report["delta"])
    mse = _mse(data.y_test, y_pred)
    return MethodResult(FEDFOREST, mse, seconds, ledger.rounds, mb_sent, guarantee), y_pred


def _fit_centralized(data: FederatedSplit, config: SimulateConfig) -> _Fitted:
    model = RandomForestRegressor(**_forest_params(config))
    start = time.perf_counter()
    model.fit(data.X_train, data.y_train)
    seconds = time.perf_counter() - start
    y_pred = np.asarray(model.predict(data.X_test), dtype=np.float64)
    return MethodResult(CENTRALIZED, _mse(data.y_test, y_pred), seconds), y_pred


def _fit_local(data: FederatedSplit, config: SimulateConfig) -> _Fitted:
    """One forest per client on its own rows; each test row predicted by its client's forest.

    So local learning is scored on the same test rows as the other methods.
    """
    y_pred, seconds = np.empty_like(data.y_test, dtype=np.float64), 0.0
    for h in range(data.n_clients):
        train, test = data.h_train == h, data.h_test == h
        model = RandomForestRegressor(**_forest_params(config))
        start = time.perf_counter()
        model.fit(data.X_train[train], data.y_train[train])
        seconds += time.perf_counter() - start
        if test.any():
            y_pred[test] = model.predict(data.X_test[test])
    return MethodResult(LOCAL, _mse(data.y_test, y_pred), seconds), y_pred


def format_report(result: SimulateResult) -> str:
    """The comparison table and fedforest's relative gap to centralized RF."""
    c = result.config
    lines = [
        f"scenario {c.scenario}: {c.clients} clients x {c.rows_per_client} rows "
        f"(30% held out per client), {c.features} features, {c.trees} trees, "
        f"max depth {c.max_depth}, {c.n_bins} bins"
        + ("" if c.binning == "quantile" else f" ({c.binning})"),
        "",
        f"{'method':<16}{'test MSE':>10}{'fit s':>9}{'rounds':>8}{'MB sent':>10}",
    ]
    for m in result.methods:
        rounds = "-" if m.rounds is None else str(m.rounds)
        mb = "-" if m.mb_sent is None else f"{m.mb_sent:.3f}"
        lines.append(f"{m.name:<16}{m.mse:>10.4f}{m.fit_seconds:>9.2f}{rounds:>8}{mb:>10}")
    if result.compile_seconds:
        lines.append(
            f"(first run: kernels compiled in {result.compile_seconds:.1f} s, not in "
            "fedforest's fit s; cached for later runs)"
        )
    lines += [
        "",
        f"fedforest vs centralized RF: {result.relative_gap:+.1f} % test MSE",
        *_privacy_lines(result),
        "(every method is scored on the same test rows, 30% held out per client; local",
        " learning predicts each row with its own client's forest; lower MSE is better;",
        " MB sent: uploaded + downloaded, 1 MB = 10^6 bytes)",
    ]
    return "\n".join(lines)


def _privacy_lines(result: SimulateResult) -> list[str]:
    """What the server saw under the run's privacy level (docs/privacy.md)."""
    c = result.config
    if c.privacy == "none":
        return [
            '(fedforest: privacy="none", the paper\'s protocol: the server saw per-client',
            " sketches and statistics, from which it can rebuild training rows; docs/privacy.md)",
        ]
    rows = default_min_rows(MIN_SAMPLES_LEAF)
    if c.privacy == "secure":
        return [
            '(fedforest: privacy="secure", the default: the server saw only masked sums over',
            f" clients, none over fewer than {rows} rows; docs/privacy.md)",
        ]
    fed = next(m for m in result.methods if m.name == FEDFOREST)
    epsilon, delta = fed.guarantee if fed.guarantee is not None else (float("nan"), float("nan"))
    return [
        f'(fedforest: privacy="dp": masked sums over clients, none over fewer than {rows}',
        f" rows, with noise; the fit is ({epsilon:.3g}, {delta:.3g})-differentially private"
        f" for one row replaced, against the server and {c.dp_colluders} colluding clients;"
        " docs/privacy.md)",
    ]


def save_figure(result: SimulateResult, path: str | Path) -> Path:
    """Write the two-panel PNG: test MSE by method, predicted vs true on the test set."""
    out = Path(path)
    figure(result).savefig(out, format="png", dpi=120)
    return out


def figure(result: SimulateResult) -> Figure:
    """The figure :func:`save_figure` writes (every method scored on the same test rows)."""
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax_bar, ax_scatter = fig.subplots(1, 2)
    names = [m.name for m in result.methods]
    mses = [m.mse for m in result.methods]
    bars = ax_bar.bar(names, mses, color=["tab:blue", "tab:orange", "tab:gray"][: len(names)])
    ax_bar.bar_label(bars, fmt="%.3f")
    ax_bar.set_ylabel("test MSE (lower is better)")
    ax_bar.set_title(f"test MSE on the same {len(result.y_test)} test rows")
    _scatter_panel(ax_scatter, result)
    c = result.config
    title = f"fedforest simulate: {c.scenario}, {c.clients} clients"
    fed = next((m for m in result.methods if m.mb_sent is not None), None)
    if fed is not None:
        title += (
            f'; {fed.name} (privacy="{c.privacy}") communication: {fed.mb_sent:.2f} MB '
            f"in {fed.rounds} rounds"
        )
    fig.suptitle(title)
    return fig


def _scatter_panel(ax: Any, result: SimulateResult) -> None:
    # Different markers, because fedforest and centralized RF can coincide point for point.
    styles = {
        FEDFOREST: ("tab:blue", "o"),
        CENTRALIZED: ("tab:orange", "+"),
        LOCAL: ("tab:gray", "x"),
    }
    for name, y_pred in result.predictions.items():
        color, marker = styles.get(name, ("tab:gray", "."))
        ax.scatter(result.y_test, y_pred, s=14, alpha=0.6, label=name, c=color, marker=marker)
    low, high = float(np.min(result.y_test)), float(np.max(result.y_test))
    ax.plot([low, high], [low, high], color="black", linewidth=1, label="y = x")
    ax.set_xlabel("true y")
    ax.set_ylabel("predicted y")
    ax.set_title("test set: predicted vs true")
    ax.legend()


def reproduce_command(config: SimulateConfig, out: str | Path) -> str:
    """The ``fedforest simulate`` command line that reruns ``config``."""
    argv = [
        "fedforest", "simulate",
        "--scenario", config.scenario,
        "--clients", str(config.clients),
        "--rows-per-client", str(config.rows_per_client),
        "--features", str(config.features),
        "--trees", str(config.trees),
        "--max-depth", str(config.max_depth),
        "--seed", str(config.seed),
        "--n-bins", str(config.n_bins),
        "--out", str(out),
    ]  # fmt: skip
    if config.privacy != "secure":
        argv += ["--privacy", config.privacy]
    if config.epsilon is not None:
        argv += ["--epsilon", repr(float(config.epsilon))]
    if config.dp_colluders:
        argv += ["--dp-colluders", str(config.dp_colluders)]
    if config.binning != "quantile":
        argv += ["--binning", config.binning]
    if config.n_jobs is not None:
        argv += ["--n-jobs", str(config.n_jobs)]
    return shlex.join(argv)
