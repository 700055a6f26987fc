"""The consumer protocol's embedded bytes, subscriptions and the group config keys."""

from __future__ import annotations

import asyncio
import re
import struct

import pytest

from moldau.client.config import parse_config
from moldau.client.errors import ConfigError
from moldau.client.group.consumer_protocol import (
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_generation_user_data,
    encode_sticky_user_data,
    encode_subscription,
    member_ownership,
)
from moldau.client.group.listener import RebalanceListener, invoke, make_listener
from moldau.client.group.offsets import as_offset
from moldau.client.group.subscription import TopicSubscription
from moldau.client.group.types import OffsetAndMetadata
from moldau.client.types import TopicPartition as TP


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def i32(*values: int) -> bytes:
    return b"".join(struct.pack(">i", v) for v in values)


def test_subscription_v0_golden_bytes() -> None:
    # Version, [topic], user data (null): the layout every client since 0.9 reads.
    expected = struct.pack(">h", 0) + i32(2) + s16("a") + s16("bb") + i32(-1)
    assert encode_subscription(["bb", "a"], version=0) == expected


def test_subscription_v3_golden_bytes() -> None:
    expected = (struct.pack(">h", 3) + i32(1) + s16("t") + i32(4) + b"\x00\x01\x02\x03"
                + i32(1) + s16("t") + i32(2, 0, 2) + i32(7) + s16("rack-1"))
    got = encode_subscription(["t"], owned=[TP("t", 2), TP("t", 0)], generation=7,
                              rack="rack-1", user_data=b"\x00\x01\x02\x03")
    assert got == expected


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip_every_version(version: int) -> None:
    raw = encode_subscription(["x", "y"], owned=[TP("x", 1)], generation=4, rack="r",
                              user_data=b"ud", version=version)
    sub = decode_subscription("m", raw, "inst")
    assert sub.member_id == "m" and sub.instance_id == "inst"
    assert sub.topics == ("x", "y") and sub.user_data == b"ud"
    assert sub.owned == ((TP("x", 1),) if version >= 1 else ())
    assert sub.generation == (4 if version >= 2 else -1)
    assert sub.rack == ("r" if version >= 3 else None)


def test_subscription_newer_version_read_as_newest_known() -> None:
    raw = bytearray(encode_subscription(["t"], generation=2))
    raw[0:2] = struct.pack(">h", 9)
    raw += b"future fields"
    assert decode_subscription("m", bytes(raw)).generation == 2


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\xff\xff", b"\x00\x00\x00\x00\x00\x05ab"])
def test_malformed_subscription_is_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        decode_subscription("m", raw)


def test_assignment_golden_and_round_trip() -> None:
    expected = struct.pack(">h", 0) + i32(1) + s16("t") + i32(2, 0, 3) + i32(-1)
    assert encode_assignment([TP("t", 3), TP("t", 0)], version=0) == expected
    assert decode_assignment(expected) == ([TP("t", 0), TP("t", 3)], None)
    assert decode_assignment(b"") == ([], None)
    raw = encode_assignment([TP("a", 1), TP("b", 0)], user_data=b"u")
    assert decode_assignment(raw) == ([TP("a", 1), TP("b", 0)], b"u")


def test_sticky_user_data_layout() -> None:
    raw = encode_sticky_user_data([TP("t", 1), TP("t", 0)], 5)
    assert raw == i32(1) + s16("t") + i32(2, 0, 1) + i32(5)
    assert decode_sticky_user_data(raw) == ([TP("t", 0), TP("t", 1)], 5)
    # v0 (no generation)
    assert decode_sticky_user_data(i32(0)) == ([], -1)
    with pytest.raises(ValueError):
        decode_sticky_user_data(i32(1) + s16("t") + i32(3, 0))


def test_member_ownership_sources() -> None:
    # Java cooperative-sticky: generation in the subscription (v2+) or a bare int32.
    plain = decode_subscription("m", encode_subscription(
        ["t"], owned=[TP("t", 0)], user_data=encode_generation_user_data(6), version=1))
    assert member_ownership(plain, prefer_user_data=False) == ((TP("t", 0),), 6)
    # librdkafka sends sticky-format user data; eager sticky trusts it over owned fields.
    sticky = decode_subscription("m", encode_subscription(
        ["t"], user_data=encode_sticky_user_data([TP("t", 2)], 3)))
    assert member_ownership(sticky, prefer_user_data=True) == ((TP("t", 2),), 3)
    garbage = decode_subscription("m", encode_subscription(["t"], user_data=b"\x01\x02\x03"))
    assert member_ownership(garbage, prefer_user_data=True) == ((), -1)


# --- subscriptions, listeners, offsets ----------------------------------------------------

def test_topic_subscription_forms() -> None:
    names = TopicSubscription.parse(["a", "b"])
    assert names.names == {"a", "b"} and not names.is_pattern
    pattern = TopicSubscription.parse("^orders-.*")
    assert pattern.matches("orders-eu") and not pattern.matches("xorders-eu")
    assert pattern.regex == "^orders-.*"
    compiled = TopicSubscription.parse(re.compile("a|b"))
    assert compiled.matches("a") and not compiled.matches("ab")  # whole names, as Java
    with pytest.raises(ValueError, match="not a mix"):
        TopicSubscription.parse(["^a.*", "b"])
    with pytest.raises(ValueError, match="bad topic pattern"):
        TopicSubscription.parse("^(")


def test_listener_forms_and_errors() -> None:
    asyncio.run(_listener_forms_and_errors())


async def _listener_forms_and_errors() -> None:
    calls: list[tuple[str, set[TP]]] = []

    async def on_revoke(parts: set[TP]) -> None:
        calls.append(("revoke", parts))

    listener = make_listener(None, lambda p: calls.append(("assign", p)), on_revoke, None)
    assert await invoke(listener, "assigned", {TP("t", 0)}) is None
    assert await invoke(listener, "revoked", {TP("t", 1)}) is None
    assert await invoke(listener, "lost", {TP("t", 2)}) is None  # lost defaults to revoked
    assert calls == [("assign", {TP("t", 0)}), ("revoke", {TP("t", 1)}),
                     ("revoke", {TP("t", 2)})]

    class Broken(RebalanceListener):
        def on_partitions_assigned(self, partitions: set[TP]) -> None:
            raise RuntimeError("boom")

    error = await invoke(Broken(), "assigned", set())
    assert isinstance(error, RuntimeError)
    with pytest.raises(ValueError, match="not both"):
        make_listener(Broken(), print, None, None)


def test_as_offset() -> None:
    assert as_offset(5) == OffsetAndMetadata(5, "", -1)
    assert as_offset((7, "meta")) == OffsetAndMetadata(7, "meta", -1)
    assert as_offset(OffsetAndMetadata(1, "x", 3)) == OffsetAndMetadata(1, "x", 3)


def test_group_config_keys() -> None:
    config = parse_config("consumer", {"bootstrap.servers": "h:1"})
    assert config["partition.assignment.strategy"] == ("range", "cooperative-sticky")
    assert config["group.protocol"] == "classic"
    assert config["session.timeout.ms"] == 45000
    config = parse_config("consumer", {
        "bootstrap.servers": "h:1", "group.protocol": "CONSUMER",
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.StickyAssignor",
    })
    assert config["group.protocol"] == "consumer"
    assert config["partition.assignment.strategy"] == ("sticky",)
    with pytest.raises(ConfigError, match=r"group\.protocol must be one of"):
        parse_config("consumer", {"bootstrap.servers": "h:1", "group.protocol": "new"})
