"""Odd inputs, fourth round (docs/sklearn.md, "Inputs a user brings").

Each test failed on dbbb0e1:

- a DataFrame column of pyarrow booleans (``bool[pyarrow]``, what ``read_parquet`` or
  ``read_csv`` with ``dtype_backend="pyarrow"`` give) was refused as not numeric in
  ``fit``, ``predict`` and a ``Client``, where ``bool`` and ``boolean`` columns are read as
  0/1 and scikit-learn reads it so;
- ``predict(X, client_ids=...)`` of a forest split on the client looked clients up by
  their text, so client 1 given as ``1.0`` (a pandas column of ids turned float) was an
  unknown client and its rows got the marginal rule, silently, where ``fit`` takes 1 and
  1.0 as one client;
- a ``Client`` whose DataFrame column held only missing values as objects (None,
  ``pd.NA``, ``pd.NaT``: a site that never recorded a measurement) or as pyarrow's null
  type was refused, "column 'e' has dtype object", where ``fit`` reads that frame's
  column as NaN (scikit-learn does too, for None);
- the Flower ServerApp's run config took ``min-nodes = 2.5`` as 2 and ``true`` as 1,
  a NaN ``round-timeout`` and a negative or NaN ``discovery-timeout`` without a word, and
  answered ``discovery-timeout = "none"`` or ``min-nodes = "three"`` with Python's
  ``TypeError`` / ``ValueError`` naming no key (docs/flower.md);
- ``fedforest export --out`` in a directory that does not exist, or naming a directory,
  ended in a traceback (``FileNotFoundError``, ``IsADirectoryError``, Treelite's
  ``TreeliteError``) where ``train`` and ``predict`` give a usage error naming the path;
  ``--to shap`` without ``--data`` was told "--data goes with --to shap, and only with it";
  ``fedforest simulate --out`` naming a directory ran the whole simulation, then failed
  with ``IsADirectoryError``; ``fedforest experiment NAME --out`` naming a file (or a path
  below one) ran the experiment, then failed with ``FileExistsError``;
- ``fedforest predict`` of a forest that splits on the client (``split_on_client``, from
  Python or Flower) predicted every row by the marginal rule, without a word and with no
  way to name the rows' client; ``--client NAME`` now routes them as that client's;
- ``warm_start`` on a forest split on the client, refitted with other clients (one gone,
  one renamed), kept the earlier trees' client splits, which hold clients by position, and
  replaced ``clients_``: the earlier trees routed one client's rows as another's, silently;
- a CSV saved as Latin-1 / Windows-1252 or UTF-16 (Excel's "Unicode text") was "cannot
  be read as CSV: not utf-8 text", without saying what fedforest reads or how to convert;

and one pin (a limit shared with scikit-learn, stated in docs/sklearn.md): targets whose
variance is at most scikit-learn's EPSILON (2.2e-16: y of standard deviation near 1e-8)
grow single-leaf trees, as scikit-learn's forest does (its issue #14838).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

from fedforest import Client, FedForestClassifier, FedForestRegressor
from fedforest.cli import main

PRIVACY = ["secure", "none"]


def _frame(n: int = 120, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    flag = rng.random(n) < 0.5
    X = pd.DataFrame({"a": rng.normal(size=n), "flag": flag})
    return X, X["a"].to_numpy() + 2.0 * flag


def _kw(privacy: str, **extra: Any) -> dict[str, Any]:
    return dict(n_estimators=3, max_depth=3, random_state=0, privacy=privacy, **extra)


# ------------------------------------------------------------------ pyarrow booleans
@pytest.mark.parametrize("privacy", PRIVACY)
def test_a_pyarrow_boolean_column_is_read_as_the_nullable_boolean_column(privacy: str) -> None:
    pytest.importorskip("pyarrow")
    X, y = _frame()
    flags = X["flag"].astype(object).where(np.arange(len(X)) % 7 != 0, None)  # some missing
    nullable = X.assign(flag=flags.astype("boolean"))
    arrow = X.assign(flag=flags.astype("bool[pyarrow]"))
    # The oracle: the same column as pandas' nullable booleans, which fedforest reads as
    # 0/1 with NaN (as scikit-learn reads both).
    expected = FedForestRegressor(**_kw(privacy)).fit(nullable, y)
    model = FedForestRegressor(**_kw(privacy)).fit(arrow, y)  # refused: "has dtype bool[pyarrow]"
    np.testing.assert_array_equal(model.predict(arrow), expected.predict(nullable))
    np.testing.assert_array_equal(model.predict(nullable), expected.predict(nullable))
    assert model.feature_importances_[1] > 0  # the flag (a shift of 2 in y) is split on
    clients = [Client(arrow.iloc[:60], y[:60], "a"), Client(arrow.iloc[60:], y[60:], "b")]
    federated = FedForestRegressor(**_kw(privacy)).fit_federated(clients)
    reference = [Client(nullable.iloc[:60], y[:60], "a"), Client(nullable.iloc[60:], y[60:], "b")]
    np.testing.assert_array_equal(
        federated.predict(arrow),
        FedForestRegressor(**_kw(privacy)).fit_federated(reference).predict(nullable),
    )
    # A model fitted on plain booleans predicts pyarrow ones as those.
    plain = FedForestClassifier(**_kw(privacy)).fit(X, y > 1)
    np.testing.assert_array_equal(
        plain.predict_proba(X.assign(flag=X["flag"].astype("bool[pyarrow]"))),
        plain.predict_proba(X),
    )


# ------------------------------------------------------------------ client labels at predict
@pytest.mark.parametrize("fit_type, predict_type", [(int, float), (float, int)])
def test_a_client_label_given_as_the_same_number_of_another_type_is_that_client(
    fit_type: type, predict_type: type
) -> None:
    X, y = _frame(300)
    h = np.arange(300) % 3
    y = y + 3.0 * h  # an outcome shift by client: the forest splits on H
    model = FedForestRegressor(**_kw("none", split_on_client=True)).fit(
        X, y, client_ids=h.astype(fit_type)
    )
    assert model.client_importance_ > 0
    expected = model.predict(X, client_ids=h.astype(fit_type))
    as_other = pd.Series(h.astype(predict_type))  # e.g. a column of ids after a merge
    np.testing.assert_array_equal(model.predict(X, client_ids=as_other), expected)
    assert model.score(X, y, client_ids=as_other) == model.score(X, y, client_ids=h)
    # A client the forest has not seen still gets the marginal rule, as no client at all.
    unknown = np.full(300, 7, dtype=predict_type)
    np.testing.assert_array_equal(model.predict(X, client_ids=unknown), model.predict(X))
    assert not np.array_equal(model.predict(X), expected)  # the rule differs from routing


# ------------------------------------------------------------------ a column of missing values
@pytest.mark.parametrize("missing", [None, pd.NA, pd.NaT, "null[pyarrow]"])
@pytest.mark.parametrize("privacy", PRIVACY)
def test_a_clients_object_column_of_missing_values_is_read_as_nan(
    missing: Any, privacy: str
) -> None:
    if isinstance(missing, str):
        pytest.importorskip("pyarrow")
    X, y = _frame(160)
    X = X.assign(e=np.where(np.arange(160) % 2 == 0, 1.0, 3.0))
    y = y + X["e"].to_numpy()
    # pyarrow's null type: an all-null Parquet column read with dtype_backend="pyarrow".
    dtype = missing if isinstance(missing, str) else object
    cells = [None if isinstance(missing, str) else missing] * 80
    unrecorded = X.iloc[:80].assign(e=pd.Series(cells, dtype=dtype, index=X.index[:80]))
    as_nan = X.iloc[:80].assign(e=np.nan)  # the oracle: the same column as float NaN
    kw = _kw(privacy)
    model = FedForestRegressor(**kw).fit_federated(
        [Client(unrecorded, y[:80], "a"), Client(X.iloc[80:], y[80:], "b")]
    )  # refused: "Client 'a': column 'e' has dtype object"
    expected = FedForestRegressor(**kw).fit_federated(
        [Client(as_nan, y[:80], "a"), Client(X.iloc[80:], y[80:], "b")]
    )
    np.testing.assert_array_equal(model.predict(X), expected.predict(X))
    np.testing.assert_array_equal(model.predict(unrecorded), expected.predict(as_nan))
    # fit reads the client's own frame so too, and the pooled frame's column (None or
    # pd.NA among the numbers; NaT among numbers is "mixed" to pandas, refused by fit as
    # by scikit-learn, and a pyarrow null column does not concatenate with floats).
    alone = FedForestRegressor(**_kw("none")).fit(unrecorded, y[:80])
    nan_alone = FedForestRegressor(**_kw("none")).fit(as_nan, y[:80])
    np.testing.assert_array_equal(alone.predict(unrecorded), nan_alone.predict(as_nan))
    if missing is not None and missing is not pd.NA:
        return
    pooled = pd.concat([unrecorded, X.iloc[80:]])
    fitted = FedForestRegressor(**kw).fit(pooled, y)
    np.testing.assert_array_equal(
        fitted.predict(pooled),
        FedForestRegressor(**kw).fit(pd.concat([as_nan, X.iloc[80:]]), y).predict(pooled),
    )


# ------------------------------------------------------------------ Flower run config
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("min-nodes", 2.5),  # was 2
        ("min-nodes", True),  # was 1
        ("min-nodes", "three"),  # was "invalid literal for int() with base 10"
        ("min-nodes", 0),  # refused later, as FlowerFederation's min_nodes
        ("round-timeout", float("nan")),  # was taken
        ("round-timeout", -5),  # refused later, as FlowerFederation's round_timeout
        ("round-timeout", "soon"),  # was "could not convert string to float"
        ("discovery-timeout", "none"),  # was a TypeError from float(None)
        ("discovery-timeout", -1.0),  # was taken
        ("discovery-timeout", float("inf")),  # was taken: a wait without end
    ],
)
def test_the_run_configs_transport_keys_are_checked_naming_the_key(
    key: str, value: Any, tmp_path: Any
) -> None:
    pytest.importorskip("flwr")
    from fedforest.transport.flower.serverapp import RunSettings

    config = {"model-path": str(tmp_path / "m.ffm"), key: value}
    with pytest.raises(ValueError, match=f"run config {key}={value!r}: expected "):
        RunSettings.from_run_config(config)


def test_the_run_configs_good_transport_values_are_kept(tmp_path: Any) -> None:
    pytest.importorskip("flwr")
    from fedforest.transport.flower.serverapp import RunSettings

    settings = RunSettings.from_run_config(
        {
            "model-path": str(tmp_path / "m.ffm"),
            "min-nodes": 3,
            "round-timeout": "none",
            "discovery-timeout": 90,
        }
    )
    assert (settings.min_nodes, settings.round_timeout, settings.discovery_timeout) == (3, None, 90)
    assert isinstance(settings.discovery_timeout, float)


# ------------------------------------------------------------------ fedforest export --out
@pytest.mark.parametrize("to", ["onnx", "treelite", "shap"])
@pytest.mark.parametrize("where", ["a missing directory", "a directory"])
def test_export_out_where_no_file_can_be_written_is_a_usage_error(
    to: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("treelite")
    pytest.importorskip("skl2onnx")
    pytest.importorskip("shap")
    X, y = _frame(60)
    model_path = tmp_path / "m.ffm"
    FedForestRegressor(**_kw("none")).fit(X, y).save(model_path)
    data = tmp_path / "rows.csv"
    X.to_csv(data, index=False)
    out = tmp_path / "nowhere" / "x.out" if where == "a missing directory" else tmp_path
    argv = ["export", str(model_path), "--to", to, "--out", str(out)]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--data", str(data)] if to == "shap" else argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--out {str(out)!r}" in err and "Traceback" not in err
    assert "does not exist" in err if where == "a missing directory" else "is a directory" in err
    assert (
        main(
            [*argv[:-1], str(tmp_path / "x.out")] + (["--data", str(data)] if to == "shap" else [])
        )
        == 0
    )


def test_export_to_shap_without_data_says_it_needs_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = _frame(60)
    model_path = tmp_path / "m.ffm"
    FedForestRegressor(**_kw("none")).fit(X, y).save(model_path)
    with pytest.raises(SystemExit) as exc:
        main(["export", str(model_path), "--to", "shap", "--out", str(tmp_path / "s.csv")])
    assert exc.value.code == 2
    assert "--to shap needs --data" in capsys.readouterr().err


# ------------------------------------------------------------------ pin: tiny targets
@pytest.mark.parametrize("privacy", PRIVACY)
def test_targets_varying_less_than_epsilon_grow_leaves_as_scikit_learns(privacy: str) -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(400, 3))
    y = X[:, 0] + 0.05 * rng.normal(size=400)  # variance about 0.34
    for scale, splits in [(1e-7, True), (1e-8, False)]:  # variance 3.4e-15, 3.4e-17
        kw = dict(n_estimators=5, max_depth=4, random_state=0)
        ours = FedForestRegressor(privacy=privacy, **kw).fit(X, y * scale)
        theirs = RandomForestRegressor(**kw).fit(X, y * scale)
        assert all((t.node_count > 1) == splits for t in ours.trees_)
        assert all((t.tree_.node_count > 1) == splits for t in theirs.estimators_)


# ------------------------------------------------------------------ fedforest predict --client
def test_predict_names_the_rows_client_for_a_forest_split_on_the_client(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = _frame(300)
    h = np.array(["north", "south", "west"])[np.arange(300) % 3]
    y = y + 3.0 * (np.arange(300) % 3)  # an outcome shift by client
    model = FedForestRegressor(**_kw("none", split_on_client=True)).fit(X, y, client_ids=h)
    assert model.client_importance_ > 0.5
    path, data, out = tmp_path / "m.ffm", tmp_path / "rows.csv", tmp_path / "p.csv"
    model.save(path)
    X.to_csv(data, index=False)
    argv = ["predict", str(path), str(data), "--out", str(out)]
    assert main([*argv, "--client", "west"]) == 0
    expected = model.predict(X, client_ids=["west"] * 300)
    np.testing.assert_allclose(pd.read_csv(out)["prediction"], expected, rtol=1e-15)
    assert "marginal" not in capsys.readouterr().err
    assert main(argv) == 0  # no client: the marginal rule, as predict(X), and a note says so
    np.testing.assert_allclose(pd.read_csv(out)["prediction"], model.predict(X), rtol=1e-15)
    assert "predicted by the marginal rule. Give --client NAME" in capsys.readouterr().err
    assert not np.allclose(expected, model.predict(X))
    with pytest.raises(SystemExit) as exc:  # a typo would have been the marginal rule
        main([*argv, "--client", "East"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--client 'East' is not one of the model's clients: ['north', 'south', 'west']" in err
    # A classifier's probabilities follow the same rows.
    labels = np.where(y > np.median(y), "high", "low")
    clf = FedForestClassifier(**_kw("none", split_on_client=True)).fit(X, labels, client_ids=h)
    clf.save(path)
    assert main([*argv, "--client", "north"]) == 0
    proba = clf.predict_proba(X, client_ids=["north"] * 300)
    np.testing.assert_allclose(pd.read_csv(out)["proba_high"], proba[:, 0], rtol=1e-15)


# ------------------------------------------------------------------ warm start and clients
@pytest.mark.parametrize("federated", [False, True])
def test_warm_start_on_a_forest_split_on_the_client_needs_the_same_clients(
    federated: bool,
) -> None:
    X, y = _frame(450)
    h = np.array(["a", "b", "c"])[np.arange(450) % 3]
    y = y + 3.0 * (np.arange(450) % 3)
    kw = _kw("none", split_on_client=True, warm_start=True)  # "none" only

    def fit(model: FedForestRegressor, rows: Any, ids: Any) -> FedForestRegressor:
        if not federated:
            return model.fit(X[rows], y[rows], client_ids=ids[rows])
        names = sorted(set(ids[rows]))
        clients = [Client(X[rows & (ids == k)], y[rows & (ids == k)], k) for k in names]
        return model.fit_federated(clients)

    every = np.ones(450, dtype=bool)
    model = fit(FedForestRegressor(**kw), every, h)
    assert any((t.feature == 2).any() for t in model.trees_)  # the earlier trees split on H
    before = model.predict(X, client_ids=h)
    renamed = np.array(["b", "c", "d"])[np.arange(450) % 3]  # 'a' gone, 'd' new
    for rows, ids in [(h != "a", h), (every, renamed)]:
        with pytest.raises(ValueError, match=r"clients \['a', 'b', 'c'\] then \["):
            fit(model.set_params(n_estimators=6), rows, ids)
        assert len(model.trees_) == 3  # the estimator keeps its forest
        np.testing.assert_array_equal(model.predict(X, client_ids=h), before)
    # The same clients add trees as before.
    assert len(fit(model.set_params(n_estimators=6), every, h).trees_) == 6


# ------------------------------------------------------------------ CSV encodings
@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_a_csv_not_in_utf8_says_how_to_convert_it(
    encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = _frame(60)
    frame = X.assign(ward=np.where(X["flag"], "néuro", "cardio"), y=y)
    path, other = tmp_path / "site.csv", tmp_path / "site_b.csv"  # a file per client
    frame.to_csv(path, index=False, encoding=encoding)
    frame.to_csv(other, index=False)
    out = tmp_path / "m.ffm"
    argv = ["train", f"--client=a={path}", f"--client=b={other}", "--target", "y"]
    argv += ["--trees", "20", "--max-depth", "2", "--privacy", "none", "--out", str(out)]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{str(path)!r} cannot be read as CSV: not utf-8 text" in err
    assert "fedforest reads UTF-8" in err and "néuro" not in err  # the hint quotes no value
    if encoding == "utf-16":
        assert "UTF-16 byte-order mark" in err
    # The conversion the hint gives reads the file as the frame it was.
    hinted = "utf-16" if encoding == "utf-16" else "latin-1"
    back = pd.read_csv(path, encoding=hinted)
    pd.testing.assert_frame_equal(back, frame)
    back.to_csv(path, index=False)
    assert main(argv) == 0


def test_simulate_out_naming_a_directory_is_refused_before_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert f"argument --out: {str(tmp_path)!r} is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["fedheart", "swarm-overlap"])
@pytest.mark.parametrize("below", [False, True])
def test_experiment_out_naming_a_file_is_refused_before_it_runs(
    name: str, below: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "results"
    afile.write_text("not a directory")
    out = afile / "sub" if below else afile
    with pytest.raises(SystemExit) as exc:
        main(["experiment", name, "--reps", "1", "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --out: cannot write in {str(out)!r}" in err and "give a directory" in err
