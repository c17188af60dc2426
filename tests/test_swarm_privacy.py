"""What a swarm peer's share bundle tells whoever receives it about the peer's rows.

A swarm has no server and no secure aggregation: a peer hands its fitted trees, surrogate
splits, imputers, feature spreads and category lists to every other peer
(docs/swarm.md, "What a bundle reveals"). These tests measure what a receiving peer reads
off a bundle, on a site's table of whole-year ages, one-decimal BMIs and a ward column
with a level one row holds: with scikit-learn's forest at its defaults (leaves of one
row) most rows sit alone in some leaf, whose class counts give the row's label and whose
path gives a box around its values; thresholds are midpoints of the node's neighbouring
values; the category list names every level the rows hold. The assertions hold the
numbers docs/swarm.md quotes to their order, so they fail if the bundle changes.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from fedforest.swarm import Peer


def _site(seed: int = 0, n: int = 300) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    age = rng.integers(20, 90, n).astype(float)  # whole years
    bmi = np.round(rng.normal(27, 4, n), 1)  # one decimal, as recorded
    ward = rng.choice(["east", "north", "south"], n).astype(object)
    ward[0] = "isolation"  # a level one row holds
    y = ((age - 50) / 10 + (bmi - 27) / 4 + rng.normal(0, 1, n) > 0.5).astype(int)
    return pd.DataFrame({"age": age, "bmi": bmi, "ward": ward}), y


def bundle_exposure(engine: str, declare: bool = False) -> dict[str, Any]:
    """Shares of the rows alone in a leaf, of age thresholds at ``k + 0.5``, and whether
    the category list names the one-row level."""
    X, y = _site()
    vocabulary = ["east", "isolation", "north", "south", "west"]  # "west": no row holds it
    categories = {"ward": vocabulary} if declare else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer = Peer("A", n_estimators=30, random_state=0, engine=engine)
        bundle = peer.fit(X, y, categories=categories).share()
    codes = {v: i for i, v in enumerate(bundle.categories["ward"])}
    rows = np.column_stack([X["age"], X["bmi"], [codes.get(v, np.nan) for v in X["ward"]]])
    n = len(rows)
    alone: set[int] = set()
    for tree in bundle.trees:
        node = np.zeros(n, dtype=np.int64)
        while (inner := tree.children_left[node] != -1).any():
            f = np.maximum(tree.feature[node], 0)
            left = rows[np.arange(n), f] <= tree.threshold[node]
            step = np.where(left, tree.children_left[node], tree.children_right[node])
            node = np.where(inner, step, node)
        alone.update(np.flatnonzero(tree.n_node_samples[node] == 1).tolist())
    splits = [t.threshold[(t.children_left != -1) & (t.feature == 0)] for t in bundle.trees]
    age = np.concatenate(splits)
    surrogate = bundle.surr_threshold[bundle.surr_feature == 0]
    return {
        "surrogate_age_at_half": float(np.isclose(surrogate % 1.0, 0.5).mean()),
        "categories": list(bundle.categories["ward"]),
        "alone": len(alone) / n,
        "age_at_half": float(np.isclose(age % 1.0, 0.5).mean()) if age.size else 0.0,
        "names_the_rare_level": "isolation" in bundle.categories["ward"],
    }


def test_a_scikit_learn_peers_bundle_singles_out_most_of_its_rows() -> None:
    found = bundle_exposure("sklearn")
    assert found["alone"] > 0.5  # label and box of each (59 % measured)
    assert found["age_at_half"] > 0.5  # k and k + 1 both held in the node (68 %)
    assert found["names_the_rare_level"]


def test_a_fedforest_peers_bundle_still_names_its_rare_levels() -> None:
    found = bundle_exposure("fedforest")  # privacy="secure" with one client: leaves of m rows
    assert found["alone"] == 0.0
    assert found["age_at_half"] == 0.0  # lattice points, not midpoints of rows
    assert found["names_the_rare_level"]  # the peer's own list, from its rows
    assert found["surrogate_age_at_half"] > 0.5  # surrogates: midpoints of its rows (81 %)


def test_a_declared_vocabulary_is_the_bundles_list() -> None:
    """Declared, the list says nothing of which levels the rows hold."""
    found = bundle_exposure("sklearn", declare=True)
    assert found["categories"] == ["east", "isolation", "north", "south", "west"]
