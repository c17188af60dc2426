"""A newcomer's mistakes on the command line (session 24), each said with its fix.

Each test failed before its change: the text then left the user to guess (a misspelt
column listed among the others, a header line missing, an option misspelt under the
top-level usage, a data file given as the model, one stray word in a column of numbers).
"""

import warnings

import numpy as np
import pandas as pd
import pytest

from fedforest.cli import main

# Forests of 2 trees: rows drawn by both have no out-of-bag prediction (a warning).
pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")


def _sites(tmp_path, n_sites: int = 2, n: int = 60) -> list:
    rng = np.random.default_rng(24)
    paths = []
    for k in range(n_sites):
        frame = pd.DataFrame(
            {
                "age": rng.normal(60, 10, n).round(),
                "ward": rng.choice(["cardio", "neuro"], n),
                "dose": rng.normal(size=n),
            }
        )
        frame["y"] = 0.05 * frame["age"] + (frame["ward"] == "neuro") + rng.normal(0, 0.1, n)
        paths.append(tmp_path / f"site_{k}.csv")
        frame.to_csv(paths[-1], index=False)
    return paths


def _train_argv(tmp_path, paths, *options: str) -> list:
    argv = ["train", "--trees", "2", "--out", str(tmp_path / "m.ffm"), *options]
    for k, path in enumerate(paths):
        argv += ["--client", f"s{k}={path}"]
    return argv


def _usage_error(argv, capsys) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


def test_a_misspelt_target_or_weight_column_names_the_close_one(tmp_path, capsys) -> None:
    paths = _sites(tmp_path)
    err = _usage_error(_train_argv(tmp_path, paths, "--target", "Y"), capsys)
    assert "has no target column 'Y'" in err and "Did you mean 'y'?" in err
    err = _usage_error(_train_argv(tmp_path, paths, "--target", "y", "--weight", "doses"), capsys)
    assert "has no weight column 'doses'" in err and "Did you mean 'dose'?" in err
    # No column near the name: no guess.
    err = _usage_error(_train_argv(tmp_path, paths, "--target", "outcome"), capsys)
    assert "has no target column 'outcome'" in err and "Did you mean" not in err


def test_a_csv_without_its_header_line_is_said_so(tmp_path, capsys) -> None:
    paths = _sites(tmp_path)
    frame = pd.read_csv(paths[1])
    frame.to_csv(paths[1], index=False, header=False)  # the first row's values as names
    err = _usage_error(_train_argv(tmp_path, paths, "--target", "y"), capsys)
    assert "site_1.csv' has no target column 'y'" in err
    assert "the file seems to lack its header line" in err
    # Its "column names" are its first row: the text (which a SuperNode sends to the
    # server) lists none of them; nor for a ';'-separated file without its header.
    first = [str(v) for v in pd.read_csv(paths[1], header=None).iloc[0]]
    assert not [v for v in first if v in err], err
    frame.to_csv(paths[1], index=False, header=False, sep=";")
    err = _usage_error(_train_argv(tmp_path, paths, "--target", "y"), capsys)
    assert "';'-separated" in err and "seems to lack its header line" in err
    assert not [v for v in first if v in err], err
    # predict likewise, on a model trained on the files with their headers
    frame.to_csv(paths[1], index=False)
    assert main(_train_argv(tmp_path, paths, "--target", "y")) == 0
    frame.to_csv(tmp_path / "rows.csv", index=False, header=False)
    argv = ["predict", str(tmp_path / "m.ffm"), str(tmp_path / "rows.csv")]
    err = _usage_error([*argv, "--out", str(tmp_path / "p.csv")], capsys)
    assert "lacks the model's columns" in err and "seems to lack its header line" in err
    # A header whose names are words, none of them numbers: no such hint.
    frame.rename(columns={"age": "AGE"}).to_csv(tmp_path / "rows.csv", index=False)
    err = _usage_error([*argv, "--out", str(tmp_path / "p.csv")], capsys)
    assert "lacks the model's columns ['age']" in err and "header line" not in err
    assert "The file has 'AGE' where the model has 'age'" in err


def test_a_misspelt_option_shows_the_command_s_usage_and_the_option_meant(tmp_path, capsys) -> None:
    paths = _sites(tmp_path)
    err = _usage_error(_train_argv(tmp_path, paths, "--target", "y", "--tress", "5"), capsys)
    assert err.startswith("usage: fedforest train"), err  # was the top-level usage
    assert "unrecognized arguments: --tress 5 (did you mean --trees for --tress?" in err
    err = _usage_error(["simulate", "--senario", "homogeneous"], capsys)
    assert err.startswith("usage: fedforest simulate"), err
    assert "did you mean --scenario for --senario?" in err
    err = _usage_error(["inspect", str(tmp_path / "m.ffm"), "extra"], capsys)
    assert "fedforest inspect: error: unrecognized arguments: extra\n" in err


def test_a_data_file_given_as_the_model_says_which_comes_first(tmp_path, capsys) -> None:
    paths = _sites(tmp_path)
    assert main(_train_argv(tmp_path, paths, "--target", "y")) == 0
    argv = ["predict", str(paths[0]), str(tmp_path / "m.ffm"), "--out", str(tmp_path / "p.csv")]
    err = _usage_error(argv, capsys)
    assert "site_0.csv' is a data file (.csv), not a model file" in err
    assert "corrupt or truncated" not in err  # was the advice to re-create the model
    err = _usage_error(["inspect", str(paths[0])], capsys)
    assert "site_0.csv' is a data file (.csv), not a model file" in err


def test_one_stray_word_in_a_column_of_numbers_is_named(tmp_path, capsys) -> None:
    paths = _sites(tmp_path)
    frame = pd.read_csv(paths[1])
    target = frame.astype({"y": object})
    target.loc[7, "y"] = "unknown"
    target.to_csv(paths[1], index=False)
    err = _usage_error(_train_argv(tmp_path, paths, "--target", "y"), capsys)
    assert "target column 'y' is not numeric" in err
    assert "its other values are numbers, but 'unknown' (in 1 row) is not" in err
    # A feature: numbers in one file, text in the other for one '?' (was the clients'
    # disagreement "on whether feature 'age' is categorical", naming no file).
    feature = frame.astype({"age": object})
    feature.loc[[3, 9], "age"] = "?"
    feature.to_csv(paths[1], index=False)
    err = _usage_error(_train_argv(tmp_path, paths, "--target", "y"), capsys)
    assert "column 'age' holds numbers in " in err and "site_0.csv' and text in " in err
    assert "but '?' (in 2 rows) is not: correct those cells" in err
    # Text in every file: trains, a categorical column, and a warning names the value.
    for path in paths:
        feature.to_csv(path, index=False)
    with warnings.catch_warnings(record=True) as caught:  # the levels' warnings too
        warnings.simplefilter("always")
        assert main(_train_argv(tmp_path, paths, "--target", "y")) == 0
    texts = [str(w.message) for w in caught]
    for path in paths:
        said = f"{str(path)!r}: column 'age' is read as text, a categorical column; its other "
        said += "values are numbers, but '?' (in 2 rows) is not"
        assert any(t.startswith(said) for t in texts), texts
    # said once, per file: not again by each Client (test_odd_inputs_16's warning)
    assert not any("read as numbers but for at most" in t for t in texts), texts


def test_one_client_only_warns_and_the_importances_have_a_heading(tmp_path, capsys) -> None:
    paths = _sites(tmp_path, n_sites=1)
    with pytest.warns(UserWarning, match="one client only .'s0'.: .* one --client NAME=PATH"):
        assert main(_train_argv(tmp_path, paths, "--target", "y")) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 client, 60 rows, 2 trees\n"), out  # was "1 clients"
    lines = out.splitlines()
    heading = lines.index("feature importances (mean decrease in impurity):")
    assert lines[heading - 1].startswith("communication:")  # the list was under it, unlabelled
    assert {line.split()[0] for line in lines[heading + 1 : heading + 4]} == {
        "age",
        "ward",
        "dose",
    }
    assert main(["inspect", str(tmp_path / "m.ffm")]) == 0
    assert "  feature importances (mean decrease in impurity):\n" in capsys.readouterr().out


def test_predict_names_a_level_the_model_has_no_category_for(tmp_path, capsys) -> None:
    paths = _sites(tmp_path)
    assert main(_train_argv(tmp_path, paths, "--target", "y")) == 0
    rows = pd.read_csv(paths[0])
    argv = ["predict", str(tmp_path / "m.ffm"), str(tmp_path / "rows.csv")]
    argv += ["--out", str(tmp_path / "p.csv")]
    rows.to_csv(tmp_path / "rows.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the training levels: no warning
        assert main(argv) == 0
    rows.loc[[2, 5], "ward"] = "psych"  # a new ward: was the marginal rule, silently
    rows.to_csv(tmp_path / "rows.csv", index=False)
    said = r"rows.csv': column 'ward': 2 rows hold a level the model has no category for \('psych'"
    with pytest.warns(UserWarning, match=said):
        assert main(argv) == 0


@pytest.mark.parametrize(
    ("name", "y_label", "x_label"),
    [
        ("fig2-homogeneous", "test MSE (lower is better)", ""),
        ("table3-fragmentation", "test accuracy (higher is better)", "number of clients K"),
        ("table7-outliers", "test MSE (lower is better)", "fraction of training rows with"),
    ],
)
def test_experiment_plots_say_which_way_is_better_and_name_the_x_axis(
    monkeypatch, tmp_path, name, y_label, x_label
) -> None:
    """The axes read "test MSE" and "outlier_fraction" (a column name); the printed table
    said which way was better, the PNG did not."""
    from matplotlib.figure import Figure

    from fedforest.experiments.paper import EXPERIMENTS

    exp = EXPERIMENTS[name]
    methods = ["Centralized RF", "FedForest Quantiles"]
    rows = [
        {"method": m, "score": 0.5 + 0.1 * k + 0.01 * r, "rep": r, "group": "all"}
        | ({exp.x: s} if exp.x else {})
        for k, m in enumerate(methods)
        for r in range(2)
        for s in (exp.settings if exp.x else [None])
    ]
    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: drawn.append(fig))
    exp.plot(exp, pd.DataFrame(rows), tmp_path / "plot.png")
    (ax,) = drawn[0].axes
    assert ax.get_ylabel() == y_label
    assert ax.get_xlabel().startswith(x_label)


def test_output_piped_to_a_reader_that_stops_early_is_no_traceback(tmp_path) -> None:
    """``fedforest inspect m.ffm | head -2`` ended with a BrokenPipeError traceback."""
    import subprocess
    import sys

    paths = _sites(tmp_path)
    assert main(_train_argv(tmp_path, paths, "--target", "y")) == 0
    command = [sys.executable, "-m", "fedforest", "inspect", str(tmp_path / "m.ffm")]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None
    child.stdout.close()  # the reader is gone before the first line
    _, err_bytes = child.communicate(timeout=120)
    err = err_bytes.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert child.returncode == 1


def test_a_continuous_target_under_task_classification_points_to_regression(
    tmp_path, capsys
) -> None:
    paths = _sites(tmp_path)
    argv = _train_argv(tmp_path, paths, "--target", "y", "--task", "classification")
    err = _usage_error(argv, capsys)  # was scikit-learn's "Unknown label type: continuous"
    assert "target column 'y' holds numbers with fractions (" in err
    assert "for a numeric target use --task regression" in err
    # Whole numbers as floats (a Parquet Int64 target with missing values reads so) are labels.
    frames = [pd.read_csv(p).assign(y=lambda f: (f["y"] > 3.5).astype(float)) for p in paths]
    for frame, path in zip(frames, paths, strict=True):
        frame.to_csv(path, index=False, float_format="%.1f")
    assert main(argv) == 0


@pytest.mark.filterwarnings("ignore:X does not have valid feature names:UserWarning")
def test_an_array_of_other_columns_is_refused_by_its_count_first(tmp_path) -> None:
    """An array of the file's 5 columns, given to a model of 3, was "Column 3 of X is not
    numeric ..., but the model was trained on it as a numeric feature": no such column."""
    import fedforest as ff

    frame = pd.read_csv(_sites(tmp_path)[0])
    model = ff.FedForestRegressor(n_estimators=2, privacy="none", random_state=0)
    model.fit(frame[["age", "ward", "dose"]], frame["y"])
    rows = frame.assign(unit="mg")  # a text column at index 4
    with pytest.raises(ValueError, match="X has 5 features, but FedForestRegressor is expecting 3"):
        model.predict(rows.to_numpy())
    assert model.predict(rows[["age", "ward", "dose"]].to_numpy()).shape == (len(rows),)


def test_inspect_lists_the_columns_predict_reads_and_the_clients(tmp_path, capsys) -> None:
    """inspect gave the count of features only; the ten most important were named, so a
    model of more columns did not say which a file to predict needs."""
    paths = _sites(tmp_path, n_sites=3)
    assert main(_train_argv(tmp_path, paths, "--target", "y")) == 0
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "m.ffm")]) == 0
    out = capsys.readouterr().out
    assert "  columns: age, ward (categorical, 2 levels), dose\n" in out
    assert "  client names: s0, s1, s2\n" in out


#: The CLI in a process where pyarrow and fastparquet cannot be imported, as after the
#: README's `pip install -e .` (they were never imported: pandas sees no Parquet engine).
_NO_PARQUET_ENGINE = (
    "import sys; sys.modules['pyarrow'] = sys.modules['fastparquet'] = None; "
    "from fedforest.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.parametrize("step", ["train", "predict data", "predict --out", "shap --out"])
def test_parquet_without_pyarrow_is_a_usage_error_naming_the_extra(tmp_path, step) -> None:
    """Without pyarrow (fedforest's own dependencies leave it out) a Parquet file was a
    traceback of pandas' ImportError; now one line naming the file and the extra."""
    import subprocess
    import sys

    paths = _sites(tmp_path)
    model = str(tmp_path / "m.ffm")
    assert main(_train_argv(tmp_path, paths, "--target", "y")) == 0
    parquet = tmp_path / "site_1.parquet"
    pd.read_csv(paths[1]).to_parquet(parquet)  # this process has pyarrow
    argv = {
        "train": _train_argv(tmp_path, [paths[0], parquet], "--target", "y"),
        "predict data": ["predict", model, str(parquet), "--out", str(tmp_path / "p.csv")],
        "predict --out": ["predict", model, str(paths[0]), "--out", str(tmp_path / "p.pq")],
        "shap --out": [
            "export",
            model,
            "--to",
            "shap",
            "--data",
            str(paths[0]),
            "--out",
            str(tmp_path / "s.parquet"),
        ],  # fmt: skip
    }[step]
    child = subprocess.run(
        [sys.executable, "-c", _NO_PARQUET_ENGINE, *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 2, child.stderr
    assert "Traceback" not in child.stderr, child.stderr
    (error,) = [line for line in child.stderr.splitlines() if " error: " in line]
    name = {"train": parquet.name, "predict data": parquet.name}.get(step, "")
    assert name in error and "is a Parquet file" in error, error
    assert "needs pyarrow, which is not installed: pip install 'fedforest[parquet]'" in error
    assert not (tmp_path / "p.pq").exists() and not (tmp_path / "s.parquet").exists()


@pytest.mark.parametrize("epsilon", ["-1", "0", "nan", "inf"])
def test_train_epsilon_out_of_range_names_the_option(tmp_path, capsys, epsilon) -> None:
    """It was the estimator's "The 'epsilon' parameter of FedForestRegressor must be a float
    in the range (0.0, inf) or None. Got inf instead." (simulate's already named --epsilon)."""
    argv = _train_argv(tmp_path, _sites(tmp_path), "--target", "y", "--privacy", "dp")
    err = _usage_error([*argv, "--epsilon", epsilon], capsys)
    assert f"argument --epsilon: must be a finite number > 0, got {epsilon}" in err, err
    assert "FedForestRegressor" not in err
