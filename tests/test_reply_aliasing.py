"""Reused memory never aliases a message: what the server received stays as it was.

The clients write their per-level arrays into scratch memory kept per thread
(``fedforest.federated.scratch``) and copy out what they send. A recording federation
keeps every request and reply of a fit, as an honest-but-curious server (and the privacy
tests) would; each is deep-copied when it arrives, and after the fit every kept message
must still equal its copy, byte for byte. A reply written into scratch and sent as it is
would be overwritten by the next client or level in the same thread.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated import scratch
from fedforest.federated.federation import Federation
from fedforest.federated.protocol import ROUND_A, Message
from tests.test_privacy import RecordingFederation


class CopyingRecorder(RecordingFederation):
    """Delivers everything, keeps every message and a deep copy of it taken on receipt."""

    def __init__(self, inner: Federation) -> None:
        super().__init__(inner)
        self.kept: list[tuple[Message, Message]] = []  # (as received, copy on receipt)
        self.scratch_in_use = False

    def send_and_receive(self, requests: dict[str, Message], round_index: int):
        for msg in requests.values():
            self.kept.append((msg, copy.deepcopy(msg)))
        replies = super().send_and_receive(requests, round_index)
        for msg in replies.values():
            self.kept.append((msg, copy.deepcopy(msg)))
        self.scratch_in_use |= any(scratch._BUFFERS.values())
        return replies


def _same(a: Message, b: Message) -> bool:
    if a.kind != b.kind or a.header != b.header or sorted(a.arrays) != sorted(b.arrays):
        return False
    return all(
        a.arrays[k].dtype == b.arrays[k].dtype
        and a.arrays[k].shape == b.arrays[k].shape
        and np.asarray(a.arrays[k]).tobytes() == np.asarray(b.arrays[k]).tobytes()
        for k in a.arrays
    )


@pytest.mark.parametrize(
    ("privacy", "classifier", "n_jobs"),
    [("secure", False, 1), ("secure", True, 2), ("none", False, 1)],
)
def test_kept_messages_are_unchanged_after_the_fit(privacy, classifier, n_jobs) -> None:
    rng = np.random.default_rng(7)
    n, n_clients = 3000, 4
    X = rng.normal(size=(n, 6))
    s = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=n)
    y = (s > 0).astype(int) if classifier else s
    h = rng.integers(0, n_clients, n)
    clients = [ff.Client(X[h == k], y[h == k], name=str(k)) for k in range(n_clients)]
    fed = CopyingRecorder(ff.LocalFederation(clients, n_jobs=n_jobs))
    Est = ff.FedForestClassifier if classifier else ff.FedForestRegressor
    Est(n_estimators=5, max_depth=6, privacy=privacy, n_jobs=n_jobs, random_state=0).fit_federated(
        fed
    )
    if privacy == "secure":  # the fit did write into scratch memory
        assert fed.scratch_in_use
        n_round_a = sum(msg.kind == ROUND_A for msg, _ in fed.kept)
        assert n_round_a >= 6 * 2 * n_clients  # six levels, requests and replies
    changed = [i for i, (kept, copied) in enumerate(fed.kept) if not _same(kept, copied)]
    assert changed == []


def test_scratch_is_reused_and_grows() -> None:
    a = scratch.scratch("test-buffer", 1000, np.float64)
    a[:] = 1.0
    b = scratch.scratch("test-buffer", 1500, np.float64)  # within the room: the same memory
    assert np.shares_memory(a, b) and b.size == 1500
    c = scratch.scratch("test-buffer", 10 * scratch.ROOM * 1000, np.float64)  # beyond: new
    assert not np.shares_memory(a, c)
    d = scratch.scratch("test-buffer", 10, np.int64)  # another dtype: new memory
    assert d.dtype == np.int64 and not np.shares_memory(c, d)
    scratch.release()
    assert not np.shares_memory(d, scratch.scratch("test-buffer", 10, np.int64))


class ScratchPoisoner(RecordingFederation):
    """Delivers everything, then fills every thread's scratch memory with garbage.

    Each round's replies are in: a scratch view the server still held from before (kept
    across rounds, which ``scratch.py`` forbids) would now read NaN or huge integers.
    """

    def send_and_receive(self, requests: dict[str, Message], round_index: int):
        replies = super().send_and_receive(requests, round_index)
        for buffers in scratch._BUFFERS.values():
            for buf in buffers.values():
                buf.fill(np.nan if buf.dtype.kind == "f" else -1 if buf.dtype.kind == "i" else 1)
        return replies


@pytest.mark.parametrize(
    ("privacy", "classifier", "n_jobs"),
    [("secure", False, 1), ("secure", True, 2), ("none", False, 1)],
)
def test_no_scratch_view_is_kept_across_rounds(privacy, classifier, n_jobs) -> None:
    # Round A's pooled histograms were a scratch view read again in Round B and in
    # keep_histograms (after Round B's exchange): poisoned, the next level's grids changed.
    rng = np.random.default_rng(11)
    n, n_clients = 2000, 4
    X = rng.normal(size=(n, 5))
    s = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=n)
    y = (s > 0).astype(int) if classifier else s
    h = rng.integers(0, n_clients, n)
    Est = ff.FedForestClassifier if classifier else ff.FedForestRegressor
    out = []
    for poison in (False, True):
        clients = [ff.Client(X[h == k], y[h == k], name=str(k)) for k in range(n_clients)]
        fed = ff.LocalFederation(clients, n_jobs=n_jobs)
        fed = ScratchPoisoner(fed) if poison else fed
        model = Est(n_estimators=4, max_depth=6, privacy=privacy, n_jobs=n_jobs, random_state=0)
        model.fit_federated(fed)
        out.append(model.predict_proba(X) if classifier else model.predict(X))
    np.testing.assert_array_equal(out[0], out[1])
