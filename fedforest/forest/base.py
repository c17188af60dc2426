"""The estimators' shared base: parameters, fitting, prediction (:mod:`fedforest.forest`)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from numbers import Integral, Real
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd
from joblib import effective_n_jobs
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from .._inputs import (
    check_bootstrap,
    check_declarations,
    check_federable,
    check_numeric_columns,
    check_targets,
    declared_features,
    estimator_config,
    fit_weights,
    n_columns,
    named,
    pooled_domains,
    take_rows,
    validated_rows,
    warn_caller,
    warn_low_min_rows,
    warn_numeric_declared,
    weights_back,
    with_codes,
)
from .._io import save_model
from ..diagnostics import DiagnosticReport, MultiOutputTargets, diagnose
from ..federated.categorical import categorical_columns, named_columns, pandas_frame
from ..federated.cells import refuse_nested
from ..federated.client import Client
from ..federated.federation import Federation
from ..federated.privacy.dp import compose_reports
from ..federated.protocol import CommunicationLedger
from ..federated.row_clients import client_index
from ..federated.server.config import ForestResult, GrowerConfig
from ..federated.server.grower import forest_importances, grow_forest
from ..federated.server.secure import check_config
from ..transport.local import LocalFederation
from ..tree.apply import apply_forest_sets, predict_forest
from ..tree.arrays import Tree, pack_forest, pack_sets
from ..tree.sklearn import EnsembleMixin
from .leaves import warn_single_leaves
from .warm import (
    NO_NEW_TREES,
    NOTHING_TO_ADD,
    check_warm_classes,
    fewer_trees,
    warm_prior,
    warm_schema,
)

_ROW_CHUNK = 65536


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _is_dask(*objs: Any) -> bool:
    """Any of ``objs`` a Dask collection (tested without importing Dask)."""
    return any(hasattr(type(obj), "__dask_graph__") for obj in objs)


def _refuse_futures(**named: Any) -> None:
    """A ValueError for a ``distributed.Future`` (or a list of them) given as rows.

    Futures are not collections: read as rows in memory they failed deep in NumPy
    ("float() argument must be ... not 'Future'"). The rows they hold stay on the workers
    once wrapped as a Dask collection, which ``fit`` and ``predict`` take.
    """
    for name, obj in named.items():
        first = obj[0] if isinstance(obj, list | tuple) and obj else obj
        kind = type(first)
        if kind.__name__ == "Future" and kind.__module__.startswith("distributed"):
            raise ValueError(
                f"{name} is a distributed Future (or a list of them); give a Dask collection "
                "of the rows, which then stay on the workers: dask.dataframe.from_delayed("
                "futures, meta=...) or dask.array.from_delayed(future, shape, dtype) "
                "(docs/scale.md)."
            )


def _dask_aware(method: _Method) -> _Method:
    """On a Dask collection, ``method`` runs partition by partition, returning a Dask Array."""

    @functools.wraps(method)
    def run(self: Any, X: Any, *, client_ids: Any = None) -> Any:
        _refuse_futures(X=X, client_ids=client_ids)
        if _is_dask(X, client_ids):
            from ..transport.dask import _estimators  # Dask is imported for Dask input only

            return _estimators.map_method(self, method.__name__, X, client_ids)
        return method(self, X, client_ids=client_ids)

    return cast(_Method, run)


class _DaskScore:
    """``score`` on Dask collections: computed on the workers, only sums come back.

    Placed first among the estimators' bases: scikit-learn's metrics read ``y`` and the
    predictions as arrays in memory, which on Dask failed ("Cannot call len() on object
    with unknown chunk size") or gathered every prediction here.
    """

    def score(self, X: Any, y: Any, sample_weight: Any = None, *, client_ids: Any = None) -> float:
        """R^2 (regressor) or accuracy (classifier) of ``predict(X)`` against ``y``.

        On Dask collections (``X``, ``y`` and ``sample_weight`` partitioned alike) each
        partition's sums are computed where it lives (docs/scale.md); otherwise the
        metric of the estimator's mixin, on the rows in memory.
        """
        _refuse_futures(X=X, y=y, sample_weight=sample_weight, client_ids=client_ids)
        if _is_dask(X, y, sample_weight, client_ids):
            from ..transport.dask import _estimators  # Dask is imported for Dask input only

            return _estimators.score(self, X, y, sample_weight, client_ids)
        return cast(float, super().score(X, y, sample_weight, client_ids=client_ids))  # type: ignore[misc]


def _client_code(index: dict[str, int], label: Any) -> int:
    """A client label's position in ``clients_`` (-1: unknown), its names being text.

    A number is found as the same number of the other type too (``1.0`` for client
    ``1``, ``1`` for client ``1.0``): ``fit`` takes them as one client (``np.unique``),
    and a column of ids turns float (a merge, a CSV with a gap) between fit and predict.
    """
    code = index.get(str(label))
    if code is None and isinstance(label, (int, float)) and not isinstance(label, bool):
        if float(label).is_integer():
            code = index.get(str(int(label)), index.get(str(float(label))))
    return -1 if code is None else code


def _avgimp_fits(cfg: GrowerConfig) -> bool:
    """Whether the settings take AvgImp + Top-L, which ``split_rule="auto"`` may pick.

    AvgImp sums no weights and sees no children's values (class_weight,
    min_weight_fraction_leaf, monotonic_cst, Poisson); Top-L needs the clients' sketches
    (not binning="global" nor n_bins=None).
    """
    monotonic = cfg.monotonic_cst is not None and bool(np.any(np.asarray(cfg.monotonic_cst)))
    return not (
        cfg.class_weight is not None
        or cfg.min_weight_fraction_leaf
        or monotonic
        or cfg.criterion == "poisson"
        or cfg.binning == "global"
        or cfg.n_bins is None
    )


class _BaseFedForest(EnsembleMixin, BaseEstimator):
    """Parameters and fitting shared by the regressor and the classifier."""

    _task = "regression"
    _parameter_constraints: dict[str, list[Any]] = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "min_samples_split": [
            Interval(Integral, 2, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="right"),
        ],
        "min_samples_leaf": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="neither"),
        ],
        "min_impurity_decrease": [Interval(Real, 0.0, None, closed="left")],
        "min_weight_fraction_leaf": [Interval(Real, 0.0, 0.5, closed="both")],
        "ccp_alpha": [Interval(Real, 0.0, None, closed="left")],
        "monotonic_cst": ["array-like", None],
        "max_features": [
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0.0, 1.0, closed="right"),
            StrOptions({"sqrt", "log2"}),
            None,
        ],
        "n_bins": [Interval(Integral, 2, None, closed="left"), None],
        "local_candidates": ["boolean", None],
        "binning": [StrOptions({"quantile", "global"})],
        "bootstrap": ["boolean"],
        "oob_score": ["boolean", callable],
        "random_state": ["random_state"],
        "n_jobs": [  # scikit-learn's convention: None, -1 (all cores), -2..., or >= 1
            Interval(Integral, None, -1, closed="right"),
            Interval(Integral, 1, None, closed="left"),
            None,
        ],
        "verbose": ["verbose"],
        "tree_batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "split_on_client": ["boolean"],
        "categorical_features": ["array-like", None],
        "categories": [dict, StrOptions({"from_dtype"}), None],
        "split_rule": [StrOptions({"exact", "avgimp", "auto"})],
        "top_l": [Interval(Integral, 1, None, closed="left"), None],
        "client_fraction": [Interval(Real, 0.0, 1.0, closed="right")],
        "warm_start": ["boolean"],
        "max_leaf_nodes": [None, Interval(Integral, 2, None, closed="left")],
        "max_samples": [
            None,
            Interval(RealNotInt, 0.0, 1.0, closed="right"),
            Interval(Integral, 1, None, closed="left"),
        ],
        "on_client_failure": [StrOptions({"raise", "drop"})],
        "privacy": [StrOptions({"secure", "dp", "none"})],
        "min_aggregate_rows": [Interval(Integral, 1, None, closed="left"), None],
        "epsilon": [Interval(Real, 0.0, None, closed="neither"), None],
        "delta": [Interval(Real, 0.0, 1.0, closed="neither"), None],
        "dp_colluders": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        n_estimators: int = 50,
        *,
        criterion: str = "squared_error",
        max_depth: int | None = 8,
        min_samples_split: int = 2,
        min_samples_leaf: int = 5,
        min_impurity_decrease: float = 0.0,
        min_weight_fraction_leaf: float = 0.0,
        ccp_alpha: float = 0.0,
        monotonic_cst: Any = None,
        max_features: Any = 1 / 3,
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
    ) -> None:
        self.n_estimators = n_estimators
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_impurity_decrease = min_impurity_decrease
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.ccp_alpha = ccp_alpha
        self.monotonic_cst = monotonic_cst
        self.max_features = max_features
        self.n_bins = n_bins
        self.local_candidates = local_candidates
        self.binning = binning
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.tree_batch_size = tree_batch_size
        self.split_on_client = split_on_client
        self.categorical_features = categorical_features
        self.categories = categories
        self.split_rule = split_rule
        self.top_l = top_l
        self.client_fraction = client_fraction
        self.max_samples = max_samples
        self.warm_start = warm_start
        self.max_leaf_nodes = max_leaf_nodes
        self.on_client_failure = on_client_failure
        self.privacy = privacy
        self.min_aggregate_rows = min_aggregate_rows
        self.epsilon = epsilon
        self.delta = delta
        self.dp_colluders = dp_colluders

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        client_ids: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> Any:
        """Train on rows partitioned by ``client_ids`` (simulation mode).

        One :class:`~fedforest.Client` is built per distinct id (named ``str(id)``) holding
        its rows in their original order, and the forest is grown through an in-process
        :class:`~fedforest.LocalFederation`; ``fit_federated`` on the same clients gives the
        same forest. Invalid input raises one ``ValueError`` naming the argument and leaves
        the estimator unfitted.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric features (no infinity); NaN is a missing value, as in scikit-learn.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets: numbers (regressor) or class labels (classifier); several columns
            are multi-output y.
        client_ids : array-like of shape (n_samples,), default=None
            One client label per row; None puts every row in one client.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights, as scikit-learn's: each multiplies its row's
            bootstrap count in every sum (each client keeps its rows' weights). Not under
            ``privacy="dp"``.

        Dask collections (``X``, ``y`` and ``client_ids`` partitioned alike) train through
        a :class:`~fedforest.transport.dask.DaskFederation`, the rows staying on the
        workers: ``client_ids`` is then a Dask collection of labels, ``"partition"`` (the
        default for Dask: a client per partition, named by its number) or ``"worker"``
        (docs/scale.md).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        _refuse_futures(X=X, y=y, client_ids=client_ids, sample_weight=sample_weight)
        if _is_dask(X, y, client_ids):
            if sample_weight is not None:
                raise ValueError(
                    "sample_weight with Dask collections: give each client its weights in a "
                    "Client(sample_weight=...) of its own and fit_federated instead."
                )
            from ..transport.dask import _estimators  # Dask is imported for Dask input only

            return _estimators.fit(self, X, y, client_ids)
        X = pandas_frame(X)  # pyarrow's or polars' frame: text columns categorical
        if fewer_trees(self):  # scikit-learn's order: the parameters, the inputs (checked,
            self._check_settings(warn=False)  # the forest kept), the settings' warnings,
            self._fit_inputs(X, y, client_ids, sample_weight, reset=False)
            self._warn_settings()  # the bootstrap's checks, then the refusal (warm_prior)
            check_bootstrap(self.bootstrap, self.oob_score, self.max_samples)
        warm = warm_prior(self)
        if warm is NOTHING_TO_ADD:  # no tree to add; the inputs are checked all the same,
            # as scikit-learn's forest checks them (they were taken unread: y of NaN, say);
            # its warnings in its order: the settings' (a class_weight preset under
            # warm_start), then that no tree is added (before the inputs', as it was)
            self._check_settings()
            warn_caller(NO_NEW_TREES, UserWarning)
            check_bootstrap(self.bootstrap, self.oob_score, self.max_samples)
            self._fit_inputs(X, y, client_ids, sample_weight, reset=False)
            return self
        self._clear_fitted()
        try:
            self._check_settings()
            check_bootstrap(self.bootstrap, self.oob_score, self.max_samples)
            cat_cols, X_arr, y_arr, fit_classes, inverse, labels, weights = self._fit_inputs(
                X, y, client_ids, sample_weight
            )
            undeclared = self.privacy == "dp" and self.categories is None and cat_cols
            self._fit_categories = pooled_domains(X, cat_cols) if undeclared else None
            check_warm_classes(warm, fit_classes)
            self._label_codes = fit_classes  # class_weight's labels become these codes
            weights, w_exp = fit_weights(weights, self.privacy)
            # Categorical columns reach the clients raw: the handshake fixes their codes,
            # exactly as it does for clients built by the user.
            clients = [
                Client(
                    take_rows(X, inverse == k) if cat_cols else X_arr[inverse == k],
                    y_arr[inverse == k],
                    name=label,
                    categorical_features=cat_cols or None,
                    sample_weight=None if weights is None else weights[inverse == k],
                )
                for k, label in enumerate(labels)
            ]
            named(clients, getattr(self, "feature_names_in_", None))
            result = self._grow(LocalFederation(clients, n_jobs=self.n_jobs), warm)
            self._store(weights_back(result, w_exp), fit_classes, warm)
            self._oob_from_clients(clients, inverse, X_arr.shape[0])
            self._oob_metric(y_arr)
        except BaseException:
            self._restore(warm)
            raise
        return self

    def _fit_inputs(
        self,
        X: ArrayLike,
        y: ArrayLike,
        client_ids: ArrayLike | None,
        sample_weight: ArrayLike | None,
        reset: bool = True,
    ) -> tuple[list[int], NDArray[np.float64], NDArray[Any], Any, Any, list[Any], Any]:
        """``fit``'s arguments checked and converted.

        ``reset=False`` checks X against the fitted columns and leaves the estimator as it
        was. Returns the categorical columns, X as floats (categories as codes), the encoded
        targets and the class labels they encode (or None), each row's client number, the
        client labels and the sample weights (or None).
        """
        check_targets(X, y, self._task)
        refuse_nested(X)  # before a categorical column's levels are hashed
        features = declared_features(self.categorical_features, self.categories)
        if isinstance(self.categories, dict):  # said as fit_federated's clients say it
            names = [str(c) for c in X.columns] if isinstance(X, pd.DataFrame) else None
            for key, j in named_columns(list(self.categories), n_columns(X), names):
                if j is None:  # was "categorical_features names ...", not set by the user
                    raise ValueError(
                        f"the declared categories name column {key!r}, which is not a column "
                        f"of X (columns: {names or list(range(n_columns(X)))})."
                    )
        cat_cols = categorical_columns(X, features, n_columns(X), "X")
        X_check = with_codes(X, cat_cols, None)
        check_numeric_columns(X_check)
        X_arr, y_arr = validate_data(
            self,
            X_check,
            y,
            reset=reset,
            dtype=np.float64,
            ensure_all_finite="allow-nan",
            y_numeric=self._task == "regression",
            multi_output=True,
        )
        y_arr, fit_classes = self._encode_y(y_arr)
        inverse, labels = client_index(client_ids, X_arr.shape[0])
        weights = (
            None
            if sample_weight is None
            else _check_sample_weight(sample_weight, X_arr, ensure_non_negative=True)
        )
        return cat_cols, X_arr, y_arr, fit_classes, inverse, labels, weights

    def fit_federated(self, federation: Federation | Sequence[Client]) -> Any:
        """Train through a federation of clients that keep their own rows.

        The handshake checks that the clients agree on their columns; a mismatch, like any
        other invalid input, raises a ``ValueError`` naming the client and leaves the
        estimator as it was (unfitted; under ``warm_start``, with its earlier forest).

        Parameters
        ----------
        federation : Federation or sequence of Client
            E.g. ``LocalFederation([Client(X_k, y_k, name=...), ...])``; a list (or tuple)
            of ``Client`` objects is ``LocalFederation(clients, n_jobs=n_jobs)``.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        if fewer_trees(self):  # as fit: the settings checked and warned of first
            self._check_settings()
            check_bootstrap(self.bootstrap, self.oob_score, self.max_samples)
        warm = warm_prior(self)
        if warm is NOTHING_TO_ADD:  # as fit: the settings checked and warned of first
            self._check_settings()
            warn_caller(NO_NEW_TREES, UserWarning)
            return self
        self._clear_fitted()
        try:
            self._check_settings()
            if callable(self.oob_score):
                raise ValueError(
                    "A callable oob_score needs every row's out-of-bag prediction in one "
                    "place; under fit_federated they stay on the clients, which return only "
                    "sums (accuracy or R^2 with oob_score=True). Use fit(...) to simulate."
                )
            if isinstance(federation, (Sequence, Mapping)) and not isinstance(federation, str):
                # Clients in this process (LocalFederation's checks name a wrong item).
                federation = LocalFederation(federation, n_jobs=self.n_jobs)
            if not isinstance(federation, Federation):
                raise ValueError(
                    "federation must be a fedforest Federation (e.g. LocalFederation) or a "
                    f"list of fedforest.Client, got {type(federation).__name__}."
                )
            check_bootstrap(self.bootstrap, self.oob_score, self.max_samples)
            self._label_codes = self._fit_categories = None  # the clients' own labels
            result = self._grow(federation, warm)
            self._store(result, None, warm)
            self.n_features_in_ = result.n_features
            if result.feature_names is not None:
                self.feature_names_in_ = np.asarray(result.feature_names, dtype=object)
            warn_numeric_declared(self)
        except BaseException:
            self._restore(warm)  # as fit: a warm start keeps the forest it had
            raise
        return self

    def _restore(self, warm: dict[str, Any] | None) -> None:
        """After a failed fit: nothing half-trained; a warm start keeps the forest it had."""
        self._clear_fitted()
        if warm is not None:
            self.__dict__.update(warm)

    def _grow(self, fed: Federation, warm: dict[str, Any] | None = None) -> ForestResult:
        """Grow the forest; with ``split_rule="auto"`` run the diagnostics first."""
        cfg = self._config()
        if warm is not None:
            # The new trees' seeds are those of one fit: the first fit's seed, their indices.
            first, digest = len(warm["trees_"]), warm.get("_settings_digest")
            cfg = replace(cfg, first_tree=first, seed=warm["_seed"], warm_digest=digest)
            cfg = replace(cfg, warm_schema=warm_schema(warm, self))
        self._seed = cfg.seed
        if cfg.privacy != "none":
            check_config(cfg)  # before anything reaches the clients
        if self.split_rule == "auto":
            cfg = self._auto_rule(fed, cfg)
        self.split_rule_ = cfg.split_rule
        return grow_forest(fed, cfg, *((warm["trees_"], warm.get("_guides_")) if warm else ()))

    def _auto_rule(self, fed: Federation, cfg: GrowerConfig) -> GrowerConfig:
        """``split_rule="auto"``: the diagnostics, then the rule they and the settings allow.

        AvgImp + Top-L (L = 3, or every feature of fewer: 3 on 2 features was refused, "top_l
        must be in [1, n_features]", a parameter the user had not set) only when neither
        test rejects and the settings take them (else auto's pick was refused, naming
        "avgimp"); H-splits when outcomes differ by client. A multi-output y (regression or
        classification), which the diagnostics do not test, gets the exact rule
        (``diagnostics_`` None).
        """
        try:
            report: DiagnosticReport | None = diagnose(
                federation=fed,
                privacy="none",
                task=cfg.task,
                max_depth=cfg.max_depth,
                min_samples_leaf=cfg.min_samples_leaf,
                random_state=cfg.seed,
            )
        except MultiOutputTargets:
            report = None
        differ = report is not None and report.outcome_heterogeneity
        iid = report is not None and not (report.covariate_shift or differ)
        iid = iid and _avgimp_fits(cfg)
        d = report.n_features if report is not None else 3
        self.diagnostics_ = report
        return replace(
            cfg,
            split_rule="avgimp" if iid else "exact",
            top_l=(self.top_l or min(3, d)) if iid else self.top_l,
            split_on_client=self.split_on_client or differ,
        )

    def _check_settings(self, warn: bool = True) -> None:
        """The checks every fit starts with (``fit`` and ``fit_federated`` alike).

        ``warn=False`` leaves out :meth:`_warn_settings`, which the caller gives later.
        """
        check_federable(self.criterion, self.max_leaf_nodes)  # says why, before the check
        self._validate_params()
        check_declarations(getattr(self, "class_weight", None), self.categories)
        if warn:
            self._warn_settings()

    def _warn_settings(self) -> None:
        """The settings' warnings (the classifier adds its class_weight preset's)."""
        warn_low_min_rows(self.privacy, self.min_aggregate_rows)

    def _clear_fitted(self) -> None:
        """Drop every fitted attribute, so a failed fit leaves nothing half-trained."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)
        for name in ("_forest", "_routing", "_sets", "_feature_importances", "_sklearn_trees"):
            self.__dict__.pop(name, None)
        for name in ("_tree_importances", "_fit_class_list", "_seed", "_settings_digest"):
            self.__dict__.pop(name, None)

    def _config(self) -> GrowerConfig:
        return estimator_config(self)  # with the declared categories and classes

    def _class_weight(self) -> Any:
        """Classifier hook: ``class_weight`` with its labels as the clients report them."""
        return None

    def _encode_y(self, y: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any] | None]:
        """Targets as the clients receive them, and the class labels they encode (or None).

        A regressor's y of several columns is multi-output; one column warns (scikit-learn's
        DataConversionWarning) and is 1-D.
        """
        y = np.asarray(y, dtype=np.float64)
        if self.criterion == "poisson" and np.any(y < 0):  # scikit-learn's messages
            raise ValueError(
                "Some value(s) of y are negative which is not allowed for Poisson regression."
            )
        if self.criterion == "poisson" and not np.sum(y) > 0:
            raise ValueError(
                "Sum of y is not strictly positive which is necessary for Poisson regression."
            )
        multi = y.ndim == 2 and y.shape[1] > 1
        return (y if multi else column_or_1d(y, warn=True).astype(np.float64)), None

    def _store(
        self,
        result: ForestResult,
        fit_classes: NDArray[Any] | None,
        warm: dict[str, Any] | None = None,
    ) -> None:
        trees, per_tree = result.trees, result.tree_importances
        if warm is not None:
            if result.classes != warm.get("_fit_class_list") or result.n_features != warm.get(
                "n_features_in_", result.n_features
            ):
                raise ValueError(
                    "warm_start needs the same clients' columns and classes as the first fit; "
                    "set warm_start=False to fit a new forest."
                )
            trees = warm["trees_"] + trees
            per_tree = np.vstack([warm["_tree_importances"], per_tree])
        self.trees_: list[Tree] = trees
        self.communication_: CommunicationLedger = result.ledger
        self._tree_importances = per_tree
        self._fit_class_list, self._guides_ = result.classes, result.guides
        same = warm is None or warm.get("_settings_digest") == result.settings_digest
        self._settings_digest = result.settings_digest if same else ""
        # Normalised over every split feature (H last under split_on_client), then split.
        importances, d = forest_importances(per_tree), result.n_features
        self._feature_importances = importances[:d]
        self.client_importance_ = float(importances[d:].sum())
        self.n_clients_ = len(result.client_n_samples)
        self.clients_ = np.asarray(result.clients, dtype=object)
        self.categories_ = {int(j): list(v) for j, v in result.categories.items()}
        self.dropped_clients_ = list(result.dropped_clients)
        self.dropped_reasons_ = dict(result.dropped_reasons)
        if result.oob_score is not None:
            self.oob_score_ = result.oob_score
        if result.privacy_report is not None:  # under warm_start, the fits' budgets add up
            self.privacy_report_ = compose_reports(
                (warm or {}).get("privacy_report_"), result.privacy_report
            )
        self._set_classes(result.classes, fit_classes, result.label_dtype)
        self._pack()
        warn_single_leaves(self, result)

    def _set_classes(
        self, classes: list[Any] | None, fit_classes: Any, dtype: str | None = None
    ) -> None:
        """Classifier hook: ``classes_`` from the handshake's class list (``dtype``: y's)."""

    def _pack(self) -> None:
        self._forest = pack_forest(self.trees_)
        self._sets = pack_sets(self.trees_)
        feature, threshold, left, right, _, _ = self._forest
        # What routing needs, in the kernels' argument order.
        self._routing = (feature, threshold, left, right, *self._sets)

    def _oob_from_clients(self, clients: list[Client], inverse: NDArray[np.int64], n: int) -> None:
        """Simulation mode: gather the clients' own OOB predictions into training-row order."""
        if not self.oob_score:
            return
        # A client dropped under on_client_failure="drop" has no OOB prediction: NaN rows.
        scored = [c.oob_prediction_ for c in clients if c.oob_prediction_ is not None]
        pred = np.full((n, scored[0].shape[1] if scored else 1), np.nan)
        for k, client in enumerate(clients):
            if client.oob_prediction_ is not None:
                pred[inverse == k] = client.oob_prediction_
        self._set_oob_prediction(pred)

    def _set_oob_prediction(self, pred: NDArray[np.float64]) -> None:
        self.oob_prediction_ = pred[:, 0] if pred.shape[1] == 1 else pred

    def _oob_metric(self, y: NDArray[Any]) -> None:
        """A callable ``oob_score``: ``metric(y_true, y_pred)`` on the rows out of some bag.

        As scikit-learn: the regressor's ``oob_prediction_``; for the classifier the encoded
        classes (indices into ``classes_``) of ``y`` and of the OOB class probabilities.
        """
        if not callable(self.oob_score):
            return
        proba = getattr(self, "oob_decision_function_", None)
        if proba is None:
            pred = self.oob_prediction_
            ok = ~np.isnan(pred).reshape(len(pred), -1).any(axis=1)
        else:
            ok = ~np.isnan(proba).reshape(len(proba), -1).any(axis=1)
            pred = np.argmax(np.nan_to_num(proba), axis=1)
        self.oob_score_ = float(self.oob_score(y[ok], pred[ok]))

    # ------------------------------------------------------------------ prediction
    def _augmented(self, X: ArrayLike, client_ids: ArrayLike | None) -> NDArray[np.float64]:
        """Validated X with categories as codes and the client code column appended.

        Unseen categories and unknown clients get code -1: the marginal rule.
        """
        check_is_fitted(self, "trees_")
        X_arr = validated_rows(self, X)
        codes = np.full(X_arr.shape[0], -1.0)
        if client_ids is not None:
            ids = np.asarray(client_ids)
            if ids.ndim != 1 or ids.shape[0] != X_arr.shape[0]:
                raise ValueError(
                    f"client_ids has shape {ids.shape}; expected ({X_arr.shape[0]},), one client "
                    "label per row of X."
                )
            index = {str(name): k for k, name in enumerate(self.clients_)}
            codes = np.array([_client_code(index, h) for h in ids.tolist()], dtype=np.float64)
        return np.ascontiguousarray(np.column_stack([X_arr, codes]))

    def _in_chunks(self, n: int, run: Any) -> None:
        """``run(rows)`` over row chunks, in threads when ``n_jobs`` allows."""
        chunks = [slice(i, i + _ROW_CHUNK) for i in range(0, n, _ROW_CHUNK)]
        n_threads = min(len(chunks), effective_n_jobs(self.n_jobs))
        if n_threads <= 1:
            for sl in chunks:
                run(sl)
        else:
            with ThreadPoolExecutor(n_threads) as pool:
                list(pool.map(run, chunks))

    def _mean_value(self, X: ArrayLike, client_ids: ArrayLike | None) -> NDArray[np.float64]:
        X_aug = self._augmented(X, client_ids)
        value, offsets = self._forest[4], self._forest[5]
        out = np.zeros((X_aug.shape[0], value.shape[1]))

        def run(sl: slice) -> None:
            predict_forest(X_aug[sl], *self._routing, value, offsets, out[sl])

        self._in_chunks(X_aug.shape[0], run)
        return out / len(self.trees_)

    @_dask_aware
    def apply(self, X: ArrayLike, *, client_ids: ArrayLike | None = None) -> NDArray[np.int64]:
        """Leaf index of every row in every tree, shape (n_samples, n_estimators).

        A row whose category or client a set split has not seen takes the heavier child.
        """
        X_aug = self._augmented(X, client_ids)
        offsets = self._forest[5]
        out = np.empty((X_aug.shape[0], len(self.trees_)), dtype=np.int32)

        def run(sl: slice) -> None:
            apply_forest_sets(X_aug[sl], *self._routing, offsets, out[sl])

        self._in_chunks(X_aug.shape[0], run)
        return (out - offsets[:-1][None, :]).astype(np.int64)

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the fitted model to ``path`` in fedforest's safe format (no pickle)."""
        save_model(self, path)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = tags.input_tags.sparse = True  # NaN: missing; sparse: dense
        # Text columns are categorical (a DataFrame's; an array's when declared). Not
        # ``categorical``: scikit-learn's checks read it as "X must be category codes" and
        # round their X, where fedforest reads numbers as numbers (so does
        # HistGradientBoosting, which takes categorical columns and leaves it False).
        tags.input_tags.string = True
        tags.target_tags.multi_output = True  # multi-output y, at every privacy level
        # "dp" noise is drawn from the operating system's generator, not from random_state
        tags.non_deterministic = self.privacy == "dp"
        return tags
