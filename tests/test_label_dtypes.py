"""``classes_`` has scikit-learn's dtype at every entry point (``federated/label_dtypes.py``).

The oracle is scikit-learn's ``RandomForestClassifier`` fitted on the same ``y``: its
``classes_`` has the dtype of ``np.asarray(y)`` (object for a pandas column of text).
Before, ``fit_federated`` gave NumPy's dtype of the handshake's JSON labels (``<U..`` for
any text, int64 for ``int32`` labels) and a model file lost the dtype the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from test_file_hardening import edit_header, refused
from test_hostile_clients import Hostile, _header
from test_privacy import RecordingFederation

import fedforest as ff
from fedforest.federated.label_dtypes import label_dtype_problem
from fedforest.federated.protocol import HANDSHAKE

RNG = np.random.default_rng(0)
X = RNG.normal(size=(240, 3))
TEXT = np.where(X[:, 0] > 0, "sick", "well")
CODES = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
KW = {"n_estimators": 2, "max_depth": 2, "random_state": 0}

LABELS = {
    "numpy text": lambda: TEXT,
    "list of text": lambda: TEXT.tolist(),
    "object array": lambda: TEXT.astype(object),
    "pandas string": lambda: pd.Series(TEXT, dtype="string"),
    "pandas object": lambda: pd.Series(TEXT, dtype=object),
    "pandas category": lambda: pd.Series(TEXT, dtype="category"),
    "int32": lambda: CODES.astype(np.int32),
    "uint8": lambda: CODES.astype(np.uint8),
    "int64": lambda: CODES,
    "bool": lambda: CODES > 0,
    "float32": lambda: CODES.astype(np.float32),
    "pandas int8": lambda: pd.Series(CODES, dtype="int8"),
    "pandas Int64": lambda: pd.Series(CODES, dtype="Int64"),
}


def _part(y: Any, rows: slice) -> Any:
    if isinstance(y, pd.Series):
        return y.iloc[rows].reset_index(drop=True)
    return y[rows]


def _clients(y: Any) -> list[ff.Client]:
    return [ff.Client(X[s], _part(y, s), name=f"c{k}") for k, s in enumerate(_HALVES)]


_HALVES = (slice(0, 120), slice(120, 240))


@pytest.mark.parametrize("privacy", ["secure", "none"])
@pytest.mark.parametrize("case", list(LABELS))
def test_classes_have_scikit_learns_dtype_at_every_entry_point(
    case: str, privacy: str, tmp_path: Path
) -> None:
    y = LABELS[case]()
    sk = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y).classes_
    fit = ff.FedForestClassifier(**KW, privacy=privacy).fit(X, y, client_ids=np.repeat([0, 1], 120))
    fed = ff.FedForestClassifier(**KW, privacy=privacy).fit_federated(_clients(y))
    fit.save(tmp_path / "fit.ffm")
    fed.save(tmp_path / "fed.ffm")
    loaded = [ff.load(tmp_path / "fit.ffm"), ff.load(tmp_path / "fed.ffm")]
    for model in (fit, fed, *loaded):
        assert model.classes_.dtype == sk.dtype, (case, model.classes_.dtype, sk.dtype)
        assert model.classes_.tolist() == sk.tolist()
        assert model.predict(X[:5]).dtype == sk.dtype


def test_multi_output_classes_keep_the_dtype_through_fit_federated_and_the_file(
    tmp_path: Path,
) -> None:
    y = np.column_stack([CODES, CODES[::-1]]).astype(np.int16)
    sk = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y).classes_
    fed = ff.FedForestClassifier(**KW, privacy="none").fit_federated(_clients(y))
    fed.save(tmp_path / "m.ffm")
    for model in (fed, ff.load(tmp_path / "m.ffm")):
        assert [c.dtype for c in model.classes_] == [c.dtype for c in sk] == [np.int16] * 2


def test_clients_of_different_dtypes_give_the_pooled_dtype() -> None:
    # scikit-learn on the rows put together: np.concatenate's dtype (object wins over text,
    # int16 and uint8 make int16, int and float make float64).
    for a, b in [
        (TEXT[:120], pd.Series(TEXT[120:], dtype="string")),
        (CODES[:120].astype(np.int16), CODES[120:].astype(np.uint8)),
        (CODES[:120].astype(np.int32), CODES[120:].astype(np.float32)),
    ]:
        pooled = np.concatenate([np.asarray(a), np.asarray(b)])
        sk = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, pooled).classes_
        clients = [ff.Client(X[:120], a, name="a"), ff.Client(X[120:], b, name="b")]
        fed = ff.FedForestClassifier(**KW).fit_federated(clients)
        assert fed.classes_.dtype == sk.dtype and fed.classes_.tolist() == sk.tolist()


def test_the_dtype_says_no_label_a_client_does_not_name() -> None:
    # A NumPy text array is as wide as its longest label; here that label is one row's, which
    # under "secure" no handshake names: the dtype travels as "U", without its width.
    labels = TEXT.copy().astype("<U40")
    labels[3] = "a label only one row holds, 37 chars."
    fed = RecordingFederation(ff.LocalFederation(_clients(labels)))
    with pytest.raises(ValueError, match="not in the federation's class list"):
        ff.FedForestClassifier(**KW).fit_federated(fed)
    replies = [m for _, rep in fed.rounds for m in rep.values() if m.kind == HANDSHAKE]
    assert [m.header["label_dtype"] for m in replies] == ["U", "U"]
    assert not any("37" in repr(m.header) or "40" in repr(m.header) for m in replies)


@pytest.mark.parametrize(
    ("code", "match"),
    [
        ("<U40", "not one of"),
        (7, "not one of"),
        ("<i4", "numbers.*labels are text"),
        ("|b1", "numbers.*labels are text"),
    ],
)
def test_a_wrong_label_dtype_is_refused_naming_the_client_and_field(code: Any, match: str) -> None:
    def edit(header: dict[str, Any]) -> None:
        header["label_dtype"] = code

    clients = _clients(TEXT)
    clients[1] = Hostile(X[120:], TEXT[120:], "c1", HANDSHAKE, _header(edit))
    with pytest.raises(ValueError, match=rf"c1.*'label_dtype'.*{match}"):
        ff.FedForestClassifier(**KW).fit_federated(ff.LocalFederation(clients))


def test_label_dtype_problems_on_numbers() -> None:
    assert label_dtype_problem("|u1", [0, 1, 255]) is None
    assert "unchanged" in str(label_dtype_problem("|u1", [0, 256]))
    assert "type" in str(label_dtype_problem("<i8", [0.0, 1.0]))
    assert "type" in str(label_dtype_problem("<i8", [False, True]))
    assert "labels are numbers" in str(label_dtype_problem("U", [0, 1]))
    assert label_dtype_problem("O", [0, 1]) is None and label_dtype_problem("<f4", [0, 1]) is None


def test_model_files_check_classes_dtype_and_older_files_still_load(tmp_path: Path) -> None:
    model = ff.FedForestClassifier(**KW).fit(X, CODES.astype(np.int32))
    model.save(tmp_path / "m.ffm")

    def older(meta: dict[str, Any]) -> None:
        del meta["header"]["classes_dtype"]

    def wrong(meta: dict[str, Any]) -> None:
        meta["header"]["classes_dtype"] = "U"

    old = ff.load(edit_header(tmp_path / "m.ffm", tmp_path / "old.ffm", older))
    assert old.classes_.dtype == np.int64  # NumPy's dtype of the labels, as before
    assert np.array_equal(old.predict(X), model.predict(X))
    refused(ff.load, edit_header(tmp_path / "m.ffm", tmp_path / "bad.ffm", wrong), "classes_dtype")


def test_a_label_dtype_in_a_regression_handshake_is_ignored() -> None:
    # Only a classifier's handshake reply is checked for it: a regressor never reads it
    # (it gave np.dtype("garbage"), a TypeError, when the server pooled every reply's).
    def edit(header: dict[str, Any]) -> None:
        header["label_dtype"] = "garbage"

    y = X[:, 0]
    clients = [ff.Client(X[:120], y[:120], name="c0")]
    clients.append(Hostile(X[120:], y[120:], "c1", HANDSHAKE, _header(edit)))
    model = ff.FedForestRegressor(**KW).fit_federated(ff.LocalFederation(clients))
    honest = ff.FedForestRegressor(**KW).fit_federated(_clients(y))
    assert np.array_equal(model.predict(X), honest.predict(X))
