"""A broker in a three-broker cluster, driven only by its metadata image: the records a
ZooKeeper-fed broker replays (RegisterBrokerRecord, TopicRecord, PartitionRecord,
PartitionChangeRecord, RemoveTopicRecord, BrokerRegistrationChangeRecord) go through the same
replay and listeners as the single node's, and the handlers answer as Kafka's brokers do:

- Metadata / DescribeCluster per listener, seed 001's configuration (server1 with an extra
  ``TEXT`` listener): a client on TEXT sees only broker 1, one on PLAINTEXT sees all three;
- Produce, Fetch, ListOffsets, DeleteRecords for partitions another broker leads, none leads,
  or nobody knows, with KIP-951 leader hints;
- leadership moving in and out (parked requests answered at once), replicas reassigned away,
  a fenced broker, and the group coordinator following ``__consumer_offsets`` leadership.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.group.consumer_protocol import encode_subscription
from moldau.broker.group.partitioning import OFFSETS_TOPIC, partition_for
from moldau.broker.metadata.forwarding import forwarding_client_id
from moldau.broker.metadata.records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records.codec import build_batch

from .fakes import FakeNode, call, endpoints, fake_node, start

# Seed 001: server0 and server2 on PLAINTEXT only, server1 also on TEXT (mapped to PLAINTEXT).
# This node is broker 1; broker 2 is the active controller.
SEED_001 = {0: ["PLAINTEXT"], 1: ["PLAINTEXT", "TEXT"], 2: ["PLAINTEXT"]}
T_ID = uuid.UUID("00000000-0000-0000-0000-0000000000aa")


def replay(node: FakeNode, records: Sequence[MetadataRecord]) -> None:
    """Apply records the way a broker that is not the controller does (no preparers, no
    write): replay into the image, then tell the listeners."""
    for record in records:
        node.image.replay(record)
    for listener in node.controller.listeners:
        listener(node.image, records)


def topic_t(*partitions: tuple[list[int], int]) -> list[MetadataRecord]:
    """Topic ``t``: partition i with (replicas, leader)."""
    return [TopicRecord("t", T_ID), *(
        PartitionRecord(T_ID, i, replicas, replicas, leader)
        for i, (replicas, leader) in enumerate(partitions))]


async def seed_cluster(tmp_path: Path, **settings: Any) -> FakeNode:
    node = await fake_node(tmp_path, node_id=1, brokers=SEED_001, controller_id=2,
                           settings=settings)
    # p0 led by broker 0 (no TEXT endpoint), p1 led here, p2 by broker 2, p3 here but
    # without a leader (its leader's broker went away), p4 led here.
    replay(node, topic_t(([0], 0), ([1], 1), ([2, 1], 2), ([1], -1), ([1], 1)))
    return node


def metadata_body(version: int, *topics: str) -> dict[str, Any]:
    return {"topics": [{"name": t, "topic_id": None} for t in topics] or None,
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
            "include_cluster_authorized_operations": False}


def produce_body(topic: str, partition: int, now_ms: int, acks: int = 1) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout": 30_000, "topic_data": [
        {"name": topic, "partition_data": [
            {"index": partition, "records": build_batch([(None, b"v", [], now_ms)])}]}]}


def fetch_body(version: int, partition: int, *, epoch: int = -1,
               max_wait_ms: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "t", "topic_id": T_ID, "partitions": [
            {"partition": partition, "current_leader_epoch": epoch, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""}
    if version >= 15:
        del body["replica_id"]
        body["replica_state"] = {"replica_id": -1, "replica_epoch": -1}
    return body


def produce_answer(answer: dict[str, Any]) -> dict[str, Any]:
    [topic] = answer["responses"]
    [partition] = topic["partition_responses"]
    return partition


def fetch_answer(answer: dict[str, Any]) -> dict[str, Any]:
    [topic] = answer["responses"]
    [partition] = topic["partitions"]
    return partition


def leader_of(node: FakeNode, partition: int) -> tuple[int, int]:
    state = node.image.topics_by_name["t"].partitions[partition]
    return state.leader, state.leader_epoch


def run(test: Any) -> None:
    asyncio.run(test)


# --- Metadata, DescribeCluster ---------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 14))
def test_seed_001_each_listener_sees_its_own_brokers(tmp_path: Path, version: int) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        plain = await call(node, ApiKey.METADATA, version, metadata_body(version, "t"))
        text = await call(node, ApiKey.METADATA, version, metadata_body(version, "t"),
                          listener="TEXT")
        assert [(b["node_id"], b["host"], b["port"]) for b in plain["brokers"]] == [
            (i, f"b{i}-plaintext", endpoints(i, SEED_001[i])[0].port) for i in (0, 1, 2)]
        # As the seed shows: bootstrapping on TEXT, the client sees only "localhost:9099 (id: 1)".
        assert [(b["node_id"], b["host"], b["port"]) for b in text["brokers"]] == [
            (1, "b1-text", endpoints(1, SEED_001[1])[1].port)]
        if version >= 1:
            # The image's controller where a client can reach it; on TEXT, where broker 2 has
            # no endpoint, this broker, which forwards admin requests to the controller.
            assert (plain["controller_id"], text["controller_id"]) == (2, 1)
        on_text = {p["partition_index"]: (p["error_code"], p["leader_id"])
                   for p in text["topics"][0]["partitions"]}
        unreachable = E.listener_not_found if version >= 6 else E.leader_not_available
        assert on_text == {0: (unreachable, -1), 1: (E.none, 1), 2: (unreachable, -1),
                           3: (E.leader_not_available, -1), 4: (E.none, 1)}
        on_plain = {p["partition_index"]: (p["error_code"], p["leader_id"])
                    for p in plain["topics"][0]["partitions"]}
        assert on_plain == {0: (E.none, 0), 1: (E.none, 1), 2: (E.none, 2),
                            3: (E.leader_not_available, -1), 4: (E.none, 1)}
        await node.close()

    run(main())


def test_a_broker_that_goes_away_leaves_offline_replicas(tmp_path: Path) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        replay(node, [UnregisterBrokerRecord(2)])
        answer = await call(node, ApiKey.METADATA, 12, metadata_body(12, "t"))
        assert [b["node_id"] for b in answer["brokers"]] == [0, 1]
        p2 = answer["topics"][0]["partitions"][2]
        assert (p2["error_code"], p2["leader_id"], p2["replica_nodes"], p2["isr_nodes"],
                p2["offline_replicas"]) == (E.leader_not_available, -1, [2, 1], [2, 1], [2])
        # The controller elects broker 1 (the broker learns it from a PartitionChangeRecord).
        replay(node, [PartitionChangeRecord(T_ID, 2, leader=1, isr=[1])])
        answer = await call(node, ApiKey.METADATA, 12, metadata_body(12, "t"))
        p2 = answer["topics"][0]["partitions"][2]
        assert (p2["error_code"], p2["leader_id"], p2["leader_epoch"], p2["isr_nodes"]) == (
            E.none, 1, 1, [1])
        await node.close()

    run(main())


def test_metadata_v0_lists_only_reachable_replicas(tmp_path: Path) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        replay(node, [PartitionChangeRecord(T_ID, 1, replicas=[1, 0], isr=[1, 0])])
        text = await call(node, ApiKey.METADATA, 0, metadata_body(0, "t"), listener="TEXT")
        p1 = text["topics"][0]["partitions"][1]
        assert (p1["error_code"], p1["leader_id"], p1["replica_nodes"], p1["isr_nodes"]) == (
            E.replica_not_available, 1, [1], [1])
        newer = await call(node, ApiKey.METADATA, 1, metadata_body(1, "t"), listener="TEXT")
        p1 = newer["topics"][0]["partitions"][1]
        assert (p1["error_code"], p1["replica_nodes"]) == (E.none, [1, 0])
        await node.close()

    run(main())


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_per_listener(tmp_path: Path, version: int) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        body: dict[str, Any] = {"include_cluster_authorized_operations": False,
                                "endpoint_type": 1, "include_fenced_brokers": False}
        plain = await call(node, ApiKey.DESCRIBE_CLUSTER, version, body)
        text = await call(node, ApiKey.DESCRIBE_CLUSTER, version, body, listener="TEXT")
        assert [b["broker_id"] for b in plain["brokers"]] == [0, 1, 2]
        assert [(b["broker_id"], b["host"]) for b in text["brokers"]] == [(1, "b1-text")]
        assert (plain["controller_id"], text["controller_id"]) == (2, 1)
        body["endpoint_type"] = 2
        controllers = await call(node, ApiKey.DESCRIBE_CLUSTER, version, body, listener="TEXT")
        if version >= 1:
            assert [(b["broker_id"], b["host"]) for b in controllers["brokers"]] == [
                (1, "b1-text")]
        await node.close()

    run(main())


# --- partition-level requests on a broker that does not lead -------------------------------

@pytest.mark.parametrize("version", [3, 9, 10])
def test_produce_to_a_partition_led_elsewhere(tmp_path: Path, version: int) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        now = node.time_ms()
        answers = {p: await call(node, ApiKey.PRODUCE, version, produce_body("t", p, now))
                   for p in (0, 1, 2, 3, 9)}
        codes = {p: produce_answer(a)["error_code"] for p, a in answers.items()}
        assert codes == {0: E.not_leader_or_follower, 1: E.none, 2: E.not_leader_or_follower,
                         3: E.not_leader_or_follower, 9: E.unknown_topic_or_partition}
        if version >= 10:
            # KIP-951: the leader the image names, and its endpoint on this listener.
            assert produce_answer(answers[2])["current_leader"] == {
                "leader_id": 2, "leader_epoch": 0}
            assert [(n["node_id"], n["host"]) for n in answers[2]["node_endpoints"]] == [
                (2, "b2-plaintext")]
            assert produce_answer(answers[3])["current_leader"] == {
                "leader_id": -1, "leader_epoch": 0}
            assert answers[3]["node_endpoints"] == []
            # On TEXT broker 0 has no endpoint: the hint names it, without an endpoint.
            text = await call(node, ApiKey.PRODUCE, version, produce_body("t", 0, now),
                              listener="TEXT")
            assert produce_answer(text)["current_leader"]["leader_id"] == 0
            assert text["node_endpoints"] == []
        await node.close()

    run(main())


@pytest.mark.parametrize("version", [11, 12, 16])
def test_fetch_from_a_partition_led_elsewhere(tmp_path: Path, version: int) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        codes = {}
        for p in (0, 1, 3, 7):
            answer = await call(node, ApiKey.FETCH, version, fetch_body(version, p))
            codes[p] = fetch_answer(answer)["error_code"]
        assert codes == {0: E.not_leader_or_follower, 1: E.none, 3: E.not_leader_or_follower,
                         7: E.unknown_topic_or_partition}
        # p2 is led by broker 2 and followed here: a consumer's fetch v11+ is served by the
        # follower (KIP-392, as Kafka), v4-10 goes to the leader.
        answer = await call(node, ApiKey.FETCH, version, fetch_body(version, 2))
        assert fetch_answer(answer)["error_code"] == E.none
        answer = await call(node, ApiKey.FETCH, 10, fetch_body(10, 2))
        partition = fetch_answer(answer)
        assert partition["error_code"] == E.not_leader_or_follower
        assert partition["records"] == b""  # empty, not null, as Kafka (librdkafka needs it)
        # p0 is led by broker 0, not a replica here.
        answer = await call(node, ApiKey.FETCH, version, fetch_body(version, 0))
        partition = fetch_answer(answer)
        assert partition["error_code"] == E.not_leader_or_follower
        assert partition["records"] == b""
        if version >= 12:
            assert partition["current_leader"] == {"leader_id": 0, "leader_epoch": 0}
        if version >= 16:
            assert [(n["node_id"], n["host"], n["port"]) for n in answer["node_endpoints"]] == [
                (0, "b0-plaintext", endpoints(0, ["PLAINTEXT"])[0].port)]
        await node.close()

    run(main())


def test_leader_epochs_are_still_checked(tmp_path: Path) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        replay(node, [PartitionChangeRecord(T_ID, 1, leader=0), PartitionChangeRecord(
            T_ID, 1, leader=1)])  # this broker leads p1 again, in epoch 2
        assert leader_of(node, 1) == (1, 2)
        results = {}
        for epoch in (1, 2, 3):
            answer = await call(node, ApiKey.FETCH, 16, fetch_body(16, 1, epoch=epoch))
            results[epoch] = fetch_answer(answer)["error_code"]
        assert results == {1: E.fenced_leader_epoch, 2: E.none, 3: E.unknown_leader_epoch}
        fenced = fetch_answer(await call(node, ApiKey.FETCH, 16, fetch_body(16, 1, epoch=1)))
        assert fenced["current_leader"] == {"leader_id": 1, "leader_epoch": 2}
        await node.close()

    run(main())


def test_list_offsets_and_delete_records_on_a_non_leader(tmp_path: Path) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        listed = {}
        deleted = {}
        for p in (1, 2, 3, 9):
            answer = await call(node, ApiKey.LIST_OFFSETS, 7, {
                "replica_id": -1, "isolation_level": 0, "topics": [{"name": "t", "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}]}]})
            listed[p] = answer["topics"][0]["partitions"][0]["error_code"]
            answer = await call(node, ApiKey.DELETE_RECORDS, 2, {"timeout": 1000, "topics": [
                {"name": "t", "partitions": [{"partition_index": p, "offset": 0}]}]})
            deleted[p] = answer["topics"][0]["partitions"][0]["error_code"]
        expected = {1: E.none, 2: E.not_leader_or_follower, 3: E.not_leader_or_follower,
                    9: E.unknown_topic_or_partition}
        assert listed == expected
        assert deleted == expected
        await node.close()

    run(main())


# --- leadership moving, replicas, fencing ---------------------------------------------------

def test_leadership_moves_away_and_back(tmp_path: Path) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        now = node.time_ms()
        # This broker leads p2 now, alone in its ISR.
        replay(node, [PartitionChangeRecord(T_ID, 2, leader=1, isr=[1])])
        assert produce_answer(await call(node, ApiKey.PRODUCE, 10,
                                         produce_body("t", 2, now)))["error_code"] == E.none
        log = node.replica_manager.get("t", 2).log
        assert log.latest_epoch() == 1
        # Broker 2 joins the ISR (without replication it never catches up): an acks=all
        # produce waits for it, and a consumer waits at the log end.
        replay(node, [PartitionChangeRecord(T_ID, 2, isr=[1, 2])])
        body = fetch_body(16, 2, max_wait_ms=60_000)
        body["topics"][0]["partitions"][0]["fetch_offset"] = 1
        waiting = asyncio.ensure_future(start(node, ApiKey.FETCH, 16, body).answer())
        acks_all = asyncio.ensure_future(
            start(node, ApiKey.PRODUCE, 10, produce_body("t", 2, now, acks=-1)).answer())
        await asyncio.sleep(0.05)
        assert not waiting.done() and not acks_all.done()
        replay(node, [PartitionChangeRecord(T_ID, 2, leader=2)])  # moves back to broker 2
        # Both answered at once, not at their timeouts, with where the leader is now.
        fetched = fetch_answer(await asyncio.wait_for(waiting, 10))
        assert (fetched["error_code"], fetched["current_leader"]) == (
            E.not_leader_or_follower, {"leader_id": 2, "leader_epoch": 2})
        produced = await asyncio.wait_for(acks_all, 10)
        assert produce_answer(produced)["error_code"] == E.not_leader_or_follower
        assert produce_answer(produced)["current_leader"] == {"leader_id": 2, "leader_epoch": 2}
        replay(node, [PartitionChangeRecord(T_ID, 2, leader=1)])
        assert produce_answer(await call(node, ApiKey.PRODUCE, 10,
                                         produce_body("t", 2, now)))["error_code"] == E.none
        assert log.latest_epoch() == 3
        await node.close()

    run(main())


def test_logs_only_for_replicas_here(tmp_path: Path) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        manager = node.replica_manager
        assert sorted(k[1] for k in manager.partitions) == [1, 2, 3, 4]  # not p0 (broker 0's)
        data = tmp_path / "data"
        assert (data / "t-2").is_dir() and not (data / "t-0").exists()
        replay(node, [PartitionChangeRecord(T_ID, 2, replicas=[2], isr=[2])])
        assert manager.get("t", 2) is None  # reassigned away: stopped, log deleted
        assert not (data / "t-2").exists()
        now = node.time_ms()
        assert produce_answer(await call(node, ApiKey.PRODUCE, 10, produce_body("t", 2, now))
                              )["error_code"] == E.not_leader_or_follower
        replay(node, [PartitionChangeRecord(T_ID, 0, replicas=[0, 1], isr=[0, 1])])
        assert manager.get("t", 0) is not None and not manager.get("t", 0).is_leader
        replay(node, [RemoveTopicRecord(T_ID)])
        assert manager.partitions == {}
        assert produce_answer(await call(node, ApiKey.PRODUCE, 10, produce_body("t", 1, now))
                              )["error_code"] == E.unknown_topic_or_partition
        await node.close()

    run(main())


@pytest.mark.parametrize("how", ["node", "image"])
def test_a_fenced_broker_leads_nothing(tmp_path: Path, how: str) -> None:
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        now = node.time_ms()

        def fence(fenced: bool) -> None:
            if how == "node":
                node.replica_manager.set_fenced(fenced)
            else:
                replay(node, [BrokerRegistrationChangeRecord(1, fenced)])

        fence(True)
        assert node.replica_manager.fenced
        assert produce_answer(await call(node, ApiKey.PRODUCE, 10, produce_body("t", 1, now))
                              )["error_code"] == E.not_leader_or_follower
        assert fetch_answer(await call(node, ApiKey.FETCH, 16, fetch_body(16, 1))
                            )["error_code"] == E.not_leader_or_follower
        fence(False)
        assert produce_answer(await call(node, ApiKey.PRODUCE, 10, produce_body("t", 1, now))
                              )["error_code"] == E.none
        # A leadership change that arrives while fenced is applied when the fence lifts.
        fence(True)
        replay(node, [PartitionChangeRecord(T_ID, 4, leader=0),
                      PartitionChangeRecord(T_ID, 4, leader=1)])
        assert not node.replica_manager.leads("t", 4)
        fence(False)
        assert node.replica_manager.leads("t", 4)
        assert node.replica_manager.get("t", 4).log.latest_epoch() == 2
        await node.close()

    run(main())


# --- groups across brokers ------------------------------------------------------------------

GROUP = "g"
OFFSETS_ID = uuid.UUID("00000000-0000-0000-0000-0000000000bb")
PARTITIONS = 5
G_PARTITION = partition_for(GROUP, PARTITIONS)


async def with_offsets_topic(tmp_path: Path, leader: int) -> FakeNode:
    node = await seed_cluster(tmp_path)
    replay(node, [TopicRecord(OFFSETS_TOPIC, OFFSETS_ID), *(
        PartitionRecord(OFFSETS_ID, p, [leader if p == G_PARTITION else 1, 2],
                        [leader if p == G_PARTITION else 1, 2],
                        leader if p == G_PARTITION else 1) for p in range(PARTITIONS))])
    await settle(node)
    return node


async def settle(node: FakeNode) -> None:
    coordinator = node.group_coordinator
    assert coordinator is not None
    for _ in range(500):  # the loads are tasks: let them start, then finish
        await asyncio.sleep(0)
        if not coordinator.loading and not any(
                t for t in coordinator.tasks if not t.done() and "load" in repr(t.get_coro())):
            break


def join_body() -> dict[str, Any]:
    return {"group_id": GROUP, "session_timeout": 10_000, "rebalance_timeout": 10_000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_subscription(["t"])}],
            "reason": None}


def commit_body(member: str, generation: int, offset: int) -> dict[str, Any]:
    return {"group_id": GROUP, "generation_id_or_member_epoch": generation, "member_id": member,
            "group_instance_id": None, "retention_time_ms": -1, "topics": [
                {"name": "t", "partitions": [{"partition_index": 1, "committed_offset": offset,
                                              "committed_leader_epoch": -1,
                                              "committed_metadata": ""}]}]}


def fetch_offsets_body() -> dict[str, Any]:
    return {"group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [1]}],
            "groups": [], "require_stable": False}


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_points_at_the_partition_leader_per_listener(
        tmp_path: Path, version: int) -> None:
    async def main() -> None:
        node = await with_offsets_topic(tmp_path, leader=2)
        body = ({"key": GROUP, "key_type": 0} if version < 4
                else {"key_type": 0, "coordinator_keys": [GROUP, "other"]})
        for listener, expected in (("PLAINTEXT", (E.none, 2, "b2-plaintext")),
                                   ("TEXT", (E.coordinator_not_available, -1, ""))):
            answer = await call(node, ApiKey.FIND_COORDINATOR, version,
                                {k: v for k, v in body.items()
                                 if version >= 1 or k != "key_type"}, listener=listener)
            found = answer if version < 4 else answer["coordinators"][0]
            assert (found["error_code"], found["node_id"], found["host"]) == expected
        # No leader: COORDINATOR_NOT_AVAILABLE until the controller elects one.
        replay(node, [PartitionChangeRecord(OFFSETS_ID, G_PARTITION, leader=-1)])
        answer = await call(node, ApiKey.FIND_COORDINATOR, version,
                            {k: v for k, v in body.items() if version >= 1 or k != "key_type"})
        found = answer if version < 4 else answer["coordinators"][0]
        assert found["error_code"] == E.coordinator_not_available
        await node.close()

    run(main())


def test_the_coordinator_follows_offsets_leadership(tmp_path: Path) -> None:
    async def main() -> None:
        node = await with_offsets_topic(tmp_path, leader=1)
        coordinator = node.group_coordinator
        assert coordinator is not None and G_PARTITION in coordinator.shards
        joined = await call(node, ApiKey.JOIN_GROUP, 7, join_body())
        assert joined["error_code"] == E.member_id_required
        member = joined["member_id"]
        body = {**join_body(), "member_id": member}
        # Kafka holds the first join of an empty group for group.initial.rebalance.delay.ms:
        # the request is parked when leadership moves.
        parked = asyncio.ensure_future(start(node, ApiKey.JOIN_GROUP, 7, body).answer())
        await asyncio.sleep(0.01)
        assert not parked.done()
        replay(node, [PartitionChangeRecord(OFFSETS_ID, G_PARTITION, leader=2)])
        answer = await asyncio.wait_for(parked, 10)
        assert answer["error_code"] == E.not_coordinator  # the client finds the new one
        assert G_PARTITION not in coordinator.shards
        for api, version, request in (
                (ApiKey.JOIN_GROUP, 7, join_body()),
                (ApiKey.OFFSET_FETCH, 7, fetch_offsets_body()),
                (ApiKey.OFFSET_COMMIT, 7, commit_body("", -1, 5))):
            answer = await call(node, api, version, request)
            code = (answer.get("error_code")
                    or answer["topics"][0]["partitions"][0]["error_code"])
            assert code == E.not_coordinator, api
        found = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        assert (found["node_id"], found["host"]) == (2, "b2-plaintext")
        # Back here: the shard is loaded again from the partition and serves the group.
        replay(node, [PartitionChangeRecord(OFFSETS_ID, G_PARTITION, leader=1)])
        await settle(node)
        assert G_PARTITION in coordinator.shards
        committed = await call(node, ApiKey.OFFSET_COMMIT, 7, commit_body("", -1, 5))
        assert committed["topics"][0]["partitions"][0]["error_code"] == E.none
        fetched = await call(node, ApiKey.OFFSET_FETCH, 7, fetch_offsets_body())
        assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 5
        # Fenced: every shard unloaded, FindCoordinator no longer names this broker.
        node.replica_manager.set_fenced(True)
        assert coordinator.shards == {}
        found = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        assert found["error_code"] == E.coordinator_not_available
        node.replica_manager.set_fenced(False)
        await settle(node)
        assert sorted(coordinator.shards) == list(range(PARTITIONS))
        fetched = await call(node, ApiKey.OFFSET_FETCH, 7, fetch_offsets_body())
        assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 5  # replayed
        await node.close()

    run(main())


def test_offsets_topic_replication_factor(tmp_path: Path) -> None:
    """A cluster (``zookeeper.connect`` set) refuses to create ``__consumer_offsets`` with
    fewer live brokers than ``offsets.topic.replication.factor``, as Kafka does; the single
    node caps the factor at its one broker."""
    async def main() -> None:
        node = await fake_node(tmp_path, node_id=1, brokers={1: ["PLAINTEXT"], 2: ["PLAINTEXT"]},
                               settings={"offsets.topic.replication.factor": 3})
        coordinator = node.group_coordinator
        assert coordinator is not None and coordinator.config.cap_offsets_replication
        coordinator.config = dataclasses.replace(coordinator.config,
                                                 cap_offsets_replication=False)
        refused = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        assert refused["error_code"] == E.coordinator_not_available
        assert "offsets.topic.replication.factor=3" in refused["error_message"]
        assert OFFSETS_TOPIC not in node.image.topics_by_name
        await node.controller.register_broker(3, endpoints(3, ["PLAINTEXT"]), None)
        found = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        assert found["error_code"] == E.none
        topic = node.image.topics_by_name[OFFSETS_TOPIC]
        assert {len(p.replicas) for p in topic.partitions.values()} == {3}
        await node.close()

    run(main())


def test_the_single_node_caps_the_offsets_replication_factor(tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path, settings={"offsets.topic.replication.factor": 3})
        found = await call(node, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        assert (found["error_code"], found["node_id"]) == (E.none, 1)
        topic = node.image.topics_by_name[OFFSETS_TOPIC]
        assert {tuple(p.replicas) for p in topic.partitions.values()} == {(1,)}
        await node.close()

    run(main())


def test_a_registration_replayed_for_this_broker_keeps_it_leading(tmp_path: Path) -> None:
    """Re-registration (a ZooKeeper session re-established) is a RegisterBrokerRecord for this
    broker: not fenced, it keeps leading what the image says."""
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        replay(node, [RegisterBrokerRecord(1, uuid.uuid4(), endpoints(1, SEED_001[1]))])
        assert node.replica_manager.leads("t", 1) and not node.replica_manager.fenced
        await node.close()

    run(main())


def _error_of(answer: dict[str, Any]) -> int:
    """The group's error wherever the API puts it."""
    for key in ("groups", "results"):
        if answer.get(key):
            return answer[key][0]["error_code"]
    if answer.get("error_code"):
        return answer["error_code"]
    return answer["topics"][0]["partitions"][0]["error_code"]


GROUP_REQUESTS: dict[str, tuple[int, int, dict[str, Any]]] = {
    "JoinGroup": (ApiKey.JOIN_GROUP, 7, join_body()),
    "SyncGroup": (ApiKey.SYNC_GROUP, 5, {
        "group_id": GROUP, "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range", "assignments": []}),
    "Heartbeat": (ApiKey.HEARTBEAT, 4, {"group_id": GROUP, "generation_id": 1,
                                        "member_id": "m", "group_instance_id": None}),
    "LeaveGroup": (ApiKey.LEAVE_GROUP, 5, {"group_id": GROUP, "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None}]}),
    "OffsetCommit": (ApiKey.OFFSET_COMMIT, 7, commit_body("", -1, 5)),
    "OffsetFetch": (ApiKey.OFFSET_FETCH, 7, fetch_offsets_body()),
    "OffsetDelete": (ApiKey.OFFSET_DELETE, 0, {"group_id": GROUP, "topics": [
        {"name": "t", "partitions": [{"partition_index": 1}]}]}),
    "DescribeGroups": (ApiKey.DESCRIBE_GROUPS, 5, {"groups": [GROUP],
                                                   "include_authorized_operations": False}),
    "DeleteGroups": (ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]}),
    "ConsumerGroupHeartbeat": (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
        "group_id": GROUP, "member_id": "", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 10_000, "subscribed_topic_names": ["t"],
        "server_assignor": None, "topic_partitions": []}),
    "ConsumerGroupDescribe": (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
        "group_ids": [GROUP], "include_authorized_operations": False}),
}


@pytest.mark.parametrize("api", sorted(GROUP_REQUESTS))
def test_group_requests_for_a_partition_led_elsewhere(tmp_path: Path, api: str) -> None:
    async def main() -> None:
        node = await with_offsets_topic(tmp_path, leader=2)
        key, version, body = GROUP_REQUESTS[api]
        assert _error_of(await call(node, key, version, body)) == E.not_coordinator
        await node.close()

    run(main())


def epochs_body(version: int, partition: int, leader_epoch: int,
                current_leader_epoch: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
        {"partition": partition, "current_leader_epoch": current_leader_epoch,
         "leader_epoch": leader_epoch}]}]}
    if version < 3:
        del body["replica_id"]
    return body


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(tmp_path: Path, version: int) -> None:
    """End offsets per epoch from the leader's epoch cache (KIP-320); partitions led
    elsewhere, by nobody, or unknown get Kafka's errors; epochs are checked."""
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        now = node.time_ms()

        async def ask(partition: int, epoch: int, current: int = -1) -> tuple[int, int, int]:
            answer = await call(node, ApiKey.OFFSET_FOR_LEADER_EPOCH, version,
                                epochs_body(version, partition, epoch, current))
            [p] = answer["topics"][0]["partitions"]
            return p["error_code"], p["leader_epoch"], p["end_offset"]

        for _ in range(3):  # epoch 0: offsets 0-2
            await call(node, ApiKey.PRODUCE, 10, produce_body("t", 1, now))
        replay(node, [PartitionChangeRecord(T_ID, 1, leader=0),
                      PartitionChangeRecord(T_ID, 1, leader=1)])  # this broker again, epoch 2
        await call(node, ApiKey.PRODUCE, 10, produce_body("t", 1, now))  # offset 3, epoch 2
        assert await ask(1, 0) == (E.none, 0, 3)
        assert await ask(1, 1) == (E.none, 0, 3)  # epoch 1 never wrote here: ends with 0's
        assert await ask(1, 2) == (E.none, 2, 4)  # the current epoch ends at the log end
        assert await ask(1, 5) == (E.none, -1, -1)
        assert await ask(1, 2, current=1) == (E.fenced_leader_epoch, -1, -1)
        assert await ask(1, 2, current=3) == (E.unknown_leader_epoch, -1, -1)
        assert await ask(0, 0) == (E.not_leader_or_follower, -1, -1)  # broker 0 leads
        assert await ask(3, 0) == (E.not_leader_or_follower, -1, -1)  # no leader
        assert await ask(9, 0) == (E.unknown_topic_or_partition, -1, -1)
        await node.close()

    run(main())


def test_a_topic_created_through_another_controller_is_being_created(tmp_path: Path) -> None:
    """Auto-creation on a broker that is not the controller: the controller (elsewhere)
    created the topic, but its records have not reached this broker's image yet. Kafka
    answers LEADER_NOT_AVAILABLE ("being created"), which clients retry; not
    UNKNOWN_TOPIC_OR_PARTITION."""
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        asked: list[list[str]] = []

        async def created_elsewhere(names: list[str]) -> dict[str, Any]:
            asked.append(names)
            return {}

        node.auto_create_topics = created_elsewhere  # type: ignore[method-assign]
        body = metadata_body(12, "fresh")
        body["allow_auto_topic_creation"] = True
        answer = await call(node, ApiKey.METADATA, 12, body)
        assert asked == [["fresh"]]
        assert answer["topics"][0]["error_code"] == E.leader_not_available
        await node.close()

    run(main())


def test_a_broker_creates_the_offsets_topic_through_the_controller(tmp_path: Path) -> None:
    """FindCoordinator on a broker that is not the controller forwards CreateTopics for
    ``__consumer_offsets`` to the controller: the controller lets a broker's request through,
    a client's is still refused."""
    async def main() -> None:
        node = await fake_node(tmp_path, node_id=2, brokers={1: ["PLAINTEXT"], 2: ["PLAINTEXT"]})
        body = {"topics": [{"name": OFFSETS_TOPIC, "num_partitions": 3,
                            "replication_factor": 1, "assignments": [], "configs": []}],
                "timeout": 30_000, "validate_only": False}
        client = await call(node, ApiKey.CREATE_TOPICS, 7, body)
        assert client["topics"][0]["error_code"] == E.invalid_request
        broker = await call(node, ApiKey.CREATE_TOPICS, 7, body,
                            client_id=forwarding_client_id(1))
        assert broker["topics"][0]["error_code"] == E.none
        assert len(node.image.topics_by_name[OFFSETS_TOPIC].partitions) == 3
        await node.close()

    run(main())


def test_describe_producers_answers_from_the_local_replica(tmp_path: Path) -> None:
    """Any replica hosted here answers from its own log (as Kafka's
    Partition.activeProducerState); partitions without a replica here or unknown get Kafka's
    errors."""
    async def main() -> None:
        node = await seed_cluster(tmp_path)
        now = node.time_ms()
        batch = build_batch([(None, b"x", [], now), (None, b"y", [], now + 1)],
                            producer_id=4000, producer_epoch=3, base_sequence=0)
        answer = await call(node, ApiKey.PRODUCE, 10, {
            "transactional_id": None, "acks": 1, "timeout": 30_000, "topic_data": [
                {"name": "t", "partition_data": [{"index": 1, "records": batch}]}]})
        assert produce_answer(answer)["error_code"] == E.none
        described = await call(node, ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": "t", "partition_indexes": [1, 2, 0, 9]}]})
        by_index = {p["partition_index"]: p for p in described["topics"][0]["partitions"]}
        assert by_index[1]["error_code"] == E.none
        assert [(p["producer_id"], p["producer_epoch"], p["last_sequence"],
                 p["last_timestamp"], p["current_txn_start_offset"])
                for p in by_index[1]["active_producers"]] == [(4000, 3, 1, now + 1, -1)]
        # p2: a replica here that broker 2 leads answers its own (empty) state.
        assert (by_index[2]["error_code"], by_index[2]["active_producers"]) == (E.none, [])
        assert by_index[0]["error_code"] == E.not_leader_or_follower
        assert by_index[9]["error_code"] == E.unknown_topic_or_partition
        # A partition asked for 5,000 times (the live fuzzer's amplifier: 80 KiB of request,
        # 400 MiB of broker) is answered 5,000 times from one answer object.
        started = start(node, ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": "t", "partition_indexes": [1] * 5000 + [9]}]})
        partitions = started.result.topics[0].partitions
        assert len(partitions) == 5001 and all(p is partitions[0] for p in partitions[:5000])
        repeated = (await started.answer())["topics"][0]["partitions"]
        assert repeated[:5000] == [by_index[1]] * 5000 and repeated[5000] == by_index[9]
        await node.close()

    run(main())
