"""A broker's metadata plane alone in a process, for the SIGSTOP test: ``python
plane_process.py <zookeeper.connect> <broker id> <session ms>`` registers, waits to be the
active controller, prints ``ACTIVE <epoch>``, then allocates producer id blocks in a loop and
prints ``OK <start> <end>`` or ``ERR <error name>`` for each."""

from __future__ import annotations

import asyncio
import sys

from moldau.broker.metadata.image import MetadataImage
from moldau.broker.zk.aio import AsyncZooKeeper
from moldau.broker.zk.cluster_controller import ZkMetadataPlane
from moldau.protocol.errors import KafkaError

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cluster_support import bootstrap, register


async def main(connect: str, broker_id: int, session_ms: int) -> None:
    zk = AsyncZooKeeper(connect, session_timeout_ms=session_ms)
    await zk.start(30)
    await bootstrap(zk)
    await register(zk, broker_id)
    plane = ZkMetadataPlane.build(zk, broker_id, MetadataImage(), default_partitions=lambda: 1,
                                  default_replication_factor=lambda: 1)
    await plane.start()
    while not plane.is_active_controller:
        await asyncio.sleep(0.05)
    print("ACTIVE", plane.store.fence[0] if plane.store.fence else -1, flush=True)
    while True:
        try:
            block = await plane.controller.allocate_producer_ids(broker_id)
            print("OK", block.start, block.stop - 1, flush=True)
        except KafkaError as exc:
            print("ERR", exc.code.name, flush=True)
        await asyncio.sleep(0.02)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
