"""The fault suite's transactional clients (``--workload txn``), all confluent-kafka, all
writing to one :class:`~.history.History` checked by :func:`.txn_checker.check_txns`.

- :class:`TxnProducerWorker`: one transactional ``Producer`` in a thread of its own
  (``transactional.id`` ``<run>-p<id>``), running transactions of a few values
  (``<txn>-<k>``, each to a random partition) and ending each with a commit or an abort at
  random. ``txn_begin``, ``txn_send`` (before each ``produce()``), then ``txn_commit_ok`` /
  ``txn_abort_ok`` once the call returned. A retriable error retries the same call; an
  abortable one aborts (``txn_abort_ok`` once that returned); a fatal one, or a call that keeps
  failing, records ``txn_unknown`` and replaces the producer: its ``init_transactions``
  finishes or aborts what the old one left (Kafka's fencing), so the outcome is read off the
  final read.
- :class:`CommittedConsumer`: :class:`~.workload.ConsumerWorker` reading with
  ``isolation.level=read_committed``.
- :func:`final_committed_read`: :func:`~.workload.final_read` with read_committed: each
  partition to its last stable offset (markers take offsets no record is read at, so a
  partition is done when the consumer's position, not a record, reaches the end).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from .history import History
from .workload import RDKAFKA_DEBUG, ClientSettings, ConsumerWorker

__all__ = ["CommittedConsumer", "TxnProducerWorker", "final_committed_read"]

#: How long one transactional call may take before it counts as failed (s).
CALL_TIMEOUT_S = 30.0
#: How many times a retriable failure of one call is retried before the producer is replaced.
CALL_RETRIES = 5


class TxnProducerWorker(threading.Thread):
    """Run transactions until :meth:`halt`; every transaction and its end is recorded."""

    def __init__(self, producer_id: int, settings: ClientSettings, history: History, *,
                 run_id: str, seed: int, values_per_txn: int = 4, commit_ratio: float = 0.7,
                 transaction_timeout_ms: int = 10_000) -> None:
        super().__init__(name=f"txn-producer-{producer_id}", daemon=True)
        self.producer_id = producer_id
        self.settings = settings
        self.history = history
        self.transactional_id = f"{run_id}-p{producer_id}"
        self.rng = random.Random(seed * 1000 + producer_id)
        self.values_per_txn = values_per_txn
        self.commit_ratio = commit_ratio
        self.transaction_timeout_ms = transaction_timeout_ms
        self._halt = threading.Event()
        self.error: BaseException | None = None
        self.unresolved = 0
        self.replaced = 0
        self.txns = 0
        self.last_error: BaseException | None = None

    def _config(self) -> dict[str, Any]:
        s = self.settings
        return {
            "bootstrap.servers": s.bootstrap, "transactional.id": self.transactional_id,
            "transaction.timeout.ms": self.transaction_timeout_ms,
            "message.timeout.ms": self.transaction_timeout_ms, "linger.ms": 5,
            "retry.backoff.ms": 200, "retry.backoff.max.ms": 1000,
            "reconnect.backoff.max.ms": 1000, "socket.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 2000, "logger": s.client_logger(),
            **({"debug": RDKAFKA_DEBUG} if RDKAFKA_DEBUG else {}),
        }

    def _producer(self) -> Any:
        """A new producer, initialised: it fences the one before and completes or aborts
        what that one left open (the coordinator may be failing over: retried)."""
        from confluent_kafka import Producer

        deadline = time.monotonic() + 300
        while True:
            producer = Producer(self._config())
            try:
                producer.init_transactions(CALL_TIMEOUT_S)
                return producer
            except Exception as exc:
                if self._halt.is_set() or time.monotonic() > deadline:
                    raise RuntimeError(f"init_transactions of {self.transactional_id} kept "
                                       f"failing: {exc}") from exc
                time.sleep(0.5)

    def run(self) -> None:
        try:
            producer = self._producer()
            n = 0
            while not self._halt.is_set():
                n += 1
                name = f"{self.transactional_id}-t{n}"
                if not self._one(producer, name):
                    self.history.record("txn_unknown", producer=self.producer_id, txn=name,
                                        error=repr(self.last_error))
                    self.replaced += 1
                    producer = self._producer()
                self.txns += 1
            self.unresolved = producer.flush(30)
        except BaseException as exc:  # recorded for the runner; the history has the detail
            self.error = exc

    def _one(self, producer: Any, name: str) -> bool:
        """One transaction; False when its end is unknown (the producer must be replaced)."""
        s = self.settings
        history = self.history
        producer.begin_transaction()
        history.record("txn_begin", producer=self.producer_id, txn=name)
        for k in range(self.values_per_txn):
            value = f"{name}-{k}"
            partition = self.rng.randrange(s.partitions)
            history.record("txn_send", producer=self.producer_id, txn=name, value=value,
                           partition=partition)
            try:
                producer.produce(s.topic, value.encode(), partition=partition)
            except BufferError:
                producer.poll(0.5)
                return self._abort(producer, name)
            except Exception as exc:
                self.last_error = exc
                if _fatal(exc):
                    return False
                return self._abort(producer, name)
            producer.poll(0)
        time.sleep(self.rng.uniform(0.0, 0.1))
        if self.rng.random() < self.commit_ratio:
            return self._commit(producer, name)
        return self._abort(producer, name)

    def _commit(self, producer: Any, name: str) -> bool:
        for _attempt in range(CALL_RETRIES):
            try:
                producer.commit_transaction(CALL_TIMEOUT_S)
                self.history.record("txn_commit_ok", producer=self.producer_id, txn=name)
                return True
            except Exception as exc:
                self.last_error = exc
                error = _error(exc)
                if error is not None and error.txn_requires_abort():
                    return self._abort(producer, name)
                if error is None or not error.retriable():
                    return False
        return False

    def _abort(self, producer: Any, name: str) -> bool:
        for _attempt in range(CALL_RETRIES):
            try:
                producer.abort_transaction(CALL_TIMEOUT_S)
                self.history.record("txn_abort_ok", producer=self.producer_id, txn=name)
                return True
            except Exception as exc:
                self.last_error = exc
                error = _error(exc)
                if error is None or not error.retriable():
                    return False
        return False

    def halt(self) -> None:
        """Stop after the transaction under way (join the thread)."""
        self._halt.set()


def _error(exc: BaseException) -> Any:
    """The KafkaError inside a confluent-kafka exception, if any."""
    args = getattr(exc, "args", ())
    return args[0] if args and hasattr(args[0], "retriable") else None


def _fatal(exc: BaseException) -> bool:
    error = _error(exc)
    return error is not None and error.fatal()


class CommittedConsumer(ConsumerWorker):
    """A :class:`~.workload.ConsumerWorker` that reads committed records only (or, to show
    that the checker sees aborted records when a reader is not isolated from them,
    ``isolation="read_uncommitted"``)."""

    def __init__(self, consumer_id: int, settings: ClientSettings, history: History, *,
                 isolation: str = "read_committed") -> None:
        super().__init__(consumer_id, settings, history)
        self.isolation = isolation

    def _session(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        s = self.settings
        consumer = Consumer({
            "bootstrap.servers": s.bootstrap, "group.id": f"faults-txn-reader-{self.consumer_id}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "isolation.level": self.isolation,
            "topic.metadata.refresh.interval.ms": 2000, "reconnect.backoff.max.ms": 1000,
            "fetch.wait.max.ms": 200, "enable.partition.eof": False,
            "logger": s.client_logger(),
        })
        try:
            consumer.assign([TopicPartition(s.topic, p, OFFSET_BEGINNING)
                             for p in range(s.partitions)])
            while not self._halt.is_set():
                for msg in consumer.consume(500, timeout=0.2):
                    if msg.error() is not None:
                        self.history.record("consumer_error", consumer=self.consumer_id,
                                            session=self.sessions, error=msg.error().name())
                        continue
                    self.records += 1
                    self.history.record("poll", consumer=self.consumer_id,
                                        session=self.sessions, partition=msg.partition(),
                                        offset=msg.offset(), value=msg.value().decode())
        finally:
            consumer.close()


def final_committed_read(settings: ClientSettings, history: History,
                         timeout: float = 120.0) -> bool:
    """Read every partition with read_committed from its beginning to its end as the
    read_committed consumer sees it (the last stable offset, asked until it stops moving:
    a transaction left open by a replaced producer is aborted within its timeout); True when
    every partition was read to its end."""
    from confluent_kafka import (
        OFFSET_BEGINNING,
        Consumer,
        KafkaError,
        KafkaException,
        TopicPartition,
    )

    s = settings
    consumer = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "faults-txn-final",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed",
                         "enable.partition.eof": True, "logger": s.client_logger()})
    deadline = time.monotonic() + timeout
    ends: dict[int, int] = {}
    done: set[int] = set()
    try:
        consumer.assign([TopicPartition(s.topic, p, OFFSET_BEGINNING)
                         for p in range(s.partitions)])
        eof: dict[int, int] = {}
        while len(done) < s.partitions and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is None:
                    history.record("final", partition=msg.partition(), offset=msg.offset(),
                                   value=msg.value().decode())
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    eof[msg.partition()] = msg.offset()
            for p in range(s.partitions):
                if p in done:
                    continue
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(s.topic, p),
                                                               timeout=5, cached=False)
                except KafkaException:
                    continue
                [position] = consumer.position([TopicPartition(s.topic, p)])
                ends[p] = high
                # The high watermark equals the LSO once no transaction is open; a marker
                # last in the partition is skipped, so the position (or the end-of-partition
                # event's offset), not a record, says the end was reached.
                reached = max(position.offset, eof.get(p, -1))
                if reached >= high or high == low == 0:
                    done.add(p)
    finally:
        consumer.close()
    for p in range(s.partitions):
        history.record("final_end", partition=p, high=ends.get(p), complete=p in done)
    return len(done) == s.partitions
