"""OffsetCommit, OffsetFetch, OffsetDelete and the expiry of old offsets.

A commit is validated against the group (generation and member for classic groups, member
epoch for KIP-848 groups; simple commits with generation -1 and no member id are accepted while
the group has no members), written to ``__consumer_offsets`` as one batch of OffsetCommit
records, and answered once the write is done. Fetches read the shard's replayed state.

Expiry (every ``offsets.retention.check.interval.ms``) follows KIP-211: offsets of an empty
group expire ``offsets.retention.minutes`` after the group became empty; offsets of a simple
group (no protocol) expire that long after their commit; in an active consumer group only the
offsets of topics no member subscribes to expire. Expired offsets get tombstones; an empty
group left without offsets is deleted (with a tombstone for its metadata).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from .classic import CONSUMER_PROTOCOL_TYPE, ClassicGroup, ClassicState
from .commits import OffsetToCommit, check_classic_member, metadata_too_large
from .errors import GroupError
from .records import (
    ConsumerGroupKey,
    GroupKey,
    OffsetKey,
    OffsetValue,
)
from .shard import CommittedOffset, Group, GroupShard

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

log = logging.getLogger(__name__)

__all__ = ["FetchedOffset", "OffsetManager", "OffsetToCommit", "expired_offsets",
           "metadata_too_large"]

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class FetchedOffset:
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: int = 0


def expired_offsets(group: Group | None, offsets: dict[TopicPartition, CommittedOffset],
                    now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """The partitions whose committed offsets have expired (KIP-211 rules, see module doc)."""
    if group is None:
        base_of = None
        subscribed: set[str] = set()
    elif isinstance(group, ClassicGroup):
        subscribed = set()
        if group.is_in(ClassicState.EMPTY) and group.protocol_type is not None:
            state_ts = group.state_timestamp

            def base_of(c: CommittedOffset) -> int:
                return state_ts
        elif group.protocol_type is None:
            base_of = None
        elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE
              and group.is_in(ClassicState.STABLE)):
            topics = group.subscribed_topics()
            if topics is None:
                return []
            subscribed = topics
            base_of = None
        else:
            return []
    else:
        subscribed = group.subscribed_topic_names()
        base_of = None
    expired = []
    for tp, committed in offsets.items():
        if tp[0] in subscribed:
            continue
        if committed.expire_timestamp >= 0:
            if now_ms >= committed.expire_timestamp:
                expired.append(tp)
            continue
        base = base_of(committed) if base_of is not None else committed.commit_timestamp
        if now_ms - base >= retention_ms:
            expired.append(tp)
    return expired


class OffsetManager:
    """Committed offsets of the coordinator's groups."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.config = coordinator.config
        self.timer = coordinator.timer

    # --- commit ----------------------------------------------------------------------------
    def _validate_commit(self, shard: GroupShard, group_id: str, generation: int,
                         member_id: str, instance_id: str | None, version: int) -> Group | None:
        """The group the commit is for; None for the first commit of a simple group."""
        group = shard.groups.get(group_id)
        if group is None:
            if generation < 0:
                # A "simple" group: offsets only, no membership (kcat, kafka-python assign()).
                return None
            if version >= 9:
                raise GroupError(ErrorCode.group_id_not_found, f"group {group_id} not found")
            raise GroupError(ErrorCode.illegal_generation)
        if isinstance(group, ClassicGroup):
            self._validate_classic(group, generation, member_id, instance_id)
        else:
            group.validate_offset_commit(member_id, generation, version)
        return group

    @staticmethod
    def _validate_classic(group: ClassicGroup, generation: int, member_id: str,
                          instance_id: str | None) -> None:
        if group.is_in(ClassicState.DEAD):
            raise GroupError(ErrorCode.coordinator_not_available)
        if generation < 0 and group.is_in(ClassicState.EMPTY):
            return
        if generation >= 0 or member_id or instance_id is not None:
            check_classic_member(group, generation, member_id, instance_id)
        elif not group.is_in(ClassicState.EMPTY):
            raise GroupError(ErrorCode.unknown_member_id)
        if group.is_in(ClassicState.COMPLETING_REBALANCE):
            raise GroupError(ErrorCode.rebalance_in_progress)

    async def commit(self, shard: GroupShard, group_id: str, generation: int, member_id: str,
                     instance_id: str | None, offsets: list[OffsetToCommit], *,
                     version: int, retention_ms: int = -1) -> list[int]:
        """Commit ``offsets``; returns one error code per entry (in order).

        Written, then replayed; a simple group the commit creates exists from then on (as
        loading the log would create it)."""
        return await self.coordinator.run(self._commit(
            shard, group_id, generation, member_id, instance_id, offsets, version=version,
            retention_ms=retention_ms))

    async def _commit(self, shard: GroupShard, group_id: str, generation: int, member_id: str,
                      instance_id: str | None, offsets: list[OffsetToCommit], *,
                      version: int, retention_ms: int) -> list[int]:
        if self.coordinator.locks.busy(group_id):
            # A change of the group is being written: commit against what it leaves behind.
            await self.coordinator.locks.idle(group_id)
            self.coordinator.check_loaded(shard)
        try:
            group = self._validate_commit(shard, group_id, generation, member_id, instance_id,
                                          version)
        except GroupError as exc:
            log.debug("OffsetCommit v%d of group %s (generation %d, member %r) refused: %s",
                      version, group_id, generation, member_id, exc.code.name)
            return [exc.code] * len(offsets)
        now = self.timer.now_ms()
        expire = now + retention_ms if retention_ms >= 0 else -1
        errors: list[int] = []
        records = []
        for entry in offsets:
            if metadata_too_large(entry.metadata, self.config.offset_metadata_max_bytes):
                errors.append(ErrorCode.offset_metadata_too_large)
                continue
            errors.append(ErrorCode.none)
            records.append((OffsetKey(group_id, entry.topic, entry.partition),
                            OffsetValue(entry.offset, entry.metadata or "", now,
                                        entry.leader_epoch, expire)))
        if not records:
            return errors
        try:
            base = await self.coordinator.write(shard, records, commit=True)
        except GroupError as exc:
            return [exc.code if e == ErrorCode.none else e for e in errors]
        for i, (key, value) in enumerate(records):
            shard.offsets.replay(key, value, base + i)
        if group is None and group_id not in shard.groups:
            shard.groups[group_id] = ClassicGroup(group_id, self.timer.now_ms())
        return errors

    # --- fetch -----------------------------------------------------------------------------
    def fetch(self, shard: GroupShard, group_id: str,
              topics: list[tuple[str, list[int]]] | None, member_id: str | None = None,
              member_epoch: int = -1, *, require_stable: bool = False,
              ) -> list[tuple[str, list[tuple[int, FetchedOffset]]]]:
        """Committed offsets of ``topics`` (None = every committed partition of the group);
        offsets of open transactions are not visible. With ``require_stable`` (KIP-447) a
        partition with such offsets answers UNSTABLE_OFFSET_COMMIT instead (the client
        retries until the transaction ends).

        Raises GroupError for group-level errors (KIP-848 member checks)."""
        group = shard.groups.get(group_id)
        if group is not None and not isinstance(group, ClassicGroup):
            group.validate_offset_fetch(member_id, member_epoch)
        committed = shard.offsets.of(group_id)
        if topics is None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in committed:
                by_topic.setdefault(topic, []).append(partition)
            topics = [(t, sorted(ps)) for t, ps in sorted(by_topic.items())]
        result = []
        for topic, partitions in topics:
            entries = []
            for partition in partitions:
                c = committed.get((topic, partition))
                if require_stable and shard.offsets.has_pending(group_id, topic, partition):
                    entries.append((partition,
                                    FetchedOffset(error=ErrorCode.unstable_offset_commit)))
                elif c is None:
                    entries.append((partition, FetchedOffset()))
                else:
                    entries.append((partition, FetchedOffset(c.offset, c.leader_epoch,
                                                             c.metadata)))
            result.append((topic, entries))
        return result

    # --- delete ----------------------------------------------------------------------------
    async def delete(self, shard: GroupShard, group_id: str,
                     topics: list[tuple[str, list[int]]]) -> tuple[int, list[list[int]]]:
        """OffsetDelete: (group error, per-partition errors). Checked against the group as a
        change being written leaves it (a subscription may be on its way)."""
        return await self.coordinator.run(self._delete(shard, group_id, topics))

    async def _delete(self, shard: GroupShard, group_id: str,
                      topics: list[tuple[str, list[int]]]) -> tuple[int, list[list[int]]]:
        if self.coordinator.locks.busy(group_id):
            await self.coordinator.locks.idle(group_id)
            self.coordinator.check_loaded(shard)
        group = shard.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.is_in(ClassicState.DEAD)):
            return ErrorCode.group_id_not_found, []
        subscribed: set[str] | None
        if isinstance(group, ClassicGroup):
            if group.is_empty:
                subscribed = set()
            else:
                subscribed = group.subscribed_topics()
                if subscribed is None:
                    return ErrorCode.non_empty_group, []
        else:
            subscribed = group.subscribed_topic_names()
        committed = shard.offsets.of(group_id)
        errors: list[list[int]] = []
        records = []
        for topic, partitions in topics:
            row = []
            for partition in partitions:
                if topic in subscribed:
                    row.append(ErrorCode.group_subscribed_to_topic)
                    continue
                row.append(ErrorCode.none)
                if (topic, partition) in committed:
                    records.append((OffsetKey(group_id, topic, partition), None))
            errors.append(row)
        if records:
            try:
                base = await self.coordinator.write(shard, records)
            except GroupError as exc:
                return exc.code, []
            for i, (key, _) in enumerate(records):
                shard.offsets.replay(key, None, base + i)
        return ErrorCode.none, errors

    # --- expiry ----------------------------------------------------------------------------
    async def expire(self, shard: GroupShard) -> int:
        """Remove expired offsets and dead empty groups of ``shard``; returns how many
        offsets expired."""
        now = self.timer.now_ms()
        retention = self.config.offsets_retention_ms
        records: list[tuple[object, None]] = []
        emptied: list[Group] = []
        locks = self.coordinator.locks
        try:
            for group_id in list(set(shard.groups) | set(shard.offsets.by_group)):
                group = shard.groups.get(group_id)
                committed = shard.offsets.of(group_id)
                gone = expired_offsets(group, committed, now, retention)
                for topic, partition in gone:
                    records.append((OffsetKey(group_id, topic, partition), None))
                # A group being changed is deleted by a later run; one deleted here is held
                # until its tombstone is written and applied, so nothing joins it meanwhile.
                if group is not None and group.is_empty and len(gone) == len(committed) \
                        and self.coordinator.is_idle(group) and locks.try_hold(group_id):
                    emptied.append(group)
            for group in emptied:
                records.append((self._metadata_key(group), None))
            if not records:
                return 0
            try:
                base = await self.coordinator.write(shard, records)  # type: ignore[arg-type]
            except GroupError as exc:
                log.warning("offset expiry of __consumer_offsets-%d failed: %s",
                            shard.partition, exc)
                return 0
            expired = 0
            for i, (key, _) in enumerate(records):
                if isinstance(key, OffsetKey):
                    shard.offsets.replay(key, None, base + i)
                    expired += 1
            for group in emptied:
                self.coordinator.remove_group(shard, group)
        finally:
            for group in emptied:
                locks.release(group.group_id)
        if expired:
            log.info("Removed %d expired offsets from __consumer_offsets-%d", expired,
                     shard.partition)
        return expired

    @staticmethod
    def _metadata_key(group: Group) -> GroupKey | ConsumerGroupKey:
        if isinstance(group, ClassicGroup):
            return GroupKey(group.group_id)
        return ConsumerGroupKey(group.group_id)

    def tombstones_for_group(self, shard: GroupShard,
                             group: Group) -> Iterable[tuple[object, None]]:
        """Records that delete ``group`` and all its offsets (DeleteGroups)."""
        for topic, partition in shard.offsets.of(group.group_id):
            yield OffsetKey(group.group_id, topic, partition), None
        yield self._metadata_key(group), None
