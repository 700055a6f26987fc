"""Helpers for consumer-group tests: a moldau broker with short group timeouts, topics,
producing, and polling several consumers until a condition holds."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from moldau.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from moldau.testing.runner import BrokerProcess

# Short sessions keep takeover tests quick; the broker must allow them.
SESSION_MS = 3000
HEARTBEAT_MS = 300


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(settings={
        "group.min.session.timeout.ms": 500,
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 3,
        "num.partitions": 1,
        "group.consumer.heartbeat.interval.ms": 300,
        "group.consumer.session.timeout.ms": SESSION_MS,
    }) as running:
        yield running


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def config(broker: BrokerProcess, group: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap, "group.id": group,
        "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS, "fetch.max.wait.ms": 100, **extra,
    }


async def create_topic(broker: BrokerProcess, topic: str, partitions: int) -> None:
    async with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
        await admin.cluster.wait_for_topics([topic], 10000)


async def produce(broker: BrokerProcess, topic: str, count: int, partitions: int,
                  start: int = 0) -> None:
    """``count`` records, spread round-robin over the partitions; value = its number."""
    async with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5}) as p:
        for i in range(start, start + count):
            p.send(topic, str(i).encode(), partition=i % partitions)
        await p.flush()


class Polling:
    """Polls consumers round by round, keeping every record each one got."""

    def __init__(self, consumers: Sequence[Consumer]) -> None:
        self.consumers = list(consumers)
        self.records: dict[int, list[Any]] = {id(c): [] for c in consumers}

    def add(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.records.setdefault(id(consumer), [])

    def remove(self, consumer: Consumer) -> None:
        self.consumers.remove(consumer)

    def got(self, consumer: Consumer) -> list[Any]:
        return self.records[id(consumer)]

    def values(self) -> list[int]:
        return [int(r.value) for rs in self.records.values() for r in rs]

    async def until(self, condition: Callable[[], bool], timeout: float = 20.0,
                    what: str = "condition") -> float:
        """Poll every consumer (0.2 s each round) until ``condition()``; returns seconds."""
        start = time.monotonic()
        while True:
            results = await asyncio.gather(*(c.poll(0.2) for c in self.consumers))
            for c, rs in zip(self.consumers, results, strict=True):
                self.records[id(c)].extend(rs)
            if condition():
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise AssertionError(
                    f"{what} not reached in {timeout}s; assignments: "
                    f"{[sorted(c.assignment()) for c in self.consumers]}")


def partitions_of(topic: str, count: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(count)}


def disjoint_cover(assignments: Sequence[set[TopicPartition]], everything: set[TopicPartition]
                   ) -> bool:
    """Every partition exactly once across the assignments."""
    flat = [tp for a in assignments for tp in a]
    return len(flat) == len(set(flat)) and set(flat) == everything
