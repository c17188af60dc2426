"""``fedforest train --classes`` and ``--categories``: domains declared on the command line.

Without them a CSV declares nothing: under the default ``--privacy secure`` a label no
client holds in ``min_aggregate_rows`` rows stops the fit (the handshake would otherwise
name a row's label), and under ``--privacy dp`` any classifier or text column stops it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.cli import main


def _sites(tmp_path, rare: bool = True) -> list:
    """Two files; label 2 held by one row of the second, a text column ``city``."""
    rng = np.random.default_rng(4)
    paths = []
    for k in range(2):
        frame = pd.DataFrame({"x": rng.normal(size=120), "city": rng.choice(["Lyon", "Nice"], 120)})
        frame["y"] = (frame["x"] > 0).astype(int) + (frame["city"] == "Nice")
        frame["y"] = frame["y"].clip(upper=1)
        if rare and k == 1:
            frame.loc[7, "y"] = 2
        paths.append(tmp_path / f"s{k}.csv")
        frame.to_csv(paths[-1], index=False)
    return paths


def _argv(tmp_path, paths, *extra: str) -> list[str]:
    argv = ["train", "--task", "classification", "--target", "y", "--trees", "4"]
    argv += ["--client", f"a={paths[0]}", "--client", f"b={paths[1]}"]
    return [*argv, "--out", str(tmp_path / "m.ffm"), *extra]


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
def test_a_rare_label_needs_classes_under_secure_and_trains_with_them(tmp_path, capsys) -> None:
    paths = _sites(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(_argv(tmp_path, paths))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "classes=" in err and "(on the command line: --classes LABEL,...)" in err
    assert main(_argv(tmp_path, paths, "--classes", "0,1,2")) == 0
    model = ff.load(tmp_path / "m.ffm")
    assert model.classes_.tolist() == [0, 1, 2]
    assert model.classes_.dtype.kind == "i"


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
def test_dp_trains_from_files_once_labels_and_levels_are_declared(tmp_path, capsys) -> None:
    paths = _sites(tmp_path, rare=False)
    dp = ["--privacy", "dp", "--epsilon", "20"]
    with pytest.raises(SystemExit):
        main(_argv(tmp_path, paths, *dp, "--classes", "0,1"))  # the text column undeclared
    assert "(on the command line: --categories COLUMN=LEVEL,...)" in capsys.readouterr().err
    argv = _argv(tmp_path, paths, *dp, "--classes", "0,1", "--categories", "city=Lyon,Nice,Pau")
    assert main(argv) == 0
    model = ff.load(tmp_path / "m.ffm")
    assert model.classes_.tolist() == [0, 1]
    assert model.categories_[1][:3] == ["Lyon", "Nice", "Pau"]
    assert model.privacy_report_["epsilon_spent"] <= 20 + 1e-9
    assert model.privacy_report_["colluders"] == 0
    # --dp-colluders reaches the fit (saved in the model's report); 2 of 2 clients is refused.
    assert main([*argv, "--dp-colluders", "1"]) == 0
    assert ff.load(tmp_path / "m.ffm").privacy_report_["colluders"] == 1
    with pytest.raises(SystemExit):
        main([*argv, "--dp-colluders", "2"])
    err = capsys.readouterr().err
    assert "dp_colluders=2 colluding clients cannot be tolerated among the 2 clients" in err
    assert "(on the command line: --dp-colluders)" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--classes", "0,one"], "every label must be one of that type"),
        (["--classes", "0,1,1"], "labels must be non-empty and distinct"),
        (["--classes", "0,1.5"], "every label must be one of that type"),
        (["--categories", "town=Lyon"], "no feature column 'town'"),
        (["--categories", "city"], "--categories: 'city' is not COLUMN=LEVEL,LEVEL,..."),
        (["--categories", "city=Lyon", "--categories", " city =Nice"], "given twice"),
        # As the Flower run config's categories (one parser): levels non-empty and distinct.
        (["--categories", "city=Lyon,,Nice"], "levels of column 'city' must be non-empty and"),
        (["--categories", "city=Lyon, Lyon"], "levels of column 'city' must be non-empty and"),
    ],
)
def test_declaration_errors_are_usage_errors(tmp_path, capsys, extra, message) -> None:
    paths = _sites(tmp_path, rare=False)
    with pytest.raises(SystemExit) as info:
        main(_argv(tmp_path, paths, *extra))
    assert info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "m.ffm").exists()


def test_classes_go_with_classification(tmp_path, capsys) -> None:
    paths = _sites(tmp_path, rare=False)
    argv = _argv(tmp_path, paths, "--classes", "0,1")
    argv[argv.index("classification")] = "regression"
    with pytest.raises(SystemExit):
        main(argv)
    assert "--classes goes with --task classification" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
@pytest.mark.parametrize("declared", ["True,False", "false,true", "0,1"])
def test_a_boolean_target_takes_its_words_or_numbers(tmp_path, capsys, declared) -> None:
    """read_csv reads a column of True/False as bool: --classes True,False are its labels
    (was "the target holds numbers (bool); every label must be one of that type")."""
    paths = _sites(tmp_path, rare=False)
    for path in paths:
        frame = pd.read_csv(path)
        frame["y"] = frame["y"] == 1
        frame.to_csv(path, index=False)
    dp = ["--privacy", "dp", "--epsilon", "20", "--categories", "city=Lyon,Nice"]
    assert main(_argv(tmp_path, paths, *dp, "--classes", declared)) == 0
    model = ff.load(tmp_path / "m.ffm")
    assert model.classes_.tolist() == ([0, 1] if declared == "0,1" else [False, True])
    with pytest.raises(SystemExit):
        main(_argv(tmp_path, paths, *dp, "--classes", "yes,no"))
    assert "every label must be one of that type" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
def test_min_aggregate_rows_is_an_option_validated_as_the_estimators(tmp_path, capsys) -> None:
    """``--min-aggregate-rows`` reaches the estimator: m = 1 names the one-row label at the
    handshake (so the fit goes on without --classes), warning as the estimator does below
    10; below 1 it is a usage error naming the option (as scikit-learn's constraint)."""
    paths = _sites(tmp_path)
    with pytest.warns(UserWarning, match=r"min_aggregate_rows=1 is below 10: under privacy="):
        assert main(_argv(tmp_path, paths, "--min-aggregate-rows", "1")) == 0
    model = ff.load(tmp_path / "m.ffm")
    assert model.min_aggregate_rows == 1 and model.classes_.tolist() == [0, 1, 2]
    python = ff.FedForestClassifier(
        n_estimators=4, max_depth=8, min_samples_leaf=5, min_aggregate_rows=1, random_state=0
    )
    clients = []
    for name, path in zip("ab", paths, strict=True):
        frame = pd.read_csv(path)
        clients.append(ff.Client(frame.drop(columns="y"), frame["y"].to_numpy(), name=name))
    with pytest.warns(UserWarning, match="min_aggregate_rows=1 is below 10"):
        python.fit_federated(ff.LocalFederation(clients))
    rows = pd.read_csv(paths[1]).drop(columns="y")
    assert np.array_equal(model.predict_proba(rows), python.predict_proba(rows))
    assert main(_argv(tmp_path, paths, "--classes", "0,1,2", "--min-aggregate-rows", "30")) == 0
    assert ff.load(tmp_path / "m.ffm").min_aggregate_rows == 30
    for bad in ("0", "-3", "2.5"):
        with pytest.raises(SystemExit) as info:
            main(_argv(tmp_path, paths, "--min-aggregate-rows", bad))
        assert info.value.code == 2
        assert "argument --min-aggregate-rows: " in capsys.readouterr().err


def test_the_command_line_and_the_run_config_parse_categories_alike() -> None:
    """One parser (``domains.parse_categories``): the same levels, the same refusals, each
    naming its own option or key."""
    pytest.importorskip("flwr")
    from fedforest.cli import _CATEGORY_SPEC
    from fedforest.federated.domains import parse_categories
    from fedforest.transport.flower.serverapp import parse_categories as run_config

    specs = ["city= Lyon, Nice ", " ward=a,b"]
    assert parse_categories(specs, "--categories", _CATEGORY_SPEC) == run_config(";".join(specs))
    for bad, says in [("city=a,,b", "non-empty and distinct"), ("city", "is not"),
                      ("c=a;c=b", "given twice")]:  # fmt: skip
        with pytest.raises(ValueError, match=rf"^--categories: .*{says}"):
            parse_categories(bad.split(";"), "--categories", _CATEGORY_SPEC)
        with pytest.raises(ValueError, match=rf"^run config categories={bad!r}: .*{says}"):
            run_config(bad)
