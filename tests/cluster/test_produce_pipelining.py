"""acks=all produce requests pipelined on one connection (librdkafka sends the next before the
previous is answered) are appended as they arrive, not one replication round trip after
another; their answers still come back in order.

Without it a connection's produce requests each waited for the replicas of the one before,
so at 10,000 msg/s with ``linger.ms=0`` (one small request per record) a replicated leader
fell further behind every second (bench/replication.py's end-to-end run: seconds of
latency at 1,000 msg/s).

The check is made with a follower frozen (SIGSTOP): the high watermark cannot pass the first
request, so it waits; the second request's records must reach the leader's log meanwhile.
Requests appended that way count against ``queued.max.requests`` (they hold their frames'
memory until answered): beyond it the connection stops reading, as with requests queued.
"""

from __future__ import annotations

import functools
import time
import uuid
from pathlib import Path
from typing import Any

from moldau.testing.waiting import wait_for

from .conftest import ClusterFactory
from .test_replication import create_topic

wait_until = functools.partial(wait_for, interval=0.1)

# A frozen follower stays registered and in the ISR for the whole test: the first request
# waits for it until it is let go.
SETTINGS = {"zookeeper.session.timeout.ms": "60000", "replica.lag.time.max.ms": "60000"}


def _log_bytes(data_dir: Path, topic: str) -> int:
    return sum(f.stat().st_size for f in (data_dir / f"{topic}-0").glob("*.log"))


def test_pipelined_acks_all_requests_are_appended_at_once_and_answered_in_order(
        cluster_factory: ClusterFactory) -> None:
    from confluent_kafka import Producer

    cluster = cluster_factory(3, settings=SETTINGS)
    topic = f"pipelined-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, 1)
    leader = wait_until(lambda: cluster.leaders(topic).get(0), 60, "a leader")
    wait_until(lambda: len((cluster.partition_state(topic, 0) or {}).get("isr", [])) == 3,
               60, "a full ISR")
    frozen = next(b for b in sorted(cluster.brokers) if b != leader)
    data_dir = cluster.brokers[leader].data_dir

    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0,
                         "request.timeout.ms": 120000, "message.timeout.ms": 180000})
    answers: list[tuple[bytes, Any, int]] = []

    def report(err: Any, msg: Any) -> None:
        answers.append((msg.value(), err, msg.offset()))

    producer.produce(topic, b"warm-up", partition=0, on_delivery=report)
    assert producer.flush(60) == 0
    start = _log_bytes(data_dir, topic)
    first, second = b"a" * 20_000, b"b" * 20_000

    cluster.sigstop(frozen)
    try:
        producer.produce(topic, first, partition=0, on_delivery=report)
        producer.poll(0)
        # the first request is in the leader's log and waits for the frozen follower
        wait_until(lambda: _log_bytes(data_dir, topic) >= start + 20_000, 30,
                   "the first record in the leader's log")
        time.sleep(0.5)
        assert answers == [(b"warm-up", None, 0)], "answered without the frozen follower"
        producer.produce(topic, second, partition=0, on_delivery=report)
        producer.poll(0)
        # the second, sent behind it on the same connection, is appended without waiting
        wait_until(lambda: _log_bytes(data_dir, topic) >= start + 40_000, 30,
                   "the pipelined second record in the leader's log while the first waits")
        producer.poll(0.5)
        assert len(answers) == 1, "answered without the frozen follower"
    finally:
        cluster.sigcont(frozen)
    assert producer.flush(90) == 0
    assert answers == [(b"warm-up", None, 0), (first, None, 1), (second, None, 2)]


def test_pipelined_requests_count_against_queued_max_requests(
        cluster_factory: ClusterFactory) -> None:
    from confluent_kafka import Producer

    cluster = cluster_factory(3, settings={**SETTINGS, "queued.max.requests": "2"})
    topic = f"bounded-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, 1)
    leader = wait_until(lambda: cluster.leaders(topic).get(0), 60, "a leader")
    wait_until(lambda: len((cluster.partition_state(topic, 0) or {}).get("isr", [])) == 3,
               60, "a full ISR")
    frozen = next(b for b in sorted(cluster.brokers) if b != leader)
    data_dir = cluster.brokers[leader].data_dir
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0,
                         "request.timeout.ms": 120000, "message.timeout.ms": 180000})
    answers: list[tuple[bytes, Any, int]] = []
    producer.produce(topic, b"warm-up", partition=0,
                     on_delivery=lambda err, msg: answers.append((msg.value(), err, msg.offset())))
    assert producer.flush(60) == 0
    start = _log_bytes(data_dir, topic)
    values = [bytes([ord("a") + i]) * 20_000 for i in range(5)]

    cluster.sigstop(frozen)
    try:
        for value in values:  # librdkafka keeps up to 5 idempotent requests in flight
            producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: answers
                             .append((msg.value(), err, msg.offset())))
            producer.poll(0.3)
        wait_until(lambda: _log_bytes(data_dir, topic) >= start + 40_000, 30,
                   "two pipelined records in the leader's log while the first waits")
        time.sleep(2.0)
        # two taken (queued.max.requests=2); the rest wait unread in the socket
        assert _log_bytes(data_dir, topic) < start + 60_000
        assert len(answers) == 1
    finally:
        cluster.sigcont(frozen)
    assert producer.flush(90) == 0
    assert answers == [(b"warm-up", None, 0)] + [(v, None, i + 1) for i, v in enumerate(values)]
