"""A newcomer's mistakes on the command line (session 24), each said with its fix.

Each test failed before its change: the text then left the user to guess (a misspelt
column listed among the others, a header line missing, an option misspelt under the
top-level usage, a data file given as the model, one stray word in a column of numbers).
"""

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
