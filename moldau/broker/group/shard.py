"""One partition of ``__consumer_offsets`` and the state its records describe.

A shard holds the groups whose id hashes to its partition and their committed offsets. Loading
replays the partition's records in log order through :meth:`GroupShard.replay`; at run time
every change is appended first and applied after (offsets through :meth:`OffsetStore.replay`,
KIP-848 groups through :meth:`.consumer_group.ConsumerGroup.replay_written`), so the state
after a restart equals the state before it. Classic groups also keep transient state (members
parked in JoinGroup, timers) that no record holds; their GroupMetadata record is a snapshot
written at the end of each rebalance, which is exactly what Kafka persists.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from ..coordinator.shard import LoggedRecord
from .classic import ClassicGroup
from .records import (
    ConsumerAssignmentKey,
    ConsumerAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupValue,
    ConsumerMemberKey,
    ConsumerMemberValue,
    GroupKey,
    GroupValue,
    Key,
    OffsetKey,
    OffsetValue,
    SkippedKey,
    Value,
    decode_key,
    decode_value,
)

if TYPE_CHECKING:
    from .consumer_group import ConsumerGroup

log = logging.getLogger(__name__)

Group = Union[ClassicGroup, "ConsumerGroup"]
TopicPartition = tuple[str, int]


@dataclass(slots=True)
class CommittedOffset:
    """A committed offset as OffsetFetch returns it, plus where its record sits in the log."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int
    record_offset: int


PendingKey = tuple[str, str, int]  # (group, topic, partition)


class OffsetStore:
    """Committed offsets per group, fed only by :meth:`replay`; offsets committed inside a
    transaction (TxnOffsetCommit) wait in :attr:`pending` until its end marker."""

    def __init__(self) -> None:
        self.by_group: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        # producer id -> its transaction's offsets, as (key, value, record offset)
        self.pending: dict[int, dict[PendingKey, tuple[OffsetKey, OffsetValue | None, int]]] = {}
        # group -> producers with pending offsets for it
        self.pending_groups: dict[str, set[int]] = {}
        # producer id -> (offset, commit) of the last end marker applied for it
        self.ended: dict[int, tuple[int, bool]] = {}

    def replay(self, key: OffsetKey, value: OffsetValue | None, record_offset: int) -> None:
        """Apply one OffsetCommit record (None = tombstone) found at ``record_offset``.

        A record older than what is already applied is ignored, so concurrent appends that
        complete out of order cannot roll an offset back.
        """
        tp = (key.topic, key.partition)
        offsets = self.by_group.get(key.group)
        existing = offsets.get(tp) if offsets is not None else None
        if existing is not None and existing.record_offset > record_offset:
            return
        if value is None:
            if offsets is not None and existing is not None:
                del offsets[tp]
                if not offsets:
                    del self.by_group[key.group]
            return
        self.by_group.setdefault(key.group, {})[tp] = CommittedOffset(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
            value.expire_timestamp, record_offset,
        )

    def replay_pending(self, producer_id: int, key: OffsetKey, value: OffsetValue | None,
                       record_offset: int) -> None:
        """Hold one OffsetCommit record of ``producer_id``'s open transaction (a later one of
        the same transaction for the same partition replaces it).

        A record below the producer's last end marker belongs to the transaction that marker
        ended (its write was replayed after the marker's: both waited for the high watermark),
        so it takes that outcome at once instead of waiting for a marker that came already."""
        ended = self.ended.get(producer_id)
        if ended is not None and record_offset < ended[0]:
            if ended[1]:
                self.replay(key, value, record_offset)
            return
        entry = (key.group, key.topic, key.partition)
        self.pending.setdefault(producer_id, {})[entry] = (key, value, record_offset)
        self.pending_groups.setdefault(key.group, set()).add(producer_id)

    def end_txn(self, producer_id: int, commit: bool, marker_offset: int) -> set[str]:
        """``producer_id``'s transaction ended with the marker at ``marker_offset``: on
        commit its offsets are replayed as committed at their own record offsets (so a plain
        commit written after them still wins, as in Kafka); on abort they are dropped.
        Returns the groups it touched."""
        last = self.ended.get(producer_id)
        if last is None or last[0] < marker_offset:
            self.ended[producer_id] = (marker_offset, commit)
        offsets = self.pending.pop(producer_id, {})
        groups = set()
        for key, value, record_offset in offsets.values():
            groups.add(key.group)
            if commit:
                self.replay(key, value, record_offset)
        for group in groups:
            producers = self.pending_groups.get(group)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self.pending_groups[group]
        return groups

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of ``topic-partition`` for the group
        (OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT then)."""
        entry = (group_id, topic, partition)
        return any(entry in self.pending.get(pid, {})
                   for pid in self.pending_groups.get(group_id, ()))

    def of(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return self.by_group.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.by_group.get(group_id))


class GroupShard:
    """Groups and offsets of one ``__consumer_offsets`` partition."""

    def __init__(self, partition: int, epoch: int = 0,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.partition = partition
        # The partition's leader epoch at load (the coordinator epoch of transaction markers).
        self.epoch = epoch
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        # Latest GroupMetadata / ConsumerGroupMetadata value per group while loading.
        self._loaded_classic: dict[str, GroupValue] = {}
        self._loaded_consumer: dict[str, ConsumerGroupValue] = {}
        self._loaded_members: dict[str, dict[str, ConsumerMemberValue]] = {}
        self._loaded_assignments: dict[str, dict[str, ConsumerAssignmentValue]] = {}
        # The clock of groups created when a transaction's offsets land (after loading).
        self._now_ms = now_ms
        self.loaded = False

    def replay(self, record: LoggedRecord) -> None:
        """Apply one record read back from the log while loading (the runtime's entry);
        raises RecordFormatError (a ValueError) for a record it cannot read. Offsets of a
        transaction are held pending until its end marker."""
        key = decode_key(record.key)
        value = decode_value(key, record.value)
        if record.transactional and isinstance(key, OffsetKey):
            assert value is None or isinstance(value, OffsetValue)
            self.offsets.replay_pending(record.producer_id, key, value, record.offset)
            return
        self.replay_decoded(key, value, record.offset)

    def replay_end_txn(self, producer_id: int, commit: bool, offset: int) -> None:
        """The end of ``producer_id``'s transaction (its marker at ``offset``): its pending
        offsets become committed offsets on commit and are dropped on abort. After loading, a
        group that only now has offsets becomes a simple group, as loading would make it."""
        groups = self.offsets.end_txn(producer_id, commit, offset)
        if not self.loaded or self._now_ms is None:
            return
        for group_id in groups:
            if group_id not in self.groups and self.offsets.has_offsets(group_id):
                self.groups[group_id] = ClassicGroup(group_id, self._now_ms())

    def replay_decoded(self, key: Key, value: Value | None, record_offset: int) -> None:
        """Apply one decoded record found at ``record_offset``."""
        match key:
            case OffsetKey():
                assert value is None or isinstance(value, OffsetValue)
                self.offsets.replay(key, value, record_offset)
            case GroupKey():
                if value is None:
                    self._loaded_classic.pop(key.group, None)
                else:
                    assert isinstance(value, GroupValue)
                    self._loaded_classic[key.group] = value
                    self._loaded_consumer.pop(key.group, None)
            case ConsumerGroupKey():
                if value is None:
                    self._loaded_consumer.pop(key.group, None)
                else:
                    assert isinstance(value, ConsumerGroupValue)
                    self._loaded_consumer[key.group] = value
                    self._loaded_classic.pop(key.group, None)
            case ConsumerMemberKey():
                members = self._loaded_members.setdefault(key.group, {})
                if value is None:
                    members.pop(key.member_id, None)
                else:
                    assert isinstance(value, ConsumerMemberValue)
                    members[key.member_id] = value
            case ConsumerAssignmentKey():
                assignments = self._loaded_assignments.setdefault(key.group, {})
                if value is None:
                    assignments.pop(key.member_id, None)
                else:
                    assert isinstance(value, ConsumerAssignmentValue)
                    assignments[key.member_id] = value
            case SkippedKey():
                pass

    def finish_load(self, now_ms: int) -> None:
        """Turn the replayed snapshots into groups; groups with only offsets become empty
        classic groups (Kafka's "simple" groups)."""
        from .consumer_group import ConsumerGroup

        for group_id, value in self._loaded_classic.items():
            self.groups[group_id] = ClassicGroup.replay(group_id, value, now_ms)
        for group_id, cvalue in self._loaded_consumer.items():
            self.groups[group_id] = ConsumerGroup.replay(
                group_id, cvalue, self._loaded_members.get(group_id, {}),
                self._loaded_assignments.get(group_id, {}), now_ms)
        for group_id in [*self.offsets.by_group, *self.offsets.pending_groups]:
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, now_ms)
        self._loaded_classic.clear()
        self._loaded_consumer.clear()
        self._loaded_members.clear()
        self._loaded_assignments.clear()
        self.loaded = True
