"""Fetch from the closest replica (KIP-392): the leader's choice of a preferred read replica,
and consumers' reads from any replica (Kafka's ``RackAwareReplicaSelector`` and
``ReplicaManager.findPreferredReadReplica`` / ``readFromLog``).

A consumer's Fetch v11+ carries its ``client.rack`` (``rack_id``). On the leader, with
``replica.selector.class`` set, the selector picks among the leader and the in-sync followers
that hold the fetch offset (log start <= offset <= log end, as the leader last saw them) and
have an endpoint on the request's listener: with a rack, the leader if it is in that rack,
else the most caught-up replica in that rack (largest log end offset, then the most recently
caught up, then the smallest id); without one, or with no replica in that rack, the leader.
A follower chosen is sent back as ``preferred_read_replica`` with no records, answered at once
(KAFKA-13767); the client then fetches from it. Only ISR members are chosen (KAFKA-14372): a
follower that leaves the ISR stops being chosen for the consumers that ask the leader next
(clients ask again when the choice expires, ``metadata.max.age.ms`` in the Java client, or on
an error from the replica). Only the leader chooses (KAFKA-13778).

Any replica, leader or follower, serves a consumer's Fetch v11+ (the version that brought
``rack_id``, so a client at it knows the answer may come from a follower), up to its high
watermark (read_committed: last stable offset), as Kafka does whether or not a selector is
set. A follower's answers: an offset below its log start or past its log end is
OFFSET_OUT_OF_RANGE (the client asks the leader again: KIP-392's out-of-range handling);
between its high watermark and its log end the answer is empty (the follower has the records
but does not know yet that they are committed) and long-polls until its high watermark moves.
One exception: past the log end, a consumer that sent no leader epoch gets an empty answer,
not OFFSET_OUT_OF_RANGE (a client without KIP-320, sent here by stale metadata, would reset
its position; it retries until its metadata is refreshed: the problem of KAFKA-14255, whose
apache/kafka#12734 proposed this answer for v11; Moldau gives it at every version).

Fetch v4-10 and every ListOffsets go to the leader only (NOT_LEADER_OR_FOLLOWER with the
KIP-951 hint), and so do, stricter than Kafka, fetches to a fenced broker or for a partition
without a leader (such a replica no longer replicates: the client should find the leader), and
a long poll that began on the leader when leadership moves while it waits
(:attr:`ConsumerFetch.leader_only`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...protocol.encoders.fetch import FetchPartitionData
from ...protocol.errors import ErrorCode
from ..metadata.image import MetadataImage
from ..partition import Partition
from ..replica_manager import FetchRead, FetchTarget, ReplicaManager, error_entry

#: The class name Kafka users put in ``replica.selector.class``, and Moldau's short name.
RACK_AWARE_CLASS = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RACK_AWARE = "rack-aware"

#: The first Fetch version that may be served by a follower (it carries ``rack_id``).
FOLLOWER_FETCH_VERSION = 11


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """What a selector knows of one candidate replica (Kafka's ``ReplicaView``)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


Selector = Callable[[str, ReplicaView, Sequence[ReplicaView]], ReplicaView]


def rack_aware_select(client_rack: str, leader: ReplicaView,
                      replicas: Sequence[ReplicaView]) -> ReplicaView:
    """Kafka's ``RackAwareReplicaSelector.select``: the leader unless the client names a rack
    that holds replicas and the leader is not in it; then the most caught-up of them."""
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or any(r.broker_id == leader.broker_id for r in same_rack):
        return leader
    return min(same_rack, key=lambda r: (-r.log_end_offset, r.time_since_caught_up_ms,
                                         r.broker_id))


def selector_for(name: str | None) -> Selector | None:
    """The selector ``replica.selector.class`` names (the config validated the name)."""
    if name in (RACK_AWARE_CLASS, RACK_AWARE):
        return rack_aware_select
    return None


def preferred_read_replica(partition: Partition, image: MetadataImage, listener: str,
                           selector: Selector, client_rack: str, fetch_offset: int,
                           now_ms: int) -> int:
    """The follower a consumer of ``partition`` (led here) should read from, or -1 for this
    leader. Candidates are ISR members holding ``fetch_offset`` with an endpoint on
    ``listener`` (a broker the client could not reach is never sent back)."""
    leader = ReplicaView(partition.node_id, _rack(image, partition.node_id),
                         partition.log_end_offset, 0)
    candidates = [leader]
    for broker_id, progress in partition.followers.items():
        if broker_id not in partition.isr:
            continue
        if not progress.log_start_offset <= fetch_offset <= progress.log_end_offset:
            continue
        registration = image.brokers.get(broker_id)
        if registration is None or registration.fenced \
                or registration.endpoint(listener) is None:
            continue
        candidates.append(ReplicaView(broker_id, registration.rack, progress.log_end_offset,
                                      max(0, now_ms - progress.last_caught_up_time_ms)))
    chosen = selector(client_rack, leader, candidates)
    return -1 if chosen.broker_id == partition.node_id else chosen.broker_id


def _rack(image: MetadataImage, broker_id: int) -> str | None:
    registration = image.brokers.get(broker_id)
    return registration.rack if registration is not None else None


@dataclass(frozen=True, slots=True)
class ConsumerFetch:
    """What of a consumer's Fetch request decides where its partitions are read."""

    version: int
    client_rack: str
    listener: str
    committed: bool
    selector: Selector | None
    #: Partitions a parked long poll first read on this broker as their leader: if the
    #: leadership moves meanwhile they answer NOT_LEADER_OR_FOLLOWER (with the KIP-951
    #: hint), so the client follows the leader instead of staying on a follower it was never
    #: sent to (Kafka keeps serving such a fetch from the follower when it names no epoch).
    leader_only: frozenset[tuple[str | None, int]] = frozenset()


def _follows(partition: Partition) -> bool:
    """Whether this replica follows a leader it knows (another broker, this one not fenced):
    a fenced broker, or a replica of a partition without a leader, answers
    NOT_LEADER_OR_FOLLOWER so that the client looks for the leader instead of waiting on a
    replica that no longer replicates."""
    return not partition.fenced and partition.leader >= 0 \
        and partition.leader != partition.node_id


def _partition_for_consumer(manager: ReplicaManager, t: FetchTarget,
                            request: ConsumerFetch) -> Partition | FetchPartitionData:
    """The partition to read for a consumer (leader or, v11+, follower), or its error entry
    (in Kafka's order: unknown, offline, not a replica, epoch, not the leader)."""
    hosted = manager.hosted_partition(t.topic, t.partition, unknown_id=t.unknown_id)
    error = hosted if isinstance(hosted, ErrorCode) else hosted.check_leader_epoch(
        t.current_leader_epoch)
    if error == ErrorCode.none:
        assert isinstance(hosted, Partition)
        if hosted.is_leader or (request.version >= FOLLOWER_FETCH_VERSION
                                and (t.topic, t.partition) not in request.leader_only
                                and _follows(hosted)):
            return hosted
        error = ErrorCode.not_leader_or_follower
    hint = None
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
        hint = manager.current_leader(t.topic, t.partition)
    return error_entry(t.partition, error, hint)


def read_for_consumer(manager: ReplicaManager, plan: list[tuple[Any, list[FetchTarget]]],
                      max_bytes: int, request: ConsumerFetch, now_ms: int) -> FetchRead:
    """Read ``plan`` for a consumer: from this broker's replica of each partition (leader, or
    a follower for v11+), or, where the leader's selector prefers another replica, no records
    and ``preferred_read_replica``. ``max_bytes`` in all, at least one batch (KIP-74)."""
    total = 0
    has_error = False
    topics = []
    for key, targets in plan:
        entries = []
        for t in targets:
            partition = _partition_for_consumer(manager, t, request)
            if isinstance(partition, FetchPartitionData):
                has_error = True
                entries.append(partition)
                continue
            if partition.is_leader and request.selector is not None \
                    and request.version >= FOLLOWER_FETCH_VERSION:
                chosen = preferred_read_replica(
                    partition, manager.image, request.listener, request.selector,
                    request.client_rack, t.fetch_offset, now_ms)
                if chosen >= 0:
                    entries.append(FetchPartitionData(
                        t.partition, ErrorCode.none, partition.high_watermark,
                        partition.last_stable_offset, partition.log.log_start_offset, None,
                        chosen, b""))
                    continue
            if not partition.is_leader and t.current_leader_epoch < 0 \
                    and t.fetch_offset > partition.log_end_offset:
                # Perhaps stale metadata, not a lost offset: the client retries and refreshes.
                entries.append(FetchPartitionData(
                    t.partition, ErrorCode.none, partition.high_watermark,
                    partition.last_stable_offset, partition.log.log_start_offset,
                    [] if request.committed else None, -1, b""))
                continue
            budget = min(t.max_bytes, max_bytes - total)
            read = partition.read(t.fetch_offset, max(budget, 0), request.committed,
                                  min_one=total == 0)
            if read.error != ErrorCode.none:
                has_error = True
            size = len(read.records) if read.records is not None else 0
            total += size
            entries.append(FetchPartitionData(
                t.partition, read.error, read.high_watermark, read.last_stable_offset,
                read.log_start_offset, read.aborted, -1,
                read.records if read.records is not None else b""))
        topics.append((key, entries))
    return FetchRead(topics, total, has_error)


def redirects(read: FetchRead) -> bool:
    """Whether an answer names a preferred read replica (it is sent at once, not parked)."""
    return any(p.preferred_read_replica >= 0 for _, entries in read.topics for p in entries)
