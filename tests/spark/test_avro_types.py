"""Avro schemas as Spark SQL types (Spark's SchemaConverters mapping), decoded values as
Arrow arrays of those types, and the decoding options (pure: no Spark session, no registry)."""

from __future__ import annotations

import datetime
import decimal
import io
import uuid
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type

from moldau.spark.avro_types import UnsupportedAvroSchema, converter, to_spark_type
from moldau.spark.decode_options import DecodeOptionError, parse_decoding_options
from moldau.spark.options import OptionError, parse_source_options

INNER = {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}


@pytest.mark.parametrize("avro, spark, nullable", [
    ("boolean", "boolean", False),
    ("int", "int", False),
    ("long", "bigint", False),
    ("float", "float", False),
    ("double", "double", False),
    ("bytes", "binary", False),
    ("string", "string", False),
    (["null", "string"], "string", True),
    (["int", "long"], "bigint", False),
    (["null", "float", "double"], "double", True),
    (["int", "string"], "struct<member0:int,member1:string>", False),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, "string", False),
    ({"type": "fixed", "name": "F", "size": 2}, "binary", False),
    ({"type": "int", "logicalType": "date"}, "date", False),
    ({"type": "long", "logicalType": "timestamp-millis"}, "timestamp", False),
    ({"type": "long", "logicalType": "timestamp-micros"}, "timestamp", False),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, "timestamp_ntz", False),
    ({"type": "int", "logicalType": "time-millis"}, "int", False),
    ({"type": "long", "logicalType": "time-micros"}, "bigint", False),
    ({"type": "string", "logicalType": "uuid"}, "string", False),
    ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3},
     "decimal(9,3)", False),
    ({"type": "array", "items": ["null", "long"]}, "array<bigint>", False),
    ({"type": "map", "values": "double"}, "map<string,double>", False),
    ({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string"}, {"name": "b", "type": ["null", INNER]},
        {"name": "c", "type": "Inner"}]},
     "struct<a:string,b:struct<x:int>,c:struct<x:int>>", False),
])
def test_spark_type_of_avro(avro: Any, spark: str, nullable: bool) -> None:
    dtype, is_nullable = to_spark_type(fastavro.parse_schema(avro))
    assert (dtype.simpleString(), is_nullable) == (spark, nullable)


def test_record_field_nullability_follows_unions_with_null() -> None:
    dtype, _ = to_spark_type(fastavro.parse_schema({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string"}, {"name": "b", "type": ["null", "string"]}]}))
    assert [(f.name, f.nullable) for f in dtype.fields] == [("a", False), ("b", True)]


def test_recursive_records_are_refused() -> None:
    schema = fastavro.parse_schema({"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]})
    with pytest.raises(UnsupportedAvroSchema, match="Node is recursive"):
        to_spark_type(schema)


SCHEMA = {"type": "record", "name": "R", "namespace": "n", "fields": [
    {"name": "opt", "type": ["null", "string"]},
    {"name": "inner", "type": ["null", INNER]},
    {"name": "choice", "type": ["int", "string", "Inner",
                                {"type": "enum", "name": "E", "symbols": ["Q", "Z"]}]},
    {"name": "stamps", "type": {"type": "array",
                                "items": {"type": "long", "logicalType": "timestamp-millis"}}},
    {"name": "times", "type": {"type": "map",
                               "values": {"type": "int", "logicalType": "time-millis"}}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                "scale": 2}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
]}


@pytest.mark.parametrize("choice, member", [
    (7, {"member0": 7}), ("s", {"member1": "s"}), ({"x": 3}, {"member2": {"x": 3}}),
    (("n.E", "Z"), {"member3": "Z"}),
])
def test_decoded_values_become_arrow_arrays_of_the_spark_type(choice: Any, member: Any) -> None:
    parsed = fastavro.parse_schema(SCHEMA)
    ident = uuid.uuid4()
    record = {"opt": None, "inner": {"x": 1}, "choice": choice,
              "stamps": [datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.UTC)],
              "times": {"t": datetime.time(0, 1, 2, 3000)}, "amount": decimal.Decimal("12.34"),
              "id": str(ident), "day": datetime.date(2024, 2, 29)}
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, record)
    decoded = fastavro.schemaless_reader(io.BytesIO(out.getvalue()), parsed,
                                         return_named_type=True)
    convert = converter(parsed)
    assert convert is not None
    value = convert(decoded)
    dtype, _ = to_spark_type(parsed)
    array = pa.array([value, None], to_arrow_type(dtype, timezone="UTC"))
    row = array.to_pylist()[0]
    assert row["opt"] is None and row["inner"] == {"x": 1}
    assert row["choice"] == {"member0": None, "member1": None, "member2": None,
                             "member3": None, **member}
    assert row["stamps"] == record["stamps"]
    assert row["times"] == [("t", 62003)]
    assert row["amount"] == decimal.Decimal("12.34")
    assert row["id"] == str(ident) and row["day"] == datetime.date(2024, 2, 29)
    assert array.to_pylist()[1] is None


def test_plain_schemas_need_no_conversion() -> None:
    assert converter(fastavro.parse_schema({"type": "record", "name": "P", "fields": [
        {"name": "a", "type": ["null", "long"]}, {"name": "b", "type": "string"}]})) is None


BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "orders"}


def _decoding(**options: str):  # type: ignore[no-untyped-def]
    return parse_decoding_options({k.lower(): v for k, v in {**BASE, **options}.items()})


def test_decoding_defaults_to_binary() -> None:
    assert not _decoding().active


def test_value_avro_takes_the_topic_subject_and_registry_settings() -> None:
    decoding = _decoding(**{"value.format": "avro", "schema.registry.url": "http://sr:8081",
                            "confluent.schema.registry.basic.auth.user.info": "u:p",
                            "mode": "permissive"})
    assert decoding.value is not None and decoding.key is None
    assert decoding.value.subject == "orders-value" and decoding.value.reader is None
    assert decoding.permissive
    assert dict(decoding.registry_config) == {"url": "http://sr:8081",
                                              "basic.auth.user.info": "u:p"}


def test_databricks_names_are_accepted() -> None:
    decoding = _decoding(**{"value.format": "avro", "schemaRegistryAddress": "http://sr:1",
                            "subject": "other", "key.format": "avro",
                            "key.avroSchema": '"string"'})
    assert decoding.value is not None and decoding.value.subject == "other"
    assert decoding.key is not None and decoding.key.reader is not None
    assert decoding.key.reader.schema_str == '"string"'
    assert decoding.registry_config["url"] == "http://sr:1"


@pytest.mark.parametrize("options, message", [
    ({"value.format": "json"}, "binary or avro"),
    ({"value.format": "avro"}, "schema.registry.url"),
    ({"value.format": "avro", "schema.registry.url": "http://x:1", "mode": "drop"},
     "FAILFAST or PERMISSIVE"),
    ({"value.format": "avro", "schema.registry.url": "http://x:1", "subscribe": "a,b"},
     "value.subject"),
    ({"value.format": "avro", "schema.registry.url": "http://x:1",
      "schema.registry.colour": "red"}, "colour"),
    ({"value.format": "avro", "schema.registry.url": "http://x:1", "avroSchema": "{"},
     "not Avro schema JSON"),
])
def test_bad_decoding_options_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(DecodeOptionError, match=message):
        _decoding(**options)


def test_source_options_carry_the_decoding() -> None:
    options = parse_source_options({**{k.lower(): v for k, v in BASE.items()},
                                    "value.format": "avro",
                                    "schema.registry.url": "http://x:1"}, streaming=False)
    assert options.decoding.value is not None
    with pytest.raises(OptionError, match="binary or avro"):
        parse_source_options({**BASE, "key.format": "xml"}, streaming=False)
