"""Round A's rows and draws under "secure": two whole counts in one masked word.

The oracle of the packing is the plain column sums; the oracle of the fits is the same fit
with the counts sent as two words each (the path kept for sample weights and "dp").
"""

from __future__ import annotations

import numpy as np
import pytest

import fedforest as ff
import fedforest.federated.server.secure_round_a as secure_round_a
from fedforest.federated.privacy.secagg import (
    MaskingKeys,
    add_in_order,
    from_fixed,
    pack_counts,
    to_fixed,
    to_fixed_packed,
    unpack_counts,
)
from fedforest.federated.protocol import ROUND_A, ROUND_B
from fedforest.transport.local import LocalFederation


def _parties(names: list[str]) -> dict[str, MaskingKeys]:
    keys = {n: MaskingKeys(n) for n in names}
    publics = {n: k.public_bytes for n, k in keys.items()}
    for k in keys.values():
        k.agree(publics)
    return keys


def test_masked_packed_counts_sum_to_the_column_sums() -> None:
    rng = np.random.default_rng(3)
    names = ["a", "b", "c", "d", "e", "f"]
    keys = _parties(names)
    bits = np.array([0, 0, 24, 24])
    # Counts up to 2^29 each (six of them sum past 2^31, below 2^32), then two real sums.
    stats = {n: rng.integers(0, 2**29, size=(40, 4)).astype(np.float64) for n in names}
    for n in names:
        stats[n][:, 2:] = rng.normal(size=(40, 2)) * 1000
    stats["a"][:3, :2] = 0.0
    masked = []
    for n in names:
        packed = pack_counts(to_fixed(stats[n], bits), n)
        assert packed.shape == (40, 3) and packed.dtype == np.uint64
        masked.append(keys[n].mask({"left": packed}, names, 9)["left"])
    got = unpack_counts(add_in_order(masked, (40, 3)), bits[2:])
    want = np.sum([stats[n] for n in names], axis=0)
    assert want[:, :2].max() > 2**31
    np.testing.assert_array_equal(got[:, :2], want[:, :2])  # whole counts: exact
    plain = from_fixed(add_in_order([to_fixed(stats[n], bits) for n in names], (40, 4)), bits)
    np.testing.assert_array_equal(got, plain)  # the real sums: as unpacked sums decode
    two = pack_counts(to_fixed(stats["b"][:, :2], 0), "b")  # Round A: the counts alone
    np.testing.assert_array_equal(unpack_counts(two), stats["b"][:, :2])


@pytest.mark.parametrize("bad", [-1.0, 2.0**32])
def test_pack_counts_refuses_a_count_outside_32_bits(bad: float) -> None:
    counts = np.zeros((5, 2))
    counts[2, 1] = bad
    with pytest.raises(ValueError, match="'site-3'.*whole numbers in \\[0, 2\\^32\\)"):
        pack_counts(to_fixed(counts, 0), "site-3")


def test_to_fixed_packed_is_the_two_steps() -> None:
    # The clients' one-pass encoding: the words of to_fixed then pack_counts, bit for bit.
    rng = np.random.default_rng(5)
    for bits in (np.array([0, 0, 24, 24]), np.array([0, 0]), np.array([0, 0, 24])):
        values = rng.normal(size=(300, bits.size)) * 1e3
        values[:, :2] = rng.integers(0, 2**32, size=(300, 2))
        values[:4, :2] = [[0, 0], [2**32 - 1, 0], [0, 2**32 - 1], [1, 2**32 - 1]]
        got = to_fixed_packed(values, bits, "x")
        want = pack_counts(to_fixed(values, bits), "x")
        assert got.dtype == want.dtype == np.uint64 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert to_fixed_packed(np.zeros((0, 3)), np.array([0, 0, 24]), "x").shape == (0, 2)


@pytest.mark.parametrize(
    ("row", "col", "bad", "match"),
    [
        (2, 1, -1.0, "whole numbers in \\[0, 2\\^32\\)"),
        (0, 0, 2.0**32, "whole numbers in \\[0, 2\\^32\\)"),
        (3, 2, np.nan, "not finite or too large"),
        (1, 0, np.inf, "not finite or too large"),
        (4, 3, 1e300, "not finite or too large"),
    ],
)
def test_to_fixed_packed_refuses_what_the_two_steps_refuse(
    row: int, col: int, bad: float, match: str
) -> None:
    values = np.ones((5, 4))
    values[row, col] = bad
    if col >= 2:  # a bad real value after a bad count: to_fixed's error comes first
        values[0, 0] = -1.0
    with pytest.raises(ValueError, match=match):
        to_fixed_packed(values, np.array([0, 0, 24, 24]), "site-3")


class _Recording(LocalFederation):
    """Keeps the shape of every Round A reply's counts and Round B's left statistics."""

    def __init__(self, clients: list[ff.Client]) -> None:
        super().__init__(clients)
        self.hist_shapes: list[tuple[int, ...]] = []
        self.left_shapes: list[tuple[int, ...]] = []

    def send_and_receive(self, requests, round_index):  # type: ignore[no-untyped-def]
        replies = super().send_and_receive(requests, round_index)
        for msg in replies.values():
            if msg.kind == ROUND_A:
                self.hist_shapes.append(np.shape(msg.arrays["hist"]))
            if msg.kind == ROUND_B:
                self.left_shapes.append(np.shape(msg.arrays["left"]))
        return replies


def _fit(weights: bool) -> tuple[ff.FedForestRegressor, _Recording]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 5))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + rng.normal(scale=0.3, size=900)
    w = rng.uniform(0.5, 2.0, size=900) if weights else None
    h = np.arange(900) % 3
    clients = [
        ff.Client(
            X[h == k], y[h == k], name=f"c{k}", sample_weight=None if w is None else w[h == k]
        )
        for k in range(3)
    ]
    fed = _Recording(clients)
    model = ff.FedForestRegressor(n_estimators=4, max_depth=4, random_state=1)
    return model.fit_federated(fed), fed


@pytest.mark.parametrize("weights", [False, True])
def test_packed_counts_grow_the_forest_of_unpacked_ones(monkeypatch, weights: bool) -> None:
    packed, fed = _fit(weights)
    # Without sample weights rows and draws travel packed (one word a grid edge or
    # candidate), with them (real weights) as two words.
    words = 0 if weights else 1
    assert fed.hist_shapes and {s[1] for s in fed.hist_shapes} == {2 - words}
    assert fed.left_shapes and {s[1] for s in fed.left_shapes} == {4 - words}
    monkeypatch.setattr(secure_round_a, "HALF_BITS", 0)  # no pooled rows fit: never packed
    plain, fed = _fit(weights)
    assert {s[1] for s in fed.hist_shapes} == {2}
    assert {s[1] for s in fed.left_shapes} == {4}
    for a, b in zip(packed.trees_, plain.trees_, strict=True):
        for name in ("feature", "threshold", "children_left", "value", "n_node_samples"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert packed.communication_.upload_bytes < plain.communication_.upload_bytes or weights
