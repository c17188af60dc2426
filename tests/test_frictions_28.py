"""Frictions the session-28 reviews noticed (branch fric28): each test failed before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.swarm import Peer


def _site() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(4)
    X = pd.DataFrame(rng.normal(size=(60, 3)), columns=["age", "bmi", "dose"])
    return X, (X["age"] + X["dose"] > 0).to_numpy().astype(int)


@pytest.mark.parametrize("engine", ["sklearn", "fedforest"])
def test_peer_refuses_n_jobs_zero_in_scikit_learns_words(engine: str) -> None:
    X, y = _site()
    words = r"The 'n_jobs' parameter of Peer must be .* Got 0 instead"
    with pytest.raises(ValueError, match=words):  # was accepted, then joblib's at fit
        Peer("A", n_estimators=3, engine=engine, n_jobs=0)
    peer = Peer("A", n_estimators=3, engine=engine, random_state=0, n_jobs=-1)
    peer.set_params(n_jobs=0)  # set_params does not pass through __init__
    with pytest.raises(ValueError, match=words):
        peer.fit(X, y)
    with pytest.raises(ValueError, match=r"parameter of Peer .* Got 1.5 instead"):
        peer.set_params(n_jobs=1.5).fit(X, y)
    peer.set_params(n_jobs=1).fit(X, y)  # an allowed value still fits
    assert peer.trees_


#: The CLI in a process where onnx cannot be imported (skl2onnx installed, onnx not).
_NO_ONNX = (
    "import sys; sys.modules['onnx'] = None; "
    "from fedforest.cli import main; sys.exit(main(sys.argv[1:]))"
)


def test_export_without_onnx_names_onnx_not_skl2onnx(tmp_path) -> None:
    import subprocess
    import sys

    import fedforest as ff

    X, y = _site()
    ff.FedForestRegressor(n_estimators=2, random_state=0).fit(X, y.astype(float)).save(
        tmp_path / "m.ffm"
    )
    argv = ["export", str(tmp_path / "m.ffm"), "--to", "onnx", "--out", str(tmp_path / "m.onnx")]
    child = subprocess.run(
        [sys.executable, "-c", _NO_ONNX, *argv], capture_output=True, text=True, timeout=300
    )
    assert child.returncode == 2, child.stderr
    assert "Traceback" not in child.stderr, child.stderr
    # was "to_onnx() needs skl2onnx, which is not installed": skl2onnx was, onnx was not
    assert "to_onnx() needs onnx, which is not installed: pip install 'fedforest[export]'" in (
        child.stderr
    ), child.stderr
    assert not (tmp_path / "m.onnx").exists()


def test_category_groups_of_a_level_equal_each_pair_on_its_own() -> None:
    """Round A's rows per code of every categorical pair at once (once a level since
    fric28; the groupless step and Round B each made them pair by pair): the per-pair
    differences of its cumulative counts at its codes, then the node's rows."""
    from fedforest.federated.privacy.rules import group_categories
    from fedforest.federated.server.secure_grids import LevelA
    from fedforest.federated.server.secure_round_b import category_groups, groupless_pairs

    rng = np.random.default_rng(5)
    n_categories = np.array([0, 4, 2, 7, 3])  # feature 0 numeric
    pair_off = np.array([0, 3, 5, 9])  # 3 nodes
    pair_feat = np.array([1, 0, 3, 2, 4, 3, 1, 4, 2], dtype=np.int32)
    # Grids: a categorical pair's has n_categories - 1 edges, or n_categories (one more,
    # a missing edge), or fewer; a numeric pair's any number.
    sizes = [3, 5, 5, 1, 2, 7, 2, 0, 2]
    grid_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    cum = np.zeros((int(grid_off[-1]), 2))
    pooled = np.zeros((3, 3))
    for a, b in zip(grid_off[:-1], grid_off[1:], strict=True):
        cum[a:b, 0] = np.cumsum(rng.integers(0, 30, size=b - a))
    pooled[:, 0] = cum[:, 0].max() + 25  # each node's rows: above its counts
    node = np.repeat(np.arange(3), np.diff(pair_off))
    level = LevelA(pooled, grid_off, np.zeros(cum.shape[0]), cum)
    got = category_groups(level, pair_off, pair_feat, n_categories, 20)
    cats = [p for p in range(pair_feat.size) if n_categories[pair_feat[p]] >= 2]
    assert sorted(got) == cats
    for p in cats:
        counts = [0.0, *cum[grid_off[p] : grid_off[p + 1], 0], pooled[node[p], 0]]
        rows = np.diff(counts)[: n_categories[pair_feat[p]]]
        np.testing.assert_array_equal(got[p][0], rows)
        np.testing.assert_array_equal(got[p][1], group_categories(rows, 20))
    none = groupless_pairs(got, pair_feat.size)
    assert none.tolist() == [p in cats and not (got[p][1] >= 0).any() for p in range(9)]
    assert none.any() and not none.all()
    some = np.array([6, 0])
    assert sorted(category_groups(level, pair_off, pair_feat, n_categories, 20, some)) == [0, 6]
