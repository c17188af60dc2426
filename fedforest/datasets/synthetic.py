"""The FedForest paper's synthetic generator (Section 5) and its Appendix F variants.

``K`` clients with Gaussian covariates whose means and spreads differ by client (covariate
shift) and outcomes with client-specific offsets (outcome shift), on top of a
piecewise-constant (tree-based) regression function :func:`paper_f`; the Appendix F
variants (:func:`make_shift_benchmark`, :func:`add_feature_outliers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedforest._common import X_DTYPE

__all__ = [
    "SETTINGS",
    "SHIFT_BENCHMARKS",
    "FederatedSplit",
    "ShiftBenchmark",
    "add_feature_outliers",
    "make_paper_synthetic",
    "make_shift_benchmark",
    "paper_f",
]

#: The paper's settings: covariate mean shift ``gamma``, covariate variance ``alpha``
#: and outcome offset ``delta`` (Section 5 for the first three, Appendix F.2 for
#: ``"both-shifts"``).
SETTINGS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {
        "homogeneous": MappingProxyType({"gamma": 0.0, "alpha": 1.0, "delta": 0.0}),
        "covariate-shift": MappingProxyType({"gamma": 3.0, "alpha": 0.5, "delta": 0.0}),
        "outcome-shift": MappingProxyType({"gamma": 0.0, "alpha": 1.0, "delta": 1.5}),
        "both-shifts": MappingProxyType({"gamma": 3.0, "alpha": 0.5, "delta": 1.5}),
    }
)

#: Variance of the outcome noise (the paper's ``eps ~ N(0, .5)``).
NOISE_VARIANCE = 0.5

#: Number of leading coordinates :func:`paper_f` reads (x_1 .. x_4).
_N_SIGNAL_FEATURES = 4


@dataclass(frozen=True, eq=False)
class FederatedSplit:
    """Train and test rows of a federated dataset, with the client of every row.

    Attributes
    ----------
    X_train : ndarray of float64, shape (n_train, n_features)
    y_train : ndarray of float64, shape (n_train,)
    h_train : ndarray of int64, shape (n_train,)
        Client id of each training row, in ``0 .. n_clients - 1``.
    X_test : ndarray of float64, shape (n_test, n_features)
    y_test : ndarray of float64, shape (n_test,)
    h_test : ndarray of int64, shape (n_test,)
        Client id of each test row. Every client contributes test rows, so the test
        set is a sample from the client mixture.
    setting : str
        Name of the setting the parameters came from (see :data:`SETTINGS`).
    n_clients : int
    gamma, alpha, delta : float
        The parameters actually used (after explicit overrides of the setting).
    """

    X_train: NDArray[np.float64]
    y_train: NDArray[np.float64]
    h_train: NDArray[np.int64]
    X_test: NDArray[np.float64]
    y_test: NDArray[np.float64]
    h_test: NDArray[np.int64]
    setting: str
    n_clients: int
    gamma: float
    alpha: float
    delta: float

    @property
    def params(self) -> dict[str, float]:
        """The generator parameters ``{"gamma": ..., "alpha": ..., "delta": ...}``."""
        return {"gamma": self.gamma, "alpha": self.alpha, "delta": self.delta}


def paper_f(X: ArrayLike) -> NDArray[np.float64]:
    """Tree-based regression function of the synthetic benchmark.

    The paper does not print its ``f``; this is ours. With 1-based coordinates
    (``x_1`` is ``X[:, 0]``) and scikit-learn's convention that ``x <= t`` goes left::

        x_1 <= 0 ?
        |-- yes: x_2 <= 0 ?
        |        |-- yes: x_3 <= -3 ?  -> yes: -0.5   no: -1.5
        |        `-- no:  0.0
        `-- no:  x_4 <= 0 ?
                 |-- yes: 0.0
                 `-- no:  x_3 <= 3 ?   -> yes: +1.5   no: +0.5

    The root split at ``x_1 = 0`` lies between the client supports under covariate
    shift (clients centred at -3 and +3), so a forest must split in the gap. The
    splits at 0 on ``x_2`` and ``x_4`` carry the signal for ``N(0, 1)`` covariates;
    the splits at -3 and +3 on ``x_3`` carry it inside the shifted clients
    (``N(+-3, 0.5)``). ``Var f`` is about 1.1 in the homogeneous setting and 1.25
    under covariate shift; ``E f = 0`` in both.

    Parameters
    ----------
    X : array-like of float, shape (n_samples, n_features)
        ``n_features >= 4``; coordinates beyond ``x_4`` are noise features.

    Returns
    -------
    f : ndarray of float64, shape (n_samples,)
    """
    X = np.asarray(X, dtype=X_DTYPE)
    if X.ndim != 2 or X.shape[1] < _N_SIGNAL_FEATURES:
        raise ValueError(
            f"paper_f needs X of shape (n_samples, n_features) with n_features >= "
            f"{_N_SIGNAL_FEATURES}; got shape {X.shape}."
        )
    x1, x2, x3, x4 = X[:, 0], X[:, 1], X[:, 2], X[:, 3]
    left = np.where(x2 <= 0.0, np.where(x3 <= -3.0, -0.5, -1.5), 0.0)
    right = np.where(x4 <= 0.0, 0.0, np.where(x3 <= 3.0, 1.5, 0.5))
    return np.where(x1 <= 0.0, left, right).astype(X_DTYPE)


def make_paper_synthetic(
    setting: str = "homogeneous",
    *,
    n_clients: int = 10,
    n_per_client: int = 200,
    n_features: int = 20,
    gamma: float | None = None,
    alpha: float | None = None,
    delta: float | None = None,
    test_size: float = 0.3,
    random_state: int | np.random.Generator | None = None,
    n_shifted: int | None = None,
) -> FederatedSplit:
    """Generate the paper's Section 5 synthetic federation.

    Client ``k = 1 .. K`` (client id ``h = k - 1``) draws ``n_per_client`` rows::

        X ~ N(mu_k, alpha * I_d),   mu_k = (-1)^k * gamma * (1, ..., 1)
        Y = paper_f(X) + delta_k + eps,   delta_k = (-1)^k * delta,   eps ~ N(0, 0.5)

    ``alpha`` and ``0.5`` are variances. So client id 0 (``k = 1``) is centred at
    ``-gamma`` with offset ``-delta``, client id 1 at ``+gamma`` with ``+delta``, and
    so on. A fraction ``test_size`` of each client's rows is held out, so the test set
    is stratified by client (a sample from the client mixture). Rows are ordered by
    client in both parts.

    Parameters
    ----------
    setting : {"homogeneous", "covariate-shift", "outcome-shift", "both-shifts"}
        Named parameters from :data:`SETTINGS`.
    n_clients : int, default=10
        Number of clients ``K``.
    n_per_client : int, default=200
        Rows per client before the train/test split.
    n_features : int, default=20
        Dimension ``d``; at least 4 (:func:`paper_f` reads ``x_1 .. x_4``).
    gamma, alpha, delta : float or None, default=None
        Override the setting's covariate mean shift, covariate variance and outcome
        offset.
    test_size : float, default=0.3
        Fraction of each client's rows held out for testing, in (0, 1).
    random_state : int, numpy Generator or None, default=None
        Seed; the same integer gives identical data.
    n_shifted : int or None, default=None
        Only the first ``n_shifted`` coordinates get the client mean ``mu_k`` and
        variance ``alpha``; the others are ``N(0, 1)`` for every client. None shifts all
        ``d`` coordinates (the paper's Section 5).

    Returns
    -------
    split : FederatedSplit
    """
    params = _resolve_params(setting, gamma=gamma, alpha=alpha, delta=delta)
    n_test = _check_sizes(n_clients, n_per_client, n_features, test_size)
    if n_shifted is not None and (int(n_shifted) != n_shifted or not 1 <= n_shifted):
        raise ValueError(
            f"The 'n_shifted' parameter must be None or an int >= 1. Got {n_shifted!r} instead."
        )
    rng = np.random.default_rng(random_state)
    parts = [
        _client_rows(rng, k, n_per_client, n_features, n_test, n_shifted=n_shifted, **params)
        for k in range(1, n_clients + 1)
    ]
    train, test = zip(*parts, strict=True)
    (X_train, y_train, h_train), (X_test, y_test, h_test) = _stack(train), _stack(test)
    return FederatedSplit(
        X_train=X_train,
        y_train=y_train,
        h_train=h_train,
        X_test=X_test,
        y_test=y_test,
        h_test=h_test,
        setting=setting,
        n_clients=n_clients,
        gamma=params["gamma"],
        alpha=params["alpha"],
        delta=params["delta"],
    )


def _resolve_params(
    setting: str, *, gamma: float | None, alpha: float | None, delta: float | None
) -> dict[str, float]:
    if setting not in SETTINGS:
        raise ValueError(
            f"The 'setting' parameter of make_paper_synthetic must be one of "
            f"{sorted(SETTINGS)}. Got {setting!r} instead."
        )
    overrides = {"gamma": gamma, "alpha": alpha, "delta": delta}
    params = {
        name: float(SETTINGS[setting][name] if value is None else value)
        for name, value in overrides.items()
    }
    for name, value in params.items():
        if not np.isfinite(value):
            raise ValueError(f"The {name!r} parameter must be finite. Got {value!r} instead.")
    if params["alpha"] <= 0:
        raise ValueError(
            f"The 'alpha' parameter (covariate variance) must be > 0. "
            f"Got {params['alpha']!r} instead."
        )
    return params


def _check_sizes(n_clients: int, n_per_client: int, n_features: int, test_size: float) -> int:
    """Validate the sizes and return the number of test rows per client."""
    if int(n_clients) != n_clients or n_clients < 1:
        raise ValueError(f"The 'n_clients' parameter must be an int >= 1. Got {n_clients!r}.")
    if int(n_features) != n_features or n_features < _N_SIGNAL_FEATURES:
        raise ValueError(
            f"The 'n_features' parameter must be an int >= {_N_SIGNAL_FEATURES} (paper_f "
            f"reads x_1 .. x_4). Got {n_features!r} instead."
        )
    if not 0.0 < test_size < 1.0:
        raise ValueError(f"The 'test_size' parameter must be in (0, 1). Got {test_size!r}.")
    n_test = int(round(test_size * n_per_client))
    if int(n_per_client) != n_per_client or not 1 <= n_test < n_per_client:
        raise ValueError(
            f"The 'n_per_client' parameter must leave at least one train and one test row "
            f"per client with test_size={test_size}. Got {n_per_client!r}; increase it."
        )
    return n_test


_Rows = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]


def _client_rows(
    rng: np.random.Generator,
    k: int,
    n: int,
    d: int,
    n_test: int,
    *,
    gamma: float,
    alpha: float,
    delta: float,
    n_shifted: int | None = None,
) -> tuple[_Rows, _Rows]:
    """Draw client ``k`` (1-based) and split its rows into (train, test)."""
    sign = (-1.0) ** k
    if n_shifted is None:
        X = rng.normal(loc=sign * gamma, scale=np.sqrt(alpha), size=(n, d))
    else:
        X = rng.normal(size=(n, d))
        X[:, :n_shifted] = sign * gamma + np.sqrt(alpha) * X[:, :n_shifted]
    eps = rng.normal(loc=0.0, scale=np.sqrt(NOISE_VARIANCE), size=n)
    y = paper_f(X) + sign * delta + eps
    h = np.full(n, k - 1, dtype=np.int64)
    order = rng.permutation(n)
    test_rows, train_rows = np.sort(order[:n_test]), np.sort(order[n_test:])
    return (
        (X[train_rows], y[train_rows], h[train_rows]),
        (X[test_rows], y[test_rows], h[test_rows]),
    )


def _stack(parts: tuple[_Rows, ...]) -> _Rows:
    X, y, h = zip(*parts, strict=True)
    return np.vstack(X), np.concatenate(y), np.concatenate(h)


@dataclass(frozen=True)
class ShiftBenchmark:
    """An Appendix F.1 covariate-shift benchmark.

    Attributes
    ----------
    alpha : float
        Covariate variance of every client.
    shifts : tuple of float
        Default grid of shift scales ``gamma`` (the paper's Tables 5 and 6 do not print
        theirs).
    """

    alpha: float
    shifts: tuple[float, ...]


#: Appendix F.1 benchmarks by kind. Both shift the first coordinate only.
SHIFT_BENCHMARKS: Mapping[str, ShiftBenchmark] = MappingProxyType(
    {
        # F.1.1: narrow clients on x_1 (sd 0.71) whose supports separate as gamma grows;
        # at gamma >= 2.5 the gap at x_1 = 0 is 3.5 sd from either side (nearly disjoint).
        "disjoint": ShiftBenchmark(alpha=0.5, shifts=(0.0, 1.0, 1.5, 2.0, 2.5, 3.0)),
        # F.1.2: wide clients on x_1 (sd 1) that overlap around the pooled mean 0.
        "overlap": ShiftBenchmark(alpha=1.0, shifts=(0.0, 0.5, 1.0, 1.5, 2.0)),
    }
)


def make_shift_benchmark(
    kind: str,
    shift: float,
    *,
    n_clients: int = 10,
    n_per_client: int = 200,
    n_features: int = 20,
    random_state: int | np.random.Generator | None = None,
) -> FederatedSplit:
    """Appendix F.1 data: covariate shift of scale ``shift`` on ``x_1``, no outcome shift.

    The Section 5 generator with ``delta = 0`` where only ``x_1`` is shifted: client
    ``k`` draws ``x_1 ~ N((-1)^k shift, alpha)`` and ``x_2 .. x_d ~ N(0, 1)``, with the
    ``alpha`` of :data:`SHIFT_BENCHMARKS` ``[kind]`` (``"disjoint"``: F.1.1, Table 5,
    ``alpha = 0.5``; ``"overlap"``: F.1.2, Table 6, ``alpha = 1``). The outcome is
    :func:`paper_f`: its root split ``x_1 = 0`` lies between the clients, where no
    client sees a local gain, while inside a client the signal is on ``x_2`` (clients
    left of 0) or ``x_4`` (right of 0): the local rankings of the features disagree with
    the pooled one (the paper's "ranking disagreement"; its Tables 5 and 6 do not print
    their generator, this is ours).

    Parameters
    ----------
    kind : {"disjoint", "overlap"}
    shift : float
        The covariate mean shift ``gamma`` (the paper's "shift scale").
    n_clients, n_per_client, n_features, random_state
        As in :func:`make_paper_synthetic`.

    Returns
    -------
    split : FederatedSplit
    """
    if kind not in SHIFT_BENCHMARKS:
        raise ValueError(
            f"The 'kind' parameter of make_shift_benchmark must be one of "
            f"{sorted(SHIFT_BENCHMARKS)}. Got {kind!r} instead."
        )
    alpha = SHIFT_BENCHMARKS[kind].alpha
    return make_paper_synthetic(
        "covariate-shift",
        n_clients=n_clients,
        n_per_client=n_per_client,
        n_features=n_features,
        gamma=shift,
        alpha=alpha,
        delta=0.0,
        random_state=random_state,
        n_shifted=1,
    )


def add_feature_outliers(
    split: FederatedSplit,
    fraction: float,
    *,
    factor: float = 1000.0,
    random_state: int | np.random.Generator | None = None,
) -> FederatedSplit:
    """Contaminate training rows as in Appendix F.3: their features times ``factor``.

    ``round(fraction * n_train)`` training rows, drawn uniformly over all clients, get
    their whole feature vector multiplied by ``factor``; outcomes and the test rows are
    unchanged (the test set stays clean).

    Parameters
    ----------
    split : FederatedSplit
    fraction : float
        Fraction of the training rows to contaminate, in [0, 1].
    factor : float, default=1000.0
    random_state : int, Generator or None

    Returns
    -------
    contaminated : FederatedSplit
        A copy with the new ``X_train``.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"The 'fraction' parameter must be in [0, 1]. Got {fraction!r} instead.")
    rng = np.random.default_rng(random_state)
    n_train = split.X_train.shape[0]
    rows = rng.choice(n_train, size=int(round(fraction * n_train)), replace=False)
    X_train = split.X_train.copy()
    X_train[rows] *= factor
    return replace(split, X_train=X_train)
