"""``df.write.format("moldau")`` and ``df.writeStream.format("moldau")``: the sink.

Columns, as Spark's Kafka sink: ``value`` (binary or string, required; null writes a
tombstone), ``key`` (binary or string), ``topic`` (string; the ``topic`` option overrides
it), ``partition`` (int; otherwise murmur2 of the key, or sticky for null keys) and
``headers`` (array<struct<key: string, value: binary>>). Other columns are ignored.

Streams are **exactly-once** by default (``delivery.guarantee``): each task writes its part
of a micro-batch in one transaction that also records the batch id, so a retried task or a
re-run batch is written once (:mod:`.txn_sink`). Batch writes, and streams with
``delivery.guarantee=at-least-once``, send rows with the process's cached idempotent
producer and flush before the task reports success: **at-least-once**, as Spark's own Kafka
sink, since Spark re-runs failed tasks and uncommitted micro-batches and records of the first
attempt stay in the topic. One such re-run is recognised and skipped in that mode: a batch
the sink had committed when the crash came (:mod:`.sink_commits`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

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

from moldau.client.config import KINDS

from .clients import admin_for, call, drop_producer, producer_for
from .options import OptionError, SinkOptions
from .schema import HEADERS_TYPE
from .sink_commits import already_committed, marker_path, task_batch, write_marker
from .sink_rows import MoldauCommitMessage, check_settled, send_rows
from .txn_sink import write_transactionally

log = logging.getLogger(__name__)


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
    """Fail on the driver, not after max.block.ms in every task, when the topic (or the
    exactly-once state topic) is missing."""
    wanted = {t for t in (options.topic, options.state_topic if options.exactly_once else None)
              if t is not None}
    if not wanted:
        return
    admin_config = {k: v for k, v in options.producer_config().items()
                    if k in KINDS["admin"]}
    topics = call(admin_for(admin_config).list_topics())
    for topic in sorted(wanted - set(topics)):
        what = "topic" if topic == options.topic else "exactly.once.state.topic"
        raise OptionError(
            f"{what} {topic!r} does not exist on {admin_config['bootstrap.servers']}; "
            f"create it first (e.g. moldau topics -b {admin_config['bootstrap.servers']} "
            f"--create --topic {topic})")


def write_batches(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> MoldauCommitMessage:
    """Send every row of ``batches``; return once all are acknowledged (raise otherwise)."""
    config = options.producer_config()
    producer = producer_for(config)
    try:
        futures = send_rows(producer, batches, options)
        call(producer.flush())
        return MoldauCommitMessage(check_settled(futures))
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
    """Streaming sink: exactly-once by default (:mod:`.txn_sink`); with
    ``delivery.guarantee=at-least-once``, a batch re-run after its commit is still skipped
    (:mod:`.sink_commits`)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> MoldauCommitMessage:
        query, batch = task_batch()
        if self.options.exactly_once:
            if query is None or batch is None:
                raise RuntimeError("the exactly-once sink needs Spark's query and batch id "
                                   "in the task context; use writeStream, or set the option "
                                   "delivery.guarantee=at-least-once")
            return write_transactionally(iterator, self.options, query, batch)
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
        if len(queries) == 1 and not self.options.exactly_once:
            # Exactly-once tasks recorded their batch in their own transactions.
            write_marker(marker_path(self.options.checkpoint), queries.pop(), batchId)
        total = sum(m.records for m in done)
        skipped = sum(1 for m in done if m.skipped)
        log.info("micro-batch %d: wrote %d records%s", batchId, total,
                 f" ({skipped} tasks skipped a re-run)" if skipped else "")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            log.warning("micro-batch %d aborted; tasks that committed their transaction are "
                        "skipped when the batch is re-run, the others write it then", batchId)
            return
        log.warning("micro-batch %d aborted; records of its successful tasks stay written and "
                    "the batch will be written again when it is re-run (at-least-once)",
                    batchId)
