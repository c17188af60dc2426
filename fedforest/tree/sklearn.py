"""Fitted trees as scikit-learn objects: ``DecisionTree*`` with a ``tree_``, and forests.

scikit-learn's ``Tree`` is rebuilt from its documented state (``nodes``, ``values``) through
its own ``__setstate__``: the object then predicts, applies and reports exactly as one that
scikit-learn grew. Two differences of kind are refused or stated:

- set splits (categorical features, the client index H) have no scikit-learn equivalent:
  converting a tree that has one is a ``ValueError``;
- scikit-learn casts X to float32 before comparing it with a threshold. Each threshold ``t``
  becomes the largest float32 at or below ``t``, so that for every float32 value ``x``,
  ``x <= t`` decides the same way in both; rows whose float64 values are not float32 values
  can still fall on the other side of a threshold within float32 rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.tree._tree import Tree as SkTree
from sklearn.utils.validation import check_is_fitted

from .._common import TREE_LEAF, resolve_max_features
from . import export
from .arrays import Tree

__all__ = [
    "EnsembleMixin",
    "NotNumericError",
    "per_output_sizes",
    "to_sklearn_forest",
    "to_sklearn_tree",
]

#: scikit-learn's node record (read from its own Tree, so it follows the installed version).
_NODE_DTYPE = SkTree(1, np.array([1], dtype=np.intp), 1).__getstate__()["nodes"].dtype


def to_sklearn_tree(
    tree: Tree, n_features: int, classes: Any, index: int = 0
) -> DecisionTreeRegressor | DecisionTreeClassifier:
    """One fedforest tree as a fitted scikit-learn decision tree.

    Parameters
    ----------
    tree : Tree
    n_features : int
        Columns of X (a split on the client index H cannot be converted).
    classes : ndarray, list of ndarray or None
        Class labels (classification; a list of each output's labels for multi-output),
        None for regression.
    index : int
        The tree's position, named in the error.

    Raises
    ------
    NotNumericError
        If the tree has a set split (categorical feature or client index).
    """
    if np.any(tree.set_size > 0) or np.any(tree.feature >= n_features):
        raise NotNumericError(
            f"Tree {index} splits on a category set or on the client index H, which "
            "scikit-learn's trees cannot express; only forests with numeric splits convert "
            "(fit without categorical_features and split_on_client)."
        )
    n = tree.node_count
    leaf = tree.children_left == TREE_LEAF
    nodes = np.zeros(
        n, dtype=SkTree(1, np.array([1], dtype=np.intp), 1).__getstate__()["nodes"].dtype
    )
    nodes["left_child"] = np.where(leaf, TREE_LEAF, tree.children_left)
    nodes["right_child"] = np.where(leaf, TREE_LEAF, tree.children_right)
    nodes["feature"] = np.where(leaf, -2, tree.feature)
    nodes["threshold"] = np.where(leaf, -2.0, export.float32_floor(tree.threshold))
    nodes["impurity"] = tree.impurity
    nodes["n_node_samples"] = tree.n_node_samples
    nodes["weighted_n_node_samples"] = tree.weighted_n_node_samples
    # Where a NaN goes at each split: the tree's record (the heavier child without one).
    nodes["missing_go_to_left"] = np.where(leaf, 0, export.missing_left(tree))
    # Regression: one value per output (scikit-learn's n_classes of 1 for each).
    # Multi-output classification: one block of classes per output, padded with zeros to
    # the most classes (scikit-learn's value layout).
    sizes = per_output_sizes(classes, tree)
    k = len(sizes)
    sk = SkTree(n_features, np.array(sizes, dtype=np.intp), k)
    values = np.zeros((n, k, max(sizes)))
    for o, block in enumerate(np.split(tree.value, np.cumsum(sizes)[:-1], axis=1)):
        values[:, o, : block.shape[1]] = block
    sk.__setstate__(
        {"max_depth": tree.max_depth, "node_count": n, "nodes": nodes, "values": values}
    )
    est: DecisionTreeRegressor | DecisionTreeClassifier
    if classes is None:
        est = DecisionTreeRegressor()
    else:
        est = DecisionTreeClassifier()
        multi = isinstance(classes, list)
        est.classes_ = [np.asarray(c) for c in classes] if multi else np.asarray(classes)
        est.n_classes_ = np.array(sizes, dtype=np.intp) if multi else len(classes)
    est.tree_ = sk
    est.n_features_in_ = n_features
    est.n_outputs_ = k
    est.max_features_ = n_features
    return est


class NotNumericError(ValueError, AttributeError):
    """A forest with set splits has no scikit-learn form.

    A ``ValueError`` (bad input for the conversion) and an ``AttributeError``: such a forest
    has no ``estimators_``, so ``hasattr``, ``dir`` and tab completion pass over it.
    """


def per_output_sizes(classes: Any, tree: Tree) -> list[int]:
    """scikit-learn's ``n_classes`` per output: 1 per regression output, else class counts."""
    if classes is None:
        return [1] * int(tree.value.shape[1])
    if isinstance(classes, list):  # multi-output classification
        return [len(c) for c in classes]
    return [len(classes)]


def to_sklearn_forest(
    trees: list[Tree], n_features: int, classes: Any, params: dict[str, Any]
) -> RandomForestRegressor | RandomForestClassifier:
    """A fitted scikit-learn random forest holding the converted trees.

    ``params`` are the fitted model's parameters (``get_params``); those scikit-learn's
    forest has too (every one of its own but ``n_estimators``, the number of trees) become
    its parameters, and those scikit-learn passes to its trees (``estimator_params``,
    but ``random_state``: fedforest draws no per-tree seed) each tree's, so ``get_params``
    reports how the forest was grown and refitting it (``clone``) grows one alike.
    Prediction uses only the trees.
    """
    estimators = [to_sklearn_tree(t, n_features, classes, i) for i, t in enumerate(trees)]
    kind = RandomForestRegressor if classes is None else RandomForestClassifier
    names = set(kind().get_params(deep=False)) - {"n_estimators"}
    forest = kind(n_estimators=len(trees), **{k: v for k, v in params.items() if k in names})
    tree_params = {p: getattr(forest, p) for p in forest.estimator_params if p != "random_state"}
    for est in estimators:
        est.set_params(**tree_params)
        est.max_features_ = resolve_max_features(forest.max_features, n_features)
    if classes is None:
        forest.estimator_ = DecisionTreeRegressor()
    else:
        forest.estimator_ = DecisionTreeClassifier()
        multi = isinstance(classes, list)
        forest.classes_ = [np.asarray(c) for c in classes] if multi else np.asarray(classes)
        forest.n_classes_ = [len(c) for c in classes] if multi else len(classes)
    forest.estimators_ = estimators
    forest.n_features_in_ = n_features
    forest.n_outputs_ = len(per_output_sizes(classes, trees[0]))
    return forest


class EnsembleMixin:
    """scikit-learn's ensemble protocol for fedforest's estimators (``trees_`` fitted).

    ``estimators_`` (the trees as scikit-learn objects), ``len``, indexing, iteration,
    ``to_sklearn()`` and ``feature_importances_`` raising ``NotFittedError`` before fit.
    """

    trees_: list[Tree]
    n_features_in_: int
    _feature_importances: NDArray[np.float64]

    @property
    def n_outputs_(self) -> int:
        """Targets per row: the columns of a multi-output y, else 1."""
        if "trees_" not in vars(self):
            raise AttributeError("n_outputs_ is set by fit")
        if getattr(self, "_task", "regression") == "classification":
            n_classes = getattr(self, "n_classes_", 0)
            return len(n_classes) if isinstance(n_classes, list) else 1
        return int(self.trees_[0].value.shape[1])

    @property
    def feature_importances_(self) -> NDArray[np.float64]:
        """Impurity-based importances of the X features, shape (n_features,).

        Normalised over every split feature; with ``split_on_client`` the client index's
        share is ``client_importance_`` (so these sum to ``1 - client_importance_``).
        """
        check_is_fitted(self, "trees_")
        return self._feature_importances

    @feature_importances_.setter
    def feature_importances_(self, value: NDArray[np.float64]) -> None:
        self._feature_importances = value

    # ------------------------------------------------------------------ scikit-learn objects
    def to_sklearn(self) -> Any:
        """The fitted forest as a scikit-learn ``RandomForestRegressor`` / ``Classifier``.

        Its ``estimators_`` are scikit-learn decision trees with a ``tree_`` built from
        fedforest's trees (see :mod:`fedforest.tree.sklearn`): they predict as fedforest
        does (thresholds rounded down to float32, as scikit-learn compares). Its parameters
        are the model's where scikit-learn has the name (``ccp_alpha``, ``monotonic_cst``,
        ``class_weight``, ``max_samples``, ...), its trees' those scikit-learn passes to
        its trees, and ``feature_names_in_`` the model's (fitted on a DataFrame). Forests
        with set splits (categorical features, the client index) raise ``ValueError``.
        """
        check_is_fitted(self, "trees_")
        params = getattr(self, "get_params")(deep=False)  # noqa: B009
        classes = getattr(self, "classes_", None)
        forest = to_sklearn_forest(self.trees_, self.n_features_in_, classes, params)
        names = getattr(self, "feature_names_in_", None)
        if names is not None:  # scikit-learn then checks a DataFrame's columns, and warns
            forest.feature_names_in_ = np.array(names, dtype=object)
        return forest

    # ------------------------------------------------------------------ exports
    def to_treelite(self) -> Any:
        """The fitted forest as a ``treelite.Model`` (extra ``fedforest[export]``).

        Every split is exported, numeric and set splits (categorical features, the client
        index H) alike; Treelite reads the columns of :meth:`export_matrix`.
        ``treelite.gtil.predict(model.to_treelite(), model.export_matrix(X))`` gives
        ``predict`` (regression, shape (n, 1, 1)) or ``predict_proba`` (shape
        (n, 1, n_classes); multi-output: (n, n_outputs, max n_classes), zero padded),
        except for rows with a category or client that a set split has not seen:
        Treelite sends them to the heavier child (as :meth:`apply`), where fedforest mixes
        both children (the marginal rule). See docs/export.md.
        """
        check_is_fitted(self, "trees_")
        n_classes = getattr(self, "n_classes_", None)  # a list for multi-output
        return export.to_treelite_model(self.trees_, self.n_features_in_, n_classes)

    def export_matrix(self, X: Any, *, client_ids: Any = None) -> NDArray[np.float64]:
        """X as the Treelite export reads it: float64, categories as codes, client column.

        Categorical columns become the codes of ``categories_`` (-1: unseen); when the
        forest splits on the client index, the client's position in ``clients_`` is
        appended as a last column (-1: unknown or no ``client_ids``).
        """
        augmented = getattr(self, "_augmented")(X, client_ids)  # noqa: B009
        n = export.n_model_features(self.trees_, self.n_features_in_)
        return np.ascontiguousarray(augmented[:, :n])

    def to_onnx(self, *, target_opset: Any = None, dtype: Any = np.float32) -> Any:
        """The fitted forest as an ``onnx.ModelProto`` (extra ``fedforest[export]``).

        A numeric forest is converted from :meth:`to_sklearn` by skl2onnx's tree
        converters: one float32 input ``X``; outputs ``variable`` (regression, (n,
        n_outputs)) or ``label`` and ``probabilities`` (classification), in float32 as
        ONNX's tree ensembles compute (see docs/export.md for the tolerance). A multi-output
        classifier's graph is built by :func:`fedforest.tree.export.to_onnx_multi_output`
        (skl2onnx mis-converts it): ``label`` (n, n_outputs), then ``probabilities_0``,
        ``probabilities_1``, ... (one per output, as ``predict_proba``); a one-class
        classifier's likewise (:func:`fedforest.tree.export.to_onnx_one_class`), with
        ``label`` and ``probabilities``.

        ``dtype=numpy.float64``: the input ``X`` is float64 and compared with the trees'
        float64 thresholds (a graph built by :func:`fedforest.tree.export.to_onnx_graph`,
        ai.onnx.ml 3), so every row routes as in :meth:`predict`; with float32 input a
        float64 value within float32 rounding of a threshold can go the other way.

        A forest with set splits (categorical features, the client index H) is written
        with ai.onnx.ml 5's ``TreeEnsemble`` and reads the columns of
        :meth:`export_matrix` (as Treelite does); a code a set split has not seen goes to
        the heavier child (as :meth:`apply`), where :meth:`predict` mixes both children.
        """
        check_is_fitted(self, "trees_")
        double = export.onnx_dtype(dtype)
        classes = getattr(self, "classes_", None)
        export.check_onnx_labels(classes)
        one_class = classes is not None and not isinstance(classes, list) and len(classes) == 1
        sets = export.n_model_features(self.trees_, self.n_features_in_) > self.n_features_in_
        sets = sets or any(bool(np.any(t.set_size > 0)) for t in self.trees_)
        if double or sets or isinstance(classes, list) or one_class:
            # A graph of fedforest's own: skl2onnx mis-converts a multi-output classifier,
            # onnxruntime reads one class as two, float64 thresholds need tensors, and set
            # splits need ai.onnx.ml 5's TreeEnsemble.
            n_columns = export.n_model_features(self.trees_, self.n_features_in_)
            return export.to_onnx_graph(
                self.trees_, n_columns, classes, target_opset, double=double
            )
        return export.to_onnx_model(
            self.to_sklearn(), self.trees_, self.n_features_in_, target_opset
        )

    def shap_explainer(self) -> Any:
        """A path-dependent ``shap.TreeExplainer`` of the forest, from its node statistics.

        No data is needed: the trees' node weights (the federated row weights) stand for
        the training data. Numeric splits only (a forest with set splits raises
        ``ValueError``: :meth:`shap_values` computes theirs itself); see
        :func:`fedforest.tree.export.shap_explainer`. A multi-output
        classifier's explainer has one output per class of every output, in order (its
        ``expected_value`` too); :meth:`shap_values` splits them per output.
        """
        check_is_fitted(self, "trees_")
        return export.shap_explainer(self.trees_, self.n_features_in_)

    def shap_values(self, X: Any) -> Any:
        """SHAP values of the rows of X, from the fitted forest alone (extra ``export``).

        Shape (n_samples, n_features) for regression, (n_samples, n_features, n_classes)
        for classification (of ``predict_proba``). They add up:
        ``shap_values(X).sum(axis=1) + shap_expected_value_`` is ``predict(X)``
        (``predict_proba(X)``), to rounding. Multi-output classification: a list of one
        (n_samples, n_features, n_classes) array per output, as ``predict_proba``.

        A forest with set splits (categorical features, ``split_on_client``) is explained
        by :func:`fedforest.tree.shap_sets.shap_values_sets` (shap's explainer takes
        numeric thresholds only): the same path-dependent TreeSHAP, with the marginal rule
        of ``predict`` where a split has not seen a row's code (an unseen category; the
        client, which ``X`` does not give), so they add up to ``predict(X)`` too. Either
        way the expected value is :attr:`shap_expected_value_`.
        """
        if self._has_set_splits():
            from .shap_sets import shap_values_sets

            rows = self.export_matrix(X)
            values = shap_values_sets(self.trees_, rows.shape[1], rows)[:, : self.n_features_in_]
            values = values[..., 0] if values.shape[2] == 1 else values
        else:
            rows = self.export_matrix(X)[:, : self.n_features_in_]
            values = np.asarray(self.shap_explainer().shap_values(rows))
        classes = getattr(self, "classes_", None)
        if isinstance(classes, list):  # multi-output: one block of classes per output
            values = values.reshape(rows.shape[0], self.n_features_in_, -1)
            bounds = np.cumsum([0, *[len(c) for c in classes]])
            return [values[..., a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        if classes is not None:  # shap drops the class axis of a one-class forest
            values = values.reshape(rows.shape[0], self.n_features_in_, len(classes))
        return values

    def _has_set_splits(self) -> bool:
        """Whether a tree splits on a category set or on the client index."""
        n = self.n_features_in_
        return export.n_model_features(self.trees_, n) > n or any(
            bool(np.any(t.set_size > 0)) for t in self.trees_
        )

    @property
    def shap_expected_value_(self) -> NDArray[np.float64]:
        """The expected value :meth:`shap_values` add up from, shape (n_values,).

        One value per output (regression) or class (classification; a multi-output
        classifier's classes of every output, in order): ``shap_explainer().expected_value``
        for a forest of numeric splits, and the mean root value
        (:func:`~.shap_sets.shap_base_value`) for one with set splits, which shap's
        explainer refuses. Raises ``NotFittedError`` before fit.
        """
        check_is_fitted(self, "trees_")
        if self._has_set_splits():
            from .shap_sets import shap_base_value

            return shap_base_value(self.trees_)
        return np.atleast_1d(np.asarray(self.shap_explainer().expected_value, dtype=np.float64))

    @property
    def estimators_(self) -> list[Any]:
        """The trees as fitted scikit-learn ``DecisionTree*`` objects (numeric splits only)."""
        # Before fit, scikit-learn's NotFittedError (an AttributeError, so hasattr is False)
        # rather than an AttributeError naming fedforest's own ``trees_``.
        check_is_fitted(self, "trees_")
        cached = self.__dict__.get("_sklearn_trees")
        if cached is None or cached[0] is not self.trees_:
            cached = (self.trees_, self.to_sklearn().estimators_)
            self.__dict__["_sklearn_trees"] = cached
        return list(cached[1])

    def __len__(self) -> int:
        """Number of trees (scikit-learn's ensembles' ``len``)."""
        check_is_fitted(self, "trees_")
        return len(self.trees_)

    def __bool__(self) -> bool:
        """An estimator is always true (``len`` would raise before fit)."""
        return True

    def __getitem__(self, index: int) -> Any:
        """The ``index``-th tree as a scikit-learn decision tree."""
        return self.estimators_[index]

    def __iter__(self) -> Any:
        """The trees as scikit-learn decision trees."""
        return iter(self.estimators_)

    def decision_path(self, X: Any, *, client_ids: Any = None) -> tuple[Any, NDArray[np.int64]]:
        """Nodes each row passes through, as scikit-learn's forests report them.

        Returns a sparse indicator of shape (n_samples, total nodes), 1 where row ``i``
        passes through node ``j`` (the trees' nodes one after another), and the offsets
        ``n_nodes_ptr`` of each tree's columns. Rows follow :meth:`apply`.
        """
        from scipy.sparse import csr_matrix

        leaves = np.asarray(getattr(self, "apply")(X, client_ids=client_ids))  # noqa: B009
        ptr = np.zeros(len(self.trees_) + 1, dtype=np.int64)
        np.cumsum([t.node_count for t in self.trees_], out=ptr[1:])
        cols = []
        for t, tree in enumerate(self.trees_):
            table = _ancestors(tree)[leaves[:, t]] + ptr[t]  # (n, depth + 1), -1 padded
            table[table < ptr[t]] = -1
            cols.append(table)
        path = np.concatenate(cols, axis=1)
        rows = np.repeat(np.arange(path.shape[0]), path.shape[1])
        keep = path.ravel() >= 0
        data = np.ones(int(keep.sum()), dtype=np.int64)
        shape = (path.shape[0], int(ptr[-1]))
        indicator = csr_matrix((data, (rows[keep], path.ravel()[keep])), shape=shape)
        return indicator, ptr


def _ancestors(tree: Tree) -> NDArray[np.int64]:
    """Per node, the nodes from the root down to it (row ``j``), padded with -1."""
    n = tree.node_count
    parent = np.full(n, -1, dtype=np.int64)
    internal = np.flatnonzero(tree.children_left != TREE_LEAF)
    parent[tree.children_left[internal]] = internal
    parent[tree.children_right[internal]] = internal
    depth = tree.max_depth
    out = np.full((n, depth + 1), -1, dtype=np.int64)
    node = np.arange(n)
    for level in range(depth + 1):  # walk up: each node's chain fills its row from the right
        out[:, depth - level] = node
        node = np.where(node >= 0, parent[np.maximum(node, 0)], -1)
    return out
