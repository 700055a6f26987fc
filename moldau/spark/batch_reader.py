"""``spark.read.format("moldau")``: a bounded read from startingOffsets to endingOffsets.

``partitions()`` runs once, on the driver's planner, and turns the options into offset
ranges (one task per partition range, split further by ``minPartitions`` and
``maxRecordsPerPartition``); ``read()`` runs on the executors.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .offset_reader import OffsetReader
from .options import OptionError, SourceOptions
from .planning import OffsetRange, Range, split_ranges
from .range_reader import read_range

log = logging.getLogger(__name__)


class MoldauBatchReader(DataSourceReader):  # type: ignore[misc]
    """Reads the offset ranges the options describe (see docs/spark.md)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return plan_batch(self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):
            yield from read_range(partition, self.options)


def plan_batch(options: SourceOptions) -> list[InputPartition]:
    """Offset ranges of a batch read, as Spark tasks."""
    reader = OffsetReader(options)
    tps = reader.partitions()
    if not tps:
        return []
    start = reader.resolve(options.starting, tps, what="startingOffsets")
    end = reader.resolve(options.ending, tps, ending=True, what="endingOffsets")
    ranges = []
    for tp in tps:
        lo, hi = start[tp], end[tp]
        if lo > hi:
            message = (f"the starting offset {lo} of {tp} is after its ending offset {hi} "
                       f"(startingOffsets {options.starting.describe()}, endingOffsets "
                       f"{options.ending.describe()})")
            if options.fail_on_data_loss:
                raise OptionError(message)
            log.warning("%s; reading nothing from it (failOnDataLoss=false)", message)
            continue
        ranges.append(Range(tp, lo, hi))
    pieces = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    return [OffsetRange.of(r) for r in pieces]
