"""Red team 16 (issue 11): a fuzzing red team, and the "dp" audit inside a tree.

- Random federations and settings a user could bring (``tests/_attack_fuzz.py``), each
  fitted on the recording server, every single-fit attack of the suite united on the
  recording and the model: under ``"secure"`` no row rebuilt and nothing raw in a reply;
  under ``"none"`` (the control) most rows. ``benchmarks/attack_fuzz.py`` runs many draws.
- ``privacy="dp"``: the root's Round A sum ``sum c z``, where the canary's bootstrap count
  ``c`` moves the release (``tests/_attack_dp_tree.py``): with the canary drawn 6 times,
  the cap holds the move to the accountant's charge; with the cap lifted (the control)
  the audit measures three times the charge. ``benchmarks/attack_dp_tree.py`` runs more.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests._attack_dp_tree import tree_audit
from tests._attack_fuzz import draw, fuzz_fit

#: Draws of the fuzz whose secure fits take seconds (benchmarks/attack_fuzz.py runs more):
#: 0 a classifier of 26 clients (one of 1 row) with many-level and rare categoricals, a
#: row id, missing values, outliers; 2 a regressor whose target is a feature, with
#: sample weights and ``oob_score`` over 26 clients (one of 1 row).
QUICK = (0, 2)


def test_a_draw_replays_from_its_seed() -> None:
    one, two = draw(7), draw(7)
    pd.testing.assert_frame_equal(one["X"], two["X"])
    assert np.array_equal(one["y"], two["y"]) and one["describe"] == two["describe"]
    assert one["describe"] != draw(8)["describe"]


@pytest.mark.parametrize("seed", QUICK)
def test_the_union_rebuilds_no_row_of_a_random_federation_under_secure(seed: int) -> None:
    got = fuzz_fit(draw(seed), "secure", slow=True)
    assert "refused" not in got, got
    assert got["rebuilt"] < 0.01 and got["feature"] == 0.0, got
    assert got["attacks"]["raw"] == (0, 0) and got["attacks"]["linked"] == (0, 0), got
    assert got["isolation"] == "run", got  # the in-bag rows routed as the trees did


@pytest.mark.parametrize("seed", QUICK)
def test_the_union_rebuilds_rows_of_a_random_federation_under_none(seed: int) -> None:
    """The control: the same draws under ``"none"`` (80 % of the classifier's rows rebuilt
    at seed 0, by one-row summaries linked to their sketches; every row at seed 2)."""
    got = fuzz_fit(draw(seed), "none")
    assert got["rebuilt"] > 0.5, got


def test_the_cap_holds_a_row_drawn_six_times_to_its_charge_under_dp() -> None:
    """The canary drawn 6 times in every tree, capped at ``max_weight`` (2): the release
    moves by the accountant's charge for the entry (2 units a replacement), no more."""
    got = tree_audit(80, 64.0, force=6)
    top = got["by_count"][got["max_count"]]
    assert got["max_count"] == 2.0, got
    se = math.sqrt(2 / 80 + top["mu"] ** 2 / 320)
    assert top["mu_low"] <= got["mu_entry"], got  # no more than charged, at 95 %
    assert abs(top["mu"] - got["mu_entry"]) < 4 * se, got  # and the charge is what moves
    assert abs(got["noise_sd"] - 1.0) < 4 / math.sqrt(2 * 80), got  # the plan's noise
    assert got["epsilon_cp"] <= got["epsilon"] and got["epsilon_gauss"] <= got["epsilon"], got


def test_without_the_cap_the_audit_measures_more_than_charged() -> None:
    """The control: the canary's count of 6 not capped moves the release three times the
    charge; the audit's 95 % lower bound is above it."""
    got = tree_audit(80, 64.0, force=6, cap_off=True)
    assert got["max_count"] == 6.0, got
    assert got["mu_low_max_count"] > 1.5 * got["mu_entry"], got
