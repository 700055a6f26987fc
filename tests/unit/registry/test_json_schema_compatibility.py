"""JSON Schema compatibility table: Confluent's documented rules for open, closed and
partially open content models per level, and the keyword rules (types, enums, limits,
required, arrays, combined schemas, not, $ref)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry.compatibility import check
from moldau.registry.schemas import parse_schema


def obj(props: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"type": "object", "properties": props, **extra})


def compatible(new: str, previous: list[str], level: str) -> bool:
    parsed = [parse_schema("JSON", text) for text in previous]
    return not check(parse_schema("JSON", new), parsed, level)


STR = {"type": "string"}
INT = {"type": "integer"}
OPEN_A = obj({"a": STR})
OPEN_AB = obj({"a": STR, "b": INT})
CLOSED_A = obj({"a": STR}, additionalProperties=False)
CLOSED_AB = obj({"a": STR, "b": INT}, additionalProperties=False)
CLOSED_AB_REQUIRED = obj({"a": STR, "b": INT}, additionalProperties=False, required=["b"])
PARTIAL_A = obj({"a": STR}, additionalProperties=INT)
PARTIAL_AB = obj({"a": STR, "b": INT}, additionalProperties=INT)
PARTIAL_AB_STRING = obj({"a": STR, "b": STR}, additionalProperties=INT)
PATTERN_A = obj({"a": STR}, patternProperties={"^i_": INT})
PATTERN_A_I = obj({"a": STR, "i_count": INT}, patternProperties={"^i_": INT})

LEVEL_TABLE = [
    # open content model: old data may hold any extra property
    ("open backward: property added", OPEN_AB, [OPEN_A], "BACKWARD", False),
    ("open backward: property removed", OPEN_A, [OPEN_AB], "BACKWARD", True),
    ("open forward: property added", OPEN_AB, [OPEN_A], "FORWARD", True),
    ("open forward: property removed", OPEN_A, [OPEN_AB], "FORWARD", False),
    ("open full: property added", OPEN_AB, [OPEN_A], "FULL", False),
    ("open full: property with empty schema added", obj({"a": STR, "b": {}}), [OPEN_A], "FULL",
     True),
    # closed content model: additionalProperties false
    ("closed backward: optional property added", CLOSED_AB, [CLOSED_A], "BACKWARD", True),
    ("closed backward: required property added", CLOSED_AB_REQUIRED, [CLOSED_A], "BACKWARD",
     False),
    ("closed backward: property removed", CLOSED_A, [CLOSED_AB], "BACKWARD", False),
    ("closed forward: property removed", CLOSED_A, [CLOSED_AB], "FORWARD", True),
    ("closed forward: property added", CLOSED_AB, [CLOSED_A], "FORWARD", False),
    ("closed full: property added", CLOSED_AB, [CLOSED_A], "FULL", False),
    # partially open: additionalProperties or patternProperties with a schema
    ("partial backward: added, covered compatibly", PARTIAL_AB, [PARTIAL_A], "BACKWARD", True),
    ("partial backward: added, not covered", PARTIAL_AB_STRING, [PARTIAL_A], "BACKWARD",
     False),
    ("partial backward: removed, covered compatibly", PARTIAL_A, [PARTIAL_AB], "BACKWARD",
     True),
    ("partial full: added and covered", PARTIAL_AB, [PARTIAL_A], "FULL", True),
    ("pattern backward: added, matching pattern", PATTERN_A_I, [PATTERN_A], "BACKWARD", True),
    ("pattern full: removed, matching pattern", PATTERN_A, [PATTERN_A_I], "FULL", True),
    # transitive walks
    ("backward transitive: closed, each step compatible",
     obj({"a": STR, "b": INT, "c": STR}, additionalProperties=False), [CLOSED_A, CLOSED_AB],
     "BACKWARD_TRANSITIVE", True),
    ("backward: only the latest version", CLOSED_A, [CLOSED_AB, CLOSED_A], "BACKWARD", True),
    ("backward transitive: property once there removed", CLOSED_A, [CLOSED_AB, CLOSED_A],
     "BACKWARD_TRANSITIVE", False),
    ("forward transitive: open, properties added step by step", obj({"a": STR, "b": INT, "c": STR}),
     [OPEN_A, OPEN_AB], "FORWARD_TRANSITIVE", True),
    ("forward transitive: property once there removed", OPEN_A, [OPEN_AB, OPEN_A],
     "FORWARD_TRANSITIVE", False),
    ("full transitive: partially open, covered additions", PARTIAL_AB,
     [PARTIAL_A, PARTIAL_AB], "FULL_TRANSITIVE", True),
    ("full transitive: an older version disagrees", PARTIAL_AB,
     [PARTIAL_AB_STRING, PARTIAL_A], "FULL_TRANSITIVE", False),
    ("none", json.dumps({"type": "string"}), [OPEN_A], "NONE", True),
]


@pytest.mark.parametrize("case, new, previous, level, expected", LEVEL_TABLE,
                         ids=[row[0] for row in LEVEL_TABLE])
def test_levels(case: str, new: str, previous: list[str], level: str, expected: bool) -> None:
    assert compatible(new, previous, level) is expected


def field(schema: dict[str, Any], **extra: Any) -> str:
    return obj({"f": schema}, **extra)


# (case, new, old, backward compatible)
RULES = [
    ("integer -> number", field({"type": "number"}), field(INT), True),
    ("number -> integer", field(INT), field({"type": "number"}), False),
    ("string -> integer", field(INT), field(STR), False),
    ("string -> string or null", field({"type": ["string", "null"]}), field(STR), True),
    ("string or null -> string", field(STR), field({"type": ["string", "null"]}), False),
    ("string -> oneOf string/integer", field({"oneOf": [STR, INT]}), field(STR), True),
    ("oneOf gains a branch", field({"oneOf": [STR, INT, {"type": "boolean"}]}),
     field({"oneOf": [STR, INT]}), True),
    ("oneOf loses a branch", field({"oneOf": [STR]}), field({"oneOf": [STR, INT]}), False),
    ("anyOf -> oneOf", field({"oneOf": [STR, INT]}), field({"anyOf": [STR, INT]}), False),
    ("oneOf -> anyOf", field({"anyOf": [STR, INT]}), field({"oneOf": [STR, INT]}), True),
    ("allOf gains a schema", field({"allOf": [STR, {"maxLength": 5}]}), field({"allOf": [STR]}),
     False),
    ("allOf loses a schema", field({"allOf": [STR]}), field({"allOf": [STR, {"maxLength": 5}]}),
     True),
    ("enum gains a value", field({"enum": ["a", "b", "c"]}), field({"enum": ["a", "b"]}), True),
    ("enum loses a value", field({"enum": ["a"]}), field({"enum": ["a", "b"]}), False),
    ("const changed", field({"const": "b"}), field({"const": "a"}), False),
    ("maxLength increased", field({"type": "string", "maxLength": 10}),
     field({"type": "string", "maxLength": 5}), True),
    ("maxLength decreased", field({"type": "string", "maxLength": 3}),
     field({"type": "string", "maxLength": 5}), False),
    ("maxLength added", field({"type": "string", "maxLength": 3}), field(STR), False),
    ("maxLength removed", field(STR), field({"type": "string", "maxLength": 3}), True),
    ("minLength increased", field({"type": "string", "minLength": 3}),
     field({"type": "string", "minLength": 1}), False),
    ("pattern added", field({"type": "string", "pattern": "^a"}), field(STR), False),
    ("pattern removed", field(STR), field({"type": "string", "pattern": "^a"}), True),
    ("pattern changed", field({"type": "string", "pattern": "^b"}),
     field({"type": "string", "pattern": "^a"}), False),
    ("maximum increased", field({"type": "number", "maximum": 10}),
     field({"type": "number", "maximum": 5}), True),
    ("minimum increased", field({"type": "number", "minimum": 5}),
     field({"type": "number", "minimum": 0}), False),
    ("exclusiveMinimum decreased", field({"type": "number", "exclusiveMinimum": 0}),
     field({"type": "number", "exclusiveMinimum": 1}), True),
    ("multipleOf reduced", field({"type": "number", "multipleOf": 2}),
     field({"type": "number", "multipleOf": 4}), True),
    ("multipleOf expanded", field({"type": "number", "multipleOf": 4}),
     field({"type": "number", "multipleOf": 2}), False),
    ("required added", obj({"a": STR}, required=["a"]), OPEN_A, False),
    ("required added with a default", obj({"a": {"type": "string", "default": "x"}},
                                          required=["a"]),
     obj({"a": {"type": "string", "default": "x"}}), True),
    ("required removed", OPEN_A, obj({"a": STR}, required=["a"]), True),
    ("additionalProperties false added", CLOSED_A, OPEN_A, False),
    ("additionalProperties false removed", OPEN_A, CLOSED_A, True),
    ("array items widened", field({"type": "array", "items": {"type": "number"}}),
     field({"type": "array", "items": INT}), True),
    ("array items changed", field({"type": "array", "items": STR}),
     field({"type": "array", "items": INT}), False),
    ("maxItems added", field({"type": "array", "maxItems": 3}), field({"type": "array"}),
     False),
    ("minItems decreased", field({"type": "array", "minItems": 1}),
     field({"type": "array", "minItems": 2}), True),
    ("uniqueItems added", field({"type": "array", "uniqueItems": True}),
     field({"type": "array"}), False),
    ("tuple item added to an open array", field({"type": "array", "items": [STR, INT]}),
     field({"type": "array", "items": [STR]}), False),
    ("tuple item added to a closed array",
     field({"type": "array", "items": [STR, INT], "additionalItems": False}),
     field({"type": "array", "items": [STR], "additionalItems": False}), True),
    ("tuple item removed from a closed array",
     field({"type": "array", "items": [STR], "additionalItems": False}),
     field({"type": "array", "items": [STR, INT], "additionalItems": False}), False),
    ("nested object: property added to a closed model",
     field({"type": "object", "properties": {"x": STR, "y": STR}, "additionalProperties": False}),
     field({"type": "object", "properties": {"x": STR}, "additionalProperties": False}), True),
    ("nested object: type changed",
     field({"type": "object", "properties": {"x": INT}}),
     field({"type": "object", "properties": {"x": STR}}), False),
    ("not narrowed", field({"not": {"type": "string", "maxLength": 3}}),
     field({"not": {"type": "string"}}), True),
    ("not extended", field({"not": {"type": "string"}}),
     field({"not": {"type": "string", "maxLength": 3}}), False),
    ("anything -> true", field(True), field(STR), True),
    ("false -> anything", field(STR), field(False), True),
    ("dependency array narrowed", obj({"a": STR, "b": STR}, dependencies={"a": []}),
     obj({"a": STR, "b": STR}, dependencies={"a": ["b"]}), True),
    ("dependency array extended", obj({"a": STR, "b": STR}, dependencies={"a": ["b"]}),
     obj({"a": STR, "b": STR}, dependencies={"a": []}), False),
    ("description and title changed", field({"type": "string", "title": "T",
                                             "description": "new"}),
     field({"type": "string", "title": "S", "description": "old"}), True),
    ("ref target changed", json.dumps({"definitions": {"t": INT}, "type": "object",
                                       "properties": {"f": {"$ref": "#/definitions/t"}}}),
     json.dumps({"definitions": {"t": STR}, "type": "object",
                 "properties": {"f": {"$ref": "#/definitions/t"}}}), False),
    ("recursive schema unchanged",
     json.dumps({"type": "object", "properties": {"next": {"$ref": "#"}, "v": INT}}),
     json.dumps({"type": "object", "properties": {"next": {"$ref": "#"}, "v": INT}}), True),
]


@pytest.mark.parametrize("case, new, old, expected", RULES, ids=[r[0] for r in RULES])
def test_rules(case: str, new: str, old: str, expected: bool) -> None:
    assert compatible(new, [old], "BACKWARD") is expected


def test_references_are_compared_through() -> None:
    old = parse_schema("JSON", obj({"home": {"$ref": "address.json"}}),
                       {"address.json": obj({"street": STR}, additionalProperties=False)})
    new = parse_schema("JSON", obj({"home": {"$ref": "address.json"}}),
                       {"address.json": obj({}, additionalProperties=False)})
    assert check(new, [old], "BACKWARD")
    assert check(old, [new], "BACKWARD") == []


def test_messages_are_confluents() -> None:
    messages = check(parse_schema("JSON", OPEN_AB), [parse_schema("JSON", OPEN_A)],
                     "BACKWARD", versions=[2])
    assert messages == [
        '{errorType:"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", description:"The new '
        "schema has an open content model and has a property or item at path '#/properties/b' "
        "which is missing in the old schema'}",
        "{oldSchemaVersion: 2}",
        "{oldSchema: '" + OPEN_A.replace(" ", "") + "'}",
    ]
    typed = check(parse_schema("JSON", field(INT)), [parse_schema("JSON", field(STR))], "FORWARD")
    assert typed[0] == (
        '{errorType:"TYPE_CHANGED", description:"A type at path \'#/properties/f\' is different '
        "between the old schema and the new schema'}")
