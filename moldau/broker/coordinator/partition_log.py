"""The :class:`~.log.CoordinatorLog` of a broker: a coordinator topic's partitions in the
partition layer (:class:`moldau.broker.replica_manager.ReplicaManager`).

Appends are Kafka's coordinator appends: ``acks=-1`` with origin "coordinator" through the
replica manager's produce path (the same validation and offset assignment as a client produce,
control batches allowed, sequence checks skipped, producer-epoch checks kept, and
NOT_ENOUGH_REPLICAS before the append when the ISR is below ``min.insync.replicas``), then a
wait, bounded by the commit time-out (``offsets.commit.timeout.ms`` for groups), until the high
watermark covers the batch: a change is answered, and applied to the coordinator's memory, only
once every in-sync replica has it, so a new leader of the partition (the next coordinator)
loads it. On one node the ISR is the leader alone and the high watermark follows the append at
once. Loading reads the partition's batches from the log start.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...protocol.errors import ErrorCode
from ...protocol.records.batch import iter_batches, read_header
from ...storage.producer_state import ORIGIN_COORDINATOR
from ..replica_manager import ReplicaManager
from .log import CoordinatorLogError

#: Kafka's default ``offsets.commit.timeout.ms``.
COMMIT_TIMEOUT_MS = 5000


class PartitionCoordinatorLog:
    """The partitions of ``topic`` through the broker's replica manager."""

    def __init__(self, replicas: ReplicaManager, topic: str, *,
                 commit_timeout_ms: int = COMMIT_TIMEOUT_MS) -> None:
        self.replicas = replicas
        self.topic = topic
        self.commit_timeout_ms = commit_timeout_ms

    async def append(self, partition: int, batch: bytes, *,
                     verification_guard: object | None = None) -> int:
        topic = self.topic
        outcome = self.replicas.append_records(topic, partition, batch, acks=-1,
                                               transactional_id=None, internal=True,
                                               origin=ORIGIN_COORDINATOR,
                                               verification_guard=verification_guard)
        if outcome.error != ErrorCode.none:
            raise CoordinatorLogError(outcome.error, outcome.message or "")
        next_offset = outcome.base_offset + read_header(batch, 0).record_count
        # A failure from here on leaves the batch in the leader's log though the coordinator
        # does not apply it, as Kafka's GroupMetadataManager fills its cache only on success.
        # Lost leadership unloads the shard (whoever leads next loads the log); after a
        # time-out the batch may still reach the followers and a later coordinator load it,
        # which is harmless: the client was told COORDINATOR_NOT_AVAILABLE and retries.
        error = await self.replicas.wait_for_isr(topic, partition, next_offset,
                                                 self.commit_timeout_ms)
        if error != ErrorCode.none:
            raise CoordinatorLogError(error, f"{topic}-{partition}: {error.name}")
        return int(outcome.base_offset)

    def begin_verification(self, partition: int, producer_id: int) -> object | None:
        led = self.replicas.leader_partition(self.topic, partition)
        if isinstance(led, ErrorCode):
            return None  # the write fails NOT_COORDINATOR anyway
        return led.log.producer_state.begin_verification(producer_id)

    def read_batches(self, partition: int) -> Iterator[bytes]:
        for chunk in self.replicas.iter_batches(self.topic, partition):
            for pos, header in iter_batches(chunk):
                yield bytes(chunk[pos : pos + header.size])
