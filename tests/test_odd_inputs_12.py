"""Odd inputs, twelfth round: export's --out, a dropped client's warning, ...

Each test failed on b055cb4 (main):

- ``fedforest export --to onnx|treelite --out x.csv`` (or ``.parquet``, ``.pq``) wrote the
  export under a data file's name, silently, where ``train --out x.csv`` is a usage error;
- under ``on_client_failure="drop"``, an invalid reply's warning named the client and the
  round twice: "Client 'c' failed in round 1 (round_a): InvalidReply: Client 'c' sent an
  invalid reply in round 1 (round_a): ...";
- ``fit`` refused bytes class labels with the ``TypeError`` of scikit-learn's check of a
  1-D ``y`` ("labels represented as bytes"), which its forests fit (they check a column);
- ``save`` of a classifier fitted on dates wrote them as their integers, so the loaded
  model predicted ``int64``, silently; durations and bytes failed in the header's writer;
- ``predict`` on a DataFrame with a date column raised NumPy's ``DTypePromotionError``
  (a ``TypeError`` naming no column), where ``fit`` names the column and its dtype.
"""

from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

import fedforest as ff
from fedforest.cli import main
from fedforest.federated.protocol import ROUND_A
from tests._lying import Lying


def _regression(n: int = 90, seed: int = 12) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, X[:, 0] + 0.1 * rng.normal(size=n)


@pytest.mark.parametrize(
    ("to", "name", "advice"),
    [
        ("onnx", "x.csv", "'x.onnx'"),
        ("onnx", "x.PQ", "'x.onnx'"),
        ("treelite", "x.parquet", "'x.tl'"),
    ],
)
def test_export_refuses_a_data_file_name_for_onnx_and_treelite(
    to: str, name: str, advice: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = _regression()
    model_path = tmp_path / "m.ffm"
    ff.FedForestRegressor(n_estimators=2, max_depth=2, random_state=0).fit(X, y).save(model_path)
    out = tmp_path / name
    with pytest.raises(SystemExit) as exc:
        main(["export", str(model_path), "--to", to, "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--out {str(out)!r} ends in {Path(name).suffix}, a data file's suffix" in err
    assert f"--to {to} writes" in err and f"give {advice}" in err
    assert not out.exists()


def test_export_shap_still_writes_its_table_under_a_data_file_name(tmp_path: Path) -> None:
    X, y = _regression()
    model_path, data = tmp_path / "m.ffm", tmp_path / "rows.csv"
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    ff.FedForestRegressor(n_estimators=2, max_depth=2, random_state=0).fit(frame, y).save(
        model_path
    )
    frame.to_csv(data, index=False)
    out = tmp_path / "shap.csv"
    assert (
        main(["export", str(model_path), "--to", "shap", "--data", str(data), "--out", str(out)])
        == 0
    )
    assert list(pd.read_csv(out).columns) == ["shap_a", "shap_b", "shap_c", "base_value"]


def _nan_summary(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    arrays["summary"] = np.full_like(arrays["summary"], np.nan, dtype=float)


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_a_dropped_invalid_reply_names_its_client_and_round_once(
    privacy: str, caplog: pytest.LogCaptureFixture
) -> None:
    X, y = _regression(n=300)
    clients = [
        ff.Client(X[:100], y[:100], "a"),
        ff.Client(X[100:200], y[100:200], "b"),
        Lying(X[200:], y[200:], "c", ROUND_A, _nan_summary, array="summary"),
    ]
    model = ff.FedForestRegressor(
        n_estimators=2, max_depth=2, random_state=0, privacy=privacy, on_client_failure="drop"
    )
    with caplog.at_level(logging.WARNING, logger="fedforest.federated.failure"):
        model.fit_federated(ff.LocalFederation(clients))
    ((name, round_index),) = model.dropped_clients_
    assert name == "c" and model.dropped_reasons_ == {"c": f"InvalidReply in {ROUND_A}"}
    (said,) = [r.getMessage() for r in caplog.records if "on_client_failure" in r.getMessage()]
    assert said.startswith(f"Client 'c' sent an invalid reply in round {round_index} ({ROUND_A}): ")
    assert said.count("'c'") == 2 and said.count(f"round {round_index}") == 1, said
    assert said.endswith("training goes on without 'c', with 2 client(s).")


def _labelled(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X, _ = _regression(n=120)
    return X, labels[(X[:, 0] > 0).astype(int)]


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_fit_takes_bytes_labels_as_scikit_learn(privacy: str) -> None:
    X, y = _labelled(np.array([b"no", b"yes"]))
    model = ff.FedForestClassifier(n_estimators=3, random_state=0, privacy=privacy).fit(X, y)
    reference = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert model.classes_.dtype == reference.classes_.dtype
    np.testing.assert_array_equal(model.classes_, reference.classes_)
    assert model.predict(X).dtype == reference.predict(X).dtype
    assert (model.predict(X) == y).mean() > 0.9


_UNSAVABLE = {
    "dates": np.array(["2020-01-01", "2021-06-01"], dtype="datetime64[ns]"),
    "durations": np.array([1, 2], dtype="timedelta64[s]"),
    "bytes": np.array([b"no", b"yes"]),
}


@pytest.mark.parametrize("kind", sorted(_UNSAVABLE))
def test_save_refuses_labels_a_file_cannot_give_back(kind: str, tmp_path: Path) -> None:
    X, y = _labelled(_UNSAVABLE[kind])
    model = ff.FedForestClassifier(n_estimators=2, random_state=0, privacy="none").fit(X, y)
    path = tmp_path / "m.ffm"
    with pytest.raises(
        ValueError, match=re.escape(f"classes_ has dtype {model.classes_.dtype}, which")
    ):
        model.save(path)
    assert not path.exists()


@pytest.mark.parametrize("fitted_on", ["frame", "array"])
def test_predict_names_a_date_column_as_fit_does(fitted_on: str) -> None:
    X, y = _regression()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    model = ff.FedForestRegressor(n_estimators=2, random_state=0, privacy="none")
    model.fit(frame if fitted_on == "frame" else X, y)
    dated = frame.assign(b=pd.date_range("2020-01-01", periods=len(frame)))
    with (
        pytest.raises(ValueError, match="Column 'b' of X has dtype datetime64"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", UserWarning)  # the array's model: no feature names
        model.predict(dated)
