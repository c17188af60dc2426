"""Odd inputs, fourteenth round.

Each test failed at the branch's start (9c32fea, main's 94850b5 and two commits):

- Flower's discovery named a SuperNode whose data its ClientApp refused twice: "SuperNode
  1002 left out, it did not answer: SuperNode 1002: '...' has no target column 'y'" (the
  ClientApp named its node, and the server again), and said it did not answer;
- ``fit_federated`` with ``class_weight={0: 1}`` (whole numbers) under ``"secure"`` drew
  other bootstraps than ``fit`` (which reads the weights as floats, as the digest now does);
- a ``class_weight`` dict naming a label no class has was refused ("not in y", "which no
  client has"), where scikit-learn ignores it when every class is named (and otherwise
  says "The classes, [1], are not in class_weight");
- a swarm ``Peer`` fitted bytes in an ``object`` y as labels, where the estimators and
  scikit-learn's forests raise "Unknown label type";
- ``fit``'s clients of a DataFrame of numbers named its columns by position in their
  warnings ("feature(s) ['1']" for 'bmi'), where ``fit_federated``'s name them.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

import fedforest as ff


@pytest.mark.parametrize("why", ["refused", "silent"])
def test_discovery_names_a_supernode_left_out_once(
    why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The real ClientApp through an in-memory Grid (tests/test_flower.py)."""
    pytest.importorskip("flwr")
    from flwr.supercore.task_identity import TaskIdentity

    from fedforest.transport.flower import FlowerFederation
    from tests.test_flower import MemoryGrid, write_site_files

    for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):  # a ServerApp's
        monkeypatch.setattr(TaskIdentity, name, value)
    paths = write_site_files(tmp_path)
    grid = MemoryGrid(paths)
    if why == "refused":
        paths["site-c"].write_text("age,bmi\n1,2\n")  # no target column
    else:
        grid.dead.add(1002)
    with caplog.at_level(logging.WARNING, logger="flwr"):
        fed = FlowerFederation(grid, min_nodes=2, discovery_timeout=0.2, poll_interval=0.001)
    assert fed.client_names == ["site-a", "site-b"]
    (text,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert text.count("SuperNode 1002") == 1, text
    if why == "refused":
        refusal = f"{str(paths['site-c'])!r} has no target column 'y'; its columns are"
        assert text.endswith(f"SuperNode 1002 left out: {refusal} ['age', 'bmi']."), text
    else:
        assert text.endswith("SuperNode 1002 left out: it did not answer (no reply within 0.2 s)")


# ------------------------------------------------------------------------ class_weight
def _classes(n: int = 300) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(14)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["age", "bmi", "dose"])
    y = (X["age"] + 0.5 * rng.normal(size=n) > 0).astype(int).to_numpy()
    return X, y, np.repeat(["a", "b", "c"], n // 3)


def _fit_both(params: dict[str, Any], X: pd.DataFrame, y: np.ndarray, ids: np.ndarray) -> Any:
    """The same forest by ``fit`` and by ``fit_federated`` on the same clients' rows."""
    by_fit = ff.FedForestClassifier(**params).fit(X, y, client_ids=ids)
    clients = [ff.Client(X[ids == c].reset_index(drop=True), y[ids == c], c) for c in "abc"]
    by_clients = ff.FedForestClassifier(**params).fit_federated(ff.LocalFederation(clients))
    return by_fit, by_clients


@pytest.mark.parametrize("class_weight", [{0: 1}, {0: 2, 1: 1}, {1: 3}])
def test_class_weight_of_whole_numbers_grows_fit_s_forest_in_fit_federated(
    class_weight: dict[int, int],
) -> None:
    X, y, ids = _classes()
    params = {"n_estimators": 3, "max_depth": 3, "random_state": 0, "class_weight": class_weight}
    by_fit, by_clients = _fit_both(params, X, y, ids)
    np.testing.assert_array_equal(by_fit.predict_proba(X), by_clients.predict_proba(X))
    # The same weights as floats were the same forest already.
    floats = {label: float(w) for label, w in class_weight.items()}
    _, as_floats = _fit_both({**params, "class_weight": floats}, X, y, ids)
    np.testing.assert_array_equal(as_floats.predict_proba(X), by_clients.predict_proba(X))


@pytest.mark.parametrize("privacy", ["secure", "none"])
def test_class_weight_naming_a_label_no_class_has_is_taken_as_scikit_learn(privacy: str) -> None:
    X, y, ids = _classes()
    params = {"n_estimators": 3, "max_depth": 3, "random_state": 0, "privacy": privacy}
    reference = RandomForestClassifier(n_estimators=3, random_state=0)
    # Every class named: the other label is ignored (scikit-learn fits).
    reference.set_params(class_weight={0: 1.0, 1: 2.0, 5: 3.0}).fit(X, y)
    plain = _fit_both({**params, "class_weight": {0: 1.0, 1: 2.0}}, X, y, ids)
    extra = _fit_both({**params, "class_weight": {0: 1.0, 1: 2.0, 5: 3.0, "x": 1.0}}, X, y, ids)
    for model, other in zip(plain, extra, strict=True):
        np.testing.assert_array_equal(model.predict_proba(X), other.predict_proba(X))
    # A class left out: scikit-learn's error, in fit and fit_federated.
    with pytest.raises(ValueError, match=re.escape("The classes, [1], are not in class_weight")):
        reference.set_params(class_weight={0: 1.0, 5: 3.0}).fit(X, y)
    for way in range(2):
        with pytest.raises(
            ValueError, match=re.escape("The classes, [1], are not in class_weight")
        ):
            _fit_both({**params, "class_weight": {0: 1.0, 5: 3.0}}, X, y, ids)[way]


def test_multi_output_class_weight_naming_other_labels_is_taken_as_scikit_learn() -> None:
    X, y, ids = _classes()
    Y = np.stack([y, (X["bmi"] > 0).astype(int).to_numpy()], axis=1)
    params = {"n_estimators": 3, "max_depth": 3, "random_state": 0, "privacy": "none"}
    reference = RandomForestClassifier(n_estimators=3, random_state=0)
    reference.set_params(class_weight=[{0: 1, 1: 2, 7: 1}, {0: 1, 1: 1}]).fit(X, Y)
    plain = ff.FedForestClassifier(class_weight=[{0: 1, 1: 2}, {0: 1, 1: 1}], **params)
    extra = ff.FedForestClassifier(class_weight=[{0: 1, 1: 2, 7: 1}, {0: 1, 1: 1}], **params)
    for a, b in zip(
        plain.fit(X, Y, client_ids=ids).predict_proba(X),
        extra.fit(X, Y, client_ids=ids).predict_proba(X),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------ a peer's bytes
@pytest.mark.parametrize("engine", ["sklearn", "fedforest"])
@pytest.mark.parametrize("wrap", [np.asarray, pd.Series])
def test_a_peer_refuses_bytes_in_an_object_y_as_the_estimators(engine: str, wrap: Any) -> None:
    from fedforest.swarm import Peer

    X, y, _ = _classes(200)
    labels = wrap(np.array([b"no", b"yes"], dtype=object)[y])
    scikit_learn = "Unknown label type: unknown"
    with pytest.raises(ValueError, match=scikit_learn):
        RandomForestClassifier(n_estimators=2).fit(X, labels)
    with pytest.raises(ValueError, match=scikit_learn):
        ff.FedForestClassifier(n_estimators=2, privacy="none").fit(X, labels)
    with pytest.raises(ValueError, match=scikit_learn):
        Peer("p", n_estimators=2, engine=engine).fit(X, labels)
    # NumPy bytes (dtype S) are labels for all three, as before.
    peer = Peer("p", n_estimators=2, engine=engine).fit(X, np.asarray(labels, dtype=bytes))
    assert peer.classes_.tolist() == [b"no", b"yes"]


# ------------------------------------------------------------- fit's clients name columns
def test_fit_s_clients_name_a_frame_s_columns_as_fit_federated_s() -> None:
    X, y, ids = _classes()
    X["bmi"] = 1e-300 * X["bmi"]  # the secure grids cannot resolve it: the clients warn
    params = {"n_estimators": 2, "max_depth": 2, "random_state": 0}
    with pytest.warns(UserWarning) as caught:
        ff.FedForestClassifier(**params).fit(X, y, client_ids=ids)
    texts = [str(w.message) for w in caught if "vary by less than" in str(w.message)]
    assert len(texts) == 3 and all("feature(s) ['bmi']" in t for t in texts), texts
