"""Avro compatibility table: the cases of Confluent's "Schema Evolution and Compatibility"
page for every level, and Avro's schema resolution rules (promotions, enums, unions, names,
fixed, nested records, arrays and maps, recursion)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry.compatibility import check
from moldau.registry.schemas import parse_schema


def record(*fields: dict[str, Any], name: str = "myrecord", **extra: Any) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "test",
                       "fields": list(fields), **extra})


def f(name: str, type_: Any = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def compatible(new: str, previous: list[str], level: str) -> bool:
    parsed = [parse_schema("AVRO", text) for text in previous]
    return not check(parse_schema("AVRO", new), parsed, level)


F1 = f("f1")
F2_DEFAULT = f("f2", default="foo")
F2 = f("f2")
F3_DEFAULT = f("f3", default="bar")
V1 = record(F1)
V2_ADD_OPTIONAL = record(F1, F2_DEFAULT)
V2_ADD_REQUIRED = record(F1, F2)
V3_DROP_DEFAULT = record(F1, F2)

# (case, new, previous (oldest first), level, compatible)
TABLE = [
    # BACKWARD: delete fields, add optional fields
    ("backward: add field with default", V2_ADD_OPTIONAL, [V1], "BACKWARD", True),
    ("backward: add field without default", V2_ADD_REQUIRED, [V1], "BACKWARD", False),
    ("backward: delete field", V1, [V2_ADD_REQUIRED], "BACKWARD", True),
    ("backward: delete optional field", V1, [V2_ADD_OPTIONAL], "BACKWARD", True),
    ("backward: rename field with alias", record(f("f1_new", aliases=["f1"])), [V1],
     "BACKWARD", True),
    ("backward: rename field without alias", record(f("f1_new")), [V1], "BACKWARD", False),
    ("backward: field becomes a union", record(f("f1", ["null", "string"])), [V1],
     "BACKWARD", True),
    ("backward: type removed from union", V1, [record(f("f1", ["null", "string"]))],
     "BACKWARD", False),
    ("backward: type added to union", record(f("f1", ["null", "string", "int"])),
     [record(f("f1", ["null", "string"]))], "BACKWARD", True),
    ("backward: only the latest version counts", V3_DROP_DEFAULT, [V1, V2_ADD_OPTIONAL],
     "BACKWARD", True),
    # BACKWARD_TRANSITIVE
    ("backward transitive: adding fields with defaults one by one",
     record(F1, F2_DEFAULT, F3_DEFAULT), [V1, V2_ADD_OPTIONAL], "BACKWARD_TRANSITIVE", True),
    ("backward transitive: dropping a default breaks an older version", V3_DROP_DEFAULT,
     [V1, V2_ADD_OPTIONAL], "BACKWARD_TRANSITIVE", False),
    # FORWARD: add fields, delete optional fields
    ("forward: add field without default", V2_ADD_REQUIRED, [V1], "FORWARD", True),
    ("forward: add field with default", V2_ADD_OPTIONAL, [V1], "FORWARD", True),
    ("forward: delete optional field", V1, [V2_ADD_OPTIONAL], "FORWARD", True),
    ("forward: delete required field", V1, [V2_ADD_REQUIRED], "FORWARD", False),
    ("forward: only the latest version counts", V1, [V2_ADD_REQUIRED, V2_ADD_OPTIONAL],
     "FORWARD", True),
    # FORWARD_TRANSITIVE
    ("forward transitive: deleting fields with defaults one by one", record(F1),
     [record(F1, F2_DEFAULT, F3_DEFAULT), V2_ADD_OPTIONAL], "FORWARD_TRANSITIVE", True),
    ("forward transitive: deleting a field once required", V1,
     [V2_ADD_REQUIRED, V2_ADD_OPTIONAL], "FORWARD_TRANSITIVE", False),
    # FULL: add or delete optional fields
    ("full: add optional field", V2_ADD_OPTIONAL, [V1], "FULL", True),
    ("full: delete optional field", V1, [V2_ADD_OPTIONAL], "FULL", True),
    ("full: add required field", V2_ADD_REQUIRED, [V1], "FULL", False),
    ("full: delete required field", V1, [V2_ADD_REQUIRED], "FULL", False),
    ("full: only the latest version counts", V1, [V2_ADD_REQUIRED, V2_ADD_OPTIONAL], "FULL",
     True),
    # FULL_TRANSITIVE
    ("full transitive: optional fields added one by one", record(F1, F2_DEFAULT, F3_DEFAULT),
     [V1, V2_ADD_OPTIONAL], "FULL_TRANSITIVE", True),
    ("full transitive: optional fields deleted one by one", V1,
     [record(F1, F2_DEFAULT, F3_DEFAULT), V2_ADD_OPTIONAL], "FULL_TRANSITIVE", True),
    ("full transitive: a version once required the field", V1,
     [V2_ADD_REQUIRED, V2_ADD_OPTIONAL], "FULL_TRANSITIVE", False),
    ("full transitive: the field had no default in an older version", V2_ADD_OPTIONAL,
     [V1, V2_ADD_REQUIRED, V2_ADD_OPTIONAL], "FULL_TRANSITIVE", True),
    # NONE
    ("none: anything goes", record(f("f1", "int")), [V1], "NONE", True),
    ("none: different names", '"int"', [V1], "NONE", True),
]

PROMOTIONS = [
    # (writer type, reader type, readable)
    ("int", "long", True), ("int", "float", True), ("int", "double", True),
    ("long", "float", True), ("long", "double", True), ("float", "double", True),
    ("string", "bytes", True), ("bytes", "string", True),
    ("long", "int", False), ("double", "float", False), ("float", "long", False),
    ("int", "string", False), ("boolean", "int", False), ("null", "string", False),
]


@pytest.mark.parametrize("case, new, previous, level, expected", TABLE,
                         ids=[row[0] for row in TABLE])
def test_levels(case: str, new: str, previous: list[str], level: str, expected: bool) -> None:
    assert compatible(new, previous, level) is expected


@pytest.mark.parametrize("writer, reader, readable", PROMOTIONS)
def test_promotions(writer: str, reader: str, readable: bool) -> None:
    assert compatible(record(f("x", reader)), [record(f("x", writer))], "BACKWARD") is readable


ENUM_AB = {"type": "enum", "name": "Suit", "symbols": ["A", "B"]}
ENUM_ABC = {"type": "enum", "name": "Suit", "symbols": ["A", "B", "C"]}
ENUM_AB_DEFAULT = {**ENUM_AB, "default": "A"}

RULES = [
    ("enum symbol added, reader has it", record(f("e", ENUM_ABC)), record(f("e", ENUM_AB)),
     True),
    ("enum symbol removed", record(f("e", ENUM_AB)), record(f("e", ENUM_ABC)), False),
    ("enum symbol removed, reader has an enum default", record(f("e", ENUM_AB_DEFAULT)),
     record(f("e", ENUM_ABC)), True),
    ("enum renamed", record(f("e", {**ENUM_AB, "name": "Other"})), record(f("e", ENUM_AB)),
     False),
    ("enum field added with an enum default only", record(F1, f("e", ENUM_AB_DEFAULT)),
     record(F1), False),
    ("record renamed", record(F1, name="other"), record(F1), False),
    ("record renamed with an alias", record(F1, name="other", aliases=["test.myrecord"]),
     record(F1), True),
    ("record namespace changed", json.dumps({"type": "record", "name": "myrecord",
                                             "namespace": "elsewhere", "fields": [F1]}),
     record(F1), True),
    ("fixed size changed", record(f("h", {"type": "fixed", "name": "H", "size": 8})),
     record(f("h", {"type": "fixed", "name": "H", "size": 16})), False),
    ("fixed same size", record(f("h", {"type": "fixed", "name": "H", "size": 16})),
     record(f("h", {"type": "fixed", "name": "H", "size": 16})), True),
    ("fixed renamed", record(f("h", {"type": "fixed", "name": "G", "size": 16})),
     record(f("h", {"type": "fixed", "name": "H", "size": 16})), False),
    ("nested record gains a field with default",
     record(f("n", {"type": "record", "name": "N", "fields": [F1, F2_DEFAULT]})),
     record(f("n", {"type": "record", "name": "N", "fields": [F1]})), True),
    ("nested record gains a required field",
     record(f("n", {"type": "record", "name": "N", "fields": [F1, F2]})),
     record(f("n", {"type": "record", "name": "N", "fields": [F1]})), False),
    ("array items promoted", record(f("a", {"type": "array", "items": "long"})),
     record(f("a", {"type": "array", "items": "int"})), True),
    ("array items narrowed", record(f("a", {"type": "array", "items": "int"})),
     record(f("a", {"type": "array", "items": "long"})), False),
    ("map values promoted", record(f("m", {"type": "map", "values": "double"})),
     record(f("m", {"type": "map", "values": "float"})), True),
    ("map becomes array", record(f("m", {"type": "array", "items": "double"})),
     record(f("m", {"type": "map", "values": "double"})), False),
    ("writer union, reader reads every branch", record(f("u", "double")),
     record(f("u", ["int", "long"])), True),
    ("writer union, one branch unreadable", record(f("u", "long")),
     record(f("u", ["int", "string"])), False),
    ("reader union with a promoting branch", record(f("u", ["null", "long"])),
     record(f("u", "int")), True),
    ("recursive record unchanged",
     record(f("next", ["null", "test.myrecord"], default=None)),
     record(f("next", ["null", "test.myrecord"], default=None)), True),
    ("recursive record gains a field",
     record(f("next", ["null", "test.myrecord"], default=None), F2_DEFAULT),
     record(f("next", ["null", "test.myrecord"], default=None)), True),
    ("primitive to record", record(f("x", {"type": "record", "name": "X", "fields": []})),
     record(f("x", "int")), False),
]


@pytest.mark.parametrize("case, reader, writer, readable", RULES, ids=[r[0] for r in RULES])
def test_resolution_rules(case: str, reader: str, writer: str, readable: bool) -> None:
    assert compatible(reader, [writer], "BACKWARD") is readable


def test_messages_are_confluents() -> None:
    messages = check(parse_schema("AVRO", V2_ADD_REQUIRED), [parse_schema("AVRO", V1)],
                     "BACKWARD", versions=[3])
    assert messages == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path "
        "'/fields/1' in the new schema has no default value and is missing in the old schema', "
        "additionalInfo:'f2'}",
        "{oldSchemaVersion: 3}",
        "{oldSchema: '" + parse_schema("AVRO", V1).canonical() + "'}",
    ]


def test_forward_messages_name_the_old_schema_as_reader() -> None:
    messages = check(parse_schema("AVRO", record(f("f1", "int"))), [parse_schema("AVRO", V1)],
                     "FORWARD")
    assert messages[0] == (
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field "
        "in the old schema does not match with the new schema', additionalInfo:'reader type: "
        "STRING not compatible with writer type: INT'}"
    )


def test_full_lists_forward_then_backward() -> None:
    messages = check(parse_schema("AVRO", record(f("f1", "int"))), [parse_schema("AVRO", V1)],
                     "FULL")
    assert [m.split(",")[0] for m in messages] == [
        "{errorType:'TYPE_MISMATCH'", "{errorType:'TYPE_MISMATCH'",
        "{oldSchema: '{\"type\":\"record\""]


def test_enum_and_union_messages() -> None:
    enum = check(parse_schema("AVRO", record(f("e", ENUM_AB))),
                 [parse_schema("AVRO", record(f("e", ENUM_ABC)))], "BACKWARD")
    assert enum[0].startswith(
        "{errorType:'MISSING_ENUM_SYMBOLS', description:'The new schema is missing enum "
        "symbols '[C]' at path '/fields/0/type/symbols' in the old schema'")
    union = check(parse_schema("AVRO", record(f("u", ["null", "string"]))),
                  [parse_schema("AVRO", record(f("u", ["null", "string", "int"])))], "BACKWARD")
    assert union[0].startswith(
        "{errorType:'MISSING_UNION_BRANCH', description:'The new schema is missing a type "
        "inside a union field at path '/fields/0/type/2' in the old schema'")


def test_transitive_stops_at_the_first_incompatible_version() -> None:
    versions = [parse_schema("AVRO", text) for text in (V1, V2_ADD_OPTIONAL)]
    messages = check(parse_schema("AVRO", V3_DROP_DEFAULT), versions, "BACKWARD_TRANSITIVE",
                     versions=[1, 2])
    assert "{oldSchemaVersion: 1}" in messages


def test_different_schema_type() -> None:
    json_schema = parse_schema("JSON", '{"type": "object"}')
    assert check(parse_schema("AVRO", V1), [json_schema], "BACKWARD") == [
        "Incompatible because of different schema type"]


def test_unknown_level() -> None:
    with pytest.raises(ValueError, match="level"):
        check(parse_schema("AVRO", V1), [], "SIDEWAYS")


def test_levels_are_case_insensitive_and_no_previous_is_compatible() -> None:
    assert check(parse_schema("AVRO", V2_ADD_REQUIRED), [], "backward") == []


def test_an_error_in_a_rule_refuses_with_a_message() -> None:
    class Broken:
        schema_type = "AVRO"

        def canonical(self) -> str:
            return "{}"

        def backward_messages(self, previous: object, **labels: str) -> list[str]:
            raise KeyError("boom")

    messages = check(Broken(), [Broken()], "BACKWARD")  # type: ignore[arg-type]
    assert messages[0] == "Unexpected exception during compatibility check: 'boom'"
