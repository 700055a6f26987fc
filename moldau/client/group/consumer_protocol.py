"""The ``consumer`` protocol's embedded bytes: what members put in JoinGroup and what the
leader hands out in SyncGroup.

ConsumerProtocolSubscription (v0-3: topics, user data, owned partitions, generation, rack)
and ConsumerProtocolAssignment (v0-3) use kio's schemas; both begin with an int16 version,
and a newer version than we know is read as the newest known one (Kafka's rule: fields are
only ever appended). The assignors' user data has no version prefix:

- ``sticky`` (Java's StickyAssignor, librdkafka's sticky user data): previous assignment as
  ``[topic [partition]]`` then an int32 generation (v1; v0 lacks the generation).
- ``cooperative-sticky`` (Java): a bare int32 generation.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_assignment.v2 import data as assignment_v2
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.consumer_protocol_subscription.v2 import data as subscription_v2
from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
from kio.serial import entity_reader, entity_writer

from moldau.protocol.entities import build

from ..types import TopicPartition
from .types import MemberSubscription

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3  # what the Java client 3.x sends: owned partitions, generation, rack
ASSIGNMENT_VERSION = 3

_SUBSCRIPTIONS: list[Any] = [m.ConsumerProtocolSubscription for m in
                             (subscription_v0, subscription_v1, subscription_v2,
                              subscription_v3)]
_ASSIGNMENTS: list[Any] = [m.ConsumerProtocolAssignment for m in
                           (assignment_v0, assignment_v1, assignment_v2, assignment_v3)]
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _by_topic(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(topics.items())]


def _flatten(entries: Iterable[Any]) -> list[TopicPartition]:
    return [TopicPartition(e.topic, p) for e in entries for p in e.partitions]


def _encode(cls: Any, version: int, data: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    out.write(_INT16.pack(version))
    entity_writer(cls)(out, build(cls, data, strict=True))
    return out.getvalue()


def _decode(classes: list[Any], data: bytes, what: str) -> tuple[int, Any]:
    if len(data) < 2:
        raise ValueError(f"{what} of {len(data)} bytes is shorter than its version field")
    (version,) = _INT16.unpack_from(data, 0)
    if version < 0:
        raise ValueError(f"{what} has a negative version ({version})")
    cls = classes[min(version, len(classes) - 1)]
    try:
        value, _size = entity_reader(cls)(memoryview(bytes(data)), 2)
    except Exception as exc:
        raise ValueError(f"malformed {what} v{version}: {exc}") from None
    return version, value


def encode_subscription(
    topics: Iterable[str],
    *,
    owned: Iterable[TopicPartition] = (),
    generation: int = -1,
    rack: str | None = None,
    user_data: bytes | None = None,
    version: int = SUBSCRIPTION_VERSION,
) -> bytes:
    """A ConsumerProtocolSubscription (JoinGroup member metadata)."""
    return _encode(_SUBSCRIPTIONS[version], version, {
        "topics": sorted(set(topics)),
        "user_data": user_data,
        "owned_partitions": _by_topic(owned),
        "generation_id": generation,
        "rack_id": rack or None,
    })


def decode_subscription(member_id: str, data: bytes,
                        instance_id: str | None = None) -> MemberSubscription:
    """A member's JoinGroup metadata as a MemberSubscription; raises ValueError if malformed."""
    version, value = _decode(_SUBSCRIPTIONS, data, "consumer protocol subscription")
    owned = tuple(_flatten(value.owned_partitions)) if version >= 1 else ()
    generation = int(value.generation_id) if version >= 2 else -1
    rack = value.rack_id if version >= 3 else None
    return MemberSubscription(
        member_id, tuple(value.topics), owned, generation, instance_id, rack or None,
        value.user_data,
    )


def encode_assignment(partitions: Iterable[TopicPartition], user_data: bytes | None = None,
                      version: int = ASSIGNMENT_VERSION) -> bytes:
    """A ConsumerProtocolAssignment (SyncGroup assignment bytes)."""
    return _encode(_ASSIGNMENTS[version], version, {
        "assigned_partitions": _by_topic(partitions),
        "user_data": user_data,
    })


def decode_assignment(data: bytes) -> tuple[list[TopicPartition], bytes | None]:
    """(partitions, user data) of SyncGroup assignment bytes; empty bytes mean nothing."""
    if not data:
        return [], None
    _version, value = _decode(_ASSIGNMENTS, data, "consumer protocol assignment")
    return _flatten(value.assigned_partitions), value.user_data


# --- assignor user data -------------------------------------------------------------------

def encode_sticky_user_data(owned: Iterable[TopicPartition], generation: int) -> bytes:
    """Java StickyAssignorUserData v1: previous assignment and generation."""
    out = bytearray()
    topics = _by_topic(owned)
    out += _INT32.pack(len(topics))
    for entry in topics:
        raw = entry["topic"].encode("utf-8")
        out += _INT16.pack(len(raw)) + raw
        out += _INT32.pack(len(entry["partitions"]))
        for p in entry["partitions"]:
            out += _INT32.pack(p)
    out += _INT32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int]:
    """(previous assignment, generation) of StickyAssignorUserData v0/v1 (-1 without one)."""
    pos = 0

    def take(fmt: struct.Struct) -> int:
        nonlocal pos
        if pos + fmt.size > len(data):
            raise ValueError("sticky assignor user data is truncated")
        (value,) = fmt.unpack_from(data, pos)
        pos += fmt.size
        return int(value)

    owned: list[TopicPartition] = []
    for _ in range(take(_INT32)):
        length = take(_INT16)
        if length < 0 or pos + length > len(data):
            raise ValueError("sticky assignor user data has a bad topic name")
        topic = bytes(data[pos:pos + length]).decode("utf-8")
        pos += length
        owned.extend(TopicPartition(topic, take(_INT32)) for _ in range(take(_INT32)))
    generation = take(_INT32) if pos + 4 <= len(data) else -1
    return owned, generation


def encode_generation_user_data(generation: int) -> bytes:
    """Java CooperativeStickyAssignor user data: the generation as int32."""
    return _INT32.pack(generation)


def member_ownership(sub: MemberSubscription, prefer_user_data: bool
                     ) -> tuple[tuple[TopicPartition, ...], int]:
    """(owned partitions, generation) of a member for the sticky assignors.

    Java's eager StickyAssignor reads both from its user data (``prefer_user_data``); the
    cooperative one reads the subscription's own fields, falling back to the user data
    (a bare int32 generation from Java, sticky-format data from librdkafka).
    """
    owned, generation = sub.owned, sub.generation
    data = sub.user_data
    if data:
        try:
            if len(data) == 4:
                from_data: tuple[tuple[TopicPartition, ...], int] = ((), _INT32.unpack(data)[0])
            else:
                parsed, gen = decode_sticky_user_data(data)
                from_data = (tuple(parsed), gen)
        except (ValueError, UnicodeDecodeError):
            from_data = ((), -1)
        if prefer_user_data:
            if from_data[0] or from_data[1] >= 0:
                owned = from_data[0] or owned
                generation = from_data[1] if from_data[1] >= 0 else generation
        else:
            if not owned:
                owned = from_data[0]
            if generation < 0:
                generation = from_data[1]
    return owned, generation
