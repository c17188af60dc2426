"""A categorical column's codes, vectorised (pandas' factorize, a key per distinct value).

``encode``, ``encode_counted``, ``sort_categories`` and ``local_codes`` read a column of
plain Python values (str, int, float, bool, None, ``pd.NA``, ``pd.NaT``) a distinct value
at a time; their ``_loop`` twins read it a row at a time, as they all did before
2026-12-05. The twins are compared on random columns; the rules they share (what is
missing, numbers by value, bools as numbers, text by itself) are checked on hand-worked
cases, on both paths.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from fedforest.federated.categorical import (
    _distinct,
    encode,
    encode_counted,
    encode_counted_loop,
    encode_loop,
    local_codes,
    local_codes_loop,
    other_kind_rows,
    sort_categories,
    sort_categories_loop,
)

#: Plain values of every kind the vectorised paths take: text (numbers and bools written as
#: text too), ints, floats and bools of equal value (1, 1.0, True), negative zero, huge ints
#: (2**53 + 1 and 2**53 share a float), infinities and each missing value.
PLAIN = [
    "a", "b", "zz", "1", "True", "", 1, 2, 0, -0.0, 0.0, 1.0, 2.5, True, False, 10**20,
    2**53 + 1, 2**53, 2.0**53, float("inf"), -float("inf"), None, np.nan, float("nan"),
    pd.NA, pd.NaT,
]  # fmt: skip

LEVELS = [
    ["a", "b", None],
    ["", "1", "True", "a", "zz"],
    [0, 1, 2, None],
    [-1.5, 1, 2.5, 1e20, 2.0**53],
    [False, True],
    [None],
    [],
]


def _column(values: list[object]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def test_the_vectorised_codes_are_the_loops_on_random_columns() -> None:
    rng = np.random.default_rng(26)
    numbers = [v for v in PLAIN if not isinstance(v, str)]
    for trial in range(600):
        pool = PLAIN if trial % 3 else numbers
        raw = _column([pool[k] for k in rng.integers(0, len(pool), int(rng.integers(0, 40)))])
        assert _distinct(raw.tolist()) is not None  # the vectorised path, not its fallback
        for levels in LEVELS:
            codes = encode(raw, levels)
            np.testing.assert_array_equal(codes, encode_loop(raw, levels))
            assert codes.dtype == np.float64
            (one, n), (two, n_two) = encode_counted(raw, levels), encode_counted_loop(raw, levels)
            np.testing.assert_array_equal(one, two)
            assert n == n_two == other_kind_rows(raw, levels)
        got, want = sort_categories(raw.tolist()), sort_categories_loop(raw.tolist())
        assert got == want and list(map(type, got)) == list(map(type, want))  # order, 1 vs 1.0
        np.testing.assert_array_equal(local_codes(raw), local_codes_loop(raw))


@pytest.mark.parametrize("vectorised", [True, False])
def test_every_missing_value_takes_the_missing_code(vectorised: bool) -> None:
    # None, NaN (float and NumPy's), pd.NA and pd.NaT are the missing category, last;
    # np.float64 and NumPy's NaT take the loop.
    gone = [None, float("nan"), pd.NA, pd.NaT] + ([] if vectorised else [np.float64("nan")])
    raw = _column(["b", *gone, "a"] + ([] if vectorised else [np.datetime64("NaT")]))
    assert (_distinct(raw.tolist()) is not None) == vectorised
    assert sort_categories(raw.tolist()) == ["a", "b", None]
    expect = [1] + [2] * len(gone) + [0] + ([] if vectorised else [2])
    np.testing.assert_array_equal(encode(raw, ["a", "b", None]), expect)
    np.testing.assert_array_equal(local_codes(raw), expect)
    # A column with no missing level: a missing value has no code, and is no other kind.
    codes, other = encode_counted(raw, ["a", "b"])
    np.testing.assert_array_equal(codes, [c if c < 2 else -1 for c in expect])
    assert other == 0


def test_numbers_match_by_value_and_text_by_itself() -> None:
    raw = _column(["1", 1, True, 1.0, "True", False, -0.0, 0, 2.5, "2.5", 2**53 + 1])
    # Text levels: only the same text matches; each number is of the other kind.
    codes, other = encode_counted(raw, ["1", "2.5", "True"])
    np.testing.assert_array_equal(codes, [0, -1, -1, -1, 2, -1, -1, -1, -1, 1, -1])
    assert other == 8
    # Number levels: 1, 1.0 and True are 1; False, -0.0 and 0 are 0; 2**53 + 1 is 2.0**53.
    codes, other = encode_counted(raw, [0, 1, 2.5, 2.0**53])
    np.testing.assert_array_equal(codes, [-1, 1, 1, 1, -1, 0, 0, 0, 2, -1, 3])
    assert other == 3
    # The first value of equal ones names their level; numbers first, text, missing last.
    assert sort_categories([True, 1, 1.0, "b", 0.0, False, None, "a"]) == [
        0.0,
        True,
        "a",
        "b",
        None,
    ]
    np.testing.assert_array_equal(local_codes(_column([2.5, True, 1, 0, pd.NA])), [2, 1, 1, 0, 3])
    # 2**53 + 1 and 2**53 share a key (encode's level) but are two levels of their own.
    assert sorted(local_codes(_column([2**53 + 1, 2**53, 2**53]))[:2]) == [0, 1]


def test_other_types_keep_their_rules_on_the_loop() -> None:
    # Decimal("NaN") is text "NaN", never missing (pandas' isna says it is); bytes and
    # NumPy text are read by their text; a NumPy number by its value.
    raw = _column([Decimal("NaN"), b"a", np.str_("a"), np.int64(2), None, Decimal("2")])
    assert _distinct(raw.tolist()) is None
    np.testing.assert_array_equal(encode(raw, ["2", "NaN", "a", "b'a'", None]), [1, 3, 2, -1, 4, 0])
    np.testing.assert_array_equal(encode(raw, [2, None]), [-1, -1, -1, 0, 1, -1])


@pytest.mark.parametrize("vectorised", [True, False])
def test_an_int_too_large_for_a_float_is_the_same_error(vectorised: bool) -> None:
    raw = _column(["a", 10**400] + ([] if vectorised else [np.int64(1)]))
    with pytest.raises(OverflowError, match="int too large to convert to float"):
        encode(raw, ["a"])
    with pytest.raises(OverflowError, match="int too large to convert to float"):
        encode_counted(raw, ["a"])
    with pytest.raises(OverflowError, match="int too large to convert to float"):
        sort_categories(raw.tolist())
