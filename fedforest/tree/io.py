"""The safe model file format: validated ``.npz`` archives, never pickle."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import struct
import tempfile
import zipfile
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from .._common import TREE_LEAF, TREE_UNDEFINED, is_int_in
from .arrays import Tree

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "MAX_TOTAL_BYTES", "save_forest", "load_forest"]

#
# A model file is a compressed ``.npz`` archive (whatever its file name) holding
#
# * ``__header__``: a 1-D uint8 array, the UTF-8 JSON object
#   ``{"format": FORMAT_NAME, "version": FORMAT_VERSION, "kind": ..., "n_trees": ...,
#   "header": {...caller's header...}}``, no other field (the caller checks its header's);
# * one array per ``Tree`` field, the trees concatenated node-wise (child indices stay
#   LOCAL to their tree), and ``tree_offsets`` (int64, shape (n_trees + 1,)): tree ``t``
#   owns rows ``tree_offsets[t]:tree_offsets[t + 1]``;
# * the set splits: ``set_size`` is a per-node field like the others; ``set_code`` (int32)
#   and ``set_side`` (int8, 0 left / 1 right) hold the codes of every set split, tree after
#   tree and node after node (files without them have numeric splits only);
# * ``missing_go_to_left`` (uint8, 0 or 1) per node: where a missing value goes at a numeric
#   split (files without it, from before missing values, send it to the child with more
#   rows, as scikit-learn does for a split that saw no missing value);
# * the caller's ``extra`` arrays under the names ``extra/<name>``.
#
# Loading never unpickles (``np.lib.format.read_array(..., allow_pickle=False)``) and checks
# everything the kernels rely on before any array reaches them. Before any array data is
# read, every member's .npy header is parsed on its own (at most _NPY_HEADER_MAX bytes) and
# the size it declares (shape x itemsize) is bounded: a small archive cannot make the
# loader allocate more than MAX_TOTAL_BYTES.

FORMAT_NAME = "fedforest-model"
FORMAT_VERSION = 1

_HEADER_KEY = "__header__"
#: The fields of ``__header__``: any other is refused, never skipped (a field skipped could
#: change what the file means), naming it: a newer fedforest's file, or a damaged one.
_META_FIELDS = ("format", "version", "kind", "n_trees", "header")
_NEWER_HINT = "Was it written by a newer fedforest (upgrade fedforest to load it), or damaged?"
_OFFSETS_KEY = "tree_offsets"
_EXTRA_PREFIX = "extra/"
#: Canonical dtype of every stored field; the dtype *kind* a file must use for it.
_CANONICAL = {
    "feature": np.int32,
    "threshold": np.float64,
    "children_left": np.int32,
    "children_right": np.int32,
    "value": np.float64,
    "n_node_samples": np.int64,
    "weighted_n_node_samples": np.float64,
    "impurity": np.float64,
    "set_size": np.int32,
    "missing_go_to_left": np.uint8,
}
_SET_CANONICAL = {"set_code": np.int32, "set_side": np.int8}

#: Upper bound on the uncompressed size of all arrays of a model file together, from the
#: shapes their headers declare (checked before any data is read). Raise it to load a
#: larger forest you trust.
MAX_TOTAL_BYTES = 4 << 30
#: ``__header__`` (the JSON record) is at most this large.
_HEADER_MAX_BYTES = 64 << 20
#: An ``extra/`` array is at most _EXTRA_BASE_BYTES plus, per tree node, 8 bytes for each
#: node value and for _EXTRA_PER_NODE more numbers (per-node statistics, surrogates...).
_EXTRA_BASE_BYTES = 16 << 20
_EXTRA_PER_NODE = 64
#: Longest .npy header read (numpy's own default; fedforest writes about 100 bytes).
_NPY_HEADER_MAX = 10_000
_DEFAULT_HINT = (
    "Was it written by fedforest's save()? The file may be corrupt or truncated; "
    "re-create it by saving the fitted model again."
)


class _FormatError(ValueError):
    """A model file (or a forest about to be saved) breaks the format.

    ``hint`` tells the user what to do about it (a default one is used when None).
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def _jsonable(obj: Any, where: str = "header") -> Any:
    """Copy of ``obj`` with NumPy scalars and arrays turned into plain Python objects.

    Raises
    ------
    TypeError
        If ``obj`` holds something JSON cannot represent (sets, bytes, objects, ...) or a
        dict key that is not a string (JSON would silently turn it into one).
    ValueError
        If ``obj`` holds a NaN or infinite float (not valid JSON).
    """
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError(f"{where} is an object array; only numeric/bool/str arrays fit JSON")
        return _jsonable(obj.tolist(), where)
    if isinstance(obj, np.generic):
        return _jsonable(obj.item(), where)
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        if not np.isfinite(obj):
            raise ValueError(f"{where} is {obj}, which JSON cannot store")
        return obj
    if isinstance(obj, list | tuple):
        return [_jsonable(item, f"{where}[{i}]") for i, item in enumerate(obj)]
    if isinstance(obj, dict):
        out = {}
        for key, item in obj.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has the non-string key {key!r}; use string keys")
            out[key] = _jsonable(item, f"{where}[{key!r}]")
        return out
    raise TypeError(
        f"{where} has type {type(obj).__name__}, which the model header cannot store "
        "(use None, bool, int, float, str, lists, dicts or NumPy scalars/arrays)"
    )


def _pack_for_save(trees: list[Tree]) -> dict[str, NDArray[Any]]:
    """Concatenate the trees field by field (local child indices) and add the offsets."""
    if not isinstance(trees, list | tuple) or len(trees) == 0:
        raise _FormatError("a model needs a non-empty list of Tree objects")
    for i, tree in enumerate(trees):
        if not isinstance(tree, Tree):
            raise _FormatError(f"trees[{i}] is a {type(tree).__name__}, not a Tree")
    arrays: dict[str, NDArray[Any]] = {}
    for name in Tree.ARRAYS:
        parts = [np.asarray(getattr(tree, name)) for tree in trees]
        want = 2 if name == "value" else 1
        for i, part in enumerate(parts):
            if part.ndim != want:
                raise _FormatError(f"trees[{i}].{name} is {part.ndim}-D, expected {want}-D")
        if name == "value" and len({part.shape[1] for part in parts}) > 1:
            raise _FormatError("the trees' value arrays have different numbers of columns")
        arrays[name] = np.concatenate(parts, axis=0)
    for name in Tree.SET_ARRAYS:
        arrays[name] = np.concatenate([np.asarray(getattr(tree, name)) for tree in trees])
    sizes = np.array([np.asarray(tree.feature).shape[0] for tree in trees], dtype=np.int64)
    offsets = np.zeros(len(trees) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    arrays[_OFFSETS_KEY] = offsets
    return arrays


def _as_int64(name: str, arr: NDArray[Any]) -> NDArray[np.int64]:
    """``arr`` as int64 after checking it holds integers that fit."""
    if arr.dtype.kind not in "iu":
        raise _FormatError(f"array {name!r} has dtype {arr.dtype}, expected an integer dtype")
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise _FormatError(f"array {name!r} holds integers too large for int64")
    return arr.astype(np.int64)


def _check_dtypes(arrays: dict[str, NDArray[Any]]) -> dict[str, NDArray[Any]]:
    """Working copies: integer fields as int64, float fields as float64 (kinds checked)."""
    work: dict[str, NDArray[Any]] = {_OFFSETS_KEY: _as_int64(_OFFSETS_KEY, arrays[_OFFSETS_KEY])}
    for name in _SET_CANONICAL:
        work[name] = _as_int64(name, arrays[name])
    for name, dtype in _CANONICAL.items():
        arr = arrays[name]
        if np.issubdtype(dtype, np.integer):
            work[name] = _as_int64(name, arr)
        elif arr.dtype.kind != "f":
            raise _FormatError(f"array {name!r} has dtype {arr.dtype}, expected a float dtype")
        else:
            work[name] = arr.astype(np.float64)
    return work


def _check_shapes(work: dict[str, NDArray[Any]], n_trees: int) -> int:
    """Check the array shapes and the tree offsets; return the total node count."""
    n_nodes = work["feature"].shape[0] if work["feature"].ndim == 1 else -1
    for name in _CANONICAL:
        arr = work[name]
        if name == "value":
            if arr.ndim != 2 or arr.shape[0] != n_nodes or arr.shape[1] < 1:
                raise _FormatError(
                    f"array 'value' has shape {arr.shape}, expected ({n_nodes}, n_values) "
                    "with n_values >= 1"
                )
        elif arr.ndim != 1 or arr.shape[0] != n_nodes:
            raise _FormatError(
                f"array {name!r} has shape {arr.shape}; every per-node array must be 1-D "
                f"with the same length as 'feature' ({work['feature'].shape})"
            )
    n_codes = int(work["set_size"].sum()) if work["set_size"].ndim == 1 else -1
    for name in _SET_CANONICAL:
        if work[name].shape != (n_codes,):
            raise _FormatError(
                f"array {name!r} has shape {work[name].shape}, expected ({n_codes},) = "
                "the sum of 'set_size'"
            )
    offsets = work[_OFFSETS_KEY]
    if offsets.ndim != 1 or offsets.shape[0] != n_trees + 1:
        raise _FormatError(
            f"'{_OFFSETS_KEY}' has shape {offsets.shape}, expected ({n_trees + 1},) "
            f"for n_trees={n_trees}"
        )
    if offsets[0] != 0 or offsets[-1] != n_nodes or np.any(np.diff(offsets) < 1):
        raise _FormatError(
            f"'{_OFFSETS_KEY}' must start at 0, increase strictly (every tree has a root) "
            f"and end at the node count {n_nodes}; got {offsets.tolist()[:10]}..."
        )
    return n_nodes


def _check_children(work: dict[str, NDArray[Any]]) -> NDArray[np.bool_]:
    """Check the child links tree by tree (local indices); return the leaf mask."""
    offsets = work[_OFFSETS_KEY]
    sizes = np.diff(offsets)
    start = np.repeat(offsets[:-1], sizes)  # first global node of each node's tree
    local = np.arange(offsets[-1], dtype=np.int64) - start
    size = np.repeat(sizes, sizes)
    left, right = work["children_left"], work["children_right"]
    leaf = left == TREE_LEAF
    if np.any(leaf != (right == TREE_LEAF)):
        node = int(np.flatnonzero(leaf != (right == TREE_LEAF))[0])
        raise _FormatError(f"node {node} has exactly one child (trees are binary)")
    for name, child in (("children_left", left), ("children_right", right)):
        bad = ~leaf & ((child < 0) | (child >= size))
        if np.any(bad):
            node = int(np.flatnonzero(bad)[0])
            raise _FormatError(
                f"{name}[{node}] = {child[node]} is out of range for its tree of {size[node]} nodes"
            )
        bad = ~leaf & (child <= local)
        if np.any(bad):
            node = int(np.flatnonzero(bad)[0])
            raise _FormatError(
                f"{name}[{node}] = {child[node]} is not greater than its parent's index "
                f"{local[node]} (trees must be stored breadth-first, children after parents)"
            )
    children = np.concatenate([(left + start)[~leaf], (right + start)[~leaf]])
    n_parents = np.bincount(children, minlength=int(offsets[-1]))
    is_root = np.zeros(n_parents.shape[0], dtype=bool)
    is_root[offsets[:-1]] = True
    bad = n_parents != np.where(is_root, 0, 1)
    if np.any(bad):
        node = int(np.flatnonzero(bad)[0])
        raise _FormatError(
            f"node {node} is the child of {n_parents[node]} nodes; every node but the root "
            "must be the child of exactly one node"
        )
    return leaf


def _check_nodes(
    work: dict[str, NDArray[Any]], leaf: NDArray[np.bool_], n_features_in: int | None
) -> None:
    """Check the split fields against the leaf mask, and that the statistics are finite."""
    feature, threshold = work["feature"], work["threshold"]
    weight = work["weighted_n_node_samples"]
    checks = [  # (bad nodes, what is wrong, array to quote)
        (
            leaf & (feature != TREE_UNDEFINED),
            f"is a leaf whose feature is not {TREE_UNDEFINED}",
            "feature",
        ),
        (~leaf & (feature < 0), "is an internal node with a negative feature", "feature"),
        (~leaf & np.isnan(threshold), "is an internal node with a NaN threshold", "threshold"),
        (~np.isfinite(work["value"]).all(axis=1), "has a non-finite value", "value"),
        (work["n_node_samples"] < 0, "has a negative n_node_samples", "n_node_samples"),
        (
            ~(np.isfinite(weight) & (weight >= 0)),
            "has a negative or non-finite weighted_n_node_samples",
            "weighted_n_node_samples",
        ),
        (~np.isfinite(work["impurity"]), "has a non-finite impurity", "impurity"),
    ]
    is_set = work["set_size"] > 0
    checks += [
        (work["set_size"] < 0, "has a negative set_size", "set_size"),
        (
            (work["missing_go_to_left"] < 0) | (work["missing_go_to_left"] > 1),
            "has a missing_go_to_left other than 0 or 1",
            "missing_go_to_left",
        ),
        (leaf & is_set, "is a leaf with a split set", "set_size"),
    ]
    if n_features_in is not None:
        # The client index H is the pseudo-feature n_features_in, for set splits only.
        checks.append(
            (
                (feature > n_features_in) | (~is_set & (feature == n_features_in)),
                f"splits on a feature beyond n_features_in={n_features_in}",
                "feature",
            )
        )
    for bad, what, name in checks:
        if np.any(bad):
            node = int(np.flatnonzero(bad)[0])
            raise _FormatError(
                f"{_locate(work[_OFFSETS_KEY], node)} {what} ({name} = {work[name][node]})"
            )
    _check_divisors(work, leaf, is_set)


def _check_divisors(
    work: dict[str, NDArray[Any]], leaf: NDArray[np.bool_], is_set: NDArray[np.bool_]
) -> None:
    """What prediction divides by is positive and finite; what it sums cannot overflow.

    A row whose code a set split has not seen goes down both children with the shares
    ``w_left / (w_left + w_right)`` (the marginal rule): that sum must be a finite normal
    float (0 divides by zero, 1e308 + 1e308 overflows, a subnormal sum loses the mass). A
    row's prediction sums at most one unit of mass per tree times a node value: the values
    must stay below ``float max / n_trees``.
    """
    offsets = work[_OFFSETS_KEY]
    start = np.repeat(offsets[:-1], np.diff(offsets))
    weight = work["weighted_n_node_samples"]
    nodes = np.flatnonzero(is_set & ~leaf)
    left = weight[work["children_left"][nodes] + start[nodes]]
    right = weight[work["children_right"][nodes] + start[nodes]]
    with np.errstate(over="ignore"):
        total = left + right
    bad = ~(np.isfinite(total) & (total >= np.finfo(np.float64).tiny))
    if np.any(bad):
        node = int(nodes[np.flatnonzero(bad)[0]])
        k = int(np.flatnonzero(bad)[0])
        raise _FormatError(
            f"{_locate(offsets, node)} is a set split whose children's weighted_n_node_samples "
            f"({left[k]}, {right[k]}) do not add up to a positive finite normal number, "
            "which the marginal rule divides by"
        )
    n_trees = offsets.shape[0] - 1
    value = work["value"]
    largest = float(np.abs(value).max()) if value.size else 0.0
    if largest > np.finfo(np.float64).max / max(n_trees, 1):
        raise _FormatError(
            f"array 'value' holds {largest:g}: the sum of {n_trees} trees' predictions would "
            "overflow"
        )


def _check_sets(work: dict[str, NDArray[Any]]) -> None:
    """Every set split sends known codes (>= 0, distinct) to both sides, 0 or 1."""
    code, side, size = work["set_code"], work["set_side"], work["set_size"]
    if code.size and (code.min() < 0 or code.max() > np.iinfo(np.int32).max):
        raise _FormatError("a set split holds a negative or oversized code")
    if side.size and not np.isin(side, (0, 1)).all():
        raise _FormatError("'set_side' must hold 0 (left) or 1 (right)")
    owner = np.repeat(np.arange(size.size), np.maximum(size, 0))
    n_left = np.bincount(owner, weights=(side == 0), minlength=size.size)
    bad = (size > 0) & ((n_left == 0) | (n_left == size))
    if np.any(bad):
        node = int(np.flatnonzero(bad)[0])
        raise _FormatError(
            f"{_locate(work[_OFFSETS_KEY], node)} has a set split with an empty side"
        )
    pairs = owner.astype(np.int64) * (2**32) + code
    if np.unique(pairs).size != pairs.size:
        raise _FormatError("a set split lists the same code twice")


def _locate(offsets: NDArray[np.int64], node: int) -> str:
    """``'tree t, node k'`` for the global node index ``node``."""
    tree = int(np.searchsorted(offsets, node, side="right")) - 1
    return f"tree {tree}, node {node - int(offsets[tree])}"


def _validate_forest(
    arrays: dict[str, NDArray[Any]], n_trees: int, n_features_in: int | None
) -> dict[str, NDArray[Any]]:
    """Check a packed forest and return it cast to the canonical dtypes.

    Parameters
    ----------
    arrays : dict of str to ndarray
        The :class:`Tree` fields, trees concatenated, and ``tree_offsets``.
    n_trees : int
        Number of trees the header announces.
    n_features_in : int or None
        Exclusive upper bound of the split features, if known.

    Raises
    ------
    _FormatError
        On the first broken rule.
    """
    if "set_size" not in arrays and not any(k in arrays for k in _SET_CANONICAL):
        # Numeric splits only: the set arrays may be left out.
        n = np.asarray(arrays.get("feature", np.zeros(0))).shape[0]
        arrays = {
            **arrays,
            "set_size": np.zeros(n, np.int32),
            "set_code": np.zeros(0, np.int32),
            "set_side": np.zeros(0, np.int8),
        }
    derive_missing = "missing_go_to_left" not in arrays
    if derive_missing:  # a file from before missing values: derived below (larger child)
        n = np.asarray(arrays.get("feature", np.zeros(0))).shape[0]
        arrays = {**arrays, "missing_go_to_left": np.zeros(n, np.uint8)}
    missing = [name for name in (*_CANONICAL, *_SET_CANONICAL, _OFFSETS_KEY) if name not in arrays]
    if missing:
        raise _FormatError(f"arrays {missing} are missing")
    work = _check_dtypes(arrays)
    _check_shapes(work, n_trees)
    leaf = _check_children(work)
    _check_nodes(work, leaf, n_features_in)
    _check_sets(work)
    too_big = np.iinfo(np.int32).max
    if work["feature"].size and work["feature"].max() > too_big:
        raise _FormatError("a split feature index does not fit in int32")
    out = {name: work[name].astype(dtype) for name, dtype in _CANONICAL.items()}
    out.update({name: work[name].astype(dtype) for name, dtype in _SET_CANONICAL.items()})
    out[_OFFSETS_KEY] = work[_OFFSETS_KEY]
    if derive_missing:
        out["missing_go_to_left"] = np.zeros(0, np.uint8)  # Tree derives it per tree
    return out


def _unpack_trees(arrays: dict[str, NDArray[Any]]) -> list[Tree]:
    """Split validated, canonical packed arrays into trees (local child indices)."""
    offsets = arrays[_OFFSETS_KEY]
    code_off = np.concatenate([[0], np.cumsum(arrays["set_size"], dtype=np.int64)])[offsets]
    trees = []
    for t, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:], strict=True)):
        fields = {
            name: arrays[name][lo:hi].copy() if arrays[name].size else arrays[name]
            for name in Tree.ARRAYS
        }
        for name in Tree.SET_ARRAYS:
            fields[name] = arrays[name][code_off[t] : code_off[t + 1]].copy()
        trees.append(Tree(**fields))
    return trees


def _n_features_in(header: dict[str, Any]) -> int | None:
    """``header["n_features_in"]`` checked (None when absent)."""
    value = header.get("n_features_in")
    if value is None:
        return None
    if not is_int_in(value):
        raise _FormatError(f"header['n_features_in'] = {value!r} is not a non-negative int")
    return value


def _atomic_write(path: str, arrays: dict[str, NDArray[Any]]) -> None:
    """Write ``arrays`` as a compressed npz at exactly ``path``, all or nothing."""
    directory = os.path.dirname(os.path.abspath(path))
    # Said here, naming the user's path: mkstemp and os.replace would name the temp file.
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            errno.ENOENT, f"cannot save to {path!r}: the directory {directory!r} does not exist"
        )
    if os.path.isdir(path):
        raise IsADirectoryError(
            errno.EISDIR, f"cannot save to {path!r}: it is a directory; give a file name"
        )
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(fh, allow_pickle=False, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0o600 would hide the model from other users
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def save_forest(
    path: str | os.PathLike[str],
    header: dict[str, Any],
    trees: list[Tree],
    extra: dict[str, NDArray[Any]] | None = None,
) -> None:
    """Write a forest to a model file (see the format notes above :data:`FORMAT_NAME`).

    The file is written to a temporary file in the same directory then renamed, so an
    interrupted save never leaves a half-written model, and its name is kept as given (no
    ``.npz`` is appended). The forest is checked with the loader's rules first.

    Parameters
    ----------
    path : str or path-like
        Destination file.
    header : dict
        JSON-able metadata (None, bool, int, float, str, lists, dicts with string keys;
        NumPy scalars and arrays are converted). ``header["kind"]`` names the model class
        and ``header["n_features_in"]``, if present, bounds the split features.
    trees : list of Tree
        The fitted trees (at least one), children after parents.
    extra : dict of str to ndarray, optional
        Further numeric arrays (no object dtype), returned by :func:`load_forest`.

    Raises
    ------
    TypeError
        If the header holds a value JSON cannot store or an extra array has object dtype.
    ValueError
        If the trees break the format's rules.
    """
    path = os.fspath(path)
    header = _jsonable(header)
    if not isinstance(header, dict):
        raise TypeError(f"header must be a dict, got {type(header).__name__}")
    try:
        arrays = _validate_forest(_pack_for_save(trees), len(trees), _n_features_in(header))
    except _FormatError as exc:
        raise ValueError(f"refusing to save {path!r}: {exc}") from None
    meta = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "kind": header.get("kind"),
        "n_trees": len(trees),
        "header": header,
    }
    text = json.dumps(meta, allow_nan=False).encode("utf-8")
    arrays[_HEADER_KEY] = np.frombuffer(text, dtype=np.uint8)
    for name, arr in (extra or {}).items():
        arr = np.asarray(arr)
        if not isinstance(name, str) or not name:
            raise TypeError(f"extra array names must be non-empty strings, got {name!r}")
        if arr.dtype.hasobject:
            raise TypeError(f"extra[{name!r}] has object dtype, which model files never store")
        arrays[_EXTRA_PREFIX + name] = arr
    _atomic_write(path, arrays)


_PICKLED_HINT = "Re-save the model with fedforest's save()."


def _member_key(filename: str) -> str:
    """The array name of an archive member (its file name without ``.npy``)."""
    if not filename.endswith(".npy"):
        raise _FormatError(f"archive member {filename!r} is not a .npy array")
    return filename[: -len(".npy")]


def _npy_header(member: IO[bytes], filename: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Shape and dtype an archive member declares, read from its .npy header only."""
    what = f"archive member {filename!r}"
    head = member.read(12 + _NPY_HEADER_MAX)
    major = head[6] if len(head) > 6 else 0
    width = 2 if major == 1 else 4
    if not head.startswith(np.lib.format.MAGIC_PREFIX) or len(head) < 8 + width:
        raise _FormatError(f"{what} has a malformed .npy header (no .npy magic and preamble)")
    if major not in (1, 2):
        raise _FormatError(f"{what} has a malformed .npy header (version {major}.{head[7]})")
    (length,) = struct.unpack("<H" if major == 1 else "<I", head[8 : 8 + width])
    if length > _NPY_HEADER_MAX:
        raise _FormatError(
            f"{what} has a .npy header of {length} bytes, too large (at most "
            f"{_NPY_HEADER_MAX}): the header is malformed or forged"
        )
    read = (
        np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    )
    try:
        shape, _, dtype = read(io.BytesIO(head[8:]), max_header_size=_NPY_HEADER_MAX)
    except (ValueError, TypeError, SyntaxError, RecursionError) as exc:
        raise _FormatError(f"{what} has a malformed .npy header ({exc})") from None
    if dtype.hasobject:
        raise _FormatError(
            f"{what} holds pickled (object) arrays, which fedforest never loads",
            hint=_PICKLED_HINT,
        )
    if any(n < 0 for n in shape):
        raise _FormatError(f"{what} has a malformed .npy header (negative shape {shape})")
    return shape, dtype


def _check_sizes(declared: dict[str, tuple[tuple[int, ...], int]]) -> None:
    """Bound every member's declared uncompressed size, and their total, before reading.

    ``declared`` maps each member's name to its shape and its item size.
    """
    feature_shape = declared.get("feature", ((), 0))[0]
    n_nodes = feature_shape[0] if len(feature_shape) == 1 else 0
    value_shape = declared.get("value", ((), 0))[0]
    n_values = value_shape[1] if len(value_shape) == 2 else 1
    extra_limit = _EXTRA_BASE_BYTES + 8 * n_nodes * (n_values + _EXTRA_PER_NODE)
    raise_hint = "If you trust the file, raise fedforest.tree.io.MAX_TOTAL_BYTES to load it."
    total = 0
    for key, (shape, itemsize) in declared.items():
        # An item size of 0 still costs a loop step per element: count it as one byte.
        size = math.prod(shape) * max(itemsize, 1)
        total += size
        hint = None
        if key == _HEADER_KEY:
            limit, rule = _HEADER_MAX_BYTES, "a model header may take"
        elif key.startswith(_EXTRA_PREFIX):
            limit, rule = extra_limit, f"an extra array of a forest of {n_nodes} nodes may take"
        else:
            limit, rule, hint = (
                MAX_TOTAL_BYTES,
                "fedforest.tree.io.MAX_TOTAL_BYTES allows",
                raise_hint,
            )
        if size > limit:
            raise _FormatError(
                f"archive member {key + '.npy'!r} would be {size} bytes uncompressed (shape "
                f"{shape}), more than the {limit} bytes {rule}",
                hint=hint,
            )
    if total > MAX_TOTAL_BYTES:
        raise _FormatError(
            f"its arrays would be {total} bytes uncompressed, more than the {MAX_TOTAL_BYTES} "
            "bytes fedforest.tree.io.MAX_TOTAL_BYTES allows",
            hint=raise_hint,
        )


def _read_members(archive: zipfile.ZipFile) -> dict[str, NDArray[Any]]:
    """Every member of ``archive`` as an array: headers and sizes checked, then the data."""
    infos = archive.infolist()
    declared: dict[str, tuple[tuple[int, ...], int]] = {}
    for info in infos:
        key = _member_key(info.filename)
        if key in declared:
            raise _FormatError(f"archive member {info.filename!r} appears twice")
        with archive.open(info) as member:
            shape, dtype = _npy_header(member, info.filename)
        declared[key] = (shape, dtype.itemsize)
    _check_sizes(declared)
    arrays = {}
    for info in infos:
        with archive.open(info) as member:
            arrays[_member_key(info.filename)] = np.lib.format.read_array(
                member, allow_pickle=False, max_header_size=_NPY_HEADER_MAX
            )
    return arrays


def _read_npz(path: str) -> dict[str, NDArray[Any]]:
    """Every array of the archive at ``path``, read without ever unpickling.

    A missing or unreadable file raises its ``OSError`` unchanged; anything wrong with the
    content raises :class:`_FormatError`.
    """
    with open(path, "rb") as fh:
        magic = fh.read(6)
        fh.seek(0)
        if magic.startswith(b"\x80"):  # pickle protocols 2 and later
            raise _FormatError(
                "it is a pickle, which fedforest never loads (unpickling can run arbitrary code)",
                hint="Re-save the model with fedforest's save(); model files hold plain "
                "arrays only.",
            )
        if not magic.startswith(b"PK\x03\x04"):
            what = "it is empty" if not magic else f"it does not start like a zip file ({magic!r})"
            raise _FormatError(f"{what}, so it is not an .npz model archive")
        try:
            with zipfile.ZipFile(fh) as archive:
                return _read_members(archive)
        except _FormatError:
            raise
        except Exception as exc:  # zipfile.BadZipFile, EOFError, zlib.error, OSError, ...
            raise _FormatError(
                f"it is not a readable .npz archive ({type(exc).__name__}: {exc})"
            ) from exc


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of the header, refused when it names a key twice.

    ``json`` kept the last value silently (which one a reader takes is not for a file to
    leave open, as for an archive member listed twice).
    """
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _FormatError(f"{_HEADER_KEY!r} names the field {key!r} twice")
        seen.add(key)
    return dict(pairs)


def _decode_header(arrays: dict[str, NDArray[Any]], expected_kind: str | None) -> dict[str, Any]:
    """Decode and check the ``__header__`` record; return it (``n_trees`` checked)."""
    raw = arrays.get(_HEADER_KEY)
    if raw is None:
        raise _FormatError(f"it has no {_HEADER_KEY!r} array")
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise _FormatError(f"{_HEADER_KEY!r} is {raw.dtype} {raw.shape}, expected 1-D uint8")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise _FormatError(f"{_HEADER_KEY!r} is not UTF-8 JSON ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise _FormatError(f"its format is {found!r}, expected {FORMAT_NAME!r}")
    version = meta.get("version")
    if not is_int_in(version, 1):
        raise _FormatError(f"its format version {version!r} is not a positive integer")
    if version > FORMAT_VERSION:
        raise _FormatError(
            f"it uses format version {version}, newer than this fedforest's {FORMAT_VERSION}",
            hint="Upgrade fedforest to load it.",
        )
    if unknown := sorted(set(meta) - set(_META_FIELDS)):  # a newer writer's, or damage
        raise _FormatError(
            f"its {_HEADER_KEY!r} has fields {unknown} that format version {version} lacks",
            hint=_NEWER_HINT,
        )
    n_trees = meta.get("n_trees")
    if not is_int_in(n_trees, 1):
        raise _FormatError(f"its n_trees {n_trees!r} is not a positive integer")
    header = meta.get("header")
    if not isinstance(header, dict) or meta.get("kind") != header.get("kind"):
        raise _FormatError("its 'header' is not a dict whose 'kind' matches the file's kind")
    if expected_kind is not None and meta["kind"] != expected_kind:
        raise _FormatError(
            f"it holds a {meta['kind']!r} model, expected {expected_kind!r}",
            hint=f"Load it with the class that saved it ({meta['kind']!r}).",
        )
    return meta


def load_forest(
    path: str | os.PathLike[str], *, expected_kind: str | None = None
) -> tuple[dict[str, Any], list[Tree], dict[str, NDArray[Any]]]:
    """Read and check a model file written by :func:`save_forest`.

    Only ``np.load(..., allow_pickle=False)`` touches the file: nothing is ever unpickled.
    Every structural rule the prediction kernels rely on is checked before returning.

    Parameters
    ----------
    path : str or path-like
        The model file.
    expected_kind : str, optional
        If given, the header's ``kind`` must equal it.

    Returns
    -------
    header : dict
        The header given to :func:`save_forest` (after its JSON round trip).
    trees : list of Tree
        The trees, canonical dtypes, local child indices.
    extra : dict of str to ndarray
        The extra arrays, under the names given to :func:`save_forest`.

    Raises
    ------
    ValueError
        If the file is not a valid model file (pickled, truncated, wrong format, newer
        version, other kind, inconsistent trees...); the message names the file and the
        problem. A missing or unreadable file raises its ``OSError``.
    """
    path = os.fspath(path)
    try:
        arrays = _read_npz(path)
        meta = _decode_header(arrays, expected_kind)
        forest = _validate_forest(arrays, meta["n_trees"], _n_features_in(meta["header"]))
        unknown = [
            key
            for key in arrays
            if key not in forest and key != _HEADER_KEY and not key.startswith(_EXTRA_PREFIX)
        ]
        if unknown:
            raise _FormatError(f"it holds unexpected arrays {sorted(unknown)}")
    except _FormatError as exc:
        raise ValueError(
            f"cannot load model file {path!r}: {exc}. {exc.hint or _DEFAULT_HINT}"
        ) from exc.__cause__
    extra = {
        key[len(_EXTRA_PREFIX) :]: arr
        for key, arr in arrays.items()
        if key.startswith(_EXTRA_PREFIX)
    }
    return meta["header"], _unpack_trees(forest), extra
