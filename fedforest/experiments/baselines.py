"""Baselines of the FedForest paper's experiments (Section 5).

- :class:`CentralizedForestRegressor` / :class:`CentralizedForestClassifier`:
  scikit-learn's random forest on the pooled rows; with ``use_client=True`` the client
  index enters as one Fisher-encoded feature (:func:`fisher_client_codes`), the paper's
  "centralized RF with H".
- :class:`FederatedHistogramRegressor` / :class:`FederatedHistogramClassifier`: Kalloori
  & Klingler (2022) through fedforest's own protocol: global min–max from the clients in
  the handshake, ``n_bins`` fixed-width bins per feature, exact pooled statistics at the
  bin edges; no splits on the client index.
- :class:`LocalEnsembleRegressor` / :class:`LocalEnsembleClassifier`: one-shot local
  ensembling (Hauschild et al. 2022): each client trains a forest, the server averages
  the forests' predictions.
- :class:`LocalLearningRegressor` / :class:`LocalLearningClassifier`: each client's own
  forest predicts that client's rows.
- :class:`FedAvgLogisticRegression`, :class:`FedAvgMLPClassifier`: FedAvg as FLamby runs
  it on FedHeart (in :mod:`fedforest.experiments.fedavg`).

Every baseline is fitted with ``fit(X, y, client_ids)`` and records what it would send
in ``communication_`` (a :class:`~fedforest.CommunicationLedger`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ..federated.protocol import CommunicationLedger, Message
from ..federated.server.config import GrowerConfig
from ..forest import FedForestClassifier, FedForestRegressor
from .fedavg import FedAvgLogisticRegression, FedAvgMLPClassifier

__all__ = [
    "CentralizedForestClassifier",
    "CentralizedForestRegressor",
    "FedAvgLogisticRegression",
    "FedAvgMLPClassifier",
    "FederatedHistogramClassifier",
    "FederatedHistogramRegressor",
    "LocalEnsembleClassifier",
    "LocalEnsembleRegressor",
    "LocalLearningClassifier",
    "LocalLearningRegressor",
    "fisher_client_codes",
]


def _one_round(kind: str, uploads: dict[str, dict[str, NDArray[Any]]]) -> CommunicationLedger:
    """A ledger of one round in which each client uploads ``uploads[name]``."""
    ledger = CommunicationLedger()
    requests = {name: Message(kind) for name in uploads}
    replies = {name: Message(kind, arrays=arrays) for name, arrays in uploads.items()}
    ledger.record(kind, requests, replies)
    return ledger


def _client_labels(client_ids: ArrayLike | None, n: int) -> NDArray[Any]:
    if client_ids is None:
        return np.zeros(n, dtype=np.int64)
    ids = np.asarray(client_ids)
    if ids.shape != (n,):
        raise ValueError(f"client_ids has shape {ids.shape}; expected ({n},), one per row of X.")
    return ids


def fisher_client_codes(
    y: ArrayLike, client_ids: ArrayLike, task: str = "regression"
) -> dict[Any, int]:
    """Fisher encoding of the client index: each client's rank by its mean outcome.

    Regression ranks clients by mean ``y``; binary classification by the share of the
    larger class label. A forest splitting on the ranks can then isolate any contiguous
    group of clients in that order, which holds the best split on the client index
    (Fisher 1958). Computed on training rows only.

    Parameters
    ----------
    y : array-like, shape (n_samples,)
    client_ids : array-like, shape (n_samples,)
    task : {"regression", "classification"}

    Returns
    -------
    codes : dict
        Client label -> rank ``0 .. K - 1`` (ties broken by client label).
    """
    y_arr, ids = np.asarray(y), np.asarray(client_ids)
    labels, inverse = np.unique(ids, return_inverse=True)
    if task == "classification":
        classes = np.unique(y_arr)
        if classes.size > 2:
            raise ValueError(
                f"Fisher encoding of the client index needs a binary or numeric outcome; got "
                f"{classes.size} classes."
            )
        target = (y_arr == classes[-1]).astype(np.float64)
    else:
        target = y_arr.astype(np.float64)
    means = np.bincount(inverse, weights=target) / np.bincount(inverse)
    order = np.lexsort((np.arange(labels.size), means))
    names = labels.tolist()
    return {names[k]: rank for rank, k in enumerate(order.tolist())}


class _CentralizedForest(BaseEstimator):
    """scikit-learn random forest on the pooled rows, optionally with H Fisher-encoded."""

    _task = "regression"

    def __init__(
        self,
        n_estimators: int = 50,
        *,
        max_depth: int | None = 8,
        min_samples_leaf: int = 5,
        max_features: Any = 1 / 3,
        use_client: bool = False,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.use_client = use_client
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _forest(self) -> Any:
        cls = RandomForestRegressor if self._task == "regression" else RandomForestClassifier
        return cls(
            n_estimators=self.n_estimators,
            max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf,
            max_features=self.max_features,
            random_state=self.random_state,
            n_jobs=self.n_jobs,
        )

    def _augment(self, X: NDArray[np.float64], client_ids: ArrayLike | None) -> NDArray[Any]:
        if not self.use_client:
            return X
        if client_ids is None:
            raise ValueError("use_client=True needs client_ids at prediction time.")
        ids = _client_labels(client_ids, X.shape[0])
        unknown = [c for c in np.unique(ids).tolist() if c not in self.client_codes_]
        if unknown:
            raise ValueError(f"client {unknown[0]!r} was not seen in training; no Fisher code.")
        codes = np.array([self.client_codes_[c] for c in ids.tolist()], dtype=np.float64)
        return np.column_stack([X, codes])

    def fit(self, X: ArrayLike, y: ArrayLike, *, client_ids: ArrayLike | None = None) -> Any:
        """Pool the rows of every client and fit the forest.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
        y : array-like, shape (n_samples,)
        client_ids : array-like, shape (n_samples,) or None

        Returns
        -------
        self : object
        """
        X_arr, y_arr = np.asarray(X, dtype=np.float64), np.asarray(y)
        ids = _client_labels(client_ids, X_arr.shape[0])
        if self.use_client:
            self.client_codes_ = fisher_client_codes(y_arr, ids, self._task)
        self.forest_ = self._forest().fit(self._augment(X_arr, ids), y_arr)
        uploads = {}
        for client in np.unique(ids).tolist():
            rows = ids == client
            uploads[str(client)] = {"X": X_arr[rows], "y": y_arr[rows]}
        self.communication_ = _one_round("pool_rows", uploads)
        return self

    def _pooled(self, X: ArrayLike, client_ids: ArrayLike | None) -> NDArray[Any]:
        check_is_fitted(self, "forest_")
        return self._augment(np.asarray(X, dtype=np.float64), client_ids)

    def predict(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[Any]:
        """Predict with the pooled forest; ``client_ids`` is needed with ``use_client``."""
        return np.asarray(self.forest_.predict(self._pooled(X, client_ids)))


class CentralizedForestRegressor(RegressorMixin, _CentralizedForest):
    """Centralized scikit-learn random forest regressor on the pooled rows.

    Parameters
    ----------
    n_estimators, max_depth, min_samples_leaf, max_features, random_state, n_jobs
        As in :class:`sklearn.ensemble.RandomForestRegressor` (defaults: the paper's).
    use_client : bool, default=False
        Add the client index as one Fisher-encoded feature (:func:`fisher_client_codes`).

    Attributes
    ----------
    forest_ : RandomForestRegressor
    client_codes_ : dict (with ``use_client``)
    communication_ : CommunicationLedger
        One round: every client uploads its rows.
    """

    _task = "regression"


class CentralizedForestClassifier(ClassifierMixin, _CentralizedForest):
    """Centralized scikit-learn random forest classifier on the pooled rows.

    Same parameters as :class:`CentralizedForestRegressor`; ``max_features`` defaults to
    ``"sqrt"``; ``use_client`` needs a binary outcome.
    """

    _task = "classification"

    def __init__(
        self,
        n_estimators: int = 50,
        *,
        max_depth: int | None = 8,
        min_samples_leaf: int = 5,
        max_features: Any = "sqrt",
        use_client: bool = False,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        super().__init__(
            n_estimators,
            max_depth=max_depth,
            min_samples_leaf=min_samples_leaf,
            max_features=max_features,
            use_client=use_client,
            random_state=random_state,
            n_jobs=n_jobs,
        )

    @property
    def classes_(self) -> NDArray[Any]:
        """Class labels, sorted."""
        return np.asarray(self.forest_.classes_)

    def predict_proba(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[Any]:
        """Class probabilities, shape (n_samples, n_classes)."""
        return np.asarray(self.forest_.predict_proba(self._pooled(X, client_ids)))


class _HistogramMixin:
    """Grow with the Federated Histogram candidates instead of quantile sketches."""

    def _config(self) -> GrowerConfig:
        cfg: GrowerConfig = super()._config()  # type: ignore[misc]
        if getattr(cfg, "split_on_client", False):
            raise ValueError(
                "The Federated Histogram baseline does not split on the client index; got "
                "split_on_client=True. Set it to False."
            )
        # The baseline sends each client's minimum and maximum: the paper's protocol only.
        # A fit asked for "secure" (the inherited default) or "dp" ran under "none" unsaid.
        if cfg.privacy != "none":
            raise ValueError(
                f"The Federated Histogram baseline runs only under privacy='none' (each "
                f"client sends its features' minimum and maximum); got "
                f"privacy={cfg.privacy!r}. Set privacy='none' (see docs/privacy.md)."
            )
        return dataclasses.replace(cfg, binning="histogram")


class FederatedHistogramRegressor(_HistogramMixin, FedForestRegressor):
    """Federated Histogram regression forest (Kalloori & Klingler 2022).

    fedforest's protocol with fixed-width candidates: the clients report each feature's
    minimum and maximum in the handshake and every node is scanned at the ``n_bins - 1``
    inner edges of ``n_bins`` equal-width bins between the global minimum and maximum;
    the clients return exact left statistics ``(n, sum y, sum y^2)`` at those edges.
    Same parameters and attributes as :class:`~fedforest.FedForestRegressor`;
    ``split_on_client`` must stay False and ``privacy`` must be ``"none"`` (fit refuses
    the inherited default ``"secure"``, and ``"dp"``).
    """


class FederatedHistogramClassifier(_HistogramMixin, FedForestClassifier):
    """Federated Histogram classification forest (Kalloori & Klingler 2022).

    As :class:`FederatedHistogramRegressor`, with per-class counts; same parameters and
    attributes as :class:`~fedforest.FedForestClassifier`.
    """


def _tree_arrays(forest: Any) -> dict[str, NDArray[Any]]:
    """The arrays a client would upload to share a fitted scikit-learn forest."""
    arrays: dict[str, NDArray[Any]] = {}
    for t, est in enumerate(forest.estimators_):
        tree = est.tree_
        arrays[f"t{t}_feature"] = tree.feature
        arrays[f"t{t}_threshold"] = tree.threshold
        arrays[f"t{t}_left"] = tree.children_left
        arrays[f"t{t}_right"] = tree.children_right
        arrays[f"t{t}_value"] = tree.value
    return arrays


class _LocalForests(BaseEstimator):
    """One scikit-learn forest per client, trained on that client's rows only."""

    _task = "regression"

    def __init__(
        self,
        n_estimators: int = 50,
        *,
        max_depth: int | None = 8,
        min_samples_leaf: int = 5,
        max_features: Any = 1 / 3,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X: ArrayLike, y: ArrayLike, *, client_ids: ArrayLike | None = None) -> Any:
        """Fit one forest per client.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
        y : array-like, shape (n_samples,)
        client_ids : array-like, shape (n_samples,) or None

        Returns
        -------
        self : object
        """
        X_arr, y_arr = np.asarray(X, dtype=np.float64), np.asarray(y)
        ids = _client_labels(client_ids, X_arr.shape[0])
        rng = check_random_state(self.random_state)
        cls = RandomForestRegressor if self._task == "regression" else RandomForestClassifier
        if self._task == "classification":
            self.classes_ = np.unique(y_arr)
        self.forests_: dict[Any, Any] = {}
        for client in np.unique(ids).tolist():
            rows = ids == client
            self.forests_[client] = cls(
                n_estimators=self.n_estimators,
                max_depth=self.max_depth,
                min_samples_leaf=self.min_samples_leaf,
                max_features=self.max_features,
                random_state=int(rng.randint(np.iinfo(np.int32).max)),
                n_jobs=self.n_jobs,
            ).fit(X_arr[rows], y_arr[rows])
        self.communication_ = self._ledger()
        return self

    def _ledger(self) -> CommunicationLedger:
        return CommunicationLedger()

    def _client_output(self, client: Any, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Regression: predictions (n,); classification: probabilities over ``classes_``."""
        forest = self.forests_[client]
        if self._task == "regression":
            return np.asarray(forest.predict(X), dtype=np.float64)
        proba = np.zeros((X.shape[0], self.classes_.size))
        cols = np.searchsorted(self.classes_, forest.classes_)
        proba[:, cols] = forest.predict_proba(X)
        return proba


class _LocalEnsemble(_LocalForests):
    def _ledger(self) -> CommunicationLedger:
        uploads = {str(c): _tree_arrays(f) for c, f in self.forests_.items()}
        return _one_round("upload_forest", uploads)

    def _output(self, X: ArrayLike) -> NDArray[np.float64]:
        check_is_fitted(self, "forests_")
        X_arr = np.asarray(X, dtype=np.float64)
        outs = [self._client_output(c, X_arr) for c in self.forests_]
        return np.mean(outs, axis=0)


class LocalEnsembleRegressor(RegressorMixin, _LocalEnsemble):
    """One-shot local ensembling (Hauschild et al. 2022): mean of the clients' forests.

    Each client fits a scikit-learn forest (the paper's hyperparameters by default) on
    its rows and uploads it once; a prediction is the unweighted mean of the client
    forests' predictions (every client forest has ``n_estimators`` trees, so this is the
    mean over all uploaded trees).

    Attributes
    ----------
    forests_ : dict
        Client label -> fitted RandomForestRegressor.
    communication_ : CommunicationLedger
        One round: the trees' arrays uploaded.
    """

    _task = "regression"

    def predict(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[np.float64]:
        """Mean of the client forests' predictions (``client_ids`` is ignored)."""
        return self._output(X)


class LocalEnsembleClassifier(ClassifierMixin, _LocalEnsemble):
    """One-shot local ensembling for classification: mean of the clients' probabilities.

    ``max_features`` defaults to ``"sqrt"``. A client that saw only some classes gives
    the others probability 0.
    """

    _task = "classification"

    def __init__(
        self,
        n_estimators: int = 50,
        *,
        max_depth: int | None = 8,
        min_samples_leaf: int = 5,
        max_features: Any = "sqrt",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        super().__init__(
            n_estimators,
            max_depth=max_depth,
            min_samples_leaf=min_samples_leaf,
            max_features=max_features,
            random_state=random_state,
            n_jobs=n_jobs,
        )

    def predict_proba(
        self, X: ArrayLike, *, client_ids: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """Mean class probabilities over client forests, shape (n_samples, n_classes)."""
        return self._output(X)

    def predict(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[Any]:
        """Most probable class."""
        return np.asarray(self.classes_[np.argmax(self.predict_proba(X), axis=1)])


class _LocalLearning(_LocalForests):
    def _output(self, X: ArrayLike, client_ids: ArrayLike | None) -> NDArray[np.float64]:
        check_is_fitted(self, "forests_")
        X_arr = np.asarray(X, dtype=np.float64)
        if client_ids is None:
            raise ValueError(
                "Local learning predicts a row with its own client's forest; pass client_ids."
            )
        ids = _client_labels(client_ids, X_arr.shape[0])
        width = () if self._task == "regression" else (self.classes_.size,)
        out = np.zeros((X_arr.shape[0], *width))
        for client in np.unique(ids).tolist():
            if client not in self.forests_:
                raise ValueError(f"client {client!r} has no local forest (not in training).")
            rows = ids == client
            out[rows] = self._client_output(client, X_arr[rows])
        return out


class LocalLearningRegressor(RegressorMixin, _LocalLearning):
    """Local learning: each client's own forest predicts that client's rows.

    No communication. ``predict`` and ``score`` need ``client_ids``.

    Attributes
    ----------
    forests_ : dict
        Client label -> fitted RandomForestRegressor.
    communication_ : CommunicationLedger
        Empty.
    """

    _task = "regression"

    def predict(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[np.float64]:
        """Each row predicted by the forest of its client."""
        return self._output(X, client_ids)


class LocalLearningClassifier(ClassifierMixin, _LocalLearning):
    """Local learning for classification; ``max_features`` defaults to ``"sqrt"``."""

    _task = "classification"

    def __init__(
        self,
        n_estimators: int = 50,
        *,
        max_depth: int | None = 8,
        min_samples_leaf: int = 5,
        max_features: Any = "sqrt",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        super().__init__(
            n_estimators,
            max_depth=max_depth,
            min_samples_leaf=min_samples_leaf,
            max_features=max_features,
            random_state=random_state,
            n_jobs=n_jobs,
        )

    def predict_proba(
        self, X: ArrayLike, *, client_ids: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """Class probabilities from each row's own client forest."""
        return self._output(X, client_ids)

    def predict(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[Any]:
        """Most probable class."""
        proba = self.predict_proba(X, client_ids=client_ids)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])
