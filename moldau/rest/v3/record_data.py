"""The key and value of a v3 produce request, turned into record bytes.

A key or value is ``{"type": ..., "data": ..., "subject", "subject_name_strategy",
"schema_id", "schema_version", "schema"}`` (every field optional):

* ``BINARY``: ``data`` is base64 text (invalid base64 -> 400);
* ``JSON``: ``data`` is any JSON value, written as compact JSON text;
* ``STRING``: ``data`` is a string, written as UTF-8;
* ``AVRO``, ``JSONSCHEMA``, ``PROTOBUF``, or no ``type`` with schema fields or none at all:
  the schema comes from the schema registry (``registry`` of the context): ``schema_id``,
  ``schema_version`` of the subject, ``schema`` (raw text, registered under the subject) or
  else the subject's latest version. The subject is ``subject``, or named by
  ``subject_name_strategy`` (TOPIC_NAME, the default: ``<topic>-key`` / ``<topic>-value``;
  RECORD_NAME and TOPIC_RECORD_NAME use the schema's name, so they need ``schema_id`` or
  ``schema``). ``data`` is the record in JSON (Avro's JSON encoding, JSON, protobuf's JSON
  mapping), framed in Confluent's wire format by :mod:`moldau.registry.serde`.

``data`` null (or absent) makes a null key or value. Problems with the request are
:class:`RecordError` 400 ``Bad Request: ...``; a schema the registry cannot give is
50002 ``Error when fetching ... subject = X`` (Confluent's answer).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from moldau.registry.client import AsyncSchemaRegistryClient, RegisteredSchema, Schema
from moldau.registry.serde import (
    AvroSerializer,
    JSONSerializer,
    ProtobufSerializer,
    SerializationError,
    frame,
)
from moldau.registry.serde.avro import schema_name
from moldau.registry.serde.base import BaseSerializer

from .errors import KAFKA_ERROR, V3Error

PLAIN = ("BINARY", "JSON", "STRING")
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
#: request type -> the registry's schema type
SCHEMA_TYPES = {"AVRO": "AVRO", "JSONSCHEMA": "JSON", "PROTOBUF": "PROTOBUF"}
_REQUEST_TYPE = {v: k for k, v in SCHEMA_TYPES.items()}
_SCHEMA_FIELDS = ("subject", "subject_name_strategy", "schema_id", "schema_version", "schema")
STRATEGIES = ("TOPIC_NAME", "RECORD_NAME", "TOPIC_RECORD_NAME")


class RecordError(V3Error):
    """A key or value that cannot be produced; answered in the record's result."""


def bad(detail: str) -> RecordError:
    """400 ``Bad Request: <detail>`` for one record."""
    return RecordError(400, 400, f"Bad Request: {detail}")


@dataclass(frozen=True)
class Encoded:
    """Record bytes and the ``key``/``value`` part of the produce result."""

    data: bytes | None
    info: dict[str, Any] | None


NOTHING = Encoded(None, None)


def encode_plain(kind: str, data: Any, what: str) -> Encoded:
    """BINARY, JSON or STRING ``data`` as bytes."""
    if data is None:
        return Encoded(None, {"type": kind, "size": 0})
    if kind == "BINARY":
        if not isinstance(data, str):
            raise bad(f"{what}.data of type BINARY must be a base64 string.")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise bad(f"{what}.data is not valid base64: {data[:40]!r}.") from None
    elif kind == "JSON":
        raw = _COMPACT(data).encode()
    else:
        if not isinstance(data, str):
            raise bad(f"{what}.data of type STRING must be a string.")
        raw = data.encode("utf-8")
    return Encoded(raw, {"type": kind, "size": len(raw)})


def needs_registry(part: dict[str, Any]) -> bool:
    """True when the part names no plain type (so its schema comes from the registry)."""
    kind = part.get("type")
    return not (isinstance(kind, str) and kind.upper() in PLAIN)


@dataclass(frozen=True)
class _Target:
    """What one subject's records are written with."""

    request_type: str
    subject: str
    schema_id: int
    version: int | None
    serializer: BaseSerializer
    writer: Any


class SchemaEncoder:
    """Encodes schema-typed keys and values of one topic through the registry."""

    def __init__(self, registry: AsyncSchemaRegistryClient | None,
                 serializers: dict[Any, Any]) -> None:
        self.registry = registry
        self.serializers = serializers  # shared by the application: parsed schemas cached

    def _serializer(self, schema_type: str) -> BaseSerializer:
        found = self.serializers.get(schema_type)
        if found is None:
            assert self.registry is not None
            cls = {"AVRO": AvroSerializer, "JSON": JSONSerializer,
                   "PROTOBUF": ProtobufSerializer}[schema_type]
            found = cls(self.registry)
            self.serializers[schema_type] = found
        return found  # type: ignore[no-any-return]

    async def encode(self, topic: str, part: dict[str, Any], is_key: bool,
                     what: str) -> Encoded:
        """The framed bytes of ``part`` and its result entry."""
        target = await self._target(topic, part, is_key, what)
        info = {"type": target.request_type, "subject": target.subject,
                "schema_id": target.schema_id, "schema_version": target.version, "size": 0}
        data = part.get("data")
        if data is None:
            return Encoded(None, info)
        ser = target.serializer
        try:
            obj = ser.from_json(target.writer, json.dumps(data))
            payload = ser.encode(target.writer, obj)
            raw = frame(target.schema_id, payload, ser.message_indexes(target.writer, obj))
        except SerializationError as exc:
            raise bad(f"{what}.data does not match its schema: {exc}") from None
        info["size"] = len(raw)
        return Encoded(raw, info)

    async def _target(self, topic: str, part: dict[str, Any], is_key: bool,
                      what: str) -> _Target:
        if self.registry is None:
            raise bad(f"{what} has no type of BINARY, JSON or STRING and no schema registry "
                      "is configured (schema.registry.url).")
        kind = part.get("type")
        wanted = None
        if kind is not None:
            if not isinstance(kind, str) or kind.upper() not in SCHEMA_TYPES:
                raise bad(f"{what}.type must be one of BINARY, JSON, STRING, AVRO, "
                          f"JSONSCHEMA, PROTOBUF, not {kind!r}.")
            wanted = SCHEMA_TYPES[kind.upper()]
        fields = {f: part.get(f) for f in _SCHEMA_FIELDS}
        for name in ("schema_id", "schema_version"):
            value = fields[name]
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise bad(f"{what}.{name} must be an integer.")
        raw = fields["schema"]
        if raw is not None and not isinstance(raw, str):
            raise bad(f"{what}.schema must be the schema's text.")
        registered = await self._registered(topic, is_key, fields, wanted or "AVRO", what)
        schema_type = registered.schema.schema_type or "AVRO"
        if wanted is not None and schema_type != wanted:
            raise bad(f"{what}.type is {kind}, but the schema {registered.schema_id} is "
                      f"{_REQUEST_TYPE.get(schema_type, schema_type)}.")
        ser = self._serializer(schema_type)
        schema = registered.schema
        try:
            if schema_type == "PROTOBUF":
                schema = await self.registry.get_schema(registered.schema_id, fmt="serialized")
            writer = await ser.parsed(schema)
        except SerializationError as exc:
            raise bad(f"{what}: the schema {registered.schema_id} cannot be used: "
                      f"{exc}") from None
        return _Target(_REQUEST_TYPE[schema_type], str(registered.subject),
                       registered.schema_id, registered.version, ser, writer)

    async def _registered(self, topic: str, is_key: bool, fields: dict[str, Any],
                          schema_type: str, what: str) -> RegisteredSchema:
        """Ask the registry for the schema the fields name."""
        from moldau.registry.client import SchemaRegistryError

        assert self.registry is not None
        reg = self.registry
        subject = fields["subject"]
        try:
            if fields["schema_id"] is not None:
                schema = await reg.get_schema(fields["schema_id"])
                subject = subject or await self._subject(topic, is_key, fields, schema, what)
                found = await reg.lookup_schema(subject, schema)
                return RegisteredSchema(found.schema_id, schema, subject, found.version)
            if fields["schema"] is not None:
                schema = Schema(fields["schema"], schema_type)
                subject = subject or await self._subject(topic, is_key, fields, schema, what)
                done = await reg.register_schema_full_response(subject, schema)
                if done.version is None:
                    done = await reg.lookup_schema(subject, schema)
                return RegisteredSchema(done.schema_id, schema, subject, done.version)
            subject = subject or await self._subject(topic, is_key, fields, None, what)
            if fields["schema_version"] is not None:
                return await reg.get_version(subject, fields["schema_version"])
            return await reg.get_latest_version(subject)
        except SchemaRegistryError as exc:
            which = ("schema version" if fields["schema_version"] is not None
                     else "schema" if fields["schema_id"] is not None or fields["schema"]
                     else "latest schema version")
            raise RecordError(500, KAFKA_ERROR, f"Error when fetching {which}. subject = "
                                                f"{subject}: {exc}") from None

    async def _subject(self, topic: str, is_key: bool, fields: dict[str, Any],
                       schema: Schema | None, what: str) -> str:
        strategy = fields["subject_name_strategy"] or "TOPIC_NAME"
        if not isinstance(strategy, str) or strategy.upper() not in STRATEGIES:
            raise bad(f"{what}.subject_name_strategy must be one of {', '.join(STRATEGIES)}.")
        strategy = strategy.upper()
        if strategy == "TOPIC_NAME":
            return f"{topic}-{'key' if is_key else 'value'}"
        if schema is None:
            raise bad(f"{what}.subject_name_strategy {strategy} needs schema_id or schema.")
        name = await self._record_name(schema)
        if name is None:
            raise bad(f"{what}: the schema has no name for {strategy}.")
        return name if strategy == "RECORD_NAME" else f"{topic}-{name}"

    async def _record_name(self, schema: Schema) -> str | None:
        kind = schema.schema_type or "AVRO"
        if kind == "PROTOBUF":
            return _first_message(schema.schema_str)
        try:
            parsed = await self._serializer(kind).parsed(schema)
        except SerializationError as exc:
            raise bad(f"the schema cannot be parsed: {exc}") from None
        if kind == "AVRO":
            return schema_name(parsed)
        return parsed.title  # type: ignore[no-any-return]


def _first_message(text: str) -> str | None:
    """The full name of the first message of a Protobuf schema (``.proto`` text or base64),
    the name Confluent's record name strategies use."""
    from moldau.registry.schemas.base import InvalidSchemaError
    from moldau.registry.schemas.protobuf import parse

    try:
        descriptor = parse(text, {}).descriptor
    except InvalidSchemaError as exc:
        raise bad(f"the Protobuf schema cannot be parsed: {exc}") from None
    if not descriptor.message_type:
        return None
    name = descriptor.message_type[0].name
    return f"{descriptor.package}.{name}" if descriptor.package else name
