"""The secure server's stages run on ranges of pairs in threads: the same answers as one call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fedforest import FedForestClassifier, FedForestRegressor
from fedforest.federated import threads
from fedforest.federated.privacy import intervals, secagg
from fedforest.federated.server import guides, secure_ancestors, secure_grids


@pytest.mark.parametrize("n_parts", [1, 2, 3, 7])
def test_work_ranges_cover_the_items_in_order_with_balanced_work(n_parts: int) -> None:
    rng = np.random.default_rng(n_parts)
    work = rng.integers(0, 50, 400)
    parts = threads.work_ranges(work, n_parts)
    assert parts[0][0] == 0 and parts[-1][1] == work.size
    assert all(a < b for a, b in parts) and len(parts) <= n_parts
    assert all(parts[i][1] == parts[i + 1][0] for i in range(len(parts) - 1))
    shares = [int(work[a:b].sum()) for a, b in parts]
    assert max(shares) <= work.sum() / n_parts + work.max()  # no range far above its share
    assert threads.work_ranges(np.zeros(0, dtype=np.int64), 2) == [(0, 0)]
    for n in (0, 1):  # one part: every item in one range, as the searches gave it
        assert threads.work_ranges(np.zeros(0, dtype=np.int64), n) == [(0, 0)]
        assert threads.work_ranges(work, n) == [(0, work.size)]


def test_add_in_order_in_threads_is_the_same_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    arrays = [rng.integers(0, 2**64, (1001, 3), dtype=np.uint64) for _ in range(5)]
    want = secagg.add_in_order(arrays, (1001, 3))
    monkeypatch.setattr(secagg, "PARALLEL_WORDS", 0)
    for n in (2, 3, 8):
        np.testing.assert_array_equal(secagg.add_in_order(iter(arrays), (1001, 3), n), want)
    manual = np.zeros((1001, 3), dtype=np.uint64)
    for a in arrays:
        manual += a
    np.testing.assert_array_equal(want, manual)


def _trees_and_predictions(model: Any, X: np.ndarray) -> list[np.ndarray]:
    out = [model.predict(X)]
    for tree in model.trees_:
        out += [v for _, v in sorted(vars(tree).items()) if isinstance(v, np.ndarray)]
    return out


@pytest.mark.parametrize("Est", [FedForestRegressor, FedForestClassifier])
def test_secure_fits_with_every_stage_in_threads_are_the_same_forests(
    Est: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(5)
    X = rng.random((2400, 6))
    y = X[:, 0] + 2 * X[:, 1] ** 2 + rng.normal(scale=0.1, size=2400)
    y = y if Est is FedForestRegressor else (y > np.median(y)).astype(int)
    h = rng.integers(0, 4, 2400)
    kw = dict(n_estimators=4, max_depth=7, min_samples_leaf=3, random_state=2)
    want = _trees_and_predictions(Est(n_jobs=1, **kw).fit(X, y, client_ids=h), X)
    # Every stage split into ranges, whatever its size; count the ranges that ran.
    monkeypatch.setattr(intervals, "PARALLEL_CANDIDATES", 0)
    monkeypatch.setattr(secure_grids, "PARALLEL_EDGES", 0)  # the grids
    monkeypatch.setattr(secure_ancestors, "PARALLEL_EDGES", 0)  # the ancestors' releases
    monkeypatch.setattr(secagg, "PARALLEL_WORDS", 0)
    monkeypatch.setattr(guides, "PARALLEL_GUIDED", 0)
    seen = {"safe": 0, "grids": 0, "merge": 0, "guided": 0, "kept": 0}
    safe, grids, merge, guided, kept = (
        intervals.both_rules,
        secure_grids.quantile_grids_at,
        secure_grids.merge_thresholds,
        guides.guided_candidates,
        secure_ancestors.ancestors_kept,
    )

    def count(name: str, kernel: Any) -> Any:
        def run(*args: Any) -> Any:
            seen[name] += 1
            return kernel(*args)

        return run

    monkeypatch.setattr(intervals, "both_rules", count("safe", safe))
    monkeypatch.setattr(secure_grids, "quantile_grids_at", count("grids", grids))
    monkeypatch.setattr(secure_grids, "merge_thresholds", count("merge", merge))
    monkeypatch.setattr(guides, "guided_candidates", count("guided", guided))
    monkeypatch.setattr(secure_ancestors, "ancestors_kept", count("kept", kept))
    got = _trees_and_predictions(Est(n_jobs=2, **kw).fit(X, y, client_ids=h), X)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    levels = 7
    assert seen["safe"] > 2 * levels and seen["grids"] > levels and seen["merge"] > levels
    assert seen["guided"] > levels and seen["kept"] > levels
