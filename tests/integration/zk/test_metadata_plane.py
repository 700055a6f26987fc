"""The metadata plane of cluster mode on a real ZooKeeper: the controller's records written
as Kafka's znodes in one fenced multi-op, every broker's image following ZooKeeper through
watches, the active controller's own writes not replayed twice, and the znodes in Kafka's
formats."""

from __future__ import annotations

import asyncio
from collections import Counter

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.records import BROKER_RESOURCE, TOPIC_RESOURCE
from moldau.broker.zk import layout
from moldau.broker.zk.admin_layout import (
    ConfigChangeNotification,
    EntityConfig,
    ProducerIdBlock,
)
from moldau.broker.zk.layout import PartitionState, TopicAssignment
from moldau.protocol.errors import ErrorCode

from .cluster_support import Node, active, converged, start_node, started_nodes, wait_for


def test_controller_writes_kafkas_layout_and_every_image_follows(zookeeper_connect: str
                                                                 ) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2, 3)) as (nodes, reader):
            controller = await active(nodes)
            await converged(reader, nodes)
            for node in nodes:
                assert node.image.controller_id == controller.broker_id
                assert sorted(node.image.brokers) == [1, 2, 3]
            epoch = controller.image.controller_epoch
            replayed = controller.plane.sync.replayed
            channel = controller.plane.channel
            assert channel is not None

            # a 12-partition topic: leaders spread 4/4/4, Kafka's znodes, every image equal
            [result] = await channel.create_topics([TopicSpec(
                "orders", 12, 1, configs={"retention.ms": "86400000"})])
            assert result.error == ErrorCode.none, result.message
            topic = controller.image.topics_by_name["orders"]
            assert Counter(p.leader for p in topic.partitions.values()) == {1: 4, 2: 4, 3: 4}
            data, _ = await reader.get(layout.topic_path("orders"))
            assignment = TopicAssignment.from_json(data, "orders")
            assert assignment.topic_id == topic.topic_id
            assert {p: list(a.replicas) for p, a in assignment.partitions.items()} == {
                p: s.replicas for p, s in topic.partitions.items()}
            data, stat = await reader.get(layout.partition_state_path("orders", 5))
            assert PartitionState.from_json(data, "orders", 5) == PartitionState(
                topic.partitions[5].leader, 0, (topic.partitions[5].leader,), epoch)
            assert stat.version == 0
            data, _ = await reader.get(layout.topic_config_path("orders"))
            assert EntityConfig.from_json(data).config == {"retention.ms": "86400000"}
            assert await reader.get_children(layout.CONFIG_CHANGES) == []  # as Kafka: none
            await converged(reader, nodes)

            # more partitions, a topic config change and a cluster-wide broker default
            assert await channel.create_partitions("orders", 14, None) == (ErrorCode.none, None)
            assert await channel.alter_configs(TOPIC_RESOURCE, "orders", {
                "retention.ms": None, "cleanup.policy": "compact"}) == (ErrorCode.none, None)
            outcome = await channel.alter_configs(BROKER_RESOURCE, "",
                                                  {"log.retention.ms": "3600000"})
            assert outcome == (ErrorCode.none, None)
            data, _ = await reader.get(layout.broker_config_path(None))
            assert EntityConfig.from_json(data).config == {"log.retention.ms": "3600000"}
            changes = sorted(await reader.get_children(layout.CONFIG_CHANGES))
            paths = [ConfigChangeNotification.from_json(
                (await reader.get(f"{layout.CONFIG_CHANGES}/{c}"))[0], c).entity_path
                for c in changes]
            assert paths == ["topics/orders", "brokers/<default>"]
            await converged(reader, nodes)
            for node in nodes:
                assert len(node.image.topics_by_name["orders"].partitions) == 14
                assert node.image.topic_configs["orders"] == {"cleanup.policy": "compact"}
                assert node.image.broker_configs[""] == {"log.retention.ms": "3600000"}

            # producer id blocks, claimed by a conditional write of /latest_producer_id_block
            assert await channel.allocate_producer_ids(2) == range(0, 1000)
            assert await channel.allocate_producer_ids(3) == range(1000, 2000)
            data, _ = await reader.get(layout.LATEST_PRODUCER_ID_BLOCK)
            assert ProducerIdBlock.from_json(data) == ProducerIdBlock(3, 1000, 1999)

            # a replication factor above the live brokers: Kafka's error and text
            [refused] = await channel.create_topics([TopicSpec("wide", 1, 4)])
            assert refused.error == ErrorCode.invalid_replication_factor
            assert refused.message == "Replication factor: 4 larger than available brokers: 3."

            # deletion removes the subtree, the config and the request marker
            await reader.create(layout.delete_topic_path("orders"))
            await wait_for(lambda: all("orders" not in n.image.topics_by_name for n in nodes),
                           "the topic deleted through /admin/delete_topics")
            assert await reader.exists(layout.topic_path("orders")) is None
            assert await reader.exists(layout.topic_config_path("orders")) is None
            await wait_for(lambda: True, "")
            assert await reader.exists(layout.delete_topic_path("orders")) is None
            await converged(reader, nodes)

            # the controller replayed its own writes once: ZooKeeper's echo was nothing new
            await controller.plane.sync.refresh()
            assert controller.plane.sync.replayed == replayed
            for node in nodes:
                assert node.image.next_producer_id == 2000

    asyncio.run(scenario())


def test_a_topic_written_by_an_old_tool_is_completed_by_the_controller(
        zookeeper_connect: str) -> None:
    """kafka-topics.sh --zookeeper (Kafka < 3) writes only the assignment, without topic id;
    the controller gives it an id and partition states, and every broker sees the topic."""

    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2)) as (nodes, tool):
            await active(nodes)
            await tool.create(layout.topic_config_path("legacy"),
                              EntityConfig({"retention.ms": "7"}).to_json())
            await tool.create(layout.topic_path("legacy"),
                              b'{"version":1,"partitions":{"0":[2,1],"1":[1,2]}}')
            await wait_for(lambda: all("legacy" in n.image.topics_by_name for n in nodes),
                           "the legacy topic in every image")
            await converged(tool, nodes)
            data, _ = await tool.get(layout.topic_path("legacy"))
            assignment = TopicAssignment.from_json(data, "legacy")
            for node in nodes:
                topic = node.image.topics_by_name["legacy"]
                assert topic.topic_id == assignment.topic_id
                assert {p: (s.leader, s.isr) for p, s in topic.partitions.items()} == {
                    0: (2, [2, 1]), 1: (1, [1, 2])}
                assert node.image.topic_configs["legacy"] == {"retention.ms": "7"}

    asyncio.run(scenario())


def test_replicas_spread_over_racks_from_the_registrations(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        nodes: list[Node] = []
        try:
            racks = {1: "a", 2: "a", 3: "b", 4: "b"}
            nodes = [await start_node(zookeeper_connect, b, rack=r) for b, r in racks.items()]
            controller = await active(nodes)
            await wait_for(lambda: len(controller.image.brokers) == 4, "four brokers")
            assert {b.broker_id: b.rack for b in controller.image.brokers.values()} == racks
            [result] = await controller.plane.controller.create_topics(
                [TopicSpec("racked", 8, 2)])
            assert result.error == ErrorCode.none, result
            partitions = controller.image.topics_by_name["racked"].partitions.values()
            for state in partitions:
                assert {racks[b] for b in state.replicas} == {"a", "b"}
            assert Counter(s.leader for s in partitions) == {1: 2, 2: 2, 3: 2, 4: 2}
        finally:
            for node in nodes:
                await node.close()

    asyncio.run(scenario())


def test_znodes_that_are_not_kafkas_do_not_stop_the_brokers_following(
        zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2)) as (nodes, tool):
            controller = await active(nodes)
            channel = controller.plane.controller
            [result] = await channel.create_topics([TopicSpec("kept", 2, 1)])
            assert result.error == ErrorCode.none
            await wait_for(lambda: all("kept" in n.image.topics_by_name for n in nodes), "kept")
            before = {n.broker_id: vars(n.image.topics_by_name["kept"].partitions[0]).copy()
                      for n in nodes}
            await tool.set(layout.partition_state_path("kept", 0), b"\xff not json")
            await tool.create(f"{layout.BROKER_IDS}/not-a-number", b"{}")
            await tool.set(layout.topic_config_path("kept"), b"[1, 2]")
            [result] = await channel.create_topics([TopicSpec("later", 1, 1)])
            assert result.error == ErrorCode.none
            await wait_for(lambda: all("later" in n.image.topics_by_name for n in nodes),
                           "the brokers still following")
            for node in nodes:
                assert vars(node.image.topics_by_name["kept"].partitions[0]) == \
                    before[node.broker_id]
                assert node.plane.sync._task is not None and not node.plane.sync._task.done()

    asyncio.run(scenario())
