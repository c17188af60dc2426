"""Odd inputs, eleventh round: nullable swarm labels, a model written as data, SHAP's base.

Each test failed on 5977cc7 (m27):

- ``Peer.fit`` on pandas' nullable ``Int64`` labels kept int classes (``[0, 1]``) where
  scikit-learn's forests and fedforest's estimators read the column as floats
  (``[0., 1.]``), so a peer's ``classes_`` differed from its own estimator's;
- ``fedforest train --out model.csv`` (or ``.parquet``, ``.pq``) wrote the model file
  under a data file's name, silently: a usage error now, as ``simulate --out fig.pdf``;
- a survivor's second failure while the masks of a dropped client were removed (every
  survivor failing the recovery round) read "Client 'a' failed in round 3 (recover):
  ClientFailure: Client 'a' failed in round 3 (recover): ...", the prefix twice;
- the expected value the SHAP values add up from was public only through shap's
  explainer, which refuses set splits: ``shap_expected_value_`` now gives it for every
  forest, as ``shap.TreeExplainer(...).expected_value`` for a numeric one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

import fedforest as ff
from fedforest.cli import main
from fedforest.federated.federation import ClientFailure
from fedforest.federated.protocol import RECOVER, Message
from fedforest.swarm import Peer
from tests.test_privacy import _data
from tests.test_secure import _Dying


def _frame(n: int = 80) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(11)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n)})
    y = pd.Series((X["a"] + 0.3 * rng.normal(size=n) > 0).astype(int), dtype="Int64")
    return X, y


@pytest.mark.parametrize("engine", ["fedforest", "sklearn"])
def test_a_peer_reads_nullable_int_labels_as_scikit_learn_does(engine: str) -> None:
    X, y = _frame()
    oracle = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y).classes_
    assert oracle.dtype == np.float64  # scikit-learn's reading of an Int64 column
    own = ff.FedForestClassifier(n_estimators=3, random_state=0).fit(X, y).classes_
    peer = Peer("p", n_estimators=3, random_state=0, engine=engine).fit(X, y)
    for classes in (own, peer.classes_, peer.share().classes):
        assert classes.dtype == oracle.dtype
        np.testing.assert_array_equal(classes, oracle)
    imported = Peer.from_fitted("q", RandomForestClassifier(n_estimators=3).fit(X, y), X, y)
    assert imported.classes_.dtype == imported.y_.dtype == np.float64


def test_a_peer_refuses_a_missing_nullable_label_by_its_row() -> None:
    X, y = _frame()
    y.iloc[5] = pd.NA
    with pytest.raises(ValueError, match=r"y holds a missing label \(row 5\); drop the row"):
        Peer("p", n_estimators=3).fit(X, y)


@pytest.mark.parametrize("name", ["model.csv", "model.CSV", "model.parquet", "model.pq"])
def test_train_refuses_a_data_file_name_for_the_model(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = _frame()
    data = tmp_path / "site.csv"
    X.assign(y=y.astype(int)).to_csv(data, index=False)
    out = tmp_path / name
    argv = ["train", "--client", f"a={data}", "--target", "y", "--trees", "2", "--out", str(out)]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--out {str(out)!r} ends in {Path(name).suffix}, a data file's suffix" in err
    assert "model.ffm" in err
    assert not out.exists()


class _NoRecovery(ff.Client):
    """A survivor lost in the recovery round (the node goes down while unmasking)."""

    def handle(self, msg: Message) -> Message:
        if msg.kind == RECOVER:
            raise RuntimeError("node lost")
        return super().handle(msg)


def test_a_failed_recovery_names_its_client_and_round_once() -> None:
    X, y, h = _data(n_clients=3, n_rows=600, d=4)
    clients = [
        _NoRecovery(X[h == 0], y[h == 0], "a"),
        _NoRecovery(X[h == 1], y[h == 1], "b"),
        # The second grid round, whose sums "dp" recovers ("secure" stops the fit there
        # since red team 18: tests/test_privacy_red18.py).
        _Dying(X[h == 2], y[h == 2], "c", at=2),
    ]
    model = ff.FedForestRegressor(
        n_estimators=2,
        max_depth=4,
        random_state=0,
        on_client_failure="drop",
        privacy="dp",
        epsilon=5.0,
    )
    with pytest.raises(ClientFailure) as info:
        model.fit_federated(ff.LocalFederation(clients))
    text = str(info.value)
    assert text.startswith("Client 'a' failed in round 3 (recover): RuntimeError: ")
    assert text.count("failed in round") == 1 and text.endswith("(also failed: 'b')")
    assert info.value.failed == ["a", "b"] and info.value.kind == RECOVER


def _ward(X: pd.DataFrame) -> pd.DataFrame:
    """A category of its own: one that bins a column (``b > 0``) is fitted as that column
    under "secure" (privacy/copies.py), which leaves no set split to explain."""
    north = np.random.default_rng(3).random(len(X)) < 0.5
    return X.assign(ward=np.where(north, "north", "south"))


def _forests() -> dict[str, ff.FedForestRegressor | ff.FedForestClassifier]:
    X, y = _frame(120)
    X = _ward(X)
    numeric, labels = X[["a", "b"]], y.astype(int).to_numpy()
    multi = np.c_[labels, (X["b"] > 0.5).astype(int)]
    kw = {"n_estimators": 4, "random_state": 0}
    return {
        "regressor": ff.FedForestRegressor(**kw).fit(numeric, X["a"] * 2.0),
        "classifier": ff.FedForestClassifier(**kw).fit(numeric, labels),
        "multi-output": ff.FedForestClassifier(**kw).fit(numeric, multi),
        "regressor, set splits": ff.FedForestRegressor(**kw).fit(
            X, X["a"] + (X["ward"] == "north")
        ),
        "classifier, set splits": ff.FedForestClassifier(**kw).fit(
            X, labels ^ (X["ward"] == "north")
        ),
    }


def test_shap_expected_value_is_the_explainer_s_and_the_values_add_up_from_it() -> None:
    shap = pytest.importorskip("shap")
    X = _ward(_frame(120)[0])
    for what, model in _forests().items():
        base = model.shap_expected_value_
        rows = X if "set" in what else X[["a", "b"]]
        if what == "multi-output":  # shap 0.51 divides a multi-output scikit-learn
            # classifier's values and base by the outputs (they add up to predict_proba / 2)
            explainer = model.shap_explainer()  # one output per class of every output
            np.testing.assert_array_equal(base, explainer.expected_value)
        elif "set" not in what:  # shap's own explainer of the same trees, from scikit-learn
            explainer = shap.TreeExplainer(model.to_sklearn())
            np.testing.assert_allclose(base, np.atleast_1d(explainer.expected_value), rtol=1e-12)
        else:
            assert model._has_set_splits(), what
        values = model.shap_values(rows)
        if isinstance(values, list):
            values = np.concatenate(values, axis=2)
            total = np.concatenate(model.predict_proba(rows), axis=1)
        else:
            total = model.predict_proba(rows) if hasattr(model, "classes_") else model.predict(rows)
        np.testing.assert_allclose(
            values.sum(axis=1) + (base if values.ndim == 3 else base[0]), total, atol=1e-12
        )
    with pytest.raises(AttributeError):  # NotFittedError, as feature_importances_
        getattr(ff.FedForestRegressor(), "shap_expected_value_")  # noqa: B009
