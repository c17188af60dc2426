"""Keep-awake messages: what the server sends a SuperNode between rounds, and to whom.

A Flower 1.42 SuperNode that pulls no message sleeps 3 s, and the node that answers a
round last always pulls before the next round exists. ``FlowerFederation`` therefore
queues ``WAIT`` queries (outside the protocol and the ledger) behind each round's message
to the nodes whose ClientApp serves many messages in one process. These tests run the
ClientApp in this process (``tests/test_flower.py``'s ``MemoryGrid``); the real SuperLink,
SuperNodes and workers are ``tests/test_flower_worker.py``'s, whose deployment counts the
keep-awake messages each worker answered.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from flwr.app import Context, RecordDict
from flwr.app import Message as FlowerMessage

import fedforest as ff
from fedforest.transport.flower import FlowerFederation, federation
from fedforest.transport.flower import clientapp as clientapp_module
from fedforest.transport.flower._codec import QUERY_TYPE, TRAIN_TYPE, WAIT, control_records
from fedforest.transport.flower.federation import OBJECT_PULL_BACKOFF, pull_replies
from fedforest.transport.flower.serverapp import RunSettings
from tests import test_flower
from tests._forests import assert_same_forest
from tests.test_flower import PARAMS, SEED, SITES, MemoryGrid, local_clients

#: test_flower's fixtures: the sites' files, and what a ServerApp process knows of itself.
site_files = test_flower.site_files
task_identity = test_flower.task_identity


def is_wait(msg: FlowerMessage) -> bool:
    config = msg.content.config_records.get("fedforest")
    return msg.metadata.message_type == QUERY_TYPE and config is not None and config["kind"] == WAIT


def per_node(grid: MemoryGrid) -> dict[int, list[FlowerMessage]]:
    """The pushed messages, in order, by destination node."""
    out: dict[int, list[FlowerMessage]] = {}
    for msg in grid.pushed:
        out.setdefault(msg.metadata.dst_node_id, []).append(msg)
    return out


def check_waits(grid: MemoryGrid, fed: FlowerFederation, rounds: int) -> dict[int, list[str]]:
    """What every node was sent, in order ("wait" or the round's group id): each round's
    message is followed by at least one keep-awake message, which carries nothing but its
    kind; none comes before the first round or after the end-of-fit notice."""
    order = {}
    for node, messages in per_node(grid).items():
        kinds = ["wait" if is_wait(m) else m.metadata.group_id for m in messages]
        assert kinds[0] == "discovery" and kinds[-1] == "finish", kinds
        rounds_seen = [k for k in kinds if k != "wait"]
        assert rounds_seen == ["discovery", *map(str, range(rounds)), "finish"], kinds
        for k, kind in enumerate(kinds[:-1]):
            if kind not in ("wait", "discovery"):
                assert kinds[k + 1] == "wait", (node, kinds)
        assert kinds[1] != "wait" and kinds[-2] == "wait", kinds
        for m in messages:
            if is_wait(m):  # nothing but its kind: no header, no layout, no array
                assert m.content.array_records == {} and m.content.metric_records == {}
                assert dict(m.content.config_records["fedforest"]) == {
                    "kind": WAIT,
                    "header": "{}",
                    "layout": "[]",
                }
        order[node] = kinds
    assert fed.wait_messages == sum(k.count("wait") for k in order.values())
    assert fed._waits == {}  # every one answered and pulled (the last ones with the notice)
    return order


def test_keep_awake_messages_follow_every_round(site_files: dict[str, Path]) -> None:
    grid = MemoryGrid(site_files, fresh_process=False)
    fed = FlowerFederation(grid, min_nodes=3, poll_interval=0.001, keep_awake=True)
    assert fed.awake_nodes == list(SITES)
    remote = ff.FedForestRegressor(**PARAMS, random_state=SEED).fit_federated(fed)
    fed.close()
    local = ff.FedForestRegressor(**PARAMS, random_state=SEED)
    local.fit_federated(ff.LocalFederation(local_clients(site_files)))
    assert_same_forest(remote, local)
    assert remote.communication_.to_dict() == local.communication_.to_dict()  # not in the ledger
    check_waits(grid, fed, remote.communication_.rounds)


class SlowGrid(MemoryGrid):
    """A MemoryGrid whose nodes answer their messages in the order pushed (as a SuperNode
    pulls them), and whose node ``slow`` answers a round's message only at the
    ``delay``-th pull that asks for it: meanwhile the others have answered theirs."""

    def __init__(self, paths: dict[str, Path], slow: str, delay: int) -> None:
        super().__init__(paths, fresh_process=False)
        self.slow = next(n for n, c in self.contexts.items() if c.node_config["name"] == slow)
        self.delay = delay
        self.asked: dict[str, int] = {}

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[FlowerMessage]:
        wanted = set(message_ids)
        blocked: set[int] = set()
        answer = []
        for mid, msg in list(self.inbox.items()):  # in push order
            node = msg.metadata.dst_node_id
            if node in blocked or mid not in wanted:
                blocked.add(node)  # a node answers its messages in order
                continue
            if node == self.slow and msg.metadata.message_type == TRAIN_TYPE:
                self.asked[mid] = self.asked.get(mid, 0) + 1
                if self.asked[mid] < self.delay:
                    blocked.add(node)
                    continue
            answer.append(mid)
            blocked.add(node)  # one message per node per pull: a SuperNode's pace
        return super().pull_messages(answer)


def test_a_node_that_answered_early_is_kept_pulling(site_files: dict[str, Path]) -> None:
    """While the round waits for a slow node, the others get a keep-awake message at
    their answer and one per keep-awake answer (so one is always queued); the slow node
    gets one behind its message only, and nobody gets any between rounds."""
    grid = SlowGrid(site_files, slow="site-c", delay=6)
    fed = FlowerFederation(grid, min_nodes=3, poll_interval=0.001, keep_awake=True)
    remote = ff.FedForestRegressor(**PARAMS, random_state=SEED).fit_federated(fed)
    fed.close()
    local = ff.FedForestRegressor(**PARAMS, random_state=SEED)
    local.fit_federated(ff.LocalFederation(local_clients(site_files)))
    assert_same_forest(remote, local)
    rounds = remote.communication_.rounds
    order = check_waits(grid, fed, rounds)

    def waits_per_round(kinds: list[str]) -> list[int]:
        counts, current = [], None
        for kind in kinds[1:]:
            if kind == "wait":
                current = (current or 0) + 1
            else:
                if current is not None:
                    counts.append(current)
                current = 0
        return counts

    slow = waits_per_round(order[grid.slow])
    assert slow == [1] * rounds, order[grid.slow]
    for node, kinds in order.items():
        if node != grid.slow:  # kept pulling through the slow node's 5 extra pulls
            assert min(waits_per_round(kinds)) >= 3, kinds


def test_keep_awake_auto_asks_the_discovery(
    site_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """None (the default) sends them only to nodes whose ClientApp lives on between
    messages (``fedforest flower-worker`` sets ``LONG_LIVED``); False to none."""
    grid = MemoryGrid(site_files)
    fed = FlowerFederation(grid, min_nodes=3, poll_interval=0.001)
    assert fed.awake_nodes == []
    ff.FedForestRegressor(**PARAMS, random_state=SEED).fit_federated(fed)
    assert fed.wait_messages == 0 and not any(is_wait(m) for m in grid.pushed)

    monkeypatch.setattr(clientapp_module, "LONG_LIVED", True)
    assert FlowerFederation(MemoryGrid(site_files), min_nodes=3).awake_nodes == list(SITES)
    grid = MemoryGrid(site_files)
    fed = FlowerFederation(grid, min_nodes=3, poll_interval=0.001, keep_awake=False)
    assert fed.awake_nodes == []
    ff.FedForestRegressor(**PARAMS, random_state=SEED).fit_federated(fed)
    assert fed.wait_messages == 0 and not any(is_wait(m) for m in grid.pushed)


def test_a_failed_node_gets_no_more_keep_awake_messages(site_files: dict[str, Path]) -> None:
    grid = MemoryGrid(site_files, fresh_process=False)
    fed = FlowerFederation(
        grid, min_nodes=3, round_timeout=0.3, poll_interval=0.01, keep_awake=True
    )
    dead = fed.node_id("site-c")
    grid.dead.add(dead)
    model = ff.FedForestRegressor(**PARAMS, random_state=SEED, on_client_failure="drop")
    model.fit_federated(fed)
    assert [name for name, _ in model.dropped_clients_] == ["site-c"]
    to_dead = per_node(grid)[dead]
    # the first round's message and its keep-awake message, never anything after
    assert [m.metadata.message_type for m in to_dead[1:]] == [TRAIN_TYPE, QUERY_TYPE]
    alive = per_node(grid)[fed.node_id("site-a")]
    assert sum(map(is_wait, alive)) >= model.communication_.rounds


def test_the_clientapp_answers_wait_without_reading_its_data(tmp_path: Path) -> None:
    context = Context(
        run_id=1,
        node_id=5,
        node_config={"data-path": str(tmp_path / "missing.csv"), "target": "y"},
        state=RecordDict(),
        run_config={},
    )
    request = FlowerMessage(control_records(WAIT), dst_node_id=5, message_type=QUERY_TYPE)
    request.metadata.__dict__["_message_id"] = "w1"
    reply = clientapp_module.app(message=request, context=context)
    assert not reply.has_error()
    assert reply.content.config_records["fedforest"]["kind"] == WAIT
    assert len(context.state) == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [("auto", None), (True, True), (False, False), ("true", True), ("FALSE", False)],
)
def test_run_config_keep_awake(value: Any, expected: bool | None) -> None:
    settings = RunSettings.from_run_config({"model-path": "/tmp/m.ffm", "keep-awake": value})
    assert settings.keep_awake is expected
    assert RunSettings.from_run_config({"model-path": "/tmp/m.ffm"}).keep_awake is None


@pytest.mark.parametrize("value", ["yes", 1, 0.5, ""])
def test_run_config_keep_awake_refuses_other_values(value: Any) -> None:
    with pytest.raises(ValueError, match=r"keep-awake=.*expected \"auto\", true or false"):
        RunSettings.from_run_config({"model-path": "/tmp/m.ffm", "keep-awake": value})


def test_replies_objects_are_pulled_again_sooner_on_flowers_grid() -> None:
    """On Flower's HttpGrid (a deployed ServerApp's), a reply whose objects are still being
    uploaded is pulled again after 0.02 s, not Flower's 1 s; the module is left as found."""
    from flwr.superlink.grid import http_grid

    original = http_grid.pull_objects
    seen: list[Any] = []

    class Recording(http_grid.HttpGrid):
        def __init__(self) -> None:  # no SuperLink: only pull_messages is called
            pass

        def pull_messages(self, message_ids: Iterable[str]) -> Iterable[FlowerMessage]:
            seen.append(http_grid.pull_objects)  # what HttpGrid's own pull would call
            return []

    assert pull_replies(Recording(), ["a"]) == []
    assert http_grid.pull_objects is original
    assert isinstance(seen[0], functools.partial) and seen[0].func is original
    assert seen[0].keywords == OBJECT_PULL_BACKOFF
    assert OBJECT_PULL_BACKOFF["initial_backoff"] < 0.1  # Flower's own is 1 s
    # any other Grid is called as it is
    grid = MemoryGrid({}, fresh_process=False)
    assert pull_replies(grid, []) == []
    assert http_grid.pull_objects is original


def test_keep_awake_messages_stop_in_a_long_round(
    site_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past KEEP_AWAKE_SECONDS into a round a node that answered gets no more: each node
    then has only the one behind each round's message, however long the slow node takes."""
    monkeypatch.setattr(federation, "KEEP_AWAKE_SECONDS", 0.0)
    grid = SlowGrid(site_files, slow="site-c", delay=6)
    fed = FlowerFederation(grid, min_nodes=3, poll_interval=0.001, keep_awake=True)
    remote = ff.FedForestRegressor(**PARAMS, random_state=SEED).fit_federated(fed)
    fed.close()
    rounds = remote.communication_.rounds
    order = check_waits(grid, fed, rounds)
    assert all(kinds.count("wait") == rounds for kinds in order.values()), order
