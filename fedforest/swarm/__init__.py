"""Swarm forests: peers with partially overlapping features pool their trees.

The method of Tajabadi & Heider, *Mind the Missing Split: Resolving Feature
Heterogeneity in Swarm Learning with Random Forests* (docs/swarm.md). Each :class:`Peer`
trains a random forest on its own columns and :meth:`Peer.share` s a :class:`ShareBundle`
(trees with node counts and class counts, feature names, surrogate splits, imputers,
feature standard deviations). Bundles travel as files in the safe format (:meth:`ShareBundle.save`,
:meth:`ShareBundle.load`; never pickle). A :class:`SwarmForest` pools bundles and predicts
at a site whose columns are those of ``X_site``, resolving splits on the columns it lacks
with one of :data:`STRATEGIES`.

Example
-------
>>> from fedforest.swarm import Peer, SwarmForest, shared_columns
>>> peers = [Peer("A", random_state=0).fit(X_a, y_a), Peer("B", random_state=0).fit(X_b, y_b)]
>>> common = shared_columns(peers)
>>> swarm = SwarmForest([p.share(shared_features=common) for p in peers])
>>> proba = swarm.predict_proba(X_a_test, strategy="mp", site="A")
"""

from .bundle import ShareBundle, load_bundles
from .peer import Peer, fit_intersection, shared_columns
from .pool import STRATEGIES, SwarmForest
from .train import Imputer, trees_from_sklearn

__all__ = [
    "STRATEGIES",
    "Imputer",
    "Peer",
    "ShareBundle",
    "SwarmForest",
    "fit_intersection",
    "load_bundles",
    "shared_columns",
    "trees_from_sklearn",
]
