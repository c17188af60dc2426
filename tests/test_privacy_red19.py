"""The nineteenth red team on ``privacy="secure"`` (issue 11, branch ``red19``).

See docs/privacy-findings.md, "Red team 19": what the server side of a real deployment
receives beyond the simulation's recording, and the side channels of odd data.

- **Flower replies on the wire.** Through the real ClientApp, codec and state (the
  in-memory Grid of tests/test_flower.py), three SuperNodes whose files differ in every
  way their data can (60, 110 and 200 rows, missing values at one, a level two rows hold
  at another): each reply's Flower content, deflated as Flower sends it (its objects, each
  content-addressed, and their bytes), is the same size at every client of each round
  after the handshake, and the handshake's differ only by the header fields privacy.md
  lists as public ("Message by message"). Every reply, decoded, has the form (kind,
  header, layout, bytes) the simulation's recording holds for the same fit. Under
  ``"none"`` the sizes differ from the first Round B on (the control).
- **Dask frames and the scheduler.** On a real ``LocalCluster`` (two worker processes,
  the same site files read by each actor's factory on its worker): every frame the
  server's process decodes after the handshake is one length a round at every client;
  the scheduler holds only the actors' tasks (one type, one ``nbytes``); the logs it keeps
  of the workers hold no fedforest record. Under ``"none"`` the frames differ.
- **Error texts, warnings and logs under odd data.** A client of odd data (a NaN, an
  infinity or a huge target, text targets, negative or NaN weights, a date, complex or
  text column, a negative Poisson target, a near-constant column, a level one row holds)
  in a secure fit: the text its transport would send when its data is refused
  (``client_errors.error_header``), the server's exception or drop reason, and every
  warning and fedforest log record of the fit quote no value of the data. With the
  refusal filter off (an injected leak), the same harness reads a value a library quoted.

Nothing was found; no fix; forests unchanged.
"""

from __future__ import annotations

import functools
import logging
import sys
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from distributed import Client as DaskClient
from flwr.app import Message as FlowerMessage
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

import fedforest as ff
from fedforest.federated import client_errors
from fedforest.federated.protocol import HANDSHAKE
from fedforest.transport.dask import DaskFederation
from fedforest.transport.dask import federation as dask_federation
from fedforest.transport.flower import FlowerFederation, client_from_node_config
from fedforest.transport.flower._codec import from_records
from tests._loopback import dask_module_client, scaled
from tests.test_flower import local_clients, task_identity  # noqa: F401 - the ServerApp's identity
from tests.test_privacy import RecordingFederation
from tests.test_privacy_errors import SECRET_TEXT, NotesClient, quoted_values
from tests.test_privacy_red15 import _KeepingGrid
from tests.test_privacy_side_channels import _form

#: Header fields of a secure handshake reply that privacy.md ("Message by message") lists
#: as the client's public metadata: they may differ between clients, nothing else may.
PUBLIC_HANDSHAKE = {"name", "n_samples", "missing_features", "categories", "weighted"}
SITES = {"site-a": 60, "site-b": 110, "site-c": 200}  # names of one length: equal headers
RARE_LEVEL = "zeta-ward"  # site-c's level of two rows (fewer than m: no client names it)


# ---------------------------------------------------------------------------- Flower
def unlike_site_files(folder: Path, seed: int = 0) -> dict[str, Path]:
    """Three CSV files of unlike data: 60, 110 and 200 rows, other shifts and spreads,
    values missing at site-b, a ward level two rows of site-c hold (rarer than ``m``)."""
    rng = np.random.default_rng(seed)
    paths = {}
    for k, (name, n) in enumerate(SITES.items()):
        frame = pd.DataFrame(
            rng.normal(0.3 * k, 1 + 0.3 * k, size=(n, 4)), columns=["age", "bmi", "dose", "score"]
        )
        if k == 1:
            frame.loc[rng.random(n) < 0.2, "bmi"] = np.nan
        ward = rng.choice(["cardio", "neuro", "onco"], size=n).astype(object)
        if k == 2:
            ward[:2] = RARE_LEVEL
        frame["ward"] = ward
        noise = rng.normal(0, 0.3, n)
        frame["y"] = frame["age"] + np.sin(2 * frame["dose"]) + noise
        paths[name] = folder / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


def payload(reply: FlowerMessage) -> tuple[int, int]:
    """A reply's content as Flower sends it: its objects and their deflated bytes."""
    objects = get_all_nested_objects(reply.content)
    return len(objects), sum(len(o.deflate()) for o in objects.values())


def flower_rounds(paths: dict[str, Path], privacy: str) -> tuple[Any, ...]:
    """One fit through the real ClientApp; per round (Flower's ``group_id``) each client's
    reply; the recording of the decoded messages; and the same fit's local recording."""
    kw = {"n_estimators": 3, "max_depth": 4, "random_state": 0, "privacy": privacy}
    grid = _KeepingGrid(paths)
    flower = RecordingFederation(FlowerFederation(grid, min_nodes=3, poll_interval=0.001))
    local = RecordingFederation(ff.LocalFederation(local_clients(paths)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # site-c's rare level, the bags' unscored rows
        ff.FedForestRegressor(**kw, oob_score=True).fit_federated(flower)
        ff.FedForestRegressor(**kw, oob_score=True).fit_federated(local)
    names = {node: ctx.node_config["name"] for node, ctx in grid.contexts.items()}
    rounds: dict[str, dict[str, FlowerMessage]] = defaultdict(dict)
    for reply in grid.replies:
        rounds[reply.metadata.group_id][names[reply.metadata.src_node_id]] = reply
    return rounds, flower, local


def sizes_that_differ(rounds: dict[str, dict[str, FlowerMessage]]) -> list[str]:
    """Rounds after the handshake whose replies differ in Flower's size between clients."""
    found = []
    for group, replies in rounds.items():
        kinds = {from_records(r.content, n).kind for n, r in replies.items()}
        if group == "discovery" or HANDSHAKE in kinds:
            continue
        sizes = {name: payload(r) for name, r in replies.items()}
        if len(set(sizes.values())) > 1:
            found.append(f"round {group} ({', '.join(sorted(kinds))}): {sizes}")
    return found


def test_flower_replies_are_one_size_a_round_and_the_simulation_s_under_secure(
    tmp_path: Path,
) -> None:
    rounds, flower, local = flower_rounds(unlike_site_files(tmp_path), "secure")
    assert len(rounds) == len(flower.rounds) + 1  # the discovery, then one per protocol round
    assert sizes_that_differ(rounds) == []
    # The handshake: one layout (the public key), headers that differ in public fields only,
    # and Flower's size differs by the header's length alone.
    hand = {n: from_records(r.content, n) for n, r in rounds["0"].items()}
    assert {m.kind for m in hand.values()} == {HANDSHAKE}
    private = [
        {k: v for k, v in m.header.items() if k not in PUBLIC_HANDSHAKE} for m in hand.values()
    ]
    assert all(p == private[0] for p in private), private
    assert len({str(m.arrays.keys()) for m in hand.values()}) == 1
    rest = {payload(r)[1] - len(str(r.content.config_records["fedforest"]["header"]))
            for r in rounds["0"].values()}  # fmt: skip
    assert len(rest) == 1, rest
    assert len({payload(r)[0] for r in rounds["0"].values()}) == 1
    # Every decoded reply has the form the simulation's recording holds for the same fit.
    assert len(flower.rounds) == len(local.rounds)
    for (_, got), (_, want) in zip(flower.rounds, local.rounds, strict=True):
        assert {n: _form(m) for n, m in got.items()} == {n: _form(m) for n, m in want.items()}


def test_flower_reply_sizes_follow_the_data_under_none(tmp_path: Path) -> None:
    """The control: each client sends its own nodes' sketches and sparse increments."""
    rounds, _, _ = flower_rounds(unlike_site_files(tmp_path), "none")
    assert len(sizes_that_differ(rounds)) >= 6  # every Round B, and Round A below the roots


# ---------------------------------------------------------------------------- Dask
@pytest.fixture(scope="module")
def dask_client() -> Iterator[DaskClient]:
    """Two single-threaded worker processes on 127.0.0.1, closed (and checked gone) after."""
    yield from dask_module_client(sys.modules[__name__])


def dask_frames(
    client: DaskClient, paths: dict[str, Path], privacy: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[dict[str, int]], dict[str, Any], list[str]]:
    """One fit through actors that read the site files on their workers: the length of
    every frame the server decodes, per round; the scheduler's tasks (state, type,
    ``nbytes``) before the federation closes; the workers' log lines the scheduler keeps."""
    got: list[tuple[str, int]] = []
    decode = dask_federation.from_bytes

    def recording(frame: Any, name: str, owned: bool = False) -> Any:
        got.append((name, len(frame)))
        return decode(frame, name, owned=owned)

    monkeypatch.setattr(dask_federation, "from_bytes", recording)
    specs = {
        name: functools.partial(
            client_from_node_config, {"data-path": str(p), "target": "y", "name": name}
        )
        for name, p in paths.items()
    }
    kw = {"n_estimators": 3, "max_depth": 4, "random_state": 0, "privacy": privacy}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the bags' unscored rows
        with DaskFederation(specs, client=client, timeout=scaled(60)) as fed:
            ff.FedForestRegressor(**kw, oob_score=True).fit_federated(fed)
            tasks = client.run_on_scheduler(_tasks)
    lines = [line for logs in client.get_worker_logs().values() for _, line in logs]
    n = len(paths)
    rounds = [dict(got[i : i + n]) for i in range(0, len(got), n)]
    assert all(len(r) == n for r in rounds), got
    return rounds, tasks, lines


def _tasks(dask_scheduler: Any) -> dict[str, tuple[str, str, int]]:
    return {str(k): (t.state, t.type, t.nbytes) for k, t in dask_scheduler.tasks.items()}


def test_dask_frames_and_scheduler_metadata_follow_no_client_s_data_under_secure(
    dask_client: DaskClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds, tasks, lines = dask_frames(
        dask_client, unlike_site_files(tmp_path), "secure", monkeypatch
    )
    # Frames: the discovery's and the handshake's (public fields) aside, one length a round.
    assert [i for i, r in enumerate(rounds[2:], 2) if len(set(r.values())) > 1] == []
    assert len(rounds) > 10
    # The scheduler: the three actors, nothing of the rounds, nothing sized by the data.
    assert {t[:2] for t in tasks.values()} == {
        ("memory", "fedforest.transport.dask._actor.ShardActor")
    }
    assert len(tasks) == 3 and len({t[2] for t in tasks.values()}) == 1
    assert not [line for line in lines if "fedforest" in line], lines


def test_dask_frames_follow_the_data_under_none(
    dask_client: DaskClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds, _, _ = dask_frames(dask_client, unlike_site_files(tmp_path), "none", monkeypatch)
    assert len([r for r in rounds[2:] if len(set(r.values())) > 1]) >= 6


# ---------------------------------------------------------------------------- odd data
NOTE = 7.3148213  # a value planted in the odd client's data


def _odd(case: str, rng: np.random.Generator) -> tuple[pd.DataFrame, Any, Any, dict[str, Any]]:
    """Client s0's data for ``case``: a frame, y, sample weights and estimator settings."""
    X = pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"])
    y: Any = rng.normal(size=60)
    w, kw = None, {}
    if case == "target nan":
        y[3] = np.nan
    elif case == "target near the secure limit":
        y[3] = 9.87654321e99
    elif case == "target above 1e100":
        y[3] = 1.23456789e150
    elif case == "text targets":
        y = np.array([f"{v:.4f} mg" for v in y], dtype=object)
    elif case == "negative weight":
        w = np.ones(60)
        w[3] = -NOTE
    elif case == "weight nan":
        w = np.ones(60)
        w[3] = np.nan
    elif case == "huge weight":
        w = np.ones(60)
        w[3] = 9.87654321e250
    elif case == "date column":
        X["a"] = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 999, 60), "D")
    elif case == "complex column":
        X["a"] = X["a"] + 1j * NOTE
    elif case == "text in a column":
        X["a"] = X["a"].astype(object)
        X.loc[3, "a"] = SECRET_TEXT
    elif case == "infinity":
        X.loc[3, "a"] = np.inf
    elif case == "negative poisson target":
        y = np.abs(y)
        y[3] = -NOTE
        kw["criterion"] = "poisson"
    elif case == "near-constant column":
        X["a"] = 1e15 + rng.normal(size=60)
        X.loc[3, "a"] = 1e15 + NOTE
    elif case == "level one row holds":
        X["d"] = pd.Categorical(["x"] * 59 + [SECRET_TEXT], categories=["x", SECRET_TEXT])
    return X, y, w, kw


ODD = [
    "target nan",
    "target near the secure limit",
    "target above 1e100",
    "text targets",
    "negative weight",
    "weight nan",
    "huge weight",
    "date column",
    "complex column",
    "text in a column",
    "infinity",
    "negative poisson target",
    "near-constant column",
    "level one row holds",
]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record.getMessage())


@pytest.fixture
def fedforest_logs() -> Iterator[_Records]:
    """Every log record of fedforest's loggers (the server's and, here, the clients')."""
    handler, logger = _Records(), logging.getLogger("fedforest")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


_Make = Callable[[], tuple[list[ff.Client], dict[str, Any]]]


def odd_fit_texts(make: _Make, policy: str) -> list[str]:
    """The texts a secure fit of ``make()``'s clients gives: its exception's, the drop
    reasons, every warning's (the records are read by the caller's log fixture)."""
    texts = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            clients, kw = make()
        except Exception as exc:  # noqa: BLE001 - refused data: what a remote client sends
            texts.append(client_errors.error_header(exc, "loading its data", "s0")["error"])
        else:
            model = ff.FedForestRegressor(
                n_estimators=2, max_depth=3, random_state=0, on_client_failure=policy, **kw
            )
            try:
                model.fit_federated(ff.LocalFederation(clients))
                texts += [str(r) for r in model.dropped_reasons_.values()]
            except Exception as exc:  # noqa: BLE001 - the server's exception is a text it reads
                texts.append(str(exc))
    return texts + [str(w.message) for w in caught]


def _odd_clients(case: str) -> tuple[_Make, np.ndarray]:
    """How to build the three clients of ``case`` (s0 the odd one), and every value."""
    rng = np.random.default_rng(19)
    X, y, w, kw = _odd(case, rng)
    values = [X[c].to_numpy(np.float64) for c in X if X[c].dtype.kind in "biuf"]
    values.append(np.asarray(y, np.float64) if np.asarray(y).dtype.kind in "biuf" else [])
    values += [[NOTE, 1e15 + NOTE]] + ([w] if w is not None else [])
    others = []
    for k in (1, 2):
        Xo = pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"])
        if "d" in X:
            Xo["d"] = pd.Categorical(["x"] * 60, categories=X["d"].cat.categories)
        if "a" in X and X["a"].dtype.kind == "M":
            Xo["a"] = X["a"]
        yo = np.abs(rng.normal(size=60)) if kw else rng.normal(size=60)
        others.append((Xo, y if np.asarray(y).dtype == object else yo, f"s{k}"))

    def make() -> tuple[list[ff.Client], dict[str, Any]]:
        built = [ff.Client(*o) for o in others]
        return [ff.Client(X, y, "s0", sample_weight=w), *built], kw

    return make, np.concatenate([np.ravel(v) for v in values])


@pytest.mark.parametrize("policy", ["raise", "drop"])
@pytest.mark.parametrize("case", ODD)
def test_odd_data_s_texts_warnings_and_logs_quote_no_value(
    case: str, policy: str, fedforest_logs: _Records
) -> None:
    make, values = _odd_clients(case)
    texts = odd_fit_texts(make, policy) + fedforest_logs.texts
    assert texts, case  # each case gives the server (or the client's log) some text
    strings = (SECRET_TEXT, "7.3148", "9.87654", "1.23456", " mg")
    for text in texts:
        assert quoted_values(text, values, strings) == [], text


def test_the_harness_reads_a_value_when_the_refusal_filter_is_off(
    monkeypatch: pytest.MonkeyPatch, fedforest_logs: _Records
) -> None:
    """The injected leak: every exception's text is sent (``is_refusal`` always True); a
    client whose Round B parses a note gets pandas' text, which quotes it."""

    def make() -> tuple[list[ff.Client], dict[str, Any]]:
        rng = np.random.default_rng(19)
        clients = [
            ff.Client(rng.normal(size=(60, 3)), rng.normal(size=60), f"s{k}") for k in (1, 2)
        ]
        return [NotesClient(rng.normal(size=(60, 3)), rng.normal(size=60), "s0"), *clients], {}

    strings = (SECRET_TEXT,)
    clean = odd_fit_texts(make, "raise") + fedforest_logs.texts
    assert clean and not any(quoted_values(t, [NOTE], strings) for t in clean), clean
    monkeypatch.setattr(client_errors, "is_refusal", lambda exc: True)
    fedforest_logs.texts.clear()
    leaked = odd_fit_texts(make, "raise") + fedforest_logs.texts
    assert any(quoted_values(t, [NOTE], strings) for t in leaked), leaked
