"""Red team 17 (issue 11): the suite's attack helpers as strong as an attacker's.

- ``linked`` (a one-row summary linked to its sketches) reads a sketch at the fit's
  ``n_bins`` (it read 32 values a feature and was silently skipped at any other width);
- ``_in_bag_weights`` draws each client's bootstrap as the client does under
  ``max_samples`` (``round(f n_k)`` draws) and without the bootstrap (every row once);
- the isolation attacks route rows as the clients do (``client_values``): a level fewer
  than ``min_aggregate_rows`` rows of a client hold, and a missing category value, take
  the missing category's code of the set-up's list (pandas' codes sent them elsewhere).

Each finds rows under ``"none"`` or with the rules off (so it can fail) and nothing under
``"secure"``; on fuzz draws they agree with the clients' own draws and codes.
``tests/_attack_dp_tree.py`` extends the ``"dp"`` audit inside the trees (Round B's
increment and category group, a depth-1 node, a classifier's class columns).
docs/privacy-findings.md, "Red team 17", has the measurements.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from tests._attack_controls import assert_found_at_some_seed, rules_across_levels_off
from tests._attack_dp_tree import tree_audit
from tests._attack_union import all_claims, union, with_rare_level
from tests.test_privacy import (
    _data,
    _fit,
    _in_bag_weights,
    _members,
    ancestor_exposure,
    client_values,
    setup_header,
)


def _recorded(privacy: str, seed: int = 0, rare: bool = False, **settings: Any) -> tuple:
    """A regressor's recording on 10 clients x 100 rows, 8 features and the category column."""
    X, y, h = _data(n_rows=100, d=8, seed=seed, categorical=True)
    X = with_rare_level(X) if rare else X
    model = ff.FedForestRegressor(
        **{"n_estimators": 10, "random_state": seed, "privacy": privacy, **settings}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the rare level's rows counted as missing
        fed = _fit(model, X, y, h)
    return fed, model, X, np.asarray(y, dtype=np.float64), h


def _routed_as_the_trees(fed: Any, model: Any, X: pd.DataFrame, h: np.ndarray) -> bool:
    """Whether every node of every tree gets its ``n_node_samples`` in-bag rows."""
    w = _in_bag_weights(model, list(fed.clients.values()), h, len(model.trees_), model.random_state)
    member = _members(model, client_values(fed, X, h), w)
    return all(
        r.size == tree.n_node_samples[nd]
        for t, tree in enumerate(model.trees_)
        for nd, r in member[t].items()
    )


# --------------------------------------------------------------------- linked, any n_bins
@pytest.mark.parametrize("n_bins", [16, 64])
def test_linked_reads_the_sketches_at_the_fits_n_bins(n_bins: int) -> None:
    """Measured at seed 0: 378 of 1,000 rows at 16 bins (0 when read at 32 values a
    feature), nothing under ``"secure"``."""
    fed, model, X, y, h = _recorded("none", n_bins=n_bins)
    claims = all_claims(fed, model, X, y, h, slow=False)
    assert claims["linked"][0].mean() > 0.1, claims["linked"][0].mean()
    fed, model, X, y, h = _recorded("secure", n_bins=n_bins)
    claims = all_claims(fed, model, X, y, h, slow=False)
    assert union(claims)["rebuilt"] == 0.0 and not claims["linked"][0].any()


# --------------------------------------------------------------------- the in-bag rows
@pytest.mark.parametrize(
    ("privacy", "settings"),
    [
        ("secure", {"max_samples": 0.6}),
        ("secure", {"max_samples": 450}),
        ("none", {"max_samples": 0.3}),
        ("none", {"bootstrap": False}),
    ],
)
def test_the_in_bag_rows_are_each_clients_draws(privacy: str, settings: dict) -> None:
    """Every node's rows as the trees counted them; the draws the set-up sent."""
    fed, model, X, _, h = _recorded(privacy, **settings)
    assert _routed_as_the_trees(fed, model, X, h)
    setup = setup_header(fed)
    w = _in_bag_weights(model, list(fed.clients.values()), h, 1, model.random_state)
    for k, name in enumerate(fed.client_names):
        drawn = w[0, h == k].sum()
        assert drawn == setup.get("draws", {}).get(name, (h == k).sum()), (name, drawn)


def test_the_isolation_attacks_under_max_samples_find_rows_with_the_rules_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``max_samples=0.6`` and a rare level: the ancestor attack on the rows each client
    drew, routed as the clients do; nothing with the rules, rows isolated without them
    (so it can fail)."""

    def attack(seed: int) -> dict[str, float]:
        fed, model, X, _, h = _recorded("secure", seed, rare=True, max_samples=0.6)
        w = _in_bag_weights(model, list(fed.clients.values()), h, 10, seed)
        coded = pd.DataFrame(client_values(fed, X, h), columns=X.columns)
        return ancestor_exposure(fed, model, coded, w, 10)

    assert attack(0) == {"parent": 0, "further": 0, "partition": 0, "rows": 0.0}
    rules_across_levels_off(monkeypatch, partitions=True)
    assert_found_at_some_seed(attack, lambda got: got["rows"] > 0, (0, 1, 2))


# --------------------------------------------------------------------- the clients' codes
@pytest.mark.parametrize("privacy", ["secure", "none"])
def test_a_rare_level_is_routed_as_the_clients_send_it(privacy: str) -> None:
    """Under ``"secure"`` the rare level's rows (3, at two clients) travel as the missing
    category; under ``"none"`` as their level. Every node gets its rows either way, and
    the union (isolation attacks included under ``"secure"``) finds nothing."""
    fed, model, X, y, h = _recorded(privacy, rare=True)
    assert any((t.feature == X.columns.get_loc("ward")).any() for t in model.trees_)
    levels = setup_header(fed)["categories"][str(X.columns.get_loc("ward"))]
    assert ("rare" in levels) == (privacy == "none") and None in levels, levels
    assert _routed_as_the_trees(fed, model, X, h)
    if privacy == "secure":
        claims = all_claims(fed, model, X, y, h, slow=True)
        assert union(claims)["rebuilt"] == 0.0, {k: v[0].sum() for k, v in claims.items()}


# --------------------------------------------------------------------- "dp" inside the trees
#: The audited entries beyond red team 16's root sum: the root's Round B increment holding
#: the canary, the depth-1 node's summary, the root's category group holding it (the
#: feature as a category column), a classifier's root summary (its class columns).
DP_ENTRIES = [
    ("round_b", "regression"),
    ("deep", "regression"),
    ("group", "regression"),
    ("root", "classification"),
]


@pytest.mark.parametrize(("where", "task"), DP_ENTRIES)
def test_a_row_drawn_six_times_moves_no_entry_more_than_charged_under_dp(
    where: str, task: str
) -> None:
    """The canary drawn 6 times (capped at 2), 3 clients x 100 rows, 40 fits a side at
    epsilon 64: the entry moves by what the capped count gives (a regression target 2
    units, a label sqrt(2) units on the class columns' difference), never more than the
    accountant's 2 units an entry; the released noise is the plan's."""
    got = tree_audit(40, 64.0, force=6, where=where, task=task, n_rows=100)
    top = got["by_count"][got["max_count"]]
    assert got["max_count"] == 2.0, got
    n = min(top["fits"])
    assert n >= 20, got  # the entry exists in most fits
    se = math.sqrt(2 / n + top["mu"] ** 2 / (4 * n))
    assert top["mu_low"] <= got["mu_entry"], got  # no more than charged, at 95 %
    assert abs(top["mu"] - got["mu_expected"]) < 4 * se, got  # and the count is what moves
    assert abs(got["noise_sd"] - 1.0) < 4 / math.sqrt(2 * got["fits"]), got
    assert got["epsilon_cp"] <= got["epsilon"] and got["epsilon_gauss"] <= got["epsilon"], got


@pytest.mark.parametrize(("where", "task"), DP_ENTRIES)
def test_the_entry_audits_catch_an_uncapped_count(where: str, task: str) -> None:
    """The control: the canary's count of 6 not capped moves each entry three times what
    the cap allows; the audit's 95 % lower bound is above the accountant's charge."""
    got = tree_audit(30, 64.0, force=6, cap_off=True, where=where, task=task, n_rows=100)
    assert got["max_count"] == 6.0, got
    assert got["mu_low_max_count"] > got["mu_entry"], got


# --------------------------------------------------------------------- two derivations agree
@pytest.mark.parametrize("seed", [0, 21])
def test_the_helpers_agree_with_the_clients_own_draws_and_codes(seed: int) -> None:
    """Red team 16's fuzz took the in-bag rows from the set-up's seed and ``draws`` and the
    columns from each client's encoded ``Xt``; the suite's helpers derive them from the
    estimator's settings and the set-up's category lists. On fuzz draws with
    ``max_samples``, a rare level and missing values (0 a classifier, 21 a regressor)
    both give the same counts and the same columns."""
    from tests._attack_fuzz import _in_bag, draw

    case = draw(seed)
    assert "max_samples" in case["settings"], case["describe"]
    kind = ff.FedForestClassifier if case["classification"] else ff.FedForestRegressor
    model = kind(**case["settings"], privacy="secure")
    X, y, h = case["X"], case["y"], case["h"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fed = _fit(model, X, y, h, case["sample_weight"])
    n_trees = len(model.trees_)
    clients = list(fed.clients.values())
    mine = _in_bag_weights(model, clients, h, n_trees, model.random_state)
    np.testing.assert_array_equal(mine, _in_bag(fed, h, n_trees))
    theirs = np.concatenate([c.Xt[:-1].T for c in clients])
    np.testing.assert_array_equal(client_values(fed, X, h), theirs)
    assert _routed_as_the_trees(fed, model, X, h)
