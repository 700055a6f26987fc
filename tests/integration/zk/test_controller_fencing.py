"""A deposed controller changes nothing: its write is refused by the version of
/controller_epoch as a whole (NOT_CONTROLLER to the caller, not one znode written), whether
another broker was elected behind its back or its process was paused while its session
expired and another controller took over."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from kazoo.client import KazooClient, KazooState

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.records import PartitionRecord, TopicRecord
from moldau.broker.zk import layout
from moldau.broker.zk.layout import ControllerEpoch, ControllerRegistration
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.testing.zookeeper import expire_session

from .cluster_support import active, converged, start_node, started_nodes, wait_for


def test_a_write_after_the_epoch_moved_on_is_refused_whole(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2)) as (nodes, other):
            controller = await active(nodes)
            epoch = controller.image.controller_epoch
            # another session moves the epoch on (as a new controller's election does)
            _, stat = await other.get(layout.CONTROLLER_EPOCH)
            await other.set(layout.CONTROLLER_EPOCH, ControllerEpoch(epoch + 1).to_json(),
                            stat.version)
            channel = controller.plane.controller
            [result] = await channel.create_topics([TopicSpec(
                "fenced", 3, 1, configs={"retention.ms": "1000"})])
            assert result.error == ErrorCode.not_controller, result
            assert "another controller was elected" in (result.message or "")
            # nothing of the multi-op applied: no assignment, no config znode
            assert await other.exists(layout.topic_path("fenced")) is None
            assert await other.exists(layout.topic_config_path("fenced")) is None
            assert "fenced" not in controller.image.topics_by_name
            # the deposed broker gives up /controller; a proper election follows and the
            # new controller (any of the two) can write again
            await wait_for(lambda: all(n.image.controller_epoch > epoch + 1 for n in nodes),
                           "a new election")
            successor = await active(nodes)
            [result] = await successor.plane.controller.create_topics(
                [TopicSpec("after", 1, 1)])
            assert result.error == ErrorCode.none, result
            await converged(other, nodes)

    asyncio.run(scenario())


def test_a_paused_controller_that_resumes_after_being_replaced_writes_nothing(
        zookeeper_connect: str) -> None:
    """SIGSTOP in-process: the controller's event loop is blocked while its session expires
    and another broker is elected; when it resumes, the write it had been about to make still
    carries its old fence, and ZooKeeper refuses it by version."""

    async def scenario() -> None:
        node = await start_node(zookeeper_connect, 1)
        successor = KazooClient(hosts=zookeeper_connect)
        try:
            await active([node])
            store = node.plane.store
            fence = store.fence
            assert fence is not None
            session = node.zk.client.client_id

            # Block this loop (the "paused process") while the world moves on: the paused
            # broker's session is expired the standard way (a second client joins it and
            # closes it), then broker 2 wins the election (Kafka's multi-op).
            expire_session(zookeeper_connect, session)
            successor.start(30)
            deadline = time.monotonic() + 30
            while successor.exists(layout.CONTROLLER) is not None:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            _, stat = successor.get(layout.CONTROLLER_EPOCH)
            txn = successor.transaction()
            txn.create(layout.CONTROLLER, ControllerRegistration(2).to_json(), ephemeral=True)
            txn.set_data(layout.CONTROLLER_EPOCH, ControllerEpoch(fence[0] + 1).to_json(),
                         stat.version)
            assert txn.commit()[1].version == fence[1] + 1
            # kazoo (in its own thread) has opened a new session meanwhile
            while node.zk.client.state != KazooState.CONNECTED or \
                    (node.zk.client.client_id or session)[0] == session[0]:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert store.fence == fence  # the paused broker has not noticed anything
            topic_id = uuid.uuid4()
            records = [TopicRecord("late", topic_id), PartitionRecord(topic_id, 0, [1], [1], 1)]
            with pytest.raises(KafkaError) as info:
                await store.append(records)
            assert info.value.code == ErrorCode.not_controller
            assert "another controller was elected" in info.value.message
            assert await node.zk.exists(layout.topic_path("late")) is None
            data, _ = await node.zk.get(layout.CONTROLLER)
            assert ControllerRegistration.from_json(data).broker_id == 2
            assert not node.plane.is_active_controller
        finally:
            await node.close()
            successor.stop()
            successor.close()

    asyncio.run(scenario())
