"""FindCoordinator never holds a client for long on the controller.

The first group lookup of a cluster creates ``__consumer_offsets`` through the active
controller. Kafka answers COORDINATOR_NOT_AVAILABLE at once while the creation goes on (clients
retry); Moldau waits a moment for it (:data:`~moldau.broker.group.service.
OFFSETS_TOPIC_CREATION_WAIT_S`) and then answers the same. Found in review: with the
controller frozen, a FindCoordinator to another broker hung for the forwarding channel's 30 s
``request_timeout_ms`` (clients' own request timeouts are often shorter, so they dropped the
connection and started over).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.wire.connection import BrokerConnection

from .conftest import ClusterFactory

# Far below the forwarding channel's 30 s and far above the short wait plus a busy machine.
PROMPT_S = 10.0


async def _find_coordinator(host: str, port: int, group: str) -> tuple[Any, float]:
    conn = BrokerConnection(host, port, request_timeout_ms=60_000)
    await conn.connect()
    try:
        started = time.monotonic()
        answer = await conn.request(ApiKey.FIND_COORDINATOR,
                                    {"key": group, "key_type": 0}, version=2)
        return answer, time.monotonic() - started
    finally:
        conn.close()


def find_coordinator(address: str, group: str) -> tuple[Any, float]:
    """FindCoordinator v2 for ``group`` at ``address``: the answer and the seconds it took."""
    host, port = address.rsplit(":", 1)
    return asyncio.run(_find_coordinator(host, int(port), group))


def test_find_coordinator_answers_promptly_while_the_controller_is_frozen(
        cluster_factory: ClusterFactory) -> None:
    from confluent_kafka import Consumer, Producer

    cluster = cluster_factory(3)
    controller = cluster.wait_controller(60)
    other = next(i for i in sorted(cluster.brokers) if i != controller)
    address = cluster.broker(other).address()
    group = f"lookup-{uuid.uuid4().hex[:6]}"
    cluster.sigstop(controller)
    try:
        answer, took = find_coordinator(address, group)
        again, took_again = find_coordinator(address, group)  # the creation is still pending
    finally:
        cluster.sigcont(controller)
    assert (answer.error_code, took < PROMPT_S) == (E.coordinator_not_available, True), (
        answer, took)
    assert (again.error_code, took_again < PROMPT_S) == (E.coordinator_not_available, True), (
        again, took_again)

    # once the controller answers again, the group works through the same broker
    topic = f"after-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": address})
    producer.produce(topic, b"one")
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": address, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 90
        message = None
        while message is None or message.error() is not None:
            assert time.monotonic() < deadline, "no record through the group after 90 s"
            message = consumer.poll(1.0)
        assert message.value() == b"one"
        [committed] = consumer.commit(message, asynchronous=False)
        assert (committed.error, committed.offset) == (None, 1)
    finally:
        consumer.close()
    answer, _took = find_coordinator(address, group)
    assert answer.error_code == E.none and answer.node_id in cluster.brokers
