"""The local marker path: :class:`MarkerWriter` writes COMMIT/ABORT markers to partitions this
broker leads (the ``MarkerWriter`` seam of design 14 §5 B.7).

Used by the WriteTxnMarkers handler (markers from a coordinator on another broker, or from
``moldau transactions abort``) and by the transaction marker channel when the partition's
leader is this broker (the single node's only path). Partitions of ``__consumer_offsets`` go
to the group coordinator runtime (``offsets_marker``: it appends the marker and replays it, so
pending transactional offsets become visible or are dropped); all others go to
:meth:`~moldau.broker.replica_manager.ReplicaManager.append_markers` (acks=-1, ISR wait).

Answers per (producer id, partition) are Kafka's: UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
REQUEST_TIMED_OUT, INVALID_PRODUCER_EPOCH (an older producer epoch), and
TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch); from the group runtime also
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (the sender retries).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode, KafkaError
from ..coordinator.errors import CoordinatorError

if TYPE_CHECKING:
    from ..coordinator.runtime import CoordinatorRuntime
    from ..replica_manager import ReplicaManager

OFFSETS_TOPIC = "__consumer_offsets"

TopicPartition = tuple[str, int]
MarkerResults = dict[tuple[int, TopicPartition], ErrorCode]
# (partition of __consumer_offsets, marker) -> the error of writing it there.
OffsetsMarkerFn = Callable[[int, "TxnMarker"], Awaitable[ErrorCode]]


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction's end, to be written to each of ``tps``."""

    pid: int
    epoch: int
    commit: bool
    coordinator_epoch: int
    tps: tuple[TopicPartition, ...]


class MarkerWriter:
    """Writes markers to partitions led here; see the module docstring."""

    def __init__(self, replicas: ReplicaManager, *, timeout_ms: Callable[[], int] = lambda: 30000,
                 offsets_marker: OffsetsMarkerFn | None = None) -> None:
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        # Wired by the node to the group coordinator runtime's write_end_marker; until then
        # offsets partitions take the plain append path.
        self.offsets_marker = offsets_marker

    async def write(self, markers: Sequence[TxnMarker]) -> MarkerResults:
        """Write every marker to every one of its partitions; the error of each
        (producer id, (topic, partition)). Never raises for a partition's failure."""
        plain: list[TxnMarker] = []
        offsets: list[tuple[TxnMarker, int]] = []
        for marker in markers:
            others = marker.tps
            if self.offsets_marker is not None:
                others = tuple(tp for tp in marker.tps if tp[0] != OFFSETS_TOPIC)
                offsets += [(marker, p) for t, p in marker.tps if t == OFFSETS_TOPIC]
            if others:
                plain.append(TxnMarker(marker.pid, marker.epoch, marker.commit,
                                       marker.coordinator_epoch, others))
        jobs = [self.replicas.append_markers(plain, self.timeout_ms())] if plain else []
        jobs += [self._offsets(marker, partition) for marker, partition in offsets]
        results: MarkerResults = {}
        for outcome in await asyncio.gather(*jobs):
            results.update(outcome)
        return results

    async def _offsets(self, marker: TxnMarker, partition: int) -> MarkerResults:
        key = (marker.pid, (OFFSETS_TOPIC, partition))
        found = self.replicas.leader_partition(OFFSETS_TOPIC, partition)
        if isinstance(found, ErrorCode):
            return {key: found}
        assert self.offsets_marker is not None
        try:
            return {key: await self.offsets_marker(partition, marker)}
        except KafkaError as exc:
            return {key: ErrorCode(exc.code)}


def runtime_end_marker(runtime: CoordinatorRuntime) -> OffsetsMarkerFn:
    """The ``offsets_marker`` of a node: the group coordinator runtime's ``write_end_marker``
    for the shard of the partition (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while it
    is not loaded here, the epoch and append errors otherwise)."""

    async def write(partition: int, marker: TxnMarker) -> ErrorCode:
        try:
            shard = runtime.shard(partition)
            await runtime.write_end_marker(shard, marker.pid, marker.epoch,
                                           marker.coordinator_epoch, marker.commit)
        except CoordinatorError as exc:
            return ErrorCode(exc.code)
        return ErrorCode.none

    return write
