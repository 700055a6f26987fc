"""Sending a write task's Arrow batches through a moldau producer (both sink modes).

Columns as Spark's Kafka sink: ``value`` (required), ``key``, ``topic`` (the ``topic`` option
wins), ``partition`` and ``headers``; the schema was checked on the driver
(:func:`moldau.spark.writer.check_sink_schema`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from moldau.client import Producer

from .clients import call
from .options import OptionError, SinkOptions


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


def column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    """Column ``name`` (case-insensitive) as a Python list, None when absent."""
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


def send_rows(producer: Producer, batches: Iterable[pa.RecordBatch],
              options: SinkOptions) -> list[asyncio.Future[Any]]:
    """Hand every row of ``batches`` to ``producer``; the futures of the records.

    Flushes whenever half of ``buffer.memory`` is queued, so a big task does not block
    in ``send`` for ``max.block.ms``.
    """
    limit = int(options.producer_config().get("buffer.memory", 33554432)) // 2
    futures: list[asyncio.Future[Any]] = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        values = column(batch, "value")
        assert values is not None, "the sink schema was checked on the driver"
        futures += call(_send(
            producer, batch.num_rows, options.topic,
            None if options.topic is not None else column(batch, "topic"),
            column(batch, "key"), values, column(batch, "partition"),
            column(batch, "headers")))
        if producer.buffered_bytes > limit:
            call(producer.flush())
    return futures


def check_settled(futures: Sequence[asyncio.Future[Any]]) -> int:
    """The number of records, once every future succeeded (raise otherwise)."""
    failed = [f for f in futures if not f.done() or f.cancelled() or f.exception() is not None]
    if failed:
        first = failed[0]
        error = (first.exception() if first.done() and not first.cancelled()
                 else "cancelled or unfinished")
        raise RuntimeError(f"{len(failed)} of {len(futures)} records were not written: {error}")
    return len(futures)
