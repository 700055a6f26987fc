"""The records of ``__consumer_offsets``, byte-compatible with Kafka's.

Every record's key starts with an int16 *type* (Kafka calls it the key version) and every value
with an int16 value version; a null value is a tombstone that deletes the key on compaction.

======  =====================================  =======================================
type    key                                    value (version written)
======  =====================================  =======================================
0, 1    OffsetCommitKey (group, topic, part)   OffsetCommitValue v3 (v1 with an expire
                                               timestamp, for OffsetCommit v2-4 retention)
2       GroupMetadataKey (group)               GroupMetadataValue v3 (classic groups)
3       ConsumerGroupMetadataKey (group)       ConsumerGroupMetadataValue v0 (KIP-848 epoch)
5       ConsumerGroupMemberMetadataKey         ConsumerGroupMemberMetadataValue v0
        (group, member)                        (a KIP-848 member's subscription and client)
8       ConsumerGroupCurrentMemberAssignment-  ConsumerGroupCurrentMemberAssignmentValue v0
        Key (group, member)                    (member epoch, state, partitions)
======  =====================================  =======================================

Values of every version Kafka has written (OffsetCommitValue 0-4, GroupMetadataValue 0-4) are
read. Other record types (KIP-848 subscription metadata and target assignment records, share
and streams groups) are recognised and skipped: the target assignment is recomputed when a
group is loaded.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from .wire import Reader, RecordFormatError, Writer

OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA_TYPE = 2
CONSUMER_GROUP_METADATA_TYPE = 3
CONSUMER_MEMBER_METADATA_TYPE = 5
CONSUMER_MEMBER_ASSIGNMENT_TYPE = 8
# KIP-848 and later record types Moldau does not keep (see the module docstring).
KNOWN_SKIPPED_TYPES = frozenset(range(4, 22)) - {CONSUMER_MEMBER_METADATA_TYPE,
                                                CONSUMER_MEMBER_ASSIGNMENT_TYPE}


@dataclass(frozen=True, slots=True)
class OffsetKey:
    """OffsetCommitKey: the committed offset of one partition for one group."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    """OffsetCommitValue. ``expire_timestamp`` is -1 unless the commit asked for a retention."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class GroupKey:
    """GroupMetadataKey: the membership of one classic group."""

    group: str


@dataclass(frozen=True, slots=True)
class MemberValue:
    """One member inside GroupMetadataValue."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    """GroupMetadataValue: a classic group's generation, protocol, leader and members."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """ConsumerGroupMetadataKey: the existence and epoch of a KIP-848 consumer group."""

    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupValue:
    """ConsumerGroupMetadataValue v0."""

    epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerMemberKey:
    """ConsumerGroupMemberMetadataKey: one member of a KIP-848 group."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerMemberValue:
    """ConsumerGroupMemberMetadataValue v0."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class ConsumerAssignmentKey:
    """ConsumerGroupCurrentMemberAssignmentKey: a KIP-848 member's current assignment."""

    group: str
    member_id: str


# Kafka's MemberState byte values.
MEMBER_STATE_STABLE = 0
MEMBER_STATE_UNREVOKED = 1
MEMBER_STATE_UNRELEASED = 2

TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerAssignmentValue:
    """ConsumerGroupCurrentMemberAssignmentValue v0."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions


@dataclass(frozen=True, slots=True)
class SkippedKey:
    """A key of a record type Moldau reads past without keeping (see module docstring)."""

    record_type: int


Key = (OffsetKey | GroupKey | ConsumerGroupKey | ConsumerMemberKey | ConsumerAssignmentKey
       | SkippedKey)
WritableKey = OffsetKey | GroupKey | ConsumerGroupKey | ConsumerMemberKey | ConsumerAssignmentKey
Value = (OffsetValue | GroupValue | ConsumerGroupValue | ConsumerMemberValue
         | ConsumerAssignmentValue)


# --- keys -------------------------------------------------------------------------------
def encode_key(key: WritableKey) -> bytes:
    """The key bytes Kafka writes for ``key``."""
    match key:
        case OffsetKey():
            return Writer().i16(1).string(key.group).string(key.topic).i32(
                key.partition).getvalue()
        case GroupKey():
            return Writer().i16(GROUP_METADATA_TYPE).string(key.group).getvalue()
        case ConsumerGroupKey():
            return Writer().i16(CONSUMER_GROUP_METADATA_TYPE).string(key.group).getvalue()
        case ConsumerMemberKey():
            return Writer().i16(CONSUMER_MEMBER_METADATA_TYPE).string(key.group).string(
                key.member_id).getvalue()
        case ConsumerAssignmentKey():
            return Writer().i16(CONSUMER_MEMBER_ASSIGNMENT_TYPE).string(key.group).string(
                key.member_id).getvalue()
    raise TypeError(f"not a key: {key!r}")


def decode_key(data: bytes | memoryview) -> Key:
    """Parse a key; raises :class:`RecordFormatError` for malformed or unknown keys."""
    reader = Reader(data)
    record_type = reader.i16()
    if record_type in OFFSET_COMMIT_TYPES:
        return OffsetKey(reader.string(), reader.string(), reader.i32())
    if record_type == GROUP_METADATA_TYPE:
        return GroupKey(reader.string())
    if record_type == CONSUMER_GROUP_METADATA_TYPE:
        return ConsumerGroupKey(reader.string())
    if record_type == CONSUMER_MEMBER_METADATA_TYPE:
        return ConsumerMemberKey(reader.string(), reader.string())
    if record_type == CONSUMER_MEMBER_ASSIGNMENT_TYPE:
        return ConsumerAssignmentKey(reader.string(), reader.string())
    if record_type in KNOWN_SKIPPED_TYPES:
        return SkippedKey(record_type)
    raise RecordFormatError(f"unknown __consumer_offsets record type {record_type}")


# --- values -----------------------------------------------------------------------------
def encode_value(value: Value) -> bytes:
    """The value bytes Kafka writes for ``value`` (see the table in the module docstring)."""
    match value:
        case OffsetValue():
            if value.expire_timestamp >= 0:
                return (Writer().i16(1).i64(value.offset).string(value.metadata)
                        .i64(value.commit_timestamp).i64(value.expire_timestamp).getvalue())
            return (Writer().i16(3).i64(value.offset).i32(value.leader_epoch)
                    .string(value.metadata).i64(value.commit_timestamp).getvalue())
        case GroupValue():
            return _encode_group_value(value)
        case ConsumerGroupValue():
            return _flexible_v0().i32(value.epoch).tags().getvalue()
        case ConsumerMemberValue():
            out = _flexible_v0().string(value.instance_id).string(value.rack_id)
            out.string(value.client_id).string(value.client_host)
            out.array_len(len(value.subscribed_topic_names))
            for name in value.subscribed_topic_names:
                out.string(name)
            out.string(value.subscribed_topic_regex).i32(value.rebalance_timeout_ms)
            return out.string(value.server_assignor).tags().getvalue()
        case ConsumerAssignmentValue():
            out = _flexible_v0().i32(value.member_epoch).i32(value.previous_member_epoch)
            out.i8(value.state)
            _write_topic_partitions(out, value.assigned)
            _write_topic_partitions(out, value.pending_revocation)
            return out.tags().getvalue()
    raise TypeError(f"not a value: {value!r}")


def _flexible_v0() -> Writer:
    out = Writer(flexible=True)
    out.buf += b"\x00\x00"  # value version 0
    return out


def _write_topic_partitions(out: Writer, topics: TopicPartitions) -> None:
    out.array_len(len(topics))
    for topic_id, partitions in topics:
        out.uuid(topic_id).array_len(len(partitions))
        for p in partitions:
            out.i32(p)
        out.tags()


def _read_topic_partitions(reader: Reader) -> TopicPartitions:
    topics = []
    for _ in range(reader.array_len()):
        topic_id = reader.uuid()
        partitions = tuple(reader.i32() for _ in range(reader.array_len()))
        reader.skip_tags()
        topics.append((topic_id, partitions))
    return tuple(topics)


def _encode_group_value(value: GroupValue) -> bytes:
    out = Writer().i16(3)
    out.string(value.protocol_type).i32(value.generation).string(value.protocol)
    out.string(value.leader).i64(value.current_state_timestamp)
    out.array_len(len(value.members))
    for m in value.members:
        out.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        out.string(m.client_host).i32(m.rebalance_timeout).i32(m.session_timeout)
        out.bytes(m.subscription).bytes(m.assignment)
    return out.getvalue()


def decode_value(key: Key, data: bytes | memoryview | None) -> Value | None:
    """Parse the value of a record with ``key``; None for tombstones and skipped types."""
    if data is None or isinstance(key, SkippedKey):
        return None
    version = Reader(data).i16()
    reader = Reader(memoryview(bytes(data))[2:])
    match key:
        case OffsetKey():
            return _decode_offset_value(reader, version)
        case GroupKey():
            return _decode_group_value(reader, version)
        case ConsumerGroupKey():
            reader.flexible = True
            return ConsumerGroupValue(reader.i32())
        case ConsumerMemberKey():
            reader.flexible = True
            instance_id, rack_id = reader.nullable_string(), reader.nullable_string()
            client_id, client_host = reader.string(), reader.string()
            names = tuple(reader.string() for _ in range(reader.array_len()))
            regex, timeout = reader.nullable_string(), reader.i32()
            assignor = reader.nullable_string()
            reader.skip_tags()
            return ConsumerMemberValue(instance_id, rack_id, client_id, client_host, names,
                                       regex, timeout, assignor)
        case ConsumerAssignmentKey():
            reader.flexible = True
            epoch, previous, state = reader.i32(), reader.i32(), reader.i8()
            assigned = _read_topic_partitions(reader)
            pending = _read_topic_partitions(reader)
            reader.skip_tags()
            return ConsumerAssignmentValue(epoch, previous, state, assigned, pending)
    raise RecordFormatError(f"no value schema for {key!r}")


def _decode_offset_value(reader: Reader, version: int) -> OffsetValue:
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    reader.flexible = version >= 4
    offset = reader.i64()
    leader_epoch = reader.i32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.i64()
    expire_timestamp = reader.i64() if version == 1 else -1
    reader.skip_tags()
    return OffsetValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def _decode_group_value(reader: Reader, version: int) -> GroupValue:
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    reader.flexible = version >= 4
    protocol_type = reader.string()
    generation = reader.i32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    state_ts = reader.i64() if version >= 2 else -1
    members = []
    for _ in range(reader.array_len()):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        session_timeout = reader.i32()
        rebalance_timeout = session_timeout
        if version >= 1:
            rebalance_timeout, session_timeout = session_timeout, reader.i32()
        subscription = reader.bytes()
        assignment = reader.bytes()
        reader.skip_tags()
        members.append(MemberValue(member_id, instance_id, client_id, client_host,
                                   rebalance_timeout, session_timeout, subscription, assignment))
    reader.skip_tags()
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def group_of(key: Key) -> str | None:
    """The group a key belongs to (None for skipped types)."""
    if isinstance(key, SkippedKey):
        return None
    return key.group
