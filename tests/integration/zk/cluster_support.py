"""In-process brokers of a ZooKeeper cluster for the metadata plane's tests: each "broker" is
its own AsyncZooKeeper session, an ephemeral registration and a ZkMetadataPlane over its own
image — no logs, no listeners, just the metadata plane."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass

from moldau.broker.metadata.image import MetadataImage
from moldau.broker.zk import layout
from moldau.broker.zk.aio import AsyncZooKeeper
from moldau.broker.zk.cluster_controller import ZkMetadataPlane
from moldau.broker.zk.layout import BrokerRegistration, Endpoint
from moldau.broker.zk.snapshot import diff
from moldau.broker.zk.sync import read_cluster_state

SESSION_MS = 4000


async def bootstrap(zk: AsyncZooKeeper) -> None:
    for path in layout.PERSISTENT_PATHS:
        await zk.ensure_path(path)


async def register(zk: AsyncZooKeeper, broker_id: int, rack: str | None = None) -> None:
    endpoint = Endpoint("PLAINTEXT", "127.0.0.1", 19000 + broker_id, "PLAINTEXT")
    registration = BrokerRegistration(broker_id, (endpoint,), rack=rack)
    await zk.create(layout.broker_path(broker_id), registration.to_json(), ephemeral=True)


@dataclass
class Node:
    broker_id: int
    zk: AsyncZooKeeper
    plane: ZkMetadataPlane

    @property
    def image(self) -> MetadataImage:
        return self.plane.image

    async def close(self) -> None:
        """Like kill -9 as ZooKeeper sees it: the session ends (registration and
        /controller go), after the plane stops."""
        await self.plane.stop()
        await self.zk.stop()


async def start_node(connect: str, broker_id: int, *, rack: str | None = None,
                     partitions: int = 1, replication: int = 1,
                     session_ms: int = SESSION_MS) -> Node:
    zk = AsyncZooKeeper(connect, session_timeout_ms=session_ms)
    await zk.start(30)
    await bootstrap(zk)
    await register(zk, broker_id, rack)
    plane = ZkMetadataPlane.build(zk, broker_id, MetadataImage(),
                                  default_partitions=lambda: partitions,
                                  default_replication_factor=lambda: replication)
    await plane.start()
    return Node(broker_id, zk, plane)


async def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def started_nodes(connect: str, broker_ids: Iterable[int]
                        ) -> AsyncIterator[tuple[list[Node], AsyncZooKeeper]]:
    """Nodes ``broker_ids`` started on ``connect``, and a session of the test's own to read
    ZooKeeper with. On the way out every node then in the list (a test may remove and add
    some) is closed and the reader stopped, also when a start failed halfway."""
    nodes: list[Node] = []
    reader = AsyncZooKeeper(connect)
    try:
        for broker_id in broker_ids:
            nodes.append(await start_node(connect, broker_id))
        await reader.start(30)
        yield nodes, reader
    finally:
        for node in nodes:
            await node.close()
        await reader.stop()


async def active(nodes: list[Node], timeout: float = 30.0) -> Node:
    """The node that is the active controller (waiting for one)."""
    await wait_for(lambda: any(n.plane.is_active_controller for n in nodes),
                   "an active controller", timeout)
    return next(n for n in nodes if n.plane.is_active_controller)


async def converged(zk: AsyncZooKeeper, nodes: list[Node], timeout: float = 30.0) -> None:
    """Wait until every node's image equals ZooKeeper's state (the diff finds nothing)."""
    deadline = time.monotonic() + timeout
    while True:
        state = await read_cluster_state(zk)
        behind = {n.broker_id: diff(n.image, state) for n in nodes}
        if not any(behind.values()):
            return
        assert time.monotonic() < deadline, f"images differ from ZooKeeper: {behind}"
        await asyncio.sleep(0.1)
