"""The group handlers against a fake node: a classic consumer group's life (FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups,
LeaveGroup, DeleteGroups) and a KIP-848 member's first heartbeat, through the handlers as a
client drives them; a group whose ``__consumer_offsets`` partition another broker leads gets
NOT_COORDINATOR."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moldau.broker.group.consumer_protocol import (
    assignment_partitions,
    encode_assignment,
    encode_subscription,
)
from moldau.broker.group.partitioning import OFFSETS_TOPIC, partition_for
from moldau.broker.metadata.channel import TopicSpec
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E

from .fakes import FakeNode, call, fake_node, start

GROUP = "g"


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def coordinating(tmp_path: Path, leaders: dict[int, int] | None = None) -> FakeNode:
    """A node of a two-broker cluster with ``__consumer_offsets`` (5 partitions, led as
    ``leaders`` says, else all by this node) and the topic ``t``, every shard it leads
    loaded."""
    node = await fake_node(tmp_path, brokers={1: ["PLAINTEXT"], 2: ["PLAINTEXT"]})
    leaders = leaders or {}
    results = await node.controller.create_topics([
        TopicSpec(OFFSETS_TOPIC, assignments={p: [leaders.get(p, 1)] for p in range(5)}),
        TopicSpec("t", assignments={0: [1], 1: [1]})])
    assert [r.error for r in results] == [E.none, E.none]
    coordinator = node.group_coordinator
    assert coordinator is not None
    for _ in range(200):
        if not coordinator.loading:
            break
        await asyncio.sleep(0)
    assert sorted(coordinator.shards) == [p for p in range(5) if leaders.get(p, 1) == 1]
    return node


def join_body(member_id: str = "") -> dict[str, Any]:
    return {"group_id": GROUP, "session_timeout": 10_000, "rebalance_timeout": 10_000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_subscription(["t"])}],
            "reason": None}


def test_a_classic_group_from_join_to_delete(tmp_path: Path) -> None:
    async def main() -> None:
        node = await coordinating(tmp_path)
        found = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        assert (found["error_code"], found["node_id"]) == (E.none, 1)

        first = await call(node, ApiKey.JOIN_GROUP, 7, join_body())
        assert first["error_code"] == E.member_id_required  # KIP-394
        member = first["member_id"]
        joining = start(node, ApiKey.JOIN_GROUP, 7, join_body(member))
        assert joining.waits  # parked until the rebalance completes
        task = asyncio.ensure_future(joining.answer())
        await settle()
        node.timer.advance(0)  # group.initial.rebalance.delay.ms=0 in the test config
        joined = await asyncio.wait_for(task, 10)
        assert (joined["error_code"], joined["leader"], joined["generation_id"]) == (
            E.none, member, 1)

        assignment = encode_assignment({"t": [0, 1]})
        synced = await call(node, ApiKey.SYNC_GROUP, 5, {
            "group_id": GROUP, "generation_id": 1, "member_id": member,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": assignment}]})
        assert synced["error_code"] == E.none
        assert assignment_partitions(synced["assignment"]) == {"t": [0, 1]}
        beat = await call(node, ApiKey.HEARTBEAT, 4, {
            "group_id": GROUP, "generation_id": 1, "member_id": member,
            "group_instance_id": None})
        assert beat["error_code"] == E.none

        committed = await call(node, ApiKey.OFFSET_COMMIT, 8, {
            "group_id": GROUP, "generation_id_or_member_epoch": 1, "member_id": member,
            "group_instance_id": None, "topics": [
                {"name": "t", "partitions": [
                    {"partition_index": 0, "committed_offset": 42,
                     "committed_leader_epoch": -1, "committed_metadata": "m"},
                    {"partition_index": 9, "committed_offset": 1,
                     "committed_leader_epoch": -1, "committed_metadata": None}]}]})
        codes = [p["error_code"] for p in committed["topics"][0]["partitions"]]
        assert codes == [E.none, E.unknown_topic_or_partition]
        fetched = await call(node, ApiKey.OFFSET_FETCH, 7, {
            "group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0, 1]}],
            "require_stable": False})
        offsets = {p["partition_index"]: (p["committed_offset"], p["metadata"])
                   for p in fetched["topics"][0]["partitions"]}
        assert offsets == {0: (42, "m"), 1: (-1, "")}

        listed = await call(node, ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert [(g["group_id"], g["group_state"]) for g in listed["groups"]] == [
            (GROUP, "Stable")]
        described = await call(node, ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": [GROUP], "include_authorized_operations": False})
        [group] = described["groups"]
        assert (group["group_state"], [m["member_id"] for m in group["members"]]) == (
            "Stable", [member])

        left = await call(node, ApiKey.LEAVE_GROUP, 4, {
            "group_id": GROUP, "members": [{"member_id": member, "group_instance_id": None}]})
        assert left["error_code"] == E.none
        deleted = await call(node, ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]})
        assert [(r["group_id"], r["error_code"]) for r in deleted["results"]] == [
            (GROUP, E.none)]
        gone = await call(node, ApiKey.OFFSET_FETCH, 7, {
            "group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0]}],
            "require_stable": False})
        assert gone["topics"][0]["partitions"][0]["committed_offset"] == -1
        await node.close()

    asyncio.run(main())


def test_a_consumer_group_member_joins_with_its_first_heartbeat(tmp_path: Path) -> None:
    async def main() -> None:
        node = await coordinating(tmp_path)
        answer = await call(node, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": "cg", "member_id": "", "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout": 30_000, "subscribed_topic_names": ["t"],
            "server_assignor": None, "topic_partitions": []})
        assert answer["error_code"] == E.none and answer["member_epoch"] == 1
        assert answer["member_id"]
        [owned] = answer["assignment"]["topic_partitions"]
        assert (owned["topic_id"], sorted(owned["partitions"])) == (
            node.image.topics_by_name["t"].topic_id, [0, 1])
        await node.close()

    asyncio.run(main())


def test_groups_led_by_another_broker_are_not_coordinated_here(tmp_path: Path) -> None:
    async def main() -> None:
        node = await coordinating(tmp_path, {partition_for(GROUP, 5): 2})
        found = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        assert (found["error_code"], found["node_id"], found["host"]) == (
            E.none, 2, "b2-plaintext")
        joined = await call(node, ApiKey.JOIN_GROUP, 7, join_body())
        assert joined["error_code"] == E.not_coordinator
        fetched = await call(node, ApiKey.OFFSET_FETCH, 7, {
            "group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0]}],
            "require_stable": False})
        assert fetched["error_code"] == E.not_coordinator
        await node.close()

    asyncio.run(main())


class StalledCreation:
    """The node's controller, except that CreateTopics waits for ``release`` (a controller
    that is frozen, gone or still being elected), counting the calls."""

    def __init__(self, controller: Any) -> None:
        self.controller = controller
        self.release = asyncio.Event()
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.controller, name)

    async def create_topics(self, specs: Any, **kwargs: Any) -> Any:
        self.calls += 1
        await self.release.wait()
        return await self.controller.create_topics(specs, **kwargs)


def test_lookups_do_not_wait_for_a_stalled_offsets_topic_creation(tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path)
        stalled = StalledCreation(node.controller)
        node.controller = stalled  # type: ignore[assignment]
        keys = [f"g{i}" for i in range(5)]
        loop = asyncio.get_running_loop()
        started = loop.time()
        # a batch of keys waits once, not once per key, and the bound is about a second
        batch = await call(node, ApiKey.FIND_COORDINATOR, 4,
                           {"key_type": 0, "coordinator_keys": keys})
        single = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        took = loop.time() - started
        assert [c["error_code"] for c in batch["coordinators"]] == [
            E.coordinator_not_available] * len(keys)
        assert single["error_code"] == E.coordinator_not_available
        assert "being created" in single["error_message"]
        assert took < 10, took  # would be forever with the creation awaited
        assert stalled.calls == 1  # later lookups join the pending creation
        assert OFFSETS_TOPIC not in node.image.topics_by_name

        stalled.release.set()  # the creation goes on without any lookup waiting for it
        for _ in range(200):
            if OFFSETS_TOPIC in node.image.topics_by_name:
                break
            await asyncio.sleep(0.01)
        found = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        assert (found["error_code"], found["node_id"]) == (E.none, 1)
        assert stalled.calls == 1
        await node.close()

    asyncio.run(main())


def test_the_single_node_answers_its_first_lookup_with_the_coordinator(
        tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path)
        found = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        assert (found["error_code"], found["node_id"]) == (E.none, 1)
        assert OFFSETS_TOPIC in node.image.topics_by_name
        await node.close()

    asyncio.run(main())
