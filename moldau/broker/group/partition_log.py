"""The :class:`~.offsets_log.OffsetsLog` of a broker: ``__consumer_offsets`` partitions in the
partition layer (:class:`moldau.broker.replica_manager.ReplicaManager`).

Appends go through the replica manager's internal-append path (the same validation and offset
assignment as a produce) and then wait until the high watermark covers the batch, which is what
acks=all means for the coordinator: an offset commit is answered only once the ISR has it.
Loading reads the partition's batches from the log start.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...protocol.errors import ErrorCode
from ...protocol.records.batch import iter_batches, read_header
from ..replica_manager import ReplicaManager
from .offsets_log import OffsetsLogError
from .partitioning import OFFSETS_TOPIC

# How long an append waits for the ISR before the coordinator gives up (Kafka uses the
# offsets topic's commit timeout, offsets.commit.timeout.ms, default 5 s).
COMMIT_TIMEOUT_MS = 5000


class PartitionOffsetsLog:
    """``__consumer_offsets`` through the broker's replica manager."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas

    async def append(self, partition: int, batch: bytes) -> int:
        outcome = self.replicas.append_internal(OFFSETS_TOPIC, partition, batch)
        if outcome.error != ErrorCode.none:
            raise OffsetsLogError(outcome.error, outcome.message or "")
        next_offset = outcome.base_offset + read_header(batch, 0).record_count
        # A failure from here on leaves the batch in the leader's log though the coordinator
        # does not apply it. On one node that means leadership was lost (the shard is unloaded
        # and whoever leads next loads the log); with followers, a timeout while still leader
        # must keep the change, as Kafka keeps uncommitted records replayed.
        error = await self.replicas.wait_for_isr(OFFSETS_TOPIC, partition, next_offset,
                                                 COMMIT_TIMEOUT_MS)
        if error != ErrorCode.none:
            raise OffsetsLogError(error, f"__consumer_offsets-{partition}: {error.name}")
        return int(outcome.base_offset)

    def read_batches(self, partition: int) -> Iterator[bytes]:
        for chunk in self.replicas.iter_batches(OFFSETS_TOPIC, partition):
            for pos, header in iter_batches(chunk):
                yield bytes(chunk[pos : pos + header.size])
