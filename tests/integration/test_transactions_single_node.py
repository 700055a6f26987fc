"""Transactions on a single ``moldau serve`` through confluent-kafka (librdkafka): commit and
abort seen by read_committed and read_uncommitted consumers, fencing by a second producer with
the same ``transactional.id``, and a transaction whose producer went away aborted by the
coordinator after ``transaction.timeout.ms`` (design14 §11 tests 1 and 3, the single node).

One broker process for the module; the coordinator's timed-out-transaction check runs every
300 ms so the timeout test waits a few seconds only.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from broker_wire import Wire
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.protocol.api_keys import ApiKey
from moldau.testing.runner import BrokerProcess

RDKAFKA = logging.getLogger("rdkafka")
WAIT_S = 60.0


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    node = BrokerProcess(settings={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
    })
    node.start()
    yield node
    node.stop()
    node.close()


def new_topic(broker: BrokerProcess, partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def producer(broker: BrokerProcess, txn_id: str, **extra: object) -> confluent_kafka.Producer:
    config = {"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA,
              "transactional.id": txn_id, "linger.ms": 5, **extra}
    return confluent_kafka.Producer(config)


def consume_all(broker: BrokerProcess, topic: str, isolation: str, expected: int,
                partitions: int = 2) -> list[bytes]:
    """Every record value of ``topic`` a consumer with ``isolation`` reads, waiting until
    ``expected`` arrived (then a little longer, so extra records would show)."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "logger": RDKAFKA,
        "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    settle_until = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.append(msg.value())
            if len(values) >= expected and settle_until is None:
                settle_until = time.monotonic() + 1.0
            if settle_until is not None and time.monotonic() > settle_until:
                break
    finally:
        consumer.close()
    return values


def send(p: confluent_kafka.Producer, topic: str, values: list[bytes]) -> None:
    for i, value in enumerate(values):
        p.produce(topic, value=value, partition=i % 2)


def test_commit_and_abort_read_committed_and_uncommitted(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    p = producer(broker, f"tx-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    committed = [b"c-%d" % i for i in range(10)]
    aborted = [b"a-%d" % i for i in range(6)]
    p.begin_transaction()
    send(p, topic, committed)
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, topic, aborted)
    p.flush(30)
    p.abort_transaction(30)
    later = [b"l-%d" % i for i in range(4)]
    p.begin_transaction()
    send(p, topic, later)
    p.commit_transaction(30)

    seen = consume_all(broker, topic, "read_committed", len(committed) + len(later))
    assert sorted(seen) == sorted(committed + later)
    everything = consume_all(broker, topic, "read_uncommitted",
                             len(committed) + len(aborted) + len(later))
    assert sorted(everything) == sorted(committed + aborted + later)


def test_second_producer_fences_the_first(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    txn_id = f"fence-{uuid.uuid4().hex[:6]}"
    first = producer(broker, txn_id)
    first.init_transactions(30)
    first.begin_transaction()
    send(first, topic, [b"zombie-1"])
    first.flush(30)
    second = producer(broker, txn_id)
    second.init_transactions(30)          # aborts the first's open transaction
    second.begin_transaction()
    send(second, topic, [b"live-1", b"live-2"])
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        first.produce(topic, value=b"zombie-2", partition=0)
        first.commit_transaction(30)
    error = info.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED,
                                             KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error
    assert sorted(consume_all(broker, topic, "read_committed", 2)) == [b"live-1", b"live-2"]


def test_timed_out_transaction_is_aborted_by_the_coordinator(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    txn_id = f"slow-{uuid.uuid4().hex[:6]}"
    p = producer(broker, txn_id, **{"transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    send(p, topic, [b"never-1", b"never-2"])
    p.flush(30)
    # The producer goes silent (as if killed): no EndTxn. The coordinator aborts it, and a
    # read_committed consumer, held at the open transaction, moves on to what follows.
    after = producer(broker, f"after-{uuid.uuid4().hex[:6]}")
    after.init_transactions(30)
    after.begin_transaction()
    send(after, topic, [b"after-1", b"after-2"])
    after.commit_transaction(30)
    seen = consume_all(broker, topic, "read_committed", 2)
    assert sorted(seen) == [b"after-1", b"after-2"]
    deadline = time.monotonic() + WAIT_S
    while (state := _txn_state(broker, txn_id)) != "CompleteAbort" \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert state == "CompleteAbort"


def _txn_state(broker: BrokerProcess, txn_id: str) -> str:
    """The state DescribeTransactions reports (this broker is every id's coordinator)."""
    with Wire(broker.port()) as wire:
        answer = wire.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]})
    [state] = answer["transaction_states"]
    assert state["error_code"] == 0, state
    return str(state["transaction_state"])
