"""Round A's grids on per-feature lattices, Round B's candidates as grid indices.

The client must rebuild bit for bit the edges the server counts on (``grid_wire``), and
refuse what a hostile server could send instead.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.federated import grid_counts, grid_lattice, grid_wire
from fedforest.federated.grid_wire import (
    LATTICE_STEPS,
    candidate_arrays,
    decode_candidates,
    decode_grid,
    encode_grid,
    grid_inputs,
    sent_candidates,
)
from fedforest.federated.protocol import ROUND_A, ROUND_B, Message
from fedforest.federated.server import secure_round_a, secure_round_b
from fedforest.transport.local import LocalFederation


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def _grids(rng, n_pairs=40, d=3, lattice=(-3.0, 5.0)):
    """Sorted random grids per pair, some edges exact (a few of them lattice points)."""
    sizes = rng.integers(0, 30, n_pairs)
    off = np.concatenate([[0], np.cumsum(sizes)])
    grid = np.concatenate([np.sort(rng.uniform(-2.5, 4.5, s)) for s in sizes])
    feat = rng.integers(0, d, n_pairs).astype(np.int32)
    exact = rng.random(grid.size) < 0.2
    lat = np.tile(np.asarray(lattice, dtype=np.float64), (d, 1))
    return grid, off, feat, exact, lat


def _request(arrays, grid_off, feat) -> Message:
    return Message(ROUND_A, {}, {**arrays, "grid_off": grid_off, "pair_feat": feat})


def test_grid_round_trips_exactly() -> None:
    rng = np.random.default_rng(0)
    grid, off, feat, exact, lat = _grids(rng)
    # Exact edges that are lattice points travel as codes, the others as float64.
    a, b = lat[0]
    points = a + (b - a) * (rng.integers(0, LATTICE_STEPS, exact.sum()) / float(LATTICE_STEPS))
    grid[exact] = np.where(rng.random(exact.sum()) < 0.5, points, grid[exact])
    for p in range(off.size - 1):  # sorted again
        grid[off[p] : off[p + 1]].sort()
    arrays, decoded = encode_grid(grid, off, feat, exact, lat)
    rebuilt = decode_grid(_request(arrays, off, feat), off, feat, "c")
    np.testing.assert_array_equal(_bits(rebuilt), _bits(decoded))  # the client's = the server's
    np.testing.assert_array_equal(_bits(decoded[exact]), _bits(grid[exact]))  # exact kept
    step = (b - a) / LATTICE_STEPS
    assert np.abs(decoded - grid).max() <= 0.5 * step * (1 + 1e-6)
    assert np.abs(decoded - grid).max() > 0  # the quantile edges did snap
    # A NumPy check of the lattice: the free edges are a + (b - a) * (k / steps).
    sent = np.unpackbits(arrays["grid_exact"], count=grid.size).astype(bool)
    k = arrays["grid_code"].astype(np.float64)
    np.testing.assert_array_equal(decoded[~sent], a + (b - a) * (k / LATTICE_STEPS))
    assert arrays["grid_code"].dtype == np.uint32 and arrays["grid_value"].size == sent.sum()
    assert sent.sum() < exact.sum()  # lattice points among the exact edges are codes
    assert np.all(
        np.diff(decoded)[np.diff(np.repeat(np.arange(off.size - 1), np.diff(off))) == 0] >= 0
    )


def test_unsafe_lattices_send_float64() -> None:
    """Infinite bounds, a heavy tail (gaps far below the step) and ties stay exact."""
    off = np.array([0, 4, 8, 12])
    grid = np.array([0.1, 0.2, 0.3, 0.4, 1.0, 1.0 + 1e-12, 1.0 + 2e-12, 2.0, 0.5, 0.5, 0.5, 0.7])
    feat = np.array([0, 1, 1], dtype=np.int32)
    lat = np.array([[-np.inf, 1.0], [0.0, 1e6]])
    exact = np.zeros(grid.size, dtype=bool)
    arrays, decoded = encode_grid(grid, off, feat, exact, lat)
    np.testing.assert_array_equal(_bits(decoded[:8]), _bits(grid[:8]))  # no lattice; too close
    assert np.unpackbits(arrays["grid_exact"], count=12)[:8].all()
    # The ties of the third pair stay ties on the lattice.
    assert decoded[8] == decoded[9] == decoded[10] < decoded[11]
    rebuilt = decode_grid(_request(arrays, off, feat), off, feat, "c")
    np.testing.assert_array_equal(_bits(rebuilt), _bits(decoded))


def test_candidates_as_indices_round_trip() -> None:
    rng = np.random.default_rng(1)
    for n_edges in (20, 300):  # uint8, then uint16 indices (the last edge is a candidate)
        sizes = np.array([n_edges, 0, n_edges // 2])
        off = np.concatenate([[0], np.cumsum(sizes)])
        grid = np.concatenate([np.sort(rng.random(s)) for s in sizes])
        idx = [np.unique([*rng.choice(s, min(s, 5), replace=False), s - 1]) for s in sizes if s]
        idx.insert(1, np.zeros(0, dtype=np.int64))
        n_cand = np.array([i.size for i in idx])
        at = np.concatenate([off[p] + i for p, i in enumerate(idx)])
        cand = grid[at]
        arrays = candidate_arrays(grid, off, at, cand, n_cand)
        assert arrays["cand_at"].dtype == (np.uint8 if n_edges < 256 else np.uint16)
        cand_off = np.concatenate([[0], np.cumsum(n_cand)])
        got = decode_candidates(Message(ROUND_B, {}, arrays), cand_off, grid, off, "c")
        np.testing.assert_array_equal(_bits(got), _bits(cand))
    # A candidate off its grid: all of them travel as float64.
    arrays = candidate_arrays(grid, off, at, cand + 1e-9, n_cand)
    assert set(arrays) == {"cand"}


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("grid_exact", lambda a: a["grid_exact"].astype(np.uint16), "grid_exact"),
        ("grid_exact", lambda a: a["grid_exact"][:-1], "grid_exact"),
        ("grid_code", lambda a: a["grid_code"].astype(np.uint64) + np.uint64(2**32), "grid_code"),
        ("grid_code", lambda a: a["grid_code"].astype(np.float64), "grid_code"),
        ("grid_span", lambda a: np.full_like(a["grid_span"], np.nan), "grid_span"),
        ("grid_span", lambda a: a["grid_span"][:, ::-1].copy(), "grid_span"),
        ("grid_value", lambda a: a["grid_value"][:-1], "grid_value"),
    ],
)
def test_client_refuses_hostile_grids(field, value, match) -> None:
    rng = np.random.default_rng(2)
    grid, off, feat, exact, lat = _grids(rng)
    arrays, _ = encode_grid(grid, off, feat, exact, lat)
    arrays[field] = value(arrays)
    with pytest.raises(ValueError, match=f"{match}.*server|server.*{match}"):
        decode_grid(_request(arrays, off, feat), off, feat, "c")


def test_client_refuses_padding_bits_and_bad_indices() -> None:
    rng = np.random.default_rng(3)
    grid, off, feat, exact, lat = _grids(rng)
    arrays, decoded = encode_grid(grid, off, feat, exact, lat)
    n = grid.size
    if n % 8:
        bits = np.unpackbits(arrays["grid_exact"])
        bits[n:] = 1
        bad = {**arrays, "grid_exact": np.packbits(bits)}
        with pytest.raises(ValueError, match="grid_exact from the server"):
            decode_grid(_request(bad, off, feat), off, feat, "c")
    sizes = np.diff(off)
    n_cand = (sizes > 0).astype(np.int64)  # one candidate per pair with a grid: its last edge
    cand_off = np.concatenate([[0], np.cumsum(n_cand)])
    ok = (sizes[sizes > 0] - 1).astype(np.uint8)
    hostile = ok.copy()
    hostile[0] += 1  # one past the end of its node's grid
    wire = grid_inputs(_request(arrays, off, feat), off, "c")
    for grid_or_wire in (decoded, wire):  # Round B reads Round A's arrays kept (decode_at)
        with pytest.raises(ValueError, match="cand_at from the server points past"):
            msg = Message(ROUND_B, {}, {"cand_at": hostile})
            decode_candidates(msg, cand_off, grid_or_wire, off, "c", feat)
    with pytest.raises(ValueError, match="cand_at"):
        bad = {"cand_at": ok.astype(np.int64)}  # signed: refused by kind
        decode_candidates(Message(ROUND_B, {}, bad), cand_off, decoded, off, "c")


def _features(n: int, rng) -> np.ndarray:
    """Uniform, heavy-tailed, a timestamp offset, tiny-scale, a categorical-like code."""
    return np.column_stack(
        [
            rng.random(n),
            rng.pareto(1.1, n) * 1e3,
            1.7e9 + rng.normal(0, 3e4, n),
            rng.normal(0, 1e-6, n),
            rng.lognormal(0, 3, n),
            rng.integers(0, 4, n).astype(np.float64),
        ]
    )


@pytest.mark.parametrize("classifier", [False, True])
def test_client_grids_equal_the_servers(monkeypatch, classifier) -> None:
    """In a fit: each client's rebuilt grids and candidates are the server's, bit for bit."""
    rng = np.random.default_rng(4)
    n = 3000
    X = _features(n, rng)
    X[rng.random(n) < 0.05, 4] = np.nan  # missing values: the missing edge travels exact
    y = X[:, 0] + np.log1p(X[:, 1]) / 5 + (X[:, 5] == 2) + rng.normal(0, 0.2, n)
    server_grids: list = []
    server_cands: list = []
    client_grids: list = []
    node_grids, cand_arrays = secure_round_a.node_grids, secure_round_b.candidate_arrays

    def grids(*args, **kwargs):
        out = node_grids(*args, **kwargs)
        server_grids.append(out[1].copy())
        return out

    def cands(grid, grid_off, at, cand, n_cand):
        server_cands.append(cand.copy())
        return cand_arrays(grid, grid_off, at, cand, n_cand)

    send = LocalFederation.send_and_receive
    recorded: list = []

    def send_and_receive(self, requests, round_index):
        replies = send(self, requests, round_index)
        req = next(iter(requests.values()))
        recorded.append(req)
        if req.kind == ROUND_A:
            for c in self.clients.values():  # decoded again as its Round B does, kept request
                client_grids.append(c._secure.kept_grid(c._fit).copy())
        return replies

    monkeypatch.setattr(secure_round_a, "node_grids", grids)
    monkeypatch.setattr(secure_round_b, "candidate_arrays", cands)
    monkeypatch.setattr(LocalFederation, "send_and_receive", send_and_receive)
    Est = FedForestClassifier if classifier else FedForestRegressor
    target = (y > np.median(y)).astype(int) if classifier else y
    Est(n_estimators=4, max_depth=5, random_state=0, categorical_features=[5]).fit(
        X, target, client_ids=rng.integers(0, 3, n)
    )
    assert len(server_grids) >= 4 and len(client_grids) == 3 * len(server_grids)
    for i, g in enumerate(client_grids):
        np.testing.assert_array_equal(_bits(g), _bits(server_grids[i // 3]))
    pairs, last_a = [], None
    for r in recorded:  # each Round B with its level's Round A
        last_a = r if r.kind == ROUND_A else last_a
        if r.kind == ROUND_B:
            pairs.append((last_a, r))
    assert len(pairs) == len(server_cands) > 0
    coded = 0
    for (a, b), want in zip(pairs, server_cands, strict=True):
        assert "cand_at" in b.arrays and "cand" not in b.arrays
        np.testing.assert_array_equal(_bits(sent_candidates(a, b)), _bits(want))
        coded += a.arrays["grid_code"].size
        # Down: codes (4 bytes) for nearly every edge, float64 for few.
        assert a.arrays["grid_value"].size < 0.5 * a.arrays["grid_code"].size
    assert coded > 0
    # Below the roots every node is known to hold fewer than 2^16 rows: two edges a word.
    assert all("hist_half" in a.arrays for a, _ in pairs[1:])
    assert grid_wire.LATTICE_STEPS == 2**32 - 1


def test_counts_two_edges_to_a_word_sum_exactly() -> None:
    """Masked sums of half_words' words give every edge's pooled rows and weight."""
    rng = np.random.default_rng(5)
    sizes = rng.integers(0, 9, 30)
    off = np.concatenate([[0], np.cumsum(sizes)])
    half = rng.random(sizes.size) < 0.6
    n, k = int(off[-1]), 4
    rows = rng.integers(0, 2**14, (k, n)).astype(np.uint64)  # each sum below 2^16
    weight = rng.integers(0, 2**14, (k, n)).astype(np.uint64)
    weight[:, ~np.repeat(half, sizes)] *= np.uint64(1000)  # one edge to a word: 32 bits
    masks = rng.integers(0, 2**63, (k - 1, 1 + n), dtype=np.uint64)
    total = np.zeros((grid_wire.n_hist_words(off, half), 1), dtype=np.uint64)
    for c in range(k):
        words = (rows[c] | (weight[c] << np.uint64(32))).reshape(-1, 1)
        sent = grid_wire.half_words(words, off, half, "c")
        assert sent.shape == total.shape and sent.dtype == np.uint64
        mask = masks[c, : sent.size] if c < k - 1 else -masks[:, : sent.size].sum(axis=0)
        total += sent + mask.reshape(-1, 1)  # masks cancel mod 2^64
    got = grid_wire.unpack_hist(total, off, half)
    np.testing.assert_array_equal(got[:, 0], rows.sum(axis=0).astype(np.float64))
    np.testing.assert_array_equal(got[:, 1], weight.sum(axis=0).astype(np.float64))
    assert total.size == int(np.where(half, (sizes + 1) // 2, sizes).sum()) < n


def test_client_refuses_hostile_half_words() -> None:
    off = np.array([0, 3, 5])
    words = np.array([[1 | (2 << 32)], [2**16], [3], [4], [5]], dtype=np.uint64)
    with pytest.raises(ValueError, match="hist_half from the server"):  # 2^16 rows in a half
        grid_wire.half_words(words, off, np.array([True, False]), "c")
    grid_wire.half_words(words, off, np.array([False, True]), "c")  # fits
    n_pairs = 2
    good = {"hist_half": np.packbits([True, False])}
    for arrays, header in (
        ({"hist_half": np.packbits([True, False]).astype(np.uint16)}, {"pack_counts": True}),
        ({"hist_half": np.packbits([True, False, True])}, {"pack_counts": True}),  # padding
        ({"hist_half": np.zeros(2, np.uint8)}, {"pack_counts": True}),  # shape
        (good, {}),  # without packed counts
    ):
        with pytest.raises(ValueError, match="hist_half"):
            grid_wire.half_of(Message(ROUND_A, header, arrays), n_pairs, "c")
    half = grid_wire.half_of(Message(ROUND_A, {"pack_counts": True}, good), n_pairs, "c")
    np.testing.assert_array_equal(half, [True, False])


def test_kernels_match_their_numpy_twins() -> None:
    rng = np.random.default_rng(6)
    grid, off, feat, exact, lat = _grids(rng, n_pairs=60)
    lat[1] = [np.inf, 1.0]  # a feature without a lattice: its edges travel exact
    arrays, decoded = encode_grid(grid, off, feat, exact, lat)
    a, b, valid = grid_lattice._lattice(lat)
    args = (arrays["grid_exact"], arrays["grid_value"], arrays["grid_code"], a, b, valid)
    outs = []
    for kernel in (grid_wire.decode_lattice, grid_wire.decode_lattice_numpy):
        out = np.empty(grid.size)
        assert kernel(*args, feat.astype(np.int64), off, out)
        outs.append(out)
    np.testing.assert_array_equal(_bits(outs[0]), _bits(outs[1]))
    np.testing.assert_array_equal(_bits(outs[0]), _bits(decoded))
    bad = feat.astype(np.int64)
    bad[np.argmax(np.diff(off))] = 1  # a coded pair said to be of the feature without one
    for kernel in (grid_wire.decode_lattice, grid_wire.decode_lattice_numpy):
        assert not kernel(*args, bad, off, np.empty(grid.size))
    half = rng.random(off.size - 1) < 0.5
    words = rng.integers(0, 2**16, grid.size).astype(np.uint64)
    words |= rng.integers(0, 2**16, grid.size).astype(np.uint64) << np.uint64(32)
    n_words = grid_wire.n_hist_words(off, half)
    packed = [np.empty(n_words, np.uint64), np.empty(n_words, np.uint64)]
    assert grid_wire.half_pack(words, off, half, packed[0])
    assert grid_wire.half_pack_numpy(words, off, half, packed[1])
    np.testing.assert_array_equal(packed[0], packed[1])
    unpacked = [np.empty((grid.size, 2)), np.empty((grid.size, 2))]
    grid_wire.half_unpack(packed[0], off, half, unpacked[0])
    grid_wire.half_unpack_numpy(packed[0], off, half, unpacked[1])
    np.testing.assert_array_equal(unpacked[0], unpacked[1])
    np.testing.assert_array_equal(unpacked[0][:, 0], words & np.uint64(2**32 - 1))
    np.testing.assert_array_equal(unpacked[0][:, 1], words >> np.uint64(32))
    words[np.flatnonzero(np.repeat(half, np.diff(off)))[0]] = 2**16  # 65536 rows: no fit
    assert not grid_wire.half_pack(words, off, half, packed[0])
    assert not grid_wire.half_pack_numpy(words, off, half, packed[1])


def test_candidates_from_the_wire_match_the_decoded_grids() -> None:
    """decode_at (the candidates' edges alone) against indexing decode_lattice_numpy's grid."""
    rng = np.random.default_rng(11)
    for trial in range(30):
        grid, off, feat, exact, lat = _grids(rng, n_pairs=int(rng.integers(1, 80)))
        if trial % 3 == 0:
            exact[:] = trial % 2 == 0  # every edge exact, or none
        if trial % 5 == 0:
            lat[0] = [np.inf, 1.0]  # a feature without a lattice: its edges travel exact
        arrays, decoded = encode_grid(grid, off, feat, exact, lat)
        a, b, valid = grid_lattice._lattice(lat)
        twin = np.empty(grid.size)
        args = (arrays["grid_exact"], arrays["grid_value"], arrays["grid_code"], a, b, valid)
        assert grid_wire.decode_lattice_numpy(*args, feat.astype(np.int64), off, twin)
        np.testing.assert_array_equal(_bits(twin), _bits(decoded))
        # Any indices: repeated, out of order, first and last edges, pairs without any.
        sizes = np.diff(off)
        n_cand = np.where(sizes > 0, rng.integers(0, 12, sizes.size), 0)
        at = np.concatenate(
            [rng.integers(0, max(s, 1), k) for s, k in zip(sizes, n_cand, strict=True)]
        )
        ends = np.flatnonzero(n_cand > 1)
        at[np.cumsum(n_cand)[ends] - 1] = sizes[ends] - 1
        at[(np.cumsum(n_cand) - n_cand)[ends]] = 0
        cand_off = np.concatenate([[0], np.cumsum(n_cand)])
        msg = Message(ROUND_B, {}, {"cand_at": at.astype(np.uint16)})
        want = decode_candidates(msg, cand_off, twin, off, "c")
        wire = grid_inputs(_request(arrays, off, feat), off, "c")
        got = decode_candidates(msg, cand_off, wire, off, "c", feat)
        np.testing.assert_array_equal(_bits(got), _bits(want))
        np.testing.assert_array_equal(_bits(got), _bits(decoded[off[:-1].repeat(n_cand) + at]))


def test_encode_kernel_matches_its_numpy_twin() -> None:
    rng = np.random.default_rng(7)
    grid, off, feat, exact, lat = _grids(rng, n_pairs=80)
    grid[5] = np.nan  # a free edge no lattice point stands for: its pair exact
    grid[off[10]] = 1.0 - 1e-12  # the first two edges of pair 10 too close: exact
    grid[off[10] + 1] = 1.0
    grid[7] = 1e300  # far outside the lattice
    lat[2] = [0.0, 0.0]  # an empty lattice: none
    for p in range(off.size - 1):
        grid[off[p] : off[p + 1]].sort()
    a, b, valid = grid_lattice._lattice(lat)
    out = []
    for kernel in (grid_wire.encode_lattice, grid_wire.encode_lattice_numpy):
        sent, codes = np.empty(grid.size, bool), np.zeros(grid.size, np.uint32)
        decoded = np.empty(grid.size)
        n = kernel(grid, off, feat.astype(np.int64), exact, a, b, valid, sent, codes, decoded)
        out.append((sent, codes[:n], decoded))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    np.testing.assert_array_equal(_bits(out[0][2]), _bits(out[1][2]))
    # The grid the server counts on is the client's decoding of what it sends.
    client = np.empty(grid.size)
    args = (np.packbits(out[0][0]), grid[out[0][0]], out[0][1], a, b, valid)
    assert grid_wire.decode_lattice(*args, feat.astype(np.int64), off, client)
    np.testing.assert_array_equal(_bits(client), _bits(out[0][2]))
    sent = out[0][0]
    owner = np.repeat(np.arange(off.size - 1), np.diff(off))
    assert sent[exact].all() or (~sent[exact]).any()  # exact edges: coded only if lossless
    for p in {int(owner[5]), 10, int(owner[7])} | set(np.flatnonzero(feat == 2)):
        assert sent[owner == p][~exact[owner == p]].all(), p
    assert (~sent).sum() > 0.5 * grid.size


def test_no_two_edges_a_word_under_class_weight(monkeypatch) -> None:
    """The server reweights class_weight's pooled sums: a node's known weight is not its
    draws (a bound that could be too small), so its counts travel one edge to a word."""
    rng = np.random.default_rng(8)
    n = 2000
    X = rng.random((n, 4))
    y = (X[:, 0] + 0.3 * rng.random(n) > 1.0).astype(int)  # imbalanced
    seen: list = []
    send = LocalFederation.send_and_receive

    def record(self, requests, round_index):
        seen.append(next(iter(requests.values())))
        return send(self, requests, round_index)

    monkeypatch.setattr(LocalFederation, "send_and_receive", record)
    for class_weight, expect in ((None, True), ("balanced", False), ({0: 0.5, 1: 2.0}, False)):
        seen.clear()
        FedForestClassifier(
            n_estimators=3, max_depth=4, random_state=0, class_weight=class_weight
        ).fit(X, y, client_ids=rng.integers(0, 3, n))
        halves = [r for r in seen if r.kind == ROUND_A and "hist_half" in r.arrays]
        assert bool(halves) == expect, class_weight


def test_threads_code_and_unpack_the_same(monkeypatch) -> None:
    """Ranges of pairs in threads: the same wire arrays, grid and unpacked counts as one."""
    rng = np.random.default_rng(8)
    grid, off, feat, exact, lat = _grids(rng, n_pairs=300)
    grid[off[20]] = np.nan  # a pair sent exact, inside some range
    lat[1] = [np.inf, 1.0]  # a feature without a lattice
    for module in (grid_lattice, grid_counts):  # encode_grid, unpack_hist
        monkeypatch.setattr(module, "PARALLEL_EDGES", 10)
    one, decoded = encode_grid(grid, off, feat, exact, lat, 1)
    for n in (2, 3, 7):
        arrays, got = encode_grid(grid, off, feat, exact, lat, n)
        assert arrays.keys() == one.keys()
        for key, value in one.items():
            assert arrays[key].dtype == value.dtype
            np.testing.assert_array_equal(_bits(arrays[key]), _bits(value), err_msg=key)
        np.testing.assert_array_equal(_bits(got), _bits(decoded))
    assert one["grid_code"].size > 0.5 * grid.size and one["grid_value"].size > 0
    half = rng.random(off.size - 1) < 0.5
    total = rng.integers(0, 2**63, grid_wire.n_hist_words(off, half), dtype=np.uint64)
    want = grid_wire.unpack_hist(total, off, half, 1)
    for n in (2, 5):
        np.testing.assert_array_equal(grid_wire.unpack_hist(total, off, half, n), want)


def test_half_words_in_place_are_the_same_words() -> None:
    """Packed where they are (a view of the client's own array): the same words as a copy."""
    rng = np.random.default_rng(9)
    sizes = rng.integers(0, 12, 200)
    off = np.concatenate([[0], np.cumsum(sizes)])
    half = rng.random(sizes.size) < 0.7
    words = rng.integers(0, 2**16, off[-1]).astype(np.uint64)
    words |= rng.integers(0, 2**16, off[-1]).astype(np.uint64) << np.uint64(32)
    words[~np.repeat(half, sizes)] |= np.uint64(1 << 40)  # whole words where not shared
    want = grid_wire.half_words(words.reshape(-1, 1), off, half, "c")
    mine = words.reshape(-1, 1).copy()
    got = grid_wire.half_words(mine, off, half, "c", in_place=True)
    np.testing.assert_array_equal(got, want)
    assert np.shares_memory(got, mine) and got.size < mine.size
    for kernel in (grid_wire.half_pack, grid_wire.half_pack_numpy):  # out aliasing words
        w = words.copy()
        assert kernel(w, off, half, w[: want.size])
        np.testing.assert_array_equal(w[: want.size], want.ravel())
    frozen = words.reshape(-1, 1).copy()
    frozen.flags.writeable = False  # not its own to write: a new array
    got = grid_wire.half_words(frozen, off, half, "c", in_place=True)
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, frozen)


def test_grids_decode_into_the_level_befores_memory() -> None:
    """A client's grid goes into the memory of its previous one when that has room."""
    rng = np.random.default_rng(10)
    grid, off, feat, exact, lat = _grids(rng, n_pairs=50)
    arrays, decoded = encode_grid(grid, off, feat, exact, lat)
    msg = _request(arrays, off, feat)
    first = decode_grid(msg, off, feat, "c")
    assert first.base is not None and first.base.size == grid_wire.GRID_ROOM * grid.size
    first[:] = -1.0  # the level before's values: all overwritten
    again = decode_grid(msg, off, feat, "c", first)
    assert np.shares_memory(again, first)
    np.testing.assert_array_equal(_bits(again), _bits(decoded))
    small = np.zeros(3)  # too small: a new array
    fresh = decode_grid(msg, off, feat, "c", small)
    assert not np.shares_memory(fresh, small)
    np.testing.assert_array_equal(_bits(fresh), _bits(decoded))
    frozen = np.zeros(grid.size)
    frozen.flags.writeable = False  # not its own to write
    assert not np.shares_memory(decode_grid(msg, off, feat, "c", frozen), frozen)
