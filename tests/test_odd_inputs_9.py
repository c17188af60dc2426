"""Odd inputs, ninth round: warm refits, the command's Parquet decimals and binary files.

Each test failed on main at c5c7be9:

- ``fit`` under ``warm_start=True`` without more trees returned at once, its inputs unread:
  y of NaN, X of infinity, y of another length, sample weights of the wrong shape (or
  negative) and X of other columns were taken silently, where scikit-learn's forest
  refuses all but the last (its ``check_sample_weights_shape`` failed with
  ``warm_start=True``);
- ``fedforest train`` refused a Parquet file's DECIMAL target ("is not numeric (object);
  for class labels use --task classification") and weight column, which ``fit`` and a
  ``Client`` take as numbers, as scikit-learn does;
- a Parquet file, a gzip-compressed CSV or an Excel workbook given as ``.csv`` was "not
  utf-8 text", with the advice to read it as Latin-1;
- under ``privacy="secure"``, ``fit_federated`` on clients holding int, bool or Decimal
  regression targets grew another forest than ``fit`` on the same rows (the bootstrap
  secret read the targets' text: ``1`` where ``fit``'s clients hold ``1.0``);
- a ``;``-separated CSV with decimal commas (Excel's in much of Europe), a CSV under
  Excel's ``sep=,`` line and one under a title or comment line were each told of "a
  trailing comma on each row";
- a model file whose parameters include one this fedforest lacks (a newer version wrote
  it) loaded with that parameter dropped, silently: ``get_params`` and ``clone`` lost it.
"""

from __future__ import annotations

import decimal
import gzip
import io
import json
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.utils.estimator_checks import check_estimator

import fedforest
from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.cli import main

_N = 120


def _data(n: int = _N) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    return X, X[:, 0] + 0.1 * rng.normal(size=n)


_BAD_REFITS = {
    "y of NaN": lambda X, y: ((X, np.full_like(y, np.nan)), {}),
    "X of infinity": lambda X, y: ((np.full_like(X, np.inf), y), {}),
    "y of another length": lambda X, y: ((X, y[:50]), {}),
    "weights of another length": lambda X, y: ((X, y), {"sample_weight": np.ones(7)}),
    "weights of two columns": lambda X, y: ((X, y), {"sample_weight": np.ones((len(y), 2))}),
}
# fedforest's fit refuses negative weights (scikit-learn's forest takes them): so does a refit.
_REFUSED_BY_FIT = {"negative weights": lambda X, y: ((X, y), {"sample_weight": -np.ones(len(y))})}


@pytest.mark.parametrize("case", sorted(_BAD_REFITS) + sorted(_REFUSED_BY_FIT))
@pytest.mark.parametrize("privacy", ["secure", "none"])
def test_a_warm_refit_without_new_trees_checks_its_inputs_as_scikit_learn(
    case: str, privacy: str
) -> None:
    X, y = _data()
    args, kwargs = {**_BAD_REFITS, **_REFUSED_BY_FIT}[case](X, y)
    # The oracle: scikit-learn's warm forest refuses them, or fedforest's own fit does.
    oracle: Any = RandomForestRegressor(n_estimators=3, warm_start=True, random_state=0)
    if case in _REFUSED_BY_FIT:
        oracle = FedForestRegressor(n_estimators=3, privacy=privacy, random_state=0)
    oracle.fit(X, y)
    with pytest.raises(ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oracle.fit(*args, **kwargs)
    est = FedForestRegressor(n_estimators=3, warm_start=True, privacy=privacy, random_state=0)
    before = est.fit(X, y).predict(X)
    with pytest.raises(ValueError), pytest.warns(UserWarning, match="does not fit new trees"):
        est.fit(*args, **kwargs)
    np.testing.assert_array_equal(est.predict(X), before)  # the forest it had


def test_a_warm_refit_without_new_trees_refuses_other_columns() -> None:
    """scikit-learn takes them (and resets ``n_features_in_`` under its trees); fedforest
    refuses them as a warm fit that adds trees does, the forest kept."""
    X, y = _data()
    est = FedForestClassifier(n_estimators=3, warm_start=True, random_state=0)
    est.fit(X, y > 0)
    with pytest.raises(
        ValueError, match="X has 2 features, but FedForestClassifier is expecting 3"
    ):
        with pytest.warns(UserWarning, match="does not fit new trees"):
            est.fit(X[:, :2], y > 0)
    assert est.n_features_in_ == 3 and len(est.estimators_) == 3


def test_a_warm_refit_without_new_trees_on_good_inputs_changes_nothing() -> None:
    X, y = _data()
    est = FedForestRegressor(n_estimators=3, warm_start=True, random_state=0).fit(X, y)
    trees = [t.threshold.copy() for t in est.trees_]
    with pytest.warns(UserWarning, match="does not fit new trees"):
        assert est.fit(X, y, sample_weight=np.ones(_N), client_ids=np.arange(_N) % 2) is est
    assert all(np.array_equal(a, t.threshold) for a, t in zip(trees, est.trees_, strict=True))


def _decimals(values: Any) -> list[decimal.Decimal]:
    return [decimal.Decimal(f"{v:.4f}") for v in values]


@pytest.mark.parametrize("privacy", ["none", "secure"])
def test_a_parquet_decimal_target_and_weight_train_as_their_floats(
    privacy: str, tmp_path: Path
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    X, y = _data()
    weight = np.random.default_rng(1).uniform(0.5, 2.0, _N)
    paths = {}
    for kind in ("decimal", "float"):
        for k, rows in enumerate((slice(0, 60), slice(60, None))):
            columns: dict[str, Any] = {f"x{j}": X[rows, j] for j in range(3)}
            target, w = _decimals(y[rows]), _decimals(weight[rows])
            if kind == "decimal":  # a database's DECIMAL(10, 4), as pandas reads it: objects
                target = pa.array(target, pa.decimal128(10, 4))
                w = pa.array(w, pa.decimal128(10, 4))
            else:
                target, w = np.array(target, dtype=float), np.array(w, dtype=float)
            columns.update(y=target, w=w)
            paths[kind, k] = tmp_path / f"{kind}_{k}.parquet"
            pq.write_table(pa.table(columns), paths[kind, k])
    assert pd.read_parquet(paths["decimal", 0])["y"].dtype == object
    models = {}
    for kind in ("decimal", "float"):
        models[kind] = tmp_path / f"{kind}.ffm"
        argv = ["train", f"--client=a={paths[kind, 0]}", f"--client=b={paths[kind, 1]}"]
        argv += ["--target", "y", "--weight", "w", "--trees", "20", "--max-depth", "3"]
        argv += ["--privacy", privacy, "--out", str(models[kind])]
        assert main(argv) == 0
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"])
    got = fedforest.load(models["decimal"]).predict(frame)
    np.testing.assert_array_equal(got, fedforest.load(models["float"]).predict(frame))


def _parquet(path: Path) -> None:
    pd.DataFrame({"a": [1.0, 2.0], "y": [0.5, 1.5]}).to_parquet(path)


def _gzip(path: Path) -> None:
    path.write_bytes(gzip.compress(b"a,y\n1.0,0.5\n2.0,1.5\n"))


_BINARY = {
    "Parquet": (_parquet, "it is a Parquet file; name it .parquet (or .pq)"),
    "gzip": (_gzip, "it is gzip-compressed; decompress it first (gunzip)"),
    # The first bytes of an .xlsx (a ZIP archive) and of an .xls (an OLE2 file).
    "xlsx": (
        lambda path: path.write_bytes(b"PK\x03\x04\x14\x00\x06\x00" + bytes(range(256))),
        "it is a ZIP archive (an Excel .xlsx workbook?); save the sheet as CSV or Parquet",
    ),
    "xls": (
        lambda path: path.write_bytes(bytes.fromhex("d0cf11e0a1b11ae1") + bytes(range(256))),
        "it is an Excel 97-2003 workbook (.xls); save the sheet as CSV or Parquet",
    ),
}


@pytest.mark.parametrize("kind", sorted(_BINARY))
@pytest.mark.parametrize("command", ["train", "predict"])
def test_a_binary_file_given_as_csv_says_what_it_is(
    kind: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write, text = _BINARY[kind]
    path = tmp_path / "site.csv"
    write(path)
    model = tmp_path / "m.ffm"
    FedForestRegressor(n_estimators=2, privacy="none").fit(*_data(60)).save(model)
    if command == "train":
        argv = ["train", f"--client=a={path}", "--target", "y", "--out", str(tmp_path / "o.ffm")]
    else:
        argv = ["predict", str(model), str(path), "--out", str(tmp_path / "p.csv")]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{str(path)!r} cannot be read as CSV: {text}" in err
    assert "latin-1" not in err


@pytest.mark.parametrize("kind", ["Parquet", "gzip"])
def test_the_advice_for_a_binary_file_reads_it(kind: str, tmp_path: Path) -> None:
    write, _ = _BINARY[kind]
    path = tmp_path / "site.csv"
    write(path)
    if kind == "Parquet":
        fixed = path.rename(tmp_path / "site.parquet")
    else:
        fixed = tmp_path / "plain.csv"
        fixed.write_bytes(gzip.decompress(path.read_bytes()))
    frame = fedforest.datasets.files.read_table(fixed)
    pd.testing.assert_frame_equal(frame, pd.DataFrame({"a": [1.0, 2.0], "y": [0.5, 1.5]}))


_TARGETS = {
    "int": lambda y: np.rint(3 * y).astype(np.int64),
    "bool": lambda y: y > 0,
    "Decimal": lambda y: np.array(_decimals(y), dtype=object),
    "object floats": lambda y: y.astype(object),
}


@pytest.mark.parametrize("kind", sorted(_TARGETS))
@pytest.mark.parametrize("privacy", ["secure", "none"])
def test_fit_federated_on_regression_targets_of_any_number_type_is_fit(
    kind: str, privacy: str
) -> None:
    X, y = _data(200)
    target = _TARGETS[kind](y)
    ids = np.arange(200) % 2
    est = FedForestRegressor(n_estimators=5, privacy=privacy, random_state=0)
    fitted = est.fit(X, target, client_ids=ids).predict(X)
    clients = [fedforest.Client(X[ids == k], target[ids == k], name=str(k)) for k in (0, 1)]
    federated = est.fit_federated(clients).predict(X)
    np.testing.assert_array_equal(federated, fitted)


def _site() -> pd.DataFrame:
    X, y = _data(60)
    return pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": y})


# A first line that is no header, and what the refusal says of it (the rows are longer
# than that line: they were told of a trailing comma on each row).
_LONGER = {
    "decimal commas": (
        lambda f: f.to_csv(index=False, sep=";", decimal=","),
        "the file looks ';'-separated",
        "Its numbers have decimal commas ('0,5'): add decimal=','.",
    ),
    "Excel's sep line": (
        lambda f: "sep=,\n" + f.to_csv(index=False),
        "Its first line is Excel's separator line ('sep=...'): drop it",
        "pandas.read_csv(path, skiprows=1)",
    ),
    "a comment line": (
        lambda f: "# site A, exported 2026-12-01\n" + f.to_csv(index=False),
        "Is its first line a title or a comment? Drop it",
        "pandas.read_csv(path, skiprows=1)",
    ),
    "a title line": (
        lambda f: "Site A export\n" + f.to_csv(index=False),
        "Is its first line a title or a comment? Drop it",
        "pandas.read_csv(path, skiprows=1)",
    ),
}


@pytest.mark.parametrize("case", sorted(_LONGER))
def test_rows_longer_than_a_header_that_is_none_say_why(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write, why, fix = _LONGER[case]
    frame = _site()
    path = tmp_path / "site.csv"
    path.write_text(write(frame))
    argv = ["train", f"--client=a={path}", "--target", "y", "--out", str(tmp_path / "m.ffm")]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "its rows have more fields than its header" in err
    assert why in err and fix in err and "trailing comma" not in err
    # The advice read it as the frame it was.
    advised = {"sep": ";", "decimal": ","} if case == "decimal commas" else {"skiprows": 1}
    pd.testing.assert_frame_equal(pd.read_csv(path, **advised), frame)


def _with_params(path: Path, out: Path, **params: Any) -> None:
    """``path``'s model file with ``params`` added to its header's parameters."""
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "__header__.npy":
                with zin.open(item.filename) as f:
                    meta = json.loads(np.lib.format.read_array(f, allow_pickle=False).tobytes())
                meta["header"]["params"].update(params)
                buf = io.BytesIO()
                np.save(buf, np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
                data = buf.getvalue()
            zout.writestr(item.filename, data)


@pytest.mark.parametrize("cls", [FedForestRegressor, FedForestClassifier])
def test_a_model_file_with_a_parameter_this_version_lacks_is_refused(
    cls: Any, tmp_path: Path
) -> None:
    X, y = _data()
    path = tmp_path / "m.ffm"
    cls(n_estimators=2, random_state=0).fit(X, y > 0).save(path)
    same, newer = tmp_path / "same.ffm", tmp_path / "newer.ffm"
    _with_params(path, same, n_estimators=2)  # the control: rewritten, nothing new
    assert fedforest.load(same).get_params() == fedforest.load(path).get_params()
    _with_params(path, newer, max_bins_per_node=64)
    with pytest.raises(ValueError) as info:
        fedforest.load(newer)
    text = str(info.value)
    assert str(newer) in text and "['max_bins_per_node']" in text
    assert "Upgrade fedforest to load it." in text


_WEIGHTS = "sample_weight is not equivalent to removing/repeating samples (the bootstrap)."
_EXPECTED = {  # as tests/test_forest.py's, with the reason
    "check_sample_weight_equivalence_on_dense_data": _WEIGHTS,
    "check_sample_weight_equivalence_on_sparse_data": _WEIGHTS,
}
# Settings scikit-learn's checks had not run on (tests/test_forest.py runs the defaults under
# "secure" and "none"). warm_start=True failed check_sample_weights_shape: a refit without
# more trees took sample weights of the wrong shape.
_SETTINGS = {
    "warm_start": lambda: FedForestRegressor(warm_start=True),
    "warm_start, none": lambda: FedForestClassifier(warm_start=True, privacy="none"),
    "balanced_subsample": lambda: FedForestClassifier(class_weight="balanced_subsample"),
    "global binning": lambda: FedForestRegressor(privacy="none", binning="global"),
    "ccp_alpha, oob_score": lambda: FedForestClassifier(ccp_alpha=0.01, oob_score=True),
    "avgimp, top_l": lambda: FedForestRegressor(privacy="none", split_rule="avgimp", top_l=1),
}


@pytest.mark.parametrize("setting", sorted(_SETTINGS))
def test_scikit_learns_checks_pass_on_more_settings(setting: str) -> None:
    est = _SETTINGS[setting]().set_params(n_estimators=10, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, on_fail=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    assert failed <= set(_EXPECTED), failed
