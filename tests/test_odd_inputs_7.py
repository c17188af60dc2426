"""Odd inputs, seventh round: the command's files, the swarm's paths, predict's categories.

Each test failed on m24 (8d107f9) but the pins at the end:

- ``load_bundles([..., a_directory], on_error=...)`` raised Python's ``IsADirectoryError``
  ("[Errno 21] Is a directory") after reading and warning of the files before it; a
  missing path likewise. docs/swarm.md says a missing file raises whatever ``on_error``
  (the caller's list, not a peer's file): both now raise, naming the path, before any
  file is read;
- ``fedforest predict/inspect/export`` of a model path that is not a file printed
  Python's "[Errno 2] No such file or directory" (or "[Errno 21]"), where a data file
  gets "'x' is not a file.";
- at predict, numbers in a text categorical column (a CSV of codes once given as text)
  or text in a column of numeric codes matched no level: every such row took the
  unseen-category rule, silently; a warning now names the column and the rows (once in
  ``fedforest predict`` of a classifier, whose probabilities would say it again), and so
  does ``SwarmForest.predict_proba`` for a site's numbers in a text column (unavailable);
- ``Peer(n_surrogates=np.int64(3))`` was refused ("must be an int >= 0"), where its other
  parameters, the estimators' and scikit-learn's take NumPy's integers; ``diagnose`` took
  ``max_depth=2.5`` (a tree of depth 3), ``min_samples_leaf=0`` and ``alpha=5`` silently;
- a file whose header repeats a name: a CSV's second ``a`` read as ``a.1`` (``train``
  blamed the other client's file for its columns, ``predict`` missed a column), a Parquet
  file's was pyarrow's text, left out as possibly quoting a value;
- a CSV whose rows have more fields than its header (a trailing comma on each row) was
  read with the first field as pandas' row index and the others under the header's names,
  shifted, silently;
- a target column empty in every row was "missing in some rows ... drop those rows";

and pins: a CSV with a UTF-8 byte-order mark reads its first column's name without it; a
header with ``a.1`` beside ``a`` (no repeat) is two columns; ``diagnose`` given NumPy's
numbers reports as given Python's (kept through its new checks).
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fedforest
from fedforest import FedForestClassifier, FedForestRegressor, diagnose
from fedforest.cli import main
from fedforest.datasets.files import read_client_data, read_table
from fedforest.swarm import Peer, SwarmForest, load_bundles


def _site(n: int = 60, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"age": rng.normal(50, 10, n), "bmi": rng.normal(27, 4, n)})
    return X, (X["age"] + rng.normal(0, 5, n) > 50).to_numpy(dtype=int)


@pytest.mark.parametrize("on_error", ["warn", "ignore", "raise"])
def test_load_bundles_raises_for_a_directory_or_missing_path_before_reading(
    tmp_path: Path, on_error: str
) -> None:
    X, y = _site()
    good = tmp_path / "a.ffb"
    Peer("A", 3, random_state=0).fit(X, y).share().save(good)
    broken = tmp_path / "b.ffb"
    broken.write_bytes(good.read_bytes()[:100])  # truncated: refused per on_error
    folder = tmp_path / "inbox"
    folder.mkdir()
    cases = [
        (folder, IsADirectoryError, "is a directory, not a bundle file"),
        (tmp_path / "nope.ffb", FileNotFoundError, "does not exist"),
    ]
    for path, kind, text in cases:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with pytest.raises(kind, match=text) as info:
                load_bundles([good, broken, path], on_error=on_error)
        assert repr(str(path)) in str(info.value)
        assert not seen  # raised before the truncated file was read (and warned of)
    if on_error == "ignore":  # a file's content, unlike a path, is what on_error covers
        assert [b.name for b in load_bundles([good, broken], on_error=on_error)] == ["A"]


@pytest.mark.filterwarnings("ignore:.*no out-of-bag prediction:UserWarning")  # 2 trees
def test_a_model_path_that_is_not_a_file_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = _site()
    data = tmp_path / "rows.csv"
    X.to_csv(data, index=False)
    for model in [tmp_path / "nope.ffm", tmp_path]:
        for argv in [
            ["predict", str(model), str(data), "--out", str(tmp_path / "p.csv")],
            ["inspect", str(model)],
            ["export", str(model), "--to", "onnx", "--out", str(tmp_path / "m.onnx")],
        ]:
            with pytest.raises(SystemExit) as exc:
                main(argv)
            err = capsys.readouterr().err
            assert exc.value.code == 2
            assert f"error: {str(model)!r} is not a file." in err and "Errno" not in err


def _text_codes(n: int = 120) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(3)
    X = pd.DataFrame({"a": rng.normal(size=n), "code": rng.choice(["1", "2", "3"], n)})
    return X, X["a"].to_numpy() + 2.0 * (X["code"] == "2").to_numpy()


def test_numbers_in_a_text_column_at_predict_warn_naming_it() -> None:
    X, y = _text_codes()
    model = FedForestRegressor(n_estimators=5, privacy="none", random_state=0).fit(X, y)
    as_numbers = X.assign(code=X["code"].astype(int))  # a CSV of the codes read back
    with pytest.warns(UserWarning, match=r"'code' \(numbers in 120 of 120 rows\)"):
        pred = model.predict(as_numbers)
    # Those rows took the unseen-category rule: as a level never seen in training.
    unseen = model.predict(X.assign(code="never seen"))
    np.testing.assert_array_equal(pred, unseen)
    assert not np.array_equal(pred, model.predict(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the levels' own kind: no warning
        model.predict(X)
        model.predict(X.assign(code=[None] * 60 + ["1"] * 60))  # missing is no kind


def test_text_in_a_column_of_numeric_codes_at_predict_warns_naming_it() -> None:
    X, y = _text_codes()
    arr = np.column_stack([X["a"], X["code"].astype(int)])
    model = FedForestClassifier(
        n_estimators=3, privacy="none", random_state=0, categorical_features=[1]
    ).fit(arr, y > 1)
    rows = arr.astype(object)
    rows[:10, 1] = [str(int(v)) for v in rows[:10, 1]]
    with pytest.warns(UserWarning, match=r"column\(s\) 1 \(text in 10 of 120 rows\)"):
        model.predict_proba(rows)


def test_predict_on_the_command_line_warns_once_of_codes_read_as_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = _text_codes()  # fitted in Python on text codes; read_csv gives them as numbers
    model = tmp_path / "model.ffm"
    FedForestClassifier(n_estimators=3, privacy="none", random_state=0).fit(X, y > 1).save(model)
    data = tmp_path / "rows.csv"
    X.to_csv(data, index=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["predict", str(model), str(data), "--out", str(tmp_path / "p.csv")]) == 0
    texts = [str(w.message) for w in seen if "'code' (numbers in 120 of 120" in str(w.message)]
    assert len(texts) == 1  # predict's, not predict_proba's again


def test_the_command_prints_that_warning_as_its_own_line(tmp_path: Path) -> None:
    """Through the real entry point (``python -m fedforest``): the warning reads
    ``fedforest: warning: <message>``; it printed as ``<frozen runpy>:88: UserWarning:
    <message>`` (the first frame outside fedforest, where ``warn_caller`` points)."""
    X, y = _text_codes()
    model = tmp_path / "model.ffm"
    FedForestClassifier(n_estimators=3, privacy="none", random_state=0).fit(X, y > 1).save(model)
    data = tmp_path / "rows.csv"
    X.to_csv(data, index=False)
    root = str(Path(fedforest.__file__).resolve().parents[1])  # this checkout's package
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "fedforest", "predict", str(model), str(data)]
        + ["--out", str(tmp_path / "p.csv")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "numbers in 120 of 120" in line]
    assert len(said) == 1, done.stderr
    assert said[0].startswith("fedforest: warning: categorical column(s) 'code' (numbers in")
    assert "runpy" not in done.stderr and "UserWarning" not in done.stderr, done.stderr


def test_a_site_s_numbers_in_a_text_column_warn_naming_it() -> None:
    X, _ = _text_codes()
    y = ((X["code"] == "2") ^ (X["a"] > 1)).to_numpy(dtype=int)
    swarm = SwarmForest([Peer(p, 5, random_state=k).fit(X, y).share() for k, p in enumerate("AB")])
    with pytest.warns(UserWarning, match=r"'code' \(120 of 120 rows\) of X_site hold numbers"):
        got = swarm.predict_proba(X.assign(code=X["code"].astype(int)), "ipr", random_state=0)
    # Unavailable, as a site without the column: the same probabilities.
    np.testing.assert_array_equal(got, swarm.predict_proba(X[["a"]], "ipr", random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        swarm.predict_proba(X, "ipr", random_state=0)


def test_peer_takes_numpy_integers_and_refuses_bools() -> None:
    X, y = _site()
    ref = Peer("A", 3, random_state=0, n_surrogates=2).fit(X, y).share()
    for n in [np.int64(2), np.int32(2), np.uint8(2)]:
        peer = Peer("A", np.int64(3), random_state=np.int64(0), n_surrogates=n)
        bundle = peer.fit(X, y).share()
        assert peer.n_surrogates == 2 and type(peer.n_surrogates) is int
        assert bundle.surr_feature.shape == ref.surr_feature.shape == (ref.class_counts.shape[0], 2)
        np.testing.assert_array_equal(bundle.surr_threshold, ref.surr_threshold)
    for bad in [True, np.True_, -1, 2.0]:
        with pytest.raises(ValueError, match="n_surrogates must be an int >= 0"):
            Peer("A", n_surrogates=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_depth": 2.5}, "max_depth"),  # grew a tree of depth 3 (8 cells, as 3)
        ({"max_depth": True}, "max_depth"),
        ({"min_samples_leaf": 0}, "min_samples_leaf"),  # ran as 1
        ({"alpha": 5}, "alpha"),
        ({"alpha": None}, "alpha"),
    ],
)
def test_diagnose_refuses_odd_sizes_naming_them(kwargs: dict[str, object], name: str) -> None:
    X, y = _text_codes()
    with pytest.raises(ValueError, match=f"The '{name}' parameter of diagnose must be"):
        diagnose(X[["a"]], y, np.arange(len(y)) % 2, privacy="none", **kwargs)  # type: ignore[arg-type]


def test_diagnose_takes_numpy_integers_as_ints() -> None:
    X, y = _text_codes()
    ids = np.arange(len(y)) % 2
    given = {"max_depth": 2, "min_samples_leaf": 3, "alpha": 0.1}
    ref = diagnose(X[["a"]], y, ids, privacy="none", **given)  # type: ignore[arg-type]
    numpy = {"max_depth": np.int64(2), "min_samples_leaf": np.int32(3), "alpha": np.float32(0.1)}
    report = diagnose(X[["a"]], y, ids, privacy="none", **numpy)  # type: ignore[arg-type]
    assert report.n_cells == ref.n_cells and report.feature_pvalues == ref.feature_pvalues
    assert report.outcome_heterogeneity_pvalue == ref.outcome_heterogeneity_pvalue


def _rows(n: int = 30) -> list[str]:
    rng = np.random.default_rng(4)
    return [",".join(f"{v:.3f}" for v in rng.normal(size=3)) for _ in range(n)]


def test_a_header_that_repeats_a_name_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = "\n".join(_rows()) + "\n"
    twice = tmp_path / "twice.csv"
    twice.write_text("a,a,y\n" + body)
    thrice = tmp_path / "thrice.csv"
    thrice.write_text("a,a.1,a,y\n" + "\n".join(r + ",1" for r in _rows()) + "\n")
    parquet = tmp_path / "twice.parquet"
    columns = [pa.array(np.arange(4.0)) for _ in range(3)]
    pq.write_table(pa.table(columns, names=["a", "a", "y"]), parquet)
    for path in [twice, thrice, parquet]:
        with pytest.raises(ValueError, match=r"has duplicate column names \['a'\]") as info:
            read_table(path)
        assert str(info.value).startswith(repr(str(path)))
    good = tmp_path / "good.csv"
    good.write_text("a,b,y\n" + body)
    with pytest.raises(SystemExit) as exc:  # blamed good.csv's columns: ['a.1', 'b']
        main(["train", "--client", f"x={twice}", "--client", f"z={good}", "--target", "y",
              "--out", str(tmp_path / "m.ffm")])  # fmt: skip
    assert exc.value.code == 2
    assert f"{str(twice)!r} has duplicate column names ['a']" in capsys.readouterr().err


def test_csv_rows_longer_than_the_header_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "trailing.csv"
    path.write_text("a,b,y\n" + "\n".join(r + "," for r in _rows()) + "\n")
    with pytest.raises(ValueError, match=r"rows have more fields than its header has names \(3\)"):
        read_table(path)  # was a, b, y = the 2nd, 3rd field and NaN: shifted, silently
    two = tmp_path / "two_more.csv"
    two.write_text("a,y\n" + "\n".join(_rows()) + "\n")
    with pytest.raises(ValueError, match=r"two_more.csv': its rows have more fields"):
        read_client_data(two, "y")
    index = tmp_path / "index.csv"  # no name for to_csv's index: its 0 .. n-1 dropped
    index.write_text("a,b,y\n" + "\n".join(f"{k},{r}" for k, r in enumerate(_rows())) + "\n")
    assert read_table(index).shape == (30, 3)


def test_a_target_empty_in_every_row_says_so(tmp_path: Path) -> None:
    path = tmp_path / "site.csv"
    path.write_text("a,b,y\n" + "\n".join(r.rsplit(",", 1)[0] + "," for r in _rows()) + "\n")
    with pytest.raises(ValueError, match=r"target column 'y' is empty \(missing in every row"):
        read_client_data(path, "y")


def test_pins_a_byte_order_mark_and_a_name_ending_in_a_number(tmp_path: Path) -> None:
    body = "\n".join(_rows()) + "\n"
    bom = tmp_path / "excel.csv"
    bom.write_bytes(("a,b,y\n" + body).encode("utf-8-sig"))  # Excel's "CSV UTF-8"
    assert list(read_table(bom).columns) == ["a", "b", "y"]
    dotted = tmp_path / "dotted.csv"
    dotted.write_text("a,a.1,y\n" + body)
    assert list(read_table(dotted).columns) == ["a", "a.1", "y"]
