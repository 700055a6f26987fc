"""``moldau produce`` / ``moldau consume`` with ``--value-format`` / ``--key-format``
(Confluent's kafka-avro-console-producer / -consumer properties), against a broker with its
in-process schema registry; records cross-checked with confluent-kafka's deserializers."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from moldau.testing.registry import RegistryBrokerProcess

from .conftest import moldau, moldau_many, unique

USER = json.dumps({"type": "record", "name": "User", "namespace": "cli", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"]}]})
KEY = json.dumps({"type": "record", "name": "UserKey", "namespace": "cli",
                  "fields": [{"name": "id", "type": "long"}]})


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryBrokerProcess]:
    with RegistryBrokerProcess(settings={"auto.create.topics.enable": "true"}) as proc:
        yield proc
        proc.close()


@pytest.fixture(scope="module")
def sr(registry: RegistryBrokerProcess) -> ConfluentClient:
    return ConfluentClient({"url": registry.registry_url})


def _args(registry: RegistryBrokerProcess) -> list[str]:
    return ["-b", registry.bootstrap, "--property",
            f"schema.registry.url={registry.registry_url}"]


def _raw(registry: RegistryBrokerProcess, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": registry.bootstrap, "group.id": unique("chk"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        while len(out) < count:
            message = consumer.poll(10)
            assert message is not None and message.error() is None
            out.append(message)
    finally:
        consumer.close()
    return out


def test_avro_keys_and_values_round_trip(registry: RegistryBrokerProcess,
                                         sr: ConfluentClient) -> None:
    topic = unique("avro")
    lines = ('{"id": 1}\t{"name": "Ann", "age": {"int": 41}}\n'
             '{"id": 2}\t{"name": "Bob", "age": null}\n')
    moldau("produce", *_args(registry), "--topic", topic, "--value-format", "avro",
           "--key-format", "avro", "--property", "parse.key=true",
           "--property", f"value.schema={USER}", "--property", f"key.schema={KEY}",
           stdin=lines).ok()
    records = _raw(registry, topic, 2)
    value_of = AvroDeserializer(sr)
    key_of = AvroDeserializer(sr)
    assert [(key_of(m.key(), SerializationContext(topic, MessageField.KEY)),
             value_of(m.value(), SerializationContext(topic, MessageField.VALUE)))
            for m in records] == [({"id": 1}, {"name": "Ann", "age": 41}),
                                  ({"id": 2}, {"name": "Bob", "age": None})]
    value_id = sr.get_latest_version(f"{topic}-value").schema_id
    key_id = sr.get_latest_version(f"{topic}-key").schema_id

    plain, with_ids = moldau_many(
        ["consume", *_args(registry), "--topic", topic, "--from-beginning",
         "--max-messages", "2", "--value-format", "avro"],
        ["consume", *_args(registry), "--topic", topic, "--from-beginning",
         "--max-messages", "2", "--value-format", "avro", "--key-format", "avro",
         "--property", "print.key=true", "--property", "print.schema.ids=true",
         "--property", "schema.id.separator=|"])
    assert plain.ok().stdout.splitlines() == ['{"name":"Ann","age":{"int":41}}',
                                              '{"name":"Bob","age":null}']
    assert with_ids.ok().stdout.splitlines() == [
        f'{{"id":1}}|{key_id}\t{{"name":"Ann","age":{{"int":41}}}}|{value_id}',
        f'{{"id":2}}|{key_id}\t{{"name":"Bob","age":null}}|{value_id}']


def test_schema_from_file_by_id_and_latest(registry: RegistryBrokerProcess, tmp_path: Path,
                                           sr: ConfluentClient) -> None:
    topic = unique("avro-file")
    path = tmp_path / "user.avsc"
    path.write_text(USER)
    moldau("produce", *_args(registry), "--topic", topic, "--value-format", "avro",
           "--property", f"value.schema.file={path}",
           stdin='{"name": "a", "age": null}\n').ok()
    schema_id = sr.get_latest_version(f"{topic}-value").schema_id
    moldau("produce", *_args(registry), "--topic", topic, "--value-format", "avro",
           "--property", f"value.schema.id={schema_id}",
           stdin='{"name": "b", "age": {"int": 2}}\n').ok()
    moldau("produce", *_args(registry), "--topic", topic, "--value-format", "avro",
           "--property", "use.latest.version=true", "--property", "auto.register.schemas=false",
           stdin='{"name": "c", "age": null}\n').ok()
    out = moldau("consume", *_args(registry), "--topic", topic, "--from-beginning",
                 "--max-messages", "3", "--value-format", "avro").ok()
    assert [json.loads(line)["name"] for line in out.stdout.splitlines()] == ["a", "b", "c"]
    assert sr.get_versions(f"{topic}-value") == [1]


def test_subject_name_strategy(registry: RegistryBrokerProcess, sr: ConfluentClient) -> None:
    topic = unique("avro-strategy")
    moldau("produce", *_args(registry), "--topic", topic, "--value-format", "avro",
           "--property", f"value.schema={USER}",
           "--property", "value.subject.name.strategy=TopicRecordNameStrategy",
           stdin='{"name": "a", "age": null}\n').ok()
    assert f"{topic}-cli.User" in sr.get_subjects()
    assert f"{topic}-value" not in sr.get_subjects()


def test_reads_what_confluent_kafka_wrote(registry: RegistryBrokerProcess,
                                          sr: ConfluentClient) -> None:
    topic = unique("from-confluent")
    serialize = AvroSerializer(sr, USER)
    producer = Producer({"bootstrap.servers": registry.bootstrap})
    producer.produce(topic, serialize({"name": "Zoë", "age": 3},
                                      SerializationContext(topic, MessageField.VALUE)))
    producer.produce(topic, None)  # a tombstone prints as null
    assert producer.flush(30) == 0
    out = moldau("consume", *_args(registry), "--topic", topic, "--from-beginning",
                 "--max-messages", "2", "--value-format", "avro").ok()
    assert out.stdout.splitlines() == ['{"name":"Zoë","age":{"int":3}}', "null"]


def test_usage_and_input_errors(registry: RegistryBrokerProcess) -> None:
    topic = unique("avro-bad")
    no_url, no_schema, bad_line, bad_schema = moldau_many(
        (["produce", "-b", registry.bootstrap, "--topic", topic, "--value-format", "avro"],
         "{}\n"),
        (["produce", *_args(registry), "--topic", topic, "--value-format", "avro"], "{}\n"),
        (["produce", *_args(registry), "--topic", topic, "--value-format", "avro",
          "--property", f"value.schema={USER}"],
         '{"name": "ok", "age": null}\n{"name": 5}\n'),
        (["produce", *_args(registry), "--topic", topic, "--value-format", "avro",
          "--property", 'value.schema={"type": "record"}'], "{}\n"),
    )
    assert "schema.registry.url" in no_url.failed(2).stderr
    assert ("Must provide the value schema in either value.schema, value.schema.id, or "
            "value.schema.file") in no_schema.failed(2).stderr
    assert "line 2:" in bad_line.failed(1).stderr
    assert "value schema" in bad_schema.failed(2).stderr
    # the good line before the bad one was sent
    out = moldau("consume", *_args(registry), "--topic", topic, "--from-beginning",
                 "--max-messages", "1", "--value-format", "avro").ok()
    assert out.stdout == '{"name":"ok","age":null}\n'


def test_unreadable_records_stop_or_are_skipped(registry: RegistryBrokerProcess) -> None:
    topic = unique("mixed")
    moldau("produce", "-b", registry.bootstrap, "--topic", topic, stdin="not framed\n").ok()
    moldau("produce", *_args(registry), "--topic", topic, "--value-format", "avro",
           "--property", f"value.schema={USER}", stdin='{"name": "x", "age": null}\n').ok()
    common = ["consume", *_args(registry), "--topic", topic, "--from-beginning",
              "--value-format", "avro"]
    stop, skip = moldau_many([*common, "--max-messages", "2"],
                             [*common, "--max-messages", "2", "--skip-message-on-error"])
    assert "magic byte" in stop.failed(1).stderr and stop.stdout == ""
    assert skip.ok().stdout == '{"name":"x","age":null}\n'
    assert "skipping" in skip.stderr and "offset 0" in skip.stderr


def test_protobuf_from_proto_text(registry: RegistryBrokerProcess, sr: ConfluentClient) -> None:
    topic = unique("proto")
    proto = ('syntax = "proto3"; package clitest; '
             "message Header { string id = 1; } "
             "message Reading { string sensor_name = 1; double value = 2; "
             "repeated int32 counts = 3; }")
    moldau("produce", *_args(registry), "--topic", topic, "--value-format", "protobuf",
           "--property", f"value.schema={proto}",
           "--property", "value.schema.full.name=clitest.Reading",
           stdin='{"sensorName": "s1", "value": 2.5, "counts": [1, 2]}\n'
                 '{"sensor_name": "s2"}\n').ok()
    plain, names = moldau_many(
        ["consume", *_args(registry), "--topic", topic, "--from-beginning",
         "--max-messages", "2", "--value-format", "protobuf"],
        ["consume", *_args(registry), "--topic", topic, "--from-beginning",
         "--max-messages", "2", "--value-format", "protobuf",
         "--property", "preserve.json.field.name=true"])
    assert plain.ok().stdout.splitlines() == [
        '{"sensorName":"s1","value":2.5,"counts":[1,2]}',
        '{"sensorName":"s2","value":0.0,"counts":[]}']
    assert names.ok().stdout.splitlines()[0] == (
        '{"sensor_name":"s1","value":2.5,"counts":[1,2]}')
    # confluent-kafka reads the records with a class of the registered schema
    schema = sr.get_latest_version(f"{topic}-value").schema
    fetched = sr.get_schema(sr.get_latest_version(f"{topic}-value").schema_id, fmt="serialized")
    proto_file = descriptor_pb2.FileDescriptorProto()
    proto_file.ParseFromString(base64.b64decode(fetched.schema_str))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto_file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("clitest.Reading"))
    first = _raw(registry, topic, 1)[0]
    read = ProtobufDeserializer(cls, {"use.deprecated.format": False},
                                schema_registry_client=sr)(
        first.value(), SerializationContext(topic, MessageField.VALUE))
    assert (read.sensor_name, read.value, list(read.counts)) == ("s1", 2.5, [1, 2])
    assert schema.schema_type == "PROTOBUF"


def test_json_schema_values(registry: RegistryBrokerProcess) -> None:
    topic = unique("jsonschema")
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}},
                         "required": ["n"]})
    moldau("produce", *_args(registry), "--topic", topic, "--value-format", "json-schema",
           "--property", f"value.schema={schema}", stdin='{"n": 1}\n{"n": 2, "x": "é"}\n').ok()
    bad = moldau("produce", *_args(registry), "--topic", topic, "--value-format", "json-schema",
                 "--property", f"value.schema={schema}", stdin='{"m": 1}\n')
    assert "'n' is a required property" in bad.failed(1).stderr
    out = moldau("consume", *_args(registry), "--topic", topic, "--from-beginning",
                 "--max-messages", "2", "--value-format", "json-schema").ok()
    assert out.stdout.splitlines() == ['{"n":1}', '{"n":2,"x":"é"}']
