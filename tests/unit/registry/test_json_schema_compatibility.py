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


S = {"type": "string"}
I = {"type": "integer"}
OPEN_A = obj({"a": S})
OPEN_AB = obj({"a": S, "b": I})
CLOSED_A = obj({"a": S}, additionalProperties=False)
CLOSED_AB = obj({"a": S, "b": I}, additionalProperties=False)
CLOSED_AB_REQUIRED = obj({"a": S, "b": I}, additionalProperties=False, required=["b"])
PARTIAL_A = obj({"a": S}, additionalProperties=I)
PARTIAL_AB = obj({"a": S, "b": I}, additionalProperties=I)
PARTIAL_AB_STRING = obj({"a": S, "b": S}, additionalProperties=I)
PATTERN_A = obj({"a": S}, patternProperties={"^i_": I})
PATTERN_A_I = obj({"a": S, "i_count": I}, patternProperties={"^i_": I})

LEVEL_TABLE = [
    # open content model: old data may hold any extra property
    ("open backward: property added", OPEN_AB, [OPEN_A], "BACKWARD", False),
    ("open backward: property removed", OPEN_A, [OPEN_AB], "BACKWARD", True),
    ("open forward: property added", OPEN_AB, [OPEN_A], "FORWARD", True),
    ("open forward: property removed", OPEN_A, [OPEN_AB], "FORWARD", False),
    ("open full: property added", OPEN_AB, [OPEN_A], "FULL", False),
    ("open full: property with empty schema added", obj({"a": S, "b": {}}), [OPEN_A], "FULL",
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
     obj({"a": S, "b": I, "c": S}, additionalProperties=False), [CLOSED_A, CLOSED_AB],
     "BACKWARD_TRANSITIVE", True),
    ("backward: only the latest version", CLOSED_A, [CLOSED_AB, CLOSED_A], "BACKWARD", True),
    ("backward transitive: property once there removed", CLOSED_A, [CLOSED_AB, CLOSED_A],
     "BACKWARD_TRANSITIVE", False),
    ("forward transitive: open, properties added step by step", obj({"a": S, "b": I, "c": S}),
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
    ("integer -> number", field({"type": "number"}), field(I), True),
    ("number -> integer", field(I), field({"type": "number"}), False),
    ("string -> integer", field(I), field(S), False),
    ("string -> string or null", field({"type": ["string", "null"]}), field(S), True),
    ("string or null -> string", field(S), field({"type": ["string", "null"]}), False),
    ("string -> oneOf string/integer", field({"oneOf": [S, I]}), field(S), True),
    ("oneOf gains a branch", field({"oneOf": [S, I, {"type": "boolean"}]}),
     field({"oneOf": [S, I]}), True),
    ("oneOf loses a branch", field({"oneOf": [S]}), field({"oneOf": [S, I]}), False),
    ("anyOf -> oneOf", field({"oneOf": [S, I]}), field({"anyOf": [S, I]}), False),
    ("oneOf -> anyOf", field({"anyOf": [S, I]}), field({"oneOf": [S, I]}), True),
    ("allOf gains a schema", field({"allOf": [S, {"maxLength": 5}]}), field({"allOf": [S]}),
     False),
    ("allOf loses a schema", field({"allOf": [S]}), field({"allOf": [S, {"maxLength": 5}]}),
     True),
    ("enum gains a value", field({"enum": ["a", "b", "c"]}), field({"enum": ["a", "b"]}), True),
    ("enum loses a value", field({"enum": ["a"]}), field({"enum": ["a", "b"]}), False),
    ("const changed", field({"const": "b"}), field({"const": "a"}), False),
    ("maxLength increased", field({"type": "string", "maxLength": 10}),
     field({"type": "string", "maxLength": 5}), True),
    ("maxLength decreased", field({"type": "string", "maxLength": 3}),
     field({"type": "string", "maxLength": 5}), False),
    ("maxLength added", field({"type": "string", "maxLength": 3}), field(S), False),
    ("maxLength removed", field(S), field({"type": "string", "maxLength": 3}), True),
    ("minLength increased", field({"type": "string", "minLength": 3}),
     field({"type": "string", "minLength": 1}), False),
    ("pattern added", field({"type": "string", "pattern": "^a"}), field(S), False),
    ("pattern removed", field(S), field({"type": "string", "pattern": "^a"}), True),
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
    ("required added", obj({"a": S}, required=["a"]), OPEN_A, False),
    ("required added with a default", obj({"a": {"type": "string", "default": "x"}},
                                          required=["a"]),
     obj({"a": {"type": "string", "default": "x"}}), True),
    ("required removed", OPEN_A, obj({"a": S}, required=["a"]), True),
    ("additionalProperties false added", CLOSED_A, OPEN_A, False),
    ("additionalProperties false removed", OPEN_A, CLOSED_A, True),
    ("array items widened", field({"type": "array", "items": {"type": "number"}}),
     field({"type": "array", "items": I}), True),
    ("array items changed", field({"type": "array", "items": S}),
     field({"type": "array", "items": I}), False),
    ("maxItems added", field({"type": "array", "maxItems": 3}), field({"type": "array"}),
     False),
    ("minItems decreased", field({"type": "array", "minItems": 1}),
     field({"type": "array", "minItems": 2}), True),
    ("uniqueItems added", field({"type": "array", "uniqueItems": True}),
     field({"type": "array"}), False),
    ("tuple item added to an open array", field({"type": "array", "items": [S, I]}),
     field({"type": "array", "items": [S]}), False),
    ("tuple item added to a closed array",
     field({"type": "array", "items": [S, I], "additionalItems": False}),
     field({"type": "array", "items": [S], "additionalItems": False}), True),
    ("tuple item removed from a closed array",
     field({"type": "array", "items": [S], "additionalItems": False}),
     field({"type": "array", "items": [S, I], "additionalItems": False}), False),
    ("nested object: property added to a closed model",
     field({"type": "object", "properties": {"x": S, "y": S}, "additionalProperties": False}),
     field({"type": "object", "properties": {"x": S}, "additionalProperties": False}), True),
    ("nested object: type changed",
     field({"type": "object", "properties": {"x": I}}),
     field({"type": "object", "properties": {"x": S}}), False),
    ("not narrowed", field({"not": {"type": "string", "maxLength": 3}}),
     field({"not": {"type": "string"}}), True),
    ("not extended", field({"not": {"type": "string"}}),
     field({"not": {"type": "string", "maxLength": 3}}), False),
    ("anything -> true", field(True), field(S), True),
    ("false -> anything", field(S), field(False), True),
    ("dependency array narrowed", obj({"a": S, "b": S}, dependencies={"a": []}),
     obj({"a": S, "b": S}, dependencies={"a": ["b"]}), True),
    ("dependency array extended", obj({"a": S, "b": S}, dependencies={"a": ["b"]}),
     obj({"a": S, "b": S}, dependencies={"a": []}), False),
    ("description and title changed", field({"type": "string", "title": "T",
                                             "description": "new"}),
     field({"type": "string", "title": "S", "description": "old"}), True),
    ("ref target changed", json.dumps({"definitions": {"t": I}, "type": "object",
                                       "properties": {"f": {"$ref": "#/definitions/t"}}}),
     json.dumps({"definitions": {"t": S}, "type": "object",
                 "properties": {"f": {"$ref": "#/definitions/t"}}}), False),
    ("recursive schema unchanged",
     json.dumps({"type": "object", "properties": {"next": {"$ref": "#"}, "v": I}}),
     json.dumps({"type": "object", "properties": {"next": {"$ref": "#"}, "v": I}}), True),
]


@pytest.mark.parametrize("case, new, old, expected", RULES, ids=[r[0] for r in RULES])
def test_rules(case: str, new: str, old: str, expected: bool) -> None:
    assert compatible(new, [old], "BACKWARD") is expected


def test_references_are_compared_through() -> None:
    old = parse_schema("JSON", obj({"home": {"$ref": "address.json"}}),
                       {"address.json": obj({"street": S}, additionalProperties=False)})
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
    typed = check(parse_schema("JSON", field(I)), [parse_schema("JSON", field(S))], "FORWARD")
    assert typed[0] == (
        '{errorType:"TYPE_CHANGED", description:"A type at path \'#/properties/f\' is different '
        "between the old schema and the new schema'}")
