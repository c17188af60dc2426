"""Corrupted model files and share bundles are refused at load time (issue 12).

Every corrupted file here is a real file written by ``save`` from a small fitted model,
with npz members rewritten through numpy and zipfile: the loader must refuse it with a
``ValueError`` naming the file and the field, before anything reaches ``predict``.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest
from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.swarm import Peer, ShareBundle, SwarmForest, shared_columns
from fedforest.swarm.data import make_s500
from fedforest.tree import io as tree_io

Member = np.ndarray | bytes


# --------------------------------------------------------------------------- helpers
def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def npy_with_header(header: str, data: bytes = b"", version: int = 1) -> bytes:
    """A .npy member with the header text ``header`` written as is (any length)."""
    text = header.encode("latin1")
    size = struct.pack("<H", len(text)) if version == 1 else struct.pack("<I", len(text))
    return np.lib.format.MAGIC_PREFIX + bytes([version, 0]) + size + text + data


def members(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        return {key: npz[key] for key in npz.files}


def rewrite(src: Path, dst: Path, edit: dict[str, Member]) -> Path:
    """Copy the archive ``src`` to ``dst`` with the members in ``edit`` replaced or added.

    Keys are member names without ``.npy``; a value is an array (saved with ``np.save``)
    or the raw bytes of the member.
    """
    todo = dict(edit)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            key = item.filename.removesuffix(".npy")
            data = zin.read(item.filename)
            if key in todo:
                new = todo.pop(key)
                data = new if isinstance(new, bytes) else npy_bytes(new)
            zout.writestr(item.filename, data)
        for key, new in todo.items():
            zout.writestr(f"{key}.npy", new if isinstance(new, bytes) else npy_bytes(new))
    return dst


def edit_header(src: Path, dst: Path, edit: Any) -> Path:
    meta = json.loads(members(src)["__header__"].tobytes().decode("utf-8"))
    edit(meta)
    text = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    return rewrite(src, dst, {"__header__": text})


def refused(load: Any, path: Path, *fields: str) -> str:
    """Load ``path``, expecting a ValueError naming the file and every one of ``fields``."""
    with pytest.raises(ValueError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message, message
    for field in fields:
        assert field in message, message
    return message


def set_nodes(path: Path) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The members of a model file and the global indices of its set-split nodes."""
    arrays = members(path)
    return arrays, np.flatnonzero(arrays["set_size"] > 0)


def global_children(arrays: dict[str, np.ndarray], node: int) -> tuple[int, int]:
    """Global indices of the children of global node ``node`` (children are tree-local)."""
    offsets = arrays["tree_offsets"]
    start = int(offsets[np.searchsorted(offsets, node, side="right") - 1])
    return start + int(arrays["children_left"][node]), start + int(arrays["children_right"][node])


# --------------------------------------------------------------------------- fitted models
def frame(n: int = 240, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "ward": pd.Categorical(rng.choice(["x", "y", "z", "w"], size=n)),
            "b": rng.normal(size=n),
        }
    )
    h = np.repeat(["s0", "s1", "s2"], n // 3)
    signal = X["a"].to_numpy() + 2.0 * X["ward"].isin(["y", "w"]) + 1.5 * (h == "s1")
    return X, h, signal


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def set_classifier(model_dir: Path) -> Path:
    """A classifier with set splits on the categorical column and on the client index."""
    X, h, signal = frame()
    y = np.where(signal > 1.5, "hi", "lo")
    model = FedForestClassifier(
        n_estimators=4, max_depth=4, privacy="none", split_on_client=True, random_state=0
    ).fit(X, y, client_ids=h)
    assert any((t.set_size > 0).any() for t in model.trees_)
    path = model_dir / "sets.ffm"
    model.save(path)
    return path


@pytest.fixture(scope="module")
def regressor(model_dir: Path) -> Path:
    X, h, signal = frame(seed=1)
    model = FedForestRegressor(n_estimators=3, max_depth=3, privacy="none", random_state=0)
    model.fit(X[["a", "b"]], signal, client_ids=h)
    path = model_dir / "reg.ffm"
    model.save(path)
    return path


# --------------------------------------------------------------------------- model files
def test_rewriting_keeps_a_valid_file(set_classifier: Path, tmp_path: Path) -> None:
    copy = rewrite(set_classifier, tmp_path / "copy.ffm", {})
    model = fedforest.load(copy)
    X, _, _ = frame(seed=5)
    proba = model.predict_proba(X, client_ids=np.full(len(X), "unknown"))  # marginal rule
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("value", [np.array(1.0), np.ones((3, 1))])
def test_feature_importances_of_the_wrong_rank_are_refused(
    regressor: Path, tmp_path: Path, value: np.ndarray
) -> None:
    bad = rewrite(regressor, tmp_path / "imp.ffm", {"extra/feature_importances": value})
    refused(fedforest.load, bad, "feature_importances")


def test_unexpected_extra_array_in_a_model_file_is_refused(regressor: Path, tmp_path: Path) -> None:
    bad = rewrite(regressor, tmp_path / "x.ffm", {"extra/notes": np.arange(3.0)})
    refused(fedforest.load, bad, "extra/notes")


@pytest.mark.parametrize("weight", [0.0, 1e308, 5e-324])
def test_set_split_children_weights_predict_divides_by_are_checked(
    set_classifier: Path, tmp_path: Path, weight: float
) -> None:
    # The marginal rule divides by the children's weight: 0 divides by zero, 1e308 + 1e308
    # overflows (shares 0, rows summing to 0), a subnormal sum loses the mass.
    arrays, nodes = set_nodes(set_classifier)
    w = arrays["weighted_n_node_samples"].copy()
    for node in nodes:
        w[list(global_children(arrays, int(node)))] = weight
    bad = rewrite(set_classifier, tmp_path / "w.ffm", {"weighted_n_node_samples": w})
    refused(fedforest.load, bad, "weighted_n_node_samples", "set split")


def test_all_node_weights_zero_is_refused(set_classifier: Path, tmp_path: Path) -> None:
    w = np.zeros_like(members(set_classifier)["weighted_n_node_samples"])
    bad = rewrite(set_classifier, tmp_path / "w0.ffm", {"weighted_n_node_samples": w})
    refused(fedforest.load, bad, "weighted_n_node_samples")


def test_regression_values_whose_sum_over_trees_overflows_are_refused(
    regressor: Path, tmp_path: Path
) -> None:
    value = np.full_like(members(regressor)["value"], 1e308)
    bad = rewrite(regressor, tmp_path / "v.ffm", {"value": value})
    refused(fedforest.load, bad, "value", "overflow")


@pytest.mark.parametrize("n_jobs", [0, 1.5, "2"])
def test_invalid_n_jobs_in_the_params_is_refused(
    regressor: Path, tmp_path: Path, n_jobs: Any
) -> None:
    bad = edit_header(
        regressor, tmp_path / "nj.ffm", lambda m: m["header"]["params"].update(n_jobs=n_jobs)
    )
    refused(fedforest.load, bad, "n_jobs")


@pytest.mark.parametrize("n_jobs", [None, -2, -1, 1, 2])
def test_valid_n_jobs_in_the_params_loads_and_predicts(
    regressor: Path, tmp_path: Path, n_jobs: int | None
) -> None:
    good = edit_header(
        regressor, tmp_path / "nj.ffm", lambda m: m["header"]["params"].update(n_jobs=n_jobs)
    )
    model = fedforest.load(good)
    assert model.n_jobs == n_jobs
    X, _, _ = frame(seed=2)
    assert np.isfinite(model.predict(X[["a", "b"]])).all()


@pytest.mark.parametrize("cls", [FedForestRegressor, FedForestClassifier])
def test_fit_refuses_n_jobs_zero(cls: type) -> None:
    X, h, signal = frame(n=60)
    y = signal if cls is FedForestRegressor else (signal > 1.5).astype(int)
    with pytest.raises(ValueError, match="'n_jobs' parameter"):  # not joblib's runtime error
        cls(n_estimators=2, privacy="none", n_jobs=0).fit(X[["a", "b"]], y, client_ids=h)
    for ok in (None, -1, 1, 2):
        cls(n_jobs=ok)._validate_params()


# --------------------------------------------------------------------------- archive members
def test_oversized_npy_header_is_reported_as_such(regressor: Path, tmp_path: Path) -> None:
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }" + " " * 20000 + "\n"
    member = npy_with_header(header, np.ones(2).tobytes())
    bad = rewrite(regressor, tmp_path / "hdr.ffm", {"extra/feature_importances": member})
    message = refused(fedforest.load, bad, "extra/feature_importances", "header", "too large")
    assert "pickle" not in message


@pytest.mark.parametrize(
    "member",
    [
        npy_with_header("{'descr': '<f8', 'shape': (2,)}\n"),  # a key missing
        npy_with_header("not a dict at all\n"),
        npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (-4,), }\n"),
        np.lib.format.MAGIC_PREFIX + b"\x01",  # cut inside the preamble
        b"\x00" * 64,  # no magic
    ],
)
def test_malformed_npy_header_is_reported_as_such(
    regressor: Path, tmp_path: Path, member: bytes
) -> None:
    bad = rewrite(regressor, tmp_path / "hdr.ffm", {"extra/feature_importances": member})
    message = refused(fedforest.load, bad, "extra/feature_importances", "malformed")
    assert "pickle" not in message


def test_object_member_is_still_reported_as_pickled(regressor: Path, tmp_path: Path) -> None:
    header = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }\n"
    bad = rewrite(regressor, tmp_path / "obj.ffm", {"extra/oob_score": npy_with_header(header)})
    refused(fedforest.load, bad, "extra/oob_score", "pickled")


def test_large_extra_array_is_refused_before_it_is_read(regressor: Path, tmp_path: Path) -> None:
    # 32 MiB of zeros, a few kB compressed: more than a 3-tree forest's extras can need.
    blob = np.zeros(4 << 20)
    bad = rewrite(regressor, tmp_path / "blob.ffm", {"extra/blob": blob})
    assert bad.stat().st_size < 1 << 20
    refused(fedforest.load, bad, "extra/blob", "uncompressed")


def test_declared_size_is_checked_before_reading(regressor: Path, tmp_path: Path) -> None:
    # The header claims 8 TiB; the data is absent. Refused for its size, not its truncation.
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }\n"
    bad = rewrite(regressor, tmp_path / "tib.ffm", {"value": npy_with_header(header)})
    refused(fedforest.load, bad, "value.npy", "uncompressed")
    header = "{'descr': '|V0', 'fortran_order': False, 'shape': (1099511627776,), }\n"
    bad = rewrite(regressor, tmp_path / "v0.ffm", {"extra/oob_score": npy_with_header(header)})
    refused(fedforest.load, bad, "extra/oob_score", "uncompressed")


def test_total_uncompressed_size_is_capped(
    regressor: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fedforest.load(regressor)
    monkeypatch.setattr(tree_io, "MAX_TOTAL_BYTES", 1024)
    refused(fedforest.load, regressor, "MAX_TOTAL_BYTES")


def test_duplicate_member_is_refused(regressor: Path, tmp_path: Path) -> None:
    bad = tmp_path / "dup.ffm"
    with zipfile.ZipFile(regressor) as zin, zipfile.ZipFile(bad, "w") as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, zin.read(item.filename))
        with pytest.warns(UserWarning, match="Duplicate name"):
            zout.writestr("value.npy", npy_bytes(np.zeros((1, 1))))
    refused(fedforest.load, bad, "value.npy", "twice")


# --------------------------------------------------------------------------- share bundles
@pytest.fixture(scope="module")
def swarm_setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[list[Path], list[ShareBundle], pd.DataFrame]:
    """Two peers without imputers (so ``mp`` uses the trees' weights), their files, a site."""
    ds = make_s500("mix", n_samples=160, random_state=1)
    cols = list(ds.X.columns)
    shared = cols[:6]
    peers = []
    for k, rows in enumerate(np.array_split(np.arange(len(ds.y)), 2)):
        own = shared + cols[6 + k :: 2]
        peers.append(
            Peer(f"P{k}", 3, random_state=k).fit(
                ds.X.iloc[rows][own],
                ds.y[rows],
                categorical_features=[c for c in own if c in ds.categorical],
            )
        )
    bundles = [p.share(shared_features=shared_columns(peers), imputers=False) for p in peers]
    folder = tmp_path_factory.mktemp("bundles")
    paths = []
    for b in bundles:
        paths.append(folder / f"{b.name}.ffb")
        b.save(paths[-1])
    site = ds.X.iloc[:40][list(bundles[1].feature_names)]  # P0's private columns are missing
    return paths, bundles, site


def assert_probabilities(proba: np.ndarray) -> None:
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_valid_bundles_predict_probabilities(swarm_setup: Any) -> None:
    paths, bundles, site = swarm_setup
    swarm = SwarmForest([ShareBundle.load(p) for p in paths])
    for strategy in ("mp", "local", "pr", "fpv"):
        assert_probabilities(swarm.predict_proba(site, strategy, site="P0", random_state=0))


def _internal_light_leaves_heavy(arrays: dict[str, np.ndarray]) -> dict[str, Member]:
    w = arrays["weighted_n_node_samples"].copy()
    leaf = arrays["children_left"] == -1
    w[~leaf], w[leaf] = 1e-300, 1e308  # N_R / N overflows: mp gave NaN
    return {"weighted_n_node_samples": w}


def _children_heavier(arrays: dict[str, np.ndarray]) -> dict[str, Member]:
    w = arrays["weighted_n_node_samples"].copy()
    leaf = arrays["children_left"] == -1
    w[~leaf], w[leaf] = 1.0, 1e5  # N_R / N = 1e5: mp gave rows summing to 5e4
    return {"weighted_n_node_samples": w}


def _counts_overflow(arrays: dict[str, np.ndarray]) -> dict[str, Member]:
    return {"extra/class_counts": np.full_like(arrays["extra/class_counts"], 1e308)}


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_internal_light_leaves_heavy, "weighted_n_node_samples"),
        (_children_heavier, "weighted_n_node_samples"),
        (_counts_overflow, "class_counts"),
    ],
)
def test_bundles_predict_cannot_use_are_refused(
    swarm_setup: Any, tmp_path: Path, edit: Any, field: str
) -> None:
    paths, _, _ = swarm_setup
    bad = rewrite(paths[0], tmp_path / "bad.ffb", edit(members(paths[0])))
    refused(ShareBundle.load, bad, field)


def test_huge_but_finite_class_counts_pool_without_nan(swarm_setup: Any, tmp_path: Path) -> None:
    # Each root's counts are finite (1.5e308, 0), but their sum over the pooled trees is
    # not: the pooled prior must still be a distribution (it was NaN for "local").
    paths, _, site = swarm_setup
    loaded = []
    for k, path in enumerate(paths):
        arrays = members(path)
        counts = arrays["extra/class_counts"].copy()
        roots = arrays["tree_offsets"][:-1]
        counts[roots] = [1.5e308, 0.0]
        loaded.append(ShareBundle.load(rewrite(path, tmp_path / f"{k}.ffb", counts_edit(counts))))
    swarm = SwarmForest(loaded)
    # no tree can score these rows: every value unavailable (a frame of no pool column is
    # refused since test_odd_inputs_16)
    nothing = np.full((5, len(swarm.feature_names_)), np.nan)
    for strategy in ("local", "fpv"):
        proba = swarm.predict_proba(nothing, strategy, site="P0")
        assert_probabilities(proba)
        np.testing.assert_array_equal(proba, np.tile([1.0, 0.0], (5, 1)))
    for strategy in ("mp", "local", "pr", "fpv", "ss"):
        assert_probabilities(swarm.predict_proba(site, strategy, site="P0", random_state=0))


def counts_edit(counts: np.ndarray) -> dict[str, Member]:
    return {"extra/class_counts": counts}


def test_large_extra_array_in_a_bundle_is_refused(swarm_setup: Any, tmp_path: Path) -> None:
    paths, _, _ = swarm_setup
    bad = rewrite(paths[0], tmp_path / "big.ffb", {"extra/feature_std": np.zeros(4 << 20)})
    refused(ShareBundle.load, bad, "extra/feature_std", "uncompressed")
