"""What every schema-registry serializer and deserializer shares, whatever the schema type.

A serializer finds the schema id for a record's subject the way Confluent's serializers do:

* ``use.schema.id`` set: that schema (looked up under the subject) is written with;
* ``use.latest.version`` true: the subject's latest version is written with;
* otherwise its own schema, registered under the subject when ``auto.register.schemas`` is
  true (the default) or looked up there when it is false (a schema that is not registered
  fails with the registry's 40401 subject not found or 40403 schema not found);

then frames the encoded record with that id (:mod:`.wire`). A deserializer reads the id from
the frame and fetches the writer's schema by id (cached: ids never change); with
``use.latest.version`` the subject's latest version is the reader's schema.

Both work synchronously with a :class:`~moldau.registry.client.SchemaRegistryClient`
(``serialize``/``deserialize``) and inside an event loop with an
:class:`~moldau.registry.client.AsyncSchemaRegistryClient` (``serialize_async``/
``deserialize_async``). Resolved ids and parsed schemas are cached in the serde, so after the
first record of a subject neither touches the network (``use.latest.version`` asks again when
the client's ``cache.latest.ttl.sec`` has passed).
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ..client import (
    AsyncSchemaRegistryClient,
    RegisteredSchema,
    RegistryClient,
    Schema,
    SchemaRegistryClient,
)
from .strategies import strategy_from_config
from .wire import Frame, SerializationError, frame, parse_frame

T = TypeVar("T")

SERIALIZER_DEFAULTS: dict[str, Any] = {
    "auto.register.schemas": True,
    "normalize.schemas": False,
    "use.schema.id": None,
    "use.latest.version": False,
    "subject.name.strategy": None,
}
DESERIALIZER_DEFAULTS: dict[str, Any] = {
    "use.latest.version": False,
    "subject.name.strategy": None,
}


def as_bool(value: Any, key: str) -> bool:
    """A boolean setting given as a bool or as text (``true``/``false``, any case)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise SerializationError(f"{key} must be true or false, not {value!r}")


def merge_conf(defaults: Mapping[str, Any], conf: Mapping[str, Any] | None,
               what: str) -> dict[str, Any]:
    """``conf`` over ``defaults``; unknown keys are an error (as in Confluent's serdes)."""
    merged = dict(defaults)
    for key, value in (conf or {}).items():
        if key not in defaults:
            raise SerializationError(f"unknown {what} setting {key!r} (known: "
                                     f"{', '.join(sorted(defaults))})")
        merged[key] = value
    return merged


@dataclass(frozen=True)
class Target:
    """What a subject's records are written with: the schema id and the parsed schema."""

    schema_id: int
    writer: Any
    expires: float | None = None  # monotonic time (use.latest.version with a TTL)


class Serde:
    """Holds the registry client: async, or sync (then cache misses run on its loop)."""

    schema_type: ClassVar[str] = "AVRO"

    def __init__(self, client: RegistryClient, is_key: bool) -> None:
        if isinstance(client, SchemaRegistryClient):
            self._aio: AsyncSchemaRegistryClient = client.aio
            self._sync_client: SchemaRegistryClient | None = client
        elif isinstance(client, AsyncSchemaRegistryClient):
            self._aio = client
            self._sync_client = None
        else:
            raise TypeError("a schema registry serde needs a moldau SchemaRegistryClient or "
                            f"AsyncSchemaRegistryClient, not {type(client).__name__}")
        self.is_key = is_key
        self._parsed: dict[Schema, Any] = {}

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._sync_client is None:
            coro.close()
            raise RuntimeError(f"{type(self).__name__} was given an async registry client: "
                               "use the *_async methods, or give it a SchemaRegistryClient")
        return self._sync_client.run(coro)

    async def referenced(self, schema: Schema, fmt: str | None = None
                         ) -> list[tuple[str, Schema]]:
        """The schemas ``schema`` references, transitively, dependencies first, each once:
        (reference name, schema)."""
        found: list[tuple[str, Schema]] = []
        seen: set[tuple[str, int]] = set()

        async def walk(current: Schema) -> None:
            for ref in current.references:
                if (ref.subject, ref.version) in seen:
                    continue
                seen.add((ref.subject, ref.version))
                version = await self._aio.get_version(ref.subject, ref.version, fmt=fmt)
                await walk(version.schema)
                found.append((ref.name, version.schema))

        await walk(schema)
        return found

    async def parsed(self, schema: Schema) -> Any:
        """``schema`` parsed for this type, its references resolved (cached)."""
        found = self._parsed.get(schema)
        if found is None:
            found = await self.parse(schema)
            self._parsed[schema] = found
        return found

    async def parse(self, schema: Schema) -> Any:  # pragma: no cover - abstract
        """Parse ``schema`` (fetching its references); the type's parsed form."""
        raise NotImplementedError


class BaseSerializer(Serde):
    """Confluent's serializer logic; subclasses parse schemas and encode records."""

    fetch_format: ClassVar[str | None] = None

    def __init__(self, client: RegistryClient, schema: Schema | None,
                 conf: Mapping[str, Any] | None, is_key: bool,
                 extra_defaults: Mapping[str, Any] | None = None) -> None:
        super().__init__(client, is_key)
        self.conf = merge_conf({**SERIALIZER_DEFAULTS, **(extra_defaults or {})}, conf,
                               f"{type(self).__name__}")
        self.schema = schema
        self.auto_register = as_bool(self.conf["auto.register.schemas"],
                                     "auto.register.schemas")
        self.normalize = as_bool(self.conf["normalize.schemas"], "normalize.schemas")
        self.use_latest = as_bool(self.conf["use.latest.version"], "use.latest.version")
        use_id = self.conf["use.schema.id"]
        self.use_schema_id = None if use_id in (None, "", -1, "-1") else int(use_id)
        self.strategy = strategy_from_config(self.conf["subject.name.strategy"])
        self._targets: dict[str, Target] = {}

    # --- subclass hooks ------------------------------------------------------------------

    def record_name(self, obj: Any) -> str | None:
        """The name RecordNameStrategy uses (the schema's name by default)."""
        return None

    async def own_schema(self, obj: Any) -> Schema:
        """The schema to register or look up for ``obj`` (the one configured by default)."""
        if self.schema is None:
            raise SerializationError(f"{type(self).__name__} has no schema: give one, or set "
                                     "use.latest.version or use.schema.id")
        return self.schema

    async def writer_schema(self, schema_id: int, own: Schema) -> Schema:
        """The schema to parse for writing once ``own`` has id ``schema_id`` (``own``)."""
        return own

    def encode(self, writer: Any, obj: Any) -> bytes:  # pragma: no cover - abstract
        """The payload of ``obj`` written with the parsed schema ``writer``."""
        raise NotImplementedError

    def from_json(self, writer: Any, text: str) -> Any:  # pragma: no cover - abstract
        """A record from its JSON form (Avro's JSON encoding, JSON, protobuf's JSON)."""
        raise NotImplementedError

    def message_indexes(self, writer: Any, obj: Any) -> list[int] | None:
        """Protobuf's message indexes; None for the other types."""
        return None

    # --- resolution ----------------------------------------------------------------------

    def subject(self, topic: str, obj: Any) -> str:
        subject = self.strategy(topic, self.is_key, self.record_name(obj))
        if subject is None:
            raise SerializationError("the subject name strategy found no subject: the schema "
                                     "has no name (use TopicNameStrategy for it)")
        return subject

    def _cached(self, subject: str) -> Target | None:
        target = self._targets.get(subject)
        if target is None or (target.expires is not None and target.expires < time.monotonic()):
            return None
        return target

    async def resolve(self, subject: str, obj: Any) -> Target:
        """The schema id and writer schema of ``subject`` (asks the registry; cached)."""
        target = self._cached(subject)
        if target is not None:
            return target
        fmt = self.fetch_format
        expires = None
        if self.use_schema_id is not None:
            schema = await self._aio.get_schema(self.use_schema_id, subject, fmt)
            registered = await self._aio.lookup_schema(subject, schema, deleted=True)
        elif self.use_latest:
            registered = await self._aio.get_latest_version(subject, fmt)
            ttl = self._aio.latest_ttl_s
            expires = None if ttl is None else time.monotonic() + ttl
        else:
            own = await self.own_schema(obj)
            if self.auto_register:
                registered = await self._aio.register_schema_full_response(
                    subject, own, self.normalize)
            else:
                registered = await self._aio.lookup_schema(subject, own, self.normalize)
            registered = RegisteredSchema(registered.schema_id,
                                          await self.writer_schema(registered.schema_id, own),
                                          subject, registered.version)
        target = Target(registered.schema_id, await self.parsed(registered.schema), expires)
        self._targets[subject] = target
        return target

    # --- the API -------------------------------------------------------------------------

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        """``obj`` framed for ``topic`` (None stays None: a tombstone). Sync client only."""
        if obj is None:
            return None
        subject = self.subject(topic, obj)
        target = self._cached(subject) or self._wait(self.resolve(subject, obj))
        return self._frame(target, obj)

    async def serialize_async(self, topic: str, obj: Any) -> bytes | None:
        """As :meth:`serialize`, in the async client's event loop."""
        if obj is None:
            return None
        target = await self.resolve(self.subject(topic, obj), obj)
        return self._frame(target, obj)

    def serialize_json(self, topic: str, text: str) -> bytes:
        """A record given in its JSON form, framed. Sync client only."""
        subject = self.subject(topic, None)
        target = self._cached(subject) or self._wait(self.resolve(subject, None))
        return self._frame(target, self.from_json(target.writer, text))

    async def serialize_json_async(self, topic: str, text: str) -> bytes:
        """A record given in its JSON form (as the console producers read it), framed."""
        target = await self.resolve(self.subject(topic, None), None)
        return self._frame(target, self.from_json(target.writer, text))

    def __call__(self, topic: str, obj: Any) -> bytes | None:
        return self.serialize(topic, obj)

    def _frame(self, target: Target, obj: Any) -> bytes:
        payload = self.encode(target.writer, obj)
        return frame(target.schema_id, payload, self.message_indexes(target.writer, obj))


class BaseDeserializer(Serde):
    """Confluent's deserializer logic; subclasses parse schemas and decode payloads."""

    fetch_format: ClassVar[str | None] = None
    protobuf_frame: ClassVar[bool] = False

    def __init__(self, client: RegistryClient, conf: Mapping[str, Any] | None, is_key: bool,
                 extra_defaults: Mapping[str, Any] | None = None,
                 reader: Schema | None = None) -> None:
        super().__init__(client, is_key)
        self.conf = merge_conf({**DESERIALIZER_DEFAULTS, **(extra_defaults or {})}, conf,
                               f"{type(self).__name__}")
        self.reader = reader  # a fixed reader schema (Avro), parsed on first use
        self._fixed_reader: Any = None
        self.use_latest = as_bool(self.conf["use.latest.version"], "use.latest.version")
        self.strategy = strategy_from_config(self.conf["subject.name.strategy"])
        self._writers: dict[int, Any] = {}
        self._readers: dict[str, Target] = {}

    def decode(self, writer: Any, reader: Any | None, frame: Frame) -> Any:  # pragma: no cover
        """The record in ``frame``'s payload, written with ``writer``, read as ``reader``
        (None: as written)."""
        raise NotImplementedError

    def writer_name(self, writer: Any, frame: Frame) -> str | None:
        """The record name of a writer schema (for RecordNameStrategy subjects)."""
        return None

    def to_json(self, schema: Any, obj: Any) -> str:  # pragma: no cover - abstract
        """The JSON form of a decoded record (``schema``: the one it was decoded as)."""
        raise NotImplementedError

    async def writer(self, schema_id: int) -> Any:
        """The parsed writer schema of id ``schema_id`` (cached)."""
        found = self._writers.get(schema_id)
        if found is None:
            schema = await self._aio.get_schema(schema_id, fmt=self.fetch_format)
            found = await self.parsed(schema)
            self._writers[schema_id] = found
        return found

    def _reader_subject(self, topic: str, writer: Any, fr: Frame) -> str:
        subject = self.strategy(topic, self.is_key, self.writer_name(writer, fr))
        if subject is None:
            raise SerializationError("use.latest.version: the subject name strategy found no "
                                     "subject for this record")
        return subject

    async def _schemas(self, topic: str, fr: Frame) -> tuple[Any, Any]:
        """(writer, reader) of a frame, asking the registry for what is not cached."""
        writer = await self.writer(fr.schema_id)
        if self.reader is not None and self._fixed_reader is None:
            self._fixed_reader = await self.parsed(self.reader)
        if not self.use_latest:
            return writer, self._fixed_reader
        subject = self._reader_subject(topic, writer, fr)
        target = self._readers.get(subject)
        if target is None or (target.expires is not None and target.expires < time.monotonic()):
            latest = await self._aio.get_latest_version(subject, self.fetch_format)
            ttl = self._aio.latest_ttl_s
            target = Target(latest.schema_id, await self.parsed(latest.schema),
                            None if ttl is None else time.monotonic() + ttl)
            self._readers[subject] = target
        return writer, target.writer

    def _cached_schemas(self, topic: str, fr: Frame) -> tuple[Any, Any] | None:
        """(writer, reader) when the serde has both already; None otherwise."""
        writer = self._writers.get(fr.schema_id)
        if writer is None or (self.reader is not None and self._fixed_reader is None):
            return None
        if not self.use_latest:
            return writer, self._fixed_reader
        target = self._readers.get(self._reader_subject(topic, writer, fr))
        if target is None or (target.expires is not None and target.expires < time.monotonic()):
            return None
        return writer, target.writer

    def reader_schema(self) -> Any:
        """The fixed reader schema, parsed (its references fetched); None without one.
        Sync client only."""
        if self.reader is not None and self._fixed_reader is None:
            self._fixed_reader = self._wait(self.parsed(self.reader))
        return self._fixed_reader

    def schemas(self, topic: str, data: bytes) -> tuple[Frame, Any, Any]:
        """The frame of ``data``, its writer schema and the reader schema (None: read as
        written), parsed; the registry is asked only on a cache miss. Sync client only."""
        fr = parse_frame(data, protobuf=self.protobuf_frame)
        writer, reader = self._cached_schemas(topic, fr) or self._wait(self._schemas(topic, fr))
        return fr, writer, reader

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        """The record in ``data`` (None stays None). Sync client only."""
        if data is None:
            return None
        fr = parse_frame(data, protobuf=self.protobuf_frame)
        schemas = self._cached_schemas(topic, fr) or self._wait(self._schemas(topic, fr))
        return self.decode(schemas[0], schemas[1], fr)

    async def deserialize_async(self, topic: str, data: bytes | None) -> Any:
        """As :meth:`deserialize`, in the async client's event loop."""
        if data is None:
            return None
        fr = parse_frame(data, protobuf=self.protobuf_frame)
        schemas = self._cached_schemas(topic, fr) or await self._schemas(topic, fr)
        return self.decode(schemas[0], schemas[1], fr)

    async def deserialize_json_async(self, topic: str, data: bytes) -> str:
        """The record in ``data`` in its JSON form (as the console consumers print it)."""
        fr = parse_frame(data, protobuf=self.protobuf_frame)
        writer, reader = self._cached_schemas(topic, fr) or await self._schemas(topic, fr)
        return self.to_json(reader if reader is not None else writer,
                            self.decode(writer, reader, fr))

    def __call__(self, topic: str, data: bytes | None) -> Any:
        return self.deserialize(topic, data)
