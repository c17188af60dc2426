"""A swarm peer: trains on its own columns and shares a bundle (see :mod:`fedforest.swarm`).

``fit_intersection`` (the training-time baseline on the shared columns only) and
``shared_columns`` live here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import column_or_1d

from .._common import is_int_in
from ..federated.categorical import (
    categorical_columns,
    check_levels,
    encode,
    pandas_frame,
    sort_categories,
)
from ..federated.privacy.rules import default_min_rows
from ..forest import FedForestClassifier
from ..tree.arrays import Tree
from .bundle import ShareBundle
from .columns import declared_columns, floats, is_numeric, is_text, labels
from .pool import check_n_jobs
from .train import Imputer, fit_imputer, forest_surrogates, trees_from_sklearn

__all__ = ["Peer", "fit_intersection", "shared_columns"]

ENGINES = ("sklearn", "fedforest")


def _site_frame(
    X: Any,
    categorical_features: Sequence[str] | None,
    categories: Mapping[str, Sequence[Any]] | None = None,
) -> tuple[NDArray[np.float64], tuple[str, ...], tuple[str, ...], dict[str, tuple[Any, ...]]]:
    """Training matrix, column names, kinds and category lists (validated once, here).

    Text columns (pandas ``str`` / object, or ``category`` with non-numeric categories) and
    the columns named in ``categories`` are categorical and coded as the index of each value
    in the column's sorted category list (the order fedforest's federation uses), which is
    returned by column name and travels in the bundle.
    """
    X = pandas_frame(X)  # pyarrow's or polars' frame
    if not isinstance(X, pd.DataFrame):
        raise TypeError(
            f"X must be a pandas DataFrame whose column names are the peer's feature names, "
            f"got {type(X).__name__}"
        )
    names = tuple(str(c) for c in X.columns)
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"X needs distinct, non-empty column names, got {list(X.columns)}")
    declared = declared_columns(categorical_features, names)
    given = {str(k): v for k, v in (categories or {}).items()}
    unknown = set(given) - set(names)
    if unknown:
        raise ValueError(f"categories names {sorted(unknown)}, which are not columns of X")
    # Text of numbers (" 3 ", "1,5", a "?" among numbers) warns as in the estimators' fit
    categorical_columns(X, sorted(declared | set(given)), len(names), "X")
    kinds, cols = [], []
    lists: dict[str, tuple[Any, ...]] = {}
    for name, col in zip(names, X.columns, strict=True):
        series = X[col]
        text = is_text(series)
        if name in given or text:
            values = np.asarray(series, dtype=object)
            if pd.isna(values).any():
                raise ValueError(
                    f"column {name!r} holds missing values; a peer trains on complete rows"
                )
            if name in given:
                cats = sort_categories(given[name])
            elif isinstance(series.dtype, pd.CategoricalDtype):
                cats = sort_categories(series.cat.categories)  # the declared categories
            else:
                cats = sort_categories(set(values.tolist()))
            levels = np.empty(len(cats), dtype=object)
            levels[:] = cats
            check_levels(levels, None, "X", repr(name))  # as the estimators (share refused)
            codes = encode(values, cats)
            if (codes < 0).any():
                bad = values[np.flatnonzero(codes < 0)[0]]
                raise ValueError(
                    f"column {name!r} holds {bad!r}, which is not in its categories {cats}"
                )
            declared.add(name)
            lists[name] = tuple(cats)
            kinds.append("categorical")
            cols.append(codes)
            continue
        if isinstance(series.dtype, pd.CategoricalDtype):
            declared.add(name)
            series = series.astype(series.cat.categories.dtype)
        elif not is_numeric(series):
            raise ValueError(
                f"column {name!r} has dtype {series.dtype}; swarm peers need numeric columns, "
                "text (categorical) columns or pandas 'category' ones"
            )
        kinds.append("categorical" if name in declared else "numeric")
        cols.append(floats(series))
    arr = np.column_stack(cols) if cols else np.zeros((len(X), 0))
    if not np.isfinite(arr).all():
        bad = names[int(np.flatnonzero(~np.isfinite(arr).all(axis=0))[0])]
        raise ValueError(
            f"column {bad!r} holds NaN or infinite values; a peer trains on complete rows"
        )
    return arr, names, tuple(kinds), lists


def _check_params(name: Any, engine: Any, n_surrogates: Any, min_aggregate_rows: Any) -> None:
    """Refuse a bad :class:`Peer` parameter, naming it (at construction, fit and share)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if engine == "imported":  # what Peer.from_fitted sets; clone() passes it back here
        raise ValueError(
            "engine='imported' is a Peer.from_fitted peer's: it wraps a forest fitted "
            "elsewhere and has no engine to train one, so it cannot be cloned or fitted; "
            "clone the estimator and wrap it again with Peer.from_fitted(name, estimator, "
            "X, y)"
        )
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if not is_int_in(n_surrogates, numpy=True):  # NumPy's ints as scikit-learn's Integral
        raise ValueError(f"n_surrogates must be an int >= 0, got {n_surrogates!r}")
    if min_aggregate_rows is not None and engine != "fedforest":
        raise ValueError(
            f"min_aggregate_rows={min_aggregate_rows!r} applies to engine='fedforest' (the "
            f"floor of its privacy='secure'); engine={engine!r} has none: use "
            "min_samples_leaf"
        )


class Peer(BaseEstimator):
    """A swarm site: trains a random forest on its own columns and shares it.

    Parameters
    ----------
    name : str
        The peer's name (``site=`` of :meth:`SwarmForest.predict_proba`).
    n_estimators : int, default=100
    random_state : int or None, default=None
        Seeds the forest and the imputers' cross-validation folds.
    engine : {"sklearn", "fedforest"}, default="sklearn"
        scikit-learn's ``RandomForestClassifier`` (imported into the flat format), or
        fedforest's own ``FedForestClassifier`` with one client.
    max_depth : int or None, default=None
    min_samples_leaf : int, default=1
    max_features : int, float, "sqrt", "log2" or None, default="sqrt"
    n_surrogates : int, default=3
        Surrogate splits kept per node (ranked); the first one available is used.
    n_jobs : int or None, default=None
        Threads of the forest fit (scikit-learn's convention: -1 every core; 0 is
        refused, when the peer is built and at fit).
    min_aggregate_rows : int or None, default=None
        ``engine="fedforest"`` only (its ``privacy="secure"``): the fewest rows behind any
        sum the forest is grown from, so behind every leaf of the bundle. None means
        ``max(10, 2 * min_samples_leaf)``; below 10 warns, as the estimators do. A peer
        with fewer rows is refused, saying so.

    Attributes
    ----------
    feature_names_, feature_kinds_ : tuple of str
    n_features_in_ : int
        Number of columns of the X it was fitted on (scikit-learn's attribute).
    feature_names_in_ : ndarray of object, shape (n_features_in_,)
        Their names (scikit-learn's attribute; ``feature_names_`` as an array).
    categories_ : dict of str to tuple
        The sorted category list of each text column (its codes are indices in it).
    classes_ : ndarray
    trees_ : list of Tree
    n_train_ : int
    """

    def __init__(
        self,
        name: str,
        n_estimators: int = 100,
        random_state: int | None = None,
        engine: str = "sklearn",
        *,
        max_depth: int | None = None,
        min_samples_leaf: int = 1,
        max_features: Any = "sqrt",
        n_surrogates: int = 3,
        n_jobs: int | None = None,
        min_aggregate_rows: int | None = None,
    ) -> None:
        _check_params(name, engine, n_surrogates, min_aggregate_rows)
        check_n_jobs(n_jobs, "Peer")
        self.name = name
        self.n_estimators = n_estimators
        self.random_state = random_state
        self.engine = engine
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.n_surrogates = int(n_surrogates)
        self.n_jobs = n_jobs
        self.min_aggregate_rows = min_aggregate_rows

    def __repr__(self) -> str:
        return f"Peer(name={self.name!r}, n_estimators={self.n_estimators}, engine={self.engine!r})"

    def _params(self) -> dict[str, Any]:
        return {
            "n_estimators": self.n_estimators,
            "random_state": self.random_state,
            "engine": self.engine,
            "max_depth": self.max_depth,
            "min_samples_leaf": self.min_samples_leaf,
            "max_features": self.max_features,
            "n_surrogates": self.n_surrogates,
            "n_jobs": self.n_jobs,
            "min_aggregate_rows": self.min_aggregate_rows,
        }

    def fit(
        self,
        X: pd.DataFrame,
        y: ArrayLike,
        categorical_features: Sequence[str] | None = None,
        *,
        categories: Mapping[str, Sequence[Any]] | None = None,
    ) -> Peer:
        """Train the peer's forest on its own columns.

        Parameters
        ----------
        X : DataFrame, shape (n_samples, n_features)
            Numeric columns and categorical ones: text columns (pandas ``str`` or object,
            as ``read_csv`` gives them) and pandas ``category`` columns are categorical, and
            so are the numeric codes named in ``categorical_features``.
        y : array-like, shape (n_samples,)
            Class labels (a column vector, shape (n_samples, 1), is taken with
            scikit-learn's ``DataConversionWarning``).
        categorical_features : sequence of column names or indices, or boolean mask, optional
            Numeric columns holding category codes that every peer agrees on (resolved as
            the estimators' ``categorical_features``: an integer is a column index).
        categories : mapping of column name to its categories, optional
            The category list of a text column, agreed by the peers. A text column is
            coded by each value's index in its sorted category list: by default the
            values this peer has (a pandas ``category`` column: its declared
            categories). Peers whose lists of a column differ cannot be pooled (their
            codes would differ), so give the same list to every peer when some peer does
            not see every value.

        Returns
        -------
        self : Peer
        """
        # set_params() does not pass through __init__: a bad engine was the fedforest one
        _check_params(self.name, self.engine, self.n_surrogates, self.min_aggregate_rows)
        check_n_jobs(self.n_jobs, "Peer")  # was joblib's words, with engine="sklearn"
        arr, names, kinds, lists = _site_frame(X, categorical_features, categories)
        y_arr = _row_labels(y, arr.shape[0])
        if self.engine == "sklearn":
            from sklearn.ensemble import RandomForestClassifier

            model: Any = RandomForestClassifier(
                n_estimators=self.n_estimators, max_depth=self.max_depth,
                min_samples_leaf=self.min_samples_leaf, max_features=self.max_features,
                random_state=self.random_state, n_jobs=self.n_jobs,
            )  # fmt: skip
            model.fit(arr, y_arr)
            trees, classes = trees_from_sklearn(model)
        else:
            self._check_floor(arr.shape[0])
            model = FedForestClassifier(
                n_estimators=self.n_estimators, max_depth=self.max_depth,
                min_samples_leaf=self.min_samples_leaf, max_features=self.max_features,
                random_state=self.random_state, n_jobs=self.n_jobs,
                min_aggregate_rows=self.min_aggregate_rows,
            )  # fmt: skip
            model._single_leaf_advice = (  # its warning in the peer's own options
                f"(peer {self.name!r}) Give the peer more rows, lower min_aggregate_rows "
                "(below 10 warns) and min_samples_leaf, or use engine='sklearn' (no such "
                "floor; docs/swarm.md says what its bundle then tells)."
            )
            model.fit(arr, y_arr)  # a NumPy matrix: every split is a threshold split
            trees, classes = list(model.trees_), np.asarray(model.classes_)
        self._store(arr, y_arr, names, kinds, trees, classes)
        self.categories_ = lists
        return self

    def _check_floor(self, n_rows: int) -> None:
        """``engine="fedforest"``: refuse a peer of fewer rows than its ``min_aggregate_rows``.

        Said here, naming the peer and its own options: the estimator's refusal speaks of
        a federation's clients and advises ``privacy="none"``, which a peer does not take.
        """
        m, leaf = self.min_aggregate_rows, self.min_samples_leaf
        if isinstance(leaf, float):  # a fraction of the rows, as the estimators count it
            if not 0.0 < leaf < 1.0:
                return  # the estimator's InvalidParameterError names it
            leaf = max(1, int(np.ceil(leaf * n_rows)))
        numbers = [v for v in (m, leaf) if v is not None]
        if not all(is_int_in(v, 1, numpy=True) for v in numbers):
            return  # the estimator's InvalidParameterError names it
        floor = default_min_rows(int(leaf)) if m is None else int(m)
        if n_rows < floor:
            how = "" if m is not None else " (unless set, max(10, 2 * min_samples_leaf))"
            raise ValueError(
                f"peer {self.name!r} has {n_rows} rows, fewer than min_aggregate_rows = "
                f"{floor}{how}: engine='fedforest' grows its forest under privacy='secure', "
                "whose sums and leaves cover at least that many rows. Give the peer more "
                "rows, lower min_aggregate_rows (below 10 warns) and min_samples_leaf, or "
                "use engine='sklearn' (no such floor; docs/swarm.md says what its bundle "
                "then tells)."
            )

    @classmethod
    def from_fitted(
        cls, name: str, estimator: Any, X: pd.DataFrame, y: ArrayLike,
        categorical_features: Sequence[str] | None = None, *, n_surrogates: int = 3,
        random_state: int | None = None,
    ) -> Peer:  # fmt: skip
        """A peer around a forest the user already has (scikit-learn, fitted on ``X``).

        ``X`` and ``y`` are the rows the estimator was trained on: the surrogates and
        imputers are computed from them when the peer shares.

        Parameters
        ----------
        name : str
            The peer's name, as :class:`Peer`'s.
        estimator : RandomForestClassifier, ExtraTreesClassifier or DecisionTreeClassifier
            Fitted on ``X``, single output (:func:`trees_from_sklearn`).
        X : DataFrame, shape (n_samples, n_features)
            Its training rows, with its columns in its order.
        y : array-like, shape (n_samples,)
            Their labels.
        categorical_features : sequence of column names or indices, or boolean mask, optional
            As :meth:`fit`'s.
        n_surrogates : int, default=3
            Surrogate splits kept per node, as :class:`Peer`'s.
        random_state : int or None, default=None
            Seeds the imputers' cross-validation folds, as :class:`Peer`'s.

        Returns
        -------
        Peer
        """
        arr, names, kinds, lists = _site_frame(X, categorical_features)
        trees, classes = trees_from_sklearn(estimator)
        if getattr(estimator, "n_features_in_", arr.shape[1]) != arr.shape[1]:
            raise ValueError(
                f"the estimator was fitted on {estimator.n_features_in_} features but X has "
                f"{arr.shape[1]} columns; give the training frame"
            )
        fitted_names = getattr(estimator, "feature_names_in_", None)
        if fitted_names is not None and [str(c) for c in fitted_names] != list(names):
            # Its trees index the columns in its order: another order reads other columns.
            raise ValueError(
                f"the estimator was fitted on the columns {list(fitted_names)} but X has "
                f"{list(names)}; give X in the estimator's order: "
                "X[list(estimator.feature_names_in_)]"
            )
        peer = cls(
            name, n_estimators=len(trees), random_state=random_state, n_surrogates=n_surrogates
        )
        peer.engine = "imported"
        peer._store(
            arr, _row_labels(y, arr.shape[0]), names, kinds, trees, labels(classes, "classes_")
        )
        peer.categories_ = lists
        return peer

    def _store(
        self, arr: NDArray[np.float64], y: NDArray[Any], names: tuple[str, ...],
        kinds: tuple[str, ...], trees: list[Tree], classes: NDArray[Any],
    ) -> None:  # fmt: skip
        self.X_ = arr
        self.y_ = y
        self.feature_names_ = names
        self.n_features_in_ = len(names)
        self.feature_names_in_ = np.asarray(names, dtype=object)
        self.feature_kinds_ = kinds
        self.trees_ = trees
        self.classes_ = classes
        self.n_train_ = int(arr.shape[0])

    def share(
        self, shared_features: Sequence[str] | None = None, *, surrogates: bool = True,
        imputers: bool = True,
    ) -> ShareBundle:  # fmt: skip
        """The bundle this peer sends to the others.

        Parameters
        ----------
        shared_features : sequence of str, optional
            The features every peer has (see :func:`shared_columns`). Surrogate splits
            are searched among them and every other feature gets an imputer that reads
            them, as in the paper. None: every other feature of this peer is a candidate
            surrogate, and every feature gets an imputer from all the others (usable only
            at sites that have all of them).
        surrogates, imputers : bool, default=True
            Compute the surrogate splits / imputers (skip them for baselines that never
            resolve a missing split, e.g. :func:`fit_intersection` forests).

        Returns
        -------
        ShareBundle
        """
        if not hasattr(self, "trees_"):
            raise NotFittedError(f"peer {self.name!r} is not fitted; call fit() first")
        if not is_int_in(self.n_surrogates, numpy=True):  # set_params() after fit()
            raise ValueError(f"n_surrogates must be an int >= 0, got {self.n_surrogates!r}")
        names = self.feature_names_
        if isinstance(shared_features, str):  # its letters were read as names
            raise ValueError(
                f"shared_features must be a list of feature names, got the string "
                f"{shared_features!r}; give [{shared_features!r}]"
            )
        if shared_features is None:
            shared, private = list(range(len(names))), list(range(len(names)))
        else:
            twice = sorted({str(f) for f in shared_features if list(shared_features).count(f) > 1})
            if twice:  # was the bundle's "imputer ... needs distinct inputs"
                raise ValueError(f"shared_features names {twice} more than once; give each once")
            missing = [f for f in shared_features if f not in names]
            if missing:
                raise ValueError(
                    f"shared_features {missing} are not features of peer {self.name!r}"
                )
            shared = [names.index(f) for f in shared_features]
            private = [j for j in range(len(names)) if j not in shared]
        k = self.n_surrogates if surrogates else 0
        surr = forest_surrogates(self.X_, self.trees_, np.asarray(shared, dtype=np.int64), k)
        fitted = self._imputers(shared, private, shared_features is None) if imputers else ()
        counts = np.concatenate([t.value * t.weighted_n_node_samples[:, None] for t in self.trees_])
        n = self.n_train_
        std = self.X_.std(axis=0, ddof=1) if n > 1 else np.zeros(len(names))
        return ShareBundle(
            name=self.name, feature_names=names, feature_kinds=self.feature_kinds_,
            classes=self.classes_, trees=list(self.trees_), class_counts=counts,
            surr_feature=surr[0], surr_threshold=surr[1], surr_flip=surr[2],
            surr_agreement=surr[3], imputers=fitted, feature_std=std, n_train=n,
            shared_features=None if shared_features is None else tuple(shared_features),
            engine=self.engine, categories=dict(self.categories_),
        )  # fmt: skip

    def _imputers(
        self, shared: list[int], private: list[int], all_others: bool
    ) -> tuple[Imputer, ...]:
        """One imputer per private feature, reading the shared features."""
        seed = int(np.random.default_rng(self.random_state).integers(2**31 - 1))
        out = []
        for j in private:
            inputs = [i for i in shared if i != j] if all_others else shared
            if not inputs:
                continue
            out.append(
                fit_imputer(
                    self.feature_names_[j],
                    self.feature_kinds_[j],
                    self.X_[:, j],
                    self.X_[:, inputs],
                    tuple(self.feature_names_[i] for i in inputs),
                    seed,
                )  # fmt: skip
            )
        return tuple(out)


def shared_columns(items: Sequence[Peer | ShareBundle | Sequence[str]]) -> list[str]:
    """Features every peer has, in the order of the first peer.

    Parameters
    ----------
    items : sequence of fitted Peer, ShareBundle or lists of feature names
    """
    lists: list[Sequence[str]] = []
    for item in items:
        if isinstance(item, str):  # its letters were read as one peer's names
            raise ValueError(
                f"shared_columns takes one item per peer (a Peer, a ShareBundle or a list of "
                f"its feature names), got the string {item!r}; give [[{item!r}, ...], ...]"
            )
        if isinstance(item, Peer):
            lists.append(item.feature_names_)
        elif isinstance(item, ShareBundle):
            lists.append(item.feature_names)
        else:
            lists.append([str(n) for n in item])
    if not lists:
        return []
    common = set(lists[0]).intersection(*lists[1:])
    return [n for n in lists[0] if n in common]


def _row_labels(y: ArrayLike, n: int) -> NDArray[Any]:
    """``y`` as one label per row of ``n`` (a column vector too, as the estimators take it).

    A column vector warns as scikit-learn does (``DataConversionWarning``); another shape
    is refused.
    """
    y_arr = labels(y, "y")
    if y_arr.ndim == 2 and y_arr.shape[1] == 1:
        y_arr = column_or_1d(y_arr, warn=True)
    if y_arr.ndim != 1 or y_arr.shape[0] != n:
        raise ValueError(f"y has shape {y_arr.shape}; expected ({n},), one label per row")
    return y_arr


def fit_intersection(peers: Sequence[Peer]) -> list[Peer]:
    """The Intersection baseline: each peer retrains on the columns every peer has.

    Parameters
    ----------
    peers : sequence of fitted Peer

    Returns
    -------
    list of Peer
        New peers (same names and parameters) fitted on their own rows restricted to
        :func:`shared_columns`. Pool their bundles and predict with
        ``strategy="intersection"``.
    """
    cols = shared_columns(peers)
    if not cols:
        raise ValueError(
            "the peers share no column, so the Intersection baseline has nothing to train on"
        )
    out = []
    for p in peers:
        idx = [p.feature_names_.index(c) for c in cols]
        frame = pd.DataFrame(p.X_[:, idx], columns=cols)
        lists = {c: v for c, v in p.categories_.items() if c in cols}
        for c, values in lists.items():  # text columns: their values again, same lists
            frame[c] = np.asarray(values, dtype=object)[frame[c].to_numpy(dtype=np.int64)]
        cats = [
            c
            for c, j in zip(cols, idx, strict=True)
            if p.feature_kinds_[j] == "categorical" and c not in lists
        ]
        params = p._params()
        if params["engine"] not in ENGINES:  # an imported forest: retrain with scikit-learn
            params["engine"] = "sklearn"
        peer = Peer(p.name, **params)
        out.append(peer.fit(frame, p.y_, categorical_features=cats, categories=lists))
    return out
