"""The pooled swarm forest: bundles remapped onto one feature space, predicted by strategy."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
from joblib import effective_n_jobs
from numpy.typing import NDArray
from sklearn.utils._param_validation import Interval, validate_parameter_constraints

from .._common import TREE_LEAF, is_int_in
from .._inputs import warn_caller
from ..federated.categorical import encode_counted, pandas_frame
from ..tree.arrays import pack_forest
from . import routing as R
from .bundle import ShareBundle
from .columns import check_distinct, floats, is_numeric
from .train import Imputer

__all__ = ["STRATEGIES", "SwarmForest"]

#: Prediction strategies (Tajabadi & Heider, *Mind the Missing Split*, Sections III and IV).
STRATEGIES = ("local", "intersection", "park", "fpv", "pr", "mi", "ipr", "mp", "ss")
#: Single-path strategies: (use surrogates, imputation mode, PR fallback).
_SINGLE = {
    "local": (False, R.IMPUTE_NONE, False),
    "intersection": (False, R.IMPUTE_NONE, False),
    "park": (False, R.IMPUTE_NONE, False),
    "fpv": (False, R.IMPUTE_NONE, False),
    "pr": (False, R.IMPUTE_NONE, True),
    "mi": (False, R.IMPUTE_HARD, False),
    "ipr": (False, R.IMPUTE_SOFT, True),
    "ss": (True, R.IMPUTE_NONE, True),
}
_ROW_CHUNK = 2048


def _category_mismatch(
    name: str, a: tuple[tuple[Any, ...] | None, str], b: tuple[tuple[Any, ...] | None, str]
) -> str:
    """Why two peers' codes of a column cannot be pooled, and the fix."""
    (first, peer_a), (other, peer_b) = a, b
    if first is None or other is None:
        text, codes = (peer_a, peer_b) if first is not None else (peer_b, peer_a)
        return (
            f"feature {name!r} is a text column at peer {text!r} but numeric codes at peer "
            f"{codes!r}; give it as text (or as the same codes) at every peer"
        )
    only_a = [v for v in first if v not in other]
    only_b = [v for v in other if v not in first]
    return (
        f"peers {peer_a!r} and {peer_b!r} code the text column {name!r} with different "
        f"category lists (only at {peer_a!r}: {only_a}, only at {peer_b!r}: {only_b}); "
        f"fit every peer with the same list: Peer.fit(..., categories={{{name!r}: [...]}})"
    )


def _seed(random_state: Any) -> int:
    """A non-negative 63-bit seed from None, an int or a NumPy generator."""
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**62))
    return int(np.random.default_rng(random_state).integers(0, 2**62))


def _few(names: Any, limit: int = 8) -> str:
    """The first ``limit`` names, as a list (and how many more)."""
    names = [str(n) for n in names]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"{names[:limit]}{more}"


def _finite(X: NDArray[np.float64], names: Any) -> NDArray[np.float64]:
    """``X`` unless a column holds infinity (refused as the estimators do, naming it)."""
    bad = np.isinf(X).any(axis=0)
    if bad.any():
        name = names[int(np.flatnonzero(bad)[0])]
        raise ValueError(f"column {name!r} of X_site contains infinity; a missing value is NaN.")
    return X


def _check_options(strategy: Any, d_thresh: Any, voting: Any) -> None:
    """Refuse an unknown strategy, a bad ``d_thresh`` or ``voting``, naming the value."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not is_int_in(d_thresh, numpy=True):
        raise ValueError(f"d_thresh must be an int >= 0, got {d_thresh!r}")
    if voting not in ("soft", "hard"):
        raise ValueError(f"voting must be 'soft' or 'hard', got {voting!r}")


#: scikit-learn's convention for ``n_jobs``, as the estimators declare it.
_N_JOBS = {
    "n_jobs": [
        Interval(Integral, None, -1, closed="right"),
        Interval(Integral, 1, None, closed="left"),
        None,
    ]
}


def check_n_jobs(n_jobs: Any, caller: str = "SwarmForest") -> None:
    """Refuse 0 (or a non-integer) in scikit-learn's words, naming ``caller``.

    It was joblib's "n_jobs == 0 in Parallel has no meaning" once the work had begun
    (``SwarmForest``'s predict, ``Peer``'s fit with scikit-learn's engine, which declares
    any int).
    """
    validate_parameter_constraints(_N_JOBS, {"n_jobs": n_jobs}, caller_name=caller)


class SwarmForest:
    """Trees pooled from several peers' bundles, predicted at one site.

    Parameters
    ----------
    bundles : sequence of ShareBundle
        One per peer (distinct names); their classes and feature kinds must agree.
    n_jobs : int or None, default=None
        Threads of the prediction kernels (row chunks run in parallel, GIL released).

    Attributes
    ----------
    feature_names_ : tuple of str
        Union of the peers' features (order of first appearance).
    feature_kinds_ : tuple of str
    categories_ : dict of str to tuple
        The category list of each text column (the same at every peer that has it).
    classes_ : ndarray
        Union of the peers' classes (sorted).
    owner_ : ndarray of int64, shape (n_trees,)
        Index of the bundle each pooled tree came from.
    """

    def __init__(self, bundles: Sequence[ShareBundle], *, n_jobs: int | None = None) -> None:
        bundles = list(bundles)
        if not bundles or not all(isinstance(b, ShareBundle) for b in bundles):
            raise TypeError("SwarmForest needs a non-empty list of ShareBundle objects")
        names = [b.name for b in bundles]
        if len(set(names)) != len(names):
            raise ValueError(f"bundle names must be distinct, got {names}")
        self.bundles_ = tuple(bundles)
        check_n_jobs(n_jobs)
        self.n_jobs = n_jobs
        self._global_features()
        self._global_classes()
        self._pack()
        self._pool_imputers()

    @property
    def names_(self) -> tuple[str, ...]:
        """The peers' names, in bundle order."""
        return tuple(b.name for b in self.bundles_)

    @property
    def n_trees_(self) -> int:
        """Number of pooled trees."""
        return int(self._forest["offsets"].shape[0] - 1)

    def _global_features(self) -> None:
        kinds: dict[str, str] = {}
        for b in self.bundles_:
            for name, kind in zip(b.feature_names, b.feature_kinds, strict=True):
                if kinds.setdefault(name, kind) != kind:
                    raise ValueError(
                        f"feature {name!r} is {kind} at peer {b.name!r} but {kinds[name]} "
                        "elsewhere; peers must agree on feature kinds"
                    )
        self.feature_names_ = tuple(kinds)
        self.feature_kinds_ = tuple(kinds.values())
        self._index = {n: j for j, n in enumerate(self.feature_names_)}
        # Text columns: every peer that has one must code it with the same category list.
        lists: dict[str, tuple[tuple[Any, ...] | None, str]] = {}
        for b in self.bundles_:
            for name in b.feature_names:
                mine = b.categories.get(name)
                first = lists.setdefault(name, (mine, b.name))
                if first[0] != mine:
                    raise ValueError(_category_mismatch(name, first, (mine, b.name)))
        self.categories_ = {n: v for n, (v, _) in lists.items() if v is not None}

    def _global_classes(self) -> None:
        kinds = {
            b.classes.dtype.kind if b.classes.dtype.kind in "US" else "number"
            for b in self.bundles_
        }
        if len(kinds) > 1:
            raise ValueError(
                "peers disagree on the type of the class labels (strings, bytes or numbers)"
            )
        self.classes_ = np.unique(np.concatenate([b.classes for b in self.bundles_]))

    def _pack(self) -> None:
        """Remap every tree onto the global features and classes; flatten the forest."""
        trees, counts, surr, owner = [], [], [], []
        n_classes = self.classes_.shape[0]
        for k, b in enumerate(self.bundles_):
            fmap = np.array([self._index[n] for n in b.feature_names], dtype=np.int32)
            cmap = np.searchsorted(self.classes_, b.classes)
            gcounts = np.zeros((b.class_counts.shape[0], n_classes))
            gcounts[:, cmap] = b.class_counts
            counts.append(gcounts)
            sf = b.surr_feature
            surr.append(
                (np.where(sf >= 0, fmap[np.maximum(sf, 0)], -1), b.surr_threshold, b.surr_flip)
            )
            for tree in b.trees:
                leaf = tree.children_left == TREE_LEAF
                value = np.zeros((tree.node_count, n_classes))
                value[:, cmap] = tree.value
                feat = np.where(leaf, tree.feature, fmap[np.maximum(tree.feature, 0)])
                trees.append(dataclasses.replace(tree, feature=feat.astype(np.int32), value=value))
                owner.append(k)
        feature, threshold, left, right, _, offsets = pack_forest(trees)
        class_counts = np.concatenate(counts)
        total = class_counts.sum(axis=1, keepdims=True)
        value = np.concatenate([t.value for t in trees])  # eq. 18: class counts normalised
        value = np.divide(class_counts, total, out=value, where=total > 0)
        weight = np.concatenate([t.weighted_n_node_samples for t in trees])
        internal = left != TREE_LEAF
        p_right = np.full(feature.shape[0], 0.5)
        w_right = weight[right[internal]]
        p_right[internal] = np.divide(w_right, weight[internal], out=np.full(w_right.shape, 0.5),
                                      where=weight[internal] > 0)  # fmt: skip
        depth = np.zeros(feature.shape[0], dtype=np.int32)
        for node in np.flatnonzero(internal):  # children after parents: one pass
            depth[left[node]] = depth[right[node]] = depth[node] + 1
        used = np.zeros((len(trees), len(self.feature_names_)), dtype=bool)
        tree_of = np.repeat(np.arange(len(trees)), np.diff(offsets))
        used[tree_of[internal], feature[internal]] = True
        self.owner_ = np.asarray(owner, dtype=np.int64)
        self._tree_features = used
        # The roots' counts, scaled by a power of two (exact: the prior is unchanged) so that
        # their sum over many trees cannot overflow however large each bundle's counts are.
        roots = class_counts[offsets[:-1]]
        roots = np.ldexp(roots, -int(np.frexp(roots.max(initial=0.0))[1]))
        self._prior = roots.sum(axis=0) / max(roots.sum(), 1e-300)
        self._max_depth = int(depth.max())
        self._forest: dict[str, NDArray[Any]] = {
            "feature": feature, "threshold": threshold, "left": left, "right": right,
            "value": value, "offsets": offsets, "p_right": p_right, "depth": depth,
            "surr_feature": np.concatenate([s[0] for s in surr]).astype(np.int32),
            "surr_threshold": np.ascontiguousarray(np.concatenate([s[1] for s in surr])),
            "surr_flip": np.ascontiguousarray(np.concatenate([s[2] for s in surr])),
        }  # fmt: skip

    def _pool_imputers(self) -> None:
        """Feature standard deviations averaged over peers, and every imputer by feature.

        eq. 13's sigma is averaged over the peers that have the feature and at least two
        rows (a peer of one row shares 0, which halved a two-peer average).
        """
        sums = np.zeros(len(self.feature_names_))
        seen = np.zeros(len(self.feature_names_))
        self._imputers: dict[int, list[tuple[int, Imputer]]] = {}
        for k, b in enumerate(self.bundles_):
            idx = [self._index[n] for n in b.feature_names]
            if b.n_train >= 2:  # one row has no spread: its 0 is not an estimate
                sums[idx] += b.feature_std
                seen[idx] += 1
            for imp in b.imputers:
                self._imputers.setdefault(self._index[imp.feature], []).append((k, imp))
        self._sigma = sums / np.maximum(seen, 1)

    # ------------------------------------------------------------------ site data
    def _site_matrix(self, X_site: Any) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """(n, n_features) matrix, NaN where the site lacks a column; the columns it has."""
        n_feat = len(self.feature_names_)
        X_site = pandas_frame(X_site)  # pyarrow's or polars' frame: its columns by name
        if isinstance(X_site, pd.DataFrame):
            check_distinct(X_site.columns, "X_site")
            X = np.full((len(X_site), n_feat), np.nan)
            present = np.zeros(n_feat, dtype=bool)
            other = []
            for col in X_site.columns:
                j = self._index.get(str(col))
                if j is None:
                    continue  # a column no peer trained on cannot be used
                series = X_site[col]
                cats = self.categories_.get(str(col))
                if cats is not None:  # a text column: codes in its list; unknown: unavailable
                    values = np.asarray(series, dtype=object)
                    codes, n_other = encode_counted(values, list(cats))  # one pass
                    codes[pd.isna(values) | (codes < 0)] = np.nan
                    if n_other:
                        other.append(f"{col!r} ({n_other} of {len(values)} rows)")
                    X[:, j] = codes
                    present[j] = True
                    continue
                if isinstance(series.dtype, pd.CategoricalDtype):
                    series = series.astype(series.cat.categories.dtype)
                if not is_numeric(series):
                    raise ValueError(
                        f"column {col!r} of X_site has dtype {series.dtype}; expected numbers"
                    )
                X[:, j] = floats(series)
                present[j] = True
            if not present.any():  # every value would be "unavailable": names mistyped?
                raise ValueError(
                    f"X_site has none of the swarm's features {_few(self.feature_names_)}; its "
                    f"columns are {_few(X_site.columns)}. Name each column as the peers did."
                )
            if other:  # as the estimators' predict (_inputs.with_codes)
                warn_caller(
                    f"categorical column(s) {', '.join(other)} of X_site hold numbers where "
                    "the peers' levels are text (or text where they are numbers): such a value "
                    "is in no level list, so it is unavailable, as a missing one. Give the "
                    "column as the peers had it (e.g. X_site[col].astype(str)).",
                    UserWarning,
                )
            return _finite(X, self.feature_names_), present
        X = np.asarray(X_site, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != n_feat:
            raise ValueError(
                f"X_site has shape {X.shape}; give a DataFrame with the site's columns, or an "
                f"array with the {n_feat} columns of feature_names_ (NaN = unavailable)"
            )
        return _finite(np.array(X, copy=True), self.feature_names_), ~np.isnan(X).all(axis=0)

    def _imputation(self, X: NDArray[np.float64]) -> dict[str, NDArray[Any]]:
        """Imputation arrays of the routing kernels for the columns with missing values.

        Each row uses the best imputer whose inputs *it* has (its available features
        ``F_x``: the non-NaN values), so a row's imputation does not depend on the other
        rows of ``X`` (before, on whether some other row had the inputs).
        """
        n, n_feat = X.shape
        avail = ~np.isnan(X)
        kind = np.zeros(n_feat, dtype=np.int8)
        xhat = np.full((n, n_feat), np.nan)
        slot = np.zeros(n_feat, dtype=np.int32)
        cats: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []
        for f in np.flatnonzero(~avail.all(axis=0)):
            ranked = self._ranked_imputers(int(f))
            todo = ~avail[:, f]
            used: list[tuple[Imputer, NDArray[np.bool_], NDArray[np.float64]]] = []
            for imp in ranked:
                cols = [self._index[c] for c in imp.inputs]
                rows = todo & avail[:, cols].all(axis=1)
                if rows.any():  # predicted on every row, as one batch: the same floats
                    used.append((imp, rows, imp.predict(X[:, cols])))
                    todo &= ~rows
            if not ranked:
                continue
            if self.feature_kinds_[f] == "numeric":
                kind[f] = R.KIND_NUMERIC
                for _, rows, out in used:
                    xhat[rows, f] = out[rows]
                continue
            kind[f], slot[f] = R.KIND_CATEGORICAL, len(cats)
            values = np.unique(np.concatenate([imp.categories for imp in ranked]))
            prob = np.full((n, values.shape[0]), np.nan)  # NaN: no usable imputer
            for imp, rows, out in used:
                pos = np.searchsorted(values, imp.categories)
                block = np.zeros((int(rows.sum()), values.shape[0]))
                block[:, pos] = out[rows]
                prob[rows] = block
                xhat[rows, f] = imp.categories[np.argmax(out[rows], axis=1)]
            cats.append((values, prob))
        k_max = max([c.shape[0] for c, _ in cats], default=1)
        values = np.full((max(len(cats), 1), k_max), np.inf)
        prob = np.zeros((n, len(cats), k_max))
        for s, (c, p) in enumerate(cats):
            values[s, : c.shape[0]] = c
            prob[:, s, : c.shape[0]] = p
        return {"imp_kind": kind, "xhat": xhat, "sigma": self._sigma, "cat_slot": slot,
                "cat_values": values, "cat_prob": prob}  # fmt: skip

    def _ranked_imputers(self, f: int) -> list[Imputer]:
        """Every imputer of feature ``f``, best first: CV quality, then training rows."""
        keyed = [
            ((-np.inf if np.isnan(imp.quality) else imp.quality, imp.n_train, -k), imp)
            for k, imp in self._imputers.get(f, [])
        ]
        return [imp for _, imp in sorted(keyed, key=lambda item: item[0], reverse=True)]

    def _select_imputer(self, f: int, present: NDArray[np.bool_]) -> Imputer | None:
        """Best imputer of feature ``f`` whose inputs are all ``present``."""
        for imp in self._ranked_imputers(f):
            if all(present[self._index[c]] for c in imp.inputs):
                return imp
        return None

    # ------------------------------------------------------------------ prediction
    def predict_proba(
        self,
        X_site: Any,
        strategy: str = "mp",
        *,
        site: str | None = None,
        random_state: Any = None,
        d_thresh: int = 2,
        voting: str = "soft",
    ) -> NDArray[np.float64]:
        """Class probabilities at a site, resolving missing splits with ``strategy``.

        Parameters
        ----------
        X_site : DataFrame or ndarray
            The site's rows. A DataFrame's columns are the available features (columns
            no peer trained on are ignored; a frame with none of the pool's columns is
            refused); an ndarray must have the columns of
            ``feature_names_`` with NaN where a value is unavailable (text columns as
            their codes: indices in ``categories_``). A NaN in a present column makes
            that value unavailable for that row only; so does a text value that is not in
            the column's category list.
        strategy : str, default="mp"
            One of :data:`STRATEGIES`: ``"local"`` (the site's own trees), ``"intersection"``
            (all trees; they must use only available columns, as the trees of
            :func:`~fedforest.swarm.fit_intersection` peers do), ``"park"`` (whole trees
            whose features are all available), ``"fpv"``, ``"pr"``, ``"mi"``, ``"ipr"``,
            ``"mp"`` or ``"ss"``.
        site : str, optional
            The predicting peer's name; required by ``"local"``.
        random_state : int, Generator or None, default=None
            Seed of the probabilistic strategies (``pr``, ``ipr``, ``ss``'s fallback).
        d_thresh : int, default=2
            PR depth threshold: a missing split shallower than this discards the tree
            (``pr``, and the PR fallback of ``ipr`` and ``ss``). The paper leaves its value
            open.
        voting : {"soft", "hard"}, default="soft"
            Average the kept trees' leaf class distributions (as scikit-learn does) or
            their votes (eq. 2, 6, 11, 17, 22). ``mp`` always averages distributions (eq. 20).

        Returns
        -------
        ndarray of float64, shape (n_samples, n_classes)
            Columns in ``classes_`` order. A row no tree can score gets the pooled
            training class distribution.
        """
        _check_options(strategy, d_thresh, voting)
        X, present = self._site_matrix(X_site)
        active = self._active_trees(strategy, site, present)
        if strategy == "mp":
            return self._marginal(X, active)
        leaves = self._route(X, strategy, active, _seed(random_state), int(d_thresh))
        return self._vote(leaves, voting)

    def predict(self, X_site: Any, strategy: str = "mp", **kwargs: Any) -> NDArray[Any]:
        """Most probable class per row.

        Parameters
        ----------
        X_site : DataFrame or ndarray
            The site's rows, as in :meth:`predict_proba`.
        strategy : str, default="mp"
            How missing splits are resolved, as in :meth:`predict_proba`.
        **kwargs
            ``site``, ``random_state``, ``d_thresh`` and ``voting``, as in
            :meth:`predict_proba`.

        Returns
        -------
        ndarray, shape (n_samples,)
            Labels from ``classes_``: each row's column of highest probability (the first
            on a tie).
        """
        proba = self.predict_proba(X_site, strategy, **kwargs)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])

    def trees_used(
        self,
        X_site: Any,
        strategy: str,
        *,
        site: str | None = None,
        random_state: Any = None,
        d_thresh: int = 2,
        voting: str = "soft",
    ) -> NDArray[np.int64]:
        """Number of trees that vote for each row (all active trees for ``mp``).

        Parameters
        ----------
        X_site : DataFrame or ndarray
            The site's rows, as in :meth:`predict_proba`.
        strategy : str
            One of :data:`STRATEGIES`, as in :meth:`predict_proba`.
        site, random_state, d_thresh, voting
            As in :meth:`predict_proba` (checked the same way; ``voting`` does not change
            which trees vote).

        Returns
        -------
        ndarray of int64, shape (n_samples,)
        """
        _check_options(strategy, d_thresh, voting)
        X, present = self._site_matrix(X_site)
        active = self._active_trees(strategy, site, present)
        if strategy == "mp":
            return np.full(X.shape[0], int(active.sum()), dtype=np.int64)
        leaves = self._route(X, strategy, active, _seed(random_state), int(d_thresh))
        return np.asarray((leaves >= 0).sum(axis=0), dtype=np.int64)

    def _active_trees(
        self, strategy: str, site: str | None, present: NDArray[np.bool_]
    ) -> NDArray[np.bool_]:
        if site is not None and site not in self.names_:
            raise ValueError(f"site {site!r} is not one of the peers {list(self.names_)}")
        feasible = ~(self._tree_features & ~present[None, :]).any(axis=1)
        if strategy == "local":
            if site is None:
                raise ValueError("strategy='local' needs site=<the predicting peer's name>")
            return np.asarray(self.owner_ == self.names_.index(site))
        if strategy == "park":  # trees no row can use; _route drops them row by row
            return np.asarray(feasible)
        if strategy == "intersection" and not feasible.all():
            missing = sorted(
                {
                    self.feature_names_[j]
                    for j in np.flatnonzero((self._tree_features & ~present).any(axis=0))
                }
            )
            raise ValueError(
                f"strategy='intersection' needs trees trained on the shared columns only, but "
                f"some split on {missing[:5]}, absent from X_site; pool the bundles of "
                "fit_intersection(peers) for this baseline"
            )
        return np.ones(self.n_trees_, dtype=bool)

    def _chunks(self, n: int, job: Any) -> None:
        """Run ``job(start, stop)`` over row chunks, in threads (the kernels release the GIL)."""
        spans = [(a, min(a + _ROW_CHUNK, n)) for a in range(0, n, _ROW_CHUNK)]
        check_n_jobs(self.n_jobs)  # set after construction: said here, not by joblib
        n_threads = min(len(spans), effective_n_jobs(self.n_jobs))
        if n_threads <= 1:
            for a, b in spans:
                job(a, b)
            return
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(lambda span: job(*span), spans))

    def _route(
        self, X: NDArray[np.float64], strategy: str, active: NDArray[np.bool_], seed: int,
        d_thresh: int,
    ) -> NDArray[np.int32]:  # fmt: skip
        use_surr, impute, use_pr = _SINGLE[strategy]
        F = self._forest
        imp = self._imputation(X) if impute != R.IMPUTE_NONE else self._no_imputation(X)
        # Park: a tree votes for a row only if the row has every feature the tree splits on;
        # ``active`` dropped the trees on columns no row has, the rest is checked per row.
        cols = np.zeros(0, dtype=np.int64)
        if strategy == "park":
            used = self._tree_features[active].any(axis=0)
            cols = np.flatnonzero(np.isnan(X).any(axis=0) & used)
        uses = self._tree_features[:, cols].astype(np.float64)  # (n_trees, n_cols)
        out = np.empty((self.n_trees_, X.shape[0]), dtype=np.int32)

        def job(a: int, b: int) -> None:
            R.route_single(
                X[a:b], F["feature"], F["threshold"], F["left"], F["right"], F["offsets"],
                active, F["p_right"], F["depth"], F["surr_feature"], F["surr_threshold"],
                F["surr_flip"], imp["imp_kind"], imp["xhat"][a:b], imp["sigma"],
                imp["cat_slot"], imp["cat_values"], imp["cat_prob"][a:b],
                use_surr, impute, use_pr, d_thresh, seed, a, out[:, a:b],
            )  # fmt: skip
            if cols.size:
                lacks = uses @ np.isnan(X[a:b, cols]).T.astype(np.float64) > 0  # (trees, rows)
                out[:, a:b][lacks] = R.DISCARDED

        self._chunks(X.shape[0], job)
        return out

    def _no_imputation(self, X: NDArray[np.float64]) -> dict[str, NDArray[Any]]:
        n_feat = X.shape[1]
        return {
            "imp_kind": np.zeros(n_feat, np.int8),
            "xhat": np.empty((X.shape[0], n_feat)),
            "sigma": self._sigma,
            "cat_slot": np.zeros(n_feat, np.int32),
            "cat_values": np.full((1, 1), np.inf),
            "cat_prob": np.zeros((X.shape[0], 0, 1)),
        }

    def _marginal(self, X: NDArray[np.float64], active: NDArray[np.bool_]) -> NDArray[np.float64]:
        F = self._forest
        imp = self._imputation(X)
        out = np.empty((X.shape[0], self.classes_.shape[0]))

        def job(a: int, b: int) -> None:
            R.marginal_proba(
                X[a:b], F["feature"], F["threshold"], F["left"], F["right"], F["value"],
                F["offsets"], active, F["p_right"], imp["imp_kind"], imp["xhat"][a:b],
                imp["sigma"], imp["cat_slot"], imp["cat_values"], imp["cat_prob"][a:b],
                self._max_depth, out[a:b],
            )  # fmt: skip

        self._chunks(X.shape[0], job)
        n_active = int(active.sum())
        if n_active == 0:
            return np.tile(self._prior, (X.shape[0], 1))
        return out / n_active

    def _vote(self, leaves: NDArray[np.int32], voting: str) -> NDArray[np.float64]:
        """Average leaf distributions (soft) or votes (hard) of the kept trees per row.

        ``leaves`` has shape (n_trees, n_samples), -1 where a tree is discarded.
        """
        value = self._forest["value"]
        n, n_classes = leaves.shape[1], value.shape[1]
        if voting == "soft":
            table = np.vstack([value, np.zeros((1, n_classes))])  # row -1: a discarded tree
        else:
            table = np.vstack(
                [np.eye(n_classes)[np.argmax(value, axis=1)], np.zeros((1, n_classes))]
            )
        acc = np.zeros((n, n_classes))
        for tree_leaves in leaves:
            acc += table[tree_leaves]
        kept = (leaves >= 0).sum(axis=0)
        proba = np.tile(self._prior, (n, 1))
        ok = kept > 0
        proba[ok] = acc[ok] / kept[ok, None]
        return proba
