"""Offsets committed inside a transaction survive a kill -9 of the broker as what they were
(issue 14, §8): a committed transaction's offsets are loaded back as committed (the group
coordinator replays the COMMIT marker in ``__consumer_offsets``), an open transaction's
offsets are loaded back as pending (a ``require_stable`` fetch keeps answering
UNSTABLE_OFFSET_COMMIT, a plain fetch sees the last committed offset), and when the restarted
transaction coordinator aborts the timed-out transaction its ABORT marker drops them.

A real broker process (killed with SIGKILL, restarted on the same data directory), the
confluent-kafka transactional producer, and the moldau admin client's OffsetFetch.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP

from moldau.client import NewTopic, SyncAdminClient, TopicPartition
from moldau.client.errors import KafkaTimeoutError
from moldau.testing.runner import BrokerProcess

TXN_TIMEOUT_MS = 4000
SETTINGS = {"offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = Path(tmp_path_factory.mktemp("txn-offsets")) / "data"
    with BrokerProcess(data, settings=SETTINGS) as b:
        yield b


def committed(bootstrap: str, group: str, tp: TopicPartition, *, stable: bool,
              timeout_ms: int = TIMEOUT_S * 1000) -> int | None:
    with SyncAdminClient({"bootstrap.servers": bootstrap,
                          "default.api.timeout.ms": timeout_ms}) as admin:
        found = admin.list_group_offsets(group, [tp], require_stable=stable)[tp]
    return None if found is None else found.offset


def restart(broker: BrokerProcess) -> None:
    """kill -9, then start again on the same data directory and ports' settings."""
    broker.kill()
    broker.start()


def send_offsets(producer: Producer, bootstrap: str, group: str, source: str, out: str,
                 offset: int) -> None:
    producer.begin_transaction()
    producer.produce(out, key=f"k{offset}".encode(), value=b"v", partition=0)
    metadata = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        producer.send_offsets_to_transaction([CTP(source, 0, offset)],
                                             metadata.consumer_group_metadata(), TIMEOUT_S)
    finally:
        metadata.close()
    assert producer.flush(TIMEOUT_S) == 0


def test_txn_offsets_are_what_they_were_after_a_kill9(broker: BrokerProcess) -> None:
    tag = uuid.uuid4().hex[:8]
    source, out, group = f"txo-in-{tag}", f"txo-out-{tag}", f"txo-group-{tag}"
    with SyncAdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(source, 1, 1), NewTopic(out, 1, 1)])
    tp = TopicPartition(source, 0)
    first = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"txo-{tag}",
                      "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 0})
    first.init_transactions(TIMEOUT_S)
    send_offsets(first, broker.bootstrap, group, source, out, 5)
    first.commit_transaction(TIMEOUT_S)
    assert committed(broker.bootstrap, group, tp, stable=True) == 5

    # Committed: loaded back as committed.
    restart(broker)
    assert committed(broker.bootstrap, group, tp, stable=True) == 5

    # Open: loaded back as pending, then dropped by the coordinator's time-out abort.
    second = Producer({"bootstrap.servers": broker.bootstrap,
                       "transactional.id": f"txo2-{tag}",
                       "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 0})
    second.init_transactions(TIMEOUT_S)
    send_offsets(second, broker.bootstrap, group, source, out, 9)
    with pytest.raises(KafkaTimeoutError, match=r"(?i)unstable_offset_commit"):
        committed(broker.bootstrap, group, tp, stable=True, timeout_ms=1500)
    restart(broker)
    assert committed(broker.bootstrap, group, tp, stable=False) == 5
    with pytest.raises(KafkaTimeoutError, match=r"(?i)unstable_offset_commit"):
        committed(broker.bootstrap, group, tp, stable=True, timeout_ms=1500)
    # The restarted coordinator aborts the transaction after transaction.timeout.ms; the
    # require_stable fetch retries until the ABORT marker dropped the pending offset.
    started = time.monotonic()
    assert committed(broker.bootstrap, group, tp, stable=True) == 5
    assert time.monotonic() - started < TIMEOUT_S
    del first, second
