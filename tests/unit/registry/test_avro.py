"""Avro schemas: parsing and invalid schemas, Confluent's canonical string (Avro Java's
``Schema.toString``), normalization, references, identity."""

from __future__ import annotations

import json

import pytest

from moldau.registry.schemas import InvalidSchemaError, parse_schema


def avro(schema: object, references: dict[str, str] | None = None, **kwargs: bool):
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return parse_schema("AVRO", text, references or {}, **kwargs)


def test_canonical_is_compact_with_avro_java_key_order() -> None:
    text = """{
      "fields": [
        {"default": 0, "type": "int", "name": "count", "doc": "how many"},
        {"type": {"symbols": ["RED", "BLUE"], "name": "Colour", "type": "enum"}, "name": "c"},
        {"name": "again", "type": "Colour", "order": "descending"},
        {"name": "friends", "type": {"type": "array", "items": "Person"}, "default": []}
      ],
      "namespace": "com.example", "name": "Person", "type": "record", "doc": "A person"
    }"""
    assert avro(text).canonical() == (
        '{"type":"record","name":"Person","namespace":"com.example","doc":"A person",'
        '"fields":[{"name":"count","type":"int","doc":"how many","default":0},'
        '{"name":"c","type":{"type":"enum","name":"Colour","symbols":["RED","BLUE"]}},'
        '{"name":"again","type":"Colour","order":"descending"},'
        '{"name":"friends","type":{"type":"array","items":"Person"},"default":[]}]}'
    )


def test_canonical_namespaces_props_aliases_and_primitives() -> None:
    schema = {
        "type": "record", "name": "a.b.Outer", "aliases": ["Old", "x.y.Older"],
        "custom": {"z": 1, "a": 2}, "fields": [
            {"name": "inner", "type": {"type": "record", "name": "Inner", "namespace": "",
                                       "fields": []}},
            {"name": "other", "type": {"type": "fixed", "name": "c.Hash", "size": 16}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "plain", "type": {"type": "string"}},
            {"name": "m", "type": {"type": "map", "values": "long"}, "aliases": ["mm"]},
        ],
    }
    assert avro(schema).canonical() == (
        '{"type":"record","name":"Outer","namespace":"a.b","fields":['
        '{"name":"inner","type":{"type":"record","name":"Inner","namespace":"","fields":[]}},'
        '{"name":"other","type":{"type":"fixed","name":"Hash","namespace":"c","size":16}},'
        '{"name":"day","type":{"type":"int","logicalType":"date"}},'
        '{"name":"plain","type":"string"},'
        '{"name":"m","type":{"type":"map","values":"long"},"aliases":["mm"]}],'
        '"custom":{"z":1,"a":2},"aliases":["Old","x.y.Older"]}'
    )


@pytest.mark.parametrize("text, canonical", [
    ('"string"', '"string"'),
    ('{"type": "long"}', '"long"'),
    ('["null", "string"]', '["null","string"]'),
    ('{"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}',
     '{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}'),
    ('{"type":"enum","name":"E","symbols":["A","B"],"default":"A","doc":"d"}',
     '{"type":"enum","name":"E","doc":"d","symbols":["A","B"],"default":"A"}'),
    ('{"type":"record","name":"R","fields":[{"name":"s","type":"string","default":"é"}]}',
     '{"type":"record","name":"R","fields":[{"name":"s","type":"string","default":"é"}]}'),
])
def test_canonical_of_small_schemas(text: str, canonical: str) -> None:
    assert avro(text).canonical() == canonical


def test_canonical_is_stable_when_parsed_again() -> None:
    parsed = avro({"type": "record", "name": "R", "namespace": "n", "fields": [
        {"name": "a", "type": ["null", {"type": "record", "name": "S", "fields": [
            {"name": "x", "type": "n.R"}]}], "default": None},
        {"name": "b", "type": "S"}]})
    again = avro(parsed.canonical())
    assert again.canonical() == parsed.canonical()
    assert again.identity() == parsed.identity()


def test_whitespace_and_key_order_do_not_change_identity() -> None:
    one = avro('{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}')
    two = avro('{ "fields" : [ { "type" : "int", "name" : "a" } ],\n "name" : "R",'
               ' "type" : "record" }')
    assert one.identity() == two.identity()
    assert one.canonical() == two.canonical()


def test_normalized_sorts_properties_and_aliases() -> None:
    schema = {"type": "record", "name": "R", "zeta": 1, "alpha": {"b": 1, "a": 2},
              "aliases": ["Z", "A"], "doc": "", "fields": [
                  {"name": "f", "type": {"type": "string", "x": 1, "logicalType": "uuid"},
                   "aliases": ["g", "b"], "p2": 1, "p1": 2}]}
    parsed = avro(schema)
    assert parsed.normalized() == (
        '{"type":"record","name":"R","fields":[{"name":"f","type":{"type":"string",'
        '"logicalType":"uuid","x":1},"aliases":["b","g"],"p1":2,"p2":1}],'
        '"alpha":{"a":2,"b":1},"zeta":1,"aliases":["A","Z"]}'
    )
    assert parsed.canonical() != parsed.normalized()
    normalized = avro(schema, normalize=True)
    assert normalized.canonical() == parsed.normalized()
    assert normalized.identity() == avro(parsed.normalized()).identity()


def test_normalize_makes_equivalent_schemas_the_same() -> None:
    one = avro({"type": "record", "name": "R", "b": 1, "a": 2, "fields": []}, normalize=True)
    two = avro({"type": "record", "name": "R", "a": 2, "b": 1, "fields": []}, normalize=True)
    assert one.identity() == two.identity()


def test_references_are_known_names() -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "com.acme",
                          "fields": [{"name": "street", "type": "string"}]})
    person = avro({"type": "record", "name": "Person", "namespace": "com.acme", "fields": [
        {"name": "home", "type": "Address"},
        {"name": "work", "type": ["null", "com.acme.Address"], "default": None}]},
        {"com.acme.Address": address})
    assert person.canonical() == (
        '{"type":"record","name":"Person","namespace":"com.acme","fields":['
        '{"name":"home","type":"Address"},'
        '{"name":"work","type":["null","Address"],"default":null}]}'
    )
    assert person.formatted("resolved") == (
        '{"type":"record","name":"Person","namespace":"com.acme","fields":['
        '{"name":"home","type":{"type":"record","name":"Address","fields":['
        '{"name":"street","type":"string"}]}},'
        '{"name":"work","type":["null","Address"],"default":null}]}'
    )
    assert person.formatted("") == person.canonical()
    assert person.formatted("serialized") == person.canonical()


def test_references_of_references_in_any_order() -> None:
    refs = {
        "Outer": json.dumps({"type": "record", "name": "Outer",
                             "fields": [{"name": "i", "type": "Inner"}]}),
        "Inner": json.dumps({"type": "enum", "name": "Inner", "symbols": ["X"]}),
    }
    parsed = avro({"type": "record", "name": "Top", "fields": [{"name": "o", "type": "Outer"}]},
                  refs)
    assert parsed.canonical() == (
        '{"type":"record","name":"Top","fields":[{"name":"o","type":"Outer"}]}')


def test_missing_reference_is_invalid() -> None:
    with pytest.raises(InvalidSchemaError, match="Address"):
        avro({"type": "record", "name": "P", "fields": [{"name": "a", "type": "Address"}]})


@pytest.mark.parametrize("text, fragment", [
    ("", "not JSON"),
    ("{", "not JSON"),
    ("string", "not JSON"),
    ('"strin"', "strin"),
    ('{"type": "record", "name": "R"}', "fields"),
    ('{"type": "record", "fields": []}', "name"),
    ('{"type": "record", "name": "1R", "fields": []}', "Illegal initial character"),
    ('{"type": "record", "name": "R-1", "fields": []}', "Illegal character"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"int"},'
     '{"name":"a","type":"long"}]}', "Duplicate field"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
     "default"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"],'
     '"default":"x"}]}', "default"),
    ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "Duplicate enum symbol"),
    ('{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}', "efault"),
    ('{"type": "enum", "name": "E", "symbols": ["1A"]}', "Illegal"),
    ('{"type": "fixed", "name": "F"}', "size"),
    ('["int", "int"]', "Duplicate in union"),
    ('["null", ["int"]]', "union"),
    ('{"type": "array"}', "items"),
    ('{"type": "record", "name": "int", "fields": []}', "primitive"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":'
     '{"type":"record","name":"R","fields":[]}}]}', "redefine"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "float",'
     ' "default": NaN}]}', "JSON"),
    ("42", "42"),
])
def test_invalid_schemas(text: str, fragment: str) -> None:
    with pytest.raises(InvalidSchemaError) as caught:
        avro(text)
    assert fragment.lower() in str(caught.value).lower()


def test_union_default_may_match_any_branch() -> None:
    parsed = avro({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": ["int", "null"], "default": None}]})
    assert '"default":null' in parsed.canonical()


def test_unknown_schema_type() -> None:
    with pytest.raises(InvalidSchemaError, match="unknown schema type"):
        parse_schema("XML", "<a/>")


def test_schema_type_is_case_insensitive() -> None:
    assert parse_schema("avro", '"int"').schema_type == "AVRO"


MEANING_CASES = [
    {"type": "record", "name": "a.b.Outer", "fields": [
        {"name": "inner", "type": {"type": "record", "name": "Inner", "namespace": "",
                                   "fields": [{"name": "x", "type": "int"}]}},
        {"name": "local", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
        {"name": "local_again", "type": ["null", "a.b.E"], "default": None},
        {"name": "self", "type": ["null", "Outer"], "default": None},
        {"name": "other", "type": {"type": "fixed", "name": "c.d.F", "size": 2}},
        {"name": "other_again", "type": {"type": "array", "items": "c.d.F"}},
    ]},
    {"type": "error", "name": "Oops", "fields": [{"name": "why", "type": "string"}]},
    {"type": "record", "name": "R", "namespace": "x", "fields": [
        {"name": "m", "type": {"type": "map", "values": {
            "type": "record", "name": "V", "namespace": "y", "fields": [
                {"name": "back", "type": ["null", "x.R"], "default": None}]}}},
        {"name": "v", "type": "y.V"}]},
]


@pytest.mark.parametrize("schema", MEANING_CASES)
def test_canonical_means_the_same_to_fastavro(schema: dict) -> None:
    # what a deserializer does with the text the registry answers
    import fastavro

    canonical = json.loads(avro(schema).canonical())
    assert fastavro.parse_schema(canonical, _write_hint=False) == \
        fastavro.parse_schema(schema, _write_hint=False)
    normalized = json.loads(avro(schema).normalized())
    assert fastavro.parse_schema(normalized, _write_hint=False) == \
        fastavro.parse_schema(schema, _write_hint=False)
