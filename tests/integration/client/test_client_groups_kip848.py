"""KIP-848 groups (group.protocol=consumer) with this client against a moldau broker:
sharing, leaving, a crashed member fenced after the session timeout, server assignors,
patterns, commits with the member epoch, static members, and a mixed group with librdkafka."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer as CKConsumer

from moldau.client import AdminClient, Consumer, TopicPartition
from moldau.client.group import OffsetAndMetadata
from moldau.testing.runner import BrokerProcess

from .groups_support import (
    SESSION_MS,
    Polling,
    broker,
    config,
    create_topic,
    disjoint_cover,
    name,
    partitions_of,
    produce,
)

__all__ = ["broker"]

pytestmark = pytest.mark.timeout(120)


def kip848(broker: BrokerProcess, group: str, **extra: object) -> dict[str, object]:
    return config(broker, group, **{"group.protocol": "consumer", **extra})


async def crash(consumer: Consumer) -> None:
    """Stop a member without leaving, as a kill -9 would (heartbeats just stop)."""
    member = consumer.group
    await member._stop()  # type: ignore[union-attr]
    member.coordinator.close()  # type: ignore[union-attr]
    member._closed = True  # type: ignore[union-attr]
    await consumer.close()


def test_share_leave_and_crash(broker: BrokerProcess) -> None:
    async def main() -> None:
        topic, group = name("k848"), name("g")
        await create_topic(broker, topic, 6)
        await produce(broker, topic, 60, 6)
        revoked: list[set[TopicPartition]] = []
        consumers = [Consumer(kip848(broker, group, **{"client.id": f"c{i}"}))
                     for i in range(3)]
        for c in consumers:
            await c.start()
        consumers[0].subscribe([topic], on_revoke=revoked.append)
        for c in consumers[1:]:
            c.subscribe([topic])
        polling = Polling(consumers)
        everything = partitions_of(topic, 6)
        await polling.until(lambda: [len(c.assignment()) for c in consumers] == [2, 2, 2]
                            and len(polling.values()) == 60, what="2 each")
        assert disjoint_cover([c.assignment() for c in consumers], everything)
        assert sorted(polling.values()) == list(range(60))
        # incremental: a member only ever gives up what moves, never everything at once
        assert all(len(r) < 6 for r in revoked)
        async with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            listing = {g.group_id: g for g in await admin.list_groups(types=["consumer"])}
            assert listing[group].type == "consumer"  # a KIP-848 group, not a classic one
            described = (await admin.describe_groups([group]))[group]
            assert len(described.members) == 3  # type: ignore[union-attr]
            assert disjoint_cover([set(m.assignment) for m in described.members],  # type: ignore[union-attr]
                                  everything)
        await consumers[0].close()  # epoch -1: the others take over at once
        polling.remove(consumers[0])
        await polling.until(lambda: [len(c.assignment()) for c in consumers[1:]] == [3, 3],
                            what="takeover after leave")
        await crash(consumers[1])
        polling.remove(consumers[1])
        # After the session timeout; the bound tells that from a member never expired.
        await polling.until(lambda: len(consumers[2].assignment()) == 6,
                            timeout=SESSION_MS / 1000 + 15, what="takeover after crash")
        await produce(broker, topic, 12, 6, start=60)
        await polling.until(lambda: len(polling.values()) >= 72)
        await consumers[2].close()

    asyncio.run(main())


@pytest.mark.parametrize("assignor", ["range", "uniform"])
def test_server_assignor(broker: BrokerProcess, assignor: str) -> None:
    async def main() -> None:
        topic, group = name("assignor"), name("g")
        await create_topic(broker, topic, 6)
        consumers = [Consumer(kip848(broker, group, **{"group.remote.assignor": assignor}))
                     for _ in range(2)]
        for c in consumers:
            await c.start()
            c.subscribe([topic])
        polling = Polling(consumers)
        await polling.until(lambda: [len(c.assignment()) for c in consumers] == [3, 3])
        if assignor == "range":  # contiguous ranges per member
            for c in consumers:
                parts = sorted(tp.partition for tp in c.assignment())
                assert parts in ([0, 1, 2], [3, 4, 5])
        for c in consumers:
            await c.close()

    asyncio.run(main())


def test_pattern_commits_and_static_member(broker: BrokerProcess) -> None:
    async def main() -> None:
        prefix, group = name("re"), name("g")
        await create_topic(broker, f"{prefix}-a", 2)
        await produce(broker, f"{prefix}-a", 10, 2)
        c = Consumer(kip848(broker, group, **{"group.instance.id": "static-1",
                                              "enable.auto.commit": False}))
        await c.start()
        c.subscribe(f"^{prefix}-.*")
        polling = Polling([c])
        await polling.until(lambda: len(polling.values()) == 10)
        tp = TopicPartition(f"{prefix}-a", 0)
        assert (await c.commit())[tp] == OffsetAndMetadata(5)
        await c.commit({tp: OffsetAndMetadata(3, "three")})
        assert await c.committed([tp]) == {tp: OffsetAndMetadata(3, "three")}
        await create_topic(broker, f"{prefix}-b", 1)
        await polling.until(lambda: TopicPartition(f"{prefix}-b", 0) in c.assignment(),
                            what="regex picks up the new topic")
        before = c.assignment()
        await c.close()  # static: epoch -2, the partitions wait for the instance
        again = Consumer(kip848(broker, group, **{"group.instance.id": "static-1"}))
        await again.start()
        again.subscribe(f"^{prefix}-.*")
        polling = Polling([again])
        await polling.until(lambda: again.assignment() == before, what="static rejoin")
        await polling.until(lambda: len(polling.values()) == 2)  # from the committed 3
        assert sorted(polling.values()) == [6, 8]
        await again.close()

    asyncio.run(main())


def test_mixed_group_with_librdkafka(broker: BrokerProcess) -> None:
    topic, group = name("mix848"), name("g")
    asyncio.run(create_topic(broker, topic, 6))
    everything = partitions_of(topic, 6)
    theirs = [CKConsumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
        "client.id": f"ck-{i}", "auto.offset.reset": "earliest", "log_level": 2,
    }) for i in range(2)]

    async def main() -> None:
        ours = Consumer(kip848(broker, group, **{"client.id": "moldau"}))
        await ours.start()
        ours.subscribe([topic])
        for k in theirs:
            k.subscribe([topic])
        deadline = time.monotonic() + 40

        def assignments() -> list[set[TopicPartition]]:
            return [ours.assignment()] + [
                {TopicPartition(tp.topic, tp.partition) for tp in k.assignment()}
                for k in theirs]

        while not ([len(a) for a in assignments()] == [2, 2, 2]
                   and disjoint_cover(assignments(), everything)):
            assert time.monotonic() < deadline, assignments()
            await ours.poll(0.05)
            for k in theirs:
                k.poll(0.05)
            flat = [tp for a in assignments() for tp in a]
            assert len(flat) == len(set(flat)), "a partition had two owners"
        await ours.close()
        while not disjoint_cover(assignments()[1:], everything):
            assert time.monotonic() < deadline, assignments()
            for k in theirs:
                k.poll(0.05)

    try:
        asyncio.run(main())
    finally:
        for k in theirs:
            k.close()
