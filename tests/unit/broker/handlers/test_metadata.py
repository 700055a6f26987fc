"""Metadata, DescribeCluster and FindCoordinator against a fake node in a three-broker
cluster: every broker with its endpoint on the request's listener (brokers without it left
out), the active controller as the image names it, topic auto-creation, and the coordinator's
endpoint on the request's listener."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.group.partitioning import OFFSETS_TOPIC, partition_for
from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import MetadataRecord, TopicRecord
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.storage.errors import KafkaStorageError

from .fakes import FakeNode, call, endpoints, fake_node, start

# Broker 3 has no EXTERNAL listener; broker 2 is the active controller.
CLUSTER = {1: ["PLAINTEXT", "EXTERNAL"], 2: ["PLAINTEXT", "EXTERNAL"], 3: ["PLAINTEXT"]}


async def cluster(tmp_path: Path, **settings: Any) -> FakeNode:
    node = await fake_node(tmp_path, brokers=CLUSTER, controller_id=2, settings=settings)
    # Partition 0 led by broker 3 (no EXTERNAL endpoint), partition 1 by this node.
    [made] = await node.controller.create_topics([TopicSpec("t", assignments={0: [3], 1: [1]})])
    assert made.error == E.none
    return node


def metadata_request(*topics: str, allow: bool = True) -> dict[str, Any]:
    return {"topics": [{"name": t} for t in topics] or None,
            "allow_auto_topic_creation": allow, "include_topic_authorized_operations": False,
            "include_cluster_authorized_operations": False}


def run(test: Any) -> None:
    asyncio.run(test)


def test_brokers_and_controller_per_listener(tmp_path: Path) -> None:
    async def main() -> None:
        node = await cluster(tmp_path)
        plain = await call(node, ApiKey.METADATA, 12, metadata_request())
        assert [(b["node_id"], b["host"], b["port"]) for b in plain["brokers"]] == [
            (i, e.host, e.port) for i in (1, 2, 3) for e in endpoints(i, CLUSTER[i])[:1]]
        assert plain["controller_id"] == 2  # the image's, not this node's id
        assert plain["cluster_id"] == node.cluster_id
        external = await call(node, ApiKey.METADATA, 12, metadata_request(),
                              listener="EXTERNAL")
        assert [(b["node_id"], b["host"]) for b in external["brokers"]] == [
            (1, "b1-external"), (2, "b2-external")]
        [topic] = external["topics"]
        errors = {p["partition_index"]: (p["error_code"], p["leader_id"])
                  for p in topic["partitions"]}
        assert errors == {0: (E.listener_not_found, -1), 1: (E.none, 1)}
        old = await call(node, ApiKey.METADATA, 5, metadata_request("t"), listener="EXTERNAL")
        assert old["topics"][0]["partitions"][0]["error_code"] == E.leader_not_available
        await node.close()

    run(main())


def test_unknown_topics_are_created_when_allowed(tmp_path: Path) -> None:
    async def main() -> None:
        node = await cluster(tmp_path, **{"num.partitions": 3})
        refused = await call(node, ApiKey.METADATA, 12, metadata_request("new", allow=False))
        assert refused["topics"][0]["error_code"] == E.unknown_topic_or_partition
        assert "new" not in node.image.topics_by_name
        answer = await call(node, ApiKey.METADATA, 12, metadata_request("new", "bad/name"))
        created, bad = answer["topics"]
        assert (created["name"], created["error_code"], len(created["partitions"])) == (
            "new", E.none, 3)
        assert created["topic_id"] == node.image.topics_by_name["new"].topic_id
        assert (bad["name"], bad["error_code"]) == ("bad/name", E.invalid_topic_exception)
        await node.close()

    run(main())


def test_auto_creation_can_be_disabled(tmp_path: Path) -> None:
    async def main() -> None:
        node = await cluster(tmp_path, **{"auto.create.topics.enable": "false"})
        answer = await call(node, ApiKey.METADATA, 3, metadata_request("new"))
        assert answer["topics"][0]["error_code"] == E.unknown_topic_or_partition
        assert "new" not in node.image.topics_by_name
        await node.close()

    run(main())


def test_a_topic_whose_logs_cannot_be_created_is_not_ready_yet(tmp_path: Path) -> None:
    async def main() -> None:
        node = await cluster(tmp_path)

        def no_descriptors(_image: MetadataImage, records: Sequence[MetadataRecord]) -> Any:
            if any(isinstance(r, TopicRecord) for r in records):
                raise KafkaStorageError("Cannot create the log of new-0: Too many open files")
            return lambda: None

        node.controller.preparers.insert(0, no_descriptors)
        answer = await call(node, ApiKey.METADATA, 12, metadata_request("new"))
        assert answer["topics"][0]["error_code"] == E.leader_not_available  # clients retry
        assert "new" not in node.image.topics_by_name
        await node.close()

    run(main())


def test_only_a_request_that_creates_topics_waits(tmp_path: Path) -> None:
    async def main() -> None:
        node = await cluster(tmp_path)
        known = start(node, ApiKey.METADATA, 12, metadata_request("t"))
        assert not known.waits
        creating = start(node, ApiKey.METADATA, 12, metadata_request("x"))
        assert creating.waits
        await creating.answer()
        assert "x" in node.image.topics_by_name
        await node.close()

    run(main())


@pytest.mark.parametrize("listener", ["PLAINTEXT", "EXTERNAL"])
def test_describe_cluster_lists_the_controller_the_image_names(tmp_path: Path,
                                                               listener: str) -> None:
    async def main() -> None:
        node = await cluster(tmp_path)
        request = {"include_cluster_authorized_operations": False, "endpoint_type": 2}
        answer = await call(node, ApiKey.DESCRIBE_CLUSTER, 1, request, listener=listener)
        assert answer["controller_id"] == 2
        [(broker_id, host)] = [(b["broker_id"], b["host"]) for b in answer["brokers"]]
        assert (broker_id, host) == (2, f"b2-{listener.lower()}")
        request["endpoint_type"] = 1
        brokers = await call(node, ApiKey.DESCRIBE_CLUSTER, 1, request, listener=listener)
        assert [b["broker_id"] for b in brokers["brokers"]] == (
            [1, 2, 3] if listener == "PLAINTEXT" else [1, 2])
        await node.close()

    run(main())


@pytest.mark.parametrize("version", [3, 4])
def test_find_coordinator_creates_the_offsets_topic_and_names_its_leader(
        tmp_path: Path, version: int) -> None:
    async def main() -> None:
        node = await cluster(tmp_path)
        assert OFFSETS_TOPIC not in node.image.topics_by_name
        body = ({"key": "g", "key_type": 0} if version < 4
                else {"key_type": 0, "coordinator_keys": ["g"]})
        answer = await call(node, ApiKey.FIND_COORDINATOR, version, body)
        found = answer if version < 4 else answer["coordinators"][0]
        topic = node.image.topics_by_name[OFFSETS_TOPIC]
        assert len(topic.partitions) == 5  # offsets.topic.num.partitions of the test config
        leader = topic.partitions[partition_for("g", 5)].leader
        assert (found["error_code"], found["node_id"], found["host"]) == (
            E.none, leader, f"b{leader}-plaintext")
        await node.close()

    run(main())


def test_find_coordinator_answers_on_the_request_listener_only(tmp_path: Path) -> None:
    async def main() -> None:
        node = await cluster(tmp_path)
        # Every __consumer_offsets partition led by broker 3, which has no EXTERNAL listener.
        [made] = await node.controller.create_topics(
            [TopicSpec(OFFSETS_TOPIC, assignments={p: [3] for p in range(5)})])
        assert made.error == E.none
        body = {"key": "g", "key_type": 0}
        plain = await call(node, ApiKey.FIND_COORDINATOR, 3, body)
        assert (plain["error_code"], plain["node_id"], plain["host"], plain["port"]) == (
            E.none, 3, "b3-plaintext", endpoints(3, ["PLAINTEXT"])[0].port)
        external = await call(node, ApiKey.FIND_COORDINATOR, 3, body, listener="EXTERNAL")
        assert external["error_code"] == E.coordinator_not_available
        assert "no endpoint on listener EXTERNAL" in external["error_message"]
        await node.close()

    run(main())
