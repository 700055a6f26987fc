"""__consumer_offsets keys and values: Kafka's byte layouts, all value versions readable."""

import struct
import uuid

import pytest

from moldau.broker.group.records import (
    ConsumerAssignmentKey,
    ConsumerAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupValue,
    ConsumerMemberKey,
    ConsumerMemberValue,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    SkippedKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from moldau.broker.group.wire import RecordFormatError


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_offset_commit_key_layout() -> None:
    key = OffsetKey("grp", "topic", 3)
    raw = encode_key(key)
    assert raw == struct.pack(">h", 1) + s16("grp") + s16("topic") + struct.pack(">i", 3)
    assert decode_key(raw) == key
    # Type 0 (written by very old brokers) has the same layout.
    assert decode_key(struct.pack(">h", 0) + raw[2:]) == key


def test_offset_commit_value_v3_layout() -> None:
    value = OffsetValue(42, "meta", 1_700_000_000_000, leader_epoch=7)
    raw = encode_value(value)
    assert raw == (struct.pack(">hqi", 3, 42, 7) + s16("meta")
                   + struct.pack(">q", 1_700_000_000_000))
    assert decode_value(OffsetKey("g", "t", 0), raw) == value


def test_offset_commit_value_with_expiry_is_v1() -> None:
    value = OffsetValue(5, "", 100, expire_timestamp=200)
    raw = encode_value(value)
    assert raw == struct.pack(">hq", 1, 5) + s16("") + struct.pack(">qq", 100, 200)
    assert decode_value(OffsetKey("g", "t", 0), raw) == value


@pytest.mark.parametrize("version", [0, 2])
def test_old_offset_values_read(version: int) -> None:
    raw = struct.pack(">hq", version, 9) + s16("m") + struct.pack(">q", 55)
    assert decode_value(OffsetKey("g", "t", 0), raw) == OffsetValue(9, "m", 55)


def test_flexible_offset_value_v4_reads() -> None:
    raw = struct.pack(">hqi", 4, 11, 2) + compact("x") + struct.pack(">q", 66) + b"\x00"
    assert decode_value(OffsetKey("g", "t", 0), raw) == OffsetValue(11, "x", 66, 2)


def test_group_metadata_roundtrip_v3_layout() -> None:
    member = MemberValue("m-1", "inst", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg")
    value = GroupValue("consumer", 4, "range", "m-1", 1234, (member,))
    raw = encode_value(value)
    expected = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 4) + s16("range")
                + s16("m-1") + struct.pack(">q", 1234) + struct.pack(">i", 1)
                + s16("m-1") + s16("inst") + s16("client") + s16("/127.0.0.1")
                + struct.pack(">ii", 30000, 10000) + b32(b"sub") + b32(b"asg"))
    assert raw == expected
    assert encode_key(GroupKey("grp")) == struct.pack(">h", 2) + s16("grp")
    assert decode_value(GroupKey("grp"), raw) == value


def test_group_metadata_v0_and_v1_read() -> None:
    v0 = (struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("range")
          + s16("m") + struct.pack(">i", 1) + s16("m") + s16("c") + s16("h")
          + struct.pack(">i", 6000) + b32(b"s") + b32(b"a"))
    got = decode_value(GroupKey("g"), v0)
    assert isinstance(got, GroupValue)
    assert got.members[0] == MemberValue("m", None, "c", "h", 6000, 6000, b"s", b"a")
    v1 = (struct.pack(">h", 1) + s16("consumer") + struct.pack(">i", 1) + s16(None)
          + s16(None) + struct.pack(">i", 1) + s16("m") + s16("c") + s16("h")
          + struct.pack(">ii", 9000, 6000) + b32(b"s") + b32(b"a"))
    got = decode_value(GroupKey("g"), v1)
    assert isinstance(got, GroupValue)
    assert got.protocol is None and got.leader is None
    assert got.members[0].rebalance_timeout == 9000 and got.members[0].session_timeout == 6000


def test_group_metadata_v4_flexible_reads() -> None:
    raw = (struct.pack(">h", 4) + compact("consumer") + struct.pack(">i", 2) + compact("range")
           + compact("m") + struct.pack(">q", 77) + bytes([2])
           + compact("m") + compact(None) + compact("c") + compact("h")
           + struct.pack(">ii", 9000, 6000) + bytes([2]) + b"s" + bytes([2]) + b"a"
           + b"\x00"  # member tags
           + b"\x01\x05\x02zz")  # one unknown top-level tagged field
    got = decode_value(GroupKey("g"), raw)
    assert got == GroupValue("consumer", 2, "range", "m", 77,
                             (MemberValue("m", None, "c", "h", 9000, 6000, b"s", b"a"),))


def test_consumer_group_metadata_layout() -> None:
    assert encode_key(ConsumerGroupKey("cg")) == struct.pack(">h", 3) + s16("cg")
    raw = encode_value(ConsumerGroupValue(12))
    assert raw == struct.pack(">hi", 0, 12) + b"\x00"
    assert decode_value(ConsumerGroupKey("cg"), raw) == ConsumerGroupValue(12)


def test_tombstones_and_skipped_types() -> None:
    assert decode_value(OffsetKey("g", "t", 0), None) is None
    target_key = struct.pack(">h", 7) + s16("cg") + s16("member")
    assert decode_key(target_key) == SkippedKey(7)
    assert decode_value(SkippedKey(7), b"\x00\x00anything") is None


def test_malformed_records_raise() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", 99) + s16("x"))
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", 1) + s16("g"))  # truncated
    with pytest.raises(RecordFormatError):
        decode_value(OffsetKey("g", "t", 0), struct.pack(">hq", 3, 1))
    with pytest.raises(RecordFormatError):
        decode_value(OffsetKey("g", "t", 0), struct.pack(">h", 9) + b"\x00" * 30)


def test_consumer_member_records_layout() -> None:
    key = ConsumerMemberKey("cg", "m1")
    assert encode_key(key) == struct.pack(">h", 5) + s16("cg") + s16("m1")
    assert decode_key(encode_key(key)) == key
    value = ConsumerMemberValue("inst", None, "client", "/1.2.3.4", ("a", "b"), None, 300000,
                                "uniform")
    raw = encode_value(value)
    assert raw == (struct.pack(">h", 0) + compact("inst") + compact(None) + compact("client")
                   + compact("/1.2.3.4") + bytes([3]) + compact("a") + compact("b")
                   + compact(None) + struct.pack(">i", 300000) + compact("uniform") + b"\x00")
    assert decode_value(key, raw) == value


def test_consumer_assignment_records_layout() -> None:
    topic = uuid.UUID(int=7)
    key = ConsumerAssignmentKey("cg", "m1")
    assert encode_key(key) == struct.pack(">h", 8) + s16("cg") + s16("m1")
    value = ConsumerAssignmentValue(4, 3, 1, ((topic, (0, 2)),), ((topic, (1,)),))
    raw = encode_value(value)
    assert raw == (struct.pack(">hiib", 0, 4, 3, 1)
                   + bytes([2]) + topic.bytes + bytes([3]) + struct.pack(">ii", 0, 2) + b"\x00"
                   + bytes([2]) + topic.bytes + bytes([2]) + struct.pack(">i", 1) + b"\x00"
                   + b"\x00")
    assert decode_value(key, raw) == value
