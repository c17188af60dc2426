"""Odd inputs, fifth round: the swarm's peers and sites (docs/swarm.md).

Each test failed on ec90c47:

- a peer's text labels as ``read_csv`` gives them (an ``object`` column), or as a pandas
  ``category`` or ``string[pyarrow]`` column, fitted, then ``share()`` refused them: "class
  labels must be numbers or strings, got object"; ``object`` numbers gave scikit-learn's
  "Unknown label type: unknown", text mixed with numbers NumPy's ``DTypePromotionError``,
  and datetime labels fitted and were refused at ``share()``;
- a peer's ``object`` column of numbers (pandas' dtype after a merge, ``astype(object)``
  or a column built from Python values) was a text column: every distinct value a category,
  all of them written in the bundle's category lists, where the estimators and
  scikit-learn read it as numbers; ``bool[pyarrow]`` columns were refused as not numeric;
- a peer's ``categorical_features`` given as a pandas Index (``df.select_dtypes(...).columns``)
  was pandas' "truth value of an Index is ambiguous", as a boolean mask or as the index of a
  column named by a number "not columns of X", and a string's letters were read as names;
- ``load_bundles("A.ffb")`` (one path, not a list) read each character as a path: "Is a
  directory: '/'" for an absolute path;
- a site's ``object`` column of numbers with ``None`` for an unmeasured value, or a
  ``bool[pyarrow]`` column, was refused by ``SwarmForest.predict_proba`` ("has dtype
  object; expected numbers"); a site frame with a duplicated column name failed with
  pandas' ``AttributeError``;
- ``fedforest predict --out PRED.parquet`` wrote CSV text into the ``.parquet`` file (the
  command reads Parquet, ``pd.read_parquet`` of its output failed), and so did ``export
  --to shap``; ``fedforest simulate --out fig.pdf`` (or ``.svg``, ``.jpg``) wrote PNG bytes
  under that name, silently; ``fedforest experiment swarm-overlap`` without a Friedman test
  (fewer than 3 strategies or 2 blocks) printed the ranks an earlier run had left in
  ``--out`` as its own, strategies it did not run among them;
- ``fedforest experiment swarm-overlap`` with a value repeated in ``--strategies`` ended
  in a ``TypeError`` traceback after the runs, and one repeated in ``--datasets``,
  ``--peers`` or ``--jaccards`` ran those scenarios twice, counting them twice in the
  Friedman test; ``--seed -1`` was NumPy's traceback; ``fedforest experiment NAME
  --seed S`` with ``1000 * S + reps - 1`` above 2**32 - 1 (a repetition's seed) was
  NumPy's "Seed must be between 0 and 2**32 - 1" traceback after the set-up;
- ``Client(X, y, None)`` (a name looked up and not found), ``float("nan")`` or ``""`` was
  a client named "None", "nan" or "", where ``fit`` refuses a missing client label; two
  such clients were told "'None' appears twice";

and one pin: a client named by a number is named by its text, as before.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedforest import Client, FedForestRegressor
from fedforest.cli import main
from fedforest.experiments._runner import SEED_OFFSETS, check_seed
from fedforest.swarm import Peer, ShareBundle, SwarmForest, load_bundles, shared_columns


def _sites(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    age, bmi, smoker = rng.normal(50, 10, n), rng.normal(27, 4, n), rng.integers(0, 2, n)
    y = (0.1 * (age - 50) + 0.3 * (bmi - 27) + 2 * smoker + rng.normal(0, 1, n) > 1).astype(int)
    a = pd.DataFrame({"age": age, "bmi": bmi})
    b = pd.DataFrame({"age": age, "smoker": smoker})
    return a, b, y


def _peer(name: str = "A", **kwargs: object) -> Peer:
    return Peer(name, n_estimators=10, random_state=0, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", [object, "category", "string[pyarrow]"])
@pytest.mark.parametrize("engine", ["sklearn", "fedforest"])
def test_a_peers_text_labels_from_pandas_are_shared_as_strings(dtype: object, engine: str) -> None:
    a, b, y = _sites()
    text = np.where(y == 1, "sick", "well")
    peers = [
        _peer("A", engine=engine).fit(a[:150], pd.Series(text[:150], dtype=dtype)),
        _peer("B", engine=engine).fit(b[150:], text[150:], categorical_features=["smoker"]),
    ]
    common = shared_columns(peers)
    swarm = SwarmForest([p.share(common) for p in peers])
    assert swarm.classes_.tolist() == ["sick", "well"]
    assert set(swarm.predict(a[:20], strategy="mp")) <= {"sick", "well"}


def test_a_peers_labels_as_object_numbers_are_numbers() -> None:
    a, _, y = _sites()
    bundle = _peer().fit(a, pd.Series(y, dtype=object)).share()
    assert bundle.classes.dtype.kind in "iu" and bundle.classes.tolist() == [0, 1]


def test_a_peers_labels_no_bundle_can_hold_are_refused_at_fit() -> None:
    a, _, y = _sites()
    with pytest.raises(ValueError, match=r"y has dtype datetime64.*numbers or strings"):
        _peer().fit(a, pd.Series(pd.to_datetime(y, unit="D")))
    mixed = pd.Series(np.where(y == 1, "sick", "well"), dtype=object)
    mixed[y == 0] = 0
    with pytest.raises(ValueError, match=r"y mixes labels of types int, str"):
        _peer().fit(a, mixed)
    missing = pd.Series(np.where(y == 1, "sick", "well"), dtype=object)
    missing[3] = None
    with pytest.raises(ValueError, match=r"y holds a missing label \(row 3\)"):
        _peer().fit(a, missing)


def test_a_peers_object_column_of_numbers_is_numeric() -> None:
    a, _, y = _sites()
    as_objects = a.astype({"age": object})
    peer = _peer().fit(as_objects, y)
    assert peer.feature_kinds_ == ("numeric", "numeric") and peer.categories_ == {}
    assert "age" not in peer.share().categories  # no level list of every age
    same = _peer().fit(a, y)
    assert np.array_equal(peer.X_, same.X_)
    for mine, theirs in zip(peer.trees_, same.trees_, strict=True):
        assert np.array_equal(mine.threshold, theirs.threshold)


def test_a_peers_pyarrow_boolean_column_is_numeric_as_bool() -> None:
    _, b, y = _sites()
    flags = b.assign(smoker=b["smoker"].astype(bool))
    arrow = flags.astype({"smoker": "bool[pyarrow]"})
    peer, same = _peer().fit(arrow, y), _peer().fit(flags, y)
    assert peer.feature_kinds_ == same.feature_kinds_ == ("numeric", "numeric")
    assert np.array_equal(peer.X_, same.X_)


def _swarm() -> tuple[SwarmForest, pd.DataFrame]:
    a, b, y = _sites()
    peers = [
        _peer("A").fit(a[:150], y[:150]),
        _peer("B").fit(b[150:], y[150:], categorical_features=["smoker"]),
    ]
    common = shared_columns(peers)
    return SwarmForest([p.share(common) for p in peers]), b[:40]


@pytest.mark.parametrize("strategy", ["mp", "ss", "ipr"])
def test_a_sites_object_numbers_with_none_are_unavailable_values(strategy: str) -> None:
    swarm, site = _swarm()
    as_nan = site.assign(age=site["age"].where(site.index % 3 != 0))
    as_objects = as_nan.astype({"age": object})
    as_objects.loc[as_nan["age"].isna(), "age"] = None
    assert as_objects["age"].isna().sum() == 14
    expected = swarm.predict_proba(as_nan, strategy=strategy, random_state=0)
    got = swarm.predict_proba(as_objects, strategy=strategy, random_state=0)
    assert np.array_equal(got, expected)


def test_a_sites_pyarrow_boolean_column_is_read_as_bool() -> None:
    swarm, site = _swarm()
    flags = site.assign(smoker=site["smoker"].astype(bool))
    arrow = flags.astype({"smoker": "bool[pyarrow]"})
    assert np.array_equal(
        swarm.predict_proba(arrow, strategy="mp"), swarm.predict_proba(flags, strategy="mp")
    )


def test_a_site_frame_with_a_duplicated_column_is_refused_naming_it() -> None:
    swarm, site = _swarm()
    twice = pd.concat([site, site[["age"]]], axis=1)
    with pytest.raises(ValueError, match=r"X_site has the column 'age' twice"):
        swarm.predict_proba(twice, strategy="mp")


def test_a_bundle_of_text_labels_survives_its_file(tmp_path: object) -> None:
    a, _, y = _sites()
    bundle = _peer().fit(a, pd.Series(np.where(y == 1, "sick", "well"), dtype=object)).share()
    path = f"{tmp_path}/a.ffb"
    bundle.save(path)
    assert ShareBundle.load(path).classes.tolist() == ["sick", "well"]


def _model(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    paths = []
    for k in range(2):
        site = pd.DataFrame({"a": rng.normal(size=80), "b": rng.normal(size=80)})
        site["y"] = (site["a"] + rng.normal(0, 0.3, 80) > 0).map({True: "p", False: "n"})
        paths.append(tmp_path / f"site_{k}.csv")
        site.to_csv(paths[-1], index=False)
    model = tmp_path / "m.ffm"
    argv = ["train", "--client", f"a={paths[0]}", "--client", f"b={paths[1]}", "--target", "y"]
    argv += ["--task", "classification", "--trees", "20", "--privacy", "none", "--out", str(model)]
    assert main(argv) == 0
    return model, paths[1]


@pytest.mark.parametrize("suffix", [".parquet", ".PQ"])
def test_predict_out_parquet_writes_parquet(tmp_path: Path, suffix: str) -> None:
    model, data = _model(tmp_path)
    assert main(["predict", str(model), str(data), "--out", str(tmp_path / "p.csv")]) == 0
    assert main(["predict", str(model), str(data), "--out", str(tmp_path / f"p{suffix}")]) == 0
    expected = pd.read_csv(tmp_path / "p.csv")
    got = pd.read_parquet(tmp_path / f"p{suffix}")
    assert list(got.columns) == ["prediction", "proba_n", "proba_p"]
    pd.testing.assert_frame_equal(got, expected)


@pytest.mark.parametrize("name", ["fig.pdf", "fig.svg", "fig.JPG", "fig"])
def test_simulate_out_of_another_format_is_refused_before_it_runs(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / name
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --out: {str(out)!r} does not end in .png" in err
    assert not out.exists()


def test_export_shap_out_parquet_writes_parquet(tmp_path: Path) -> None:
    pytest.importorskip("shap")
    model, data = _model(tmp_path)
    for name in ["s.csv", "s.parquet"]:
        argv = ["export", str(model), "--to", "shap", "--data", str(data)]
        assert main([*argv, "--out", str(tmp_path / name)]) == 0
    expected = pd.read_csv(tmp_path / "s.csv")
    assert "base_value_p" in expected.columns
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "s.parquet"), expected)


def test_swarm_experiment_prints_no_ranks_an_earlier_run_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["experiment", "swarm-overlap", "--datasets", "wine", "--peers", "2", "--reps", "1"]
    base += ["--trees", "3", "--n-jobs", "1", "--out", str(tmp_path)]
    assert main([*base, "--jaccards", "0.5", "0.7", "--strategies", "local", "fpv", "mp"]) == 0
    assert "average AUPRC rank" in capsys.readouterr().out
    assert main([*base, "--jaccards", "0.5", "--strategies", "local", "fpv"]) == 0
    out = capsys.readouterr().out
    assert "auprc: no Friedman test" in out and "average AUPRC rank" not in out


@pytest.mark.parametrize("name", [None, float("nan"), pd.NA, "", "  "])
def test_a_client_without_a_name_is_refused(name: object) -> None:
    a, _, y = _sites(40)
    with pytest.raises(ValueError, match=r"Client name must be a non-empty label.*got"):
        Client(a, y.astype(float), name)  # type: ignore[arg-type]


def test_a_client_named_by_a_number_is_its_text() -> None:
    a, _, y = _sites(200)
    clients = [Client(a[:100], y[:100] + 0.5, 7), Client(a[100:], y[100:] + 0.5, "8")]  # type: ignore[arg-type]
    model = FedForestRegressor(n_estimators=2, privacy="none", random_state=0)
    assert model.fit_federated(clients).clients_.tolist() == ["7", "8"]


@pytest.mark.parametrize(
    ("option", "values", "named"),
    [
        ("--strategies", ["mp", "mp", "fpv"], "mp"),
        ("--datasets", ["wine", "wine"], "wine"),
        ("--peers", ["2", "2"], "2"),
        ("--jaccards", ["0.5", "0.5"], "0.5"),
        ("--seed", ["-1"], None),
    ],
)
def test_swarm_experiment_options_repeated_or_negative_are_usage_errors(
    option: str, values: list[str], named: str | None, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    argv = ["experiment", "swarm-overlap", "--datasets", "wine", "--peers", "2", "--reps", "1"]
    argv += ["--trees", "3", "--n-jobs", "1", "--out", str(tmp_path / "out"), option, *values]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    if named is None:
        assert "--seed must be >= 0, got -1" in err
    else:
        assert f"{option} gives {named} more than once" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("seed", "reps"), [("4294967295", "1"), ("4294968", "1"), ("4294967", "300")]
)
def test_experiment_seed_no_repetition_can_use_is_a_usage_error(
    seed: str, reps: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "fedheart", "--reps", reps, "--seed", seed, "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"fedforest experiment: error: argument --seed: seed {seed}: repetition r" in err
    top = (2**32 - 1 - SEED_OFFSETS - (int(reps) - 1)) // 1000
    assert f"give a seed in [0, {top}]" in err and not out.exists()


def test_the_largest_seed_allowed_seeds_every_split() -> None:
    from fedforest.experiments import real

    assert real._FLAMBY_SEED <= SEED_OFFSETS
    top = (2**32 - 1 - SEED_OFFSETS) // 1000
    check_seed(top, 1)
    real.fed_heart_disease_split(real.load_fed_heart_disease(), random_state=top * 1000 + 43)


@pytest.mark.parametrize(
    "declared", [["smoker"], pd.Index(["smoker"]), np.array(["smoker"]), [False, True], [1]]
)
def test_a_peers_categorical_features_are_resolved_as_the_estimators_resolve_them(
    declared: object,
) -> None:
    _, b, y = _sites()
    peer = _peer().fit(b, y, categorical_features=declared)  # type: ignore[arg-type]
    assert peer.feature_kinds_ == ("numeric", "categorical")


def test_a_peers_columns_named_by_numbers_are_named_by_index() -> None:
    _, b, y = _sites()
    numbered = b.set_axis([0, 1], axis=1)
    peer = _peer().fit(numbered, y, categorical_features=[1])
    assert peer.feature_names_ == ("0", "1") and peer.feature_kinds_ == ("numeric", "categorical")


def test_a_peers_categorical_features_as_one_string_is_refused() -> None:
    _, b, y = _sites()
    with pytest.raises(ValueError, match=r"a list of columns, got the string 'smoker'"):
        _peer().fit(b, y, categorical_features="smoker")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"categorical_features \['ward'\] are not columns"):
        _peer().fit(b, y, categorical_features=["ward"])


def test_load_bundles_of_one_path_says_to_give_a_list(tmp_path: Path) -> None:
    a, _, y = _sites()
    path = tmp_path / "a.ffb"
    _peer().fit(a, y).share().save(path)
    for one in [str(path), path]:
        with pytest.raises(TypeError, match=r"a list of bundle files, got one path"):
            load_bundles(one)  # type: ignore[arg-type]
    assert [b.name for b in load_bundles([path])] == ["A"]
