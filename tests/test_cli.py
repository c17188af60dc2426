import re

import numpy as np
import pandas as pd
import pytest

from fedforest.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_simulate_prints_table_and_writes_png(tmp_path, capsys):
    out = tmp_path / "p.png"
    argv = ["simulate", "--trees", "5", "--clients", "3", "--rows-per-client", "60"]
    status = main([*argv, "--out", str(out)])
    assert status == 0
    assert out.read_bytes()[:8] == PNG_MAGIC

    stdout = capsys.readouterr().out
    rows = {}
    for name in ("fedforest", "centralized RF", "local learning"):
        match = re.search(rf"^{name}\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\S+)\s+(\S+)$", stdout, re.M)
        assert match, f"no table row for {name!r} in:\n{stdout}"
        rows[name] = match.groups()
    assert int(rows["fedforest"][2]) > 0  # communication rounds
    assert float(rows["fedforest"][3]) > 0  # MB sent
    assert rows["centralized RF"][2:] == ("-", "-")
    assert rows["local learning"][2:] == ("-", "-")
    assert re.search(r"fedforest vs centralized RF: [+-]\d+\.\d %", stdout)
    assert f"wrote {out}" in stdout
    assert "reproduce: fedforest simulate --scenario covariate-shift --clients 3" in stdout


def test_help_exits_zero(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--help"])
    assert exc.value.code == 0
    assert "--scenario" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv", [["train"], ["simulate"], ["predict"], ["export"], ["experiment", "swarm-overlap"]]
)
def test_help_shows_no_default_of_none(argv, capsys) -> None:
    # argparse's defaults formatter wrote "(default: None)" after required options
    # (--client, --target, --out) and after options whose help says what leaving them out does.
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "default: None" not in out
    if argv == ["train"]:
        assert "(default: 50)" in out and "(default: secure)" in out  # the others still show


def test_top_level_help_lists_simulate(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "simulate" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--scenario", "iid"],
        ["simulate", "--trees", "0"],
        ["simulate", "--features", "3"],
        ["simulate", "--out", "/no/such/dir/p.png"],
        [],
        # joblib's "n_jobs == 0 in Parallel has no meaning" traceback (exit 1) before
        ["simulate", "--n-jobs", "0"],
        ["experiment", "fig2-homogeneous", "--reps", "1", "--n-jobs", "0"],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error" in err
    if "--n-jobs" in argv:
        assert "argument --n-jobs: must not be 0" in err


def test_simulate_with_too_few_rows_for_the_secure_rules_is_a_usage_error(capsys) -> None:
    """One client of 5 rows trains on 3 (30 % held out): fewer than min_aggregate_rows =
    10 in all. Was a traceback (exit 1) naming an option simulate does not have."""
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--clients", "1", "--rows-per-client", "5", "--trees", "2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "fewer than min_aggregate_rows = 10" in err
    assert "(fedforest simulate: give more --clients or --rows-per-client)" in err


def test_swarm_experiment_is_wired_into_the_cli(capsys):
    import pytest

    from fedforest.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["experiment", "swarm-overlap", "--help"])
    assert exit_info.value.code == 0
    assert "--jaccards" in capsys.readouterr().out


def test_version_prints_the_installed_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"fedforest {version('fedforest')}"


def test_paper_experiment_runs_from_the_cli(tmp_path, capsys):
    # FedHeart is the fastest paper experiment (740 patients, about 5 s for one repetition
    # of all twelve methods); --reps 1 keeps the real settings.
    status = main(["experiment", "fedheart", "--reps", "1", "--out", str(tmp_path)])
    assert status == 0
    for suffix in ("csv", "json", "png"):
        assert (tmp_path / f"fedheart.{suffix}").stat().st_size > 0
    assert (tmp_path / "fedheart.png").read_bytes()[:8] == PNG_MAGIC
    out = capsys.readouterr().out
    assert out.startswith("fedheart: Fig. 2(d) FedHeart")
    assert re.search(r"^FedForest Quantiles\s+0\.\d{3}\s*$", out, re.M), out
    assert "communication per fit" in out and "not available" not in out
    assert f"reproduce: fedforest experiment fedheart --reps 1 --seed 0 --out {tmp_path}" in out
    frame = pd.read_csv(tmp_path / "fedheart.csv")
    pooled = frame[frame["group"] == "all"]
    assert len(pooled) == 12 and pooled["score"].notna().all()


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")  # 10 trees
def test_train_predict_inspect_on_csv_files(tmp_path, capsys) -> None:
    """Three hospitals' CSV files, columns in different orders and a text column."""
    rng = np.random.default_rng(0)
    paths = []
    for k in range(3):
        n = 150
        frame = pd.DataFrame(
            {
                "age": rng.normal(60, 10, n),
                "ward": rng.choice(["a", "b", "c"], n),
                "dose": rng.normal(size=n),
            }
        )
        frame["y"] = 0.05 * frame["age"] + 2.0 * (frame["ward"] == "b") + rng.normal(0, 0.1, n)
        if k == 1:
            frame = frame[["dose", "y", "ward", "age"]]  # another order: matched by name
        paths.append(tmp_path / f"site{k}.csv")
        frame.to_csv(paths[-1], index=False)
    model = tmp_path / "m.ffm"
    argv = ["train", "--target", "y", "--trees", "10", "--privacy", "none", "--out", str(model)]
    for k, path in enumerate(paths):
        argv += ["--client", f"site{k}={path}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "out-of-bag R^2" in out and "communication:" in out and "ward" in out
    preds = tmp_path / "p.csv"
    assert main(["predict", str(model), str(paths[1]), "--out", str(preds)]) == 0
    got = pd.read_csv(preds)["prediction"].to_numpy()
    truth = pd.read_csv(paths[1])["y"].to_numpy()
    assert got.shape == truth.shape and np.mean((got - truth) ** 2) < 0.2
    assert main(["inspect", str(model)]) == 0
    text = capsys.readouterr().out
    assert "FedForestRegressor" in text and "privacy: none" in text and "trees: 10" in text


def test_train_names_the_file_with_other_columns(tmp_path, capsys) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    pd.DataFrame({"x": [1.0, 2.0], "y": [0.0, 1.0]}).to_csv(a, index=False)
    pd.DataFrame({"z": [1.0, 2.0], "y": [0.0, 1.0]}).to_csv(b, index=False)
    with pytest.raises(SystemExit) as info:
        main(["train", "--target", "y", "--client", f"a={a}", "--client", f"b={b}",
                  "--out", str(tmp_path / "m.ffm")])  # fmt: skip
    assert info.value.code == 2
    assert "b.csv" in capsys.readouterr().err


def test_simulate_progress_bar_prints_its_last_line_once(tmp_path, capsys) -> None:
    """Off a terminal (a log, a pipe, pytest's capture) a redraw is a line of its own."""
    argv = ["simulate", "--trees", "3", "--clients", "2", "--rows-per-client", "40"]
    assert main([*argv, "--features", "4", "--out", str(tmp_path / "p.png")]) == 0
    lines = [line for line in re.split(r"[\r\n]", capsys.readouterr().err) if line.strip()]
    bars = [line for line in lines if line.startswith("simulate:")]
    assert len(bars) == 1 and "100%" in bars[0] and "5/5" in bars[0], lines


def test_progress_bar_redraws_in_a_terminal_and_once_elsewhere() -> None:
    import io

    from fedforest._progress import ProgressBar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, draws in ((Terminal(), 4), (io.StringIO(), 1)):
        with ProgressBar(total=2, desc="x", file=stream, mininterval=0) as bar:
            bar.update()
            bar.update()
        text = stream.getvalue()
        assert text.count("x:") == draws, text
        assert "2/2" in text.rsplit("x:", 1)[1]  # the last line drawn is the final state


def test_the_grower_and_the_swarm_draw_their_bars_once_off_a_terminal(capsys) -> None:
    # The "prints twice" of issue 16: the swarm's and the grower's bars use ProgressBar.
    import fedforest as ff
    from fedforest._progress import ProgressBar, progress_bar

    assert isinstance(progress_bar(total=1, disable=True), ProgressBar)  # not a notebook
    X = np.random.default_rng(0).normal(size=(60, 2))
    ff.FedForestRegressor(n_estimators=2, max_depth=2, privacy="none", verbose=1).fit(X, X[:, 0])
    err = capsys.readouterr().err
    assert err.count("levels:") == 1, err
    import inspect

    from fedforest.experiments import _runner, swarm

    for module in (swarm, _runner):
        assert "progress_bar(" in inspect.getsource(module) and "tqdm(" not in inspect.getsource(
            module
        )


@pytest.mark.parametrize("kw", [{}, {"tree_batch_size": 2}, {"split_rule": "avgimp"}])
def test_the_levels_bar_ends_full_when_the_trees_stop_before_max_depth(capsys, kw) -> None:
    # y is a step: every tree is done after one level of max_depth=8. The bar ended at "2/8"
    # (or 4/32 with batches) and read as a fit cut short. Every node sees both features
    # (max_features=None): with one drawn feature per node, a tree that keeps drawing the noise
    # column reaches depth 8 for some seeds (3 in 40 under avgimp), and CI met one.
    import fedforest as ff

    X = np.random.default_rng(0).normal(size=(200, 2))
    y = (X[:, 0] > 0).astype(float)
    model = ff.FedForestRegressor(
        n_estimators=4, privacy="none", max_features=None, random_state=0, verbose=1, **kw
    ).fit(X, y)
    assert max(t.max_depth for t in model.trees_) < 8
    line = capsys.readouterr().err.strip().splitlines()[-1]
    total = 16 if "tree_batch_size" in kw else 8  # two batches of 2 trees: 8 levels each
    assert f"{total}/{total}" in line and "100%" in line, line


def _weighted_sites(tmp_path, n_sites: int = 2) -> list:
    rng = np.random.default_rng(4)
    paths = []
    for k in range(n_sites):
        n = 120
        frame = pd.DataFrame(
            {
                "age": rng.normal(60, 10, n),
                "ward": rng.choice(["a", "b"], n),
                "w": rng.uniform(0.0, 3.0, n),
            }
        )
        frame["y"] = 0.05 * frame["age"] + (frame["ward"] == "b") + rng.normal(0, 0.1, n)
        paths.append(tmp_path / f"w{k}.csv")
        frame.to_csv(paths[-1], index=False)
    return paths


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")  # 5 trees
def test_train_weight_column_gives_the_python_api_forest(tmp_path, capsys) -> None:
    import fedforest as ff

    paths = _weighted_sites(tmp_path)
    model = tmp_path / "m.ffm"
    argv = ["train", "--target", "y", "--weight", "w", "--trees", "5", "--privacy", "none"]
    argv += ["--seed", "3", "--out", str(model)]
    for k, path in enumerate(paths):
        argv += ["--client", f"s{k}={path}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    frames = [pd.read_csv(p) for p in paths]
    total = sum(f["w"].sum() for f in frames)
    assert f"total weight {total:g} (column 'w')" in out
    got = ff.load(model)
    assert list(got.feature_names_in_) == ["age", "ward"]  # the weights are no feature
    clients = [
        ff.Client(f[["age", "ward"]], f["y"].to_numpy(), f"s{k}", sample_weight=f["w"].to_numpy())
        for k, f in enumerate(frames)
    ]
    want = ff.FedForestRegressor(
        n_estimators=5, max_depth=8, min_samples_leaf=5, privacy="none", oob_score=True,
        random_state=3,
    ).fit_federated(ff.LocalFederation(clients))  # fmt: skip
    rows = pd.concat(frames)[["age", "ward"]]
    assert np.array_equal(got.predict(rows), want.predict(rows))
    unweighted = ff.FedForestRegressor(
        n_estimators=5, max_depth=8, min_samples_leaf=5, privacy="none", random_state=3
    ).fit_federated(
        ff.LocalFederation(
            [
                ff.Client(f[["age", "ward"]], f["y"].to_numpy(), f"s{k}")
                for k, f in enumerate(frames)
            ]
        )
    )
    assert not np.array_equal(got.predict(rows), unweighted.predict(rows))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("drop", "(client 's1') has no weight column 'w'"),
        ("text", "weight column 'w' must hold numbers in every row"),
        ("negative", "sample_weight must be finite and non-negative"),
    ],
)
def test_train_weight_errors_name_the_file(tmp_path, capsys, change, message) -> None:
    paths = _weighted_sites(tmp_path)
    frame = pd.read_csv(paths[1])
    if change == "drop":
        frame = frame.drop(columns="w")
    elif change == "text":
        frame["w"] = "heavy"
    else:
        frame.loc[0, "w"] = -1.0
    frame.to_csv(paths[1], index=False)
    argv = ["train", "--target", "y", "--weight", "w", "--out", str(tmp_path / "m.ffm")]
    argv += ["--client", f"s0={paths[0]}", "--client", f"s1={paths[1]}"]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "w1.csv" in err
    assert "usage: fedforest train" in err  # the subcommand's usage, not the top-level one


def test_export_writes_onnx_treelite_and_shap_from_a_model_file(tmp_path, capsys) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("treelite")
    import onnxruntime
    import treelite

    import fedforest as ff

    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"age": rng.normal(60, 10, 300), "dose": rng.normal(size=300)})
    frame = frame.astype(np.float32).astype(np.float64)  # ONNX compares in float32
    y = 0.05 * frame["age"] + frame["dose"] + rng.normal(0, 0.1, 300)
    data = tmp_path / "rows.csv"
    frame.to_csv(data, index=False)
    model = ff.FedForestRegressor(n_estimators=4, privacy="none", random_state=0).fit(frame, y)
    path = tmp_path / "m.ffm"
    model.save(path)
    expected = model.predict(frame)
    onnx_path, tl_path, shap_path = tmp_path / "m.onnx", tmp_path / "m.tl", tmp_path / "s.csv"
    assert main(["export", str(path), "--to", "onnx", "--out", str(onnx_path)]) == 0
    session = onnxruntime.InferenceSession(
        onnx_path.read_bytes(), providers=["CPUExecutionProvider"]
    )
    (pred,) = session.run(None, {"X": frame.to_numpy(np.float32)})
    np.testing.assert_allclose(pred[:, 0], expected, rtol=1e-5, atol=1e-6)
    assert main(["export", str(path), "--to", "treelite", "--out", str(tl_path)]) == 0
    from treelite import gtil

    back = treelite.Model.deserialize(str(tl_path))
    np.testing.assert_allclose(gtil.predict(back, frame.to_numpy())[:, 0, 0], expected, rtol=1e-9)
    argv = ["export", str(path), "--to", "shap", "--data", str(data), "--out", str(shap_path)]
    assert main(argv) == 0
    shap_frame = pd.read_csv(shap_path)
    assert list(shap_frame.columns) == ["shap_age", "shap_dose", "base_value"]
    np.testing.assert_allclose(shap_frame.sum(axis=1), expected, rtol=1e-9, atol=1e-9)
    # --to shap needs --data (and --data belongs to --to shap only).
    with pytest.raises(SystemExit) as exc:
        main(["export", str(path), "--to", "shap", "--out", str(shap_path)])
    assert exc.value.code == 2 and "--to shap needs --data" in capsys.readouterr().err


def test_predict_writes_a_column_per_output_of_a_multi_output_model(tmp_path) -> None:
    import fedforest as ff

    rng = np.random.default_rng(6)
    frame = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200)})
    Y = np.column_stack([frame["a"], frame["a"] - frame["b"]])
    model = ff.FedForestRegressor(n_estimators=3, privacy="none", random_state=0).fit(frame, Y)
    model.save(tmp_path / "m.ffm")
    frame.to_csv(tmp_path / "rows.csv", index=False)
    argv = ["predict", str(tmp_path / "m.ffm"), str(tmp_path / "rows.csv")]
    assert main([*argv, "--out", str(tmp_path / "p.csv")]) == 0
    got = pd.read_csv(tmp_path / "p.csv")
    assert list(got.columns) == ["prediction_0", "prediction_1"]
    np.testing.assert_allclose(got.to_numpy(), model.predict(frame), rtol=1e-12)


def test_predict_with_a_model_fitted_without_names_reads_columns_by_position(
    tmp_path, capsys
) -> None:
    # It passed the file's header on: scikit-learn's "X has feature names, but
    # FedForestRegressor was fitted without feature names" warning on stderr.
    import warnings

    import fedforest as ff

    rng = np.random.default_rng(7)
    X = rng.normal(size=(120, 3))
    model = ff.FedForestRegressor(n_estimators=2, random_state=0).fit(X, X[:, 0])
    model.save(tmp_path / "m.ffm")
    pd.DataFrame(X, columns=["u", "v", "w"]).to_csv(tmp_path / "rows.csv", index=False)
    argv = ["predict", str(tmp_path / "m.ffm"), str(tmp_path / "rows.csv")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main([*argv, "--out", str(tmp_path / "p.csv")]) == 0
    got = pd.read_csv(tmp_path / "p.csv")["prediction"].to_numpy()
    np.testing.assert_allclose(got, model.predict(X), rtol=1e-12)
    pd.DataFrame(X[:, :2]).to_csv(tmp_path / "two.csv", index=False)
    with pytest.raises(SystemExit):
        main([*argv[:2], str(tmp_path / "two.csv"), "--out", str(tmp_path / "q.csv")])
    err = capsys.readouterr().err
    assert "has 2 columns; the model was fitted without column names on 3" in err


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
def test_the_index_to_csv_writes_is_not_a_feature(tmp_path) -> None:
    # to_csv(path) without index=False: "Unnamed: 0" (0..n-1 in every file) was a numeric
    # feature, the model's most important one on these files.
    rng = np.random.default_rng(8)
    paths = []
    for k in range(2):
        frame = pd.DataFrame({"x": rng.normal(size=60), "z": rng.normal(size=60)})
        frame["y"] = frame["x"] + 0.1 * rng.normal(size=60)
        paths.append(tmp_path / f"s{k}.csv")
        frame.to_csv(paths[-1])  # with the index
    model = tmp_path / "m.ffm"
    argv = ["train", "--client", f"a={paths[0]}", "--client", f"b={paths[1]}", "--target", "y"]
    with pytest.warns(UserWarning, match="holds the row numbers 0 to 59: read as the index"):
        assert main([*argv, "--trees", "2", "--out", str(model)]) == 0
    import fedforest as ff
    from fedforest.datasets.files import read_table

    assert ff.load(model).feature_names_in_.tolist() == ["x", "z"]
    shuffled = pd.DataFrame({"x": [0.5, 1.5, 2.5]}, index=[2, 0, 1])
    shuffled.to_csv(tmp_path / "kept.csv")  # an index that is not 0..n-1: a column, kept
    assert read_table(tmp_path / "kept.csv").columns[0] == "Unnamed: 0"


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
def test_a_text_column_left_empty_in_one_file_is_its_missing_category(tmp_path) -> None:
    # read_csv gives an all-empty column float64 NaN: the handshake refused it ("disagree
    # on whether feature 'city' is categorical") and the command has no option to declare it.
    rng = np.random.default_rng(9)
    paths = []
    for k in range(2):
        city = rng.choice(["Lyon", "Paris"], 80) if k == 0 else np.full(80, "")
        frame = pd.DataFrame({"x": rng.normal(size=80), "city": city})
        frame["y"] = frame["x"] + (frame["city"] == "Paris") + 0.1 * rng.normal(size=80)
        paths.append(tmp_path / f"s{k}.csv")
        frame.to_csv(paths[-1], index=False)
    assert pd.read_csv(paths[1])["city"].dtype == np.float64  # all NaN
    model = tmp_path / "m.ffm"
    argv = ["train", "--client", f"a={paths[0]}", "--client", f"b={paths[1]}", "--target", "y"]
    assert main([*argv, "--trees", "3", "--out", str(model)]) == 0
    import fedforest as ff

    assert ff.load(model).categories_ == {1: ["Lyon", "Paris", None]}
    mixed = pd.read_csv(paths[1]).assign(city=1.5)  # numbers where the other file has text
    mixed.to_csv(paths[1], index=False)
    with pytest.raises(SystemExit):
        main([*argv, "--trees", "3", "--out", str(model)])


def test_predict_writes_per_output_probabilities_of_a_multi_output_classifier(tmp_path) -> None:
    import fedforest as ff

    rng = np.random.default_rng(7)
    frame = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200)})
    Y = np.column_stack([frame["a"] > 0, np.digitize(frame["b"], [-0.5, 0.5])]).astype(int)
    model = ff.FedForestClassifier(n_estimators=3, privacy="none", random_state=0).fit(frame, Y)
    model.save(tmp_path / "m.ffm")
    frame.to_csv(tmp_path / "rows.csv", index=False)
    argv = ["predict", str(tmp_path / "m.ffm"), str(tmp_path / "rows.csv")]
    assert main([*argv, "--out", str(tmp_path / "p.csv")]) == 0
    got = pd.read_csv(tmp_path / "p.csv")
    columns = ["prediction_0", "prediction_1", "proba_0_0", "proba_0_1"]
    assert list(got.columns) == [*columns, "proba_1_0", "proba_1_1", "proba_1_2"]
    np.testing.assert_array_equal(got[columns[:2]].to_numpy(), model.predict(frame))
    proba = np.hstack(model.predict_proba(frame))
    np.testing.assert_allclose(got[got.columns[2:]].to_numpy(), proba, rtol=1e-12)
    pytest.importorskip("shap")
    shap_path = tmp_path / "shap.csv"
    argv = ["export", str(tmp_path / "m.ffm"), "--to", "shap", "--data", str(tmp_path / "rows.csv")]
    assert main([*argv, "--out", str(shap_path)]) == 0
    shap = pd.read_csv(shap_path)
    assert "shap_a_0_0" in shap.columns and "base_value_1_2" in shap.columns
    values = model.shap_values(frame)
    np.testing.assert_allclose(shap["shap_b_1_2"], values[1][:, 1, 2], rtol=1e-9, atol=1e-12)


# Each of these was a Python traceback (exit 1), or for --out a traceback after training
# naming a hidden temp file; now a usage error (exit 2) that says what to change.
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("text target", "target column 'ward' is not numeric (str); for class labels use --task"),
        ("nan target", "w1.csv': target column 'y' is missing in some rows"),
        ("same name twice", "the client name 's0' is given twice"),
        ("dp without epsilon", 'privacy="dp" needs a privacy budget'),
        ("epsilon without dp", 'used only under privacy="dp"'),
        ("colluders without dp", 'dp_colluders=1 scales the noise shares of privacy="dp"'),
        ("out in a missing directory", "the directory"),
        # Were "target column 'y' is not numeric (object)" and pandas' / pyarrow's messages
        # without the file's name.
        ("header only", "w1.csv' has no rows (a client needs at least one)"),
        ("empty file", "w1.csv' cannot be read as CSV: No columns to parse"),
        ("not parquet", "w1.parquet' cannot be read as Parquet: "),
        # Checked by hand on 2026-12-03 (hostile files); kept here so they stay clear.
        ("infinite feature", "Client 's1': column 'age' of X contains infinity"),
        ("huge target", "regression targets must be at most 1e+100 in absolute value"),
        ("binary file", "w1.csv' cannot be read as CSV: "),
        ("renamed column", "w1.csv' (client 's1') does not have the same columns"),
    ],
)
def test_train_usage_errors_say_what_to_change(tmp_path, capsys, case, message) -> None:
    paths = _weighted_sites(tmp_path)
    if case == "header only":
        pd.read_csv(paths[1]).iloc[:0].to_csv(paths[1], index=False)
    elif case == "empty file":
        paths[1].write_bytes(b"")
    elif case == "not parquet":
        paths[1] = paths[1].rename(paths[1].with_suffix(".parquet"))  # CSV bytes inside
    elif case == "binary file":
        paths[1].write_bytes(bytes(range(256)) * 10)
    if case in ("nan target", "infinite feature", "huge target", "renamed column"):
        frame = pd.read_csv(paths[1])
        column, value = {
            "nan target": ("y", np.nan),
            "infinite feature": ("age", np.inf),
            "huge target": ("y", 1e308),
            "renamed column": ("w", 0.0),
        }[case]
        frame.loc[3, column] = value
        if case == "renamed column":
            frame = frame.rename(columns={"w": "weight"})
        frame.to_csv(paths[1], index=False)
    out = tmp_path / ("nowhere/m.ffm" if case == "out in a missing directory" else "m.ffm")
    argv = ["train", "--target", "ward" if case == "text target" else "y", "--trees", "2"]
    argv += ["--out", str(out), "--client", f"s0={paths[0]}"]
    argv += ["--client", f"s{0 if case == 'same name twice' else 1}={paths[1]}"]
    extra = {"dp without epsilon": ["--privacy", "dp"], "epsilon without dp": ["--epsilon", "1"]}
    extra["colluders without dp"] = ["--dp-colluders", "1"]
    argv += extra.get(case, [])
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "usage: fedforest train" in err
    assert not out.exists()
    if "epsilon" in case:  # the estimator's parameter named: here it is an option
        assert "(on the command line: --epsilon)" in err
    if "colluders" in case:
        assert "(on the command line: --dp-colluders)" in err


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")  # 2 trees
def test_predict_usage_errors_say_what_to_change(tmp_path, capsys) -> None:
    paths = _weighted_sites(tmp_path)
    model = tmp_path / "m.ffm"
    argv = ["train", "--target", "y", "--trees", "2", "--out", str(model)]
    assert main([*argv, "--client", f"s0={paths[0]}", "--client", f"s1={paths[1]}"]) == 0
    empty = tmp_path / "empty.csv"
    pd.read_csv(paths[0]).iloc[:0].to_csv(empty, index=False)  # the header, no rows
    for data, out, message in [
        (
            empty,
            tmp_path / "p.csv",
            "empty.csv' has no rows to predict or explain",
        ),  # was sklearn's
        (paths[0], tmp_path / "nowhere" / "p.csv", "the directory"),  # was pandas' OSError
    ]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as info:
            main(["predict", str(model), str(data), "--out", str(out)])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "usage: fedforest predict" in err


def test_the_program_freezes_its_objects_at_the_end_and_a_caller_keeps_them(monkeypatch, capsys):
    """main() as the program (argv from sys.argv) skips the collector's passes at exit."""
    import gc

    assert gc.get_freeze_count() == 0
    with pytest.raises(SystemExit):
        main(["--version"])  # a caller: its process goes on
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr("sys.argv", ["fedforest", "--version"])
    try:
        with pytest.raises(SystemExit):
            main()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert "fedforest" in capsys.readouterr().out


# A file pandas or pyarrow refuses was their bare message ("Error tokenizing data. C
# error: ...", "No columns to parse from file"), naming neither the file nor the client.
@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")  # 2 trees
@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("ragged.csv", b"a,b,y\n1,2,3\n4,5,6,7,8\n", "Error tokenizing data"),
        ("binary.csv", bytes(range(256)) * 4, "cannot be read as CSV"),
        ("empty.csv", b"", "No columns to parse"),
        ("cut.parquet", None, "cannot be read as Parquet"),
        ("pickle.parquet", b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00}\x94.", "Parquet"),
    ],
)
def test_a_file_the_reader_refuses_is_a_usage_error_naming_it(
    tmp_path, capsys, name, content, reason
) -> None:
    paths = _weighted_sites(tmp_path)
    bad = tmp_path / name
    if content is None:  # a real Parquet file cut in half
        pytest.importorskip("pyarrow")
        pd.read_csv(paths[1]).to_parquet(bad)
        content = bad.read_bytes()[: bad.stat().st_size // 2]
    bad.write_bytes(content)
    model = tmp_path / "m.ffm"
    argv = ["train", "--target", "y", "--trees", "2", "--privacy", "none", "--out", str(model)]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--client", f"s0={paths[0]}", "--client", f"s1={bad}"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"{str(bad)!r} cannot be read as" in err and reason in err, err
    assert not model.exists()
    assert main([*argv, "--client", f"s0={paths[0]}", "--client", f"s1={paths[1]}"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(["predict", str(model), str(bad), "--out", str(tmp_path / "p.csv")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"{str(bad)!r} cannot be read as" in err and reason in err, err


def _int64_label_sites(tmp_path) -> tuple[list, pd.DataFrame]:
    """Two Parquet files whose target is pandas' nullable Int64 (no value missing)."""
    rng = np.random.default_rng(5)
    frames, paths = [], []
    for k in range(2):
        frame = pd.DataFrame({"a": rng.normal(size=80), "b": rng.normal(size=80)})
        frame["y"] = pd.array((frame["a"] > 0).astype(int) + (frame["b"] > 0), dtype="Int64")
        paths.append(tmp_path / f"s{k}.parquet")
        frame.to_parquet(paths[-1])
        frames.append(frame)
    return paths, pd.concat(frames, ignore_index=True)


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")  # 3 trees
@pytest.mark.parametrize("classes", [None, "0,1,2"])
def test_train_reads_labels_as_fit_reads_the_frame(tmp_path, capsys, classes) -> None:
    # A nullable Int64 target: fit (and scikit-learn) read it as floats; train gave int
    # classes (it passed y.to_numpy() to the clients) and, with --classes, a traceback.
    import fedforest as ff

    paths, rows = _int64_label_sites(tmp_path)
    argv = ["train", "--target", "y", "--task", "classification", "--trees", "3"]
    argv += ["--out", str(tmp_path / "m.ffm")] + (["--classes", classes] if classes else [])
    for k, path in enumerate(paths):
        argv += ["--client", f"s{k}={path}"]
    assert main(argv) == 0
    got = ff.load(tmp_path / "m.ffm")
    kw = {"classes": [0.0, 1.0, 2.0]} if classes else {}
    want = ff.FedForestClassifier(n_estimators=3, random_state=0, **kw).fit(
        rows[["a", "b"]], rows["y"], client_ids=np.repeat([0, 1], 80)
    )
    assert got.classes_.dtype == want.classes_.dtype == np.float64
    assert got.classes_.tolist() == want.classes_.tolist() == [0.0, 1.0, 2.0]
    assert got.predict(rows[["a", "b"]]).dtype == np.float64


def test_inspect_prints_the_classes_and_the_dropped_clients(tmp_path, capsys) -> None:
    # inspect printed neither: a classifier's labels and who was dropped (and why) were
    # only in Python (classes_, dropped_clients_, dropped_reasons_).
    import fedforest as ff
    from fedforest.federated.protocol import Message

    class Dying(ff.Client):
        def handle(self, msg: Message) -> Message:
            raise ConnectionResetError("gone")

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.where(X[:, 0] > 0, "sick", "well")
    clients = [ff.Client(X[k::3], y[k::3], name=f"s{k}") for k in range(2)]
    clients.append(Dying(X[2::3], y[2::3], name="s2"))
    model = ff.FedForestClassifier(n_estimators=3, random_state=0, on_client_failure="drop")
    model.fit_federated(clients).save(tmp_path / "m.ffm")
    assert main(["inspect", str(tmp_path / "m.ffm")]) == 0
    out = capsys.readouterr().out
    assert "  classes: ['sick', 'well']" in out
    assert "  dropped: client 's2' in round 0 (ConnectionResetError in handshake)" in out


def test_a_reader_s_own_error_names_the_file_on_the_command_line(tmp_path, capsys) -> None:
    """A value pyarrow cannot convert (a date after 9999) is raised as the reader's error
    with a note naming the file (``datasets/files.py``); the usage error shows both (the
    note was lost: "error: year 10184 is out of range")."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    paths = _weighted_sites(tmp_path)
    frame = pd.read_csv(paths[1])
    days = np.full(len(frame), 18_000, dtype=np.int32)
    days[3] = 3_000_123  # year 10184
    bad = tmp_path / "far.parquet"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table.append_column("visit", pa.array(days, type=pa.date32())), bad)
    argv = ["train", "--target", "y", "--trees", "2", "--privacy", "none"]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--out", str(tmp_path / "m.ffm"), "--client", f"s0={paths[0]}",
              "--client", f"s1={bad}"])  # fmt: skip
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "10184" in err and str(bad) in err, err


def test_a_client_s_stand_in_shows_its_exception_on_the_command_line() -> None:
    """On the command line every client is the user's own: a stand-in's usage text (the
    server's sees the type only) names the exception it stands for, with its text."""
    from fedforest.cli import _usage
    from fedforest.federated.client_errors import sanitized
    from fedforest.federated.federation import ClientDataError

    try:
        float("HIV+ 7.31")
    except ValueError as exc:
        stand_in = sanitized(exc, "round_b")
    assert "HIV+" not in str(stand_in)
    failure = ClientDataError("s1", "round_b", 3, stand_in)
    failure.__cause__ = stand_in
    text = _usage(failure)
    assert "round_b failed with ValueError" in text and "HIV+ 7.31" in text, text
