"""Offset ranges: the checkpointed offset format, admission control and splitting into tasks.

Offsets travel as Spark's Kafka source writes them into its checkpoint:
``{"topic": {"0": 42, "1": 17}}`` (JSON object keys are strings, so partitions are strings
there). :func:`to_json_offsets` and :func:`from_json_offsets` convert between that and
``{TopicPartition: offset}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from moldau.client.types import TopicPartition

PartitionOffsets = dict[TopicPartition, int]


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{TopicPartition: offset}`` to the checkpoint format (sorted, for stable JSON)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json_offsets(data: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """The checkpoint format back to ``{TopicPartition: offset}``."""
    return {TopicPartition(topic, int(part)): int(off)
            for topic, parts in data.items() for part, off in parts.items()}


def rate_limit(limit: int, start: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int]) -> PartitionOffsets:
    """End offsets that admit at most ``limit`` records in total, shared by backlog size.

    Each partition gets ``limit * backlog / total`` records rounded down; the records left
    over go one by one to the partitions with the largest remainders, so the total is exactly
    ``min(limit, total backlog)`` and a small partition is not starved forever.
    """
    backlog = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: 0 for tp in latest}
    remainders: list[tuple[float, TopicPartition]] = []
    given = 0
    for tp, size in backlog.items():
        if size <= 0:
            continue
        exact = limit * size / total
        shares[tp] = min(size, int(exact))
        given += shares[tp]
        remainders.append((exact - int(exact), tp))
    remainders.sort(key=lambda item: (-item[0], item[1]))
    left = limit - given
    while left > 0 and remainders:
        for _frac, tp in remainders:
            if left <= 0:
                break
            if shares[tp] < backlog[tp]:
                shares[tp] += 1
                left -= 1
        remainders = [(f, tp) for f, tp in remainders if shares[tp] < backlog[tp]]
    return {tp: (start[tp] + shares[tp]) if tp in start and backlog[tp] > 0 else latest[tp]
            for tp in latest}


@dataclass(frozen=True)
class Range:
    """Offsets ``[start, end)`` of one partition."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(ranges: Iterable[Range], min_partitions: int | None = None,
                 max_records: int | None = None) -> list[Range]:
    """One task per partition range, split further for ``minPartitions``/``maxRecordsPerPartition``.

    As in Spark's Kafka source, big ranges are split in proportion to their size until there
    are at least ``min_partitions`` pieces, and no piece holds more than ``max_records``.
    Empty ranges are dropped.
    """
    pieces = [r for r in ranges if r.size > 0]
    if max_records:
        split: list[Range] = []
        for r in pieces:
            parts = -(-r.size // max_records)
            split.extend(_cut(r, parts))
        pieces = split
    if min_partitions and len(pieces) < min_partitions:
        total = sum(r.size for r in pieces)
        split = []
        for r in pieces:
            parts = max(1, -(-min_partitions * r.size // total)) if total else 1
            split.extend(_cut(r, min(parts, r.size)))
        pieces = split
    return pieces


def _cut(r: Range, parts: int) -> list[Range]:
    if parts <= 1:
        return [r]
    out = []
    for i in range(parts):
        lo = r.start + r.size * i // parts
        hi = r.start + r.size * (i + 1) // parts
        if hi > lo:
            out.append(Range(r.tp, lo, hi))
    return out


class OffsetRange(InputPartition):  # type: ignore[misc]
    """One Spark task: read ``[start, end)`` of ``topic``-``partition`` (pickled to executors)."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    @classmethod
    def of(cls, r: Range) -> OffsetRange:
        return cls(r.tp.topic, r.tp.partition, r.start, r.end)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}-{self.partition} [{self.start}, {self.end}))"
