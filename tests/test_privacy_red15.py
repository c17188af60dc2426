"""The fifteenth red team (issue 11, branch ``red15``): ``privacy="dp"`` audited empirically.

See docs/privacy-findings.md, "Red team 15", and ``tests/_attack_dp.py`` for the audit: a
canary row in or out of a federation of three clients (one row replaced, the unit of
``"dp"``), many fits, the server's recording of the targets' histogram, a Neyman-Pearson
test, and the lower bounds on epsilon it gives (Clopper-Pearson, and a Gaussian one on
``mu``) against the accountant's. The clients' secrets (noise and bootstrap) come from a
seeded generator so that the test is repeatable; ``benchmarks/attack_dp_audit.py`` runs
the same audit with the operating system's secrets, more fits and other budgets.

Nothing found: the bounds stay below the report's epsilon and the canary's shift is the
one the plan's noise gives. The controls scale every noise share down (the accountant's
figures unchanged) and must be caught.
"""

from __future__ import annotations

import functools
import json
import math
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from flwr.app import Message as FlowerMessage

import fedforest as ff
from fedforest.transport.flower import FlowerFederation
from fedforest.transport.flower._codec import from_records
from tests._attack_dp import audit, scaled_noise, seeded_secrets
from tests._attack_union import all_claims, union
from tests._loopback import loopback_cluster, scaled
from tests.test_flower import MemoryGrid, task_identity  # noqa: F401 - the ServerApp's identity
from tests.test_privacy import RecordingFederation, _data


def test_the_canary_audit_stays_within_the_reported_epsilon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded_secrets(monkeypatch, 0)
    found = audit(n_fits=120, epsilon=4.0)
    assert found.epsilon == 4.0
    assert found.epsilon_cp <= found.epsilon, found
    assert found.mu_low <= found.mu_fit, found
    assert found.epsilon_gauss <= found.epsilon, found
    # Not vacuous: the released noise is the plan's, and the canary moves the release by
    # what that noise says (mu 0.62).
    assert abs(found.noise_sd - 1.0) <= 4 / math.sqrt(2 * found.fits), found
    se = math.sqrt(2 / found.fits + found.mu_hat**2 / (4 * found.fits))
    assert found.mu_low > 0, found
    assert abs(found.mu_hat - found.mu_canary) <= 4 * se, found


def test_the_audit_catches_a_fit_with_almost_no_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    seeded_secrets(monkeypatch, 1)
    scaled_noise(monkeypatch, 0.02)  # the accountant still reports epsilon 1
    found = audit(n_fits=60, epsilon=1.0)
    assert found.epsilon_cp > found.epsilon, found


def test_the_audit_catches_a_fit_with_less_noise_than_charged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded_secrets(monkeypatch, 2)
    scaled_noise(monkeypatch, 0.4)
    found = audit(n_fits=80, epsilon=4.0)
    assert found.mu_low > found.mu_fit, found
    assert found.epsilon_gauss > found.epsilon, found


# ------------------------------------------------------------- the Flower transport
class _KeepingGrid(MemoryGrid):
    """The in-memory Grid of tests/test_flower.py (the real ClientApp and codec; its client
    kept alive between messages, as ``fedforest flower-worker`` keeps it, for time) that
    keeps every Flower reply it hands over."""

    def __init__(self, paths: dict[str, Path]) -> None:
        super().__init__(paths, fresh_process=False)
        self.replies: list[FlowerMessage] = []

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[FlowerMessage]:
        got = list(super().pull_messages(message_ids))
        self.replies.extend(got)
        return got


def _flower_fit(tmp_path: Path, privacy: str) -> tuple[Any, ...]:
    """One recorded Flower fit of the suite's data (4 clients x 60 rows, 6 features)."""
    X, y, h = _data(n_clients=4, n_rows=60, d=6, seed=0)
    paths = {}
    for k in range(4):
        frame = X[h == k].reset_index(drop=True).assign(y=y[h == k])
        paths[f"site{k}"] = tmp_path / f"site{k}.csv"
        frame.to_csv(paths[f"site{k}"], index=False)
    # The attacks' data as the SuperNodes read it (CSV text: the floats round-trip exactly).
    back = [pd.read_csv(p) for p in paths.values()]
    X = pd.concat([b.drop(columns="y") for b in back], ignore_index=True)
    y = np.concatenate([b["y"].to_numpy(dtype=np.float64) for b in back])
    grid = _KeepingGrid(paths)
    fed = RecordingFederation(FlowerFederation(grid, min_nodes=4, poll_interval=0.001))
    model = ff.FedForestRegressor(n_estimators=3, max_depth=4, privacy=privacy, random_state=0)
    model.fit_federated(fed)
    return grid, fed, model, X, y, h


def _numbers(value: Any) -> list[float]:
    """Every number in a decoded JSON value (headers, layouts)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return []


def flower_exposure(grid: _KeepingGrid, X: pd.DataFrame, y: np.ndarray) -> dict[str, Any]:
    """What the Flower replies carry beyond a fedforest message, and any data value in them.

    Per reply: its records and entries outside ``to_records``'s form, every number of its
    JSON header and layout equal to a training value (or target), every float of its
    arrays likewise, and the metadata fields Flower sets.
    """
    values = set(X.to_numpy(dtype=np.float64).ravel().tolist()) | set(y.tolist())
    extra, in_header, in_arrays, fields = [], 0, 0, set()
    for reply in grid.replies:
        content = reply.content
        extra += [k for k in content.config_records if k != "fedforest"]
        extra += [k for k in content.array_records if k != "fedforest.arrays"]
        extra += [f"metrics {k}" for k in content.metric_records]
        config = content.config_records["fedforest"]
        extra += [f"entry {k}" for k in config if k not in ("kind", "header", "layout")]
        header = json.loads(str(config["header"]))
        in_header += sum(x in values for x in _numbers(header))
        msg = from_records(content, "test")
        for arr in msg.arrays.values():
            if np.asarray(arr).dtype.kind == "f":
                in_arrays += sum(x in values for x in np.asarray(arr, float).ravel().tolist())
        fields |= {k.lstrip("_") for k in vars(reply.metadata)}
    return {"extra": extra, "in_header": in_header, "in_arrays": in_arrays, "fields": fields}


def test_flower_replies_carry_nothing_beyond_the_protocol_under_secure(tmp_path: Path) -> None:
    grid, fed, model, X, y, h = _flower_fit(tmp_path, "secure")
    got = flower_exposure(grid, X, y)
    assert got["extra"] == [] and got["in_header"] == 0 and got["in_arrays"] == 0, got
    # What Flower adds: ids, the round (group), message type, creation and delivery times
    # and ttl: when each client answered, which the in-process federation does not record.
    assert got["fields"] == {
        "run_id", "message_id", "src_node_id", "dst_node_id", "src_task_id", "dst_task_id",
        "reply_to_message_id", "group_id", "created_at", "delivered_at", "ttl", "message_type",
    }  # fmt: skip
    claims = all_claims(fed, model, X, y, h, slow=False)
    assert all(t.sum() == 0 and f.sum() == 0 for t, f in claims.values()), claims


def test_flower_replies_carry_the_rows_under_none(tmp_path: Path) -> None:
    """The control: the same recording under ``"none"``: data values in the arrays, and more
    than issue 11's 1 % of the rows rebuilt (43 %: 103 of 240 targets in the replies)."""
    grid, fed, model, X, y, h = _flower_fit(tmp_path, "none")
    got = flower_exposure(grid, X, y)
    assert got["extra"] == [] and got["in_arrays"] > 0, got
    rebuilt = union(all_claims(fed, model, X, y, h, slow=False))["rebuilt"]
    assert rebuilt > 0.01, rebuilt


# ------------------------------------------------------------------ the Dask transport
def _dask_fits(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[Any, ...]]:
    """A recorded fit under each of ``"secure"`` and ``"none"`` over one real LocalCluster;
    every frame the server decodes, kept."""
    distributed = pytest.importorskip("distributed")
    from fedforest.transport.dask import DaskFederation
    from fedforest.transport.dask import federation as dask_federation

    frames: list[bytes] = []
    decode = dask_federation.from_bytes

    def keep(frame: Any, sender: str, **how: Any) -> Any:
        frames.append(bytes(frame))
        return decode(frame, sender, **how)

    monkeypatch.setattr(dask_federation, "from_bytes", keep)
    X, y, h = _data(n_clients=4, n_rows=60, d=6, seed=0)
    shards = {f"site{k}": (X[h == k].reset_index(drop=True), y[h == k]) for k in range(4)}
    factories = {n: functools.partial(ff.Client, *v, n) for n, v in shards.items()}
    out = {}
    with loopback_cluster(1) as cluster, distributed.Client(cluster) as dask_client:
        for privacy in ("secure", "none"):
            frames.clear()
            model = ff.FedForestRegressor(
                n_estimators=3, max_depth=4, privacy=privacy, random_state=0
            )
            with DaskFederation(factories, client=dask_client, timeout=scaled(300)) as inner:
                fed = RecordingFederation(inner)
                model.fit_federated(fed)
            out[privacy] = (list(frames), fed, model, X, y, h)
    return out


def frame_exposure(frames: list[bytes], X: pd.DataFrame, y: np.ndarray) -> dict[str, Any]:
    """Per frame: JSON keys beyond kind, header and layout, and header numbers at data values."""
    values = set(X.to_numpy(dtype=np.float64).ravel().tolist()) | set(y.tolist())
    extra, in_header = [], 0
    for frame in frames:
        (n_meta,) = struct.unpack_from("<I", frame, 8)
        meta = json.loads(frame[12 : 12 + n_meta])
        extra += [k for k in meta if k not in ("kind", "header", "layout")]
        in_header += sum(x in values for x in _numbers(meta["header"]))
    return {"frames": len(frames), "extra": extra, "in_header": in_header}


def test_dask_frames_carry_nothing_beyond_the_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``"secure"`` nothing; the control, ``"none"`` on the same cluster, rebuilds rows."""
    fits = _dask_fits(monkeypatch)
    frames, fed, model, X, y, h = fits["secure"]
    got = frame_exposure(frames, X, y)
    assert got["frames"] > 0 and got["extra"] == [] and got["in_header"] == 0, got
    claims = all_claims(fed, model, X, y, h, slow=False)
    assert all(t.sum() == 0 and f.sum() == 0 for t, f in claims.values()), claims
    frames, fed, model, X, y, h = fits["none"]
    assert frame_exposure(frames, X, y)["extra"] == []
    rebuilt = union(all_claims(fed, model, X, y, h, slow=False))["rebuilt"]
    assert rebuilt > 0.01, rebuilt
