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
  skl2onnx's tree converters, numeric splits only, float32 inputs and outputs. A
  multi-output classifier's graph is built here (:func:`to_onnx_multi_output`): skl2onnx
  1.20 refuses its string labels and does not reproduce its probabilities.
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
from .onnx_sets import tree_ensemble_attributes

__all__ = [
    "check_numeric",
    "check_onnx_labels",
    "consistent_nodes",
    "float32_floor",
    "import_extra",
    "missing_left",
    "n_model_features",
    "shap_explainer",
    "to_onnx_model",
    "onnx_dtype",
    "to_onnx_graph",
    "to_onnx_multi_output",
    "to_onnx_one_class",
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
        if exc.name and exc.name.split(".")[0] != top:  # the one missing: skl2onnx's onnx
            top = exc.name  # was "needs skl2onnx", which was installed
        raise ImportError(f"{what} needs {top}, which is not installed: {EXTRA}.") from exc


def n_model_features(trees: list[Tree], n_features: int) -> int:
    """Columns an exported model reads: X's, plus the client code if a tree splits on H."""
    splits_on_h = any(np.any(t.feature == n_features) for t in trees)
    return n_features + 1 if splits_on_h else n_features


def _heavier_left(tree: Tree, node: int) -> bool:
    """Whether the left child weighs at least as much as the right (``apply``'s tie rule)."""
    w = tree.weighted_n_node_samples
    return bool(w[tree.children_left[node]] >= w[tree.children_right[node]])


def float32_floor(threshold: NDArray[np.float64]) -> NDArray[np.float64]:
    """The largest float32 value at or below each threshold (as float64).

    For every float32 ``x``, ``x <= float32_floor(t)`` decides as ``x <= t``: the threshold
    scikit-learn's trees and ONNX's tree ensembles (which compare in float32) are given.
    """
    with np.errstate(over="ignore"):  # beyond float32: inf, then stepped down to its max
        t32 = np.asarray(threshold, dtype=np.float64).astype(np.float32)
    above = t32.astype(np.float64) > threshold
    t32[above] = np.nextafter(t32[above], np.float32(-np.inf))
    return t32.astype(np.float64)


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
                "split_on_client for it (to_treelite() and to_onnx() export set splits)."
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
    dtype = np.asarray(getattr(sk_forest, "classes_", "")).dtype  # "U": a regressor
    if n_out == 1 and dtype.kind in "biuf" and dtype != np.int64:
        _label_as_predict(onnx_model, dtype)
    return onnx_model


def _label_as_predict(onnx_model: Any, dtype: np.dtype[Any]) -> None:
    """``label`` cast to ``predict``'s dtype: skl2onnx writes numeric classes as int64.

    Bool classes came out as 0 / 1, integral float ones (a classifier refuses others) as
    integers and other integer types (int32, uint8, ...) as int64, where ``predict``
    gives the classes' own dtype (a graph fedforest builds already gives it).
    """
    onnx = import_extra("onnx", "to_onnx()")
    to = onnx.helper.np_dtype_to_tensor_dtype(dtype)
    graph = onnx_model.graph
    for node in graph.node:
        node.output[:] = ["label_int64" if o == "label" else o for o in node.output]
        node.input[:] = ["label_int64" if i == "label" else i for i in node.input]
    graph.node.append(
        onnx.helper.make_node("Cast", ["label_int64"], ["label"], to=to, name="label_cast")
    )
    next(o for o in graph.output if o.name == "label").type.tensor_type.elem_type = to


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


# ------------------------------------------------------------- ONNX, graphs built here
#: Opsets of the graphs built here: the default domain's (Split, ArgMax, Gather, Concat; 13
#: at least) and ai.onnx.ml's (their TreeEnsembleRegressor; 1 to 4, as skl2onnx writes the
#: single-output forests' ensembles at 1; 3 or 4 for float64 input, whose thresholds and leaf
#: values are tensors of doubles, ``nodes_values_as_tensor``, from ai.onnx.ml 3).
ONNX_OPSET, ONNX_ML_OPSET, ONNX_ML_OPSET_DOUBLE = 17, 1, 3


def _onnx_opsets(target_opset: Any, double: bool, sets: bool = False) -> tuple[int, int]:
    """(default domain, ai.onnx.ml) opsets from ``target_opset``: None, an int or a dict.

    ``sets``: the forest has set splits, written with ai.onnx.ml 5's TreeEnsemble.
    """
    if sets:
        lowest_ml, highest_ml, ml_default = 5, 5, 5
    else:
        lowest_ml, highest_ml = (3, 4) if double else (1, 4)
        ml_default = ONNX_ML_OPSET_DOUBLE if double else ONNX_ML_OPSET
    if target_opset is None:
        opset, ml = ONNX_OPSET, ml_default
    elif isinstance(target_opset, dict):
        opset = int(target_opset.get("", ONNX_OPSET))
        ml = int(target_opset.get("ai.onnx.ml", ml_default))
    else:
        opset, ml = int(target_opset), ml_default
    if opset < 13 or not lowest_ml <= ml <= highest_ml:
        if sets:
            what, why = "set splits", "TreeEnsemble, whose BRANCH_MEMBER tests the sets"
        elif double:
            what, why = "float64 input", "TreeEnsembleRegressor, float64 thresholds from 3"
        else:
            what, why = "a multi-output or one-class classifier", "TreeEnsembleRegressor"
        wanted = f"{lowest_ml}" if lowest_ml == highest_ml else f"{lowest_ml} to {highest_ml}"
        raise ValueError(
            f"to_onnx() of {what} needs opset 13 or later (Split with sizes as an input) and "
            f"ai.onnx.ml {wanted} ({why}); target_opset={target_opset!r} asks for {opset} "
            f"and {ml}."
        )
    return opset, ml


def onnx_dtype(dtype: Any) -> bool:
    """Whether ``to_onnx(dtype=...)`` asks for float64 input (else float32); checked."""
    try:  # None is refused, not NumPy's default float64
        resolved = None if dtype is None else np.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or resolved.type not in (np.float32, np.float64):
        raise ValueError(
            f"The 'dtype' parameter of to_onnx() must be numpy.float32 or numpy.float64 (the "
            f"input X's type, and the thresholds'). Got {dtype!r} instead."
        )
    return resolved.type is np.float64


#: Label dtypes ONNX has no tensor type for (``fit`` takes them, as scikit-learn's forests do).
_NO_ONNX_TYPE = {"S": "bytes", "M": "dates", "m": "durations", "V": "raw records"}


def check_onnx_labels(classes: Any) -> None:
    """Refuse a classifier's labels that ONNX cannot hold, before a converter is called.

    An ONNX ``label`` is numbers or strings: bytes, dates and durations (and objects neither
    all strings nor all numbers) were skl2onnx's "Label types must be all integers or all
    strings", naming no field. They are not converted: decoded bytes or a date's integer
    would not be ``predict``'s labels.
    """
    for labels in classes if isinstance(classes, list) else [classes]:
        arr = np.asarray(labels)
        if labels is None or arr.dtype.kind in "biufU":
            continue
        if arr.dtype.kind == "O":  # scikit-learn's classes_ of text (or numbers) as objects
            values = arr.tolist()
            types = {type(v).__name__ for v in values}
            if all(isinstance(v, str) for v in values) or all(
                isinstance(v, int | float | np.number) for v in values
            ):
                continue
            kind = f"objects of type {', '.join(sorted(types))}"
        else:
            kind = _NO_ONNX_TYPE.get(arr.dtype.kind, "not numbers or strings")
        raise ValueError(
            f"to_onnx() writes a classifier's labels as ONNX numbers or strings, and "
            f"classes_ has dtype {arr.dtype} ({kind}): fit on y "
            "as text or integers (y.astype(str), say) to export the model."
        )


def _label_table(classes: list[Any]) -> tuple[list[NDArray[Any]], Any]:
    """Each output's labels in the one dtype ``predict`` returns them in, and that dtype.

    ``predict`` gives every output's labels in the widest of their dtypes (numbers and
    strings together become strings, as NumPy converts them); ONNX gets the same values.
    """
    dtype = np.result_type(*[np.asarray(c).dtype for c in classes])
    labels = [np.asarray(c).astype(dtype) for c in classes]
    if dtype.kind in "USO":
        if not all(isinstance(v, str) for c in labels for v in c.tolist()):
            raise ValueError(
                "to_onnx() writes this classifier's labels as numbers or strings, "
                f"and this one's are of dtype {dtype} holding other objects."
            )
        return [c.astype(object) for c in labels], str
    if dtype.kind not in "biuf":
        raise ValueError(
            "to_onnx() writes this classifier's labels as numbers or strings, and "
            f"this one's are of dtype {dtype}."
        )
    return labels, dtype


def _ensemble_attributes(trees: list[Tree], n_targets: int, double: bool) -> dict[str, Any]:
    """A TreeEnsembleRegressor's attributes: every tree, its leaves' values as targets.

    Thresholds are rounded down to float32 (ONNX compares float32 input in float32, as
    scikit-learn), or with ``double`` the trees' own float64 thresholds and leaf values, as
    tensors (``*_as_tensor``): float64 input is then compared as fedforest compares it. A
    split sends NaN where the tree records (``nodes_missing_value_tracks_true``). A leaf's
    targets are its value (every output's class proportions, in order), its zeros left out.
    """
    nodes: dict[str, list[Any]] = {
        k: []
        for k in (
            "treeids", "nodeids", "featureids", "values", "modes", "truenodeids",
            "falsenodeids", "missing_value_tracks_true",
        )
    }  # fmt: skip
    targets: dict[str, list[Any]] = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t, tree in enumerate(trees):
        n = tree.node_count
        leaf = tree.children_left == TREE_LEAF
        nodes["treeids"] += [t] * n
        nodes["nodeids"] += list(range(n))
        nodes["featureids"] += np.where(leaf, 0, tree.feature).tolist()
        cut = tree.threshold if double else float32_floor(tree.threshold)
        nodes["values"] += np.where(leaf, 0.0, cut).tolist()
        nodes["modes"] += [b"LEAF" if is_leaf else b"BRANCH_LEQ" for is_leaf in leaf]
        nodes["truenodeids"] += np.where(leaf, 0, tree.children_left).tolist()
        nodes["falsenodeids"] += np.where(leaf, 0, tree.children_right).tolist()
        nodes["missing_value_tracks_true"] += np.where(leaf, 0, missing_left(tree)).tolist()
        assert tree.value.shape[1] == n_targets
        node, target = np.nonzero(leaf[:, None] & (tree.value != 0))
        targets["treeids"] += [t] * len(node)
        targets["nodeids"] += node.tolist()
        targets["ids"] += target.tolist()
        targets["weights"] += tree.value[node, target].tolist()
    out: dict[str, Any] = {f"nodes_{k}": v for k, v in nodes.items()}
    out.update({f"target_{k}": v for k, v in targets.items()})
    if double:
        onnx = import_extra("onnx", "to_onnx()")
        for name in ("nodes_values", "target_weights"):
            values = np.array(out.pop(name), dtype=np.float64)
            out[f"{name}_as_tensor"] = onnx.numpy_helper.from_array(values, name)
    return out


def to_onnx_multi_output(
    trees: list[Tree],
    n_features: int,
    classes: list[Any],
    target_opset: Any = None,
    double: bool = False,
) -> Any:
    """A multi-output classifier as an ONNX model, built here (skl2onnx mis-converts it).

    One input ``X`` (n, n_features), float32 (float64 with ``double``). One
    ``TreeEnsembleRegressor`` averages the trees' leaf values, every output's class
    proportions side by side (n, sum n_classes); ``Split`` cuts them into the outputs
    ``probabilities_0``, ``probabilities_1``, ... (n, n_classes[k]) float32,
    ``predict_proba``'s list; each output's ``ArgMax`` (the first class on a tie, as NumPy)
    picks its label from a table (``Gather``), and ``Concat`` gives ``label`` (n,
    n_outputs), ``predict``'s labels in its dtype (int64, float64, bool or string).
    ``target_opset``: None, the default domain's opset (13 or later), or a dict ``{"":
    opset, "ai.onnx.ml": ml_opset}``.
    """
    return to_onnx_graph(trees, n_features, classes, target_opset, double=double)


def to_onnx_one_class(
    trees: list[Tree], n_features: int, classes: Any, target_opset: Any = None
) -> Any:
    """A classifier of one class as an ONNX model, built here as the multi-output one.

    skl2onnx writes it as a ``TreeEnsembleClassifier`` of one class label, which
    onnxruntime reads as a binary classifier: every row's ``label`` is the index 1 (an
    integer label 1 whatever the class; past the end of a one-string label list, where
    onnxruntime aborts the process). Here ``label`` (n,) is the class and
    ``probabilities`` (n, 1) float32 the trees' mean (1), as ``predict`` and
    ``predict_proba``; :func:`to_onnx_graph` for one output.
    """
    return to_onnx_graph(trees, n_features, classes, target_opset)


def to_onnx_graph(
    trees: list[Tree],
    n_features: int,
    classes: Any,
    target_opset: Any = None,
    *,
    double: bool = False,
) -> Any:
    """Any forest as an ONNX model of one tree-ensemble node, built here.

    ``classes``: None for a regressor (output ``variable`` (n, n_outputs), the trees'
    mean), one label array for a single-output classifier (``label`` (n,),
    ``probabilities`` (n, n_classes)), a list of them for a multi-output one (see
    :func:`to_onnx_multi_output`). ``double``: the input ``X`` is float64 and compared
    with the trees' own float64 thresholds, so every row routes as in fedforest.

    Numeric forests: a ``TreeEnsembleRegressor`` (ai.onnx.ml 1 to 4; 3 or 4 with
    ``double``), float32 outputs. A forest with set splits (categorical features, the
    client index H; ``n_features`` then counts the client column): ai.onnx.ml 5's
    ``TreeEnsemble`` (:mod:`fedforest.tree.onnx_sets`) on the columns of ``export_matrix``,
    a code a set split has not seen going to the heavier child; its outputs are of the
    input's type (float64 sums with ``double``).
    """
    onnx = import_extra("onnx", "to_onnx()")
    helper = onnx.helper
    sets = any(bool(np.any(t.set_size > 0)) for t in trees)
    opset, ml_opset = _onnx_opsets(target_opset, double, sets)
    one_output = not isinstance(classes, list)
    if classes is None:
        sizes = [int(trees[0].value.shape[1])]
    else:
        sizes = [len(c) for c in ([classes] if one_output else classes)]
    name = "variable" if classes is None else "mean_leaf_values"
    if sets:
        ensemble = _tree_ensemble_node(onnx, trees, name, double)
    else:
        ensemble = helper.make_node(
            "TreeEnsembleRegressor",
            ["X"],
            [name],
            domain="ai.onnx.ml",
            n_targets=sum(sizes),
            aggregate_function="AVERAGE",
            post_transform="NONE",
            **_ensemble_attributes(trees, sum(sizes), double),
        )
    x_type = onnx.TensorProto.DOUBLE if double else onnx.TensorProto.FLOAT
    out_type = x_type if sets else onnx.TensorProto.FLOAT  # TreeEnsembleRegressor: float
    initializers: list[Any] = []
    if classes is None:
        graph_nodes = [ensemble]
        outputs = [helper.make_tensor_value_info("variable", out_type, [None, sizes[0]])]
    else:
        graph_nodes, initializers, outputs = _label_nodes(
            onnx, [classes] if one_output else classes, sizes, one_output, out_type
        )
        graph_nodes.insert(0, ensemble)
    # The ensemble's output declared: ONNX's shape inference has no type for
    # TreeEnsembleRegressor 1 and 2's output, and its strict mode (onnx.checker's full
    # check) refused the Split after it.
    declared = [helper.make_tensor_value_info(name, out_type, [None, sum(sizes)])]
    graph = helper.make_graph(
        graph_nodes,
        "fedforest",
        [helper.make_tensor_value_info("X", x_type, [None, n_features])],
        outputs,
        initializer=initializers,
        value_info=declared if classes is not None else None,
    )
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", ml_opset)]
    return helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name="fedforest",
        ir_version=helper.find_min_ir_version_for(opsets),
    )


def _tree_ensemble_node(onnx: Any, trees: list[Tree], output: str, double: bool) -> Any:
    """ai.onnx.ml 5's ``TreeEnsemble`` of ``trees`` (set splits as BRANCH_MEMBER tests)."""
    splits = [t.threshold if double else float32_floor(t.threshold) for t in trees]
    attrs = tree_ensemble_attributes(trees, [missing_left(t) for t in trees], splits)
    dtype = np.float64 if double else np.float32
    for name in ("nodes_splits", "membership_values", "leaf_weights"):
        attrs[name] = onnx.numpy_helper.from_array(attrs[name].astype(dtype), name)
    attrs["nodes_modes"] = onnx.numpy_helper.from_array(attrs["nodes_modes"], "nodes_modes")
    return onnx.helper.make_node("TreeEnsemble", ["X"], [output], domain="ai.onnx.ml", **attrs)


def _label_nodes(
    onnx: Any, classes: list[Any], sizes: list[int], one_output: bool, proba_type: int
) -> tuple[list[Any], list[Any], list[Any]]:
    """A classifier's nodes after the ensemble's ``mean_leaf_values``, initializers, outputs.

    ``Split`` into each output's probabilities, ``ArgMax`` and ``Gather`` into its labels,
    ``Concat`` of the labels (several outputs); one output: ``label`` (n,), ``probabilities``.
    """
    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    labels, dtype = _label_table(classes)
    label_type = onnx.TensorProto.STRING if dtype is str else helper.np_dtype_to_tensor_dtype(dtype)
    k = len(sizes)
    proba = ["probabilities"] if one_output else [f"probabilities_{o}" for o in range(k)]
    initializers = [numpy_helper.from_array(np.array(sizes, dtype=np.int64), "split_sizes")]
    nodes = [helper.make_node("Split", ["mean_leaf_values", "split_sizes"], proba, axis=1)]
    keep = int(not one_output)  # one output: label (n,), no Concat
    for o in range(k):
        initializers.append(numpy_helper.from_array(labels[o], f"classes_{o}"))
        label = "label" if one_output else f"label_{o}"
        nodes += [
            helper.make_node("ArgMax", [proba[o]], [f"index_{o}"], axis=1, keepdims=keep),
            helper.make_node("Gather", [f"classes_{o}", f"index_{o}"], [label], axis=0),
        ]
    if not one_output:
        nodes.append(
            helper.make_node("Concat", [f"label_{o}" for o in range(k)], ["label"], axis=1)
        )
    outputs = [
        helper.make_tensor_value_info("label", label_type, [None] if one_output else [None, k])
    ] + [
        helper.make_tensor_value_info(name, proba_type, [None, size])
        for name, size in zip(proba, sizes, strict=True)
    ]
    return nodes, initializers, outputs


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
        "shap_explainer()",
        "shap's TreeExplainer takes trees as arrays with numeric thresholds (shap_values() "
        "explains set splits itself: fedforest.tree.shap_sets).",
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
