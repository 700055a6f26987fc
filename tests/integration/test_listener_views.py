"""Seed 001's server1 as a real broker process: listeners ``PLAINTEXT`` and ``TEXT`` (mapped to
PLAINTEXT). Every answer that names a broker names it by the listener the request arrived on:
Metadata's brokers (confluent-kafka's ``list_topics``, ``kcat -L``), and the group coordinator
FindCoordinator returns (``describe_consumer_groups``), so a client that bootstrapped on one
listener is never sent to another. A group consumes and commits through TEXT alone.

The multi-broker side (brokers without the listener left out, leaders unreachable on it) is in
``tests/unit/broker/handlers/test_leadership.py``; a single node shows what one broker can.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.testing.runner import BrokerProcess

TIMEOUT = 60


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,TEXT://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,TEXT:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT"}
    with BrokerProcess(settings=settings) as b:
        yield b


def address(broker: BrokerProcess, listener: str) -> str:
    return f"127.0.0.1:{broker.port(listener)}"


@pytest.mark.parametrize("listener", ["PLAINTEXT", "TEXT"])
def test_each_listener_names_the_broker_by_its_own_endpoint(broker: BrokerProcess,
                                                            listener: str) -> None:
    admin = AdminClient({"bootstrap.servers": address(broker, listener)})
    brokers = admin.list_topics(timeout=TIMEOUT).brokers
    assert {b.id: (b.host, b.port) for b in brokers.values()} == {
        1: ("127.0.0.1", broker.port(listener))}
    described = admin.describe_cluster().result(TIMEOUT)
    assert [(n.id, n.port) for n in described.nodes] == [(1, broker.port(listener))]
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (make test installs it: apt-get install -y kcat)"
    out = subprocess.run([kcat, "-L", "-b", address(broker, listener), "-m", "30"],
                         capture_output=True, text=True, timeout=TIMEOUT, check=True).stdout
    assert f"broker 1 at 127.0.0.1:{broker.port(listener)}" in out
    other = "TEXT" if listener == "PLAINTEXT" else "PLAINTEXT"
    assert f"127.0.0.1:{broker.port(other)}" not in out


def test_a_group_through_the_text_listener_alone(broker: BrokerProcess) -> None:
    text = address(broker, "TEXT")
    topic = f"listeners-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": text})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(TIMEOUT)
    producer = Producer({"bootstrap.servers": text})
    for i in range(10):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": text, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        seen: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
        assert sorted(seen) == sorted(f"v{i}".encode() for i in range(10))
        consumer.commit(asynchronous=False)
        [description] = admin.describe_consumer_groups([group]).values()
        described = description.result(TIMEOUT)
        assert described.state == ConsumerGroupState.STABLE
        # FindCoordinator answered with the coordinator's TEXT endpoint.
        assert (described.coordinator.id, described.coordinator.port) == (
            1, broker.port("TEXT"))
    finally:
        consumer.close()
