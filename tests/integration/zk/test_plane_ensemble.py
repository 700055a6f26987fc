"""The metadata plane on a 3-node ZooKeeper ensemble whose leader dies: sessions survive
(kazoo reconnects to another node within the session timeout), the controller stays the
controller, its next write goes through and every image follows."""

from __future__ import annotations

import asyncio

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.zk.aio import AsyncZooKeeper
from moldau.protocol.errors import ErrorCode
from moldau.testing.zookeeper import ZooKeeperEnsemble

from .cluster_support import Node, active, converged, start_node


def test_the_plane_rides_out_the_death_of_the_ensemble_leader(
        zookeeper_ensemble: ZooKeeperEnsemble, zookeeper_chroot: str) -> None:
    connect = zookeeper_ensemble.connect(zookeeper_chroot)

    async def scenario() -> None:
        nodes: list[Node] = []
        reader = AsyncZooKeeper(connect)
        try:
            # sessions long enough to outlive the leader election on a loaded machine
            nodes = [await start_node(connect, b, session_ms=15000) for b in (1, 2, 3)]
            await reader.start(30)
            controller = await active(nodes)
            epoch = controller.image.controller_epoch
            [result] = await controller.plane.controller.create_topics([TopicSpec("a", 3, 1)])
            assert result.error == ErrorCode.none
            zookeeper_ensemble.kill_node(zookeeper_ensemble.leader())
            [result] = await controller.plane.controller.create_topics([TopicSpec("b", 3, 1)])
            assert result.error == ErrorCode.none, result
            assert controller.plane.is_active_controller
            await converged(reader, nodes)
            for node in nodes:
                assert {"a", "b"} <= set(node.image.topics_by_name)
                assert node.image.controller_epoch == epoch  # no re-election was needed
        finally:
            for node in nodes:
                await node.close()
            await reader.stop()

    asyncio.run(scenario())
