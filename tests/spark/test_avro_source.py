"""``value.format=avro`` / ``key.format=avro``: registry-framed Avro decoded into columns by the
moldau source, batch and streaming, against a broker with its in-process schema registry;
records are written by confluent-kafka's AvroSerializer."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from moldau.testing.registry import RegistryBrokerProcess

V1 = {"type": "record", "name": "Reading", "namespace": "spark.test", "fields": [
    {"name": "sensor", "type": "string"},
    {"name": "value", "type": "double"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 8,
                               "scale": 2}},
    {"name": "tags", "type": {"type": "map", "values": "int"}},
    {"name": "extra", "type": ["null", "string", "long"], "default": None},
]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "unit", "type": "string", "default": "C"}]}
KEY = {"type": "record", "name": "Key", "namespace": "spark.test",
       "fields": [{"name": "id", "type": "int"}]}
AT = dt.datetime(2024, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryBrokerProcess]:
    with RegistryBrokerProcess(settings={"num.partitions": 2,
                                         "auto.create.topics.enable": "true"}) as proc:
        yield proc
        proc.close()


@pytest.fixture(scope="module")
def sr(registry: RegistryBrokerProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.registry_url})


def reading(i: int, **more: Any) -> dict[str, Any]:
    return {"sensor": f"s{i}", "value": i / 2, "at": AT + dt.timedelta(seconds=i),
            "price": decimal.Decimal(f"{i}.25"), "tags": {"n": i},
            "extra": None if i % 3 == 0 else (f"x{i}" if i % 3 == 1 else i), **more}


def send(registry: RegistryBrokerProcess, sr: SchemaRegistryClient, topic: str,
         schema: dict[str, Any], values: list[Any], *, key: bool = False,
         raw: list[bytes | None] | None = None) -> None:
    serialize = AvroSerializer(sr, json.dumps(schema))
    key_serialize = AvroSerializer(sr, json.dumps(KEY))
    producer = Producer({"bootstrap.servers": registry.bootstrap})
    for i, value in enumerate(values):
        ctx = SerializationContext(topic, MessageField.VALUE)
        k = key_serialize({"id": i}, SerializationContext(topic, MessageField.KEY)) if key \
            else None
        producer.produce(topic, serialize(value, ctx), key=k, partition=0)
    for data in raw or ():
        producer.produce(topic, data, partition=0)
    assert producer.flush(30) == 0


def load(spark: Any, registry: RegistryBrokerProcess, topic: str, **options: str) -> Any:
    return (spark.read.format("moldau")
            .option("kafka.bootstrap.servers", registry.bootstrap).option("subscribe", topic)
            .option("schema.registry.url", registry.registry_url).options(**options).load())


def test_batch_read_decodes_with_the_latest_schema(spark: Any, registry: RegistryBrokerProcess,
                                                   sr: SchemaRegistryClient) -> None:
    topic = f"avro-{uuid.uuid4().hex[:8]}"
    send(registry, sr, topic, V1, [reading(i) for i in range(3)], key=True)
    send(registry, sr, topic, V2, [reading(i, unit="F") for i in range(3, 5)], key=True)
    df = load(spark, registry, topic, **{"value.format": "avro", "key.format": "avro"})
    assert df.schema["value"].dataType.simpleString() == (
        "struct<sensor:string,value:double,at:timestamp,price:decimal(8,2),tags:map<string,int>,"
        "extra:struct<member0:string,member1:bigint>,unit:string>")
    assert df.schema["key"].dataType.simpleString() == "struct<id:int>"
    rows = df.selectExpr("key.id AS id", "value.*", "offset").orderBy("offset").collect()
    assert [r.id for r in rows] == [0, 1, 2, 0, 1]
    assert [r.sensor for r in rows] == ["s0", "s1", "s2", "s3", "s4"]
    assert [r.unit for r in rows] == ["C", "C", "C", "F", "F"]  # v1 records get the default
    first = rows[1]
    assert first.value == 0.5 and first.price == decimal.Decimal("1.25")
    assert first.at.replace(tzinfo=None) == (AT + dt.timedelta(seconds=1)).astimezone(
        ).replace(tzinfo=None)
    assert first.tags == {"n": 1}
    assert [(r.extra.member0, r.extra.member1) if r.extra else None for r in rows] == [
        None, ("x1", None), (None, 2), None, ("x4", None)]


def test_reader_schema_option_modes_and_binary_key(spark: Any, registry: RegistryBrokerProcess,
                                                   sr: SchemaRegistryClient) -> None:
    topic = f"avro-{uuid.uuid4().hex[:8]}"
    send(registry, sr, topic, V1, [reading(1), reading(2)], raw=[b"not avro", None])
    reader = {"type": "record", "name": "Reading", "namespace": "spark.test",
              "fields": [{"name": "sensor", "type": "string"},
                         {"name": "unit", "type": "string", "default": "K"}]}
    permissive = load(spark, registry, topic, **{
        "value.format": "avro", "avroSchema": json.dumps(reader), "mode": "PERMISSIVE"})
    assert permissive.schema["key"].dataType.simpleString() == "binary"
    rows = permissive.select("value", "offset").orderBy("offset").collect()
    assert [r.value.asDict() if r.value else None for r in rows] == [
        {"sensor": "s1", "unit": "K"}, {"sensor": "s2", "unit": "K"}, None, None]
    failfast = load(spark, registry, topic, **{"value.format": "avro",
                                               "value.avroSchema": json.dumps(reader)})
    with pytest.raises(Exception, match="Malformed records are detected"):
        failfast.collect()


def test_missing_subject_fails_when_the_query_is_defined(spark: Any,
                                                         registry: RegistryBrokerProcess) -> None:
    with pytest.raises(Exception, match="cannot get the latest schema of subject"):
        load(spark, registry, "no-such-topic", **{"value.format": "avro"}).schema  # noqa: B018


def test_streaming_read_decodes(spark: Any, registry: RegistryBrokerProcess,
                                sr: SchemaRegistryClient, tmp_path: Path) -> None:
    topic = f"avro-{uuid.uuid4().hex[:8]}"
    send(registry, sr, topic, V1, [reading(i) for i in range(6)])
    out = tmp_path / "out"
    stream = (spark.readStream.format("moldau")
              .option("kafka.bootstrap.servers", registry.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "4")
              .option("value.format", "avro")
              .option("schemaRegistryAddress", registry.registry_url).load()
              .selectExpr("value.sensor AS sensor", "value.tags['n'] AS n", "offset"))
    query = (stream.writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    rows = spark.read.parquet(str(out)).orderBy("offset").collect()
    assert [(r.sensor, r.n) for r in rows] == [(f"s{i}", i) for i in range(6)]
