"""An attack's control over a few seeds: with a fix switched off, the attack finds rows.

A control shows that a privacy test can fail. Many read rows that one draw of the secure
bootstraps, weights and grids happens to expose; a change that redraws them (any change
to what the set-up hashes) can leave that draw without the leak while the next seed shows
it. :func:`assert_found_at_some_seed` tries the seeds in order and stops as soon as
``needed`` of them found rows (so the first seed costs what the single-seed control did);
otherwise it fails listing what every seed gave. The protected side of a test (the fix on)
keeps its own seeds and assertions: this is for the control only.
:func:`rules_across_levels_off` switches off the fix most controls test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import pytest

from fedforest.federated.server import secure_derived, secure_round_b

S = TypeVar("S")
R = TypeVar("R")


def assert_found_at_some_seed(
    attack: Callable[[S], R],
    found: Callable[[R], bool],
    seeds: Sequence[S],
    needed: int = 1,
) -> dict[S, R]:
    """Run ``attack(seed)`` for ``seeds`` in order until ``needed`` results satisfy ``found``.

    Returns the results by seed (those run). Raises ``AssertionError`` naming every seed's
    result when fewer than ``needed`` of all ``seeds`` found rows.
    """
    if not 1 <= needed <= len(seeds):
        raise ValueError(f"needed must be 1 to {len(seeds)} (the seeds given); got {needed}")
    results: dict[S, R] = {}
    hits = 0
    for seed in seeds:
        results[seed] = attack(seed)
        hits += bool(found(results[seed]))
        if hits >= needed:
            return results
    lines = "\n".join(
        f"  seed {seed!r}: {'found' if found(got) else 'nothing'}: {got!r}"
        for seed, got in results.items()
    )
    raise AssertionError(
        f"the control (the fix off) found rows at {hits} of {len(seeds)} seeds, "
        f"{needed} needed: the test could not fail on these draws\n{lines}"
    )


def rules_across_levels_off(monkeypatch: pytest.MonkeyPatch, partitions: bool = False) -> None:
    """A control's fix off: Round B keeps every candidate the rule across levels refuses.

    ``secure_round_b.safe_from_ancestors`` (a node's sums against every ancestor's
    releases) keeps every candidate, and ``cousins_filter`` (the cousins' rule, whose
    atoms include an ancestor's sum at a threshold less one descendant's at it) and the
    rule on derived sums (``secure_derived.py``, which holds such a difference too) do
    nothing; with ``partitions``, ``partition_filter`` (the partition rule) does nothing
    either.
    """
    monkeypatch.setattr(
        secure_round_b,
        "safe_from_ancestors",
        lambda cands, *a, **k: np.ones(cands.size, dtype=bool),
    )
    monkeypatch.setattr(secure_round_b, "cousins_filter", lambda *a, **k: None)
    monkeypatch.setattr(secure_derived.DerivedSums, "filter", lambda *a, **k: None)
    if partitions:
        monkeypatch.setattr(secure_round_b, "partition_filter", lambda *a, **k: None)
