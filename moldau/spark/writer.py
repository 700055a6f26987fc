"""``df.write.format("moldau")`` and ``df.writeStream.format("moldau")``: the sink.

Columns, as Spark's Kafka sink: ``value`` (binary or string, required; null writes a
tombstone), ``key`` (binary or string), ``topic`` (string; the ``topic`` option overrides
it), ``partition`` (int; otherwise murmur2 of the key, or sticky for null keys) and
``headers`` (array<struct<key: string, value: binary>>). Other columns are ignored.

Each task sends its rows with the process's cached moldau producer — idempotent by default,
so a retried Produce request never duplicates a record — and flushes before it reports
success. Delivery is **at-least-once**: Spark re-runs a failed task, and re-runs a whole
micro-batch after a crash before the batch was committed to the checkpoint, and records
sent by the first attempt stay in the topic. One such re-run is recognised and skipped: a
batch the sink had committed when the crash came (:mod:`.sink_commits`). Exactly-once needs
transactions (a later issue).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from moldau.client import Producer
from moldau.client.config import KINDS

from .clients import admin_for, call, drop_producer, producer_for
from .options import OptionError, SinkOptions
from .schema import HEADERS_TYPE
from .sink_commits import already_committed, marker_path, task_batch, write_marker

log = logging.getLogger(__name__)


@dataclass
class MoldauCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one write task did: how many records it sent (all acknowledged).

    Stream tasks add their query and batch id; ``skipped`` marks a task of a re-run batch
    that the sink had committed already (see :mod:`.sink_commits`).
    """

    records: int
    query: str | None = None
    batch: int | None = None
    skipped: bool = False


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's Kafka sink rules for the written DataFrame's columns (raises OptionError)."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if options.topic is None and "topic" not in fields:
        raise OptionError("topic option required when no 'topic' attribute is present. "
                          "Use the topic option for setting a topic.")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise OptionError(f"Topic type must be a string, not {fields['topic'].simpleString()}")
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found: the written DataFrame needs "
                          "a 'value' column (binary or string)")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise OptionError(f"{name} attribute type must be a string or binary, not "
                              f"{fields[name].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError("partition attribute type must be an int, not "
                          f"{fields['partition'].simpleString()}")
    if "headers" in fields:
        kind = fields["headers"]
        if not (isinstance(kind, ArrayType) and kind.elementType.simpleString()
                == HEADERS_TYPE.elementType.simpleString()):
            raise OptionError("headers attribute type must be an "
                              "array<struct<key:string,value:binary>>, not "
                              f"{kind.simpleString()}")


def check_sink_topic(options: SinkOptions) -> None:
    """Fail on the driver, not after max.block.ms in every task, when the topic is missing."""
    if options.topic is None:
        return
    admin_config = {k: v for k, v in options.producer_config().items()
                    if k in KINDS["admin"]}
    topics = call(admin_for(admin_config).list_topics())
    if options.topic not in topics:
        raise OptionError(
            f"topic {options.topic!r} does not exist on {admin_config['bootstrap.servers']}; "
            f"create it first (e.g. moldau topics -b {admin_config['bootstrap.servers']} "
            f"--create --topic {options.topic})")


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    for i, field in enumerate(batch.schema):
        if field.name.lower() == name:
            return batch.column(i).to_pylist()
    return None


async def _send(producer: Producer, rows: int, topic: str | None, topics: list[Any] | None,
                keys: list[Any] | None, values: list[Any], partitions: list[Any] | None,
                headers: list[Any] | None) -> list[asyncio.Future[Any]]:
    futures = []
    send = producer.send
    for i in range(rows):
        name = topic if topic is not None else topics[i] if topics is not None else None
        if name is None:
            raise OptionError("null topic present in the data. Use the topic option for "
                              "setting a default topic.")
        hdrs = headers[i] if headers is not None else None
        futures.append(send(
            name, values[i],
            key=keys[i] if keys is not None else None,
            headers=[(h["key"], h["value"]) for h in hdrs] if hdrs else None,
            partition=partitions[i] if partitions is not None else None,
        ))
    return futures


async def _settle(producer: Producer, futures: Sequence[asyncio.Future[Any]]) -> int:
    await producer.flush()
    failed = [f for f in futures if f.cancelled() or f.exception() is not None]
    if failed:
        first = failed[0]
        error = first.exception() if not first.cancelled() else "cancelled"
        raise RuntimeError(f"{len(failed)} of {len(futures)} records were not written: {error}")
    return len(futures)


def write_batches(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> MoldauCommitMessage:
    """Send every row of ``batches``; return once all are acknowledged (raise otherwise)."""
    config = options.producer_config()
    producer = producer_for(config)
    limit = int(config.get("buffer.memory", 33554432)) // 2
    futures: list[asyncio.Future[Any]] = []
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            values = _column(batch, "value")
            assert values is not None, "the sink schema was checked on the driver"
            futures += call(_send(
                producer, batch.num_rows, options.topic,
                None if options.topic is not None else _column(batch, "topic"),
                _column(batch, "key"), values, _column(batch, "partition"),
                _column(batch, "headers")))
            if producer.buffered_bytes > limit:
                call(producer.flush())
        return MoldauCommitMessage(call(_settle(producer, futures)))
    except BaseException:
        # The producer may hold records of this failed attempt; start the retry afresh.
        drop_producer(config)
        raise


class MoldauBatchWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """Batch sink: each task writes its rows; commit just logs the total."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> MoldauCommitMessage:
        return write_batches(iterator, self.options)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, MoldauCommitMessage))
        log.info("wrote %d records", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        written = sum(m.records for m in messages if isinstance(m, MoldauCommitMessage))
        log.warning("write aborted; %d records of successful tasks stay written "
                    "(at-least-once)", written)


class MoldauStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """Streaming sink: at-least-once; a batch re-run after its commit is not written again."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> MoldauCommitMessage:
        query, batch = task_batch()
        if already_committed(marker_path(self.options.checkpoint), query, batch):
            for _ in iterator:  # Spark streams the rows to us either way
                pass
            log.info("micro-batch %s of query %s was committed before; not writing it again",
                     batch, query)
            return MoldauCommitMessage(0, query, batch, skipped=True)
        message = write_batches(iterator, self.options)
        message.query, message.batch = query, batch
        return message

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, MoldauCommitMessage)]
        queries = {m.query for m in done if m.query is not None}
        if len(queries) == 1:
            write_marker(marker_path(self.options.checkpoint), queries.pop(), batchId)
        total = sum(m.records for m in done)
        skipped = sum(1 for m in done if m.skipped)
        log.info("micro-batch %d: wrote %d records%s", batchId, total,
                 f" ({skipped} tasks skipped a re-run)" if skipped else "")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %d aborted; records of its successful tasks stay written and "
                    "the batch will be written again when it is re-run (at-least-once)",
                    batchId)

