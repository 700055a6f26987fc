"""API v2 produce and consume in every embedded format (binary, json, avro, jsonschema,
protobuf), to a topic and to a partition, with schemas by text and by id through a schema
registry; what lands in Kafka is checked with moldau's own client and deserializers."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.client import Consumer, NewTopic, TopicPartition
from moldau.registry.client import AsyncSchemaRegistryClient
from moldau.registry.serde import AvroDeserializer, parse_frame
from moldau.testing.runner import InProcessBroker

from .rest_harness import (
    AVRO,
    BINARY,
    JSON_V2,
    JSONSCHEMA,
    PROTOBUF,
    V2,
    Client,
    proxy,
    registry,
    run,
    unique,
)

USER = json.dumps({"type": "record", "name": "User", "namespace": "test", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": ["null", "int"], "default": None}]})
USER_JSON_SCHEMA = json.dumps({"type": "object", "title": "User", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"], "additionalProperties": False})
USER_PROTO = """syntax = "proto3";
package test;
message User {
  string name = 1;
  int32 age = 2;
}
"""


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


async def _topic(client: Client, partitions: int = 1, **configs: str) -> str:
    name = unique("fmt")
    admin = await client.proxy.ctx.admin()
    await admin.create_topics([NewTopic(name, partitions, 1, configs)])
    return name


async def _raw(bootstrap: str, topic: str, count: int) -> list[Any]:
    """The topic's first ``count`` records, read with moldau's consumer (partition 0)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    async with consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[Any] = []
        for _ in range(50):
            got.extend(await consumer.poll(0.2))
            if len(got) >= count:
                return got
    raise AssertionError(f"{len(got)} of {count} records in {topic}")


def test_binary_and_json(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            topic = await _topic(client, 2)
            body = {"records": [{"key": "a2V5", "value": "dmFsdWU=", "partition": 1},
                                {"value": "AAEC"}, {"key": None, "value": None}]}
            answer = await client.ok("POST", f"/topics/{topic}", body, ctype=BINARY)
            assert answer["key_schema_id"] is None and answer["value_schema_id"] is None
            first = answer["offsets"][0]
            assert first == {"partition": 1, "offset": 0, "error_code": None, "error": None}
            answer = await client.ok("POST", f"/topics/{topic}/partitions/0",
                                     {"records": [{"value": {"foo": ["bar", 1, None]},
                                                   "key": "k"}]}, ctype=JSON_V2)
            part0 = answer["offsets"][0]["offset"]
            raw = await _raw(broker.bootstrap, topic, part0 + 1)
            assert raw[part0].value == b'{"foo":["bar",1,null]}' and raw[part0].key == b'"k"'
            # a binary instance reads partition 1 back as base64
            path = await client.consumer(unique("g"), format="binary",
                                         **{"auto.offset.reset": "earliest"})
            await client.ok("POST", f"{path}/assignments",
                            {"partitions": [{"topic": topic, "partition": 1}]}, status=204)
            got = await client.records(path, BINARY)
            assert got[0] == {"topic": topic, "key": "a2V5", "value": "dmFsdWU=",
                              "partition": 1, "offset": 0}
            # a json instance reads the JSON record of partition 0
            path = await client.consumer(unique("g"), format="json",
                                         **{"auto.offset.reset": "earliest"})
            await client.ok("POST", f"{path}/assignments",
                            {"partitions": [{"topic": topic, "partition": 0}]}, status=204)
            await client.ok("POST", f"{path}/positions",
                            {"offsets": [{"topic": topic, "partition": 0, "offset": part0}]},
                            status=204)
            got = await client.records(path, JSON_V2)
            assert got[0] == {"topic": topic, "key": "k", "value": {"foo": ["bar", 1, None]},
                              "partition": 0, "offset": part0}

    run(scenario())


def test_avro_by_schema_and_by_id(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with registry(broker.bootstrap) as url, \
                proxy(broker.bootstrap, schema_registry_url=url) as client:
            topic = await _topic(client)
            body = {"key_schema": '"string"', "value_schema": USER, "records": [
                {"key": "u1", "value": {"name": "Ann", "age": {"int": 41}}},
                {"key": "u2", "value": {"name": "Bob", "age": None}}]}
            answer = await client.ok("POST", f"/topics/{topic}", body, ctype=AVRO)
            key_id, value_id = answer["key_schema_id"], answer["value_schema_id"]
            assert isinstance(key_id, int) and isinstance(value_id, int) and key_id != value_id
            assert [o["offset"] for o in answer["offsets"]] == [0, 1]
            again = {"value_schema_id": value_id,
                     "records": [{"value": {"name": "Cy", "age": {"int": 7}}}]}
            answer = await client.ok("POST", f"/topics/{topic}/partitions/0", again, ctype=AVRO)
            assert answer["value_schema_id"] == value_id and answer["key_schema_id"] is None
            # in Kafka: Confluent's framing (magic 0, the schema id), readable by a serde
            raw = await _raw(broker.bootstrap, topic, 3)
            assert parse_frame(raw[0].value).schema_id == value_id
            async with AsyncSchemaRegistryClient({"url": url}) as reg:
                assert await AvroDeserializer(reg).deserialize_async(topic, raw[2].value) == \
                    {"name": "Cy", "age": 7}
            path = await client.consumer(unique("g"), format="avro",
                                         **{"auto.offset.reset": "earliest"})
            await client.ok("POST", f"{path}/subscription", {"topics": [topic]}, status=204)
            got = await client.records(path, AVRO, want=3)
            assert [(r["key"], r["value"]) for r in got] == [
                ("u1", {"name": "Ann", "age": {"int": 41}}),
                ("u2", {"name": "Bob", "age": None}),
                (None, {"name": "Cy", "age": {"int": 7}})]
            # the binary view of the same records is the framed bytes
            path = await client.consumer(unique("g"), **{"auto.offset.reset": "earliest"})
            await client.ok("POST", f"{path}/subscription", {"topics": [topic]}, status=204)
            got = await client.records(path, V2, want=1)
            assert base64.b64decode(got[0]["value"]) == raw[0].value

    run(scenario())


def test_jsonschema_and_protobuf(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with registry(broker.bootstrap) as url, \
                proxy(broker.bootstrap, schema_registry_url=url) as client:
            for fmt, ctype, schema in (("jsonschema", JSONSCHEMA, USER_JSON_SCHEMA),
                                       ("protobuf", PROTOBUF, USER_PROTO)):
                topic = await _topic(client)
                body = {"value_schema": schema,
                        "records": [{"value": {"name": "Ann", "age": 41}},
                                    {"value": {"name": "Bob", "age": 3}}]}
                answer = await client.ok("POST", f"/topics/{topic}", body, ctype=ctype)
                assert isinstance(answer["value_schema_id"], int), fmt
                by_id = {"value_schema_id": answer["value_schema_id"],
                         "records": [{"value": {"name": "Cy", "age": 7}}]}
                again = await client.ok("POST", f"/topics/{topic}", by_id, ctype=ctype)
                assert again["offsets"][0]["offset"] == 2, fmt
                raw = await _raw(broker.bootstrap, topic, 3)
                assert parse_frame(raw[0].value, protobuf=fmt == "protobuf").schema_id == \
                    answer["value_schema_id"]
                path = await client.consumer(unique("g"), format=fmt,
                                             **{"auto.offset.reset": "earliest"})
                await client.ok("POST", f"{path}/subscription", {"topics": [topic]}, status=204)
                got = await client.records(path, ctype, want=3)
                assert [r["value"] for r in got] == [{"name": "Ann", "age": 41},
                                                     {"name": "Bob", "age": 3},
                                                     {"name": "Cy", "age": 7}], fmt

    run(scenario())


def test_schema_errors(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with registry(broker.bootstrap) as url, \
                proxy(broker.bootstrap, schema_registry_url=url) as client:
            topic = await _topic(client)
            cases: list[tuple[dict[str, Any], str, tuple[int, int]]] = [
                ({"records": [{"value": {"name": "x"}}]}, AVRO, (422, 42202)),
                ({"value_schema": USER, "records": [{"key": "k", "value": {"name": "x"}}]},
                 AVRO, (422, 42201)),
                ({"value_schema": USER, "records": [{"value": {"name": 5}}]}, AVRO,
                 (422, 42203)),
                ({"value_schema": USER, "records": [{"value": {"nom": "x"}}]}, AVRO,
                 (422, 42203)),
                ({"value_schema": '{"type": "record"', "records": [{"value": 1}]}, AVRO,
                 (422, 42205)),
                ({"value_schema": USER_JSON_SCHEMA, "records": [{"value": {"age": 1}}]},
                 JSONSCHEMA, (422, 42203)),
                ({"value_schema": "syntax = nonsense", "records": [{"value": {}}]}, PROTOBUF,
                 (422, 42205)),
                ({"value_schema_id": 987654, "records": [{"value": {"name": "x"}}]}, AVRO,
                 (422, 42207)),
                ({"records": [{"value": "not base64!"}]}, BINARY, (400, 400)),
                ({"records": [{"value": 12}]}, BINARY, (400, 400)),
            ]
            topics = {AVRO: topic, JSONSCHEMA: await _topic(client),
                      PROTOBUF: await _topic(client), BINARY: await _topic(client)}
            for body, ctype, expected in cases:
                answer = await client.call("POST", f"/topics/{topics[ctype]}", body, ctype=ctype)
                assert answer.error() == expected, (body, answer.body)
            # a schema of another type than the subject's is the registry's refusal: 42207
            answer = await client.call("POST", f"/topics/{topic}",
                                       {"value_schema": USER_JSON_SCHEMA,
                                        "records": [{"value": {"name": "x"}}]}, ctype=JSONSCHEMA)
            assert answer.error() == (422, 42207)
            # nothing of the refused requests reached Kafka; the proxy still serves
            for name in topics.values():
                offsets = await client.ok("GET", f"/topics/{name}/partitions/0/offsets")
                assert offsets == {"beginning_offset": 0, "end_offset": 0}

    run(scenario())


def test_per_record_kafka_errors(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            topic = await _topic(client, 1, **{"max.message.bytes": "200"})
            big = base64.b64encode(b"x" * 5000).decode()
            answer = await client.ok("POST", f"/topics/{topic}",
                                     {"records": [{"value": big}]}, ctype=BINARY)
            entry = answer["offsets"][0]
            assert entry["partition"] is None and entry["offset"] is None
            assert entry["error_code"] == 50002 and entry["error"]
            fine = await client.ok("POST", f"/topics/{topic}", {"records": [{"value": "eA=="}]},
                                   ctype=BINARY)
            assert fine["offsets"][0]["error_code"] is None

    run(scenario())
