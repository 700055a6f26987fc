"""The controller's reactions on a real ZooKeeper: a broker's registration disappears (its
partitions get new leaders from the ISR, or go offline with replication factor 1) and comes
back (offline partitions get it as leader again), the controller dies (another is elected and
topic creation works again), controlled shutdown moves leadership away, and a broker whose
session expired re-reads everything."""

from __future__ import annotations

import asyncio

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.zk import layout
from moldau.broker.zk.aio import AsyncZooKeeper
from moldau.broker.zk.cluster_controller import ZkMetadataPlane
from moldau.protocol.errors import ErrorCode
from moldau.testing.zookeeper import expire_session

from .cluster_support import (
    active,
    bootstrap,
    converged,
    register,
    start_node,
    started_nodes,
    wait_for,
)


def _partitions(image: MetadataImage, topic: str) -> dict[int, tuple[int, list[int], int]]:
    """partition -> (leader, isr, leader epoch)"""
    return {p: (s.leader, list(s.isr), s.leader_epoch)
            for p, s in image.topics_by_name[topic].partitions.items()}


def test_leaders_follow_brokers_leaving_and_returning(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2, 3)) as (nodes, reader):
            controller = await active(nodes)
            channel = controller.plane.controller
            results = await channel.create_topics([TopicSpec("single", 6, 1),
                                                   TopicSpec("triple", 3, 3)])
            assert [r.error for r in results] == [ErrorCode.none] * 2
            victim = next(n for n in nodes if n is not controller)
            vid = victim.broker_id
            single = _partitions(controller.image, "single")
            triple = _partitions(controller.image, "triple")
            assert all(isr == sorted(isr) or len(isr) == 3 for _, isr, _ in triple.values())

            await victim.zk.stop()  # the broker dies: its registration goes with the session
            nodes.remove(victim)
            await wait_for(lambda: vid not in controller.image.brokers, "the registration gone")
            await converged(reader, nodes)
            after = _partitions(controller.image, "single")
            for p, (leader, isr, epoch) in single.items():
                if leader == vid:  # offline; the ISR keeps its last member, the epoch moved
                    assert after[p] == (-1, [vid], epoch + 1)
                else:
                    assert after[p] == (leader, isr, epoch)
            after = _partitions(controller.image, "triple")
            for p, (leader, isr, epoch) in triple.items():
                new_leader, new_isr, new_epoch = after[p]
                assert new_isr == [b for b in isr if b != vid]
                if leader == vid:
                    assert new_leader == new_isr[0] and new_epoch == epoch + 1
                else:
                    assert (new_leader, new_epoch) == (leader, epoch)
            # the znode says the same (what every broker's sync read)
            offline = next(p for p, (leader, _, _) in single.items() if leader == vid)
            data, stat = await reader.get(layout.partition_state_path("single", offline))
            state = layout.PartitionState.from_json(data, "single", offline)
            assert (state.leader, state.isr, stat.version) == (-1, (vid,), 1)

            await victim.plane.stop()
            victim = await start_node(zookeeper_connect, vid)  # the broker comes back
            nodes.append(victim)
            await converged(reader, nodes)
            await wait_for(lambda: all(
                leader == vid for p, (leader, _, _) in _partitions(controller.image,
                                                                    "single").items()
                if single[p][0] == vid), "the offline partitions led by the returning broker")
            await converged(reader, nodes)
            for p, (leader, isr, epoch) in _partitions(victim.image, "single").items():
                if single[p][0] == vid:
                    assert (leader, isr, epoch) == (vid, [vid], single[p][2] + 2)

    asyncio.run(scenario())


def test_a_new_controller_is_elected_when_the_controller_dies(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2, 3)) as (nodes, reader):
            old = await active(nodes)
            [result] = await old.plane.controller.create_topics([TopicSpec("before", 3, 1)])
            assert result.error == ErrorCode.none
            leaders = _partitions(old.image, "before")
            epoch = old.image.controller_epoch
            await old.zk.stop()  # kill: the session ends, /controller and /brokers/ids/<id> go
            nodes.remove(old)
            new = await active(nodes)
            assert new.image.controller_epoch == epoch + 1
            [result] = await new.plane.controller.create_topics([TopicSpec("after", 4, 1)])
            assert result.error == ErrorCode.none, result
            await converged(reader, nodes)
            for node in nodes:
                assert node.image.controller_id == new.broker_id
                assert "after" in node.image.topics_by_name
                # the dead broker's partitions went offline when the new controller took over
                for p, (leader, _, _) in _partitions(node.image, "before").items():
                    assert leader == (-1 if leaders[p][0] == old.broker_id else leaders[p][0])
            await old.plane.stop()

    asyncio.run(scenario())


def test_controlled_shutdown_moves_leadership_off(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2, 3)) as (nodes, reader):
            controller = await active(nodes)
            leaving = next(n for n in nodes if n is not controller).broker_id
            results = await controller.plane.controller.create_topics([
                TopicSpec("single", 3, 1), TopicSpec("triple", 6, 3)])
            assert [r.error for r in results] == [ErrorCode.none] * 2
            single = _partitions(controller.image, "single")
            remaining = await controller.plane.move_leadership_off(leaving)
            assert remaining == []  # replication factor 1 partitions do not count (Kafka)
            for leader, isr, _ in _partitions(controller.image, "triple").values():
                assert leader != leaving and leaving not in isr
            assert _partitions(controller.image, "single") == single  # nowhere to go
            await converged(reader, nodes)
            # a follower cannot do it
            follower = next(n for n in nodes if n is not controller)
            try:
                await follower.plane.move_leadership_off(leaving)
            except Exception as exc:  # KafkaError NOT_CONTROLLER
                assert getattr(exc, "code", None) == ErrorCode.not_controller
            else:
                raise AssertionError("a broker that is not the controller moved leadership")

    asyncio.run(scenario())


def test_a_broker_whose_session_expired_reads_everything_again(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2)) as (nodes, reader):
            controller = await active(nodes)
            other = next(n for n in nodes if n is not controller)
            session = other.zk.client.client_id
            await asyncio.to_thread(expire_session, zookeeper_connect, session)
            await wait_for(lambda: other.broker_id not in controller.image.brokers,
                           "the expired broker's registration gone")
            # changes made while the broker had no session and no watches
            [result] = await controller.plane.controller.create_topics(
                [TopicSpec("while-away", 2, 1)])
            assert result.error == ErrorCode.none, result
            await wait_for(lambda: other.zk.session_id not in (None, session[0])
                           and other.zk.state == "CONNECTED", "a new session")
            await register(other.zk, other.broker_id)  # the broker's own job, after expiry
            await converged(reader, nodes)
            assert "while-away" in other.image.topics_by_name
            # and its watches work again in the new session
            [result] = await controller.plane.controller.create_topics(
                [TopicSpec("later", 1, 1)])
            assert result.error == ErrorCode.none, result
            await wait_for(lambda: "later" in other.image.topics_by_name, "the new topic")
            await converged(reader, nodes)

    asyncio.run(scenario())


def test_only_a_registered_broker_competes_and_deleting_controller_reelects(
        zookeeper_connect: str) -> None:
    async def scenario() -> None:
        zk = AsyncZooKeeper(zookeeper_connect, session_timeout_ms=4000)
        await zk.start(30)
        plane = None
        try:
            await bootstrap(zk)
            plane = ZkMetadataPlane.build(zk, 7, MetadataImage(), default_partitions=lambda: 1,
                                          default_replication_factor=lambda: 1)
            await plane.start()
            await asyncio.sleep(1.0)
            assert not plane.is_active_controller
            assert await zk.exists(layout.CONTROLLER) is None
            await register(zk, 7)
            await wait_for(lambda: plane.is_active_controller, "the registered broker elected")
            await wait_for(lambda: plane.image.controller_id == 7, "the image names it")
            epoch = plane.image.controller_epoch
            await zk.delete(layout.CONTROLLER)  # an operator forces a re-election
            await wait_for(lambda: plane.image.controller_epoch == epoch + 1, "a re-election")
            assert plane.is_active_controller
        finally:
            if plane is not None:
                await plane.stop()
            await zk.stop()

    asyncio.run(scenario())


def test_a_controller_whose_session_expires_stops_and_another_takes_over(
        zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with started_nodes(zookeeper_connect, (1, 2)) as (nodes, reader):
            old = await active(nodes)
            epoch = old.image.controller_epoch
            session = old.zk.client.client_id
            await asyncio.to_thread(expire_session, zookeeper_connect, session)
            await wait_for(lambda: not old.plane.is_active_controller, "the old controller stops")
            new = await active([n for n in nodes if n is not old])
            assert new.image.controller_epoch == epoch + 1
            # the old controller's writes are refused, not half-applied
            [result] = await old.plane.controller.create_topics([TopicSpec("stale", 1, 1)])
            assert result.error == ErrorCode.not_controller
            assert await reader.exists(layout.topic_path("stale")) is None
            # once registered again it follows the new controller
            await wait_for(lambda: old.zk.state == "CONNECTED"
                           and old.zk.session_id != session[0], "a new session")
            await register(old.zk, old.broker_id)
            await wait_for(lambda: old.broker_id in new.image.brokers, "the re-registration")
            [result] = await new.plane.controller.create_topics([TopicSpec("fresh", 2, 2)])
            assert result.error == ErrorCode.none, result
            await converged(reader, nodes)
            assert old.image.controller_id == new.broker_id
            assert not old.plane.is_active_controller

    asyncio.run(scenario())
