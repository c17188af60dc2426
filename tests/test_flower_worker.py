"""``fedforest flower-worker``: a SuperNode's ClientApp tasks in one long-lived process.

The end-to-end tests start a real SuperLink and three SuperNodes on 127.0.0.1 (as
``tests/test_flower.py`` does, with its ``Deployment``), the SuperNodes in
``--isolation process`` with a worker each, and compare the saved forest with the local
simulation's. A ClientApp that raises is reported to the ServerApp as with Flower's own
process per message (the same deployment in subprocess isolation is the reference), and
the worker goes on serving the next run.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from flwr.common.constant import ErrorCode

import fedforest as ff
from fedforest.transport.flower import worker
from tests import test_flower
from tests.test_flower import (
    APP,
    PARAMS,
    SEED,
    SITES,
    Deployment,
    _run_config,
    _wait,
    assert_dropped_like_local,
    assert_same_forest,
    local_clients,
    scaled,
)

#: test_flower's fixtures: a deployment, and what a ServerApp process knows of itself.
deploy = test_flower.deploy
task_identity = test_flower.task_identity

# Small forests with oob_score=True: some rows are in every bag (expected here).
pytestmark = pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")

#: The round whose message site-c's ClientApp fails on (privacy="secure": rounds 1-2 are
#: the grid rounds, 3-4 the root's Round A and B, 5 Round A of level 1).
FAIL_ROUND = 5

FAILING_CLIENTAPP = '''
"""fedforest's ClientApp, except that site-c's raises on one round's message ("raise"), or
waits there (at most 10 minutes) after writing the file site-c-waits next to its data."""
import time
from pathlib import Path

from flwr.clientapp import ClientApp
from fedforest.transport.flower import clientapp as fedforest_clientapp

app = ClientApp()


@app.query("fedforest")
def hello(msg, context):
    return fedforest_clientapp.hello(msg, context)


@app.train("fedforest")
def train(msg, context):
    if context.node_config.get("name") == "site-c" and msg.metadata.group_id == "{round}":
        if "{action}" == "wait":
            (Path(context.node_config["data-path"]).parent / "site-c-waits").touch()
            time.sleep(600)
        raise RuntimeError("site-c's ClientApp crashed in round {round}")
    return fedforest_clientapp.train(msg, context)
'''


def failing_app(folder: Path, action: str = "raise") -> Path:
    """A Flower app like the example, whose ClientApp module (shipped in its FAB) fails."""
    folder.mkdir()
    config = (APP / "pyproject.toml").read_text(encoding="utf-8")
    config = config.replace('name = "fedforest-app"', 'name = "fedforest-failing-app"')
    config = config.replace(
        '"fedforest.transport.flower.clientapp:app"', '"fedforest_failing_clientapp:app"'
    )
    assert "fedforest_failing_clientapp:app" in config
    (folder / "pyproject.toml").write_text(config, encoding="utf-8")
    module = FAILING_CLIENTAPP.replace("{round}", str(FAIL_ROUND)).replace("{action}", action)
    (folder / "fedforest_failing_clientapp.py").write_text(module, encoding="utf-8")
    return folder


def worker_log(dep: Deployment, name: str) -> str:
    return (dep.root / f"{name}-worker.log").read_text(errors="replace")


def test_worker_refuses_an_untested_flower(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(worker, "version", lambda name: "1.43.0")
    args = ["--runtime-api-address", "127.0.0.1:1", "--insecure"]
    assert worker.main(args) == 2
    err = capsys.readouterr().err
    assert "Flower 1.42.0" in err and "Flower 1.43.0" in err and "--isolation subprocess" in err
    with pytest.raises(RuntimeError, match="1.43.0"):
        worker.check_flower_version()
    assert worker.check_flower_version(allow_untested=True) == "1.43.0"


def test_worker_command_is_routed_by_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from fedforest.cli import main

    with pytest.raises(SystemExit) as done:
        main(["flower-worker", "--help"])
    assert done.value.code == 0
    assert "--runtime-api-address" in capsys.readouterr().out


def test_worker_deployment_equals_local(deploy: Callable[..., Deployment]) -> None:
    dep = deploy(False, "worker")
    run = dep.run_app(_run_config(dep, **{"round-timeout": scaled(300.0)}))
    output = _wait(run, dep, timeout=scaled(600))
    model_path = dep.root / "model.ffm"
    assert model_path.exists(), f"no model written\n{output}\n{dep.logs()}"
    remote = ff.load(model_path)
    local = ff.FedForestRegressor(**PARAMS, random_state=SEED)
    local.fit_federated(ff.LocalFederation(local_clients(dep.paths)))
    assert_same_forest(remote, local)
    assert remote.communication_.to_dict() == local.communication_.to_dict()
    # Each site's worker answered every message of the run (discovery, the rounds with
    # the keep-awake messages behind each, the end of fit), in one process still serving.
    metrics = json.loads((dep.root / "metrics.json").read_text())
    rounds = metrics["rounds"]
    assert metrics["awake_nodes"] == list(SITES)  # the workers' discovery replies asked
    assert metrics["wait_messages"] >= rounds * len(SITES)  # at least one behind each
    answered = sum(worker_log(dep, name).count(" answered in ") for name in SITES)
    assert answered == len(SITES) * (rounds + 2) + metrics["wait_messages"]
    for name in SITES:
        log = worker_log(dep, name)
        assert " failed in " not in log
        assert dep.procs[f"{name}-worker"].poll() is None


def _run_failing_app(
    dep: Deployment, tmp_path: Path, action: str = "raise", during: Callable[[], None] | None = None
) -> str:
    app = failing_app(tmp_path / "failing-app", action)
    config = _run_config(dep, **{"on-client-failure": "drop", "round-timeout": scaled(300.0)})
    run = dep.run_app(config, app=app)
    if during is not None:
        during()
    output = _wait(run, dep, timeout=scaled(600))
    assert_dropped_like_local(dep, output, "site-c", FAIL_ROUND)
    (dep.root / "model.ffm").unlink()
    return output


@pytest.mark.parametrize("isolation", ["subprocess", "worker"])
def test_a_failing_clientapp_is_reported_as_flower_reports_it(
    deploy: Callable[..., Deployment], tmp_path: Path, isolation: str
) -> None:
    """The ServerApp sees Flower's error reply (the ClientApp's exception) and drops the
    site, in both isolation modes alike; the worker then serves the next run in full.

    ``flwr-clientapp`` quotes the exception's text in its reason; the worker quotes it only
    for fedforest's own refusals (``federated/client_errors.py``): this one, the app's,
    travels as its type, its text in the worker's log."""
    dep = deploy(False, isolation)
    output = _run_failing_app(dep, tmp_path)
    # Flower's error reply: its code for an exception in the ClientApp and its reason.
    code = ErrorCode.CLIENT_APP_RAISED_EXCEPTION
    text = (
        f"site-c's ClientApp crashed in round {FAIL_ROUND}"
        if isolation == "subprocess"
        else "the ClientApp task failed with RuntimeError; its text stays with the client"
    )
    reason = (
        f"Client 'site-c' failed in round {FAIL_ROUND} (round_a): RuntimeError: the "
        f"ClientApp failed (Flower error {code}): <class 'RuntimeError'>:<'{text}"
    )
    assert reason in output, output
    if isolation == "subprocess":
        return
    assert isolation == "subprocess" or "crashed in round" not in output, output
    log = worker_log(dep, "site-c")
    assert log.count(" failed in ") == 1 and "crashed in round" in log, log
    # The same workers serve the next run, site-c's included: all three sites, the forest
    # of the local simulation.
    run = dep.run_app(_run_config(dep, **{"round-timeout": scaled(300.0)}), log_name="run2.log")
    output = _wait(run, dep, timeout=scaled(600))
    model_path = dep.root / "model.ffm"
    assert model_path.exists(), f"no model written\n{output}\n{dep.logs()}"
    remote = ff.load(model_path)
    assert remote.dropped_clients_ == []
    local = ff.FedForestRegressor(**PARAMS, random_state=SEED)
    local.fit_federated(ff.LocalFederation(local_clients(dep.paths)))
    assert_same_forest(remote, local)
    for name in SITES:
        assert dep.procs[f"{name}-worker"].poll() is None
    assert worker_log(dep, "site-c").count(" failed in ") == 1


def test_sigint_during_a_task_ends_the_task_not_the_worker(
    deploy: Callable[..., Deployment], tmp_path: Path
) -> None:
    """What Flower's HTTP retries do to their process when the SuperNode refuses a task's
    token (SIGINT) fails that task, reported as a ClientApp exception; the worker lives on."""
    dep = deploy(False, "worker")
    marker = dep.paths["site-c"].parent / "site-c-waits"

    def interrupt_site_c() -> None:
        deadline = time.monotonic() + scaled(600)
        while not marker.exists():
            assert time.monotonic() < deadline, dep.logs()
            time.sleep(0.1)
        time.sleep(0.5)  # into the ClientApp's sleep
        dep.procs["site-c-worker"].send_signal(signal.SIGINT)

    output = _run_failing_app(dep, tmp_path, "wait", interrupt_site_c)
    assert (
        f"Client 'site-c' failed in round {FAIL_ROUND} (round_a): RuntimeError: the ClientApp "
        f"failed (Flower error {ErrorCode.CLIENT_APP_RAISED_EXCEPTION}): <class "
        "'fedforest.transport.flower.worker.TaskInterrupted'>"
    ) in output, output
    assert dep.procs["site-c-worker"].poll() is None
    log = worker_log(dep, "site-c")
    assert log.count(" failed in ") == 1 and "interrupted by SIGINT" in log, log
