"""Protobuf compatibility table: Confluent's Protobuf rules per level (fields are optional in
proto3, so adding and removing them is compatible at every level; adding a message type is
backward but not forward compatible) and the wire-compatible type groups."""

from __future__ import annotations

import pytest

from moldau.registry.compatibility import check
from moldau.registry.schemas import parse_schema


def p3(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def p2(body: str) -> str:
    return f'syntax = "proto2";\npackage shop;\n{body}\n'


def compatible(new: str, previous: list[str], level: str) -> bool:
    parsed = [parse_schema("PROTOBUF", text) for text in previous]
    return not check(parse_schema("PROTOBUF", new), parsed, level)


V1 = p3("message Order { string id = 1; int32 qty = 2; }")
V2_ADDED = p3("message Order { string id = 1; int32 qty = 2; string note = 3; }")
V2_REMOVED = p3("message Order { string id = 1; }")
V2_NEW_MESSAGE = p3("message Order { string id = 1; int32 qty = 2; }\nmessage Extra { }")
V3_READDED_AS_STRING = p3("message Order { string id = 1; string qty = 2; }")

LEVEL_TABLE = [
    ("backward: add field", V2_ADDED, [V1], "BACKWARD", True),
    ("backward: remove field", V2_REMOVED, [V1], "BACKWARD", True),
    ("backward: add message type", V2_NEW_MESSAGE, [V1], "BACKWARD", True),
    ("backward: remove message type", V1, [V2_NEW_MESSAGE], "BACKWARD", False),
    ("backward: latest only", V3_READDED_AS_STRING, [V1, V2_REMOVED], "BACKWARD", True),
    ("backward transitive: number reused with another type", V3_READDED_AS_STRING,
     [V1, V2_REMOVED], "BACKWARD_TRANSITIVE", False),
    ("backward transitive: fields added one by one", V2_ADDED, [V2_REMOVED, V1],
     "BACKWARD_TRANSITIVE", True),
    ("forward: add field", V2_ADDED, [V1], "FORWARD", True),
    ("forward: remove field", V2_REMOVED, [V1], "FORWARD", True),
    ("forward: add message type", V2_NEW_MESSAGE, [V1], "FORWARD", False),
    ("forward: remove message type", V1, [V2_NEW_MESSAGE], "FORWARD", True),
    ("forward transitive: number reused with another type", V3_READDED_AS_STRING,
     [V1, V2_REMOVED], "FORWARD_TRANSITIVE", False),
    ("forward transitive: compatible chain", V2_ADDED, [V2_REMOVED, V1],
     "FORWARD_TRANSITIVE", True),
    ("full: add field", V2_ADDED, [V1], "FULL", True),
    ("full: remove field", V2_REMOVED, [V1], "FULL", True),
    ("full: add message type", V2_NEW_MESSAGE, [V1], "FULL", False),
    ("full: latest only", V3_READDED_AS_STRING, [V1, V2_REMOVED], "FULL", True),
    ("full transitive: number reused", V3_READDED_AS_STRING, [V1, V2_REMOVED],
     "FULL_TRANSITIVE", False),
    ("full transitive: compatible chain", V2_ADDED, [V2_REMOVED, V1], "FULL_TRANSITIVE",
     True),
    ("none: anything", p3("message Other { bytes b = 1; }", "elsewhere"), [V1], "NONE", True),
]


@pytest.mark.parametrize("case, new, previous, level, expected", LEVEL_TABLE,
                         ids=[row[0] for row in LEVEL_TABLE])
def test_levels(case: str, new: str, previous: list[str], level: str, expected: bool) -> None:
    assert compatible(new, previous, level) is expected


# (old field type, new field type, compatible): Confluent's wire-compatible groups
TYPE_CHANGES = [
    ("int32", "int64", True), ("int32", "uint32", True), ("uint64", "bool", True),
    ("int64", "Colour", True), ("sint32", "sint64", True), ("string", "bytes", True),
    ("fixed32", "sfixed32", True), ("fixed64", "sfixed64", True),
    ("int32", "sint32", False), ("int32", "fixed32", False), ("float", "double", False),
    ("fixed32", "fixed64", False), ("int32", "string", False), ("string", "Item", False),
    ("Item", "Other", False), ("Item", "Colour", False), ("bytes", "double", False),
]


@pytest.mark.parametrize("old, new, expected", TYPE_CHANGES)
def test_field_type_changes(old: str, new: str, expected: bool) -> None:
    types = "message Item { string sku = 1; }\nmessage Other { string x = 1; }\n" \
            "enum Colour { RED = 0; }"
    before = p3(f"message Order {{ {old} f = 1; }}\n{types}")
    after = p3(f"message Order {{ {new} f = 1; }}\n{types}")
    assert compatible(after, [before], "BACKWARD") is expected


RULES = [
    ("field renamed", p3("message Order { string id = 1; int32 amount = 2; }"), V1, True),
    ("field number changed", p3("message Order { string id = 1; int32 qty = 3; }"), V1, True),
    ("removed field reserved", p3("message Order { string id = 1; reserved 2; "
                                  'reserved "qty"; }'), V1, True),
    ("package changed", p3("message Order { string id = 1; int32 qty = 2; }", "store"), V1,
     False),
    ("syntax changed", p2("message Order { optional string id = 1; optional int32 qty = 2; }"),
     V1, True),
    ("message order changed", p3("message A { }\nmessage Order { string id = 1; }"),
     p3("message Order { string id = 1; }\nmessage A { }"), True),
    ("enum value added", p3("enum E { A = 0; B = 1; C = 2; }"), p3("enum E { A = 0; B = 1; }"),
     True),
    ("enum value removed", p3("enum E { A = 0; }"), p3("enum E { A = 0; B = 1; }"), True),
    ("enum removed", p3("message M { }"), p3("message M { }\nenum E { A = 0; }"), True),
    ("proto2 required field added", p2("message M { optional int32 a = 1; "
                                       "required int32 b = 2; }"),
     p2("message M { optional int32 a = 1; }"), False),
    ("proto2 required field removed", p2("message M { optional int32 a = 1; }"),
     p2("message M { optional int32 a = 1; required int32 b = 2; }"), False),
    ("proto2 optional field added", p2("message M { optional int32 a = 1; "
                                       "optional int32 b = 2; }"),
     p2("message M { optional int32 a = 1; }"), True),
    ("proto2 numeric label optional -> repeated",
     p2("message M { repeated int32 a = 1; }"), p2("message M { optional int32 a = 1; }"),
     False),
    ("proto2 string label optional -> repeated",
     p2("message M { repeated string a = 1; }"), p2("message M { optional string a = 1; }"),
     True),
    ("oneof added with new fields", p3("message M { int32 a = 1; oneof o { int32 b = 2; "
                                       "string c = 3; } }"), p3("message M { int32 a = 1; }"),
     True),
    ("one field moved into a new oneof", p3("message M { oneof o { int32 a = 1; "
                                            "string c = 3; } }"),
     p3("message M { int32 a = 1; }"), True),
    ("two fields moved into a oneof", p3("message M { oneof o { int32 a = 1; int32 b = 2; } }"),
     p3("message M { int32 a = 1; int32 b = 2; }"), False),
    ("field moved into an existing oneof", p3("message M { oneof o { int32 a = 1; "
                                              "int32 b = 2; } }"),
     p3("message M { int32 a = 1; oneof o { int32 b = 2; } }"), False),
    ("field removed from a oneof", p3("message M { oneof o { int32 a = 1; } }"),
     p3("message M { oneof o { int32 a = 1; int32 b = 2; } }"), False),
    ("whole oneof removed", p3("message M { int32 x = 9; }"),
     p3("message M { int32 x = 9; oneof o { int32 a = 1; int32 b = 2; } }"), True),
    ("field moved out of a oneof", p3("message M { int32 a = 1; oneof o { int32 b = 2; } }"),
     p3("message M { oneof o { int32 a = 1; int32 b = 2; } }"), True),
    ("nested message field changed compatibly",
     p3("message M { N n = 1; message N { int64 x = 1; string y = 2; } }"),
     p3("message M { N n = 1; message N { int32 x = 1; } }"), True),
    ("nested message field changed incompatibly",
     p3("message M { N n = 1; message N { double x = 1; } }"),
     p3("message M { N n = 1; message N { int32 x = 1; } }"), False),
    ("nested message removed", p3("message M { }"), p3("message M { message N { } }"), False),
    ("map value type changed", p3("message M { map<string, string> m = 1; }"),
     p3("message M { map<string, int32> m = 1; }"), False),
    ("map value type widened", p3("message M { map<string, int64> m = 1; }"),
     p3("message M { map<string, int32> m = 1; }"), True),
    ("map becomes repeated message", p3("message M { repeated E m = 1; }\n"
                                        "message E { string key = 1; int32 value = 2; }"),
     p3("message M { map<string, int32> m = 1; }\n"
        "message E { string key = 1; int32 value = 2; }"), False),
    ("recursive message unchanged", p3("message Node { Node next = 1; int32 v = 2; }"),
     p3("message Node { Node next = 1; int32 v = 2; }"), True),
    ("recursive message changed", p3("message Node { Node next = 1; string v = 2; }"),
     p3("message Node { Node next = 1; int32 v = 2; }"), False),
    ("proto3 optional added", p3("message M { optional int32 a = 1; }"),
     p3("message M { int32 a = 1; }"), True),
]


@pytest.mark.parametrize("case, new, old, expected", RULES, ids=[r[0] for r in RULES])
def test_rules(case: str, new: str, old: str, expected: bool) -> None:
    assert compatible(new, [old], "BACKWARD") is expected


def test_messages_are_confluents() -> None:
    messages = check(parse_schema("PROTOBUF", p3("message Order { string id = 1; "
                                                 "sint32 qty = 2; }")),
                     [parse_schema("PROTOBUF", V1)], "BACKWARD", versions=[1])
    assert messages[:2] == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at '
        "path '#/Order/2' in the new schema does not match its kind in the old schema\"}",
        "{oldSchemaVersion: 1}",
    ]
    removed = check(parse_schema("PROTOBUF", V1), [parse_schema("PROTOBUF", V2_NEW_MESSAGE)],
                    "BACKWARD")
    assert removed[0] == (
        '{errorType:"MESSAGE_REMOVED", description:"The new schema is missing a MESSAGE type '
        "at path '#/Extra' in the old schema\"}")


def test_text_and_base64_are_compatible_with_each_other() -> None:
    text = parse_schema("PROTOBUF", V1)
    from_base64 = parse_schema("PROTOBUF", text.serialized())
    assert check(from_base64, [text], "FULL_TRANSITIVE") == []


def test_imported_type_changes_are_seen() -> None:
    old_ref = {"money.proto": p3("message Money { int64 units = 1; }", "m")}
    new_ref = {"money.proto": p3("message Money { string units = 1; }", "m")}
    body = 'syntax = "proto3";\nimport "money.proto";\nmessage Pay { m.Money amount = 1; }\n'
    old = parse_schema("PROTOBUF", body, old_ref)
    new = parse_schema("PROTOBUF", body, new_ref)
    assert check(new, [old], "BACKWARD")
    assert check(parse_schema("PROTOBUF", body, old_ref), [old], "BACKWARD") == []
