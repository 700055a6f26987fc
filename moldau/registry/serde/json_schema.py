"""JSON Schema serializer and deserializer (jsonschema), byte for byte as confluent-kafka's.

The payload is the record as compact UTF-8 JSON (``{"a":1}``: no spaces, non-ASCII text as
it is), validated against the schema before it is written and, by default, after it is read
(``validate``). The validator is the one the schema's ``$schema`` names (draft 4, 6, 7,
2019-09 or 2020-12; draft 7 when it names none). References become resources under their
names, so a ``$ref`` to a reference's name resolves to the referenced schema; nothing is
fetched from the network.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.validators import validator_for
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT7

from ..client import RegistryClient, Schema
from .base import BaseDeserializer, BaseSerializer, as_bool
from .wire import Frame, SerializationError


@dataclass(frozen=True)
class ParsedJsonSchema:
    """A JSON Schema, its validator (references resolved) and its title."""

    schema: Any
    validator: Any

    @property
    def title(self) -> str | None:
        title = self.schema.get("title") if isinstance(self.schema, dict) else None
        return title if isinstance(title, str) else None

    def validate(self, obj: Any) -> None:
        try:
            self.validator.validate(obj)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path)
            raise SerializationError(f"the record does not match the JSON Schema"
                                     f"{' at ' + where if where else ''}: {exc.message}"
                                     ) from exc
        except Unresolvable as exc:
            raise SerializationError(f"the JSON Schema has an unresolvable $ref: {exc}") from exc


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SerializationError(f"the JSON Schema is not valid JSON: {exc}") from None


def parse_json_schema(text: str, references: list[tuple[str, str]] | None = None
                      ) -> ParsedJsonSchema:
    """``text`` checked against its meta-schema, with a validator that resolves
    ``references`` ((name, schema text)) by name."""
    schema = _load(text)
    registry: Registry = Registry()
    for name, ref_text in references or ():
        resource = Resource.from_contents(_load(ref_text), default_specification=DRAFT7)
        registry = registry.with_resource(name, resource)
    cls = validator_for(schema, default=jsonschema.Draft7Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SerializationError(f"invalid JSON Schema: {exc.message}") from exc
    return ParsedJsonSchema(schema, cls(schema, registry=registry))


def encode_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON, as confluent-kafka writes it."""
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"the record cannot be written as JSON: {exc}") from exc


class _JsonParsing:
    async def parse(self, schema: Schema) -> ParsedJsonSchema:
        refs = [(name, ref.schema_str)
                for name, ref in await self.referenced(schema)]  # type: ignore[attr-defined]
        return parse_json_schema(schema.schema_str, refs)


def _json_schema(schema: str | Schema | None) -> Schema | None:
    if schema is None or isinstance(schema, Schema):
        return schema
    return Schema(schema, "JSON")


class JSONSerializer(_JsonParsing, BaseSerializer):
    """JSON-compatible values to Confluent-framed JSON, validated against the schema.

    ``conf``: the common settings (:mod:`.base`) and ``validate`` (true). The record name of
    RecordNameStrategy is the schema's ``title``.
    """

    schema_type = "JSON"

    def __init__(self, client: RegistryClient, schema: str | Schema | None = None,
                 conf: Mapping[str, Any] | None = None, *, is_key: bool = False) -> None:
        super().__init__(client, _json_schema(schema), conf, is_key, {"validate": True})
        self.validate = as_bool(self.conf["validate"], "validate")
        loaded = None if self.schema is None else _load(self.schema.schema_str)
        title = loaded.get("title") if isinstance(loaded, dict) else None
        self._title = title if isinstance(title, str) else None

    def record_name(self, obj: Any) -> str | None:
        return self._title

    def encode(self, writer: ParsedJsonSchema, obj: Any) -> bytes:
        if self.validate:
            writer.validate(obj)
        return encode_json(obj)

    def from_json(self, writer: ParsedJsonSchema, text: str) -> Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise SerializationError(f"not valid JSON: {exc}") from None


class JSONDeserializer(_JsonParsing, BaseDeserializer):
    """Confluent-framed JSON to Python values, validated against the writer's schema (or the
    subject's latest with ``use.latest.version``). ``conf``: ``validate`` (true),
    ``use.latest.version``, ``subject.name.strategy``."""

    schema_type = "JSON"

    def __init__(self, client: RegistryClient, conf: Mapping[str, Any] | None = None, *,
                 is_key: bool = False) -> None:
        super().__init__(client, conf, is_key, {"validate": True})
        self.validate = as_bool(self.conf["validate"], "validate")

    def writer_name(self, writer: ParsedJsonSchema, frame: Frame) -> str | None:
        return writer.title

    def to_json(self, schema: ParsedJsonSchema, obj: Any) -> str:
        return encode_json(obj).decode("utf-8")

    def decode(self, writer: ParsedJsonSchema, reader: ParsedJsonSchema | None,
               frame: Frame) -> Any:
        try:
            obj = json.loads(frame.payload)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SerializationError(f"the payload is not JSON: {exc}") from exc
        if self.validate:
            (reader or writer).validate(obj)
        return obj
