"""_schemas records: Confluent's key and value JSON, byte for byte where it matters."""

from __future__ import annotations

import pytest

from moldau.registry.records import (
    ClearSubjectKey,
    ClearSubjectValue,
    ConfigKey,
    ConfigValue,
    DeleteSubjectKey,
    DeleteSubjectValue,
    ModeKey,
    ModeValue,
    NoopKey,
    OtherKey,
    RecordError,
    SchemaKey,
    SchemaValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from moldau.registry.schemas.base import Reference


def test_keys_are_confluents_bytes() -> None:
    assert encode_key(SchemaKey("t-value", 3)) == (
        b'{"keytype":"SCHEMA","subject":"t-value","version":3,"magic":1}')
    assert encode_key(ConfigKey()) == b'{"keytype":"CONFIG","magic":0}'
    assert encode_key(ConfigKey("s")) == b'{"keytype":"CONFIG","subject":"s","magic":0}'
    assert encode_key(ModeKey()) == b'{"keytype":"MODE","magic":0}'
    assert encode_key(DeleteSubjectKey("s")) == (
        b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}')
    assert encode_key(ClearSubjectKey("s")) == (
        b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}')
    assert encode_key(NoopKey()) == b'{"keytype":"NOOP","magic":0}'


@pytest.mark.parametrize("key", [
    SchemaKey("a", 1), ConfigKey(), ConfigKey("a"), ModeKey(), ModeKey("ü"),
    DeleteSubjectKey("a"), ClearSubjectKey("a"), ClearSubjectKey(), NoopKey()])
def test_keys_round_trip(key: object) -> None:
    assert decode_key(encode_key(key)) == key  # type: ignore[arg-type]


def test_values_round_trip_and_leave_out_empty_members() -> None:
    avro = SchemaValue("s", 1, 7, '"string"')
    assert encode_value(avro) == (
        b'{"subject":"s","version":1,"id":7,"schema":"\\"string\\"","deleted":false}')
    proto = SchemaValue("p", 2, 9, 'syntax = "proto3";', "PROTOBUF",
                        (Reference("dep.proto", "dep", 1),), {"properties": {"a": "b"}},
                        None, True)
    cases: list[tuple[object, object]] = [
        (SchemaKey("s", 1), avro), (SchemaKey("p", 2), proto),
        (ConfigKey(), ConfigValue("FULL", True, {"alias": "x"})),
        (ModeKey("s"), ModeValue("IMPORT")),
        (DeleteSubjectKey("s"), DeleteSubjectValue("s", 4)),
        (ClearSubjectKey(), ClearSubjectValue()),
    ]
    for key, value in cases:
        assert decode_value(key, encode_value(value)) == value  # type: ignore[arg-type]
    assert encode_value(None) is None
    assert decode_value(SchemaKey("s", 1), None) is None


def test_records_written_by_confluent_decode() -> None:
    # older Confluent versions write null members and no schemaType for Avro
    key = decode_key(b'{"keytype":"CONFIG","subject":null,"magic":0}')
    assert key == ConfigKey(None)
    assert decode_value(key, b'{"compatibilityLevel":"backward"}') == ConfigValue("BACKWARD")
    key = decode_key(b'{"keytype":"SCHEMA","subject":"t","version":1,"magic":1}')
    value = decode_value(key, b'{"subject":"t","version":1,"id":1,"schema":"\\"int\\"",'
                              b'"deleted":false,"md5":"abc","ts":1}')
    assert value == SchemaValue("t", 1, 1, '"int"')
    assert decode_key(b'{"keytype":"CONTEXT","tenant":"default","context":".x"}') == (
        OtherKey("CONTEXT"))
    assert decode_value(OtherKey("ASSOC"), b'{"whatever":1}') is None
    assert decode_value(NoopKey(), None) is None


@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"magic":0}',
                                 b'{"keytype":"SCHEMA","subject":"s","magic":1}',
                                 b'{"keytype":"SCHEMA","version":1,"magic":1}'])
def test_malformed_keys_are_record_errors(raw: bytes) -> None:
    with pytest.raises(RecordError):
        decode_key(raw)


@pytest.mark.parametrize("key, raw", [
    (SchemaKey("s", 1), b'{"subject":"s","version":1,"id":1}'),
    (SchemaKey("s", 1), b'{"subject":"s","version":1,"schema":"x"}'),
    (SchemaKey("s", 1), b'{"id":1,"schema":"x","references":[{"name":1}]}'),
    (ModeKey(), b'{"mode":3}'),
    (DeleteSubjectKey("s"), b'{"subject":"s"}'),
    (ConfigKey(), b'"FULL"'),
])
def test_malformed_values_are_record_errors(key: object, raw: bytes) -> None:
    with pytest.raises(RecordError):
        decode_value(key, raw)  # type: ignore[arg-type]
