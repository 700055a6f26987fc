"""The classic group protocol of this client against every peer broker (Tansu, noida-db,
moldau): three members share six partitions, commit, one leaves and the others take over."""

from __future__ import annotations

import asyncio
import time

import pytest

from moldau.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from moldau.protocol.api_keys import ApiKey

from .conftest import require_apis, topic_name
from .peers import Peer

pytestmark = pytest.mark.timeout(120)


def test_group_share_commit_leave(peer: Peer) -> None:
    require_apis(peer, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
                 ApiKey.HEARTBEAT, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH)

    async def main() -> None:
        topic, group = topic_name("grp"), topic_name("g")
        async with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
            await admin.create_topics([NewTopic(topic, 6, 1)])
            await admin.cluster.wait_for_topics([topic], 10000)
        async with Producer({"bootstrap.servers": peer.bootstrap}) as producer:
            for i in range(60):
                producer.send(topic, str(i).encode(), partition=i % 6)
            await producer.flush()
        config = {"bootstrap.servers": peer.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                  "heartbeat.interval.ms": 500, "fetch.max.wait.ms": 100}
        consumers = [Consumer(config) for _ in range(3)]
        values: list[int] = []
        for c in consumers:
            await c.start()
            c.subscribe([topic])

        async def until(members: list[Consumer], condition: object, what: str) -> None:
            deadline = time.monotonic() + 45
            while not condition():  # type: ignore[operator]
                assert time.monotonic() < deadline, (
                    f"{peer.name}: {what}: {[sorted(c.assignment()) for c in members]}")
                for batch in await asyncio.gather(*(c.poll(0.2) for c in members)):
                    values.extend(int(r.value) for r in batch)

        await until(consumers, lambda: [len(c.assignment()) for c in consumers] == [2, 2, 2]
                    and len(values) == 60, "2 partitions each")
        assert sorted(values) == list(range(60))
        committed = await consumers[0].commit()
        assert {v.offset for v in committed.values()} == {10}
        assert await consumers[0].committed(list(committed)) == committed
        await consumers[0].close()
        rest = consumers[1:]
        await until(rest, lambda: [len(c.assignment()) for c in rest] == [3, 3], "takeover")
        assert {tp for c in rest for tp in c.assignment()} == {
            TopicPartition(topic, p) for p in range(6)}
        for c in rest:
            await c.close()

    asyncio.run(main())
