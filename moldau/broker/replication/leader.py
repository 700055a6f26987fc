"""The leader's side of a follower's Fetch: records the follower's progress, moves the high
watermark, and reads up to the log end offset (consumers read up to the high watermark).

The progress is recorded when the request arrives, before the read, so the answer already
carries the high watermark this very fetch may have advanced (the follower learns it one
round sooner than if the update came after the read, as it does in Kafka). The long poll that
follows (``replica.fetch.wait.max.ms``) does not record again: the follower's log has not
moved while it waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...protocol.encoders.fetch import FetchPartitionData
from ...protocol.errors import ErrorCode
from ..replica_manager import FetchRead, FetchTarget, ReplicaManager, error_entry


def _follower_partition(manager: ReplicaManager, replica_id: int, target: FetchTarget,
                        refuse: Callable[[FetchTarget], ErrorCode]) -> Any:
    """The partition led here of which ``replica_id`` is a follower, or the error code: a
    broker that is not a replica gets ``refuse`` (Kafka's answers to a stranger), a replica
    the usual leader checks (epoch, leadership, offline log)."""
    partition = manager.leader_partition(target.topic, target.partition,
                                         target.current_leader_epoch,
                                         unknown_id=target.unknown_id)
    hosted = manager.get(target.topic, target.partition)
    if hosted is None or not hosted.is_follower_replica(replica_id):
        return refuse(target)
    return partition


def record_follower_fetches(manager: ReplicaManager, replica_id: int,
                            plan: list[tuple[Any, list[FetchTarget]]]) -> None:
    """Update the progress of ``replica_id`` on every partition of ``plan`` it follows and
    this broker leads in the epoch the request names."""
    for _key, targets in plan:
        for t in targets:
            partition = manager.get(t.topic, t.partition)
            if partition is None or not partition.is_leader \
                    or not partition.is_follower_replica(replica_id) \
                    or partition.check_leader_epoch(t.current_leader_epoch) != ErrorCode.none:
                continue
            partition.record_follower_fetch(replica_id, t.fetch_offset, t.log_start_offset)


def read_for_follower(manager: ReplicaManager, replica_id: int,
                      plan: list[tuple[Any, list[FetchTarget]]], max_bytes: int,
                      refuse: Callable[[FetchTarget], ErrorCode]) -> FetchRead:
    """Read ``plan`` for follower ``replica_id``: whole batches up to each log end offset,
    ``max_bytes`` in all (at least one batch, KIP-74)."""
    total = 0
    has_error = False
    topics = []
    for key, targets in plan:
        entries = []
        for t in targets:
            partition = _follower_partition(manager, replica_id, t, refuse)
            if isinstance(partition, ErrorCode):
                has_error = True
                entries.append(error_entry(t.partition, partition))
                continue
            budget = min(t.max_bytes, max_bytes - total)
            read = partition.read(t.fetch_offset, max(budget, 0), False, min_one=total == 0,
                                  up_to_log_end=True)
            if read.error != ErrorCode.none:
                has_error = True
            size = len(read.records) if read.records is not None else 0
            total += size
            entries.append(FetchPartitionData(
                t.partition, read.error, read.high_watermark, read.last_stable_offset,
                read.log_start_offset, None, -1,
                read.records if read.records is not None else b""))
        topics.append((key, entries))
    return FetchRead(topics, total, has_error)


def _progress_entries(manager: ReplicaManager, replica_id: int,
                      plan: list[tuple[Any, list[FetchTarget]]], read: FetchRead) -> Any:
    """(progress of ``replica_id``, answer entry) per partition answered without error."""
    for (_key, targets), (_k, entries) in zip(plan, read.topics, strict=True):
        for t, entry in zip(targets, entries, strict=True):
            if entry.error_code != ErrorCode.none:
                continue
            partition = manager.get(t.topic, t.partition)
            progress = partition.followers.get(replica_id) if partition is not None else None
            if progress is not None:
                yield progress, entry


def has_new_high_watermark(manager: ReplicaManager, replica_id: int,
                           plan: list[tuple[Any, list[FetchTarget]]], read: FetchRead) -> bool:
    """Whether ``read`` carries a high watermark ``replica_id`` has not been sent yet: with
    consumers reading from followers (KIP-392) the leader answers at once rather than after
    ``replica.fetch.wait.max.ms``, so a follower's high watermark, and what its consumers may
    read, trails the leader's by one round trip (Kafka 2.4's rule; Kafka 2.6 dropped it,
    KAFKA-9952, for the extra fetches on busy clusters: Moldau keeps it only while
    ``replica.selector.class`` is set)."""
    return any(entry.high_watermark > progress.last_sent_high_watermark
               for progress, entry in _progress_entries(manager, replica_id, plan, read))


def note_sent_high_watermarks(manager: ReplicaManager, replica_id: int,
                              plan: list[tuple[Any, list[FetchTarget]]], read: FetchRead) -> None:
    """Remember the high watermarks an answer to ``replica_id`` carries."""
    for progress, entry in _progress_entries(manager, replica_id, plan, read):
        progress.last_sent_high_watermark = max(progress.last_sent_high_watermark,
                                                entry.high_watermark)
