"""Per-call cuts at the papers' scale (issue 14): the same values as the code they replaced."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.federated.client import bootstrap_counts
from fedforest.federated.protocol import Message


@pytest.mark.parametrize("seed", range(12))
def test_regression_stats_verdict_is_the_first_failed_test_of_any_row(seed: int) -> None:
    # The kernel ors every test of every row; the verdict must still be the smallest code
    # any row fails, as its NumPy twin finds it, whichever rows carry which faults.
    from fedforest.federated.server import check_kernels as ck

    rng = np.random.default_rng(seed)
    m, weighted = 40, bool(seed % 2)
    rows = rng.integers(1, 6, m).astype(np.float64)
    weight = rows * (1.5 if weighted else 2.0)
    y = rng.normal(size=m)
    sums = np.column_stack([weight * y, weight * y * y + 1.0])
    if weighted:
        counts, sums = rows[:, None].copy(), np.column_stack([weight, sums])
    else:
        counts = np.column_stack([rows, weight])
    assert ck.regression_stats_problem(counts, sums) == 0
    faults = {
        ck.FRACTIONAL: lambda c, s, i: c.__setitem__((i, 0), c[i, 0] + 0.5),
        ck.WEIGHTS: (
            (lambda c, s, i: s.__setitem__((i, 0), -1.0))
            if weighted
            else (lambda c, s, i: c.__setitem__((i, 1), c[i, 0] - 1))
        ),
        ck.MOMENTS: lambda c, s, i: s.__setitem__((i, -1), -0.5),
        ck.NONFINITE: lambda c, s, i: s.__setitem__((i, -2), np.nan),
    }
    for _ in range(20):
        c, s = counts.copy(), sums.copy()
        chosen = rng.choice(sorted(faults), size=int(rng.integers(1, 4)), replace=False)
        for code in chosen:  # each fault in its own row, in any order of the rows
            faults[int(code)](c, s, int(rng.integers(m)))
        got = ck.regression_stats_problem(c, s)
        assert got == ck.regression_stats_problem_numpy(c, s)
        assert got == (ck.NONFINITE if ck.NONFINITE in chosen else int(min(chosen)))


@pytest.mark.parametrize("weights", ["none", "zeros", "real"])
@pytest.mark.parametrize(
    ("n", "n_trees", "block"), [(140, 7, None), (1, 4, None), (50, 9, 2), (30, 7, 3)]
)
def test_setup_in_bag_rows_are_each_trees_draws_in_turn(
    weights: str, n: int, n_trees: int, block: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client's set-up builds every tree's in-bag rows and weights from one array of
    # draws per block of trees: the arrays one tree after another would give.
    from fedforest.federated import client_setup
    from fedforest.federated.client import Client
    from fedforest.federated.protocol import ROUND_A

    rng = np.random.default_rng(n + n_trees)
    sw = {"none": None, "zeros": rng.integers(0, 2, n) * 1.0, "real": rng.uniform(0, 3, n)}
    client = Client(
        rng.normal(size=(n, 3)), rng.normal(size=n), name="c", sample_weight=sw[weights]
    )
    setup = {
        "classes": None, "clients": ["c"], "first_tree": 2, "n_trees": n_trees, "seed": 11,
        "bootstrap": True, "n_bins": 32, "weighted": weights != "none",
    }  # fmt: skip
    if block is not None:  # trees a block: SETUP_DRAWS // n, made small here
        monkeypatch.setattr(client_setup, "SETUP_DRAWS", block * n)
    fit = client._setup(Message(ROUND_A, {"setup": setup}, {}))
    rows, w, tree_rows = [], [], [0]
    for t in range(n_trees):
        counts = bootstrap_counts(11, 2 + t, "c", n)
        if sw[weights] is not None:
            counts = np.where(sw[weights] > 0, counts, 0)
        r = np.flatnonzero(counts).astype(np.int32)
        w_t = counts[r].astype(np.float64)
        if sw[weights] is not None:
            w_t *= sw[weights][r]
        rows.append(r), w.append(w_t), tree_rows.append(tree_rows[-1] + r.size)
    for got, want in ((fit.rows, rows), (fit.w, w)):
        want_all = np.concatenate(want)
        assert got.dtype == want_all.dtype
        np.testing.assert_array_equal(got, want_all)
    np.testing.assert_array_equal(fit.tree_rows, tree_rows)
    np.testing.assert_array_equal(fit.slot, np.repeat(np.arange(n_trees), np.diff(tree_rows)))


def test_masks_are_each_pairs_aes_ctr_stream_from_the_rounds_digest() -> None:
    # The cipher keys made once per peer and the counter block once per mask call must give
    # the keystreams the protocol defines: AES-256-CTR under the pair key from
    # sha256("tag:label")[:12] + a zero counter, added by the smaller name, subtracted by
    # the larger (computed here from cryptography directly, not through secagg's helpers).
    import hashlib

    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    from fedforest.federated.privacy.secagg import MaskingKeys

    names = ["a", "b", "c"]
    keys = {n: MaskingKeys(n) for n in names}
    publics = {n: k.public_bytes for n, k in keys.items()}
    for k in keys.values():
        k.agree(publics)
    shapes = {"counts": (3, 5), "stats": (7,)}
    for tag in (0, 9, 9):  # a tag twice: the keys made on first use are used again
        iv = hashlib.sha256(f"{tag}:counts\x00stats".encode()).digest()[:12] + bytes(4)
        for name in names:
            zeros = {n: np.zeros(s, dtype=np.uint64) for n, s in shapes.items()}
            got = keys[name].mask(zeros, names, tag)
            want = np.zeros(22, dtype=np.uint64)
            for other in names:
                if other == name:
                    continue
                pair = keys[name].export()[1][other]
                enc = Cipher(algorithms.AES(pair), modes.CTR(iv)).encryptor()
                stream = np.frombuffer(enc.update(bytes(8 * 22)), dtype=np.uint64)
                want = want + stream if name < other else want - stream
            flat = np.concatenate([got["counts"].ravel(), got["stats"].ravel()])
            np.testing.assert_array_equal(flat, want)


def test_ledger_sizes_a_broadcast_as_its_copies() -> None:
    # A round's one request sent to every client is sized once; the record must equal
    # the sums over separate copies of it.
    from fedforest.federated.protocol import CommunicationLedger

    header = {"level": 3, "secagg": {"tag": 4, "peers": ["a", "b", "c"]}}
    arrays = {"pair_off": np.arange(6), "grid": np.linspace(0.0, 1.0, 40)}
    shared = Message("round_a", header, arrays)
    copies = {n: Message("round_a", dict(header), dict(arrays)) for n in "abc"}
    replies = {
        n: Message("round_a", {}, {"counts": np.ones(i + 2, np.uint64)})
        for i, n in enumerate("abc")
    }
    one, many = CommunicationLedger(), CommunicationLedger()
    one.record("round_a", dict.fromkeys("abc", shared), replies)
    many.record("round_a", copies, replies)
    assert one.records == many.records
    assert one.records[0].download_bytes == 3 * shared.nbytes
    assert one.records[0].upload_scalars == 2 + 3 + 4


def test_guide_windows_are_each_querys_interpolation() -> None:
    # Guides._window groups the queries by feature; each query's window must be the
    # root's distribution interpolated at its own first guide, as one query alone gives.
    from fedforest.federated.server.guides import Guides

    rng = np.random.default_rng(3)
    d = 5
    edges = [np.sort(rng.normal(size=9)) for _ in range(d)]
    edges[2] = np.zeros(1)  # a categorical feature: no bins, no window
    mass = [rng.integers(1, 20, e.size - 1).astype(float) for e in edges]
    guides = Guides(d)
    guides.set_root(edges, mass, 6.0)
    n = 60
    feature = rng.integers(0, d, n)
    off = np.concatenate([[0], np.cumsum(rng.integers(0, 3, n))])
    x = rng.normal(size=int(off[-1]) + 1)
    first = x[np.minimum(off[:-1], x.size - 1)]
    w_lo, w_hi = guides._window(feature, first, off)
    for i in range(n):
        f = feature[i]
        if off[i + 1] == off[i] or edges[f].size < 2:
            assert (w_lo[i], w_hi[i]) == (np.inf, -np.inf)
            continue
        c = np.concatenate([[0.0], np.cumsum(mass[f])])
        r = np.interp(first[i : i + 1], edges[f], c)
        assert w_lo[i] == np.interp(r - 6.0, c, edges[f])[0]
        assert w_hi[i] == np.interp(r + 6.0, c, edges[f])[0]


def test_tree_builders_room_changes_no_array() -> None:
    # A builder started with a depth's whole room (first_room) and one grown from 1 node
    # by doubling hold the same nodes once the same splits are added.
    from fedforest.federated.server.tree_builder import _TreeBuilder, first_room

    assert first_room(8) == 2**9 - 1 and first_room(2) == 64 and first_room(None) == 64
    assert first_room(40) == first_room(10) >= 2**10 - 1
    root = np.random.default_rng(3).normal(size=4)
    trees = []
    for room in (1, first_room(6)):
        b = _TreeBuilder(room)
        b.add(root)
        draw = np.random.default_rng(5)
        frontier = np.array([0])
        for _ in range(6):
            m = frontier.size
            left, right = draw.normal(size=(m, 4)), draw.normal(size=(m, 4))
            base = b.add_children(left, right)
            children = base + np.arange(2 * m).reshape(-1, 2)
            feat = draw.integers(0, 5, m).astype(np.int32)
            b.set_splits(frontier, feat, draw.normal(size=m), np.zeros(m, np.uint8), children)
            frontier = children.ravel()
        trees.append(b)
    a, z = trees
    assert a.n == z.n == 2**7 - 1 and z.feature.size == first_room(6)  # never grown
    for name in ("feature", "threshold", "left", "right", "missing_left", "known"):
        np.testing.assert_array_equal(getattr(a, name)[: a.n], getattr(z, name)[: z.n])
    np.testing.assert_array_equal(a.stats, z.stats)


def test_mask_neighbours_are_the_circulant_graphs_each_call() -> None:
    # Cached per (name, peers): each call still gets its own list, as before the cache.
    from fedforest.federated.privacy.secagg import mask_neighbours

    names = [f"c{i:02d}" for i in range(10)]
    first = mask_neighbours("c03", names)
    assert first == ["c01", "c02", "c04", "c05"]  # d = ceil(log2(10) / 2) = 2 each side
    first.append("x")
    assert mask_neighbours("c03", list(reversed(names))) == ["c01", "c02", "c04", "c05"]
    assert mask_neighbours("zz", names) == []
