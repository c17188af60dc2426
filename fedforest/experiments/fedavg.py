"""FedAvg baselines in NumPy: logistic regression and a two-layer network (binary).

The protocol follows FLamby's FedHeart benchmark (Ogier du Terrail et al. 2022,
``flamby/datasets/fed_heart_disease`` and ``flamby/benchmarks/fed_benchmark.py``):

- features standardised per client with that client's own training mean and standard
  deviation (FLamby's ``normalize=True``); a row of an unknown client uses the pooled
  statistics, which the server can form from the clients' counts, sums and sums of
  squares;
- binary cross-entropy on a sigmoid output; PyTorch's default initialisation
  ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``;
- each round every client starts from the global model and takes ``local_steps``
  (FLamby: ``num_updates = 100``) plain SGD steps on mini-batches of ``batch_size = 4``
  drawn by reshuffled passes over its rows; the server averages the client models
  weighted by their row counts (FedAvg, McMahan et al. 2017);
- ``rounds = 15``: FLamby's ``get_nb_max_rounds(100) = (486 // 4 // 4) * 50 // 100``,
  i.e. as many samples seen as 50 pooled epochs;
- learning rate ``1e-3``: FLamby's ``LR`` for FedHeart, the default of its strategies.

The two-layer network (the paper's "FedAvg NN"; FLamby has no such model for FedHeart)
is ``sigmoid(w2 . relu(W1 x + b1) + b2)`` with ``hidden_units = 16``, trained the same way.
Public names are re-exported by :mod:`fedforest.experiments.baselines`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from ..federated.protocol import CommunicationLedger, Message

__all__ = ["FedAvgLogisticRegression", "FedAvgMLPClassifier"]

Params = dict[str, NDArray[np.float64]]
_Grad = Callable[[Params, NDArray[np.float64], NDArray[np.float64]], Params]
_Forward = Callable[[Params, NDArray[np.float64]], NDArray[np.float64]]


def _sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)))


def _uniform(rng: np.random.Generator, fan_in: int, shape: tuple[int, ...]) -> NDArray[Any]:
    bound = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape)


def _lr_forward(p: Params, X: NDArray[np.float64]) -> NDArray[np.float64]:
    return _sigmoid(X @ p["w"] + p["b"][0])


def _lr_grad(p: Params, X: NDArray[np.float64], y: NDArray[np.float64]) -> Params:
    g = (_lr_forward(p, X) - y) / X.shape[0]  # d(mean BCE)/d(logit)
    return {"w": X.T @ g, "b": np.array([g.sum()])}


def _mlp_hidden(p: Params, X: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.maximum(X @ p["W1"] + p["b1"], 0.0)


def _mlp_forward(p: Params, X: NDArray[np.float64]) -> NDArray[np.float64]:
    return _sigmoid(_mlp_hidden(p, X) @ p["w2"] + p["b2"][0])


def _mlp_grad(p: Params, X: NDArray[np.float64], y: NDArray[np.float64]) -> Params:
    h = _mlp_hidden(p, X)
    g = (_sigmoid(h @ p["w2"] + p["b2"][0]) - y) / X.shape[0]
    gh = np.outer(g, p["w2"]) * (h > 0.0)
    return {"W1": X.T @ gh, "b1": gh.sum(axis=0), "w2": h.T @ g, "b2": np.array([g.sum()])}


def _local_sgd(
    params: Params,
    X: NDArray[np.float64],
    y: NDArray[np.float64],
    grad: _Grad,
    steps: int,
    batch_size: int,
    learning_rate: float,
    rng: np.random.Generator,
) -> Params:
    """``steps`` SGD steps on mini-batches from reshuffled passes over the rows."""
    p = {k: v.copy() for k, v in params.items()}
    order = rng.permutation(X.shape[0])
    pos = 0
    for _ in range(steps):
        if pos >= order.size:
            order, pos = rng.permutation(X.shape[0]), 0
        batch = order[pos : pos + batch_size]
        pos += batch_size
        for name, g in grad(p, X[batch], y[batch]).items():
            p[name] -= learning_rate * g
    return p


class _FedAvgBase(BaseEstimator):
    """FedAvg training loop shared by the two models."""

    def __init__(
        self,
        *,
        rounds: int = 15,
        local_steps: int = 100,
        batch_size: int = 4,
        learning_rate: float = 1e-3,
        standardize: bool = True,
        random_state: int | None = None,
    ) -> None:
        self.rounds = rounds
        self.local_steps = local_steps
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.standardize = standardize
        self.random_state = random_state

    def _init(self, rng: np.random.Generator, d: int) -> Params:
        raise NotImplementedError

    _grad: Callable[..., Params]
    _forward: Callable[..., NDArray[np.float64]]

    def fit(self, X: ArrayLike, y: ArrayLike, *, client_ids: ArrayLike | None = None) -> Any:
        """Train with FedAvg over the clients given by ``client_ids``.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
        y : array-like, shape (n_samples,)
            Two classes.
        client_ids : array-like, shape (n_samples,) or None

        Returns
        -------
        self : object
        """
        X_arr = np.asarray(X, dtype=np.float64)
        self.classes_, y_code = np.unique(np.asarray(y), return_inverse=True)
        if self.classes_.size != 2:
            raise ValueError(f"FedAvg baselines are binary; got {self.classes_.size} classes.")
        ids = np.zeros(X_arr.shape[0], dtype=np.int64) if client_ids is None else client_ids
        ids = np.asarray(ids)
        self._fit_scalers(X_arr, ids)
        rng = np.random.default_rng(self.random_state)
        clients = {}
        for c in np.unique(ids).tolist():
            rows = ids == c
            clients[c] = (self._scale(X_arr[rows], c), y_code[rows].astype(np.float64))
        params = self._init(rng, X_arr.shape[1])
        self.communication_ = CommunicationLedger()
        for _ in range(self.rounds):
            params = self._round(params, clients, rng)
        self.params_ = params
        return self

    def _round(
        self, params: Params, clients: dict[Any, tuple[Any, Any]], rng: np.random.Generator
    ) -> Params:
        """One FedAvg round: local SGD on every client, average weighted by row counts."""
        locals_: dict[str, Params] = {}
        weights = {}
        for c, (Xc, yc) in clients.items():
            locals_[str(c)] = _local_sgd(
                params,
                Xc,
                yc,
                type(self)._grad,
                self.local_steps,
                self.batch_size,
                self.learning_rate,
                rng,
            )
            weights[str(c)] = Xc.shape[0]
        total = sum(weights.values())
        requests = {name: Message("fedavg", arrays=dict(params)) for name in locals_}
        replies = {
            name: Message("fedavg", {"n_samples": weights[name]}, dict(p))
            for name, p in locals_.items()
        }
        self.communication_.record("fedavg", requests, replies)
        return {k: sum(weights[name] * p[k] for name, p in locals_.items()) / total for k in params}

    def _fit_scalers(self, X: NDArray[np.float64], ids: NDArray[Any]) -> None:
        self.scalers_: dict[Any, tuple[NDArray[np.float64], NDArray[np.float64]]] = {}
        for c in np.unique(ids).tolist():
            Xc = X[ids == c]
            std = Xc.std(axis=0, ddof=1) if len(Xc) > 1 else np.ones(X.shape[1])
            self.scalers_[c] = (Xc.mean(axis=0), std)
        self.pooled_scaler_ = (X.mean(axis=0), X.std(axis=0, ddof=1))

    def _scale(self, X: NDArray[np.float64], client: Any) -> NDArray[np.float64]:
        if not self.standardize:
            return X
        mean, std = self.scalers_.get(client, self.pooled_scaler_)
        return np.asarray((X - mean) / (np.asarray(std) + 1e-9))

    def predict_proba(
        self, X: ArrayLike, *, client_ids: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """Class probabilities, shape (n_samples, 2); rows scaled by their client."""
        check_is_fitted(self, "params_")
        X_arr = np.asarray(X, dtype=np.float64)
        ids = np.full(X_arr.shape[0], None, dtype=object) if client_ids is None else client_ids
        ids = np.asarray(ids, dtype=object)
        p1 = np.empty(X_arr.shape[0])
        for c in {*ids.tolist()}:
            rows = ids == c
            p1[rows] = type(self)._forward(self.params_, self._scale(X_arr[rows], c))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[Any]:
        """Class with probability > 1/2."""
        proba = self.predict_proba(X, client_ids=client_ids)
        return np.asarray(self.classes_[(proba[:, 1] > 0.5).astype(int)])


class FedAvgLogisticRegression(ClassifierMixin, _FedAvgBase):
    """Logistic regression trained with FedAvg, as FLamby trains its FedHeart baseline.

    Parameters
    ----------
    rounds : int, default=15
    local_steps : int, default=100
        SGD steps per client and round (FLamby's ``num_updates``).
    batch_size : int, default=4
    learning_rate : float, default=1e-3
    standardize : bool, default=True
        Per-client standardisation with the client's own training statistics.
    random_state : int or None

    Attributes
    ----------
    params_ : dict of str to ndarray
        ``w`` (n_features,), ``b`` (1,).
    classes_ : ndarray, shape (2,)
    communication_ : CommunicationLedger
        One round per FedAvg round: the model down, each client's model up.
    """

    _grad = staticmethod(_lr_grad)
    _forward = staticmethod(_lr_forward)

    def _init(self, rng: np.random.Generator, d: int) -> Params:
        return {"w": _uniform(rng, d, (d,)), "b": _uniform(rng, d, (1,))}


class FedAvgMLPClassifier(ClassifierMixin, _FedAvgBase):
    """Two-layer network (one hidden ReLU layer) trained with FedAvg.

    Same training parameters as :class:`FedAvgLogisticRegression`, plus
    ``hidden_units`` (default 16).
    """

    _grad = staticmethod(_mlp_grad)
    _forward = staticmethod(_mlp_forward)

    def __init__(
        self,
        *,
        hidden_units: int = 16,
        rounds: int = 15,
        local_steps: int = 100,
        batch_size: int = 4,
        learning_rate: float = 1e-3,
        standardize: bool = True,
        random_state: int | None = None,
    ) -> None:
        super().__init__(
            rounds=rounds,
            local_steps=local_steps,
            batch_size=batch_size,
            learning_rate=learning_rate,
            standardize=standardize,
            random_state=random_state,
        )
        self.hidden_units = hidden_units

    def _init(self, rng: np.random.Generator, d: int) -> Params:
        h = self.hidden_units
        return {
            "W1": _uniform(rng, d, (d, h)),
            "b1": _uniform(rng, d, (h,)),
            "w2": _uniform(rng, h, (h,)),
            "b2": _uniform(rng, h, (1,)),
        }
