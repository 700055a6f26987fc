"""Per-partition record batching for the producer (no I/O; the sender drains it).

Records append to the newest open batch of their partition. A batch is *ready* to send when
it is full (``batch.size``), when its first record has waited ``linger.ms``, when a later
batch exists behind it, or when the producer flushes or closes. With idempotence, a
partition with a batch in flight is *muted*: its next batch waits, so sequence numbers reach
the broker in order and a retried batch is resent with the same sequence.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from moldau.protocol.records.codec import build_batch
from moldau.protocol.records.compression import Codec

from .types import Header, RecordMetadata, TopicPartition

# Bytes per record beyond key/value/headers (varints, attributes) and per batch (header).
RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61


def estimate_size(key: bytes | None, value: bytes | None, headers: Sequence[Header]) -> int:
    """Upper-bound estimate of a record's encoded size (uncompressed)."""
    size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for hkey, hvalue in headers:
        size += len(hkey) + (len(hvalue) if hvalue else 0) + 10
    return size


@dataclass(eq=False)
class ProducerBatch:
    """Records for one partition that travel together; retried as the same bytes."""

    tp: TopicPartition
    created: float
    records: list[tuple[bytes | None, bytes | None, Sequence[Header], int]] = field(
        default_factory=list)
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    size: int = BATCH_OVERHEAD
    attempts: int = 0
    base_sequence: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    encoded: bytes | None = None
    closed: bool = False
    retry_after: float = 0.0
    transactional: bool = False

    def try_append(
        self, key: bytes | None, value: bytes | None, headers: Sequence[Header], ts: int,
        size: int, future: asyncio.Future[RecordMetadata], batch_size: int,
    ) -> bool:
        """Add a record unless the batch is closed or would exceed ``batch_size``.

        The first record always fits (an oversized record travels alone).
        """
        if self.closed or (self.records and self.size + size > batch_size):
            return False
        self.records.append((key, value, headers, ts))
        self.futures.append(future)
        self.size += size
        return True

    def encode(self, codec: Codec | int) -> bytes:
        """The batch bytes, built once; producer id and sequence are fixed at first encode."""
        if self.encoded is None:
            self.closed = True
            self.encoded = build_batch(
                self.records, codec=codec, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, base_sequence=self.base_sequence,
                transactional=self.transactional,
            )
        return self.encoded

    def reset_producer(self) -> None:
        """Forget id/sequence/bytes so the batch is re-encoded under a new producer id."""
        self.encoded = None
        self.base_sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1

    def complete(self, base_offset: int, log_append_time: int = -1) -> None:
        for i, (record, future) in enumerate(zip(self.records, self.futures, strict=True)):
            if not future.done():
                ts = log_append_time if log_append_time >= 0 else record[3]
                offset = base_offset + i if base_offset >= 0 else -1
                future.set_result(RecordMetadata(self.tp.topic, self.tp.partition, offset, ts))

    def fail(self, error: BaseException) -> None:
        for future in self.futures:
            if not future.done():
                future.set_exception(error)


class RecordAccumulator:
    """Queues of batches per partition plus the readiness rules."""

    def __init__(self, batch_size: int, linger_ms: int, guarantee_order: bool) -> None:
        self.batch_size = batch_size
        self.linger = linger_ms / 1000
        self.guarantee_order = guarantee_order
        self.queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.in_flight: set[TopicPartition] = set()
        self.buffered_bytes = 0
        self.flushing = 0

    def append(
        self, tp: TopicPartition, key: bytes | None, value: bytes | None,
        headers: Sequence[Header], ts: int, future: asyncio.Future[RecordMetadata], now: float,
    ) -> tuple[ProducerBatch, bool]:
        """Append a record; returns (its batch, whether that batch is now full)."""
        size = estimate_size(key, value, headers)
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        if queue:
            last = queue[-1]
            if last.try_append(key, value, headers, ts, size, future, self.batch_size):
                self.buffered_bytes += size
                return last, last.size >= self.batch_size
            last.closed = True
        batch = ProducerBatch(tp, now)
        batch.try_append(key, value, headers, ts, size, future, self.batch_size)
        queue.append(batch)
        self.buffered_bytes += size
        return batch, batch.size >= self.batch_size

    def is_ready(self, batch: ProducerBatch, queue_len: int, now: float) -> bool:
        if now < batch.retry_after:
            return False
        return (
            batch.closed or queue_len > 1 or batch.size >= self.batch_size
            or self.flushing > 0 or batch.attempts > 0
            or now - batch.created >= self.linger
        )

    def ready(self, now: float) -> tuple[list[TopicPartition], float | None]:
        """Partitions whose head batch may be sent now, and the next time one becomes ready."""
        ready: list[TopicPartition] = []
        next_time: float | None = None
        for tp, queue in self.queues.items():
            if not queue or (self.guarantee_order and tp in self.in_flight):
                continue
            head = queue[0]
            if self.is_ready(head, len(queue), now):
                ready.append(tp)
            else:
                due = max(head.created + self.linger, head.retry_after)
                next_time = due if next_time is None else min(next_time, due)
        return ready, next_time

    def pop(self, tp: TopicPartition) -> ProducerBatch:
        batch = self.queues[tp].popleft()
        batch.closed = True
        return batch

    def requeue(self, batch: ProducerBatch) -> None:
        """Put a batch back at the head of its partition (retry with the same sequence)."""
        self.queues.setdefault(batch.tp, deque()).appendleft(batch)

    def release(self, batch: ProducerBatch) -> None:
        """A batch left the accumulator for good (acknowledged or failed)."""
        self.buffered_bytes -= batch.size - BATCH_OVERHEAD

    def batches(self) -> Iterable[ProducerBatch]:
        for queue in self.queues.values():
            yield from queue

    def has_unsent(self) -> bool:
        return any(self.queues.values())
