"""Text (categorical) columns in the swarm: coded by their sorted category lists.

A peer codes a text column as each value's index in the column's sorted category list
(as fedforest's federation does), the list travels in the bundle, and a site's text values
are coded with it; an unknown value is unavailable for that row.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedforest.swarm import Peer, ShareBundle, SwarmForest, fit_intersection, shared_columns

WARDS = ["east", "north", "south"]


def _tables() -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(1)
    n = 400
    age, bmi = rng.normal(50, 10, n), rng.normal(27, 4, n)
    ward = rng.choice(WARDS, n)
    y = ((age - 50) / 10 + (ward == "south") + rng.normal(0, 0.5, n) > 0.5).astype(int)
    a = pd.DataFrame(
        {"age": age[:200], "ward": pd.array(ward[:200], dtype="str"), "bmi": bmi[:200]}
    )
    b = pd.DataFrame({"age": age[200:], "ward": pd.Series(ward[200:], dtype=object)})
    return a, b, y


def _coded(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    out["ward"] = [WARDS.index(w) for w in frame["ward"]]
    return out


def _swarm(a: pd.DataFrame, b: pd.DataFrame, y: np.ndarray, cats: list[str]) -> SwarmForest:
    pa = Peer("A", 10, random_state=0).fit(a, y[:200], categorical_features=cats)
    pb = Peer("B", 10, random_state=0).fit(b, y[200:], categorical_features=cats)
    common = shared_columns([pa, pb])
    return SwarmForest([pa.share(shared_features=common), pb.share(shared_features=common)])


@pytest.mark.parametrize("strategy", ["mp", "fpv", "pr", "mi", "ipr", "ss", "park"])
def test_text_columns_predict_as_their_sorted_codes(strategy: str) -> None:
    a, b, y = _tables()
    text = _swarm(a, b, y, [])
    codes = _swarm(_coded(a), _coded(b), y, ["ward"])
    assert text.categories_ == {"ward": tuple(WARDS)} and codes.categories_ == {}
    assert text.feature_kinds_ == codes.feature_kinds_
    for site in (b, a.drop(columns="bmi")):
        got = text.predict_proba(site, strategy, random_state=0)
        want = codes.predict_proba(_coded(site), strategy, random_state=0)
        assert np.array_equal(got, want)


def test_pandas_category_and_engine_fedforest() -> None:
    a, b, y = _tables()
    a = a.assign(ward=pd.Categorical(a["ward"], categories=["south", "north", "east"]))
    peer = Peer("A", 4, random_state=0, engine="fedforest", max_depth=4).fit(a, y[:200])
    assert peer.categories_ == {"ward": tuple(WARDS)}  # sorted, whatever the dtype's order
    proba = SwarmForest([peer.share()]).predict_proba(b, "mp")
    assert proba.shape == (200, 2) and np.isfinite(proba).all()


def test_the_category_list_travels_in_the_bundle_file(tmp_path: Path) -> None:
    a, b, y = _tables()
    bundle = Peer("A", 5, random_state=0).fit(a, y[:200]).share(["age", "ward"])
    bundle.save(tmp_path / "A.ffb")
    loaded = ShareBundle.load(tmp_path / "A.ffb")
    assert loaded.categories == {"ward": tuple(WARDS)}
    assert np.array_equal(
        SwarmForest([loaded]).predict_proba(b, "mp"), SwarmForest([bundle]).predict_proba(b, "mp")
    )


def test_an_unknown_or_missing_value_is_unavailable() -> None:
    a, b, y = _tables()
    swarm = _swarm(a, b, y, [])
    site = b.iloc[:4].copy()
    site["ward"] = ["west", None, "north", "south"]
    X = np.column_stack(
        [np.full(4, np.nan), site["age"], [np.nan, np.nan, 1.0, 2.0]]
    )  # the array form: columns of feature_names_, NaN = unavailable
    assert swarm.feature_names_ == ("age", "ward", "bmi")
    X = X[:, [1, 2, 0]]
    for strategy in ("mp", "ipr", "ss"):
        got = swarm.predict_proba(site, strategy, random_state=0)
        want = swarm.predict_proba(X, strategy, random_state=0)
        assert np.array_equal(got, want)


def test_different_category_lists_are_refused_then_agreed() -> None:
    a, b, y = _tables()
    b = b[b["ward"] != "east"].reset_index(drop=True)  # B never sees 'east'
    yb = y[200:][np.asarray(_tables()[1]["ward"] != "east")]
    pa = Peer("A", 5, random_state=0).fit(a, y[:200])
    pb = Peer("B", 5, random_state=0).fit(b, yb)
    with pytest.raises(ValueError, match=r"peers 'A' and 'B' code the text column 'ward'.*"):
        SwarmForest([pa.share(), pb.share()])
    with pytest.raises(ValueError, match=r"only at 'A': \['east'\].*categories=\{'ward'"):
        SwarmForest([pa.share(), pb.share()])
    pb = Peer("B", 5, random_state=0).fit(b, yb, categories={"ward": WARDS})
    swarm = SwarmForest([pa.share(), pb.share()])
    assert swarm.categories_ == {"ward": tuple(WARDS)}


def test_text_at_one_peer_and_codes_at_another_are_refused() -> None:
    a, b, y = _tables()
    pa = Peer("A", 5, random_state=0).fit(a, y[:200])
    pb = Peer("B", 5, random_state=0).fit(_coded(b), y[200:], categorical_features=["ward"])
    with pytest.raises(ValueError, match="text column at peer 'A' but numeric codes at peer 'B'"):
        SwarmForest([pa.share(), pb.share()])


def test_fit_errors_name_the_column() -> None:
    a, _, y = _tables()
    gap = a.copy()
    gap.loc[3, "ward"] = None
    with pytest.raises(ValueError, match="column 'ward' holds missing values"):
        Peer("A", 2).fit(gap, y[:200])
    with pytest.raises(ValueError, match=r"column 'ward' holds 'south', which is not in"):
        Peer("A", 2).fit(a, y[:200], categories={"ward": ["east", "north"]})
    with pytest.raises(ValueError, match=r"categories names \['pulse'\]"):
        Peer("A", 2).fit(a, y[:200], categories={"pulse": [1, 2]})


def test_bundle_checks_its_category_lists() -> None:
    a, _, y = _tables()
    bundle = Peer("A", 2, random_state=0).fit(a, y[:200]).share()
    with pytest.raises(ValueError, match="'age' has categories but is numeric"):
        dataclasses.replace(bundle, categories={"age": (1, 2)})
    with pytest.raises(ValueError, match="sorted order"):
        dataclasses.replace(bundle, categories={"ward": ("south", "east")})


def test_fit_intersection_keeps_text_columns() -> None:
    a, b, y = _tables()
    pa = Peer("A", 5, random_state=0).fit(a, y[:200])
    pb = Peer("B", 5, random_state=0).fit(b, y[200:])
    peers = fit_intersection([pa, pb])
    assert [p.categories_ for p in peers] == [{"ward": tuple(WARDS)}] * 2
    bundles = [p.share(surrogates=False, imputers=False) for p in peers]
    proba = SwarmForest(bundles).predict_proba(b, "intersection")
    assert proba.shape == (200, 2)


def test_site_codes_are_the_two_pass_codes_on_values_of_every_kind() -> None:
    """``_site_matrix`` codes a text column in one pass (``encode_counted``): the codes and
    the count of rows of the other kind are those of ``encode`` on the known rows and
    ``other_kind_rows`` on all (its two passes before), and a hand-worked list."""
    from fedforest.federated.categorical import encode, other_kind_rows

    a, b, y = _tables()
    swarm = _swarm(a, b, y, [])
    ward = [
        "west", None, np.nan, pd.NA, "north", 3, 2.0, np.float64(1.0), True, "south",
        pd.NaT, np.str_("east"), float("nan"), pd.Timestamp("2020-01-01"),
    ]  # fmt: skip
    site = pd.DataFrame({"age": np.arange(len(ward), dtype=float), "ward": ward})
    with pytest.warns(UserWarning, match=r"'ward' \(4 of 14 rows\)"):
        X, present = swarm._site_matrix(site)
    values = np.asarray(site["ward"], dtype=object)
    known = ~pd.isna(values)
    two_pass = np.full(len(values), np.nan)
    two_pass[known] = encode(values[known], list(WARDS))
    two_pass[two_pass < 0] = np.nan
    assert other_kind_rows(values, list(WARDS)) == 4  # 3, 2.0, 1.0 and True
    j = swarm.feature_names_.index("ward")
    hand = [np.nan] * 4 + [1.0] + [np.nan] * 4 + [2.0, np.nan, 0.0, np.nan, np.nan]
    np.testing.assert_array_equal(X[:, j], two_pass)
    np.testing.assert_array_equal(X[:, j], hand)
    assert present[j] and np.array_equal(X[:, swarm.feature_names_.index("age")], site["age"])
