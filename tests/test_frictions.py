"""Frictions of issue 16 ("smaller" list), each pinned by a test."""

import argparse
import subprocess
import sys

import numpy as np
import pytest

from fedforest import cli


def test_python_dash_m_fedforest_runs_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "fedforest", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fedforest ")


def test_unknown_experiment_lists_every_experiment(capsys):
    from fedforest.experiments._catalog import CATALOG
    from fedforest.experiments.swarm import SUBCOMMAND

    with pytest.raises(SystemExit) as exc:
        cli.main(["experiment", "nosuch"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for name in [*CATALOG, SUBCOMMAND]:
        assert repr(name) in err, name


def test_swarm_module_usage_names_the_command_it_takes(capsys):
    """``python -m fedforest.experiments.swarm`` implies its subcommand: its usage line and
    errors give the command as typed (they added ``swarm-overlap``, which it refuses)."""
    from fedforest.experiments import swarm

    with pytest.raises(SystemExit) as exc:
        swarm.main(["--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m fedforest.experiments.swarm [-h]")
    with pytest.raises(SystemExit) as exc:
        swarm.main(["--reps", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m fedforest.experiments.swarm [-h]"), err
    assert "python -m fedforest.experiments.swarm: error: argument --reps" in err


def test_simulate_out_in_missing_directory_names_the_path(monkeypatch, capsys):
    import fedforest.simulate

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking --out")

    monkeypatch.setattr(fedforest.simulate, "run_simulation", no_training)
    with pytest.raises(SystemExit) as exc:
        cli.main(["simulate", "--out", "/nonexistent/x.png"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: fedforest simulate"), err
    assert "/nonexistent" in err
    assert "does not exist" in err


def _parsers():
    """Every parser of the command: the top level, its subcommands, the swarm ones."""
    todo = [cli.build_parser(), cli.build_swarm_parser()]
    seen = []
    while todo:
        parser = todo.pop()
        seen.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return seen


def test_every_option_of_every_subcommand_has_help():
    parsers = _parsers()
    assert {p.prog for p in parsers} >= {
        "fedforest",
        "fedforest simulate",
        "fedforest experiment",
        "fedforest experiment swarm-overlap",
    }
    missing = [
        f"{p.prog} {'/'.join(a.option_strings) or a.dest}"
        for p in parsers
        for a in p._actions
        if not a.help
    ]
    assert not missing, missing


def _documented_defaults(doc: str) -> dict[str, str | None]:
    """``name -> the text after default=`` (None where no default is stated, "None" for
    ``optional``) of a numpydoc Parameters section; ``a, b : int, default=2, 5`` gives
    one to each."""
    import re

    section = doc.split("Parameters\n", 1)[1]
    section = re.split(r"\n\s*(?:Attributes|Returns|Raises)\n", section)[0]
    documented: dict[str, str | None] = {}
    for line in section.splitlines():
        match = re.match(r"\s*([A-Za-z_][A-Za-z0-9_, ]*) : (.*)$", line)
        if match:
            names = [p.strip() for p in match.group(1).split(",")]
            stated = re.search(r"default=(.*)$|, (optional)$", match.group(2))
            if stated and stated.group(2):
                documented.update(dict.fromkeys(names, "None"))
                continue
            values = stated.group(1).split(", ") if stated else []
            if len(values) != len(names):
                values = [stated.group(1)] * len(names) if stated else [None] * len(names)
            documented.update(zip(names, values, strict=True))
    return documented


@pytest.mark.parametrize("name", ["FedForestRegressor", "FedForestClassifier"])
def test_every_parameter_is_in_the_docstring(name):
    import fedforest

    cls = getattr(fedforest, name)
    doc = cls.__doc__
    documented = _documented_defaults(doc)
    assert set(cls().get_params()) <= set(documented), set(cls().get_params()) - set(documented)
    assert "Same parameters as" not in doc


@pytest.mark.parametrize("name", ["FedForestRegressor", "FedForestClassifier"])
def test_every_parameter_is_on_the_sklearn_page(name):
    """docs/sklearn.md names every parameter (scikit-learn's and fedforest's own)."""
    from pathlib import Path

    import fedforest

    page = (Path(__file__).resolve().parents[1] / "docs" / "sklearn.md").read_text()
    missing = [p for p in getattr(fedforest, name)().get_params() if f"`{p}`" not in page]
    assert not missing, missing


@pytest.mark.parametrize(("command", "page"), [("train", "cli.md"), ("simulate", "simulate.md")])
def test_option_tables_give_the_parsers_defaults(command, page):
    """Each option of the command has a row in its page's table, whose default is the
    parser's (``none`` or ``(required ...)`` where the parser's is None)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / page).read_text()
    rows = {
        m.group(1): m.group(2).strip().strip("`")
        for m in re.finditer(r"^\| `(--[\w-]+)[^`]*` \| ([^|]*) \|", text, re.M)
    }
    (parser,) = [p for p in _parsers() if p.prog == f"fedforest {command}"]
    wrong = []
    for action in parser._actions:
        option = next((o for o in action.option_strings if o.startswith("--")), None)
        if option in (None, "--help"):
            continue
        stated = rows.get(option)
        if stated is None:
            wrong.append(f"{option}: no row")
        elif action.default is None:
            if not stated.startswith(("none", "(required")):
                wrong.append(f"{option}: {stated!r} stated, no default")
        elif stated != str(action.default):
            wrong.append(f"{option}: {stated!r} stated, {action.default!r} in the parser")
    assert not wrong, wrong


def _public_callables():
    import fedforest as ff
    from fedforest import swarm

    return [
        ff.FedForestRegressor,
        ff.FedForestClassifier,
        ff.Client,
        ff.LocalFederation,
        ff.diagnose,
        swarm.Peer,
        swarm.Peer.fit,
        swarm.Peer.from_fitted,
        swarm.Peer.share,
        swarm.SwarmForest,
        swarm.SwarmForest.predict_proba,
        swarm.load_bundles,
        *_predict_entry_points(),
    ]


def _predict_entry_points():
    """Prediction and file entry points: Parameters (and Returns where they return)."""
    import fedforest as ff
    from fedforest import swarm

    return [
        ff.FedForestRegressor.predict,
        ff.FedForestClassifier.predict,
        ff.FedForestClassifier.predict_proba,
        ff.FedForestClassifier.predict_log_proba,
        ff.load,
        swarm.SwarmForest.predict,
        swarm.ShareBundle.save,
        swarm.ShareBundle.load,
    ]


def _documented_names(doc: str) -> set[str]:
    """Every name a numpydoc Parameters section documents (``**kwargs`` as ``kwargs``)."""
    import re

    section = doc.split("Parameters\n", 1)[1]
    section = re.split(r"\n\s*(?:Attributes|Returns|Raises)\n", section)[0]
    lines = [line for line in section.splitlines()[1:] if line.strip()]  # past the dashes
    indent = min(len(line) - len(line.lstrip()) for line in lines)
    names: set[str] = set()
    for line in lines:  # a name's line, not its description's (indented further)
        match = re.match(r"\**([A-Za-z_][A-Za-z0-9_, ]*?)(?: : .*)?$", line[indent:])
        if match and len(line) - len(line.lstrip()) == indent:
            names.update(n.strip() for n in match.group(1).split(","))
    return names


def _check_sections(func) -> list[str]:
    import inspect

    doc = inspect.getdoc(func) or ""
    if "Parameters\n" not in doc:
        return ["no Parameters section"]
    skip = {"self", "cls"}
    params = [n for n in inspect.signature(func).parameters if n not in skip]
    wrong = [f"{n}: not in Parameters" for n in params if n not in _documented_names(doc)]
    returns = inspect.signature(func).return_annotation
    if returns not in (None, "None") and "\nReturns\n-------\n" not in doc:
        wrong.append("no Returns section")
    return wrong


@pytest.mark.parametrize("func", _predict_entry_points(), ids=lambda f: f.__qualname__)
def test_entry_points_document_every_parameter_and_the_return(func):
    wrong = _check_sections(func)
    assert not wrong, wrong


def test_dask_from_collections_documents_its_own_parameters():
    """Its ``client``, ``timeout``, ``start_timeout`` were "As in the constructor"."""
    pytest.importorskip("distributed")
    from fedforest.transport.dask import DaskFederation

    func = DaskFederation.from_collections
    assert not _check_sections(func), _check_sections(func)
    assert "As in the constructor" not in func.__doc__
    test_docstrings_state_the_real_defaults(func)


@pytest.mark.parametrize("func", _public_callables(), ids=lambda f: f.__qualname__)
def test_docstrings_state_the_real_defaults(func):
    """Every parameter with a default states it (``default=...``, or ``optional`` for
    None) and the stated one is the signature's."""
    import inspect

    documented = _documented_defaults(func.__doc__)
    wrong = []
    for name, param in inspect.signature(func).parameters.items():
        if param.default is inspect.Parameter.empty:
            continue
        stated = documented.get(name)
        if stated is None:
            wrong.append(f"{name}: no default stated (real {param.default!r})")
            continue
        value = 1 / 3 if stated == "1/3" else eval(stated)  # noqa: S307 (our docstrings)
        if value != param.default:
            wrong.append(f"{name}: default={stated} stated, {param.default!r} real")
    assert not wrong, wrong


def test_classifier_docstring_states_its_own_defaults():
    from fedforest import FedForestClassifier

    doc = FedForestClassifier.__doc__
    assert 'criterion : {"gini", "entropy", "log_loss"}, default="gini"' in doc
    assert 'default="sqrt"' in doc
    assert "client_importance_" in doc


def _heterogeneous(n_clients=3, n=60, d=3, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_clients * n, d))
    client = np.repeat(np.arange(n_clients), n)
    y = X[:, 0] + 3.0 * client + 0.1 * rng.normal(size=len(client))
    return X, y, client


@pytest.mark.parametrize("split_on_client", [True, False])
def test_feature_importances_match_the_features_and_client_share_is_apart(
    split_on_client, tmp_path
):
    import numpy as np
    import pandas as pd

    import fedforest as ff

    X, y, client = _heterogeneous()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    model = ff.FedForestRegressor(
        n_estimators=4, max_depth=3, privacy="none", split_on_client=split_on_client,
        random_state=0,
    )  # fmt: skip
    model.fit(frame, y, client_ids=client)
    assert model.feature_importances_.shape == model.feature_names_in_.shape == (3,)
    assert isinstance(model.client_importance_, float)
    if split_on_client:
        assert model.client_importance_ > 0.3
    else:
        assert model.client_importance_ == 0.0
    total = model.feature_importances_.sum() + model.client_importance_
    np.testing.assert_allclose(total, 1.0)

    path = tmp_path / "m.npz"
    model.save(path)
    loaded = ff.load(path)
    np.testing.assert_array_equal(loaded.feature_importances_, model.feature_importances_)
    assert loaded.client_importance_ == model.client_importance_


def test_simulate_plot_says_lower_is_better_shows_communication_and_one_test_set():
    from fedforest.simulate import LOCAL, SimulateConfig, figure, format_report, run_simulation

    config = SimulateConfig(clients=3, rows_per_client=60, features=5, trees=3, max_depth=3)
    result = run_simulation(config, progress=False)
    fig = figure(result)
    bar_axes = fig.axes[0]
    assert bar_axes.get_ylabel() == "test MSE (lower is better)"
    assert f"same {len(result.y_test)} test rows" in bar_axes.get_title()
    fed = result.methods[0]
    assert f"{fed.mb_sent:.2f} MB" in fig.get_suptitle()
    # Local learning is scored on the same test rows as the others.
    assert result.predictions[LOCAL].shape == result.y_test.shape
    assert "same test rows" in format_report(result)


def test_text_columns_of_a_csv_are_categorical(tmp_path) -> None:
    """pandas 3's read_csv gives text columns dtype str: fit treats them as categories."""
    import io

    import pandas as pd

    import fedforest as ff

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=400), "ward": rng.choice(["a", "b", "c"], 400)})
    y = frame["x"] + 2.0 * (frame["ward"] == "b")
    back = pd.read_csv(io.StringIO(frame.to_csv(index=False)))
    assert not isinstance(back["ward"].dtype, pd.CategoricalDtype)
    model = ff.FedForestRegressor(n_estimators=5, privacy="none", random_state=0)
    model.fit(back, y, client_ids=np.arange(400) % 2)
    assert model.categories_ == {1: ["a", "b", "c"]}
    assert np.mean((model.predict(back) - y) ** 2) < 0.3  # "b" carries 2.0 of the signal
