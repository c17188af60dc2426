"""A drop in a batch's set-up through Flower's transport: the local transport's forest.

The set-up sent again under the survivors' digest, and the out-of-bag round's per-tree
digests (``tree_digest``), through Flower's messages and the SuperNode state written and
read back before every message (``MemoryGrid`` with a fresh process per message).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from flwr.app import Message as FlowerMessage

import fedforest as ff
from fedforest.federated.protocol import RECOVER, ROUND_A
from fedforest.transport.flower import FlowerFederation
from fedforest.transport.flower._codec import TRAIN_TYPE
from tests.test_flower import (  # noqa: F401 - site_files, task_identity: fixtures
    PARAMS,
    SEED,
    MemoryGrid,
    assert_same_forest,
    failing,
    local_clients,
    site_files,
    task_identity,
)


class _DyingGrid(MemoryGrid):
    """Node ``node`` stops answering from protocol round ``at`` on (as one killed then)."""

    def __init__(self, paths: dict[str, Path], at: int, node: int) -> None:
        super().__init__(paths, fresh_process=True)
        self.at, self.node, self.round = at, node, -1

    def push_messages(self, messages: Iterable[FlowerMessage]) -> Iterable[str]:
        messages = list(messages)
        if messages and messages[0].metadata.message_type == TRAIN_TYPE:
            self.round += 1  # one push per round
            if self.round == self.at:
                self.dead.add(self.node)
        return super().push_messages(messages)


@pytest.mark.filterwarnings("ignore:.* have no out-of-bag prediction:UserWarning")
@pytest.mark.parametrize("at", [3, 4], ids=["roots-round-a", "roots-round-b"])
def test_a_drop_in_the_set_up_through_flower_gives_the_local_forest(
    site_files: dict[str, Path],  # noqa: F811
    at: int,
) -> None:
    """Round 3: the first batch's set-up, sent again. Round 4: the second batch rebound."""
    kw = {**PARAMS, "tree_batch_size": 3, "oob_score": True, "random_state": SEED}
    kw["on_client_failure"] = "drop"
    grid = _DyingGrid(site_files, at, node=1002)  # site-c
    fed = FlowerFederation(grid, min_nodes=3, round_timeout=1.0, poll_interval=0.001)
    remote = ff.FedForestRegressor(**kw).fit_federated(fed)
    local = ff.FedForestRegressor(**kw)
    local.fit_federated(ff.LocalFederation(failing(local_clients(site_files), "site-c", at)))
    assert remote.dropped_clients_ == local.dropped_clients_ == [("site-c", at)]
    assert_same_forest(remote, local)
    assert remote.oob_score_ == local.oob_score_
    kinds = remote.communication_.per_round["kind"].tolist()
    if at == 3:  # the set-up again, no recovery round; one digest for both batches
        assert kinds[3] == kinds[4] == ROUND_A and RECOVER not in kinds
        assert remote._settings_digest not in ("", None)
    else:  # batch 2 under another digest: the out-of-bag round sent each tree's
        assert remote._settings_digest == local._settings_digest == ""
    fed.close()
