"""The share bundle of a swarm peer and its safe file format.

A bundle file is a model file of :mod:`fedforest.tree.io` (a validated ``.npz`` read with
``allow_pickle=False``) of kind ``"SwarmShareBundle"``: the trees as usual, a JSON header
(name, feature names and kinds, classes, the category lists of text columns, imputer
metadata) and extra arrays:

==========================  ==================================  =======================
extra array                 shape                               meaning
==========================  ==================================  =======================
``class_counts``            (n_nodes, n_classes)                weighted class counts
``surr_feature``            (n_nodes, n_surrogates) int32       local feature, -1 none
``surr_threshold``          (n_nodes, n_surrogates) float64     surrogate threshold
``surr_flip``               (n_nodes, n_surrogates) uint8       1: ``x <= t`` goes right
``surr_agreement``          (n_nodes, n_surrogates) float64     adjusted agreement
``feature_std``             (n_features,)                       standard deviations
``imputer_quality``         (n_imputers,)                       CV R^2 / F1 (NaN: none)
``imp/<j>/intercept``       (n_outputs,)                        imputer ``j``
``imp/<j>/coef``            (n_outputs, n_inputs)
``imp/<j>/categories``      (n_categories,)
==========================  ==================================  =======================

Every rule the routing kernels rely on is checked by :func:`check_bundle`, both when a
bundle is built in code and when it is loaded.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._common import TREE_LEAF, is_int_in
from ..federated.categorical import sort_categories
from ..tree.arrays import Tree
from ..tree.io import load_forest, save_forest
from .train import Imputer

__all__ = ["BUNDLE_KIND", "ShareBundle", "check_bundle", "load_bundles"]

BUNDLE_KIND = "SwarmShareBundle"
BUNDLE_VERSION = 1
KINDS = ("numeric", "categorical")
_IMP_PREFIX = "imp/"
#: Relative slack when a child's weight is compared with its parent's (float sums).
_WEIGHT_RTOL = 1e-6
#: A bundle header's fields (``save``'s): any other is refused, naming it (as a model's).
_HEADER_FIELDS = (
    "kind", "bundle_version", "n_features_in", "name", "feature_names", "feature_kinds",
    "classes", "n_train", "shared_features", "engine", "categories", "imputers",
)  # fmt: skip
_FIXED_EXTRA = (
    "class_counts",
    "surr_feature",
    "surr_threshold",
    "surr_flip",
    "surr_agreement",
    "feature_std",
    "imputer_quality",
)


@dataclass(frozen=True, eq=False)
class ShareBundle:
    """What a peer shares: trees, surrogate splits, imputers, feature spreads.

    Build one with :meth:`fedforest.swarm.Peer.share`; it is checked on construction
    (``ValueError`` naming the broken field otherwise).

    Attributes
    ----------
    name : str
        The peer's name.
    feature_names : tuple of str
        The peer's features; tree, surrogate and imputer indices refer to this order.
    feature_kinds : tuple of {"numeric", "categorical"}
    classes : ndarray, shape (n_classes,)
        Class labels (the columns of ``class_counts`` and of the trees' ``value``).
    trees : list of Tree
        Threshold splits only (``x <= t`` goes left); ``value`` holds class proportions.
    class_counts : ndarray of float64, shape (n_nodes, n_classes)
        Weighted class counts per node, trees concatenated node-wise.
    surr_feature : ndarray of int32, shape (n_nodes, n_surrogates)
        Ranked surrogate features (local index), -1 when there are no more.
    surr_threshold : ndarray of float64, shape (n_nodes, n_surrogates)
    surr_flip : ndarray of bool, shape (n_nodes, n_surrogates)
        True when ``x <= threshold`` sends a row right.
    surr_agreement : ndarray of float64, shape (n_nodes, n_surrogates)
        Adjusted agreement (eq. 21), in (0, 1] for a present surrogate.
    imputers : tuple of Imputer
        At most one per feature.
    feature_std : ndarray of float64, shape (n_features,)
    n_train : int
        Training rows of the peer.
    shared_features : tuple of str or None
        The features the surrogates and imputers were restricted to (None: all).
    engine : str
        What trained the trees ("sklearn", "fedforest" or "imported").
    categories : dict of str to tuple
        The sorted category list of each text column: its codes are indices in it (a
        site's text values are coded with it). Columns absent here hold numeric codes.
    """

    name: str
    feature_names: tuple[str, ...]
    feature_kinds: tuple[str, ...]
    classes: NDArray[Any]
    trees: list[Tree]
    class_counts: NDArray[np.float64]
    surr_feature: NDArray[np.int32]
    surr_threshold: NDArray[np.float64]
    surr_flip: NDArray[np.bool_]
    surr_agreement: NDArray[np.float64]
    imputers: tuple[Imputer, ...]
    feature_std: NDArray[np.float64]
    n_train: int
    shared_features: tuple[str, ...] | None = None
    engine: str = "sklearn"
    categories: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    _offsets: NDArray[np.int64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", np.asarray(self.classes))
        object.__setattr__(self, "feature_names", tuple(self.feature_names))
        object.__setattr__(self, "feature_kinds", tuple(self.feature_kinds))
        object.__setattr__(self, "imputers", tuple(self.imputers))
        object.__setattr__(self, "surr_flip", np.asarray(self.surr_flip).astype(bool))
        if not isinstance(self.categories, dict):
            raise ValueError(f"bundle {self.name!r}: categories must be a dict")
        cats = {str(k): tuple(v) for k, v in self.categories.items()}
        object.__setattr__(self, "categories", cats)
        check_bundle(self)
        sizes = [t.node_count for t in self.trees]
        object.__setattr__(self, "_offsets", np.concatenate([[0], np.cumsum(sizes)]))

    @property
    def n_features(self) -> int:
        """Number of the peer's features."""
        return len(self.feature_names)

    @property
    def tree_offsets(self) -> NDArray[np.int64]:
        """Tree ``t`` owns rows ``tree_offsets[t]:tree_offsets[t + 1]`` of the node arrays."""
        return self._offsets

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the bundle to ``path`` in the safe format (no pickle).

        Parameters
        ----------
        path : str or path-like
            Destination file, written whole or not at all (a temporary file renamed); its
            name is kept as given (no extension is added).

        Raises
        ------
        ValueError
            Bytes labels, which the file cannot give back (as a model file, it keeps
            numbers and text), before anything is written.
        """
        if self.classes.dtype.kind == "S":
            raise ValueError(
                f"bundle {self.name!r}: classes has dtype {self.classes.dtype}, which a bundle "
                "file cannot keep (it keeps labels as text or numbers): fit the peer on y as "
                "text (y.astype(str), say) to save its bundle."
            )
        header: dict[str, Any] = {
            "kind": BUNDLE_KIND,
            "bundle_version": BUNDLE_VERSION,
            "n_features_in": self.n_features,
            "name": self.name,
            "feature_names": list(self.feature_names),
            "feature_kinds": list(self.feature_kinds),
            "classes": self.classes.tolist(),
            "n_train": int(self.n_train),
            "shared_features": None if self.shared_features is None else list(self.shared_features),
            "engine": self.engine,
            "categories": {k: list(v) for k, v in self.categories.items()},
            "imputers": [
                {
                    "feature": m.feature,
                    "kind": m.kind,
                    "inputs": list(m.inputs),
                    "n_train": m.n_train,
                }
                for m in self.imputers
            ],
        }
        extra: dict[str, NDArray[Any]] = {
            "class_counts": self.class_counts,
            "surr_feature": self.surr_feature,
            "surr_threshold": self.surr_threshold,
            "surr_flip": self.surr_flip.astype(np.uint8),
            "surr_agreement": self.surr_agreement,
            "feature_std": self.feature_std,
            "imputer_quality": np.array([m.quality for m in self.imputers], dtype=np.float64),
        }
        for j, m in enumerate(self.imputers):
            extra[f"{_IMP_PREFIX}{j}/intercept"] = m.intercept
            extra[f"{_IMP_PREFIX}{j}/coef"] = m.coef
            extra[f"{_IMP_PREFIX}{j}/categories"] = m.categories
        save_forest(path, header, self.trees, extra=extra)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ShareBundle:
        """Read a bundle written by :meth:`save`; never unpickles.

        Parameters
        ----------
        path : str or path-like
            The bundle file.

        Returns
        -------
        ShareBundle
            The bundle, checked as on construction.

        Raises
        ------
        ValueError
            If the file is not a valid share bundle (pickled, truncated, another kind of
            model, or content that breaks a rule); the message names the file.
        OSError
            If the file is missing or unreadable (e.g. ``FileNotFoundError``).
        """
        header, trees, extra = load_forest(path, expected_kind=BUNDLE_KIND)
        try:
            return _from_file(header, trees, extra)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(
                f"cannot load share bundle {os.fspath(path)!r}: invalid content ({exc}). "
                "Ask the peer that sent it to share and save it again."
            ) from exc


def _from_file(
    header: dict[str, Any], trees: list[Tree], extra: dict[str, NDArray[Any]]
) -> ShareBundle:
    """Rebuild a bundle from a loaded file (checked by the constructor)."""
    version = header.get("bundle_version")
    if version != BUNDLE_VERSION:
        raise ValueError(f"bundle_version {version!r} is not {BUNDLE_VERSION}")
    if unknown := sorted(set(header) - set(_HEADER_FIELDS)):  # a newer fedforest's, or damage
        raise ValueError(f"its header has fields {unknown} that this fedforest does not know")
    metas = header["imputers"]
    if not isinstance(metas, list):
        raise TypeError("header 'imputers' is not a list")
    expected = set(_FIXED_EXTRA) | {
        f"{_IMP_PREFIX}{j}/{part}"
        for j in range(len(metas))
        for part in ("intercept", "coef", "categories")
    }
    unknown, missing = sorted(set(extra) - expected), sorted(expected - set(extra))
    if unknown or missing:
        raise ValueError(f"extra arrays: unexpected {unknown}, missing {missing}")
    quality = _float_array(extra["imputer_quality"], "imputer_quality")
    if quality.shape != (len(metas),):
        raise ValueError(f"imputer_quality has shape {quality.shape}, expected ({len(metas)},)")
    imputers = tuple(
        Imputer(
            feature=str(meta["feature"]),
            kind=str(meta["kind"]),
            inputs=tuple(meta["inputs"]),
            intercept=_float_array(extra[f"{_IMP_PREFIX}{j}/intercept"], "intercept"),
            coef=_float_array(extra[f"{_IMP_PREFIX}{j}/coef"], "coef"),
            categories=_float_array(extra[f"{_IMP_PREFIX}{j}/categories"], "categories"),
            quality=float(quality[j]),
            n_train=_int(meta["n_train"], "imputer n_train"),
        )
        for j, meta in enumerate(metas)
    )
    shared = header["shared_features"]
    flips = np.asarray(extra["surr_flip"])
    if flips.dtype.kind not in "biu" or flips.size and not np.isin(flips, (0, 1)).all():
        raise ValueError("surr_flip must hold 0 or 1")
    return ShareBundle(
        name=header["name"],
        feature_names=tuple(header["feature_names"]),
        feature_kinds=tuple(header["feature_kinds"]),
        classes=np.asarray(header["classes"]),
        trees=trees,
        class_counts=_float_array(extra["class_counts"], "class_counts"),
        surr_feature=_int_array(extra["surr_feature"], "surr_feature"),
        surr_threshold=_float_array(extra["surr_threshold"], "surr_threshold"),
        surr_flip=flips.astype(bool),
        surr_agreement=_float_array(extra["surr_agreement"], "surr_agreement"),
        imputers=imputers,
        feature_std=_float_array(extra["feature_std"], "feature_std"),
        n_train=_int(header["n_train"], "n_train"),
        shared_features=None if shared is None else tuple(shared),
        engine=str(header.get("engine", "imported")),
        categories={str(k): tuple(v) for k, v in header.get("categories", {}).items()},
    )


def _float_array(arr: NDArray[Any], name: str) -> NDArray[np.float64]:
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} has dtype {arr.dtype}, expected numbers")
    return np.asarray(arr, dtype=np.float64)


def _int_array(arr: NDArray[Any], name: str) -> NDArray[np.int32]:
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} has dtype {arr.dtype}, expected integers")
    if arr.size and (arr.min() < -1 or arr.max() > np.iinfo(np.int32).max):
        raise ValueError(f"{name} holds values outside [-1, int32 max]")
    return np.asarray(arr, dtype=np.int32)


def _int(value: Any, name: str) -> int:
    if not is_int_in(value, 1, numpy=True):
        raise ValueError(f"{name} = {value!r} is not a positive integer")
    return int(value)


# ----------------------------------------------------------------------- checks
def check_bundle(b: ShareBundle) -> None:
    """Check every rule the swarm relies on; raise ``ValueError`` naming the first broken one."""
    if not isinstance(b.name, str) or not b.name:
        raise ValueError(f"bundle name must be a non-empty string, got {b.name!r}")
    where = f"bundle {b.name!r}:"
    names = b.feature_names
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ValueError(f"{where} feature_names must be distinct non-empty strings, got {names}")
    if len(b.feature_kinds) != len(names) or not set(b.feature_kinds) <= set(KINDS):
        raise ValueError(
            f"{where} feature_kinds must give {KINDS} for each of {len(names)} features"
        )
    classes = b.classes
    if classes.ndim != 1 or classes.size < 1 or np.unique(classes).size != classes.size:
        raise ValueError(f"{where} classes must be a 1-D array of distinct labels, got {classes!r}")
    if classes.dtype.kind not in "biufUS":  # bytes: in memory only (a file refuses them)
        raise ValueError(
            f"{where} class labels must be numbers, strings or bytes, got {classes.dtype}"
        )
    _int(b.n_train, f"{where} n_train")
    if not isinstance(b.trees, list | tuple) or not b.trees:
        raise ValueError(f"{where} needs a non-empty list of trees")
    n_nodes = _check_trees(b.trees, len(names), classes.size, where)
    counts = b.class_counts
    if (
        counts.shape != (n_nodes, classes.size)
        or not np.isfinite(counts).all()
        or (counts < 0).any()
    ):
        raise ValueError(
            f"{where} class_counts has shape {counts.shape}, expected ({n_nodes}, "
            f"{classes.size}) of finite counts >= 0"
        )
    _check_count_totals(b, counts, where)
    _check_surrogates(b, n_nodes, where)
    std = b.feature_std
    if std.shape != (len(names),) or not np.isfinite(std).all() or (std < 0).any():
        raise ValueError(f"{where} feature_std must be {len(names)} finite values >= 0, got {std}")
    if b.shared_features is not None and not set(b.shared_features) <= set(names):
        missing = sorted(set(b.shared_features) - set(names))
        raise ValueError(f"{where} shared_features {missing} are not among its features")
    _check_categories(b, where)
    seen: set[str] = set()
    for imp in b.imputers:
        _check_imputer(imp, b, where)
        if imp.feature in seen:
            raise ValueError(f"{where} has two imputers for feature {imp.feature!r}")
        seen.add(imp.feature)


def _check_trees(trees: Iterable[Tree], n_features: int, n_classes: int, where: str) -> int:
    """Child links, split features and class proportions of every tree; the node count."""
    total = 0
    for t, tree in enumerate(trees):
        if not isinstance(tree, Tree):
            raise ValueError(f"{where} trees[{t}] is a {type(tree).__name__}, not a Tree")
        n = tree.node_count
        left, right, feat = tree.children_left, tree.children_right, tree.feature
        leaf = left == TREE_LEAF
        idx = np.arange(n)
        internal_ok = ((left > idx) & (left < n) & (right > idx) & (right < n)) | (
            leaf & (right == TREE_LEAF)
        )
        if n < 1 or not internal_ok.all():
            raise ValueError(f"{where} tree {t} has broken child links (children after parents)")
        if ((feat < 0) | (feat >= n_features))[~leaf].any():
            raise ValueError(f"{where} tree {t} splits on a feature outside 0..{n_features - 1}")
        if np.asarray(tree.set_size).any():
            raise ValueError(
                f"{where} tree {t} has set (categorical) splits; swarm trees must use "
                "threshold splits on numeric codes"
            )
        if not np.isfinite(tree.threshold[~leaf]).all():
            raise ValueError(f"{where} tree {t} has a non-finite threshold")
        value = tree.value
        if value.shape != (n, n_classes) or not np.isfinite(value).all():
            raise ValueError(
                f"{where} tree {t} value has shape {value.shape}, expected ({n}, {n_classes})"
            )
        if (value < 0).any() or not np.allclose(value.sum(axis=1), 1.0, atol=1e-6):
            raise ValueError(f"{where} tree {t} value rows must be class proportions summing to 1")
        w = tree.weighted_n_node_samples
        if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any():
            raise ValueError(f"{where} tree {t} weighted_n_node_samples must be finite and >= 0")
        # N_R / N (the PR and MP strategies) must be a fraction: no child outweighs its
        # parent (up to rounding of the sums of sample weights).
        heavier = np.maximum(w[left[~leaf]], w[right[~leaf]])
        bad = heavier > w[~leaf] * (1.0 + _WEIGHT_RTOL)
        if bad.any():
            node = int(idx[~leaf][np.flatnonzero(bad)[0]])
            raise ValueError(
                f"{where} tree {t}, node {node}: a child's weighted_n_node_samples "
                f"({heavier[bad][0]}) exceeds its parent's ({w[node]}); children's weights "
                "are parts of their parent's"
            )
        total += n
    return total


def _check_count_totals(b: ShareBundle, counts: NDArray[np.float64], where: str) -> None:
    """The pooled forest divides by each node's class count total, and by the roots'."""
    with np.errstate(over="ignore"):
        totals = counts.sum(axis=1)
    if not np.isfinite(totals).all():
        node = int(np.flatnonzero(~np.isfinite(totals))[0])
        raise ValueError(
            f"{where} class_counts of node {node} add up to more than the largest float "
            f"({counts[node].tolist()}); a node's class proportions are its counts over their sum"
        )
    roots = np.cumsum([0] + [t.node_count for t in b.trees])[:-1]
    if not (totals[roots] > 0).all():
        tree = int(np.flatnonzero(~(totals[roots] > 0))[0])
        raise ValueError(
            f"{where} class_counts of tree {tree}'s root are all 0; the pooled class prior "
            "is the roots' counts over their sum"
        )


def _check_surrogates(b: ShareBundle, n_nodes: int, where: str) -> None:
    feat, thr, flip, adj = b.surr_feature, b.surr_threshold, b.surr_flip, b.surr_agreement
    shape = feat.shape
    if len(shape) != 2 or shape[0] != n_nodes or any(a.shape != shape for a in (thr, flip, adj)):
        raise ValueError(
            f"{where} surrogate arrays must all have shape ({n_nodes}, n_surrogates), got "
            f"{feat.shape}, {thr.shape}, {flip.shape}, {adj.shape}"
        )
    present = feat >= 0
    if ((feat < -1) | (feat >= b.n_features)).any():
        raise ValueError(f"{where} surr_feature holds indices outside -1..{b.n_features - 1}")
    if shape[1] > 1 and (present[:, 1:] & ~present[:, :-1]).any():
        raise ValueError(f"{where} surrogate lists must be ranked: no surrogate after a -1")
    node_feat = np.concatenate([t.feature for t in b.trees])
    if (present & (feat == node_feat[:, None])).any():
        raise ValueError(f"{where} a surrogate uses its node's own split feature")
    if not np.isfinite(thr[present]).all():
        raise ValueError(f"{where} surr_threshold must be finite where a surrogate exists")
    ok = np.isfinite(adj) & (adj > 0) & (adj <= 1 + 1e-12)
    if (present & ~ok).any():
        raise ValueError(f"{where} surr_agreement must be in (0, 1] where a surrogate exists")


def _check_categories(b: ShareBundle, where: str) -> None:
    """Each text column's category list: a categorical feature, distinct sorted scalars."""
    for name, values in b.categories.items():
        if name not in b.feature_names:
            raise ValueError(f"{where} categories given for unknown feature {name!r}")
        if b.feature_kinds[b.feature_names.index(name)] != "categorical":
            raise ValueError(f"{where} feature {name!r} has categories but is numeric")
        plain = all(isinstance(v, str | int | float | bool) for v in values)
        if not values or not plain or list(values) != sort_categories(values):
            raise ValueError(
                f"{where} categories of {name!r} must be distinct numbers or strings in "
                f"sorted order, got {list(values)}"
            )
        if len(set(values)) != len(values):
            raise ValueError(f"{where} categories of {name!r} repeat a value: {list(values)}")


def _check_imputer(imp: Imputer, b: ShareBundle, where: str) -> None:
    if imp.feature not in b.feature_names:
        raise ValueError(f"{where} imputer for unknown feature {imp.feature!r}")
    kind = b.feature_kinds[b.feature_names.index(imp.feature)]
    what = f"{where} imputer of {imp.feature!r}"
    if imp.kind != kind:
        raise ValueError(f"{what} has kind {imp.kind!r} but the feature is {kind!r}")
    inputs = imp.inputs
    if (
        not all(isinstance(n, str) for n in inputs)
        or len(set(inputs)) != len(inputs)
        or not set(inputs) <= set(b.feature_names) - {imp.feature}
    ):
        raise ValueError(f"{what} needs distinct inputs among the other features, got {inputs}")
    n_out = 1 if kind == "numeric" else imp.categories.shape[0]
    if imp.intercept.shape != (n_out,) or imp.coef.shape != (n_out, len(inputs)):
        raise ValueError(
            f"{what}: intercept {imp.intercept.shape} and coef {imp.coef.shape}, expected "
            f"({n_out},) and ({n_out}, {len(inputs)})"
        )
    if not (np.isfinite(imp.intercept).all() and np.isfinite(imp.coef).all()):
        raise ValueError(f"{what} has non-finite coefficients")
    cats = imp.categories
    if kind == "categorical" and (
        cats.ndim != 1 or cats.size < 1 or not np.isfinite(cats).all() or (np.diff(cats) <= 0).any()
    ):
        raise ValueError(f"{what} categories must be sorted distinct finite codes, got {cats}")
    if kind == "numeric" and cats.size:
        raise ValueError(f"{what} is numeric but lists categories")
    if not (np.isnan(imp.quality) or (np.isfinite(imp.quality) and imp.quality <= 1.0)):
        raise ValueError(f"{what} quality {imp.quality} must be NaN or a finite score <= 1")
    _int(imp.n_train, f"{what} n_train")


def load_bundles(
    paths: Iterable[str | os.PathLike[str]], *, on_error: str = "warn"
) -> list[ShareBundle]:
    """Load several bundle files, refusing the invalid ones.

    Parameters
    ----------
    paths : iterable of path-like
    on_error : {"warn", "raise", "ignore"}, default="warn"
        What to do with a file that fails validation: warn (``UserWarning`` naming the
        file and the problem) and go on with the others, raise the ``ValueError``, or
        skip it silently. A path that is missing (``FileNotFoundError``) or a directory
        (``IsADirectoryError``) is raised whatever ``on_error``, before any file is read.

    Returns
    -------
    list of ShareBundle
        The valid bundles, in the order given.
    """
    if on_error not in ("warn", "raise", "ignore"):
        raise ValueError(f"on_error must be 'warn', 'raise' or 'ignore', got {on_error!r}")
    if isinstance(paths, str | bytes | os.PathLike):  # a string's characters were the paths
        raise TypeError(
            f"paths must be a list of bundle files, got one path {paths!r}; give [path]"
        )
    paths = list(paths)
    for path in paths:  # the caller's list, not a peer's file: raised before any is read
        if os.path.isdir(path):
            raise IsADirectoryError(
                f"share bundle {os.fspath(path)!r} is a directory, not a bundle file (on_error "
                "covers files that fail validation); list the files in it, e.g. "
                "sorted(Path(directory).glob('*.ffb'))"
            )
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"share bundle {os.fspath(path)!r} does not exist (on_error covers files that "
                "fail validation)"
            )
    out = []
    for path in paths:
        try:
            out.append(ShareBundle.load(path))
        except ValueError as exc:
            if on_error == "raise":
                raise
            if on_error == "warn":
                warnings.warn(f"refused share bundle: {exc}", UserWarning, stacklevel=2)
    return out
