"""A client's error text reaches the server: it must carry no value of the client's data.

Under Flower a ClientApp's ``ValueError`` travels to the ServerApp as an error message
(``transport/flower/clientapp.py``), under Dask every exception of an actor as an error
frame (``transport/dask/_actor.py``), and on every transport the server raises it as a
``ClientDataError`` naming the client and the round. Until 2026-12-03 (branch ``red``)
four such texts quoted a value: the largest target (over ``MAX_TARGET``), the largest
``|value * 2^24|`` the secure encoder refused (a heavy sample weight times its draws),
NumPy's own "could not convert string to float: '...'" for a feature or a sample weight
holding text, and a decoding error's byte of a file that is not UTF-8 (docs/privacy.md,
"Guarantees and their limits", "Error texts").

The attack, :func:`quoted_values`, reads every number and string of a text and matches
them against the client's data; it finds the value in the texts main's clients sent for
these data (so it can fail), and nothing in what they send now. The Flower cases run the
real ClientApp through ``tests/test_flower.py``'s in-memory grid; ``tests/test_dask.py``
runs a heavy sample weight through a real LocalCluster.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.federated.federation import ClientDataError
from fedforest.transport.flower import FlowerFederation
from tests.test_flower import PARAMS, MemoryGrid, task_identity, write_site_files
from tests.test_privacy import RecordingFederation

__all__ = ["quoted_values", "task_identity"]  # the Flower tests' server identity (autouse)

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

#: A planted value of each kind (a target, a sample weight, text in a feature's column).
HUGE_TARGET = 3.14159e123
HEAVY_WEIGHT = 3.7e12
SECRET_TEXT = "HIV+ 7.31"


def quoted_values(text: str, values: Any, strings: tuple[str, ...] = ()) -> list[Any]:
    """The data values an error text gives away.

    A string of the data quoted in it, and a number printed with at least three
    significant digits that equals a data value to those digits, also times a bootstrap
    count of 1 to 8 and the fixed point's scale (2^24, 2^48): what the secure encoder
    printed (its largest ``|value * 2^frac|``, a sum dominated by one heavy row).
    """
    found: list[Any] = [s for s in strings if s in text]
    v = np.asarray(values, dtype=np.float64).ravel()
    v = np.unique(np.abs(v[np.isfinite(v)]))
    for token in _NUMBER.findall(text):
        mantissa = re.split(r"[eE]", token)[0]
        digits = len(re.sub(r"[^0-9]", "", mantissa).lstrip("0"))
        if digits < 3:  # a round number (2^62, round 3, 1e+100) names no value
            continue
        t = abs(float(token))
        for scale in (1.0, 2.0**24, 2.0**48):
            for draws in range(1, 9):
                printed = np.array([float(f"{x:.{digits}g}") for x in v * draws * scale])
                found.extend(v[printed == t].tolist())
    return found


def _clients(case: str) -> tuple[list[ff.Client], np.ndarray]:
    """Three clients of 100 rows; client 0 holds the planted value. Also every data value."""
    rng = np.random.default_rng(11)
    clients, values = [], []
    for k in range(3):
        X, y, w = rng.normal(size=(100, 3)), rng.normal(size=100), np.ones(100)
        if k == 0 and case == "huge target":
            y[5] = HUGE_TARGET
        if k == 0 and case == "heavy weight":
            w[5] = HEAVY_WEIGHT
        values += [X.ravel(), y, w]
        sample_weight = w if case == "heavy weight" else None
        clients.append(ff.Client(X, y, f"site{k}", sample_weight=sample_weight))
    return clients, np.concatenate(values)


@pytest.mark.parametrize(("case", "round_"), [("huge target", 0), ("heavy weight", 3)])
def test_a_secure_fit_s_error_text_quotes_no_value(case: str, round_: int) -> None:
    clients, values = _clients(case)
    fed = RecordingFederation(ff.LocalFederation(clients))
    model = ff.FedForestRegressor(n_estimators=5, max_depth=2, random_state=0)
    with pytest.raises(ClientDataError, match=rf"'site0' failed in round {round_}") as info:
        model.fit_federated(fed)
    text = str(info.value)  # what the server raises, as Flower and Dask deliver it
    assert "must be at most" in text or "too large for fixed-point sums" in text, text
    assert quoted_values(text, values) == [], text


def test_a_client_s_refused_columns_quote_no_value() -> None:
    """What a ClientApp (hello) or a Dask actor sends when a Client cannot be built."""
    rng = np.random.default_rng(12)
    X = rng.normal(size=(50, 3)).astype(object)
    X[7, 1] = SECRET_TEXT
    y, w = rng.normal(size=50), np.ones(50, dtype=object)
    w[9] = SECRET_TEXT
    texts = []
    with pytest.raises(ValueError, match=r"column 1 is not numeric \(it holds str values\)") as a:
        ff.Client(X, y, "site0")
    texts.append(a)
    with pytest.raises(ValueError, match=r"sample_weight is not numeric \(it holds str") as b:
        ff.Client(X[:, [0, 2]].astype(float), y, "site0", sample_weight=w)
    texts.append(b)
    numbers = np.concatenate([np.delete(X, 1, axis=1).astype(float).ravel(), y])
    for info in texts:
        assert quoted_values(str(info.value), numbers, (SECRET_TEXT,)) == []
        # NumPy's own text, which the message quoted until now, gives the value away.
        cause = str(info.value.__cause__)
        assert quoted_values(cause, numbers, (SECRET_TEXT,)) == [SECRET_TEXT], cause


# The texts main (ed212ad) sent for these data and this module's fits (measured
# 2026-12-03): the attack finds the planted value in each, so the tests above can fail.
MAIN_TEXTS = {
    "huge target": "Client 'site0' failed in round 0 (handshake): ValueError: Client 'site0': "
    "y holds a value of absolute value 3.14e+123; regression targets must be at most 1e+100",
    "heavy weight": "Client 'site0' failed in round 3 (round_a): ValueError: a value to "
    "aggregate securely is not finite or too large for fixed-point sums (|value * 2^frac| "
    "must stay below 2^62; largest 6.21e+19).",
}


@pytest.mark.parametrize("case", sorted(MAIN_TEXTS))
def test_the_attack_reads_the_value_main_s_texts_quoted(case: str) -> None:
    _, values = _clients(case)
    planted = HUGE_TARGET if case == "huge target" else HEAVY_WEIGHT
    assert quoted_values(MAIN_TEXTS[case], values) == [planted]


def test_flower_error_messages_quote_no_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The real ClientApp's error messages, as the ServerApp raises or logs them."""
    paths = write_site_files(tmp_path)
    frame = pd.read_csv(paths["site-c"])
    frame.loc[3, "y"] = HUGE_TARGET
    frame.to_csv(paths["site-c"], index=False)
    fed = FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001)
    with pytest.raises(ValueError, match="'site-c'.*must be at most 1e\\+100") as info:
        ff.FedForestRegressor(**PARAMS).fit_federated(fed)
    assert quoted_values(str(info.value), frame.to_numpy()) == [], str(info.value)
    # A file that is not UTF-8: its discovery reply said which byte (an 'é' of a name).
    paths = write_site_files(tmp_path)
    frame = pd.read_csv(paths["site-b"])
    frame.insert(0, "name", ["Jos\xe9"] * len(frame))
    paths["site-b"].write_bytes(frame.to_csv(index=False).encode("latin-1"))
    with pytest.raises(RuntimeError, match="Only 2 SuperNode"):
        FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001)
    logged = "\n".join(r.getMessage() for r in caplog.records if "left out" in r.getMessage())
    assert "cannot be read as CSV: not utf-8 text" in logged, logged
    assert "0xe9" not in logged and "xe9" not in logged, logged
