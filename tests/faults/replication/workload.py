"""The fault suite's clients: producers of unique values, consumers reading as they go, and
the final full read, all confluent-kafka, all writing to one :class:`~.history.History`.

- :class:`ProducerWorker`: one ``Producer`` in a thread of its own (idempotent with
  ``acks=all`` by default), writing ``p<id>-<seq>`` to partition ``seq % partitions`` at a
  steady rate. An ``invoke`` event is written before each ``produce()``, an ``ok`` (with the
  acknowledged offset) or ``fail`` from its delivery report. ``message.timeout.ms`` is long
  (a patient producer): a fault round may leave a partition without a leader for a while.
- :class:`ConsumerWorker`: one ``Consumer`` without a group (``assign`` from the beginning of
  every partition: no coordinator to fail over), each record a ``poll`` event. A consumer
  that errors out is replaced by a new instance (a new ``session``) that starts again from
  the beginning; offsets must increase within one instance only.
- :func:`final_read`: after the faults, every partition from its beginning to its high
  watermark, each record a ``final`` event and ``final_end`` per partition.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from .history import History

__all__ = ["ClientSettings", "ConsumerWorker", "ProducerWorker", "final_read"]


#: librdkafka debug contexts (e.g. ``eos,msg``) for the transactional producers, written with
#: the rest of librdkafka's log to the run's clients.log: ``MOLDAU_FAULTS_RDKAFKA_DEBUG``.
RDKAFKA_DEBUG = os.environ.get("MOLDAU_FAULTS_RDKAFKA_DEBUG", "")

@dataclass(frozen=True)
class ClientSettings:
    """What the workload's clients are told."""

    bootstrap: str
    topic: str
    partitions: int
    acks: str = "all"
    idempotence: bool = True
    rate: float = 50.0            # records per second per producer
    message_timeout_ms: int = 300_000
    #: librdkafka's own log lines (connection refused, ... expected under faults) go here
    log_path: str | None = None

    def client_logger(self) -> logging.Logger:
        logger = logging.getLogger(f"faults.clients.{self.topic}")
        if not logger.handlers:
            logger.propagate = False
            handler: logging.Handler = (logging.FileHandler(self.log_path) if self.log_path
                                        else logging.NullHandler())
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG if RDKAFKA_DEBUG else logging.INFO)
        return logger


class ProducerWorker(threading.Thread):
    """Produce unique values until :meth:`finish`; every attempt and outcome is recorded."""

    def __init__(self, producer_id: int, settings: ClientSettings, history: History) -> None:
        super().__init__(name=f"producer-{producer_id}", daemon=True)
        self.producer_id = producer_id
        self.settings = settings
        self.history = history
        self._halt = threading.Event()
        self.flush_timeout = 60.0
        self.unresolved = 0
        self.error: BaseException | None = None

    def _config(self) -> dict[str, Any]:
        s = self.settings
        config: dict[str, Any] = {
            "bootstrap.servers": s.bootstrap, "acks": s.acks,
            "enable.idempotence": s.idempotence, "message.timeout.ms": s.message_timeout_ms,
            "linger.ms": 5, "retry.backoff.ms": 200, "retry.backoff.max.ms": 1000,
            "reconnect.backoff.max.ms": 1000, "socket.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 2000, "logger": s.client_logger(),
        }
        if not s.idempotence:
            # at most one in flight keeps a non-idempotent producer's retries in order
            config["max.in.flight.requests.per.connection"] = 1
        return config

    def run(self) -> None:
        from confluent_kafka import KafkaException, Producer

        producer = Producer(self._config())
        s = self.settings
        history = self.history

        def report(err: Any, msg: Any) -> None:
            value = msg.value().decode()
            if err is None:
                history.record("ok", value=value, partition=msg.partition(),
                               offset=msg.offset())
            else:
                history.record("fail", value=value, partition=msg.partition(),
                               error=err.name(), retriable=err.retriable(),
                               fatal=err.fatal())

        seq = 0
        interval = 1.0 / s.rate
        next_at = time.monotonic()
        try:
            while not self._halt.is_set():
                value = f"p{self.producer_id}-{seq}"
                partition = seq % s.partitions
                history.record("invoke", producer=self.producer_id, seq=seq, value=value,
                               partition=partition)
                while True:
                    try:
                        producer.produce(s.topic, value.encode(), partition=partition,
                                         on_delivery=report)
                        break
                    except BufferError:  # the local queue is full: the cluster is stuck
                        if self._halt.is_set():
                            history.record("fail", value=value, partition=partition,
                                           error="NOT_SENT", retriable=False, fatal=False)
                            break
                        producer.poll(0.1)
                    except KafkaException as exc:  # fatal idempotence error: recorded, stop
                        history.record("fail", value=value, partition=partition,
                                       error=str(exc), retriable=False, fatal=True)
                        raise
                seq += 1
                next_at += interval
                while True:
                    producer.poll(max(0.0, min(0.05, next_at - time.monotonic())))
                    if time.monotonic() >= next_at or self._halt.is_set():
                        break
        except BaseException as exc:  # recorded for the runner; the history has the detail
            self.error = exc
        finally:
            self.unresolved = producer.flush(self.flush_timeout)

    def halt(self, flush_timeout: float) -> None:
        """Stop producing; the thread then waits up to ``flush_timeout`` s for outstanding
        outcomes (join it)."""
        self.flush_timeout = flush_timeout
        self._halt.set()


class ConsumerWorker(threading.Thread):
    """Read every partition from the beginning, as records arrive, until :meth:`finish`."""

    def __init__(self, consumer_id: int, settings: ClientSettings, history: History) -> None:
        super().__init__(name=f"consumer-{consumer_id}", daemon=True)
        self.consumer_id = consumer_id
        self.settings = settings
        self.history = history
        self._halt = threading.Event()
        self.sessions = 0
        self.records = 0

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self._session()
            except Exception as exc:  # a broken client: a new instance starts over
                self.history.record("consumer_error", consumer=self.consumer_id,
                                    session=self.sessions, error=repr(exc))
                time.sleep(1.0)
            self.sessions += 1

    def _session(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        s = self.settings
        consumer = Consumer({
            "bootstrap.servers": s.bootstrap, "group.id": f"faults-reader-{self.consumer_id}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
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

    def finish(self) -> None:
        self._halt.set()
        self.join(60)


def final_read(settings: ClientSettings, history: History, timeout: float = 120.0) -> bool:
    """Read every partition from its beginning to its high watermark (asked once, at the
    start: the producers have stopped); True when every partition was read to its end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    s = settings
    consumer = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "faults-final",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True, "logger": s.client_logger()})
    deadline = time.monotonic() + timeout
    ends: dict[int, int] = {}
    positions: dict[int, int] = {}
    try:
        for p in range(s.partitions):
            while p not in ends:
                try:
                    ends[p] = consumer.get_watermark_offsets(
                        TopicPartition(s.topic, p), timeout=10)[1]
                except KafkaException:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
        readable = [p for p in ends if ends[p] > 0]
        consumer.assign([TopicPartition(s.topic, p, OFFSET_BEGINNING) for p in readable])
        waiting = set(readable)
        while waiting and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                p = msg.partition()
                if msg.error() is not None:
                    continue  # end-of-partition events: the position decides below
                if p not in waiting:
                    continue
                if msg.offset() < ends[p]:
                    history.record("final", partition=p, offset=msg.offset(),
                                   value=msg.value().decode())
                positions[p] = msg.offset() + 1
                if positions[p] >= ends[p]:
                    waiting.discard(p)
    finally:
        consumer.close()
    complete = True
    for p in range(s.partitions):
        done = p in ends and (ends[p] == 0 or positions.get(p, 0) >= ends[p])
        complete = complete and done
        history.record("final_end", partition=p, high=ends.get(p), complete=done,
                       position=positions.get(p, 0))
    return complete
