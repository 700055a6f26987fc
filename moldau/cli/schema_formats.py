"""Schema-registry formats of ``moldau produce`` / ``moldau consume`` (``--value-format``,
``--key-format``), as Confluent's kafka-avro-console-producer / -consumer and their JSON
Schema and Protobuf siblings.

Input lines and output lines are JSON: Avro's JSON encoding for ``avro`` (a union value is
``{"type": value}``), plain JSON for ``json-schema``, protobuf's JSON mapping for
``protobuf``. Properties (``--property``), named as Confluent's tools name them:

==============================  =============================================================
schema.registry.url             the registry (required); ``schema.registry.<key>`` and
                                ``basic.auth.user.info`` configure its client
value.schema                    the schema text (Avro JSON, JSON Schema, ``.proto`` source)
value.schema.file               ... read from a file
value.schema.id                 ... a registered schema, by id
value.refs                      references, JSON ``[{"name":..,"subject":..,"version":..}]``
value.schema.full.name          protobuf: the message to write (default: the first)
value.subject.name.strategy     TopicNameStrategy (default), RecordNameStrategy, ...
auto.register.schemas           register the schema (default true) or only look it up
use.latest.version              write with the subject's latest schema (no schema needed)
normalize.schemas               register normalized (default false)
latest.cache.ttl.sec            how long the latest version is cached (default: forever)
print.schema.ids                consume: print each key's / value's schema id after it
schema.id.separator             consume: between the JSON and the id (default tab)
preserve.json.field.name        consume, protobuf: proto field names instead of lowerCamel
==============================  =============================================================

and ``key.*`` the same for keys (``--key-format``; keys are parsed with ``parse.key=true``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.client import ConsumerRecord
from moldau.registry.client import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaRegistryError,
    config_from_properties,
    references_of,
)
from moldau.registry.serde import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationError,
    schema_id_of,
)
from moldau.registry.serde.base import BaseDeserializer, BaseSerializer

from .common import CliError

FORMATS = ("avro", "json-schema", "protobuf")
SCHEMA_TYPES = {"avro": "AVRO", "json-schema": "JSON", "protobuf": "PROTOBUF"}

_SIDE_KEYS = ("schema", "schema.file", "schema.id", "refs", "schema.full.name",
              "subject.name.strategy")
READER_PROPERTIES = (
    "schema.registry.url", "basic.auth.user.info", "basic.auth.credentials.source",
    "auto.register.schemas", "use.latest.version", "normalize.schemas",
    "latest.cache.ttl.sec", *(f"{side}.{key}" for side in ("key", "value") for key in _SIDE_KEYS),
)
FORMATTER_PROPERTIES = (
    "schema.registry.url", "basic.auth.user.info", "basic.auth.credentials.source",
    "use.latest.version", "latest.cache.ttl.sec", "print.schema.ids", "schema.id.separator",
    "preserve.json.field.name", "key.subject.name.strategy", "value.subject.name.strategy",
)

PRODUCE_EPILOG = (
    "schema registry formats (--value-format / --key-format avro|json-schema|protobuf):\n"
    "  schema.registry.url=URL    the registry (required)\n"
    "  value.schema=TEXT          or value.schema.file=PATH, value.schema.id=ID\n"
    "  value.refs=JSON            references [{\"name\":..,\"subject\":..,\"version\":..}]\n"
    "  auto.register.schemas=true use.latest.version=false normalize.schemas=false\n"
    "  value.subject.name.strategy=TopicNameStrategy|RecordNameStrategy|"
    "TopicRecordNameStrategy\n"
    "  key.* likewise for keys (with parse.key=true)"
)
CONSUME_EPILOG = (
    "schema registry formats (--value-format / --key-format avro|json-schema|protobuf):\n"
    "  schema.registry.url=URL          the registry (required)\n"
    "  print.schema.ids=false           print each schema id after the JSON\n"
    "  schema.id.separator=\\t           between the JSON and the id\n"
    "  preserve.json.field.name=false   protobuf: proto field names, not lowerCamel"
)


def add_format_options(parser: argparse.ArgumentParser) -> None:
    """``--value-format`` and ``--key-format``."""
    group = parser.add_argument_group("schema registry formats")
    group.add_argument("--value-format", choices=FORMATS,
                       help="values are JSON lines in this format, framed for the schema "
                            "registry (needs --property schema.registry.url=...)")
    group.add_argument("--key-format", choices=FORMATS,
                       help="keys likewise (default: keys are plain text)")


def known_properties(args: argparse.Namespace, base: tuple[str, ...],
                     extra: tuple[str, ...]) -> tuple[str, ...]:
    """The --property keys a command takes: the registry's too when a format is given."""
    if args.value_format or args.key_format:
        return (*base, *extra)
    return base


def open_registry(props: Mapping[str, str]) -> AsyncSchemaRegistryClient:
    """The registry client the properties describe (a usage error when they do not)."""
    if not props.get("schema.registry.url"):
        raise CliError("a schema registry format needs --property schema.registry.url=URL "
                       "(e.g. http://localhost:8081)", 2)
    config = config_from_properties(props)
    ttl = props.get("latest.cache.ttl.sec")
    if ttl is not None:
        config["cache.latest.ttl.sec"] = ttl
    try:
        return AsyncSchemaRegistryClient(config)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None


def _side_props(props: Mapping[str, str], side: str) -> dict[str, str]:
    return {key: props[f"{side}.{key}"] for key in _SIDE_KEYS if f"{side}.{key}" in props}


async def _schema(props: Mapping[str, str], side: str, fmt: str,
                  client: AsyncSchemaRegistryClient, latest: bool) -> Schema | None:
    """The schema the properties give for ``side`` (Confluent's order: id, text, file)."""
    own = _side_props(props, side)
    wanted = SCHEMA_TYPES[fmt]
    if "schema.id" in own:
        try:
            schema_id = int(own["schema.id"])
        except ValueError:
            raise CliError(f"Error parsing {side}.schema.id as int: {own['schema.id']!r}",
                           2) from None
        try:
            schema = await client.get_schema(schema_id)
        except SchemaRegistryError as exc:
            raise CliError(f"Error retrieving schema for id {schema_id}: {exc}") from None
        if schema.schema_type != wanted:
            raise CliError(f"schema {schema_id} is a {schema.schema_type} schema, not "
                           f"{wanted} (--{side}-format {fmt})", 2)
        return schema
    if "schema" in own:
        text = own["schema"]
    elif "schema.file" in own:
        try:
            text = Path(own["schema.file"]).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"Error reading schema from {own['schema.file']}: "
                           f"{exc.strerror or exc}", 2) from None
    elif latest:
        return None
    else:
        raise CliError(f"Must provide the {side} schema in either {side}.schema, "
                       f"{side}.schema.id, or {side}.schema.file (or set "
                       "use.latest.version=true)", 2)
    refs = ()
    if "refs" in own:
        try:
            refs = references_of(json.loads(own["refs"]))
        except (ValueError, TypeError) as exc:
            raise CliError(f"{side}.refs must be a JSON list of references: {exc}", 2) from None
    return Schema(text, wanted, refs)


async def make_serializer(fmt: str, side: str, props: Mapping[str, str],
                          client: AsyncSchemaRegistryClient) -> BaseSerializer:
    """The serializer of one side (``key``/``value``) of ``moldau produce``."""
    conf: dict[str, Any] = {
        key: props[key] for key in ("auto.register.schemas", "use.latest.version",
                                    "normalize.schemas") if key in props}
    strategy = props.get(f"{side}.subject.name.strategy")
    if strategy:
        conf["subject.name.strategy"] = strategy
    latest = str(conf.get("use.latest.version", "false")).strip().lower() == "true"
    schema = await _schema(props, side, fmt, client, latest)
    is_key = side == "key"
    try:
        if fmt == "avro":
            return AvroSerializer(client, schema, conf, is_key=is_key)
        if fmt == "json-schema":
            return JSONSerializer(client, schema, conf, is_key=is_key)
        return ProtobufSerializer(client, conf=conf, is_key=is_key, schema=schema,
                                  message_name=props.get(f"{side}.schema.full.name"))
    except SerializationError as exc:
        raise CliError(f"{side} schema: {exc}", 2) from None


def make_deserializer(fmt: str, side: str, props: Mapping[str, str],
                      client: AsyncSchemaRegistryClient) -> BaseDeserializer:
    """The deserializer of one side of ``moldau consume``."""
    conf: dict[str, Any] = {}
    if "use.latest.version" in props:
        conf["use.latest.version"] = props["use.latest.version"]
    strategy = props.get(f"{side}.subject.name.strategy")
    if strategy:
        conf["subject.name.strategy"] = strategy
    is_key = side == "key"
    try:
        if fmt == "avro":
            return AvroDeserializer(client, conf=conf, is_key=is_key)
        if fmt == "json-schema":
            return JSONDeserializer(client, conf, is_key=is_key)
        if "preserve.json.field.name" in props:
            conf["preserve.json.field.name"] = props["preserve.json.field.name"]
        return ProtobufDeserializer(client, conf=conf, is_key=is_key)
    except SerializationError as exc:
        raise CliError(str(exc), 2) from None


def describe(exc: Exception) -> str:
    """One line for a serializer or registry failure."""
    if isinstance(exc, SchemaRegistryError):
        return f"schema registry: {exc.message} (error code {exc.error_code})"
    return str(exc)


@dataclass
class RecordEncoder:
    """Turns the key and value text of an input line into framed bytes."""

    topic: str
    client: AsyncSchemaRegistryClient
    key: BaseSerializer | None = None
    value: BaseSerializer | None = None

    @classmethod
    async def create(cls, args: argparse.Namespace, props: Mapping[str, str]
                     ) -> RecordEncoder | None:
        """The encoder ``--key-format`` / ``--value-format`` ask for (None without both)."""
        if not (args.value_format or args.key_format):
            return None
        client = open_registry(props)
        encoder = cls(args.topic, client)
        try:
            if args.value_format:
                encoder.value = await make_serializer(args.value_format, "value", props,
                                                      client)
            if args.key_format:
                encoder.key = await make_serializer(args.key_format, "key", props, client)
        except BaseException:
            await client.close()
            raise
        return encoder

    async def encode(self, key: bytes | None, value: bytes | None, number: int
                     ) -> tuple[bytes | None, bytes | None]:
        """(key, value) of line ``number`` serialized (a null stays null)."""
        try:
            if self.key is not None and key is not None:
                key = await self.key.serialize_json_async(self.topic, key.decode("utf-8"))
            if self.value is not None and value is not None:
                value = await self.value.serialize_json_async(self.topic,
                                                              value.decode("utf-8"))
        except (SerializationError, SchemaRegistryError, UnicodeDecodeError) as exc:
            raise CliError(f"line {number}: {describe(exc)}") from None
        return key, value

    async def close(self) -> None:
        await self.client.close()


@dataclass
class RecordDecoder:
    """Turns framed keys and values of consumed records into JSON text."""

    client: AsyncSchemaRegistryClient
    key: BaseDeserializer | None = None
    value: BaseDeserializer | None = None
    print_ids: bool = False
    id_separator: bytes = b"\t"

    @classmethod
    def create(cls, args: argparse.Namespace, props: Mapping[str, str]
               ) -> RecordDecoder | None:
        if not (args.value_format or args.key_format):
            return None
        client = open_registry(props)
        decoder = cls(client, print_ids=props.get("print.schema.ids", "").strip().lower()
                      == "true",
                      id_separator=props.get("schema.id.separator", "\t").encode("utf-8"))
        if args.value_format:
            decoder.value = make_deserializer(args.value_format, "value", props, client)
        if args.key_format:
            decoder.key = make_deserializer(args.key_format, "key", props, client)
        return decoder

    async def _one(self, deserializer: BaseDeserializer | None, topic: str,
                   data: bytes | None) -> bytes | None:
        if deserializer is None or data is None:
            return data
        text = (await deserializer.deserialize_json_async(topic, data)).encode("utf-8")
        if self.print_ids:
            text += self.id_separator + str(schema_id_of(data)).encode()
        return text

    async def decode(self, record: ConsumerRecord) -> ConsumerRecord:
        """``record`` with its key and value as JSON text (raises CliError when they are
        not readable)."""
        try:
            return record._replace(
                key=await self._one(self.key, record.topic, record.key),
                value=await self._one(self.value, record.topic, record.value))
        except (SerializationError, SchemaRegistryError) as exc:
            raise CliError(f"cannot read the record at {record.topic}-{record.partition} "
                           f"offset {record.offset}: {describe(exc)}") from None

    async def close(self) -> None:
        await self.client.close()
