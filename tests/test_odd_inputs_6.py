"""Odd inputs, sixth round: scikit-learn parity and the swarm's peers.

Each test failed on 9d844cc:

- a categorical column (declared, of an ``object`` array or DataFrame column) holding text
  and numbers was refused by the server under ``privacy="none"`` as the client's invalid
  reply ("header field 'categories'['0'] mixes strings and numbers", as if the client
  were hostile), and under ``"secure"`` fitted with every number's level lost to missing;
- declared ``classes=[0, 1, "a"]`` on int labels made every class text: ``predict`` gave
  ``'0'`` and ``'1'``, and ``score`` on the labels failed ("Mix of label input types");
  ``classes=[0, 1, nan]`` declared a class None; ``categories`` mixing text and numbers
  were taken;
- the estimators' tags said ``input_tags.string=False`` (scikit-learn's "the input can be
  an array-like of strings"), where text columns are categorical;
- ``Peer(engine="fedforest")`` on fewer rows than its floor was refused with the
  estimator's advice, "lower min_aggregate_rows ... or use privacy="none"", neither of
  which ``Peer`` took;
- ``fedforest predict MODEL DATA --out DATA`` wrote the predictions over the rows, ``export
  --out`` over the model or ``--data``, ``train --out`` over a client's file, silently;
  and ``train`` given one file for two clients trained on its rows twice, silently;
- ``fedforest.load`` (``inspect``, ``predict``, ``export``) of a swarm bundle said what it
  is, then "Was it written by fedforest's save()? Re-create it by saving the fitted model
  again", which it was not to be;
- ``fedforest train`` and ``simulate`` with ``--seed`` above 2**32 - 1 stopped with the
  estimator's error naming ``random_state`` (``simulate`` after making its data), not the
  option;

and a tidy: ``is_int_in`` (``fedforest/_common.py``), the one test of a count that files,
messages and arguments wrote out a dozen times, checked against the expression it replaced.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import check_dtype_object

import fedforest
from fedforest import Client, FedForestClassifier, FedForestRegressor
from fedforest._common import is_int_in
from fedforest.cli import main
from fedforest.swarm import Peer, fit_intersection


def _mixed(n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.choice(["Lyon", "Nice"], n), rng.normal(size=n)]).astype(object)
    X[:, 1] = X[:, 1].astype(float)
    X[::7, 0] = 3.5  # a number among the text
    return X, (rng.random(n) > 0.5).astype(int)


@pytest.mark.parametrize("privacy", ["secure", "none"])
@pytest.mark.parametrize("frame", [False, True])
def test_a_categorical_column_of_text_and_numbers_is_refused_naming_it(
    privacy: str, frame: bool
) -> None:
    X, y = _mixed()
    data, column = (pd.DataFrame(X, columns=["city", "dose"]), "city") if frame else (X, 0)
    est = FedForestClassifier(n_estimators=2, privacy=privacy, categorical_features=[column])
    with pytest.raises(ValueError, match=f"categorical column {column!r} mixes text and numbers"):
        est.fit(data, y)
    with pytest.raises(ValueError, match=r"Client 'a': .* mixes text and numbers \(float, str"):
        Client(data, y, "a", categorical_features=[column])
    # Missing values beside text are the missing category, not a number.
    X[::7, 0] = None
    FedForestClassifier(n_estimators=2, privacy=privacy, categorical_features=[0]).fit(X, y)


@pytest.mark.parametrize("privacy", ["secure", "none"])
def test_declared_classes_and_levels_of_text_and_numbers_are_refused(privacy: str) -> None:
    X, y = _mixed()
    X[::7, 0] = "Pau"
    est = FedForestClassifier(n_estimators=2, privacy=privacy, categorical_features=[0])
    for classes in ([0, 1, "a"], [[0, 1], [0, "a"]]):
        with pytest.raises(ValueError, match=r"classes mixes text and numbers \(int, str values"):
            clone_of(est, classes=classes).fit(X, y)
    with pytest.raises(ValueError, match="classes holds a missing value"):
        clone_of(est, classes=[0, 1, np.nan]).fit(X, y)
    with pytest.raises(ValueError, match=r"categories\[0\] mixes text and numbers"):
        clone_of(est, categories={0: ["Lyon", "Nice", "Pau", 3]}).fit(X, y)
    with pytest.raises(ValueError, match="classes mixes"):  # fit_federated's too
        clients = [Client(X, y, "a", categorical_features=[0])]
        clone_of(est, classes=[0, 1, "a"]).fit_federated(clients)
    # One kind each: the classes keep the labels' type, predictions score.
    model = clone_of(est, classes=[0, 1, 2], categories={0: ["Lyon", "Nice", "Pau", "Sète"]})
    assert model.fit(X, y).classes_.dtype.kind == "i" and 0 <= model.score(X, y) <= 1


def clone_of(est: Any, **params: Any) -> Any:
    return clone(est).set_params(**params)


@pytest.mark.parametrize("cls", [FedForestRegressor, FedForestClassifier])
def test_the_tags_say_text_is_taken(cls: Any) -> None:
    tags = get_tags(cls())
    assert tags.input_tags.string and not tags.input_tags.categorical
    assert tags.input_tags.allow_nan and tags.input_tags.sparse
    X, y = _mixed()
    X[::7, 0] = "Pau"
    est = cls(n_estimators=2, privacy="none", random_state=0)
    assert est.fit(pd.DataFrame(X, columns=["city", "dose"]), y).n_features_in_ == 2
    assert est.set_params(categorical_features=[0]).fit(X, y).predict(X).shape == (60,)


@pytest.mark.parametrize("cls", [FedForestRegressor, FedForestClassifier])
def test_check_dtype_object_passes_as_it_does_without_the_string_tag(cls: Any) -> None:
    """With the string tag the check skips its dict cell (a vectorizer's input); without
    it, fit must refuse one with NumPy's TypeError: it still does."""

    class Untagged(cls):  # type: ignore[misc, valid-type]
        def __sklearn_tags__(self) -> Any:
            tags = super().__sklearn_tags__()
            tags.input_tags.string = False
            return tags

    check_dtype_object(cls.__name__, Untagged(n_estimators=3, random_state=0))


def _site(n: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"age": rng.normal(50, 10, n), "bmi": rng.normal(27, 4, n)})
    return X, (X["age"] + rng.normal(0, 5, n) > 50).to_numpy(dtype=int)


def test_a_bundle_given_as_a_model_is_not_told_to_re_save_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = _site(40)
    path = tmp_path / "pëer A.ffb"
    Peer("A", 3, random_state=0).fit(X, y).share().save(path)
    with pytest.raises(ValueError, match="it is a swarm share bundle") as err:
        fedforest.load(path)
    assert "written by fedforest's save()" not in str(err.value)
    assert "Re-create" not in str(err.value)
    with pytest.raises(SystemExit):
        main(["inspect", str(path)])
    assert "ShareBundle.load or load_bundles.\n" in capsys.readouterr().err


def test_a_fedforest_peer_takes_min_aggregate_rows_and_says_so_when_too_few_rows() -> None:
    X, y = _site(8)
    with pytest.raises(
        ValueError, match=r"peer 'A' has 8 rows, fewer than min_aggregate_rows = 10 \(unless set"
    ) as err:
        Peer("A", 3, random_state=0, engine="fedforest").fit(X, y)
    assert "engine='sklearn'" in str(err.value) and 'privacy="none"' not in str(err.value)
    with pytest.raises(ValueError, match="min_aggregate_rows = 12"):  # 2 * ceil(0.7 * 8)
        Peer("A", 3, engine="fedforest", min_samples_leaf=0.7).fit(X, y)
    with pytest.raises(ValueError, match="applies to engine='fedforest'"):
        Peer("A", 3, min_aggregate_rows=4)
    with (  # 8 rows hold roots of 6 distinct rows or fewer: none splits (since fric27)
        pytest.warns(UserWarning, match="min_aggregate_rows=4 is below 10"),
        pytest.warns(UserWarning, match=r"single leaf.*fewer than 2 \* 4\. \(peer 'A'\)"),
    ):
        peer = Peer("A", 3, random_state=0, engine="fedforest", min_aggregate_rows=4).fit(X, y)
    # 40 rows gave roots of 29 distinct rows or fewer: no tree split (the warning of
    # fric27 said so), and the floor below held of single leaves. 80 rows: every tree splits.
    X, y = _site(80)
    peer = Peer("A", 5, random_state=0, engine="fedforest", min_aggregate_rows=15).fit(X, y)
    assert all(t.feature.size > 1 for t in peer.trees_)
    leaves = [t.n_node_samples[t.children_left == -1] for t in peer.trees_]
    assert min(leaf.min() for leaf in leaves) >= 15
    default = Peer("A", 5, random_state=0, engine="fedforest").fit(X, y).trees_  # floor 10
    assert min(t.n_node_samples[t.children_left == -1].min() for t in default) < 15
    assert fit_intersection([peer])[0].min_aggregate_rows == 15  # its retrained peers keep it


_ODD_COUNTS = [0, 1, 5, -1, 2**53, True, False, 1.0, 2.5, "3", None, [1], np.int64(4), np.int8(-2)]
_ODD_COUNTS += [np.uint64(7), np.float64(3.0), np.bool_(True), float("nan")]


@pytest.mark.parametrize("value", _ODD_COUNTS, ids=repr)
@pytest.mark.parametrize(("low", "high"), [(0, None), (1, None), (1, 10_001), (0, 5)])
@pytest.mark.parametrize("numpy", [False, True])
def test_is_int_in_is_the_test_it_replaced(value: Any, low: int, high: Any, numpy: bool) -> None:
    kinds = (int, np.integer) if numpy else int
    old = isinstance(value, bool) or not isinstance(value, kinds) or value < low
    if high is not None:
        old = old or not value < high
    assert is_int_in(value, low, high, numpy=numpy) is (not old)


def _files(tmp_path: Path) -> tuple[list[Path], list[str]]:
    """Two clients' CSV files in a folder whose name has a space and accents."""
    folder = tmp_path / "dé jà"
    folder.mkdir()
    X, y = _site(60)
    paths = [folder / "site 0.csv", folder / "site=1.csv"]
    for k, path in enumerate(paths):
        X.assign(y=y)[k * 30 : (k + 1) * 30].to_csv(path, index=False)
    return paths, ["--client", f"a={paths[0]}", "--client", f"b={paths[1]}", "--target", "y"]


@pytest.mark.filterwarnings("ignore:.*no out-of-bag prediction:UserWarning")  # 2 trees
def test_out_naming_an_input_file_is_refused_before_it_is_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths, clients = _files(tmp_path)
    model = paths[0].parent / "mödel.ffm"
    train = ["train", *clients, "--trees", "2", "--privacy", "none", "--out"]
    assert main([*train, str(model)]) == 0
    rows = os.path.join(paths[0].parent, ".", "site 0.csv")  # the same file, spelt otherwise
    kept = {path: path.read_bytes() for path in [*paths, model]}
    refused = [
        ([*train, str(paths[1])], "the file of --client b="),
        (["predict", str(model), rows, "--out", str(paths[0])], "DATA"),
        (["predict", str(model), str(paths[0]), "--out", str(model)], "MODEL"),
        (["export", str(model), "--to", "onnx", "--out", str(model)], "MODEL"),
        (["export", str(model), "--to", "shap", "--data", rows, "--out", str(paths[0])], "--data"),
    ]
    for argv, what in refused:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert f"is {what}" in capsys.readouterr().err
        assert all(path.read_bytes() == data for path, data in kept.items())
    out = paths[0].parent / "prédictions.csv"
    assert main(["predict", str(model), str(paths[0]), "--out", str(out)]) == 0
    assert main(["predict", str(model), str(paths[0]), "--out", str(out)]) == 0  # rewritten
    assert len(pd.read_csv(out)) == 30


def test_one_file_for_two_clients_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths, clients = _files(tmp_path)
    again = os.path.join(paths[0].parent, ".", "site 0.csv")
    with pytest.raises(SystemExit) as exc:  # its rows would count twice
        main(["train", *clients, "--client", f"c={again}", "--out", str(tmp_path / "m.ffm")])
    assert exc.value.code == 2
    assert f"--client 'c={again}': client 'a' reads that file already" in capsys.readouterr().err
    assert not (tmp_path / "m.ffm").exists()


@pytest.mark.parametrize("command", ["train", "simulate"])
def test_a_seed_above_what_scikit_learn_takes_names_the_option(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "--seed", str(2**32), "--out", str(tmp_path / "x.png")]
    if command == "train":
        argv += ["--client", "a=a.csv", "--target", "y"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "argument --seed: must be <= 4294967295, got 4294967296" in capsys.readouterr().err
