"""``spark.readStream.format("moldau")``: micro-batches of offset ranges, offsets in the checkpoint.

Driver side (one long-lived Python process per query): ``initialOffset`` resolves
startingOffsets; ``latestOffset(start, limit)`` discovers partitions, asks for the latest
offsets and applies admission control (``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``
with ``maxTriggerDelay``); ``partitions(start, end)`` plans the tasks. Offsets are plain JSON
in Spark's Kafka format, ``{"topic": {"0": 42}}``, so Spark writes them into the query's
checkpoint and hands them back after a restart: nothing is committed to the cluster.

``Trigger.AvailableNow`` is supported (:class:`SupportsTriggerAvailableNow`): the latest
offsets at the start of the query are the target, read in micro-batches that still respect
``maxOffsetsPerTrigger``. Partitions that appear later start at their earliest offset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from .clients import drop_admin
from .offset_reader import OffsetReader
from .options import SourceOptions
from .planning import (
    OffsetRange,
    PartitionOffsets,
    Range,
    from_json_offsets,
    rate_limit,
    split_ranges,
    to_json_offsets,
)
from .range_reader import DataLossError, read_range

log = logging.getLogger(__name__)


class MoldauStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batch reader with admission control (see the module docstring)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None
        self._last_batch_at = time.monotonic()

    @property
    def _reader(self) -> OffsetReader:
        return OffsetReader(self.options)

    # --- offsets ------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        reader = self._reader
        tps = reader.partitions()
        return to_json_offsets(reader.resolve(self.options.starting, tps))

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.options
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.min_offsets_per_trigger is not None:
            return ReadMinRows(o.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        reader = self._reader
        self._target = reader.latest(reader.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        reader = self._reader
        begin = from_json_offsets(start)
        if self._target is not None:
            latest = dict(self._target)
        else:
            latest = reader.latest(reader.partitions())
        self._latest = latest
        # Partitions that are new since the last batch start at their earliest offset.
        new = [tp for tp in latest if tp not in begin]
        begin.update(reader.earliest(new))
        end = latest if isinstance(limit, ReadAllAvailable) else self._admit(begin, latest)
        if end != {tp: begin[tp] for tp in end}:
            self._last_batch_at = time.monotonic()
        # Partitions of the previous batch that disappeared keep their offset: the loss is
        # reported when planning (failOnDataLoss).
        for tp, off in from_json_offsets(start).items():
            end.setdefault(tp, off)
        return to_json_offsets(end)

    def _admit(self, begin: PartitionOffsets, latest: PartitionOffsets) -> PartitionOffsets:
        o = self.options
        available = sum(max(0, latest[tp] - begin.get(tp, latest[tp])) for tp in latest)
        if (o.min_offsets_per_trigger is not None and self._target is None
                and available < o.min_offsets_per_trigger):
            waited_ms = (time.monotonic() - self._last_batch_at) * 1000
            if waited_ms < o.max_trigger_delay_ms:
                return {tp: begin[tp] for tp in latest}
        if o.max_offsets_per_trigger is not None:
            return rate_limit(o.max_offsets_per_trigger, begin, latest)
        return dict(latest)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_json_offsets(self._latest)

    # --- planning and reading -----------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = from_json_offsets(start), from_json_offsets(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin.update(self._reader.earliest(new))
        ranges = []
        for tp, hi in sorted(stop.items()):
            lo = begin[tp]
            if hi < lo:
                self._data_loss(f"{tp}'s offset went back from {lo} to {hi} (the topic was "
                                "deleted and recreated, or records were truncated)")
                continue
            ranges.append(Range(tp, lo, hi))
        gone = [tp for tp in begin if tp not in stop]
        if gone:
            self._data_loss("partitions " + ", ".join(map(str, gone)) + " are gone")
        pieces = split_ranges(ranges, self.options.min_partitions,
                              self.options.max_records_per_partition)
        return [OffsetRange.of(r) for r in pieces]

    def _data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(
                f"{message}; some data may have been lost. If you want the query to go on in "
                "such cases, set the source option failOnDataLoss to false.")
        log.warning("%s; some data may have been lost (failOnDataLoss=false)", message)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):
            yield from read_range(partition, self.options)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark keeps the offsets in the checkpoint."""

    def stop(self) -> None:
        drop_admin(self.options.admin_config())


__all__ = ["MoldauStreamReader"]
