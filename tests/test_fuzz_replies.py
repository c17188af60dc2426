"""Fuzzing one client's replies: every mutation is refused by name, or harmless.

A real :class:`LocalFederation` of three clients is wrapped so that client ``c1``'s reply
to one round gets one mutation (wrong dtype, byte order, shape, NaN, infinities, values
near the dtype's limits, broken invariants, a missing or extra array, a non-contiguous
layout). The fit must then either stop with the project's hostile-reply error
(:class:`InvalidReply`, a ``ValueError``) naming ``c1`` and the array, or, under
``privacy="secure"`` / ``"dp"`` where secure aggregation hides who sent what, a
``ValueError`` saying some client lied; or complete. A mutation of the layout only
(non-contiguous, Fortran order, a wider integer type holding the same values) must
complete with exactly the forest of the honest fit; a mutated value may complete (a
client can lie within every bound the server knows), with finite predictions. Any other
exception (numba's typing errors, IndexError, TypeError, OverflowError...) fails.

Deterministic: the mutations are a fixed list; the configurations other than the first
get a fixed (seeded) subset of it per array, to keep the module fast. Below the sweep,
one test per failure it (or the audit around it) found, each failing before its fix.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.federated.client import Client
from fedforest.federated.federation import ClientFailure, Federation
from fedforest.federated.protocol import Message
from fedforest.federated.server.checks import InvalidReply
from fedforest.transport.local import LocalFederation

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")

TARGET = "c1"
Mutation = Callable[[np.ndarray], np.ndarray]


class Mutating(Federation):
    """A federation whose ``TARGET`` reply to the ``at``-th round of ``kind`` is mutated."""

    def __init__(
        self,
        inner: LocalFederation,
        kind: str | None = None,
        at: int = 0,
        mutate: Callable[[Message], Any] | None = None,
    ) -> None:
        self.inner, self.kind, self.at, self.mutate = inner, kind, at, mutate
        self.seen, self.applied = 0, False
        self.replies: list[Message] = []  # TARGET's replies, as sent (unmutated)

    @property
    def client_names(self) -> list[str]:
        return self.inner.client_names

    def send_and_receive(self, requests: dict[str, Message], round_index: int) -> dict[str, Any]:
        replies: dict[str, Any] = self.inner.send_and_receive(requests, round_index)
        reply = replies.get(TARGET)
        if isinstance(reply, Message):
            self.replies.append(reply)
            if reply.kind == self.kind and self.mutate is not None:
                self.seen += 1
                if self.seen - 1 == self.at:
                    copy = Message(
                        reply.kind,
                        dict(reply.header),
                        {k: np.array(v) for k, v in reply.arrays.items()},
                    )
                    replies[TARGET] = self.mutate(copy)
                    self.applied = True
        return replies


# ----------------------------------------------------------------------------- fits
CONFIGS: dict[str, dict[str, Any]] = {
    "none-regression": {"task": "regression", "privacy": "none"},
    "none-classification-categories-H": {
        "task": "classification",
        "privacy": "none",
        "categories": True,
        "split_on_client": True,
    },
    "none-avgimp": {"task": "classification", "privacy": "none", "split_rule": "avgimp"},
    "none-classification-weighted": {"task": "classification", "privacy": "none", "weights": True},
    "none-global": {"task": "regression", "privacy": "none", "binning": "global"},
    "none-top-l": {"task": "regression", "privacy": "none", "top_l": 2},
    "none-verification": {"task": "regression", "privacy": "none", "n_bins": None},
    "secure-categories": {"task": "regression", "privacy": "secure", "categories": True},
    "dp": {"task": "regression", "privacy": "dp", "epsilon": 5.0},
    # The known values' counts (a column with missing values) and Round A's rows column
    # (hist_rows: the clients weigh rows) are replies of their own.
    "secure-weighted-missing": {
        "task": "classification",
        "privacy": "secure",
        "weights": True,
        "missing": True,
    },
    # Declared domains: a pandas CategoricalDtype column (categories="from_dtype": its
    # reply's 'declared') and declared classes (no 'labels' in the reply).
    "secure-declared": {"task": "classification", "privacy": "secure", "declared": True},
    # c2 drops out in the known values' round (a column with missing values): the
    # survivors' masks are recovered. Not in the moments, whose row weights are bound to
    # its clients, nor in Round A: the roots' is a batch's set-up; both are sent again;
    # below them none is recovered; a drop in the coarse counts stops the fit, and one in
    # the out-of-bag round releases nothing (red team 18).
    "secure-drop-out": {
        "task": "regression",
        "privacy": "secure",
        "on_client_failure": "drop",
        "missing": True,
        "c2_fails_in": ("grid", 0),
    },
}


def _fit(
    name: str,
    kind: str | None = None,
    at: int = 0,
    mutate: Callable[[Message], Any] | None = None,
    **kw: Any,
) -> tuple[Any, Mutating, Any]:
    """A small fit of configuration ``name`` (3 clients x 60 rows, 2 trees of depth 3)."""
    cfg = {**CONFIGS[name], **kw}
    task, cats, weights = cfg.pop("task"), cfg.pop("categories", False), cfg.pop("weights", False)
    fails = cfg.pop("c2_fails_in", None)  # (round kind, occurrence): client c2 raises there
    missing = cfg.pop("missing", False)
    declared = cfg.pop("declared", False)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(180, 4))
    y = X[:, 0] + 0.5 * X[:, 1] + 0.1 * rng.normal(size=180)
    if missing:  # a fifth of column 2 missing: its target stays as it was
        X[rng.random(180) < 0.2, 2] = np.nan
    if cats:
        X[:, 3] = rng.integers(0, 4, size=180)
    if task == "classification":
        y = (y > 0).astype(int) + (y > 1).astype(int)
    extra: dict[str, Any] = {"categorical_features": [3]} if cats else {}
    if declared:  # column 3 a CategoricalDtype of five declared levels, four present
        X[:, 3] = rng.integers(0, 4, size=180)
        frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
        frame["d"] = pd.Categorical(X[:, 3].astype(int), categories=[0, 1, 2, 3, 4])
        cfg.update(categories="from_dtype", classes=[0, 1, 2])
    w = rng.uniform(0.5, 2.0, size=180) if weights else None
    clients = [
        Client(
            frame.iloc[i * 60 : i * 60 + 60] if declared else X[i * 60 : i * 60 + 60],
            y[i * 60 : i * 60 + 60],
            f"c{i}",
            sample_weight=None if w is None else w[i * 60 : i * 60 + 60],
            **extra,
        )
        for i in range(3)
    ]
    if fails is not None:
        clients[2] = _Failing(X[120:], y[120:], "c2", fails, **extra)
    mut = Mutating(LocalFederation(clients), kind, at, mutate)
    if cfg["privacy"] != "none":
        cfg.setdefault("min_aggregate_rows", 5)
    cls = FedForestClassifier if task == "classification" else FedForestRegressor
    model = cls(n_estimators=2, max_depth=3, random_state=0, oob_score=True, **cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit_federated(mut)
    out = model.predict_proba(X) if task == "classification" else model.predict(X)
    return model, mut, out


class _Failing(Client):
    """A client that raises in its round ``at`` (from 0) of ``kind`` (dropped under "drop")."""

    def __init__(self, X: Any, y: Any, name: str, kind: tuple[str, int], **kw: Any) -> None:
        super().__init__(X, y, name, **kw)
        self.fail_kind, self.left = kind

    def handle(self, msg: Message) -> Any:
        if msg.kind == self.fail_kind:
            self.left -= 1
            if self.left < 0:
                raise RuntimeError(f"{self.name} fails")
        return super().handle(msg)


_HONEST: dict[str, tuple[list[Message], Any]] = {}


def _honest(name: str) -> tuple[list[Message], Any]:
    """The honest fit's replies of ``TARGET`` and its predictions (cached)."""
    if name not in _HONEST:
        _, fed, out = _fit(name)
        _HONEST[name] = (fed.replies, out)
    return _HONEST[name]


# ----------------------------------------------------------------------------- mutations
def _set(value: Any, where: int = 0) -> Mutation:
    def edit(a: np.ndarray) -> np.ndarray:
        if a.size == 0:
            return a
        a = a.copy()
        with np.errstate(all="ignore"):
            a.reshape(-1)[where] = np.array(value).astype(a.dtype)
        return a

    return edit


def _mutations(arr: np.ndarray) -> dict[str, tuple[str, Mutation]]:
    """name -> (category, mutation) for an array of ``arr``'s dtype."""
    m: dict[str, tuple[str, Mutation]] = {
        "noncontiguous": ("layout", lambda a: np.repeat(a, 2, axis=0)[::2] if a.ndim else a),
        "fortran": ("layout", np.asfortranarray),
        "float64": ("dtype", lambda a: a.astype(np.float64)),
        "float32": ("dtype", lambda a: a.astype(np.float32)),
        "int32": ("dtype", lambda a: a.astype(np.int32)),
        "uint64": ("dtype", lambda a: a.astype(np.uint64)),
        "bool": ("dtype", lambda a: a.astype(bool)),
        "object": ("dtype", lambda a: a.astype(object)),
        "complex": ("dtype", lambda a: a.astype(np.complex128)),
        "big-endian": ("dtype", lambda a: a.astype(a.dtype.newbyteorder(">"))),
        "strings": ("dtype", lambda a: a.astype(str)),
        "0-d": ("shape", lambda a: np.array(a.ravel()[0] if a.size else 0, dtype=a.dtype)),
        "extra axis": ("shape", lambda a: a[..., None]),
        "leading axis": ("shape", lambda a: a[None]),
        "one row short": ("shape", lambda a: a[:-1]),
        "one row long": ("shape", lambda a: np.concatenate([a, a[-1:]]) if a.ndim else a[None]),
        "empty": ("shape", lambda a: a.reshape(-1)[:0]),
        "flattened": ("shape", np.ravel),
        "zeros": ("value", np.zeros_like),
        "reversed": ("value", lambda a: a[::-1].copy()),
        "plus one": ("value", lambda a: a + np.ones(1, dtype=a.dtype)),
    }
    if arr.dtype.kind == "f":
        for label, v in [("NaN", np.nan), ("inf", np.inf), ("-inf", -np.inf), ("-1", -1.0),
                         ("1e308", 1e308), ("2^62", 2.0**62)]:  # fmt: skip
            m[label] = ("value", _set(v))
            m[label + " last"] = ("value", _set(v, -1))
        m["negated"] = ("value", lambda a: -a)
    else:
        info = np.iinfo(arr.dtype)
        values = [("max", info.max), ("min", info.min), ("2^62", min(2**62, info.max)),
                  ("2^31", min(2**31, info.max)), ("-1", -1 if info.min < 0 else 0)]  # fmt: skip
        for label, v in values:
            m[label] = ("value", _set(v))
            m[label + " last"] = ("value", _set(v, -1))
        m["all max"] = ("value", lambda a: np.full_like(a, info.max))
        m["all 2^62"] = ("value", lambda a: np.full_like(a, min(2**62, info.max)))
        m["duplicate first"] = (
            "value",
            lambda a: np.concatenate([a[:1], a[:-1]]) if a.ndim == 1 and a.size > 1 else a,
        )
    return m


def _cases() -> list[tuple[str, str, int, str, str]]:
    """(config, round kind, occurrence, array, mutation): all for the first configuration,
    a seeded subset of 6 per array for the others; a handshake's header fields too."""
    out = []
    plan = {  # config -> rounds (kind, occurrence) fuzzed
        "none-regression": [("handshake", 0), ("round_a", 0), ("round_a", 1), ("round_b", 1),
                            ("oob", 0)],
        "none-classification-categories-H": [("round_a", 1), ("round_b", 0)],
        "none-avgimp": [("round_b", 0)],
        "none-classification-weighted": [("round_a", 1), ("round_b", 0)],
        "none-global": [("handshake", 0), ("round_a", 1)],
        "none-top-l": [("round_a", 1)],
        "none-verification": [("round_a", 1)],
        "secure-categories": [("handshake", 0), ("grid", 0), ("grid", 1), ("round_a", 1),
                              ("round_b", 1), ("oob", 0)],
        "dp": [("grid", 0), ("round_a", 0)],  # its Round B may not come (noise)
        "secure-drop-out": [("recover", 0)],
        "secure-declared": [("handshake", 0)],
        "secure-weighted-missing": [("grid", 0), ("grid", 1), ("round_a", 1), ("round_b", 0)],
    }  # fmt: skip
    for k, (config, rounds) in enumerate(plan.items()):
        replies, _ = _honest(config)
        for kind, at in rounds:
            reply = [r for r in replies if r.kind == kind][at]
            for key in sorted(reply.arrays):
                names = sorted(_mutations(reply.arrays[key]))
                if k:
                    rng = np.random.default_rng(len(out) + k)
                    names = sorted(rng.choice(names, size=min(6, len(names)), replace=False))
                out += [(config, kind, at, key, name) for name in names]
            out += [(config, kind, at, key, "missing") for key in sorted(reply.arrays)[:1]]
            out.append((config, kind, at, "bogus", "extra"))
            if kind == "handshake":  # its header fields too
                out += [
                    (config, kind, at, f"header {key}", name)
                    for key in sorted(reply.header)
                    for name in HEADER_MUTATIONS
                ]
    return out


#: A header field: dropped, or replaced by a value of another type or out of range.
HEADER_MUTATIONS: dict[str, Any] = {
    "missing": None,
    "null": None,
    "text": "x",
    "-1": -1,
    "2^63": 2**63,
    "list": [1, 2],
    "object": {"a": 1},
    "1.5": 1.5,
    "NaN": float("nan"),
    "true": True,
}


def _apply(key: str, name: str, sample: np.ndarray | None) -> Callable[[Message], Message]:
    def mutate(msg: Message) -> Message:
        if key.startswith("header "):
            field = key.removeprefix("header ")
            if name == "missing":
                del msg.header[field]
            else:
                msg.header[field] = HEADER_MUTATIONS[name]
        elif name == "missing":
            del msg.arrays[key]
        elif name == "extra":
            msg.arrays[key] = np.zeros(3)
        else:
            assert sample is not None
            msg.arrays[key] = _mutations(sample)[name][1](msg.arrays[key])
        return msg

    return mutate


def _is_hostile_reply_error(exc: BaseException, key: str, privacy: str, category: str) -> bool:
    """The project's refusal: the client and the array named (or, pooled, some client).

    A mutated value consistent in itself may be caught by a later check (a Round A summary
    by Round B's statistics): then the client is named, the field is the later one.
    """
    text = str(exc)
    if key.startswith("header ") and isinstance(exc, ValueError):
        # The handshake: its own check (InvalidReply), or the clients' schemas compared
        # (a ValueError naming the client that differs from the first).
        return f"Client {TARGET!r}" in text or f"client {TARGET!r}" in text
    if isinstance(exc, InvalidReply | ClientFailure):
        # The array, or what it encodes ('sketch_runs': the sketch; 'left_counts': the
        # left statistics).
        named = key in text or key.split("_")[0] in text or category == "value"
        return f"Client {TARGET!r}" in text and named
    recovery = f"Client {TARGET!r} failed while the masks"  # dropped while recovering
    return (
        privacy != "none"
        and isinstance(exc, ValueError)
        and ("some client" in text or "hides which" in text or recovery in text)
    )


def check_mutation(config: str, kind: str, at: int, key: str, name: str) -> str:
    """Run one mutated fit; the outcome as a word, or raise AssertionError."""
    replies, honest = _honest(config)
    reply = [r for r in replies if r.kind == kind][at]
    sample = reply.arrays.get(key)
    if key.startswith("header "):  # the client's own description: a lie, or refused
        category = "value"
    else:
        category = "shape" if name in ("missing", "extra") else _mutations(sample)[name][0]
    privacy = CONFIGS[config]["privacy"]
    try:
        _, fed, out = _fit(config, kind, at, _apply(key, name, sample))
    except Exception as exc:  # noqa: BLE001 - judged below
        assert _is_hostile_reply_error(exc, key, privacy, category), (
            f"{config} {kind}#{at} {key} {name}: {type(exc).__name__}: {exc}"
        )
        return "refused"
    assert fed.applied, f"{config} {kind}#{at}: the round never came (the harness is wrong)"
    same = np.array_equal(out, honest)
    # A legitimate encoding: the same forest (under "dp" every fit draws fresh noise).
    if category in ("layout", "dtype", "shape") and privacy != "dp":
        assert same, f"{config} {kind}#{at} {key} {name}: accepted, and the forest changed"
    assert np.all(np.isfinite(out)), f"{config} {kind}#{at} {key} {name}: non-finite predictions"
    return "same" if same else "lie within bounds"


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_every_mutation_of_one_client_is_refused_or_harmless(
    config: str, request: pytest.FixtureRequest
) -> None:
    if config == "dp":  # which rounds come depends on the noise: the same on every run
        request.getfixturevalue("seeded_secrets")
    cases = [c for c in _cases() if c[0] == config]
    assert cases
    outcomes, failures = [], []
    for case in cases:
        try:
            outcomes.append(check_mutation(*case))
        except AssertionError as exc:  # all of them reported, not only the first
            failures.append(str(exc).splitlines()[0])
    assert not failures, "\n".join(failures)
    # The harness can fail: the mutations do reach the server, most are refused.
    assert outcomes.count("refused") > len(outcomes) // 3


# ----------------------------------------------------------------------------- found by it
def _refused(config: str, kind: str, at: int, mutate: Callable[[Message], Any], **kw: Any) -> str:
    with pytest.raises(InvalidReply, match=rf"Client '{TARGET}'.*round \d+ \({kind}\)") as info:
        _fit(config, kind, at, mutate, **kw)
    return info.value.field


def _edit(key: str, edit: Callable[[np.ndarray], np.ndarray]) -> Callable[[Message], Message]:
    def mutate(msg: Message) -> Message:
        msg.arrays[key] = edit(msg.arrays[key])
        return msg

    return mutate


@pytest.mark.parametrize("key", ["left_counts", "left_sums"])
def test_an_array_in_another_byte_order_is_refused_before_numba_sees_it(key: str) -> None:
    """Before: numba's TypingError ("Unsupported array dtype: >i4") out of the Round B sum."""
    big = _edit(key, lambda a: a.astype(a.dtype.newbyteorder(">")))
    assert key in _refused("none-regression", "round_b", 0, big)


def test_float32_values_are_refused_not_rounded() -> None:
    """Before: accepted, the client's sums rounded to float32 and the forest changed."""
    assert "left_sums" in _refused(
        "none-regression", "round_b", 0, _edit("left_sums", lambda a: a.astype(np.float32))
    )


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_an_infinite_local_best_threshold_is_refused(value: float) -> None:
    """Before: accepted as a candidate threshold (the forest changed silently)."""
    assert "local_best" in _refused(
        "none-regression", "round_a", 0, _edit("local_best", _set(value))
    )


def test_a_malformed_local_best_is_refused_in_its_round_and_can_be_dropped() -> None:
    """Before: a plain ValueError when the candidates were merged, after the round's checks:
    not an InvalidReply, no round named, and on_client_failure="drop" could not drop it."""
    short = _edit("local_best", lambda a: a[:-1])
    _refused("none-regression", "round_a", 0, short)
    model, _, out = _fit("none-regression", "round_a", 0, short, on_client_failure="drop")
    assert [name for name, _ in model.dropped_clients_] == [TARGET]
    assert np.all(np.isfinite(out))


def test_a_malformed_public_key_is_refused_in_the_handshake_and_can_be_dropped() -> None:
    """Before: a plain ValueError after the handshake round (not droppable)."""
    short = _edit("public_key", lambda a: a[:-1])
    assert "public_key" in _refused("secure-categories", "handshake", 0, short)
    model, _, _ = _fit("secure-categories", "handshake", 0, short, on_client_failure="drop")
    assert [name for name, _ in model.dropped_clients_] == [TARGET]


def test_malformed_global_feature_sketches_are_refused_in_the_handshake() -> None:
    """Before: a plain ValueError when the global grid was made (not droppable)."""
    flat = _edit("feature_rows", lambda a: a[None])
    _refused("none-global", "handshake", 0, flat)
    model, _, _ = _fit("none-global", "handshake", 0, flat, on_client_failure="drop")
    assert [name for name, _ in model.dropped_clients_] == [TARGET]


def test_avgimp_row_counts_beyond_the_node_are_refused() -> None:
    """Before: 255 rows left of a candidate in a node of 60 were accepted (the pooled left
    rows, hence min_samples_leaf, came from rows the client does not have)."""
    assert "avg_rows" in _refused("none-avgimp", "round_b", 0, _edit("avg_rows", _set(255)))


def test_left_sums_of_squares_beyond_the_node_are_refused() -> None:
    """Before: a left statistic with sum w y^2 = 1e300 in a node of sum ~60 was accepted
    (the right side's sum went negative and the gains with it)."""

    def huge(a: np.ndarray) -> np.ndarray:
        a = a.copy()
        a[0, 1] = 1e300
        return a

    _refused("none-regression", "round_b", 0, _edit("left_sums", huge))


def test_left_weights_beyond_the_node_are_refused() -> None:
    """Before: with sample weights (real weights travel in 'left_sums'), a left statistic of
    1e300 times the weight, its class weights adding up, was accepted."""
    _refused("none-classification-weighted", "round_b", 0, _edit("left_sums", lambda a: a * 1e300))


@pytest.mark.parametrize("edit", ["out of range", "twice", "gain NaN"])
def test_bad_top_l_shortlists_are_refused_in_round_a_and_can_be_dropped(edit: str) -> None:
    """Before: plain ValueErrors when the shortlist was made, after the round's checks (not
    droppable; a wrong shape did not name the round)."""

    def mutate(msg: Message) -> Message:
        feats, gains = msg.arrays["top_features"], msg.arrays["top_gains"]
        if edit == "out of range":
            feats[0, 0] = 4
        elif edit == "twice":
            feats[0, 1] = feats[0, 0]
        else:
            gains[0, 0] = np.nan
        return msg

    assert "top_features" in _refused("none-top-l", "round_a", 0, mutate)
    model, _, out = _fit("none-top-l", "round_a", 0, mutate, on_client_failure="drop")
    assert [name for name, _ in model.dropped_clients_] == [TARGET]
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("key", ["sketch_off", "sketch"])
def test_bad_verification_values_are_refused_in_round_a_and_can_be_dropped(key: str) -> None:
    """n_bins=None: before, the offsets and values were read when the candidates were made
    (plain ValueErrors, not droppable), a NaN value or unsorted offsets passed."""

    def mutate(msg: Message) -> Message:
        a = msg.arrays[key]
        if key == "sketch_off":
            a[1] = a[-1] + 5  # past the values; the last offset (their size) unchanged
        else:
            a[0] = np.nan
        return msg

    assert key in _refused("none-verification", "round_a", 0, mutate)
    model, _, out = _fit("none-verification", "round_a", 0, mutate, on_client_failure="drop")
    assert [name for name, _ in model.dropped_clients_] == [TARGET]
    assert np.all(np.isfinite(out))


def test_an_absurd_row_count_is_refused_at_the_handshake() -> None:
    """Before: n_samples = 2^63 passed the handshake; under "secure" the grid round's
    pooled moments then failed their bound, blaming some client (secure aggregation hides
    which), though the handshake had named the liar."""

    def huge(msg: Message) -> Message:
        msg.header["n_samples"] = 2**63
        return msg

    assert "n_samples" in _refused("secure-categories", "handshake", 0, huge)


def test_secure_labels_beyond_one_per_m_rows_are_refused_and_none_is_valid() -> None:
    """Under "secure" a client names only labels it holds in m rows (5 here, 60 rows):
    at most 12 labels; naming more is refused, naming none is valid (the others name
    every label c1 holds)."""

    def many(msg: Message) -> Message:
        msg.header["labels"] = list(range(13))
        return msg

    def none(msg: Message) -> Message:
        msg.header["labels"] = []
        return msg

    field = _refused("secure-weighted-missing", "handshake", 0, many)
    assert field == "header field 'labels'"
    model, fed, out = _fit("secure-weighted-missing", "handshake", 0, none)
    assert fed.applied and list(model.classes_) == [0, 1, 2] and np.all(np.isfinite(out))


def _poisson_fit(seed: int, mutate: Callable[[Message], Any] | None = None) -> Any:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(600, 3))
    y = np.exp(3 * X[:, 0]) * rng.lognormal(size=600) + 1e6 * (X[:, 1] > 1)
    clients = [Client(X[i::3], y[i::3], f"c{i}") for i in range(3)]
    model = FedForestRegressor(
        n_estimators=4, max_depth=6, privacy="none", random_state=0, criterion="poisson"
    )
    return model.fit_federated(Mutating(LocalFederation(clients), "round_b", 0, mutate))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_honest_poisson_increments_of_targets_over_many_magnitudes_pass(seed: int) -> None:
    """Found by the audit's honest fits: Jensen's bound on Round B's Poisson increments
    allowed 1e-7 of itself only, not the rounding of the running sums they are differences
    of, and an honest client with targets from 0.01 to 1e6 was refused (seeds 0-2 all)."""
    model = _poisson_fit(seed)
    assert np.all(np.isfinite(model.predict(np.zeros((2, 3)))))


def test_poisson_increments_below_jensens_bound_are_still_refused() -> None:
    """The rounding slack does not let a lie through: sum w y log y halved at a bin."""

    def lower(msg: Message) -> Message:
        sums = msg.arrays["left_sums"]
        k = int(np.argmax(sums[:, 1]))  # a bin with y log y well above 0
        sums[k, 1] = sums[k, 1] / 2 - 1.0
        return msg

    with pytest.raises(InvalidReply, match="Client 'c1'.*y log y"):
        _poisson_fit(0, lower)


def _short_mask(msg: Message) -> Message:
    msg.arrays["known"] = msg.arrays["known"][:-1]
    return msg


def test_a_malformed_recovery_reply_is_refused_in_its_round(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A survivor's masks after c2 dropped out: before, their dtype and shape were checked
    after the round (a plain ValueError, no round named)."""
    # The known values' counts (a column with missing values), a round recovered after a drop.
    kw = {"on_client_failure": "drop", "c2_fails_in": ("grid", 0), "missing": True}
    with pytest.raises(ValueError, match=r"Client 'c1' failed while the masks of \['c2'\]"):
        _fit("secure-categories", "recover", 0, _short_mask, **kw)
    assert re.search(
        r"Client 'c1' sent an invalid reply in round \d+ \(recover\): array 'known'", caplog.text
    )


def test_a_survivor_dropped_while_recovering_stops_the_fit_by_name() -> None:
    """Before: a survivor dropped in the recovery round was no longer expected to answer it,
    so its pair masks stayed in the sums; the fit decoded garbage and stopped on "some
    client lied" (secure aggregation hiding which), or went on with wrong sums."""
    # The known values' counts (a column with missing values), a round recovered after a drop.
    kw = {"on_client_failure": "drop", "c2_fails_in": ("grid", 0), "missing": True}

    def bad_dtype(msg: Message) -> Message:  # refused by the envelope, before too
        msg.arrays["known"] = msg.arrays["known"].astype(object)
        return msg

    with pytest.raises(
        ValueError, match=r"Client 'c1' failed while the masks.*cannot be recovered"
    ):
        _fit("secure-categories", "recover", 0, bad_dtype, **kw)


def test_the_codec_refuses_forged_layouts_naming_the_sender() -> None:
    """Before: shapes whose int64 product wrapped gave NumPy's reshape errors (no sender),
    a name given twice kept the last array silently."""
    from fedforest.federated.codec import pack_arrays, unpack_arrays

    layout, buffer = pack_arrays({"a": np.arange(4.0)})
    for shape in ([2**32, 2**32], [2**63, 2], [2**62, 4]):
        forged = [{**layout[0], "shape": shape}]
        with pytest.raises(ValueError, match="'c1'.*does not fit"):
            unpack_arrays(forged, buffer, "c1")
    with pytest.raises(ValueError, match="'c1'.*'a' appears twice"):
        unpack_arrays(layout * 2, buffer, "c1")
    big_layout, big_buffer = pack_arrays({"a": np.arange(4.0).astype(">f8")})
    arr = unpack_arrays(big_layout, big_buffer, "c1")["a"]
    assert arr.dtype.isnative and np.array_equal(arr, np.arange(4.0))


_DEEP = "[" * 100_000 + "]" * 100_000  # JSON nested past Python's recursion limit


def test_a_dask_frame_with_a_header_nested_too_deep_is_a_named_value_error() -> None:
    """Before: json's RecursionError escaped the frame decoder (the federation catches a
    ValueError only: a reply could crash the server instead of failing its client)."""
    pytest.importorskip("dask")
    from fedforest.transport.dask import _wire

    meta = ('{"kind": "round_a", "header": {"x": ' + _DEEP + '}, "layout": []}').encode()
    frame = _wire._PREAMBLE.pack(_wire._MAGIC, _wire._VERSION, len(meta)) + meta
    with pytest.raises(ValueError, match="'c1' has a malformed JSON part"):
        _wire.from_bytes(frame, "c1")


def test_a_flower_record_with_a_header_nested_too_deep_is_a_named_value_error() -> None:
    """Before: json's RecursionError escaped from_records (the federation catches a
    ValueError only)."""
    pytest.importorskip("flwr")
    from flwr.app import ConfigRecord, RecordDict

    from fedforest.transport.flower import _codec

    content = _codec.to_records(Message("round_a", {}, {"a": np.zeros(2)}))
    config = content.config_records[_codec.CONFIG]
    bad = RecordDict(
        {
            _codec.CONFIG: ConfigRecord({**dict(config), "header": '{"x": ' + _DEEP + "}"}),
            **dict(content.array_records),
        }
    )
    with pytest.raises(ValueError, match="'c1' has a malformed header"):
        _codec.from_records(bad, "c1")
