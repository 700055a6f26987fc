"""ISR changes and unclean leader election on a real ZooKeeper, with the metadata planes of
three in-process brokers:

- an AlterPartition change committed by the active controller sets the partition's state
  znode conditionally on its version (the partition epoch), and every broker's image follows;
  a change naming a stale partition epoch is refused and leaves the znode alone;
- a partition of replication factor 2 whose only ISR member dies stays offline (leader -1)
  while ``unclean.leader.election.enable`` is false; setting it to true on the topic
  (a dynamic config change) elects the other replica, which forms the ISR alone.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.isr_change import IsrChange
from moldau.broker.metadata.records import TOPIC_RESOURCE
from moldau.broker.zk import layout
from moldau.broker.zk.layout import PartitionState
from moldau.protocol.errors import ErrorCode

from .cluster_support import Node, active, converged, started_nodes, wait_for

UNCLEAN = "unclean.leader.election.enable"


def state_of(node: Node, topic: str, partition: int = 0):  # type: ignore[no-untyped-def]
    return node.image.topics_by_name[topic].partitions[partition]


def test_an_isr_change_is_written_conditionally_and_seen_by_every_broker(
        zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2, 3)) as (nodes, reader):
            controller = await active(nodes)
            channel = controller.plane.channel
            assert channel is not None
            [created] = await channel.create_topics([TopicSpec(
                "isr", assignments={0: [2, 3, 1]})])
            assert created.error == ErrorCode.none, created.message
            await converged(reader, nodes)
            topic_id = controller.image.topics_by_name["isr"].topic_id
            path = layout.partition_state_path("isr", 0)
            _data, stat = await reader.get(path)
            assert stat.version == 0

            # broker 2 leads: it drops broker 1 from the ISR
            [result] = await channel.alter_partition(2, [IsrChange(topic_id, 0, 0, 0, (2, 3))])
            assert (result.error, result.isr, result.partition_epoch, result.leader,
                    result.leader_epoch) == (ErrorCode.none, (2, 3), 1, 2, 0)
            data, stat = await reader.get(path)
            assert stat.version == 1
            znode = PartitionState.from_json(data, "isr", 0)
            assert (znode.leader, znode.leader_epoch, list(znode.isr)) == (2, 0, [2, 3])
            await converged(reader, nodes)
            for node in nodes:
                state = state_of(node, "isr")
                assert (state.isr, state.partition_epoch) == ([2, 3], 1), node.broker_id

            # the same change again, from the stale partition epoch: refused, nothing written
            [stale] = await channel.alter_partition(2, [IsrChange(topic_id, 0, 0, 0, (2,))])
            assert stale.error == ErrorCode.invalid_update_version
            _data, stat = await reader.get(path)
            assert stat.version == 1
            # a broker that does not lead it: refused
            [wrong] = await channel.alter_partition(3, [IsrChange(topic_id, 0, 0, 1, (2,))])
            assert wrong.error == ErrorCode.not_leader_or_follower
            # broker 1 joins again
            [back] = await channel.alter_partition(2, [IsrChange(topic_id, 0, 0, 1, (2, 3, 1))])
            assert (back.error, back.isr, back.partition_epoch) == (ErrorCode.none, (2, 3, 1), 2)
            await converged(reader, nodes)
            assert all(state_of(n, "isr").isr == [2, 3, 1] for n in nodes)

    asyncio.run(scenario())


def test_unclean_election_only_once_enabled_dynamically(
        zookeeper_connect: str, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2, 3)) as (nodes, reader):
            for node in nodes:
                image = node.image
                node.plane.unclean_enabled = (
                    lambda topic, image=image: image.topic_configs.get(topic, {}).get(
                        UNCLEAN) == "true")
            controller = await active(nodes)
            # The partition's replicas are the two brokers that are not the controller, so
            # the controller stays while its ISR member dies.
            leader, other = [n.broker_id for n in nodes if n is not controller]
            channel = controller.plane.channel
            assert channel is not None
            [created] = await channel.create_topics([TopicSpec(
                "dirty", assignments={0: [leader, other]})])
            assert created.error == ErrorCode.none, created.message
            topic_id = controller.image.topics_by_name["dirty"].topic_id
            # the follower fell behind: the leader is the ISR alone
            [shrunk] = await channel.alter_partition(
                leader, [IsrChange(topic_id, 0, 0, 0, (leader,))])
            assert shrunk.error == ErrorCode.none
            dead = next(n for n in nodes if n.broker_id == leader)
            await dead.close()
            nodes.remove(dead)
            await wait_for(lambda: state_of(controller, "dirty").leader == -1,
                           "the partition offline")
            await asyncio.sleep(1.0)  # nothing elects it meanwhile
            state = state_of(controller, "dirty")
            assert (state.leader, state.isr) == (-1, [leader])
            await converged(reader, nodes)

            with caplog.at_level(logging.WARNING, "moldau.broker.zk.cluster_controller"):
                assert await channel.alter_configs(TOPIC_RESOURCE, "dirty",
                                                   {UNCLEAN: "true"}) == (ErrorCode.none, None)
                await wait_for(lambda: state_of(controller, "dirty").leader == other,
                               "the out-of-sync replica elected")
            state = state_of(controller, "dirty")
            assert (state.leader, state.isr, state.leader_epoch) == (other, [other], 2)
            await converged(reader, nodes)
            data, _stat = await reader.get(layout.partition_state_path("dirty", 0))
            znode = PartitionState.from_json(data, "dirty", 0)
            assert (znode.leader, list(znode.isr)) == (other, [other])
            warnings = [r.getMessage() for r in caplog.records if "Unclean" in r.getMessage()]
            assert warnings and "dirty-0" in warnings[0] and "lost" in warnings[0]

    asyncio.run(scenario())
