"""A partition replica on this broker: its log, leadership, high watermark and ISR.

A single node is a cluster of one: every partition has a leader epoch, a high watermark and an
ISR (just this broker) from the start, so replication adds followers without changing callers.
The high watermark is the smallest log end offset among ISR members; with an ISR of one it
follows the leader's log end offset on every append.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records.batch import BatchHeader
from ..storage.log import AppendInfo, Log
from .metadata.image import PartitionState
from .purgatory import Purgatory


@dataclass(slots=True)
class PartitionRead:
    error: ErrorCode
    records: bytes | memoryview | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None


class Partition:
    """One topic-partition hosted here."""

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log, *, node_id: int,
                 purgatory: Purgatory, time_ms: Callable[[], int]) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.purgatory = purgatory
        self.time_ms = time_ms
        self.key = (topic, index)
        self.leader = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.isr: list[int] = []
        self.replicas: list[int] = []
        self.topic_config: dict[str, Any] = {}
        # From topic_config, read on every produce: (message.timestamp.before.max.ms,
        # message.timestamp.after.max.ms, min.insync.replicas, compression.type).
        self.produce_limits: tuple[int, int, int, str] = (2**63 - 1, 2**63 - 1, 1, "producer")
        # Leader with an ISR of just this broker: the high watermark follows every append.
        self._sole_leader = False
        # The broker is fenced (its registration lapsed): it leads nothing, whatever the image
        # says, until the replica manager lifts the fence.
        self.fenced = False

    def set_topic_config(self, config: dict[str, Any]) -> None:
        """The topic's effective configs (``produce_limits`` follows)."""
        self.topic_config = config
        self.produce_limits = (
            config.get("message.timestamp.before.max.ms", 2**63 - 1),
            config.get("message.timestamp.after.max.ms", 2**63 - 1),
            config.get("min.insync.replicas", 1),
            config.get("compression.type", "producer"),
        )

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id and not self.fenced

    def apply_state(self, state: PartitionState) -> None:
        """Take the leader/ISR/epoch the metadata image says this partition has."""
        was_leader = self.is_leader
        became_leader = state.leader == self.node_id and not self.fenced and (
            not was_leader or state.leader_epoch != self.leader_epoch
        )
        self.leader, self.isr, self.replicas = state.leader, list(state.isr), list(state.replicas)
        self.partition_epoch = state.partition_epoch
        self.leader_epoch = state.leader_epoch
        self._sole_leader = self.is_leader and self.isr == [self.node_id]
        if became_leader:
            self.log.assign_epoch_start_offset(state.leader_epoch)
        elif was_leader and not self.is_leader:
            # Parked acks=all produces and long-poll fetches re-check and answer
            # NOT_LEADER_OR_FOLLOWER now rather than at their timeout.
            self.purgatory.notify(self.key)
        self._maybe_advance_high_watermark()

    def set_fenced(self, fenced: bool) -> None:
        """Stop (``fenced``) or resume leading the partition as its last applied state says
        (the epoch it leads in may have moved on while fenced: its start is recorded now)."""
        if fenced == self.fenced:
            return
        was_leader = self.is_leader
        self.fenced = fenced
        self._sole_leader = self.is_leader and self.isr == [self.node_id]
        if was_leader and not self.is_leader:
            self.purgatory.notify(self.key)
        elif self.is_leader:
            self.log.assign_epoch_start_offset(self.leader_epoch)
            self._maybe_advance_high_watermark()

    def check_leader_epoch(self, requested: int) -> ErrorCode:
        if requested < 0 or requested == self.leader_epoch:
            return ErrorCode.none
        if requested < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    # --- writes --------------------------------------------------------------------------
    def append_as_leader(self, buf: bytes | bytearray | memoryview,
                         headers: list[BatchHeader]) -> AppendInfo:
        """Append validated batches; raises KafkaError for producer-state errors."""
        if self.leader != self.node_id:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"Broker {self.node_id} is not the leader of {self.topic}-{self.index}",
            )
        log = self.log
        append_time = (self.time_ms() if log.config.message_timestamp_type == "LogAppendTime"
                       else None)
        info = log.append(buf, headers, self.leader_epoch, append_time)
        if not info.duplicate:
            if self._sole_leader:
                end = log.log_end_offset
                if end > log.high_watermark:
                    log.update_high_watermark(end)
            self.purgatory.notify(self.key)
        return info

    def _maybe_advance_high_watermark(self) -> None:
        if self._sole_leader:
            end = self.log.log_end_offset
            if end > self.log.high_watermark:
                self.log.update_high_watermark(end)
                # acks=all produces parked on it answer now (the ISR shrank to this leader).
                self.purgatory.notify(self.key)

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.log.first_unstable_offset()
        if first_unstable is None:
            return self.high_watermark
        return min(first_unstable, self.high_watermark)

    # --- reads ---------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, committed: bool, min_one: bool) -> PartitionRead:
        limit = self.last_stable_offset if committed else self.high_watermark
        start = self.log.log_start_offset
        if offset < start or offset > self.log.log_end_offset:
            return PartitionRead(ErrorCode.offset_out_of_range, None, self.high_watermark,
                                 self.last_stable_offset, start, None)
        data = self.log.read(offset, max_bytes, limit, min_one).records
        # Aborted transactions come with the transactions work; until then there are none.
        aborted: list[tuple[int, int]] | None = [] if committed else None
        return PartitionRead(ErrorCode.none, data, self.high_watermark,
                             self.last_stable_offset, start, aborted)
