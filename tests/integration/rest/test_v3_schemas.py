"""API v3 produce with AVRO, JSONSCHEMA and PROTOBUF through a schema registry, in the full
REST Proxy app (moldau.rest.app, which reaches v3 through its seam); the records read back
with moldau's consumer and deserialized with moldau's registry serde."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.client import Consumer, NewTopic, TopicPartition
from moldau.registry.client import AsyncSchemaRegistryClient, Schema
from moldau.registry.serde import AvroDeserializer, JSONDeserializer, ProtobufDeserializer
from moldau.testing.runner import InProcessBroker

from .rest_harness import Client, proxy, registry, run, unique
from .v3_harness import JSON, concatenated

USER = json.dumps({"type": "record", "name": "User", "namespace": "example", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": ["null", "int"], "default": None}]})
ORDER_SCHEMA = json.dumps({"type": "object", "title": "Order", "properties": {
    "id": {"type": "integer"}, "item": {"type": "string"}}, "required": ["id"]})
PROTO = """syntax = "proto3";
package shop;
message Item { string sku = 1; int32 count = 2; }
"""


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


async def _setup(client: Client) -> tuple[str, str]:
    topic = unique()
    admin = await client.proxy.ctx.admin()
    await admin.create_topics([NewTopic(topic, 1, 1)])
    cid = (await client.ok("GET", "/v3/clusters", ctype=None))["data"][0]["cluster_id"]
    return cid, topic


async def _produce(client: Client, cid: str, topic: str,
                   records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    raw = b"".join(json.dumps(r).encode() for r in records)
    answer = await client.call("POST", f"/v3/clusters/{cid}/topics/{topic}/records", raw=raw,
                               ctype=JSON)
    assert answer.status == 200, answer
    return concatenated(json.dumps(answer.body) if isinstance(answer.body, dict)
                        else str(answer.body))


async def _read(bootstrap: str, topic: str, count: int) -> list[Any]:
    async with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        found: list[Any] = []
        for _ in range(200):
            found.extend(await consumer.poll(0.1))
            if len(found) >= count:
                return found
    raise AssertionError(f"{len(found)} of {count} records")


def test_avro(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with registry(broker.bootstrap) as url, \
                proxy(broker.bootstrap, schema_registry_url=url) as client:
            cid, topic = await _setup(client)
            results = await _produce(client, cid, topic, [
                # raw schema: registered under <topic>-value
                {"key": {"type": "STRING", "data": "u1"},
                 "value": {"type": "AVRO", "schema": USER,
                           "data": {"name": "ann", "age": {"int": 41}}}},
                # no type, no schema: the subject's latest version
                {"value": {"data": {"name": "bob", "age": None}}},
                # by id and by version
                {"value": {"schema_id": 1, "data": {"name": "cy", "age": None}}},
                {"value": {"type": "AVRO", "schema_version": 1,
                           "data": {"name": "di", "age": {"int": 7}}}},
                # data that does not match the schema
                {"value": {"type": "AVRO", "data": {"name": 5}}},
                # the wrong type for the schema
                {"value": {"type": "JSONSCHEMA", "schema_id": 1, "data": {}}},
                # a subject without versions
                {"value": {"type": "AVRO", "subject": "nobody-value", "data": {}}},
            ])
            subject = f"{topic}-value"
            expected = {"type": "AVRO", "subject": subject, "schema_id": 1,
                        "schema_version": 1}
            assert results[0]["key"] == {"type": "STRING", "size": 2}
            for result in results[:4]:
                assert result["error_code"] == 200, result
                assert {k: result["value"][k] for k in expected} == expected
                assert result["value"]["size"] > 5
            assert results[4]["error_code"] == 400
            assert "does not match its schema" in results[4]["message"]
            assert results[5]["error_code"] == 400 and "AVRO" in results[5]["message"]
            assert results[6]["error_code"] == 50002
            assert results[6]["message"].startswith(
                "Error when fetching latest schema version. subject = nobody-value")
            records = await _read(broker.bootstrap, topic, 4)
            async with AsyncSchemaRegistryClient({"url": url}) as reg:
                read = AvroDeserializer(reg)
                values = [await read.deserialize_async(topic, r.value) for r in records]
            assert values == [{"name": "ann", "age": 41}, {"name": "bob", "age": None},
                              {"name": "cy", "age": None}, {"name": "di", "age": 7}]
            assert records[0].value[:5] == b"\x00\x00\x00\x00\x01"

    run(scenario())


def test_jsonschema_and_protobuf(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with registry(broker.bootstrap) as url, \
                proxy(broker.bootstrap, schema_registry_url=url) as client:
            cid, topic = await _setup(client)
            async with AsyncSchemaRegistryClient({"url": url}) as reg:
                order_id = await reg.register_schema(f"{topic}-value",
                                                     Schema(ORDER_SCHEMA, "JSON"))
                results = await _produce(client, cid, topic, [
                    {"value": {"type": "JSONSCHEMA", "schema_id": order_id,
                               "data": {"id": 1, "item": "pen"}}},
                    {"value": {"data": {"id": 2}}},
                    {"value": {"type": "JSONSCHEMA", "data": {"item": "no id"}}},
                    {"key": {"type": "PROTOBUF", "schema": PROTO,
                             "data": {"sku": "a-1", "count": 3}},
                     "value": {"type": "STRING", "data": "item"}},
                    # RECORD_NAME: the subject is the message's full name
                    {"key": {"type": "PROTOBUF", "schema": PROTO,
                             "subject_name_strategy": "RECORD_NAME",
                             "data": {"sku": "b-2"}}},
                ])
                assert [r["error_code"] for r in results] == [200, 200, 400, 200, 200], results
                assert results[0]["value"]["type"] == "JSONSCHEMA"
                assert results[3]["key"]["type"] == "PROTOBUF"
                assert results[3]["key"]["subject"] == f"{topic}-key"
                assert results[4]["key"]["subject"] == "shop.Item"
                records = await _read(broker.bootstrap, topic, 4)
                orders = JSONDeserializer(reg)
                assert [await orders.deserialize_async(topic, r.value)
                        for r in records[:2]] == [{"id": 1, "item": "pen"}, {"id": 2}]
                items = ProtobufDeserializer(reg, is_key=True)
                first = await items.deserialize_async(topic, records[2].key)
                second = await items.deserialize_async(topic, records[3].key)
                assert (first.sku, first.count, second.sku) == ("a-1", 3, "b-2")

    run(scenario())


def test_v3_through_the_proxy_app(broker: InProcessBroker) -> None:
    """The proxy's own app serves v3 in application/json whatever Accept v2 would take."""
    async def scenario() -> None:
        async with proxy(broker.bootstrap, advertised_listeners="http://rest.example:8082"
                         ) as client:
            cid, topic = await _setup(client)
            answer = await client.call("GET", f"/v3/clusters/{cid}/topics/{topic}", ctype=None)
            assert (answer.status, answer.ctype) == (200, JSON)
            assert answer.body["metadata"]["self"] == (
                f"http://rest.example:8082/v3/clusters/{cid}/topics/{topic}")
            answer = await client.call("GET", f"/v3/clusters/{cid}/topics/nope", ctype=None)
            assert (answer.status, answer.ctype) == (404, JSON)
            assert answer.error() == (404, 40403)
            results = await _produce(client, cid, topic, [
                {"value": {"type": "JSON", "data": [1, 2]}}] * 3)
            assert [r["offset"] for r in results] == [0, 1, 2]
            # v3 speaks application/json only
            answer = await client.call("GET", f"/v3/clusters/{cid}", ctype=None,
                                       accept="application/vnd.kafka.v2+json")
            assert answer.status == 406
            answer = await client.call("PUT", f"/v3/clusters/{cid}/topics/{topic}/configs/"
                                              "retention.ms", raw=b'{"value": "1000"}',
                                       ctype="text/plain")
            assert (answer.status, answer.ctype) == (415, JSON) and answer.error() == (415, 415)

    run(scenario())
