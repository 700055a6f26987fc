"""Confluent's wire format (moldau.registry.serde.wire) against confluent-kafka's own framing
code (its SchemaId class: pure, no registry), and the subject name strategies."""

from __future__ import annotations

import io

import pytest
from confluent_kafka.schema_registry.serde import SchemaId

from moldau.registry.serde import wire
from moldau.registry.serde.strategies import strategy_from_config

INDEX_CASES = [[0], [1], [0, 0], [2, 5], [0, 1, 2], [63], [64], [300, 1], [1000000]]


@pytest.mark.parametrize("schema_id", [0, 1, 255, 256, 65536, 2**31 - 1, 2**32 - 1])
def test_frame_bytes_equal_confluent_kafka(schema_id: int) -> None:
    ours = wire.frame(schema_id, b"payload")
    theirs = SchemaId("AVRO", schema_id).id_to_bytes() + b"payload"
    assert ours == theirs
    assert wire.parse_frame(ours) == wire.Frame(schema_id, b"payload", None)


@pytest.mark.parametrize("indexes", INDEX_CASES)
def test_protobuf_indexes_equal_confluent_kafka(indexes: list[int]) -> None:
    ours = wire.frame(7, b"\x08\x01", indexes)
    theirs = SchemaId("PROTOBUF", 7, message_indexes=list(indexes)).id_to_bytes() + b"\x08\x01"
    assert ours == theirs
    parsed = wire.parse_frame(ours, protobuf=True)
    assert parsed == wire.Frame(7, b"\x08\x01", tuple(indexes))
    # and confluent-kafka reads ours the same way
    theirs_read = SchemaId("PROTOBUF")
    rest = theirs_read.from_bytes(io.BytesIO(ours))
    assert (theirs_read.id, theirs_read.message_indexes, rest.read()) == (
        7, list(indexes), b"\x08\x01")


def test_the_first_message_is_the_single_byte_zero() -> None:
    assert wire.frame(1, b"", [0]) == b"\x00\x00\x00\x00\x01\x00"
    # a count of 1 followed by index 0 means the same
    assert wire.parse_frame(b"\x00\x00\x00\x00\x01\x02\x00x", protobuf=True).message_indexes == (0,)


@pytest.mark.parametrize("data, message", [
    (b"", "total data size is 0"),
    (b"\x00\x00\x00\x01", "total data size is 4"),
    (b"\x01\x00\x00\x00\x01x", "unknown magic byte 1"),
])
def test_bad_frames_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(wire.SerializationError, match=message):
        wire.parse_frame(data)


def test_truncated_protobuf_indexes_are_refused() -> None:
    with pytest.raises(wire.SerializationError, match="inside a message index"):
        wire.parse_frame(b"\x00\x00\x00\x00\x01\x80", protobuf=True)
    with pytest.raises(wire.SerializationError, match="count"):
        wire.parse_frame(b"\x00\x00\x00\x00\x01\x01", protobuf=True)  # count -1


def test_schema_ids_must_fit_four_bytes() -> None:
    with pytest.raises(wire.SerializationError):
        wire.frame(2**32, b"")


@pytest.mark.parametrize("name, is_key, record, expected", [
    (None, False, "ns.R", "orders-value"),
    ("TopicNameStrategy", True, "ns.R", "orders-key"),
    ("RecordNameStrategy", False, "ns.R", "ns.R"),
    ("io.confluent.kafka.serializers.subject.RecordNameStrategy", False, "ns.R", "ns.R"),
    ("TopicRecordNameStrategy", False, "ns.R", "orders-ns.R"),
    ("TopicRecordNameStrategy", False, None, None),
])
def test_subject_name_strategies(name: str | None, is_key: bool, record: str | None,
                                 expected: str | None) -> None:
    assert strategy_from_config(name)("orders", is_key, record) == expected


def test_unknown_strategy_is_named() -> None:
    with pytest.raises(wire.SerializationError, match="FancyStrategy"):
        strategy_from_config("FancyStrategy")
