"""confluent-kafka's SchemaRegistryClient and AvroSerializer against Moldau's registry,
unmodified: register, get, lookup, delete, config, mode, compatibility, errors."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.common.schema_registry_client import (
    ConfigCompatibilityLevel,
    ServerConfig,
)
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from moldau.testing.runner import InProcessBroker

from .registry_harness import RunningRegistry, unique

V1 = {"type": "record", "name": "Payment", "namespace": "shop",
      "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "currency", "type": "string",
                                        "default": "EUR"}]}
V3_BAD = {**V1, "fields": [*V1["fields"], {"name": "note", "type": "string"}]}


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


@pytest.fixture(scope="module")
def reg(broker: InProcessBroker) -> Iterator[RunningRegistry]:
    with RunningRegistry(broker.bootstrap) as registry:
        yield registry


@pytest.fixture
def client(reg: RunningRegistry) -> SchemaRegistryClient:
    # retries off: an error must surface at once, not after back-offs
    return SchemaRegistryClient({"url": reg.url, "max.retries": 0})


def avro(schema: dict[str, object]) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


def code_of(call: object) -> tuple[int, int]:
    with pytest.raises(SchemaRegistryError) as info:
        call()  # type: ignore[operator]
    return info.value.http_status_code, info.value.error_code


def test_register_get_lookup(client: SchemaRegistryClient) -> None:
    subject = unique("payments-value")
    first = client.register_schema(subject, avro(V1))
    assert client.register_schema(subject, avro(V1)) == first
    # the same schema under another subject keeps its global id (normalize=False sent as
    # "False" in the query string)
    assert client.register_schema(unique("other"), avro(V1), normalize_schemas=False) == first
    second = client.register_schema(subject, avro(V2))
    assert second != first
    assert json.loads(client.get_schema(first).schema_str) == V1 | {"namespace": "shop"}
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.schema_id, latest.subject) == (2, second, subject)
    assert latest.schema.schema_type == "AVRO" and latest.schema.references == []
    assert client.get_version(subject, 1).schema_id == first
    assert client.get_versions(subject) == [1, 2]
    assert subject in client.get_subjects()
    found = client.lookup_schema(subject, avro(V1))
    assert (found.version, found.schema_id) == (1, first)
    assert client.get_subjects_by_schema_id(first) == sorted(
        client.get_subjects_by_schema_id(first))
    assert {v.subject for v in client.get_schema_versions(second)} == {subject}
    assert "AVRO" in client.get_schema_types()


def test_errors_are_the_codes_clients_expect(client: SchemaRegistryClient) -> None:
    subject = unique()
    client.register_schema(subject, avro(V1))
    assert code_of(lambda: client.register_schema(subject, avro(V3_BAD))) == (409, 409)
    assert code_of(lambda: client.get_latest_version(unique())) == (404, 40401)
    assert code_of(lambda: client.get_version(subject, 5)) == (404, 40402)
    assert code_of(lambda: client.get_schema(987654)) == (404, 40403)
    assert code_of(lambda: client.lookup_schema(subject, avro(V2))) == (404, 40403)
    assert code_of(lambda: client.register_schema(subject, Schema("{oops", "AVRO"))) == (
        422, 42201)
    assert client.test_compatibility(subject, avro(V2)) is True
    assert client.test_compatibility(subject, avro(V3_BAD)) is False
    assert client.test_compatibility_all_versions(subject, avro(V3_BAD)) is False


def test_delete_versions_and_subjects(client: SchemaRegistryClient) -> None:
    subject = unique()
    client.register_schema(subject, avro(V1))
    client.register_schema(subject, avro(V2))
    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    assert client.delete_version(subject, 1, permanent=True) == 1
    assert client.delete_subject(subject) == [2]
    assert subject not in client.get_subjects()
    assert subject in client.get_subjects(deleted=True)
    assert client.delete_subject(subject, permanent=True) == [2]
    assert subject not in client.get_subjects(deleted=True)
    assert code_of(lambda: client.delete_subject(subject)) == (404, 40401)


def test_config_and_mode(client: SchemaRegistryClient) -> None:
    subject = unique()
    client.register_schema(subject, avro(V1))
    assert client.set_compatibility(subject, "NONE") == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    client.register_schema(subject, avro(V3_BAD))  # NONE lets it in
    answer = client.set_config(  # the client returns the JSON answer as it is
        subject, ServerConfig(compatibility=ConfigCompatibilityLevel.FULL))
    assert answer == {"compatibility": "FULL"}
    assert client.get_config(subject).compatibility_level.value == "FULL"  # type: ignore[union-attr]
    assert client.delete_config(subject).compatibility_level.value == "FULL"  # type: ignore[union-attr]
    assert client.get_compatibility() == "BACKWARD"
    assert client.update_mode(subject, "READONLY") == "READONLY"
    assert client.get_mode(subject) == "READONLY"
    assert code_of(lambda: client.register_schema(subject, avro(V2))) == (422, 42205)
    assert client.delete_mode(subject) == "READONLY"
    assert client.get_global_mode() == "READWRITE"


def test_avro_serializer_round_trip_and_evolution(broker: InProcessBroker,
                                                  reg: RunningRegistry) -> None:
    topic = unique("payments")
    client = SchemaRegistryClient({"url": reg.url, "max.retries": 0})
    serialize_v1 = AvroSerializer(client, json.dumps(V1))
    serialize_v2 = AvroSerializer(client, json.dumps(V2))
    deserialize = AvroDeserializer(client)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [serialize_v1({"id": "a", "amount": 1.5}, ctx),
               serialize_v2({"id": "b", "amount": 2.5, "currency": "USD"}, ctx)]
    for value in records:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    assert records[0][0] == 0 and records[0][1:5] != records[1][1:5]  # magic, two ids
    with pytest.raises(SchemaRegistryError) as info:
        AvroSerializer(client, json.dumps(V3_BAD))({"id": "c", "amount": 1, "note": "x"}, ctx)
    assert (info.value.http_status_code, info.value.error_code) == (409, 409)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    try:
        while len(got) < 2:
            message = consumer.poll(10)
            assert message is not None, "no record within 10 s"
            assert message.error() is None, message.error()
            got.append(deserialize(message.value(), ctx))
    finally:
        consumer.close()
    assert got == [{"id": "a", "amount": 1.5},
                   {"id": "b", "amount": 2.5, "currency": "USD"}]
    assert client.get_versions(f"{topic}-value") == [1, 2]


def _order_class() -> type:
    """shop.Order (shop/order.proto) importing shop.Money (shop/money.proto), built at run
    time as protoc-generated classes would be."""
    field = descriptor_pb2.FieldDescriptorProto
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop",
                                               syntax="proto3")
    money.message_type.add(name="Money").field.add(
        name="cents", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    order = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop",
                                               syntax="proto3",
                                               dependency=["shop/money.proto"])
    message = order.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    message.field.add(name="total", number=2, type=field.TYPE_MESSAGE, type_name=".shop.Money",
                      label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(money)
    pool.Add(order)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_serializer_registers_imports_as_references(reg: RunningRegistry) -> None:
    order_class = _order_class()
    client = SchemaRegistryClient({"url": reg.url, "max.retries": 0})
    topic = unique("orders")
    ctx = SerializationContext(topic, MessageField.VALUE)
    conf = {"use.deprecated.format": False}
    order = order_class(id="o-1")
    order.total.cents = 250
    data = ProtobufSerializer(order_class, client, conf)(order, ctx)
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("shop/money.proto", "shop/money.proto", 1)]
    assert "shop/money.proto" in client.get_subjects()
    money_id = client.get_version("shop/money.proto", 1).schema_id
    assert client.get_referenced_by("shop/money.proto", 1) == [latest.schema_id]
    assert money_id != latest.schema_id
    # a fresh client (no cache) reads the writer's schema with format=serialized
    fresh = SchemaRegistryClient({"url": reg.url})
    back = ProtobufDeserializer(order_class, conf, fresh)(data, ctx)
    assert (back.id, back.total.cents) == ("o-1", 250)
    with pytest.raises(SchemaRegistryError) as info:
        client.delete_subject("shop/money.proto")
    assert info.value.error_code == 42206


def test_json_schema_serializer_round_trip(reg: RunningRegistry) -> None:
    client = SchemaRegistryClient({"url": reg.url, "max.retries": 0})
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#",
                         "title": "Reading", "type": "object",
                         "properties": {"sensor": {"type": "string"},
                                        "value": {"type": "number"}},
                         "required": ["sensor"]})
    topic = unique("readings")
    ctx = SerializationContext(topic, MessageField.VALUE)
    data = JSONSerializer(schema, client)({"sensor": "t1", "value": 21.5}, ctx)
    fresh = SchemaRegistryClient({"url": reg.url})
    assert JSONDeserializer(None, schema_registry_client=fresh)(data, ctx) == {
        "sensor": "t1", "value": 21.5}
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON"
    bad = Schema(json.dumps({"type": "object", "properties": {"a": {"type": 12}}}), "JSON")
    assert code_of(lambda: client.register_schema(topic, bad)) == (422, 42201)
