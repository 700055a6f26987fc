"""JSON Schema schemas: meta-schema validation per draft, $ref resolution (inside the
document and to references), canonical and normalized text, identity."""

from __future__ import annotations

import json

import pytest

from moldau.registry.schemas import InvalidSchemaError, parse_schema


def js(schema: object, references: dict[str, str] | None = None, **kwargs: bool):
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return parse_schema("JSON", text, references or {}, **kwargs)


def test_canonical_is_compact_json_in_document_order() -> None:
    text = '{\n  "type": "object",\n  "properties": {"b": {"type": "string"}, ' \
           '"a": {"type": "integer", "description": "é"}}\n}'
    assert js(text).canonical() == (
        '{"type":"object","properties":{"b":{"type":"string"},'
        '"a":{"type":"integer","description":"é"}}}')


def test_normalized_sorts_keys_everywhere() -> None:
    parsed = js('{"type": "object", "properties": {"b": {"type": "string"}, '
                '"a": {"type": "integer"}}, "$schema": "http://json-schema.org/draft-07/schema#"}')
    assert parsed.normalized() == (
        '{"$schema":"http://json-schema.org/draft-07/schema#","properties":'
        '{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}')
    assert js(parsed.canonical(), normalize=True).canonical() == parsed.normalized()


def test_identity_ignores_whitespace_not_key_order() -> None:
    one = js('{"type":"object","title":"t"}')
    two = js('{ "type" : "object",\n "title" : "t" }')
    three = js('{"title":"t","type":"object"}')
    assert one.identity() == two.identity()
    assert one.identity() != three.identity()
    assert js(one.canonical(), normalize=True).identity() == \
        js(three.canonical(), normalize=True).identity()


@pytest.mark.parametrize("draft", [
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
])
def test_drafts(draft: str) -> None:
    parsed = js({"$schema": draft, "type": "object",
                 "properties": {"n": {"type": "integer", "minimum": 0}}})
    assert parsed.schema_type == "JSON"
    with pytest.raises(InvalidSchemaError, match="minimum"):
        js({"$schema": draft, "type": "object", "properties": {"n": {"minimum": "zero"}}})


def test_boolean_schemas() -> None:
    assert js("true").canonical() == "true"
    assert js("false").canonical() == "false"


def test_local_and_reference_refs() -> None:
    address = json.dumps({"type": "object", "properties": {"street": {"type": "string"}}})
    parsed = js({"type": "object", "definitions": {"id": {"type": "string"}},
                 "properties": {"id": {"$ref": "#/definitions/id"},
                                "home": {"$ref": "address.json"},
                                "street": {"$ref": "address.json#/properties/street"}}},
                {"address.json": address})
    assert '"$ref":"address.json"' in parsed.canonical()


def test_reference_relative_to_the_schema_id() -> None:
    address = json.dumps({"$id": "https://example.com/address.json", "type": "object"})
    js({"$id": "https://example.com/person.json", "type": "object",
        "properties": {"home": {"$ref": "address.json"}}}, {"address.json": address})


@pytest.mark.parametrize("text, fragment", [
    ("", "not JSON"),
    ("{", "not JSON"),
    ("42", "object or a boolean"),
    ('"string"', "object or a boolean"),
    ('{"type": "strin"}', "strin"),
    ('{"type": "object", "properties": {"a": {"type": 5}}}', "properties/a/type"),
    ('{"type": "object", "required": "a"}', "required"),
    ('{"minLength": -1}', "minLength"),
    ('{"$schema": "http://example.com/my-draft", "type": "object"}', "unknown $schema"),
    ('{"properties": {"a": {"$ref": "#/definitions/missing"}}}', "cannot resolve"),
    ('{"properties": {"a": {"$ref": "other.json"}}}', "other.json"),
    ('{"type": "number", "maximum": NaN}', "JSON"),
])
def test_invalid_schemas(text: str, fragment: str) -> None:
    with pytest.raises(InvalidSchemaError) as caught:
        js(text)
    assert fragment in str(caught.value)


def test_invalid_reference() -> None:
    with pytest.raises(InvalidSchemaError, match=r"reference 'a\.json'"):
        js({"$ref": "a.json"}, {"a.json": '{"type": 3}'})


def test_formats_answer_the_canonical_text() -> None:
    parsed = js({"type": "string"})
    assert parsed.formatted("serialized") == parsed.canonical() == parsed.serialized()
