"""A consume-transform-produce worker for the exactly-once fault test (design14 §11.2).

    python -m tests.faults.txn.worker CLIENT BOOTSTRAP INPUT OUTPUT GROUP N

CLIENT is confluent_kafka or moldau. The worker joins GROUP (static member ``worker-N``, so a
restart takes its partitions back without waiting for the session timeout), reads INPUT with
read_committed, and per poll writes ``transform(value)`` of each record to OUTPUT in one
transaction (``transactional.id=worker-N``, ``transaction.timeout.ms=10000``) together with
the consumed positions (``send_offsets_to_transaction``). It prints ``txn-open`` once the
transaction's records were sent and are in the log (the test kills it with SIGKILL then),
``txn-commit N`` after each commit; an abortable error aborts and rewinds to the committed
offsets. A restart with the same N fences the killed instance's transaction.
"""

from __future__ import annotations

import sys
import time
from typing import Any

TXN_TIMEOUT_MS = 10000
MAX_RECORDS = 10
HOLD_S = 0.15  # the transaction stays open this long, so kills land inside one


def transform(value: bytes) -> bytes:
    return b"out-" + value


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run_confluent(bootstrap: str, source: str, out: str, group: str, n: int) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": f"worker-{n}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
        "max.poll.interval.ms": 30000,
    })
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"worker-{n}",
                         "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 0})
    producer.init_transactions(30)
    consumer.subscribe([source])
    say("ready")
    while True:
        msgs = [m for m in consumer.consume(MAX_RECORDS, 0.5) if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        try:
            for m in msgs:
                producer.produce(out, transform(m.value()), m.key(), on_delivery=None)
            producer.flush(30)
            say("txn-open")
            time.sleep(HOLD_S)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(
                [p for p in positions if p.offset >= 0], consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            say(f"txn-commit {len(msgs)}")
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                raise
            producer.abort_transaction(30)
            say(f"txn-abort {err.name()}")
            committed = consumer.committed(consumer.assignment(), 30)
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition,
                                             tp.offset if tp.offset >= 0 else -2))


def run_moldau(bootstrap: str, source: str, out: str, group: str, n: int) -> None:
    from moldau.client import (
        BrokerError,
        ProducerFenced,
        SyncConsumer,
        SyncProducer,
        TransactionAbortableError,
    )

    consumer = SyncConsumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": f"worker-{n}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
        "max.poll.interval.ms": 30000,
    })
    producer = SyncProducer({"bootstrap.servers": bootstrap, "transactional.id": f"worker-{n}",
                             "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 0,
                             "max.block.ms": 30000})
    producer.init_transactions()
    consumer.subscribe([source])
    say("ready")
    while True:
        records = consumer.poll(0.5, MAX_RECORDS)
        if not records:
            continue
        producer.begin_transaction()
        try:
            futures: list[Any] = [producer.send(out, transform(r.value or b""), r.key)
                                  for r in records]
            producer.flush()
            for f in futures:
                f.result(30)
            say("txn-open")
            time.sleep(HOLD_S)
            positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
            producer.send_offsets_to_transaction(positions, consumer.group_metadata())
            producer.commit_transaction()
            say(f"txn-commit {len(records)}")
            polled: dict[int, list[int]] = {}
            for r in records:
                polled.setdefault(r.partition, []).append(r.offset)
            say(f"txn-detail polled={sorted(polled.items())} "
                f"committed={sorted((tp.partition, o) for tp, o in positions.items())}")
        except ProducerFenced:
            raise
        except (TransactionAbortableError, BrokerError) as exc:
            producer.abort_transaction()
            say(f"txn-abort {exc}")
            committed = consumer.committed(consumer.assignment())
            for tp, offset in committed.items():
                if offset is not None:
                    consumer.seek(tp, offset.offset)
                else:
                    consumer.seek_to_beginning([tp])


def main() -> None:
    client, bootstrap, source, out, group, n = sys.argv[1:7]
    run = {"confluent_kafka": run_confluent, "moldau": run_moldau}[client]
    run(bootstrap, source, out, group, int(n))


if __name__ == "__main__":
    main()
