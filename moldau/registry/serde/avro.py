"""Avro serializer and deserializer (fastavro), byte for byte as Confluent's.

The payload is Avro binary without a container header (``schemaless_writer``), except for a
schema that is just ``"bytes"``: Confluent's serializers (Java's and confluent-kafka's) write
such a value's bytes as they are, and read them back the same way, so this does too.
References (named types defined in other subjects) are fetched and parsed first.

:func:`to_avro_json` and :func:`from_avro_json` are Avro's JSON encoding (a union value is
``{"type name": value}``, bytes are ISO-8859-1 text), which Confluent's console tools read and
print.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import fastavro
from fastavro import json_reader, json_writer, schemaless_reader, schemaless_writer
from fastavro.schema import SchemaParseException

from ..client import RegistryClient, Schema
from .base import BaseDeserializer, BaseSerializer, as_bool
from .wire import Frame, SerializationError


def load_schema_text(text: str) -> Any:
    """An Avro schema's JSON; a bare primitive name (``string``) is accepted as Confluent's
    serializers accept it."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as exc:
        if stripped.isidentifier():
            return stripped
        raise SerializationError(f"the Avro schema is not valid JSON: {exc}") from None


def parse_avro(text: str, named: dict[str, Any] | None = None) -> Any:
    """fastavro's parsed form of ``text`` (``named``: types defined by references)."""
    try:
        return fastavro.parse_schema(load_schema_text(text), named_schemas=named)
    except (SchemaParseException, ValueError, TypeError, KeyError) as exc:
        raise SerializationError(f"invalid Avro schema: {exc}") from exc


def schema_name(parsed: Any) -> str | None:
    """The name RecordNameStrategy uses: a named type's full name, ``{"type": T}``'s ``T``."""
    if isinstance(parsed, dict):
        name = parsed.get("name", parsed.get("type"))
        return name if isinstance(name, str) else None
    return None


def _is_bytes(parsed: Any) -> bool:
    return parsed == "bytes" or (isinstance(parsed, dict) and parsed.get("type") == "bytes"
                                 and "logicalType" not in parsed)


def encode_avro(parsed: Any, obj: Any) -> bytes:
    """``obj`` as Avro binary (a ``"bytes"`` schema's value as it is, as Confluent's)."""
    if _is_bytes(parsed):
        if isinstance(obj, str):
            return obj.encode("utf-8")
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return bytes(obj)
        raise SerializationError(f"the schema is bytes; got {type(obj).__name__}")
    out = io.BytesIO()
    try:
        schemaless_writer(out, parsed, obj)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        raise SerializationError(f"the record does not match the Avro schema: {exc}") from exc
    return out.getvalue()


def decode_avro(writer: Any, reader: Any | None, payload: bytes,
                return_record_name: bool = False, **options: bool) -> Any:
    """The record in ``payload`` written with ``writer``, resolved to ``reader``
    (``options``: more of fastavro's ``schemaless_reader`` flags, e.g. return_named_type)."""
    if _is_bytes(writer):
        return payload
    try:
        return schemaless_reader(io.BytesIO(payload), writer, reader,
                                 return_record_name=return_record_name, **options)
    except (EOFError, ValueError, TypeError, KeyError, IndexError, StopIteration) as exc:
        raise SerializationError(f"cannot decode the Avro payload: "
                                 f"{exc.__class__.__name__}: {exc}") from exc
    except fastavro.read.SchemaResolutionError as exc:
        raise SerializationError(f"the writer's schema cannot be read as the reader's: "
                                 f"{exc}") from exc


def to_avro_json(parsed: Any, obj: Any) -> str:
    """``obj`` in Avro's JSON encoding, compact (as Confluent's console consumer prints)."""
    out = io.StringIO()
    try:
        json_writer(out, parsed, [obj])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SerializationError(f"the record does not match the Avro schema: {exc}") from exc
    return json.dumps(json.loads(out.getvalue()), separators=(",", ":"), ensure_ascii=False)


def from_avro_json(parsed: Any, text: str) -> Any:
    """A record from Avro's JSON encoding (what Confluent's console producer reads)."""
    try:
        records = list(json_reader(io.StringIO(text), parsed))
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        raise SerializationError(f"the JSON does not match the Avro schema: "
                                 f"{exc.__class__.__name__}: {exc}") from exc
    if len(records) != 1:
        raise SerializationError(f"expected one JSON record, found {len(records)}")
    return records[0]


class _AvroParsing:
    """Parsing with references, shared by the serializer and the deserializer."""

    async def parse(self, schema: Schema) -> Any:
        named: dict[str, Any] = {}
        for _name, ref in await self.referenced(schema):  # type: ignore[attr-defined]
            parse_avro(ref.schema_str, named)
        return parse_avro(schema.schema_str, named)


def avro_declaration(text: str) -> str:
    """The text confluent-kafka registers: a primitive declaration (``"string"``, or a bare
    ``string``) becomes ``{"type":"string"}``; anything else is left as it is."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        return stripped
    if stripped.isidentifier():
        stripped = f'"{stripped}"'
    return '{"type":' + stripped + "}"


def _avro_schema(schema: str | Schema | None) -> Schema | None:
    if schema is None or isinstance(schema, Schema):
        return schema
    return Schema(avro_declaration(schema), "AVRO")


class AvroSerializer(_AvroParsing, BaseSerializer):
    """Avro records (dicts, or values of primitive schemas) to Confluent-framed Avro binary.

    ``conf``: ``auto.register.schemas`` (true), ``normalize.schemas`` (false),
    ``use.schema.id``, ``use.latest.version`` (false), ``subject.name.strategy``
    (TopicNameStrategy); see :mod:`.base` and :mod:`.strategies`.
    """

    schema_type = "AVRO"

    def __init__(self, client: RegistryClient, schema: str | Schema | None = None,
                 conf: Mapping[str, Any] | None = None, *, is_key: bool = False) -> None:
        super().__init__(client, _avro_schema(schema), conf, is_key)
        # Parsed here (without references) only to name the subject; references are
        # resolved when the schema is first used.
        self._name: str | None = None
        if self.schema is not None and not self.schema.references:
            self._name = schema_name(parse_avro(self.schema.schema_str))
        elif self.schema is not None:
            loaded = load_schema_text(self.schema.schema_str)
            if isinstance(loaded, dict) and isinstance(loaded.get("name"), str):
                name, space = loaded["name"], loaded.get("namespace")
                self._name = f"{space}.{name}" if space and "." not in name else name

    def record_name(self, obj: Any) -> str | None:
        return self._name

    def encode(self, writer: Any, obj: Any) -> bytes:
        return encode_avro(writer, obj)

    def from_json(self, writer: Any, text: str) -> Any:
        return from_avro_json(writer, text)


class AvroDeserializer(_AvroParsing, BaseDeserializer):
    """Confluent-framed Avro binary to records (dicts), with the writer's schema from the
    registry. ``schema`` (optional) is the reader's schema: records are resolved to it, as
    Avro's schema resolution rules say. ``conf``: ``use.latest.version``,
    ``subject.name.strategy``, ``return.record.name`` (unions of records as (name, value))."""

    schema_type = "AVRO"

    def __init__(self, client: RegistryClient, schema: str | Schema | None = None,
                 conf: Mapping[str, Any] | None = None, *, is_key: bool = False) -> None:
        super().__init__(client, conf, is_key, {"return.record.name": False},
                         reader=_avro_schema(schema))
        self.return_record_name = as_bool(self.conf["return.record.name"],
                                          "return.record.name")

    def writer_name(self, writer: Any, frame: Frame) -> str | None:
        return schema_name(writer)

    def decode(self, writer: Any, reader: Any | None, frame: Frame) -> Any:
        return decode_avro(writer, reader, frame.payload, self.return_record_name)

    def to_json(self, schema: Any, obj: Any) -> str:
        return to_avro_json(schema, obj)
