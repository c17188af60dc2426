"""The scikit-learn estimators: a thin layer over the grower and the flat-array forest.

The regressor and the classifier are defined here (pickles record ``fedforest.forest``);
their shared base is :mod:`fedforest.forest.base`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from .._docs import estimator_doc
from .._inputs import (
    class_weight_codes,
    decode_classes,
    encode_declared,
    encode_labels,
    warn_caller,
)
from .._io import load_model
from ..tree.outputs import R2ScoreMixin, SubsetAccuracyMixin, most_probable, oob_proba, per_output
from .base import _BaseFedForest, _dask_aware, _DaskScore

__all__ = ["FedForestRegressor", "FedForestClassifier", "load"]

#: scikit-learn's warning (word for word) for a class_weight preset under warm_start.
WARM_BALANCED = (
    'class_weight presets "balanced" or "balanced_subsample" are not recommended for '
    "warm_start if the fitted data differs from the full dataset. In order to use "
    '"balanced" weights, use compute_class_weight ("balanced", classes, y). In place of y '
    "you can use a large enough sample of the full training set target to properly "
    "estimate the class frequency distributions. Pass the resulting weights as the "
    "class_weight parameter."
)


class FedForestRegressor(_DaskScore, R2ScoreMixin, RegressorMixin, _BaseFedForest):
    """Federated random forest regressor (the text: ``fedforest._docs``)."""

    __doc__ = estimator_doc("regression")

    _task = "regression"
    _parameter_constraints = {
        **_BaseFedForest._parameter_constraints,
        "criterion": [StrOptions({"squared_error", "friedman_mse", "poisson"})],
    }

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True  # multi-output y, at every privacy level
        if self.privacy != "none" and tags.regressor_tags is not None:
            # Leaves of at least min_aggregate_rows rows and candidates that far apart: on
            # scikit-learn's 200-row check data (check_regressors_train, standardised) the
            # training R^2 is 0.63 at random_state=0 ("none": 0.80), near its 0.5 bar.
            tags.regressor_tags.poor_score = True
        # Poisson deviance needs y >= 0: scikit-learn's checks then give y above 0
        tags.target_tags.positive_only = self.criterion == "poisson"
        return tags

    @_dask_aware
    def predict(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[np.float64]:
        """Mean of the trees' leaf values.

        Parameters
        ----------
        X : array-like, sparse matrix, DataFrame or Dask collection, shape (n_samples, n_features)
            Rows to predict: the fitted columns (a DataFrame's in the fitted order), NaN
            for a missing value; sparse input is made dense. A Dask DataFrame or Array is
            predicted partition by partition.
        client_ids : array-like of shape (n_samples,), default=None
            The client label of each row. Only matters if the forest splits on the client
            index: a row of an unknown client, or every row when None, goes down both
            branches of such a split, weighted by the training weight of each side (the
            marginal-prediction rule).

        Returns
        -------
        ndarray of float64, shape (n_samples,) or (n_samples, n_outputs)
            The predicted values; a Dask Array for Dask input.
        """
        out = self._mean_value(X, client_ids)
        return out[:, 0] if out.shape[1] == 1 else out


class FedForestClassifier(_DaskScore, SubsetAccuracyMixin, ClassifierMixin, _BaseFedForest):
    """Federated random forest classifier (the text: ``fedforest._docs``)."""

    __doc__ = estimator_doc("classification")

    _task = "classification"
    _parameter_constraints = {
        **_BaseFedForest._parameter_constraints,
        "criterion": [StrOptions({"gini", "entropy", "log_loss"})],
        "class_weight": [dict, list, StrOptions({"balanced", "balanced_subsample"}), None],
        "classes": ["array-like", None],
    }

    def __init__(
        self,
        n_estimators: int = 50,
        *,
        criterion: str = "gini",
        max_depth: int | None = 8,
        min_samples_split: int = 2,
        min_samples_leaf: int = 5,
        min_impurity_decrease: float = 0.0,
        min_weight_fraction_leaf: float = 0.0,
        ccp_alpha: float = 0.0,
        monotonic_cst: Any = None,
        max_features: Any = "sqrt",
        n_bins: int | None = 32,
        local_candidates: bool | None = None,
        binning: str = "quantile",
        bootstrap: bool = True,
        oob_score: bool = False,
        random_state: Any = None,
        n_jobs: int | None = None,
        verbose: int = 0,
        tree_batch_size: int | None = None,
        split_on_client: bool = False,
        categorical_features: Any = None,
        categories: Any = None,
        split_rule: str = "exact",
        top_l: int | None = None,
        client_fraction: float = 1.0,
        max_samples: float | None = None,
        warm_start: bool = False,
        max_leaf_nodes: int | None = None,
        on_client_failure: str = "raise",
        privacy: str = "secure",
        min_aggregate_rows: int | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
        dp_colluders: int = 0,
        class_weight: Any = None,
        classes: Any = None,
    ) -> None:
        self.class_weight = class_weight
        self.classes = classes
        super().__init__(
            n_estimators,
            criterion=criterion,
            max_depth=max_depth,
            min_samples_split=min_samples_split,
            min_samples_leaf=min_samples_leaf,
            min_impurity_decrease=min_impurity_decrease,
            min_weight_fraction_leaf=min_weight_fraction_leaf,
            ccp_alpha=ccp_alpha,
            monotonic_cst=monotonic_cst,
            max_features=max_features,
            n_bins=n_bins,
            local_candidates=local_candidates,
            binning=binning,
            bootstrap=bootstrap,
            oob_score=oob_score,
            random_state=random_state,
            n_jobs=n_jobs,
            verbose=verbose,
            tree_batch_size=tree_batch_size,
            split_on_client=split_on_client,
            categorical_features=categorical_features,
            categories=categories,
            split_rule=split_rule,
            top_l=top_l,
            client_fraction=client_fraction,
            max_samples=max_samples,
            warm_start=warm_start,
            max_leaf_nodes=max_leaf_nodes,
            on_client_failure=on_client_failure,
            privacy=privacy,
            min_aggregate_rows=min_aggregate_rows,
            epsilon=epsilon,
            delta=delta,
            dp_colluders=dp_colluders,
        )

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        if self.privacy == "dp" and tags.classifier_tags is not None:
            # Noisy counts on scikit-learn's small check data (check_classifiers_train's
            # 0.83 training accuracy); "secure" and "none" pass it
            tags.classifier_tags.poor_score = True
        return tags

    def _warn_settings(self) -> None:
        super()._warn_settings()
        if self.warm_start and self.class_weight in ("balanced", "balanced_subsample"):
            # scikit-learn's forests warn so (1.9.1's _validate_y_class_weight): the weights
            # come from each fit's rows, so the new trees' may differ from the first ones'.
            warn_caller(WARM_BALANCED, UserWarning)

    def _class_weight(self) -> Any:
        # Simulation mode sends codes to the clients: the labels follow them.
        return class_weight_codes(self.class_weight, getattr(self, "_label_codes", None))

    def _encode_y(self, y: NDArray[Any]) -> tuple[NDArray[Any], Any]:
        if self.classes is not None:  # declared: codes into them, every label checked
            return encode_declared(y, self.classes)
        return encode_labels(y)  # several columns: multi-output, classes per output

    def _set_classes(
        self, classes: list[Any] | None, fit_classes: Any, dtype: str | None = None
    ) -> None:
        assert classes is not None  # simulation mode's codes mapped back to the labels
        self.classes_, self.n_classes_ = decode_classes(classes, fit_classes, dtype)

    def _set_oob_prediction(self, pred: NDArray[np.float64]) -> None:
        self.oob_decision_function_ = oob_proba(pred, self.n_classes_)

    @_dask_aware
    def predict_proba(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> Any:
        """Mean class proportions over the trees.

        Parameters
        ----------
        X : array-like, sparse matrix, DataFrame or Dask collection, shape (n_samples, n_features)
            Rows to predict, as in :meth:`FedForestRegressor.predict`.
        client_ids : array-like of shape (n_samples,), default=None
            The client label of each row, as in :meth:`FedForestRegressor.predict`
            (None: the marginal rule at every client split).

        Returns
        -------
        ndarray of float64, shape (n_samples, n_classes), or list of such arrays
            Columns in ``classes_`` order. Multi-output: one array per output, as
            scikit-learn. A Dask Array for Dask input.
        """
        return per_output(self._mean_value(X, client_ids), self.n_classes_)

    @_dask_aware
    def predict_log_proba(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> Any:
        """Log of :meth:`predict_proba` (-inf where a class has probability 0), as scikit-learn.

        Parameters
        ----------
        X : array-like, sparse matrix, DataFrame or Dask collection, shape (n_samples, n_features)
            Rows to predict, as in :meth:`FedForestRegressor.predict`.
        client_ids : array-like of shape (n_samples,), default=None
            The client label of each row, as in :meth:`FedForestRegressor.predict`.

        Returns
        -------
        ndarray of float64, shape (n_samples, n_classes), or list of such arrays
            As :meth:`predict_proba`'s, logged.
        """
        proba = self.predict_proba(X, client_ids=client_ids)
        with np.errstate(divide="ignore"):
            return [np.log(p) for p in proba] if isinstance(proba, list) else np.log(proba)

    @_dask_aware
    def predict(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[Any]:
        """Most probable class of each row.

        Parameters
        ----------
        X : array-like, sparse matrix, DataFrame or Dask collection, shape (n_samples, n_features)
            Rows to predict, as in :meth:`FedForestRegressor.predict`.
        client_ids : array-like of shape (n_samples,), default=None
            The client label of each row, as in :meth:`FedForestRegressor.predict`.

        Returns
        -------
        ndarray, shape (n_samples,) or (n_samples, n_outputs)
            Labels from ``classes_``. A Dask Array for Dask input.
        """
        check_is_fitted(self, "trees_")
        return most_probable(self.predict_proba(X, client_ids=client_ids), self.classes_)


def load(path: str | os.PathLike[str]) -> FedForestRegressor | FedForestClassifier:
    """Load a model written by ``model.save(path)``.

    Only arrays and a JSON header are read (``allow_pickle=False``); every field is
    checked against the others before the estimator is built.

    Parameters
    ----------
    path : str or path-like
        The model file, as given to ``save`` (no extension is added).

    Returns
    -------
    FedForestRegressor or FedForestClassifier
        The fitted estimator the file holds (its kind is read from the file).

    Raises
    ------
    ValueError
        If the file is not a valid fedforest model (foreign, truncated, pickled, or with
        arrays out of range or inconsistent with its header).
    OSError
        If the file is missing or unreadable (e.g. ``FileNotFoundError``).
    """
    model: FedForestRegressor | FedForestClassifier = load_model(
        path,
        {"FedForestRegressor": FedForestRegressor, "FedForestClassifier": FedForestClassifier},
    )
    return model
