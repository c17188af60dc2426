"""tests/_attack_controls.py: the multi-seed control stops at the first find, else lists all."""

from __future__ import annotations

import pytest

from tests._attack_controls import assert_found_at_some_seed


def test_the_control_stops_at_the_first_seed_that_finds_rows() -> None:
    ran: list[int] = []

    def attack(seed: int) -> int:
        ran.append(seed)
        return {0: 0, 1: 3, 2: 5}[seed]

    got = assert_found_at_some_seed(attack, lambda rows: rows > 0, (0, 1, 2))
    assert ran == [0, 1] and got == {0: 0, 1: 3}
    ran.clear()
    assert_found_at_some_seed(attack, lambda rows: rows > 0, (0, 1, 2), needed=2)
    assert ran == [0, 1, 2]


def test_a_control_that_finds_too_little_fails_listing_every_seed() -> None:
    with pytest.raises(AssertionError) as err:
        assert_found_at_some_seed(lambda s: {"rows": s}, lambda r: r["rows"] > 1, (0, 1))
    text = str(err.value)
    assert "found rows at 0 of 2 seeds, 1 needed" in text
    assert "seed 0: nothing: {'rows': 0}" in text and "seed 1: nothing: {'rows': 1}" in text
    with pytest.raises(AssertionError, match="at 1 of 3 seeds, 2 needed"):
        assert_found_at_some_seed(lambda s: s, lambda r: r == 2, (0, 1, 2), needed=2)
    with pytest.raises(ValueError, match="needed must be 1 to 2"):
        assert_found_at_some_seed(lambda s: s, bool, (0, 1), needed=3)
