"""Tests of the flat-array trees, their kernels and the safe model file format."""

from __future__ import annotations

import io
import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedforest.tree.apply import apply_forest, apply_forest_numpy
from fedforest.tree.arrays import Tree, pack_forest
from fedforest.tree.io import FORMAT_NAME, FORMAT_VERSION, load_forest, save_forest

# --------------------------------------------------------------------------- helpers


def make_tree(
    children_left: list[int],
    children_right: list[int],
    feature: list[int],
    threshold: list[float],
    value: Any,
) -> Tree:
    """A tree from plain lists; the statistics are filled with simple valid numbers."""
    n = len(feature)
    return Tree(
        feature=np.asarray(feature, dtype=np.int32),
        threshold=np.asarray(threshold, dtype=np.float64),
        children_left=np.asarray(children_left, dtype=np.int32),
        children_right=np.asarray(children_right, dtype=np.int32),
        value=np.asarray(value, dtype=np.float64).reshape(n, -1),
        n_node_samples=np.arange(n, 0, -1, dtype=np.int64) * 10,
        weighted_n_node_samples=np.arange(n, 0, -1, dtype=np.float64) * 9.5,
        impurity=np.linspace(0.5, 0.0, n),
    )


def random_tree(
    rng: np.random.Generator, n_features: int = 5, max_nodes: int = 41, n_values: int = 1
) -> Tree:
    """A random valid tree stored breadth-first (children appended after their parent)."""
    left, right = [-1], [-1]
    node = 0
    while node < len(left):
        if len(left) + 2 <= max_nodes and (node == 0 or rng.random() < 0.6):
            left[node], right[node] = len(left), len(left) + 1
            left += [-1, -1]
            right += [-1, -1]
        node += 1
    n = len(left)
    internal = np.asarray(left) != -1
    feature = np.where(internal, rng.integers(0, n_features, n), -2)
    threshold = np.where(internal, rng.normal(size=n), -2.0)
    return Tree(
        feature=feature.astype(np.int32),
        threshold=threshold.astype(np.float64),
        children_left=np.asarray(left, dtype=np.int32),
        children_right=np.asarray(right, dtype=np.int32),
        value=rng.random((n, n_values)),
        n_node_samples=rng.integers(1, 100, n).astype(np.int64),
        weighted_n_node_samples=rng.random(n) * 100,
        impurity=rng.random(n),
    )


def hand_trees() -> list[Tree]:
    """A single leaf, a stump and a depth-2 tree, all with 3 class proportions per node."""
    leaf = make_tree([-1], [-1], [-2], [-2.0], [[0.2, 0.3, 0.5]])
    stump = make_tree(
        [1, -1, -1],
        [2, -1, -1],
        [3, -2, -2],
        [0.5, -2.0, -2.0],
        [[0.4, 0.4, 0.2], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]],
    )
    #        0
    #      1   2
    #     3 4
    deeper = make_tree(
        [1, 3, -1, -1, -1],
        [2, 4, -1, -1, -1],
        [0, 2, -2, -2, -2],
        [1.5, -0.25, -2.0, -2.0, -2.0],
        [[1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],
    )
    return [leaf, stump, deeper]


HEADER: dict[str, Any] = {
    "kind": "classifier",
    "n_features_in": 4,
    "classes": [0, 1, 2],
    "params": {"max_depth": None, "min_samples_leaf": 1, "max_features": "sqrt"},
    "seed": 7,
    "ratio": 0.25,
}


def assert_trees_equal(got: list[Tree], expected: list[Tree]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        for name in Tree.ARRAYS:
            np.testing.assert_array_equal(getattr(g, name), getattr(e, name), err_msg=name)


def write_npz(path: Path, arrays: dict[str, Any]) -> None:
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def saved_arrays(tmp_path: Path) -> dict[str, np.ndarray]:
    """The raw arrays of a valid model file (to be broken by the refusal tests)."""
    path = tmp_path / "valid.ffm"
    save_forest(path, HEADER, hand_trees(), extra={"importances": np.ones(4)})
    with np.load(path, allow_pickle=False) as npz:
        return {key: npz[key] for key in npz.files}


def meta_of(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    return json.loads(arrays["__header__"].tobytes().decode("utf-8"))


def header_array(meta: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)


# --------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("as_path", [True, False])
def test_round_trip(tmp_path: Path, as_path: bool) -> None:
    trees = hand_trees()
    extra = {
        "importances": np.array([0.1, 0.2, 0.3, 0.4]),
        "classes": np.array([3, 5, 9], dtype=np.int16),
        "names": np.array(["a", "bb", "ccc"]),
    }
    path = tmp_path / "model.ffm"
    save_forest(path if as_path else str(path), HEADER, trees, extra)
    assert os.listdir(tmp_path) == ["model.ffm"]  # no ".npz" appended, no temp file left

    header, loaded, loaded_extra = load_forest(path if as_path else str(path))
    assert header == HEADER
    assert_trees_equal(loaded, trees)
    assert loaded[0].node_count == 1 and loaded[0].n_leaves == 1
    assert loaded[2].max_depth == 2 and loaded[2].value.shape == (5, 3)
    assert set(loaded_extra) == set(extra)
    for name, arr in extra.items():
        np.testing.assert_array_equal(loaded_extra[name], arr)
        assert loaded_extra[name].dtype == arr.dtype


def test_round_trip_canonical_dtypes_and_expected_kind(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    trees = [random_tree(rng, n_values=1) for _ in range(4)]
    odd = [  # same trees, non-canonical dtypes of the right kinds
        Tree(
            feature=t.feature.astype(np.int64),
            threshold=t.threshold.astype(np.float32).astype(np.float64),
            children_left=t.children_left.astype(np.int16),
            children_right=t.children_right.astype(np.int64),
            value=t.value.astype(np.float32),
            n_node_samples=t.n_node_samples.astype(np.uint32),
            weighted_n_node_samples=t.weighted_n_node_samples,
            impurity=t.impurity.astype(np.float32),
        )
        for t in trees
    ]
    path = tmp_path / "reg.ffm"
    save_forest(path, {"kind": "regressor"}, odd)
    header, loaded, extra = load_forest(path, expected_kind="regressor")
    assert header == {"kind": "regressor"} and extra == {}
    expected = {
        "feature": np.int32,
        "threshold": np.float64,
        "children_left": np.int32,
        "children_right": np.int32,
        "value": np.float64,
        "n_node_samples": np.int64,
        "weighted_n_node_samples": np.float64,
        "impurity": np.float64,
    }
    for tree, orig in zip(loaded, odd, strict=True):
        for name, dtype in expected.items():
            assert getattr(tree, name).dtype == dtype, name
            np.testing.assert_array_equal(getattr(tree, name), getattr(orig, name))


def test_file_layout(tmp_path: Path) -> None:
    trees = hand_trees()
    path = tmp_path / "model.ffm"
    save_forest(path, HEADER, trees, extra={"w": np.zeros(2)})
    with np.load(path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    assert set(arrays) == {"__header__", "tree_offsets", "extra/w", *Tree.ARRAYS, *Tree.SET_ARRAYS}
    assert arrays["__header__"].dtype == np.uint8
    meta = meta_of(arrays)
    assert meta == {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "kind": "classifier",
        "n_trees": 3,
        "header": HEADER,
    }
    assert arrays["tree_offsets"].dtype == np.int64
    np.testing.assert_array_equal(arrays["tree_offsets"], [0, 1, 4, 9])
    assert arrays["feature"].shape == (9,) and arrays["value"].shape == (9, 3)
    # children are stored local to their tree
    np.testing.assert_array_equal(arrays["children_left"][4:], trees[2].children_left)


def test_header_numpy_values_are_converted(tmp_path: Path) -> None:
    header = {
        "kind": "regressor",
        "n_features_in": np.int64(3),
        "alpha": np.float32(0.5),
        "flags": np.array([True, False]),
        "shape": (np.int32(2), 3),
        "nested": {"x": np.arange(3)},
    }
    path = tmp_path / "m.ffm"
    save_forest(path, header, [random_tree(np.random.default_rng(1), n_features=3)])
    loaded, _, _ = load_forest(path)
    assert loaded == {
        "kind": "regressor",
        "n_features_in": 3,
        "alpha": 0.5,
        "flags": [True, False],
        "shape": [2, 3],
        "nested": {"x": [0, 1, 2]},
    }
    assert type(loaded["n_features_in"]) is int


def test_save_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.ffm"
    save_forest(path, HEADER, hand_trees())
    before = path.read_bytes()

    def broken_savez(fh: Any, *args: Any, **kwargs: Any) -> None:
        fh.write(b"PK\x03\x04 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", broken_savez)
    with pytest.raises(KeyboardInterrupt):
        save_forest(path, {"kind": "other"}, hand_trees())
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.ffm"]


def test_overwrite_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "model.ffm"
    save_forest(path, {"kind": "a"}, hand_trees())
    save_forest(path, {"kind": "b"}, hand_trees()[:1])
    header, trees, _ = load_forest(path)
    assert header == {"kind": "b"} and len(trees) == 1


# --------------------------------------------------------------------------- save refusals


@pytest.mark.parametrize(
    ("header", "error", "match"),
    [
        ({"kind": "c", "bad": {1, 2}}, TypeError, r"header\['bad'\] has type set"),
        ({"kind": "c", "obj": object()}, TypeError, "has type object"),
        ({"kind": "c", "d": {1: "x"}}, TypeError, "non-string key 1"),
        ({"kind": "c", "x": float("nan")}, ValueError, "JSON cannot store"),
        ({"kind": "c", "x": [np.inf]}, ValueError, "JSON cannot store"),
        (["kind"], TypeError, "header must be a dict"),
    ],
)
def test_save_refuses_bad_header(
    tmp_path: Path, header: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        save_forest(tmp_path / "m.ffm", header, hand_trees())
    assert not os.listdir(tmp_path)


def test_save_refuses_bad_forest(tmp_path: Path) -> None:
    path = tmp_path / "m.ffm"
    with pytest.raises(ValueError, match="non-empty list of Tree"):
        save_forest(path, HEADER, [])
    with pytest.raises(ValueError, match=r"trees\[0\] is a dict"):
        save_forest(path, HEADER, [hand_trees()[0].as_dict()])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="different numbers of columns"):
        save_forest(path, {}, [random_tree(np.random.default_rng(0), n_values=2), *hand_trees()])
    bad = hand_trees()[2]
    bad.children_left[1] = 1  # its own child: a cycle
    with pytest.raises(ValueError, match="refusing to save .*not greater than its parent"):
        save_forest(path, HEADER, [bad])
    with pytest.raises(ValueError, match="refusing to save .*n_features_in=2"):
        save_forest(path, {"kind": "c", "n_features_in": 2}, hand_trees())
    with pytest.raises(TypeError, match="object dtype"):
        save_forest(path, HEADER, hand_trees(), extra={"o": np.array([None, 1], dtype=object)})
    assert not os.listdir(tmp_path)


# --------------------------------------------------------------------------- load refusals


def _set_meta(**changes: Any) -> Any:
    def mutate(arrays: dict[str, np.ndarray]) -> None:
        meta = meta_of(arrays)
        meta.update(changes)
        arrays["__header__"] = header_array(meta)

    return mutate


def _set(name: str, index: Any, value: Any) -> Any:
    def mutate(arrays: dict[str, np.ndarray]) -> None:
        arrays[name] = arrays[name].copy()
        arrays[name][index] = value

    return mutate


def _replace(name: str, new: Any) -> Any:
    def mutate(arrays: dict[str, np.ndarray]) -> None:
        arrays[name] = new(arrays[name])

    return mutate


def _drop(name: str) -> Any:
    def mutate(arrays: dict[str, np.ndarray]) -> None:
        del arrays[name]

    return mutate


# Node layout of the valid file: tree 0 = node 0 (leaf); tree 1 = nodes 1-3 (stump);
# tree 2 = nodes 4-8 with local children 0->(1,2), 1->(3,4).
BROKEN_FILES = {
    "no header": (_drop("__header__"), "no '__header__' array"),
    "header not json": (
        _replace("__header__", lambda a: np.frombuffer(b"{not json", dtype=np.uint8)),
        "not UTF-8 JSON",
    ),
    "header not utf8": (
        _replace("__header__", lambda a: np.frombuffer(b"\xff\xfe\x00", dtype=np.uint8)),
        "not UTF-8 JSON",
    ),
    "header wrong dtype": (_replace("__header__", lambda a: a.astype(np.int64)), "1-D uint8"),
    "header not a dict": (_replace("__header__", lambda a: header_array([1, 2])), "format"),
    "wrong format": (_set_meta(format="other-model"), "format is 'other-model'"),
    "no format": (_set_meta(format=None), "format is None"),
    "newer version": (_set_meta(version=FORMAT_VERSION + 1), "newer.*Upgrade fedforest"),
    "version not int": (_set_meta(version="1"), "version '1' is not a positive integer"),
    "n_trees not int": (_set_meta(n_trees=1.5), "n_trees 1.5"),
    "n_trees mismatch": (_set_meta(n_trees=2), r"'tree_offsets' has shape \(4,\), expected \(3,\)"),
    "kind mismatch inside": (_set_meta(kind="regressor"), "'kind' matches"),
    "n_features_in bad": (
        _set_meta(header={**HEADER, "n_features_in": -1}),
        "n_features_in.*non-negative int",
    ),
    "missing array": (_drop("impurity"), r"arrays \['impurity'\] are missing"),
    "missing offsets": (_drop("tree_offsets"), r"\['tree_offsets'\] are missing"),
    "float feature": (
        _replace("feature", lambda a: a.astype(np.float64)),
        "'feature'.*expected an integer",
    ),
    "bool children": (
        _replace("children_right", lambda a: a > 0),
        "'children_right'.*expected an integer",
    ),
    "float children": (
        _replace("children_left", lambda a: a.astype(np.float32)),
        "'children_left'.*integer",
    ),
    "int threshold": (
        _replace("threshold", lambda a: a.astype(np.int64)),
        "'threshold'.*expected a float",
    ),
    "int value": (_replace("value", lambda a: a.astype(np.int64)), "'value'.*expected a float"),
    "float offsets": (
        _replace("tree_offsets", lambda a: a.astype(np.float64)),
        "'tree_offsets'.*integer",
    ),
    "huge unsigned": (
        _replace("n_node_samples", lambda a: a.astype(np.uint64) + np.uint64(2**63)),
        "too large for int64",
    ),
    "short impurity": (_replace("impurity", lambda a: a[:-1]), "'impurity' has shape"),
    "2-D threshold": (_replace("threshold", lambda a: a[:, None]), "'threshold' has shape"),
    "1-D value": (_replace("value", lambda a: a[:, 0]), "'value' has shape"),
    "value rows": (_replace("value", lambda a: a[:-1]), r"'value' has shape \(8, 3\)"),
    "value no columns": (_replace("value", lambda a: a[:, :0]), "n_values >= 1"),
    "offsets not from 0": (_set("tree_offsets", 0, 1), "must start at 0"),
    "offsets not monotone": (
        _replace("tree_offsets", lambda a: np.array([0, 4, 1, 9])),
        "increase strictly",
    ),
    "offsets wrong end": (_set("tree_offsets", -1, 8), "end at the node count 9"),
    "empty tree": (_replace("tree_offsets", lambda a: np.array([0, 0, 4, 9])), "increase"),
    "one child": (_set("children_right", 4, -1), "node 4 has exactly one child"),
    "child out of range": (_set("children_left", 5, 5), r"children_left\[5\] = 5 is out of"),
    "negative child": (_set("children_right", 1, -3), r"children_right\[1\] = -3 is out of"),
    "child into next tree": (_set("children_left", 1, 3), "out of range for its tree of 3"),
    "self loop": (_set("children_left", 5, 1), r"= 1 is not greater than its parent's index 1"),
    "back edge": (_set("children_right", 5, 0), "not greater than its parent's index 1"),
    "shared child": (_set("children_left", 5, 2), "child of 2 nodes"),
    "leaf with feature": (
        _set("feature", 2, 0),
        "tree 1, node 1 is a leaf whose feature is not -2 .feature = 0.",
    ),
    "internal negative feature": (_set("feature", 4, -2), "tree 2, node 0 .*negative feature"),
    "feature too large": (_set("feature", 5, 4), "tree 2, node 1 .*n_features_in=4"),
    "nan threshold": (_set("threshold", 1, np.nan), "tree 1, node 0 .*NaN threshold"),
    "nan value": (_set("value", (3, 1), np.nan), "tree 1, node 2 has a non-finite value"),
    "inf value": (_set("value", (0, 0), np.inf), "tree 0, node 0 has a non-finite value"),
    "nan impurity": (_set("impurity", 7, np.nan), "non-finite impurity"),
    "negative weight": (
        _set("weighted_n_node_samples", 7, -1.0),
        "negative or non-finite weighted",
    ),
    "negative count": (_set("n_node_samples", 7, -1), "negative n_node_samples"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_FILES))
def test_load_refuses_broken_file(tmp_path: Path, case: str) -> None:
    mutate, match = BROKEN_FILES[case]
    arrays = saved_arrays(tmp_path)
    mutate(arrays)
    path = tmp_path / "broken.ffm"
    write_npz(path, arrays)
    with pytest.raises(ValueError, match=match) as info:
        load_forest(path)
    message = str(info.value)
    assert str(path) in message  # names the file
    assert "fedforest" in message  # and says what to do


def test_load_refuses_unexpected_array(tmp_path: Path) -> None:
    arrays = saved_arrays(tmp_path)
    arrays["weights_per_tree"] = np.ones(3)
    write_npz(tmp_path / "x.ffm", arrays)
    with pytest.raises(ValueError, match=r"unexpected arrays \['weights_per_tree'\]"):
        load_forest(tmp_path / "x.ffm")


def test_load_refuses_other_kind(tmp_path: Path) -> None:
    path = tmp_path / "model.ffm"
    save_forest(path, HEADER, hand_trees())
    assert load_forest(path, expected_kind="classifier")[0] == HEADER
    with pytest.raises(
        ValueError, match="holds a 'classifier' model, expected 'regressor'.*class that saved it"
    ):
        load_forest(path, expected_kind="regressor")


@pytest.fixture
def no_unpickling(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("unpickling was attempted")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)


@pytest.mark.usefixtures("no_unpickling")
@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_load_refuses_pickle_file(tmp_path: Path, protocol: int) -> None:
    path = tmp_path / "model.ffm"
    with open(path, "wb") as fh:
        pickle.dump(hand_trees(), fh, protocol=protocol)
    match = "is a pickle" if protocol >= 2 else "not an .npz model archive"
    with pytest.raises(ValueError, match=match):
        load_forest(path)


@pytest.mark.usefixtures("no_unpickling")
def test_load_refuses_object_array_inside_npz(tmp_path: Path) -> None:
    arrays: dict[str, Any] = saved_arrays(tmp_path)
    arrays["extra/evil"] = np.array([{"a": 1}, None], dtype=object)
    path = tmp_path / "evil.ffm"
    with open(path, "wb") as fh:
        np.savez_compressed(fh, allow_pickle=True, **arrays)
    with pytest.raises(ValueError, match="pickled .*never loads"):
        load_forest(path)


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9, 0.99])
def test_load_refuses_truncated_file(tmp_path: Path, fraction: float) -> None:
    path = tmp_path / "model.ffm"
    save_forest(path, HEADER, hand_trees(), extra={"big": np.arange(1000.0)})
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ValueError, match=f"cannot load model file '{path}'.*(empty|npz)"):
        load_forest(path)


def test_load_refuses_corrupted_member(tmp_path: Path) -> None:
    path = tmp_path / "model.ffm"
    save_forest(path, HEADER, hand_trees(), extra={"big": np.arange(1000.0)})
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = b"\x00" * 16
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="cannot load model file"):
        load_forest(path)


@pytest.mark.parametrize(
    "content",
    [b"hello, this is not a model\n", np.lib.format.MAGIC_PREFIX + b"\x01\x00rest"],
)
def test_load_refuses_other_files(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "model.ffm"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not an .npz model archive"):
        load_forest(path)


def test_load_refuses_npy_file(tmp_path: Path) -> None:
    path = tmp_path / "model.npy"
    buf = io.BytesIO()
    np.save(buf, np.arange(3))
    path.write_bytes(buf.getvalue())
    with pytest.raises(ValueError, match="not an .npz model archive"):
        load_forest(path)


def test_missing_file_raises_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_forest(tmp_path / "nope.ffm")


# --------------------------------------------------------------------------- kernels


def test_pack_forest_offsets_and_global_children() -> None:
    rng = np.random.default_rng(3)
    trees = [*hand_trees(), *(random_tree(rng, n_values=3) for _ in range(5))]
    feature, threshold, left, right, value, offsets = pack_forest(trees)
    sizes = [t.node_count for t in trees]
    assert offsets.dtype == np.int64
    np.testing.assert_array_equal(offsets, np.concatenate([[0], np.cumsum(sizes)]))
    assert feature.shape == threshold.shape == left.shape == right.shape == (sum(sizes),)
    assert value.shape == (sum(sizes), 3)
    for t, tree in enumerate(trees):
        lo, hi = offsets[t], offsets[t + 1]
        np.testing.assert_array_equal(feature[lo:hi], tree.feature)
        np.testing.assert_array_equal(value[lo:hi], tree.value)
        leaf = tree.children_left == -1
        np.testing.assert_array_equal(left[lo:hi][leaf], -1)
        np.testing.assert_array_equal(right[lo:hi][leaf], -1)
        np.testing.assert_array_equal(left[lo:hi][~leaf], tree.children_left[~leaf] + lo)
        np.testing.assert_array_equal(right[lo:hi][~leaf], tree.children_right[~leaf] + lo)


def _apply_both(trees: list[Tree], X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    feature, threshold, left, right, _, offsets = pack_forest(trees)
    out_numba = np.full((X.shape[0], len(trees)), -7, dtype=np.int32)
    out_numpy = np.full((X.shape[0], len(trees)), -7, dtype=np.int32)
    apply_forest(X, feature, threshold, left, right, offsets, out_numba)
    apply_forest_numpy(X, feature, threshold, left, right, offsets, out_numpy)
    return out_numba, out_numpy


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_apply_forest_matches_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    trees = [
        random_tree(rng, n_features=6, max_nodes=int(rng.integers(1, 80)), n_values=3)
        for _ in range(8)
    ]
    trees.append(hand_trees()[0])  # a single leaf
    X = rng.normal(size=(300, 6))
    # rows sitting exactly on thresholds exercise the "<=" goes-left rule
    X[:20, :] = rng.choice(np.concatenate([t.threshold for t in trees]), size=(20, 6))
    out_numba, out_numpy = _apply_both(trees, X)
    np.testing.assert_array_equal(out_numba, out_numpy)
    _, _, left, _, _, offsets = pack_forest(trees)
    assert np.all(left[out_numba] == -1)  # every row ends in a leaf
    for t in range(len(trees)):  # ... of the right tree
        assert np.all((out_numba[:, t] >= offsets[t]) & (out_numba[:, t] < offsets[t + 1]))
    np.testing.assert_array_equal(out_numba[:, -1], offsets[-2])


def test_apply_forest_hand_tree() -> None:
    trees = hand_trees()
    X = np.array(
        [
            [1.5, 0.0, -0.25, 0.5],  # deeper: 0 -> 1 (x0 <= 1.5) -> 3 (x2 <= -0.25); stump -> 1
            [1.6, 0.0, 0.0, 0.6],  # deeper: 0 -> 2; stump -> 2
            [0.0, 0.0, 0.0, 0.0],
        ]  # deeper: 0 -> 1 -> 4; stump -> 1
    )
    out_numba, out_numpy = _apply_both(trees, X)
    np.testing.assert_array_equal(out_numba, out_numpy)
    np.testing.assert_array_equal(out_numba, [[0, 2, 7], [0, 3, 6], [0, 2, 8]])


def test_loaded_forest_predicts_like_the_original(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    trees = [random_tree(rng, n_features=4, n_values=2) for _ in range(6)]
    save_forest(tmp_path / "m.ffm", {"kind": "classifier", "n_features_in": 4}, trees)
    _, loaded, _ = load_forest(tmp_path / "m.ffm", expected_kind="classifier")
    X = rng.normal(size=(100, 4))
    np.testing.assert_array_equal(_apply_both(trees, X)[0], _apply_both(loaded, X)[0])


def test_every_public_name_exists() -> None:
    import fedforest

    for name in fedforest.__all__:
        assert getattr(fedforest, name) is not None
    with pytest.raises(AttributeError):
        fedforest.not_a_name  # noqa: B018
