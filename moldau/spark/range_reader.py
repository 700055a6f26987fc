"""Executor side of a read: one task reads one offset range and yields Arrow record batches.

The consumer comes from the process cache (:mod:`.clients`); when it already stands at the
range's start (the previous micro-batch of this partition ended there) its prefetched records
are used as they are, otherwise it seeks. Records are decoded into columns by the client
(``poll_batches``) and turned into Arrow arrays here, a whole poll at a time.

Data loss — the range starts before the partition's log start offset (retention, DeleteRecords)
or the log ends before the range does (topic deleted and recreated, unclean leader election) —
fails the task with ``failOnDataLoss=true`` (the default) and is skipped with a warning with
``failOnDataLoss=false``, as in Spark's Kafka source.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterator

import pyarrow as pa

from moldau.client import Consumer
from moldau.client.decode import BatchColumns
from moldau.client.errors import OffsetOutOfRangeError
from moldau.client.types import TopicPartition

from .clients import CachedConsumer, call, consumer_for, drop_consumer
from .options import SourceOptions
from .planning import OffsetRange
from .registry_decode import decode_batch
from .schema import to_record_batch

log = logging.getLogger(__name__)

# Records asked for per poll: one Arrow batch each; big enough that Spark's per-batch costs
# vanish, small enough to keep a task's memory modest.
POLL_RECORDS = 50_000
# Empty polls, with the log end at or below the position, before the missing tail counts as
# data loss (a new leader's high watermark can briefly lag).
_EMPTY_POLLS_FOR_LOSS = 3

_DATA_LOSS_HINT = (
    "Some data may have been lost because they are not available in the cluster any more; "
    "either the data was aged out or deleted, or the topic was deleted and recreated before "
    "all its data was processed. If you do not want the query to fail in such cases, set the "
    "source option failOnDataLoss to false.")


class DataLossError(RuntimeError):
    """Records a query was to read are gone (see the module docstring)."""


def read_range(r: OffsetRange, options: SourceOptions) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``r`` as Arrow batches (Spark's Kafka source schema)."""
    if r.end <= r.start:
        return
    config = options.consumer_config()
    cached = consumer_for(config, r.tp)
    finished = False
    try:
        yield from _read(cached, r, options)
        finished = True
    except Exception:
        # Whatever went wrong, the next task starts with a fresh consumer.
        drop_consumer(config, r.tp)
        raise
    finally:
        if not finished:
            cached.next_offset = None  # stopped early (error or LIMIT): seek next time


def _report_loss(options: SourceOptions, message: str) -> None:
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. {_DATA_LOSS_HINT}")
    log.warning("%s; skipping them (failOnDataLoss=false)", message)


async def _seek(consumer: Consumer, tp: TopicPartition, offset: int) -> None:
    consumer.seek(tp, offset)


async def _poll(consumer: Consumer, tp: TopicPartition, max_records: int
                ) -> tuple[list[tuple[TopicPartition, BatchColumns]], int, int]:
    batches = await consumer.poll_batches(1.0, max_records)
    return batches, await consumer.position(tp), consumer.highwater(tp)


async def _earliest(consumer: Consumer, tp: TopicPartition) -> int:
    return (await consumer.beginning_offsets([tp]))[tp]


def _read(cached: CachedConsumer, r: OffsetRange, options: SourceOptions
          ) -> Iterator[pa.RecordBatch]:
    consumer, tp = cached.consumer, r.tp
    if cached.next_offset != r.start:
        call(_seek(consumer, tp, r.start))
    cached.next_offset = None
    position = r.start
    timeout_s = options.poll_timeout_ms / 1000
    last_progress = time.monotonic()
    empty_at_end = 0
    while position < r.end:
        try:
            batches, position_after, high = call(
                _poll(consumer, tp, min(POLL_RECORDS, r.end - position)))
        except OffsetOutOfRangeError:
            earliest = call(_earliest(consumer, tp))
            _report_loss(options, f"Cannot fetch offset {position} of {tp}: the earliest "
                         f"offset available is {earliest}")
            if earliest >= r.end or earliest <= position:
                return
            call(_seek(consumer, tp, earliest))
            position = earliest
            continue
        parts = []
        for _tp, cols in batches:
            if cols.offsets and cols.offsets[-1] >= r.end:
                cut = bisect.bisect_left(cols.offsets, r.end)
                cols = _head(cols, cut)
            if cols.offsets:
                parts.append(cols)
        if parts:
            batch = to_record_batch(r.topic, r.partition, parts, options.include_headers)
            if options.decoding.active:
                batch = decode_batch(r.topic, batch, options.decoding)
            yield batch
        if position_after > position:
            position = position_after
            last_progress = time.monotonic()
            empty_at_end = 0
            continue
        if 0 <= high <= position:
            empty_at_end += 1
            if empty_at_end >= _EMPTY_POLLS_FOR_LOSS:
                _report_loss(options, f"{tp} ends at offset {high}, but offsets up to "
                             f"{r.end} were to be read (from {position})")
                return
        if time.monotonic() - last_progress > timeout_s:
            raise TimeoutError(
                f"no records of {tp} for offsets [{position}, {r.end}) within "
                f"{options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); is the broker "
                "reachable from the executors (kafka.broker.address.map)?")
    if position == r.end:
        cached.next_offset = r.end


def _head(cols: BatchColumns, n: int) -> BatchColumns:
    return BatchColumns(
        cols.base_offset, cols.last_offset, cols.timestamp_type, cols.offsets[:n],
        cols.timestamps[:n], cols.keys[:n], cols.values[:n],
        cols.headers[:n] if cols.headers is not None else None,
        cols.producer_id, cols.is_transactional)
