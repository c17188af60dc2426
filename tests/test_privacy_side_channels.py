"""Side channels: what a reply's form (not its values) tells the server under "secure".

A recording server keeps every reply and reads, besides the masked values, each reply's
header, its arrays' names, dtypes and shapes, and its size on the wire (the codec's
header, layout and byte buffer, as Flower and Dask carry them). Every client of a round
gets the same request, so a form that differs between two clients' replies can only come
from their data (a packing that picks its word width from the client's own counts, a
sparse encoding, a field sent only by some). After the handshake (which names each
client's row count, columns with missing values and frequent levels: docs/privacy.md,
"Metadata") every reply's form must be the same for every client, on clients as unlike
as the test can make them: other sizes, missing values at some only, a level at one
client only, one class only, sample weights. Under ``"none"`` the same audit finds forms
that differ (each client sends the nodes it has rows in), so it can fail.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.federated.codec import pack_arrays
from fedforest.federated.protocol import HANDSHAKE, Message
from tests.test_privacy import RecordingFederation


def _form(msg: Message) -> tuple[Any, ...]:
    """Everything of a reply but its array values and the client's (public) name."""
    header = {k: v for k, v in msg.header.items() if k != "name"}
    layout, buffer = pack_arrays(msg.arrays)
    text = json.dumps(header, sort_keys=True, separators=(",", ":"))
    wire = len(text) + len(json.dumps(layout, separators=(",", ":"))) + buffer.size
    return msg.kind, text, json.dumps(layout), wire


def _unlike_clients(task: str, seed: int = 0) -> list[ff.Client]:
    """Six clients of 60 to 260 rows that differ in every way their data can."""
    rng = np.random.default_rng(seed)
    sizes = [60, 90, 120, 150, 200, 260]
    clients = []
    for k, n in enumerate(sizes):
        X = pd.DataFrame(rng.normal(k * 0.3, 1 + 0.2 * k, size=(n, 5)), columns=list("abcde"))
        if k % 2:  # missing values at half of the clients, in two columns
            X.loc[rng.random(n) < 0.15, "b"] = np.nan
            X.loc[rng.random(n) < 0.05, "e"] = np.nan
        ward = rng.choice(["n", "s", "e"], size=n).astype(object)
        if k == 3:
            ward[:2] = "w"  # a level one client holds in two rows
        X["ward"] = pd.Categorical(ward)
        y = X["a"].to_numpy() + np.sin(2 * X["c"].to_numpy()) + rng.normal(0, 0.3, n)
        if task == "poisson":
            y = np.abs(y)
        weights = rng.uniform(0.5, 2.0, n) if k in (1, 4) else None
        if task == "classification":
            y = (y > 0.3 * k).astype(int)
            if k == 5:
                y[:] = 1  # one class only
        clients.append(ff.Client(X, y, f"site{k}", sample_weight=weights))
    return clients


def client_dependent_forms(model: Any, task: str, warm_trees: int = 0) -> list[str]:
    """The rounds after the handshake whose replies differ in form between clients."""
    fed = RecordingFederation(ff.LocalFederation(_unlike_clients(task)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the rare level's and the missing values' notes
        model.fit_federated(fed)
        if warm_trees:
            model.set_params(warm_start=True, n_estimators=model.n_estimators + warm_trees)
            model.fit_federated(fed)
    found = []
    for i, (_, replies) in enumerate(fed.rounds):
        kinds = {msg.kind for msg in replies.values()}
        if HANDSHAKE in kinds:
            continue
        forms = {_form(msg) for msg in replies.values()}
        if len(forms) > 1:
            found.append(f"round {i} ({', '.join(sorted(kinds))}): {len(forms)} forms")
    return found


_KW = {"n_estimators": 3, "max_depth": 4, "random_state": 0}


@pytest.mark.parametrize(
    ("task", "params", "warm"),
    [
        ("regression", {"oob_score": True}, 2),
        ("poisson", {"criterion": "poisson"}, 0),
        ("classification", {"class_weight": "balanced", "oob_score": True}, 0),
        ("classification", {"class_weight": "balanced_subsample"}, 0),
    ],
)
def test_every_reply_has_the_same_form_at_every_client_under_secure(
    task: str, params: dict[str, Any], warm: int
) -> None:
    Est = ff.FedForestRegressor if task != "classification" else ff.FedForestClassifier
    assert client_dependent_forms(Est(**_KW, **params), task, warm) == []


def test_the_audit_finds_forms_that_differ_under_none() -> None:
    found = client_dependent_forms(ff.FedForestRegressor(**_KW, privacy="none"), "regression")
    assert len(found) >= 3  # every Round A and B: each client's own nodes and sketches
