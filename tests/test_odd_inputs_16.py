"""Odd inputs, sixteenth round.

The tests whose names say *refused* failed at the branch's start (e635805); the others
pin what did not change. The refusals:

- ``client_ids`` of dates or durations with a missing one (``NaT``): its rows became a
  client named ``"None"``, silently (NaN, None and ``pd.NA`` were refused);
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff


# ------------------------------------------------------------- client_ids: NaT is missing
@pytest.mark.parametrize(
    "ids",
    [
        pd.Series(pd.to_datetime(["2020-01-01", None, "2021-01-01"] * 10)),
        pd.Series(pd.to_timedelta([1, None, 2] * 10, unit="D")),
        np.array(["2020-01-01", "NaT", "2021-01-01"] * 10, dtype="datetime64[D]"),
    ],
    ids=["datetime", "timedelta", "numpy"],
)
def test_client_ids_with_a_missing_date_are_refused_naming_the_row(ids: Any) -> None:
    rng = np.random.default_rng(16)
    X = rng.normal(size=(30, 2))
    with pytest.raises(ValueError, match=r"client_ids contains a missing value \(NaT, row 1, 10 "):
        ff.FedForestRegressor(n_estimators=2, privacy="none").fit(X, X[:, 0], client_ids=ids)


def test_client_ids_of_dates_without_a_missing_one_still_name_the_clients() -> None:
    rng = np.random.default_rng(16)
    X = rng.normal(size=(30, 2))
    ids = pd.Series(pd.to_datetime(["2020-01-01", "2021-01-01"] * 15))
    model = ff.FedForestRegressor(n_estimators=2, privacy="none").fit(X, X[:, 0], client_ids=ids)
    assert list(model.clients_) == ["2020-01-01 00:00:00", "2021-01-01 00:00:00"]
