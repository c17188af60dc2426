"""Fitted forests exported to Treelite, ONNX and SHAP (the extra ``fedforest[export]``).

Each export reads the fitted trees only (:class:`~fedforest.tree.arrays.Tree`), never a
training row; the libraries are imported when an export runs, never at ``import
fedforest``.

- **Treelite** (:func:`to_treelite_model`): every split, numeric and set splits (categorical
  features, the client index H, as categorical tests on their codes), with float64
  thresholds and leaf values, the trees averaged as fedforest averages them. A code a set
  split has not seen (an unseen category, an unknown client) takes the heavier child, as
  :meth:`apply` does; fedforest's ``predict`` mixes both children there (the marginal
  rule), which no single Treelite tree can express.
- **ONNX** (:func:`to_onnx_model`): the scikit-learn forest of ``to_sklearn()`` through
  skl2onnx's tree converters, numeric splits only, float32 inputs and outputs.
- **SHAP** (:func:`shap_explainer`): ``shap.TreeExplainer`` on the trees as arrays (shap's
  documented dictionary format), path-dependent: the node weights stand for the training
  data, so no data is needed. Node weights and values are summed from the leaves up, so
  they are consistent even where ``privacy="dp"`` recorded noisy counts; the leaves, and
  so the predictions, are the forest's own. Numeric splits only, in float64 (x <= t as
  fedforest compares).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._common import TREE_LEAF
from .arrays import Tree

__all__ = [
    "check_numeric",
    "check_one_output",
    "consistent_nodes",
    "import_extra",
    "missing_left",
    "n_model_features",
    "shap_explainer",
    "to_onnx_model",
    "to_treelite_model",
]

#: What ``pip install`` brings the exports (pinned in pyproject.toml).
EXTRA = "pip install 'fedforest[export]'"


def import_extra(module: str, what: str) -> Any:
    """Import ``module`` for the export ``what``, or say which extra installs it."""
    try:
        if module == "shap":
            with warnings.catch_warnings():
                # shap 0.51 styles its plots with colormap setters matplotlib 3.11 marks as
                # pending deprecation, at import; not fedforest's, and harmless.
                warnings.filterwarnings(
                    "ignore",
                    message=r"The set_(bad|over|under) function will be deprecated",
                    category=PendingDeprecationWarning,
                )
                return importlib.import_module(module)
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise ImportError(f"{what} needs {top}, which is not installed: {EXTRA}.") from exc


def n_model_features(trees: list[Tree], n_features: int) -> int:
    """Columns an exported model reads: X's, plus the client code if a tree splits on H."""
    splits_on_h = any(np.any(t.feature == n_features) for t in trees)
    return n_features + 1 if splits_on_h else n_features


def _heavier_left(tree: Tree, node: int) -> bool:
    """Whether the left child weighs at least as much as the right (``apply``'s tie rule)."""
    w = tree.weighted_n_node_samples
    return bool(w[tree.children_left[node]] >= w[tree.children_right[node]])


def missing_left(tree: Tree) -> NDArray[np.bool_]:
    """Per node, whether a missing value (NaN) goes left at a numeric split.

    The tree's ``missing_go_to_left`` where it records one; else the heavier child.
    """
    recorded = getattr(tree, "missing_go_to_left", None)
    if recorded is not None and len(recorded) == tree.node_count:
        return np.asarray(recorded).astype(bool)
    w = tree.weighted_n_node_samples
    left, right = np.maximum(tree.children_left, 0), np.maximum(tree.children_right, 0)
    return np.asarray(w[left] >= w[right])


# ---------------------------------------------------------------------------------- Treelite
def to_treelite_model(trees: list[Tree], n_features: int, n_classes: int | list[int] | None) -> Any:
    """The forest as a ``treelite.Model`` built with Treelite's model builder.

    Parameters
    ----------
    trees : list of Tree
    n_features : int
        Columns of X; the client index H, if split on, is column ``n_features``.
    n_classes : int, list of int or None
        Number of classes (classification: leaves hold class proportions), one per output
        for multi-output classification, None for regression.

    Returns
    -------
    treelite.Model
        float64 thresholds and leaves; ``treelite.gtil.predict`` returns, per row, the mean
        over trees of the leaf values: shape (n, 1, 1) for regression ((n, n_outputs, 1) for
        multi-output), (n, 1, n_classes) for classification ((n, n_outputs, max n_classes)
        for multi-output, an output with fewer classes padded with zeros). Set splits are
        categorical
        tests on the codes of :meth:`export_matrix`; numeric splits send ``x <= threshold``
        left.
    """
    mb = import_extra("treelite.model_builder", "to_treelite()")
    n_trees = len(trees)
    # Multi-output classification: a target per output, of its own number of classes.
    # Multi-output regression: one target per output, every tree holding a leaf vector.
    sizes = n_classes if isinstance(n_classes, list) else None
    if n_classes is None:
        n_out, n_target = 1, int(trees[0].value.shape[1])
    elif isinstance(n_classes, list):
        n_out, n_target = max(n_classes), len(n_classes)
    else:
        n_out, n_target = int(n_classes), 1
    target_id = [0] * n_trees if n_target == 1 else [-1] * n_trees
    if n_classes is None:
        task, post, class_id = "kRegressor", "identity", [0] * n_trees
    else:
        task, post, class_id = "kMultiClf", "identity_multiclass", [-1] * n_trees
    builder = mb.ModelBuilder(
        threshold_type="float64",
        leaf_output_type="float64",
        metadata=mb.Metadata(
            num_feature=n_model_features(trees, n_features),
            task_type=task,
            average_tree_output=True,
            num_target=n_target,
            num_class=list(sizes) if sizes else [n_out] * n_target,
            leaf_vector_shape=(n_target, n_out),
        ),
        tree_annotation=mb.TreeAnnotation(num_tree=n_trees, target_id=target_id, class_id=class_id),
        postprocessor=mb.PostProcessorFunc(name=post),
        base_scores=[0.0] * (n_out * n_target),
    )
    for tree in trees:
        builder.start_tree()
        nan_left = missing_left(tree)
        for node in range(tree.node_count):
            _build_node(builder, tree, node, bool(nan_left[node]), n_classes is not None, sizes)
        builder.end_tree()
    return builder.commit()


def _build_node(
    builder: Any,
    tree: Tree,
    node: int,
    nan_left: bool,
    classification: bool,
    sizes: list[int] | None = None,
) -> None:
    """One node: a leaf, a numeric test (NaN: ``nan_left``) or a categorical test.

    At a categorical test unseen codes, -1 and NaN go to the heavier child. ``sizes``:
    the classes of each output (multi-output classification: padded leaf vectors).
    """
    builder.start_node(node)
    left, right = int(tree.children_left[node]), int(tree.children_right[node])
    if left == TREE_LEAF:
        value = tree.value[node]
        if sizes:  # one row of max(sizes) per output, zeros after an output's classes
            padded = np.zeros((len(sizes), max(sizes)))
            for o, block in enumerate(np.split(value, np.cumsum(sizes)[:-1])):
                padded[o, : block.size] = block
            value = padded.ravel()
        vector = classification or value.shape[0] > 1  # class proportions, or outputs
        builder.leaf([float(v) for v in value] if vector else float(value[0]))
    else:
        heavy_left = _heavier_left(tree, node)
        feature = int(tree.feature[node])
        if tree.set_size[node] > 0:
            codes_left, codes_right = tree.split_set(node)
            # The lighter side's codes are listed: every other code (the heavier side's,
            # unseen ones, -1) fails the test and goes to the heavier child.
            listed = codes_right if heavy_left else codes_left
            builder.categorical_test(
                feature,
                default_left=heavy_left,
                category_list=sorted(int(c) for c in listed),
                category_list_right_child=heavy_left,
                left_child_key=left,
                right_child_key=right,
            )
        else:
            builder.numerical_test(
                feature,
                float(tree.threshold[node]),
                default_left=nan_left,
                opname="<=",
                left_child_key=left,
                right_child_key=right,
            )
    builder.data_count(int(tree.n_node_samples[node]))
    builder.sum_hess(float(tree.weighted_n_node_samples[node]))
    builder.end_node()


# ---------------------------------------------------------------------------------- ONNX
def check_numeric(trees: list[Tree], n_features: int, what: str, why: str) -> None:
    """Refuse a forest with set splits where only numeric thresholds can be expressed.

    ``what`` names the operation, ``why`` says what it cannot express (a sentence).
    """
    for index, tree in enumerate(trees):
        if np.any(tree.set_size > 0) or np.any(tree.feature >= n_features):
            raise ValueError(
                f"{what} handles numeric splits only, and tree {index} splits on a category "
                f"set or on the client index H: {why} Fit without categorical_features and "
                "split_on_client for it (to_treelite() exports set splits)."
            )


def check_one_output(classes: Any, what: str) -> None:
    """Refuse a multi-output classifier (a list of class lists) where it cannot be exported.

    ONNX: skl2onnx (1.20) refuses a multi-output forest's string labels, and on numeric
    ones its probabilities disagreed with scikit-learn's (checked once by hand), so no
    ONNX model of one is offered.
    """
    if isinstance(classes, list):
        raise ValueError(
            f"{what} exports classifiers of one output, and this one has {len(classes)} "
            "(multi-output y): skl2onnx's conversion of a multi-output RandomForestClassifier "
            "refuses string labels and does not reproduce its probabilities. to_sklearn() "
            "and to_treelite() convert it, and shap_values() explains it."
        )


def to_onnx_model(
    sk_forest: Any, trees: list[Tree], n_features: int, target_opset: Any = None
) -> Any:
    """The scikit-learn forest ``sk_forest`` (of ``trees``) as an ONNX model.

    skl2onnx's converters build the graph; it reads one float32 input ``X`` of shape
    (n, n_features). A regressor's output ``variable`` is (n, n_outputs) float32; a classifier's
    are ``label`` (n,) and ``probabilities`` (n, n_classes) float32 (no ZipMap). ONNX's tree
    ensembles compare in float32, as scikit-learn does. skl2onnx leaves a random forest's
    missing-value sides out (NaN would always go right); they are set from the trees.
    """
    skl2onnx = import_extra("skl2onnx", "to_onnx()")
    types = import_extra("skl2onnx.common.data_types", "to_onnx()")
    options = {id(sk_forest): {"zipmap": False}} if hasattr(sk_forest, "classes_") else None
    onnx_model = skl2onnx.convert_sklearn(
        sk_forest,
        name="fedforest",
        initial_types=[("X", types.FloatTensorType([None, n_features]))],
        options=options,
        target_opset=target_opset,
    )
    _set_missing_sides(onnx_model, trees)
    n_out = int(getattr(sk_forest, "n_outputs_", 1))
    if n_out > 1:  # skl2onnx declares (n, 1) for a multi-output forest: its real shape
        onnx_model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = n_out
    return onnx_model


def _set_missing_sides(onnx_model: Any, trees: list[Tree]) -> None:
    """``nodes_missing_value_tracks_true`` of the tree ensemble from the trees' NaN sides."""
    nan_left = [missing_left(tree) for tree in trees]
    for node in onnx_model.graph.node:
        if not node.op_type.startswith("TreeEnsemble"):
            continue
        attrs = {a.name: a for a in node.attribute}
        tree_ids, node_ids = attrs["nodes_treeids"].ints, attrs["nodes_nodeids"].ints
        modes = attrs["nodes_modes"].strings
        tracks = [
            int(mode != b"LEAF" and bool(nan_left[t][i]))
            for t, i, mode in zip(tree_ids, node_ids, modes, strict=True)
        ]
        if "nodes_missing_value_tracks_true" in attrs:
            attr = attrs["nodes_missing_value_tracks_true"]
            del attr.ints[:]
            attr.ints.extend(tracks)
        else:
            onnx = import_extra("onnx", "to_onnx()")
            node.attribute.append(
                onnx.helper.make_attribute("nodes_missing_value_tracks_true", tracks)
            )


# ---------------------------------------------------------------------------------- SHAP
def consistent_nodes(tree: Tree) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Node weights and values summed from the leaves up (leaves unchanged).

    Each internal node gets its children's total weight and their weighted mean value:
    what path-dependent TreeSHAP assumes. Equal to the recorded statistics up to
    rounding, except under ``privacy="dp"`` (noisy counts and sums).
    """
    weight = tree.weighted_n_node_samples.astype(np.float64).copy()
    value = tree.value.astype(np.float64).copy()
    for node in range(tree.node_count - 1, -1, -1):  # children after their parent
        left, right = tree.children_left[node], tree.children_right[node]
        if left != TREE_LEAF:
            weight[node] = weight[left] + weight[right]
            if weight[node] > 0:
                value[node] = (weight[left] * value[left] + weight[right] * value[right]) / (
                    weight[node]
                )
    return weight, value


def shap_explainer(trees: list[Tree], n_features: int) -> Any:
    """``shap.TreeExplainer`` of the forest, path-dependent, from its node statistics.

    The trees go to shap in its dictionary format (arrays per tree), with the leaves'
    values divided by the number of trees (the forest's mean), float64 inputs, and the
    consistent weights of :func:`consistent_nodes`. ``shap_values(X)`` then has shape
    (n, n_features) for regression and (n, n_features, n_classes) for classification, and
    ``shap_values(X).sum(axis=1) + expected_value`` is the forest's prediction.
    """
    check_numeric(
        trees,
        n_features,
        "shap_values()",
        "shap's TreeExplainer takes trees as arrays with numeric thresholds.",
    )
    shap = import_extra("shap", "shap_values()")
    scale = 1.0 / len(trees)
    arrays = []
    for tree in trees:
        weight, value = consistent_nodes(tree)
        leaf = tree.children_left == TREE_LEAF
        nan_child = np.where(missing_left(tree), tree.children_left, tree.children_right)
        arrays.append(
            {
                "children_left": tree.children_left.astype(np.int32),
                "children_right": tree.children_right.astype(np.int32),
                "children_default": np.where(leaf, TREE_LEAF, nan_child).astype(np.int32),
                "features": np.where(leaf, -2, tree.feature).astype(np.int32),
                "thresholds": np.where(leaf, -2.0, tree.threshold).astype(np.float64),
                "values": value * scale,
                "node_sample_weight": weight,
            }
        )
    model = {
        "trees": arrays,
        "base_offset": 0.0,
        "input_dtype": np.float64,
        "internal_dtype": np.float64,
        "tree_output": "raw_value",
    }
    return shap.TreeExplainer(model, feature_perturbation="tree_path_dependent")
