"""Embedded formats of API v2: the JSON in requests and answers <-> the bytes in Kafka.

==========  ==============================================================================
binary      base64 text <-> the bytes as they are
json        any JSON <-> its compact UTF-8 text (as Jackson's KafkaJsonSerializer writes it)
avro        Avro's JSON encoding (a union value is ``{"type": value}``) <-> Confluent-framed
            Avro binary, schema from the registry (:mod:`moldau.registry.serde`)
jsonschema  JSON validated against its JSON Schema <-> Confluent-framed JSON
protobuf    protobuf's JSON mapping <-> Confluent-framed Protobuf (the schema's first
            message)
==========  ==============================================================================

The schema formats take ``key_schema``/``value_schema`` (text, registered under
``<topic>-key``/``<topic>-value`` when not there yet) or ``key_schema_id``/
``value_schema_id`` (a schema registered under that subject). Failures answer Confluent's
codes: 42201/42202 (data without its schema), 42205 (a schema that does not parse), 42207
(the registry refused or was unreachable), 42203 (JSON that does not fit its schema).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moldau.http import HttpError
from moldau.registry.client import AsyncSchemaRegistryClient, Schema, SchemaRegistryError
from moldau.registry.serde import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationError,
    frame,
)
from moldau.registry.serde.base import BaseDeserializer, BaseSerializer, Target

from .. import errors

FORMATS = ("binary", "json", "avro", "jsonschema", "protobuf")
SCHEMA_TYPES = {"avro": "AVRO", "jsonschema": "JSON", "protobuf": "PROTOBUF"}
#: the registry's own "invalid schema" code (it parsed the schema and refused it)
REGISTRY_INVALID_SCHEMA = 42201


def needs_schema(fmt: str) -> bool:
    return fmt in SCHEMA_TYPES


# --- schema-less formats ----------------------------------------------------------------------

def encode_binary(data: Any) -> bytes | None:
    """base64 text -> bytes (400 naming the data otherwise, as Confluent's proxy answers)."""
    if data is None:
        return None
    if not isinstance(data, str):
        raise errors.bad_request(f"data={_short(data)} is not a base64 string.")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise errors.bad_request(f"data={_short(data)} is not a valid base64 string.") from None


def encode_json(data: Any) -> bytes | None:
    """Any JSON value -> compact UTF-8 JSON text (JSON null: no bytes, a null record part)."""
    if data is None:
        return None
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def decode_binary(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def decode_json(data: bytes | None) -> Any:
    """Bytes written as JSON -> the JSON value (SerializationError when they are not)."""
    if data is None:
        return None
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SerializationError(f"the data is not JSON: {exc}") from exc


def _short(data: Any, limit: int = 60) -> str:
    text = json.dumps(data, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


# --- schema formats ---------------------------------------------------------------------------

@dataclass
class SchemaSide:
    """A key's or value's serializer, resolved: the schema id the records are framed with."""

    serializer: BaseSerializer
    target: Target

    @property
    def schema_id(self) -> int:
        return self.target.schema_id

    def encode(self, data: Any) -> bytes | None:
        """One record's key or value (JSON) framed for Kafka; 42203 when it does not fit."""
        if data is None:
            return None
        try:
            obj = self.serializer.from_json(self.target.writer, json.dumps(data))
            payload = self.serializer.encode(self.target.writer, obj)
            indexes = self.serializer.message_indexes(self.target.writer, obj)
        except (SerializationError, ValueError, TypeError, KeyError) as exc:
            raise errors.unprocessable(f"Conversion of JSON to Object failed: {exc}",
                                       errors.JSON_CONVERSION) from None
        return frame(self.target.schema_id, payload, indexes)


def _serializer(fmt: str, client: AsyncSchemaRegistryClient, text: str | None,
                schema_id: int | None, is_key: bool) -> BaseSerializer:
    conf: dict[str, Any] = {"auto.register.schemas": True}
    if schema_id is not None:
        conf["use.schema.id"] = schema_id
    if fmt == "avro":
        return AvroSerializer(client, text, conf, is_key=is_key)
    if fmt == "jsonschema":
        return JSONSerializer(client, text, conf, is_key=is_key)
    schema = None if text is None else Schema(text, "PROTOBUF")
    return ProtobufSerializer(client, conf=conf, is_key=is_key, schema=schema)


class SchemaCache:
    """Resolved serializers by (format, key or value, topic, schema text or id), so a
    schema is registered or looked up once, not per request (least recently used out)."""

    def __init__(self, client: Callable[[], AsyncSchemaRegistryClient],
                 capacity: int = 256) -> None:
        self._client = client
        self._capacity = capacity
        self._sides: OrderedDict[tuple[Any, ...], SchemaSide] = OrderedDict()

    async def side(self, fmt: str, topic: str, is_key: bool, text: Any,
                   schema_id: Any) -> SchemaSide:
        """The resolved serializer of one side; Confluent's errors for bad schemas."""
        if text is not None and not isinstance(text, str):
            raise errors.unprocessable(
                f"Invalid schema: {'key' if is_key else 'value'}_schema must be a string",
                errors.INVALID_SCHEMA)
        if schema_id is not None and (isinstance(schema_id, bool)
                                      or not isinstance(schema_id, int)):
            raise errors.unprocessable(
                f"{'key' if is_key else 'value'}_schema_id must be an integer")
        cache_key = (fmt, is_key, topic, text, schema_id)
        found = self._sides.get(cache_key)
        if found is not None:
            self._sides.move_to_end(cache_key)
            return found
        side = await self._resolve(fmt, topic, is_key, text, schema_id)
        self._sides[cache_key] = side
        if len(self._sides) > self._capacity:
            self._sides.popitem(last=False)
        return side

    async def _resolve(self, fmt: str, topic: str, is_key: bool, text: str | None,
                       schema_id: int | None) -> SchemaSide:
        try:
            serializer = _serializer(fmt, self._client(), text, schema_id, is_key)
            subject = f"{topic}-{'key' if is_key else 'value'}"
            target = await serializer.resolve(subject, None)
        except SerializationError as exc:
            raise errors.unprocessable(f"Invalid schema: {exc}", errors.INVALID_SCHEMA) from None
        except SchemaRegistryError as exc:
            if exc.error_code == REGISTRY_INVALID_SCHEMA:
                raise errors.unprocessable(f"Invalid schema: {exc.message}",
                                           errors.INVALID_SCHEMA) from None
            raise errors.unprocessable(f"Error serializing message. {exc.message}",
                                       errors.SERIALIZATION) from None
        except (OSError, TimeoutError) as exc:
            raise errors.unprocessable(f"Error serializing message. schema registry "
                                       f"unreachable: {exc}", errors.SERIALIZATION) from None
        return SchemaSide(serializer, target)


def deserializer(fmt: str, client: AsyncSchemaRegistryClient, is_key: bool) -> BaseDeserializer:
    """The deserializer a consumer instance of a schema format reads one side with."""
    if fmt == "avro":
        return AvroDeserializer(client, is_key=is_key)
    if fmt == "jsonschema":
        return JSONDeserializer(client, is_key=is_key)
    return ProtobufDeserializer(client, is_key=is_key)


class RecordDecoder:
    """Kafka bytes -> the JSON a consumer instance of format ``fmt`` answers."""

    def __init__(self, fmt: str, client: Callable[[], AsyncSchemaRegistryClient]) -> None:
        self.fmt = fmt
        self._client = client
        self._sides: dict[bool, BaseDeserializer] = {}

    async def decode(self, topic: str, data: bytes | None, is_key: bool) -> Any:
        """The JSON form of one key or value (SerializationError, SchemaRegistryError or
        OSError when it cannot be read in this format)."""
        if data is None:
            return None
        if self.fmt == "binary":
            return decode_binary(data)
        if self.fmt == "json":
            return decode_json(data)
        side = self._sides.get(is_key)
        if side is None:
            side = self._sides[is_key] = deserializer(self.fmt, self._client(), is_key)
        return json.loads(await side.deserialize_json_async(topic, data))


def check_format(name: Any) -> str:
    """A consumer instance's ``format`` (default binary); 422 for one v2 does not know."""
    if name is None:
        return "binary"
    if isinstance(name, str) and name.lower() in FORMATS:
        return name.lower()
    raise HttpError(422, 422, "Invalid format type.")
