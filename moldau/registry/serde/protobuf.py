"""Protobuf serializer and deserializer, byte for byte as Confluent's.

Schemas travel as FileDescriptorProtos: the registry answers ``format=serialized`` with the
base64 ``FileDescriptorProto`` of a schema (and of each reference), from which a private
descriptor pool is built (well-known types ``google/protobuf/*.proto`` come from the protobuf
package, as in Confluent's clients). Messages are dynamic (``message_factory``), so any
registered schema can be read without generated code; :func:`message_to_json` and
:func:`message_from_json` convert with protobuf's JSON mapping (``json_format``).

The serializer takes either a generated message class (as confluent-kafka's: its file is
registered as base64 with each imported file registered under its own subject, well-known
types skipped) or a schema (``.proto`` text, as Confluent's console producer registers it)
plus the message's full name (default: the file's first message). The frame carries the
message indexes of the message within its file (:mod:`.wire`).
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import DecodeError, Message

from ..client import RegistryClient, Schema, SchemaReference
from .base import BaseDeserializer, BaseSerializer, as_bool
from .wire import Frame, SerializationError

# Generated modules of the well-known types: importing them puts their files into the default
# pool, where schemas that import them are resolved from.
for _module in ("any_pb2", "api_pb2", "duration_pb2", "empty_pb2", "field_mask_pb2",
                "source_context_pb2", "struct_pb2", "timestamp_pb2", "type_pb2", "wrappers_pb2"):
    importlib.import_module(f"google.protobuf.{_module}")


def is_builtin(file_name: str) -> bool:
    """Files Confluent's clients never register (they ship with every client)."""
    return file_name.startswith(("google/protobuf/", "google/type/", "confluent/"))


def file_proto(text: str) -> descriptor_pb2.FileDescriptorProto:
    """A FileDescriptorProto from its base64 form (``format=serialized``)."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(raw)
    except (binascii.Error, ValueError, DecodeError) as exc:
        raise SerializationError(
            "the Protobuf schema is not a base64 FileDescriptorProto (ask the registry with "
            f"format=serialized): {exc}") from exc
    return proto


def file_proto_base64(file: FileDescriptor) -> str:
    """What confluent-kafka registers for a generated file: its descriptor in base64."""
    return base64.standard_b64encode(file.serialized_pb).decode("ascii")


@dataclass(frozen=True)
class ParsedProtobuf:
    """A schema's file, in its own pool (with everything it imports)."""

    file: FileDescriptor

    def message(self, indexes: Sequence[int]) -> Descriptor:
        """The message at ``indexes`` (top-level index, then nested indexes)."""
        try:
            desc = self.file.message_types_by_name[
                list(self.file.message_types_by_name)[indexes[0]]]
            for index in indexes[1:]:
                desc = desc.nested_types[index]
        except IndexError:
            raise SerializationError(f"message indexes {list(indexes)} point at no message of "
                                     f"{self.file.name}") from None
        return desc

    def find(self, name: str | None) -> Descriptor:
        """A message by full (or, in the file's package, short) name; the first without."""
        if not self.file.message_types_by_name:
            raise SerializationError(f"the Protobuf schema {self.file.name} has no message")
        if name is None:
            return self.message([0])
        package = self.file.package
        for candidate in (name, f"{package}.{name}" if package else name):
            try:
                return self.file.pool.FindMessageTypeByName(candidate)
            except KeyError:
                continue
        raise SerializationError(f"no message {name!r} in the Protobuf schema {self.file.name}")


def build_file(main: descriptor_pb2.FileDescriptorProto,
               dependencies: Sequence[descriptor_pb2.FileDescriptorProto]) -> ParsedProtobuf:
    """``main`` in a new pool with its ``dependencies`` (and well-known types) added first."""
    pool = descriptor_pool.DescriptorPool()
    available = {d.name: d for d in dependencies}
    added: set[str] = set()

    def add(proto: descriptor_pb2.FileDescriptorProto, trail: tuple[str, ...]) -> None:
        if proto.name in added:
            return
        if proto.name in trail:
            raise SerializationError(f"Protobuf imports form a cycle: {' -> '.join(trail)}")
        for dep in proto.dependency:
            if dep in added:
                continue
            if dep in available:
                add(available[dep], (*trail, proto.name))
                continue
            try:
                builtin = descriptor_pool.Default().FindFileByName(dep)
            except KeyError:
                raise SerializationError(f"{proto.name} imports {dep}, which is neither a "
                                         "schema reference nor a well-known type") from None
            known = descriptor_pb2.FileDescriptorProto()
            builtin.CopyToProto(known)
            add(known, (*trail, proto.name))
        try:
            pool.Add(proto)
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"invalid Protobuf schema {proto.name}: {exc}") from exc
        added.add(proto.name)

    add(main, ())
    return ParsedProtobuf(pool.FindFileByName(main.name))


def index_array(desc: Descriptor) -> list[int]:
    """Where ``desc`` is in its file: top-level index, then nested indexes."""
    path: list[int] = []
    current = desc
    while current.containing_type is not None:
        parent = current.containing_type
        path.insert(0, list(parent.nested_types).index(current))
        current = parent
    path.insert(0, list(current.file.message_types_by_name).index(current.name))
    return path


def message_to_json(message: Message, preserve_field_names: bool = False) -> str:
    """Compact protobuf JSON with default values (as Confluent's console consumer prints)."""
    data = json_format.MessageToDict(message, always_print_fields_with_no_presence=True,
                                     preserving_proto_field_name=preserve_field_names)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def message_from_json(desc: Descriptor, data: str | Mapping[str, Any]) -> Message:
    """A dynamic message of type ``desc`` from protobuf JSON (text or a parsed dict)."""
    message = message_factory.GetMessageClass(desc)()
    try:
        if isinstance(data, str):
            json_format.Parse(data, message)
        else:
            json_format.ParseDict(data, message)
    except json_format.ParseError as exc:
        raise SerializationError(f"the JSON does not match {desc.full_name}: {exc}") from exc
    return message


class _ProtobufParsing:
    async def parse(self, schema: Schema) -> ParsedProtobuf:
        refs = await self.referenced(schema, fmt="serialized")  # type: ignore[attr-defined]
        return build_file(file_proto(schema.schema_str),
                          [file_proto(ref.schema_str) for _name, ref in refs])


def _is_base64_proto(text: str) -> bool:
    try:
        file_proto(text)
    except SerializationError:
        return False
    return True


class ProtobufSerializer(_ProtobufParsing, BaseSerializer):
    """Protobuf messages (or, with a schema, dicts/JSON in protobuf's JSON mapping) to
    Confluent-framed Protobuf binary.

    Give either ``msg_type`` (a generated message class; its file and imports are registered
    as confluent-kafka does) or ``schema`` (``.proto`` text or base64, registered as given;
    ``message_name`` picks the message, default the first), or neither with
    ``use.latest.version`` / ``use.schema.id``. ``conf``: the common settings
    (:mod:`.base`), ``skip.known.types`` (true), ``reference.subject.name.strategy``
    (a callable ``(file name) -> subject``; default: the file name).
    """

    schema_type = "PROTOBUF"
    fetch_format = "serialized"

    def __init__(self, client: RegistryClient, msg_type: type[Message] | None = None,
                 conf: Mapping[str, Any] | None = None, *, is_key: bool = False,
                 schema: str | Schema | None = None, message_name: str | None = None) -> None:
        if msg_type is not None and schema is not None:
            raise TypeError("ProtobufSerializer takes msg_type or schema, not both")
        if isinstance(schema, str):
            schema = Schema(schema, "PROTOBUF")
        super().__init__(client, schema, conf, is_key,
                         {"skip.known.types": True, "reference.subject.name.strategy": None})
        self.msg_type = msg_type
        self.message_name = (msg_type.DESCRIPTOR.full_name if msg_type is not None
                             else message_name)
        self.skip_known = as_bool(self.conf["skip.known.types"], "skip.known.types")
        self.ref_subject = self.conf["reference.subject.name.strategy"] or (lambda name: name)
        self._registered_refs: tuple[SchemaReference, ...] | None = None

    def record_name(self, obj: Any) -> str | None:
        if isinstance(obj, Message):
            return str(obj.DESCRIPTOR.full_name)
        return self.message_name

    async def _references(self, file: FileDescriptor) -> list[SchemaReference]:
        """Register (or look up) each imported file under its own subject, depth first."""
        refs = []
        for dep in file.dependencies:
            if self.skip_known and is_builtin(dep.name):
                continue
            schema = Schema(file_proto_base64(dep), "PROTOBUF",
                            tuple(await self._references(dep)))
            subject = self.ref_subject(dep.name)
            if self.auto_register:
                await self._aio.register_schema(subject, schema, self.normalize)
            found = await self._aio.lookup_schema(subject, schema, self.normalize)
            refs.append(SchemaReference(dep.name, subject, int(found.version or 0)))
        return refs

    async def own_schema(self, obj: Any) -> Schema:
        if self.msg_type is None:
            return await super().own_schema(obj)
        if self._registered_refs is None:
            self._registered_refs = tuple(await self._references(self.msg_type.DESCRIPTOR.file))
        return Schema(file_proto_base64(self.msg_type.DESCRIPTOR.file), "PROTOBUF",
                      self._registered_refs)

    async def writer_schema(self, schema_id: int, own: Schema) -> Schema:
        """The writer schema in serialized form: ``.proto`` text is fetched back by id."""
        if _is_base64_proto(own.schema_str):
            return own
        return await self._aio.get_schema(schema_id, fmt="serialized")

    def _message(self, writer: ParsedProtobuf, obj: Any) -> Message:
        if isinstance(obj, Message):
            if self.msg_type is not None and not isinstance(obj, self.msg_type):
                raise SerializationError(f"expected a {self.msg_type.DESCRIPTOR.full_name} "
                                         f"message, got {obj.DESCRIPTOR.full_name}")
            return obj
        desc = (self.msg_type.DESCRIPTOR if self.msg_type is not None
                else writer.find(self.message_name))
        return message_from_json(desc, obj)

    def encode(self, writer: ParsedProtobuf, obj: Any) -> bytes:
        return bytes(self._message(writer, obj).SerializeToString())

    def from_json(self, writer: ParsedProtobuf, text: str) -> Message:
        desc = (self.msg_type.DESCRIPTOR if self.msg_type is not None
                else writer.find(self.message_name))
        return message_from_json(desc, text)

    def message_indexes(self, writer: ParsedProtobuf, obj: Any) -> list[int]:
        if isinstance(obj, Message):
            return index_array(obj.DESCRIPTOR)
        if self.msg_type is not None:
            return index_array(self.msg_type.DESCRIPTOR)
        return index_array(writer.find(self.message_name))


class ProtobufDeserializer(_ProtobufParsing, BaseDeserializer):
    """Confluent-framed Protobuf binary to messages: of ``message_type`` when given (as
    confluent-kafka's), else dynamic messages of the writer's schema (the frame's message
    indexes say which message). ``conf``: ``use.latest.version``, ``subject.name.strategy``.
    """

    schema_type = "PROTOBUF"
    fetch_format = "serialized"
    protobuf_frame = True

    def __init__(self, client: RegistryClient, message_type: type[Message] | None = None,
                 conf: Mapping[str, Any] | None = None, *, is_key: bool = False) -> None:
        super().__init__(client, conf, is_key, {"preserve.json.field.name": False})
        self.message_type = message_type
        self.preserve_field_names = as_bool(self.conf["preserve.json.field.name"],
                                            "preserve.json.field.name")

    def writer_name(self, writer: ParsedProtobuf, frame: Frame) -> str | None:
        return str(writer.message(frame.message_indexes or (0,)).full_name)

    def to_json(self, schema: ParsedProtobuf, obj: Message) -> str:
        return message_to_json(obj, self.preserve_field_names)

    def decode(self, writer: ParsedProtobuf, reader: ParsedProtobuf | None,
               frame: Frame) -> Message:
        if self.message_type is not None:
            message = self.message_type()
        else:
            desc = writer.message(frame.message_indexes or (0,))
            if reader is not None:  # use.latest.version: the same message in the latest file
                desc = reader.find(desc.full_name)
            message = message_factory.GetMessageClass(desc)()
        try:
            message.ParseFromString(frame.payload)
        except DecodeError as exc:
            raise SerializationError(f"cannot decode the Protobuf payload as "
                                     f"{message.DESCRIPTOR.full_name}: {exc}") from exc
        return message
