"""Seed 004's Python producer and consumer (confluent-kafka) run against Moldau with nothing
changed but the bootstrap address (see the header comments of seed_004/producer.py and
seed_004/consumer.py for the two repairs the seed's text copy needed: a typo, indentation).

The producer writes to the literal topic 'topic' (its ``topic='jsontest'`` variable is
unused), so it relies on topic auto-creation. The consumer subscribes to 'jsontest' in group
'mygroup' and loops forever: the test runs it as a subprocess, reads its output, and ends it
once the message has been printed. As in the seed, the consumer is started first, stays
silent, and prints the message when it is produced (the seed's REST example produced the same
``{"foo":"bar"}`` document to 'jsontest').
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .endpoint import KafkaEndpoint

SEED_DIR = Path(__file__).resolve().parent / "seed_004"
SEED_BOOTSTRAP = "'192.168.56.101:9092'"
SEED_DATA = '\n{"foo":"bar"}\n'
TIMEOUT = 60


def seed_script(name: str, bootstrap: str, tmp_path: Path) -> Path:
    """The seed script with its bootstrap address (and nothing else) replaced."""
    text = (SEED_DIR / name).read_text()
    assert text.count(SEED_BOOTSTRAP) == 1
    script = tmp_path / name
    script.write_text(text.replace(SEED_BOOTSTRAP, repr(bootstrap)))
    return script


def test_seed_producer(kafka_endpoint: KafkaEndpoint, tmp_path: Path) -> None:
    script = seed_script("producer.py", kafka_endpoint.bootstrap, tmp_path)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Message delivered to topic [0]\n"

    metadata = AdminClient({"bootstrap.servers": kafka_endpoint.bootstrap}).list_topics(
        "topic", timeout=30)
    assert list(metadata.topics["topic"].partitions) == [0]  # auto-created, num.partitions=1
    consumer = Consumer({"bootstrap.servers": kafka_endpoint.bootstrap, "group.id": "check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("topic", 0, 0)])
    try:
        msg = consumer.poll(30)
        assert msg is not None and msg.error() is None
        assert (msg.offset(), msg.key(), msg.value()) == (0, None, SEED_DATA.encode("utf-8"))
        assert consumer.get_watermark_offsets(TopicPartition("topic", 0), 30) == (0, 1)
    finally:
        consumer.close()


class Output:
    """Collects a subprocess's stdout lines in a background thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, needle: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text:
                return True
            time.sleep(0.05)
        return False


@pytest.fixture
def seed_consumer(kafka_endpoint: KafkaEndpoint,
                  tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    script = seed_script("consumer.py", kafka_endpoint.bootstrap, tmp_path)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        yield proc, Output(proc)
    finally:
        proc.kill()  # the seed's loop never ends by itself
        proc.wait(10)


def _group_state(admin: AdminClient) -> tuple[object, int]:
    [future] = admin.describe_consumer_groups(["mygroup"], request_timeout=10).values()
    description = future.result(10)
    return description.state, len(description.members)


def test_seed_consumer(kafka_endpoint: KafkaEndpoint,
                       seed_consumer: tuple[subprocess.Popen[str], Output]) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_endpoint.bootstrap})
    [future] = admin.create_topics([NewTopic("jsontest", 1, 1)]).values()
    future.result(30)
    proc, output = seed_consumer
    # start the consumer first, as the seed says: it joins 'mygroup' and prints nothing
    deadline = time.monotonic() + TIMEOUT
    while _group_state(admin) != (ConsumerGroupState.STABLE, 1):
        assert time.monotonic() < deadline, f"mygroup never became stable; output:\n{output.text}"
        assert proc.poll() is None, output.text
        time.sleep(0.2)
    time.sleep(1.5)
    assert "Received message" not in output.text

    producer = Producer({"bootstrap.servers": kafka_endpoint.bootstrap})
    producer.produce("jsontest", SEED_DATA.encode("utf-8"))
    assert producer.flush(30) == 0

    expected = f"Received message: {SEED_DATA}\n"
    assert output.wait_for(expected, TIMEOUT), output.text
    assert "Consumer error" not in output.text
    assert proc.poll() is None  # still looping, as the seed's consumer does
