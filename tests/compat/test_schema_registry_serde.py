"""moldau.registry.serde against confluent-kafka's serializers, through moldau's registry.

For the same subject and schema both sides get the same schema id, so their bytes must be
identical; each side reads what the other wrote. Also: schema evolution (use.latest.version,
reader schemas), refused registrations (409), auto.register.schemas=false, subject name
strategies, Protobuf references and nested messages, and the async API. The registry runs in
a ``moldau serve`` subprocess (schema.registry.listeners).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as CAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CAvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError as CRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CJSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CJSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CProtoDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CProtoSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from moldau.registry.client import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from moldau.registry.serde import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationError,
    parse_frame,
)
from moldau.registry.serde.protobuf import message_to_json
from moldau.testing.registry import RegistryBrokerProcess

USER_V1 = {"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": ["null", "int"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
]}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"],
                                 {"name": "email", "type": "string", "default": "none"}]}
USER_BAD = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "id", "type": "long"}]}
RECORD = {"name": "Ann", "age": 41, "tags": ["a", "b"]}

PERSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person",
          "type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer", "minimum": 0}},
          "required": ["name"]}


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryBrokerProcess]:
    with RegistryBrokerProcess(settings={"auto.create.topics.enable": "true"}) as proc:
        yield proc
        proc.close()


@pytest.fixture(scope="module")
def ours(registry: RegistryBrokerProcess) -> Iterator[SchemaRegistryClient]:
    client = SchemaRegistryClient({"url": registry.registry_url, "retries.wait.ms": 50})
    yield client
    client.close()


@pytest.fixture(scope="module")
def theirs(registry: RegistryBrokerProcess) -> ConfluentClient:
    return ConfluentClient({"url": registry.registry_url})


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _ctx(topic: str, key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE)


# --- Avro ------------------------------------------------------------------------------------


def test_avro_bytes_equal_confluent_kafka_and_each_reads_the_other(
        ours: SchemaRegistryClient, theirs: ConfluentClient) -> None:
    topic = _topic("avro")
    mine = AvroSerializer(ours, json.dumps(USER_V1))(topic, RECORD)
    other = CAvroSerializer(theirs, json.dumps(USER_V1))(RECORD, _ctx(topic))
    assert mine == other
    assert mine is not None and mine[0] == 0
    assert CAvroDeserializer(theirs)(mine, _ctx(topic)) == RECORD
    assert AvroDeserializer(ours)(topic, other) == RECORD
    assert ours.get_subjects() and f"{topic}-value" in ours.get_subjects()


@pytest.mark.parametrize("schema, value", [
    ('"string"', "héllo"), ('"long"', 2**40), ('"bytes"', b"\x00\xff"), ('"double"', 1.5),
    ('"boolean"', True), ('{"type": "enum", "name": "Suit", "symbols": ["S", "H"]}', "H"),
])
def test_avro_primitives_and_keys(ours: SchemaRegistryClient, theirs: ConfluentClient,
                                  schema: str, value: Any) -> None:
    topic = _topic("prim")
    mine = AvroSerializer(ours, schema, is_key=True)(topic, value)
    other = CAvroSerializer(theirs, schema)(value, _ctx(topic, key=True))
    assert mine == other
    assert CAvroDeserializer(theirs)(mine, _ctx(topic, key=True)) == value
    assert AvroDeserializer(ours, is_key=True)(topic, other) == value
    assert f"{topic}-key" in ours.get_subjects()


def test_avro_evolution_under_backward(ours: SchemaRegistryClient,
                                       theirs: ConfluentClient) -> None:
    topic = _topic("evolve")
    v1_bytes = CAvroSerializer(theirs, json.dumps(USER_V1))(RECORD, _ctx(topic))
    # a compatible change registers version 2
    v2_bytes = AvroSerializer(ours, json.dumps(USER_V2))(topic, {**RECORD, "email": "a@b"})
    assert v1_bytes is not None and v2_bytes is not None
    assert parse_frame(v2_bytes).schema_id != parse_frame(v1_bytes).schema_id
    assert ours.get_versions(f"{topic}-value") == [1, 2]
    # readers with the new schema see the default for old records
    latest = AvroDeserializer(ours, conf={"use.latest.version": True})
    assert latest(topic, v1_bytes) == {**RECORD, "email": "none"}
    assert AvroDeserializer(ours, json.dumps(USER_V2))(topic, v1_bytes)["email"] == "none"
    assert CAvroDeserializer(theirs, json.dumps(USER_V2))(v1_bytes, _ctx(topic))[
        "email"] == "none"
    # writing with the latest version, as Confluent's use.latest.version
    writer = AvroSerializer(ours, conf={"use.latest.version": True,
                                       "auto.register.schemas": False})
    assert writer(topic, {**RECORD, "email": "x"}) == CAvroSerializer(
        theirs, json.dumps(USER_V2), conf={"use.latest.version": True,
                                           "auto.register.schemas": False})(
        {**RECORD, "email": "x"}, _ctx(topic))
    # an incompatible change is refused with 409, by our serializer as by theirs
    with pytest.raises(SchemaRegistryError) as refused:
        AvroSerializer(ours, json.dumps(USER_BAD))(topic, {**RECORD, "id": 1})
    assert (refused.value.http_status, refused.value.error_code) == (409, 409)
    with pytest.raises(CRegistryError) as theirs_refused:
        CAvroSerializer(theirs, json.dumps(USER_BAD))({**RECORD, "id": 1}, _ctx(topic))
    assert theirs_refused.value.http_status_code == 409
    assert ours.get_versions(f"{topic}-value") == [1, 2]


def test_avro_lookup_only_and_use_schema_id(ours: SchemaRegistryClient,
                                            theirs: ConfluentClient) -> None:
    topic = _topic("lookup")
    lookup_only = AvroSerializer(ours, json.dumps(USER_V1),
                                 conf={"auto.register.schemas": False})
    with pytest.raises(SchemaRegistryError) as missing:
        lookup_only(topic, RECORD)
    assert missing.value.error_code == 40401  # subject not found
    schema_id = ours.register_schema(f"{topic}-value", Schema(json.dumps(USER_V1)))
    framed = lookup_only(topic, RECORD)
    assert framed is not None and parse_frame(framed).schema_id == schema_id
    by_id = AvroSerializer(ours, conf={"use.schema.id": schema_id})(topic, RECORD)
    assert by_id == framed == CAvroSerializer(theirs, json.dumps(USER_V1))(RECORD, _ctx(topic))


@pytest.mark.parametrize("strategy, subject", [
    ("RecordNameStrategy", "com.example.User"),
    ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
     "{topic}-com.example.User"),
])
def test_avro_subject_name_strategies(ours: SchemaRegistryClient, strategy: str,
                                      subject: str) -> None:
    topic = _topic("strategy")
    data = AvroSerializer(ours, json.dumps(USER_V1),
                          conf={"subject.name.strategy": strategy})(topic, RECORD)
    assert subject.format(topic=topic) in ours.get_subjects()
    reader = AvroDeserializer(ours, conf={"subject.name.strategy": strategy,
                                          "use.latest.version": True})
    assert reader(topic, data) == RECORD


def test_avro_records_round_trip_through_the_broker(registry: RegistryBrokerProcess,
                                                    ours: SchemaRegistryClient,
                                                    theirs: ConfluentClient) -> None:
    topic = _topic("broker")
    serialize = AvroSerializer(ours, json.dumps(USER_V1))
    producer = Producer({"bootstrap.servers": registry.bootstrap})
    records = [{**RECORD, "name": f"n{i}", "age": i} for i in range(20)]
    for record in records:
        producer.produce(topic, serialize(topic, record))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": registry.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deserialize = CAvroDeserializer(theirs)
    got = []
    try:
        while len(got) < len(records):
            message = consumer.poll(10)
            assert message is not None and message.error() is None
            got.append(deserialize(message.value(), _ctx(topic)))
    finally:
        consumer.close()
    assert got == records


def test_bad_records_and_frames_are_serialization_errors(ours: SchemaRegistryClient) -> None:
    topic = _topic("bad")
    with pytest.raises(SerializationError, match="does not match"):
        AvroSerializer(ours, json.dumps(USER_V1))(topic, {"name": 1})
    with pytest.raises(SerializationError, match="magic byte"):
        AvroDeserializer(ours)(topic, b"\x01\x00\x00\x00\x01xyz")
    with pytest.raises(SchemaRegistryError) as unknown:
        AvroDeserializer(ours)(topic, b"\x00\x7f\xff\xff\xf0xyz")
    assert unknown.value.error_code == 40403


# --- JSON Schema -----------------------------------------------------------------------------


def test_json_schema_bytes_equal_confluent_kafka(ours: SchemaRegistryClient,
                                                 theirs: ConfluentClient) -> None:
    topic = _topic("json")
    value = {"name": "Zoë", "age": 7}
    mine = JSONSerializer(ours, json.dumps(PERSON))(topic, value)
    other = CJSONSerializer(json.dumps(PERSON), theirs)(value, _ctx(topic))
    assert mine == other
    assert mine is not None and mine[5:] == '{"name":"Zoë","age":7}'.encode()
    assert CJSONDeserializer(json.dumps(PERSON), schema_registry_client=theirs)(
        mine, _ctx(topic)) == value
    assert JSONDeserializer(ours)(topic, other) == value
    with pytest.raises(SerializationError, match="age"):
        JSONSerializer(ours, json.dumps(PERSON))(topic, {"name": "x", "age": -1})
    with pytest.raises(SerializationError, match="'name' is a required property"):
        JSONDeserializer(ours)(topic, mine[:5] + b'{"age":1}')


# --- Protobuf --------------------------------------------------------------------------------

_SUFFIX = uuid.uuid4().hex[:8]


def _proto_classes() -> tuple[type, type, type]:
    """Order (importing Money from another file and google.protobuf.Timestamp, with a nested
    Line) and Money, as generated code would define them, in the default pool."""
    pool = descriptor_pool.Default()
    common = descriptor_pb2.FileDescriptorProto(
        name=f"moldau_test_{_SUFFIX}/money.proto", package=f"shop{_SUFFIX}", syntax="proto3")
    money = common.message_type.add(name="Money")
    money.field.add(name="currency", number=1, type=9, label=1)
    money.field.add(name="cents", number=2, type=3, label=1)
    pool.Add(common)
    order_file = descriptor_pb2.FileDescriptorProto(
        name=f"moldau_test_{_SUFFIX}/order.proto", package=f"shop{_SUFFIX}", syntax="proto3",
        dependency=[common.name, "google/protobuf/timestamp.proto"])
    other = order_file.message_type.add(name="Other")
    other.field.add(name="z", number=1, type=9, label=1)
    order = order_file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=3, label=1)
    order.field.add(name="placed_at", number=2, type=11, label=1,
                    type_name=".google.protobuf.Timestamp")
    order.field.add(name="total", number=3, type=11, label=1,
                    type_name=f".shop{_SUFFIX}.Money")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=9, label=1)
    order.field.add(name="lines", number=4, type=11, label=3,
                    type_name=f".shop{_SUFFIX}.Order.Line")
    pool.Add(order_file)

    def cls(name: str) -> type:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"shop{_SUFFIX}.{name}"))

    return cls("Order"), cls("Order.Line"), cls("Money")


def test_protobuf_bytes_equal_confluent_kafka_with_references(
        ours: SchemaRegistryClient, theirs: ConfluentClient) -> None:
    order_cls, line_cls, _money = _proto_classes()
    order = order_cls(id=42)
    order.placed_at.seconds = 1_700_000_000
    order.total.currency, order.total.cents = "EUR", 1250
    order.lines.add(sku="abc")
    topic = _topic("proto")
    conf = {"use.deprecated.format": False}
    mine = ProtobufSerializer(ours, order_cls)(topic, order)
    other = CProtoSerializer(order_cls, theirs, conf)(order, _ctx(topic))
    assert mine == other
    assert mine is not None and parse_frame(mine, protobuf=True).message_indexes == (1,)
    # the imported file is its own subject, referenced by the order's schema
    assert f"moldau_test_{_SUFFIX}/money.proto" in ours.get_subjects()
    assert CProtoDeserializer(order_cls, conf, schema_registry_client=theirs)(
        mine, _ctx(topic)) == order
    dynamic = ProtobufDeserializer(ours)(topic, other)
    assert dynamic.SerializeToString() == order.SerializeToString()
    assert json.loads(message_to_json(dynamic)) == {
        "id": "42", "placedAt": "2023-11-14T22:13:20Z",
        "total": {"currency": "EUR", "cents": "1250"}, "lines": [{"sku": "abc"}]}
    # a nested message: indexes [1, 0]
    line = line_cls(sku="x")
    nested = ProtobufSerializer(ours, line_cls)(_topic("line"), line)
    assert nested is not None and parse_frame(nested, protobuf=True).message_indexes == (1, 0)
    read = ProtobufDeserializer(ours)("any", nested)
    assert read.DESCRIPTOR.full_name == f"shop{_SUFFIX}.Order.Line"
    assert read.SerializeToString() == line.SerializeToString()


def test_protobuf_from_proto_text_and_json(ours: SchemaRegistryClient,
                                           theirs: ConfluentClient) -> None:
    topic = _topic("prototext")
    proto = ('syntax = "proto3";\npackage txt;\nmessage First { string a = 1; }\n'
             "message Reading { string sensor = 1; double value = 2; repeated int32 n = 3; }\n")
    serializer = ProtobufSerializer(ours, schema=proto, message_name="txt.Reading")
    data = serializer.serialize_json(topic, '{"sensor": "s1", "value": 2.5, "n": [1, 2]}')
    message = ProtobufDeserializer(ours)(topic, data)
    assert message.DESCRIPTOR.full_name == "txt.Reading"
    assert json.loads(message_to_json(message)) == {"sensor": "s1", "value": 2.5, "n": [1, 2]}
    assert parse_frame(data, protobuf=True).message_indexes == (1,)
    # confluent-kafka reads it with a class of the same shape
    cls = message_factory.GetMessageClass(message.DESCRIPTOR)
    assert CProtoDeserializer(cls, {"use.deprecated.format": False},
                              schema_registry_client=theirs)(data, _ctx(topic)).sensor == "s1"


# --- the async API ---------------------------------------------------------------------------


def test_async_serde_in_an_event_loop(registry: RegistryBrokerProcess) -> None:
    async def go() -> tuple[Any, Any]:
        async with AsyncSchemaRegistryClient({"url": registry.registry_url}) as client:
            topic = _topic("async")
            data = await AvroSerializer(client, json.dumps(USER_V1)).serialize_async(
                topic, RECORD)
            with pytest.raises(RuntimeError, match="async"):
                AvroSerializer(client, json.dumps(USER_V1))(topic + "x", RECORD)
            text = await AvroDeserializer(client).deserialize_json_async(topic, data)
            return await AvroDeserializer(client).deserialize_async(topic, data), text

    record, text = asyncio.run(go())
    assert record == RECORD
    assert json.loads(text) == {"name": "Ann", "age": {"int": 41}, "tags": ["a", "b"]}
