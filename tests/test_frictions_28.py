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
