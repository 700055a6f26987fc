"""The ``consumer`` protocol type's embedded metadata: ConsumerProtocolSubscription (what a
classic member sends in JoinGroup) and ConsumerProtocolAssignment (what the leader hands out
in SyncGroup). Both start with an int16 version; kio has the schemas for versions 0-3, and a
newer version is read as the newest known one (Kafka's own rule for these structs).
"""

from __future__ import annotations

import io
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

from ...protocol.entities import build

_SUBSCRIPTIONS = [m.ConsumerProtocolSubscription for m in
                  (subscription_v0, subscription_v1, subscription_v2, subscription_v3)]
_ASSIGNMENTS = [m.ConsumerProtocolAssignment for m in
                (assignment_v0, assignment_v1, assignment_v2, assignment_v3)]


def _read(classes: list[Any], data: bytes) -> Any:
    if len(data) < 2:
        raise ValueError("embedded consumer protocol metadata is shorter than its version")
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        raise ValueError(f"bad consumer protocol version {version}")
    cls = classes[min(version, len(classes) - 1)]
    try:
        value, _ = entity_reader(cls)(data, 2)
    except Exception as exc:
        raise ValueError(f"malformed {cls.__name__} v{version}: {exc}") from exc
    return value


def subscription_topics(data: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription; raises ValueError when malformed."""
    return list(_read(_SUBSCRIPTIONS, data).topics)


def assignment_partitions(data: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of a ConsumerProtocolAssignment (empty bytes = nothing)."""
    if not data:
        return {}
    value = _read(_ASSIGNMENTS, data)
    return {tp.topic: list(tp.partitions) for tp in value.assigned_partitions}


def _encode(cls: Any, version: int, data: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    out.write(version.to_bytes(2, "big"))
    entity_writer(cls)(out, build(cls, data))
    return out.getvalue()


def encode_subscription(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    """A ConsumerProtocolSubscription v1 (what DescribeGroups shows for KIP-848 members)."""
    return _encode(_SUBSCRIPTIONS[1], 1, {
        "topics": sorted(topics), "user_data": None,
        "owned_partitions": [{"topic": t, "partitions": sorted(p)}
                             for t, p in sorted((owned or {}).items())],
    })


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0 (what DescribeGroups shows for KIP-848 members)."""
    return _encode(_ASSIGNMENTS[0], 0, {
        "assigned_partitions": [{"topic": t, "partitions": sorted(p)}
                                for t, p in sorted(partitions.items())],
        "user_data": None,
    })
