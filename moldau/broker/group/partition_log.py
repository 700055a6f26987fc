"""``__consumer_offsets`` in the partition layer: the coordinator runtime's
:class:`~moldau.broker.coordinator.partition_log.PartitionCoordinatorLog` over that topic."""

from __future__ import annotations

from ..coordinator.partition_log import COMMIT_TIMEOUT_MS, PartitionCoordinatorLog
from ..replica_manager import ReplicaManager
from .partitioning import OFFSETS_TOPIC


class PartitionOffsetsLog(PartitionCoordinatorLog):
    """``__consumer_offsets`` through the broker's replica manager."""

    def __init__(self, replicas: ReplicaManager, *,
                 commit_timeout_ms: int = COMMIT_TIMEOUT_MS) -> None:
        super().__init__(replicas, OFFSETS_TOPIC, commit_timeout_ms=commit_timeout_ms)


__all__ = ["COMMIT_TIMEOUT_MS", "PartitionOffsetsLog"]
