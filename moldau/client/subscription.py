"""Which partitions a consumer reads and where it stands in each.

Two offsets per partition: ``position`` (next offset handed to the application) and
``fetch_offset`` (next offset to ask the broker for; ahead of ``position`` while prefetched
data waits in the buffer). ``generation`` changes on every seek and is never reused, not even
by the state of a partition that was unassigned and assigned again, so a fetch answer that was
in flight before the seek (or before the partition went away) is recognised as stale and
dropped.

The group layer (``moldau.client.group``) drives :meth:`SubscriptionState.assign` on
rebalance and reads/writes positions for commits; nothing here knows about groups.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .decode import BatchColumns
from .types import TopicPartition

# Generations come from one counter: a new state of a re-assigned partition must not start at
# a number its previous state had (an answer to the old state's fetch would then be taken,
# and its records at the old fetch offset would skip everything between).
_generations = itertools.count(1)

EARLIEST = "earliest"
LATEST = "latest"


@dataclass(eq=False)
class FetchedData:
    """The records blob of one partition from one Fetch answer, consumed batch by batch."""

    tp: TopicPartition
    generation: int
    records: bytes
    pos: int = 0
    aborted: list[tuple[int, int]] = field(default_factory=list)  # (first_offset, pid)

    @property
    def size(self) -> int:
        return len(self.records)


@dataclass(eq=False)
class PartitionState:
    """Per-partition consumer state."""

    tp: TopicPartition
    position: int | None = None
    fetch_offset: int | None = None
    reset: str | None = None
    paused: bool = False
    generation: int = field(default_factory=lambda: next(_generations))
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    leader_epoch: int = -1
    in_flight: bool = False
    buffer: deque[FetchedData] = field(default_factory=deque)
    buffered_bytes: int = 0
    leftover: BatchColumns | None = None
    error: BaseException | None = None
    aborted_pids: set[int] = field(default_factory=set)
    retry_after: float = 0.0
    # The replica the leader told this consumer to read from (KIP-392 preferred read
    # replica; -1: the leader) and until when (monotonic seconds: metadata.max.age.ms, as
    # the Java client).
    preferred_replica: int = -1
    preferred_until: float = 0.0

    def clear_buffer(self) -> None:
        self.buffer.clear()
        self.buffered_bytes = 0
        self.leftover = None
        self.aborted_pids.clear()

    def seek(self, offset: int) -> None:
        self.generation = next(_generations)
        self.position = offset
        self.fetch_offset = offset
        self.reset = None
        self.error = None
        self.clear_buffer()

    def request_reset(self, strategy: str) -> None:
        self.generation = next(_generations)
        self.position = None
        self.fetch_offset = None
        self.reset = strategy
        self.error = None
        self.clear_buffer()

    @property
    def has_data(self) -> bool:
        return bool(self.buffer) or bool(self.leftover) or self.error is not None

    def fetchable(self, now: float, max_buffered: int) -> bool:
        return (
            self.fetch_offset is not None and not self.paused and not self.in_flight
            and self.error is None and self.buffered_bytes < max_buffered
            and now >= self.retry_after
        )


class SubscriptionState:
    """The assigned partitions and their states."""

    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.listeners: list[Any] = []

    def assign(self, tps: Iterable[TopicPartition]) -> tuple[set[TopicPartition],
                                                            set[TopicPartition]]:
        """Replace the assignment; keep states of kept partitions. Returns (added, removed)."""
        wanted = {TopicPartition(*tp) for tp in tps}
        removed = set(self.partitions) - wanted
        added = wanted - set(self.partitions)
        for tp in removed:
            state = self.partitions.pop(tp)
            state.generation = next(_generations)
            state.clear_buffer()
        for tp in added:
            self.partitions[tp] = PartitionState(tp)
        return added, removed

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self.partitions[TopicPartition(*tp)]
        except KeyError:
            raise ValueError(
                f"partition {tp[0]}-{tp[1]} is not assigned to this consumer; assign() it first"
            ) from None

    def needs_position(self) -> list[PartitionState]:
        """Partitions without a position. Their ``reset`` is the strategy asked for by
        seek_to_beginning()/seek_to_end(), or None: then the group's committed offset, if
        any, comes first and ``auto.offset.reset`` after it (as Kafka's consumer does)."""
        return [s for s in self.partitions.values() if s.position is None and s.error is None]

    def topics(self) -> set[str]:
        return {tp.topic for tp in self.partitions}
