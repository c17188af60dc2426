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
from fedforest.federated.protocol import Message
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
    """Three clients of 100 rows; client 0 holds the planted target (every row the planted
    weight). Also every data value."""
    rng = np.random.default_rng(11)
    clients, values = [], []
    for k in range(3):
        X, y, w = rng.normal(size=(100, 3)), rng.normal(size=100), np.ones(100)
        if k == 0 and case == "huge target":
            y[5] = HUGE_TARGET
        if case == "heavy weight":  # every row: one heavy row is trimmed (weight_band.py)
            w[:] = HEAVY_WEIGHT
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
    with pytest.raises(ValueError, match=r"column 1 mixes text and numbers \(float, str") as a:
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


# ------------------------------------------------------------ exceptions not fedforest's
# Until 2026-12-04 (branch ``errtext``) an exception fedforest does not raise itself (a
# library's, a bug) reached the server with its own text: Flower's error reply or the
# ClientApp's error message, Dask's error frame. Now only its type and step do
# (``federated/client_errors.py``); the text and traceback stay in the client's log.
FAR_DATE_DAYS = 3_000_123  # a date32 of year 10184: pyarrow cannot make it a Python date
FAR_YEAR = 10184


def _far_dated(frame: pd.DataFrame, path: Path) -> None:
    """``frame`` as a Parquet file with a date column; one row's date after year 9999."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    days = np.full(len(frame), 18_000, dtype=np.int32)  # 2019-04-14
    days[3] = FAR_DATE_DAYS
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table.append_column("visit", pa.array(days, type=pa.date32())), path)


def test_is_refusal_tells_fedforest_s_raises_from_a_library_s(tmp_path: Path) -> None:
    from fedforest.datasets.files import read_table
    from fedforest.federated.client_errors import error_text, is_refusal

    X = np.zeros((5, 2), dtype=object)
    X[1, 1] = SECRET_TEXT
    with pytest.raises(ValueError) as own:  # fedforest's refusal, NumPy's text its cause
        ff.Client(X, np.zeros(5), "site0")
    assert is_refusal(own.value) and not is_refusal(own.value.__cause__)
    assert error_text(own.value, "loading its data") == str(own.value)
    _far_dated(pd.DataFrame({"x": np.arange(5.0)}), tmp_path / "far.parquet")
    with pytest.raises(ValueError, match=f"year {FAR_YEAR} is out of range") as library:
        read_table(tmp_path / "far.parquet")  # pyarrow's, through fedforest's frames
    assert not is_refusal(library.value)
    text = error_text(library.value, "round_a")
    assert text.startswith("round_a failed with ValueError;") and str(FAR_YEAR) not in text
    # The rule on code in the package's files: a raise statement, or a builtin's call, a
    # subscript or a re-raise there (the innermost frame fedforest's, the text a library's).
    source = (
        "def own(v):\n    raise ValueError('column 1 is not numeric')\n"
        "def call(v):\n    return float(v)\n"
        "def subscript(v):\n    return {}[v]\n"
        "def reraise(v):\n    try:\n        float(v)\n    except ValueError:\n        raise\n"
    )
    where = str(Path(ff.__file__).parent / "federated" / "probe.py")
    space: dict[str, Any] = {}
    exec(compile(source, where, "exec"), space)  # noqa: S102 - the test's own source
    for name, refusal in (("own", True), ("call", False), ("subscript", False), ("reraise", False)):
        with pytest.raises((ValueError, KeyError)) as info:
            space[name](SECRET_TEXT)
        assert is_refusal(info.value) is refusal, name


def test_an_error_header_is_checked_on_arrival() -> None:
    from fedforest.federated.codec import MAX_ERROR_TEXT, error_from_header

    assert type(error_from_header({"error": "bad"}, "a")) is ValueError  # before "type"
    assert type(error_from_header({"error": "bad", "type": "ValueError"}, "a")) is ValueError
    other = error_from_header({"error": "round_b failed with KeyError", "type": "KeyError"}, "a")
    assert type(other) is RuntimeError and str(other).startswith("KeyError at the client: ")
    for header, field in (
        ({"error": "x", "type": "Key Error('patient 17')"}, "'type'"),
        ({"error": "x", "type": 3}, "'type'"),
        ({"error": ["x"], "type": "KeyError"}, "error text"),
        ({"error": "x" * (MAX_ERROR_TEXT + 1)}, "error text"),
    ):
        refused = error_from_header(header, "site-a")
        assert type(refused) is ValueError and "'site-a'" in str(refused) and field in str(refused)


class NotesClient(ff.Client):
    """A site's client that also parses a column of notes when Round B comes (a bug: one
    note is not a number); pandas' text quotes it."""

    notes = pd.Series(["1.5", "2", "0.5", SECRET_TEXT, "3"])

    def handle(self, msg: Message) -> Message:
        if msg.kind == "round_b":
            pd.to_numeric(self.notes)
        return super().handle(msg)


def test_a_library_s_error_in_a_round_sends_its_type_not_its_text() -> None:
    """In process: the failure's text is what a remote client sends; the original is its
    cause's cause (this process holds the rows anyway), and drop still works."""
    clients, values = _clients("none")
    clients[0] = NotesClient(clients[0].X, clients[0].y_raw, "site0")
    fed = RecordingFederation(ff.LocalFederation(clients))
    model = ff.FedForestRegressor(n_estimators=5, max_depth=2, random_state=0)
    with pytest.raises(ClientDataError, match=r"'site0' failed in round \d+ \(round_b\)") as info:
        model.fit_federated(fed)
    text = str(info.value)
    assert quoted_values(text, values, (SECRET_TEXT,)) == [], text
    assert "round_b failed with ValueError; its text stays with the client" in text, text
    original = info.value.__cause__.__cause__
    assert f"Unable to parse string '{SECRET_TEXT}'" in str(original)  # the user's to debug
    model = ff.FedForestRegressor(
        n_estimators=5, max_depth=2, random_state=0, on_client_failure="drop"
    )
    model.fit_federated(ff.LocalFederation(clients))
    assert [name for name, _ in model.dropped_clients_] == ["site0"]


def test_flower_a_library_s_error_text_stays_with_the_client(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The real ClientApp reads a site's Parquet file that pyarrow cannot convert (a date
    after 9999: "year 10184 is out of range"), at discovery and mid-fit."""
    paths = write_site_files(tmp_path)
    good = pd.read_csv(paths["site-c"])
    values = np.concatenate([pd.read_csv(p).to_numpy().ravel() for p in paths.values()])
    paths["site-c"] = tmp_path / "site-c.parquet"
    _far_dated(good, paths["site-c"])
    with pytest.raises(RuntimeError, match="Only 2 SuperNode"):
        FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001)
    logged = "\n".join(r.getMessage() for r in caplog.records if "left out" in r.getMessage())
    assert str(FAR_YEAR) not in logged and quoted_values(logged, values) == [], logged
    assert "loading its data failed with ValueError" in logged, logged
    # The site's operator has pyarrow's text and the traceback in the client's log.
    client_log = [r for r in caplog.records if r.name == "fedforest.client"]
    assert client_log and client_log[0].levelname == "ERROR"
    assert f"year {FAR_YEAR} is out of range" in str(client_log[0].exc_info[1])

    # Mid-fit: the file is rewritten after the handshake; each message reads it again.
    good.to_parquet(paths["site-c"], index=False)

    class Rewrite(RecordingFederation):
        def send_and_receive(self, requests: dict[str, Message], round_index: int) -> Any:
            if round_index == 4:
                _far_dated(good, paths["site-c"])
            return super().send_and_receive(requests, round_index)

    for policy in ("raise", "drop"):
        good.to_parquet(paths["site-c"], index=False)
        caplog.clear()
        fed = Rewrite(FlowerFederation(MemoryGrid(paths), min_nodes=3, poll_interval=0.001))
        model = ff.FedForestRegressor(**PARAMS, on_client_failure=policy)
        if policy == "raise":
            with pytest.raises(ClientDataError, match=r"'site-c' failed in round 4 \(") as info:
                model.fit_federated(fed)
            said = str(info.value)
        else:
            model.fit_federated(fed)
            assert [name for name, _ in model.dropped_clients_] == ["site-c"]
            said = "\n".join(r.getMessage() for r in caplog.records if "drop" in r.getMessage())
        assert str(FAR_YEAR) not in said and quoted_values(said, values) == [], said
        assert "failed with ValueError; its text stays with the client" in said, said


def test_a_reader_s_arrow_error_is_kept_only_when_it_speaks_of_structure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file's refusal keeps pyarrow's text about the file's structure (a cut Parquet
    file) and logs, not raises, a text that quotes a value (a cast pyarrow refused)."""
    pa = pytest.importorskip("pyarrow")
    from fedforest.datasets.files import _reason, read_table

    with pytest.raises(pa.ArrowInvalid) as info:  # pyarrow's own text, with the value
        pa.array(["HIV+ 7.31"]).cast(pa.float64())
    assert "HIV+ 7.31" in str(info.value)
    with caplog.at_level("ERROR", logger="fedforest.client"):
        reason = _reason(info.value)
    assert "7.31" not in reason and reason.startswith("pyarrow's ArrowInvalid"), reason
    assert "HIV+ 7.31" in caplog.text  # the site's operator reads it
    cut = tmp_path / "cut.parquet"
    pd.DataFrame({"a": np.arange(50.0), "y": np.arange(50.0)}).to_parquet(cut)
    cut.write_bytes(cut.read_bytes()[:-8])
    with pytest.raises(ValueError, match="magic bytes not found") as refused:
        read_table(cut)
    assert isinstance(refused.value.__cause__, pa.ArrowInvalid)
