"""Protobuf compatibility as Confluent checks it (``protobuf/diff/SchemaDiff``): the previous
schema is the original, the new one the update, and every difference not in the compatible
set makes the pair incompatible.

- Incompatible: the package changed; a message removed; a field's kind changed (scalar/enum,
  message, map); a scalar's wire group changed (varint int32/int64/uint32/uint64/bool/enum,
  zigzag sint32/sint64, string/bytes, fixed32/sfixed32, fixed64/sfixed64, float, double); a
  numeric field's label changed (optional/required/repeated, where both have one); a message
  field's type changed (by name relative to its package, or because the named type changed
  incompatibly, compared recursively); a required field added or removed; a field removed from
  a oneof that survives; several fields moved into one oneof, or a field moved into an
  existing oneof.
- Compatible: messages added or moved, enums and enum constants added, removed or renamed,
  fields added or removed (not required), renamed, a string/bytes label change, oneofs added
  or removed, a oneof field added or moved out to the top level.

Messages are Confluent's ``{errorType:"FIELD_KIND_CHANGED", description:"The type of a field
at path '#/Order/2' in the new schema does not match the old schema"}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from google.protobuf import descriptor_pb2

from moldau.registry.schemas.base import fill_labels
from moldau.registry.schemas.protobuf_printer import scalar_name

if TYPE_CHECKING:
    from moldau.registry.schemas.protobuf import ProtobufSchema

F = descriptor_pb2.FieldDescriptorProto

COMPATIBLE_CHANGES = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED",
    "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED",
    "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED",
    "ONEOF_REMOVED", "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
})

_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{path}' in the %s schema does not match the package "
    "in the %s schema",
    "MESSAGE_REMOVED": "The %s schema is missing a MESSAGE type at path '{path}' in the %s "
    "schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the %s schema does not "
    "match the %s schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}' in the %s schema "
    "does not match its kind in the %s schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}' in the %s schema "
    "does not match its type in the %s schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}' in the %s "
    "schema does not match its label in the %s schema",
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the %s schema is missing in "
    "the %s schema",
    "REQUIRED_FIELD_REMOVED": "The %s schema is missing a required field at path: '{path}' in "
    "the %s schema",
    "ONEOF_FIELD_REMOVED": "The %s schema is missing a oneof field at path '{path}' in the %s "
    "schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the %s "
    "schema are outside a oneof in the %s schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the %s schema is "
    "outside an existing oneof in the %s schema",
}

_SCALAR_KINDS = {
    "int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER",
    "uint64": "GENERAL_NUMBER", "bool": "GENERAL_NUMBER", "sint32": "SIGNED_NUMBER",
    "sint64": "SIGNED_NUMBER", "string": "STRING_OR_BYTES", "bytes": "STRING_OR_BYTES",
    "fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64", "sfixed64": "FIXED64",
    "float": "FLOAT", "double": "DOUBLE",
}


@dataclass(frozen=True)
class Difference:
    """One difference between the original and the update."""

    kind: str
    path: str

    def message(self, reader: str, writer: str) -> str:
        """Confluent's text of this difference."""
        template = _DESCRIPTIONS.get(self.kind, "").replace("{path}", self.path)
        return f'{{errorType:"{self.kind}", description:"{fill_labels(template, reader, writer)}"}}'


@dataclass
class _TypeInfo:
    package: str
    proto: descriptor_pb2.DescriptorProto | descriptor_pb2.EnumDescriptorProto
    syntax: str

    @property
    def is_enum(self) -> bool:
        return isinstance(self.proto, descriptor_pb2.EnumDescriptorProto)


def _type_table(schema: ProtobufSchema) -> dict[str, _TypeInfo]:
    table: dict[str, _TypeInfo] = {}

    def add(prefix: str, msg: descriptor_pb2.DescriptorProto, package: str, syntax: str) -> None:
        name = f"{prefix}.{msg.name}" if prefix else msg.name
        table[name] = _TypeInfo(package, msg, syntax)
        for enum in msg.enum_type:
            table[f"{name}.{enum.name}"] = _TypeInfo(package, enum, syntax)
        for nested in msg.nested_type:
            add(name, nested, package, syntax)

    for fdp in schema.files.values():
        syntax = fdp.syntax or "proto2"
        for msg in fdp.message_type:
            add(fdp.package, msg, fdp.package, syntax)
        for enum in fdp.enum_type:
            full = f"{fdp.package}.{enum.name}" if fdp.package else enum.name
            table[full] = _TypeInfo(fdp.package, enum, syntax)
    return table


@dataclass
class _Context:
    original_types: dict[str, _TypeInfo]
    update_types: dict[str, _TypeInfo]
    original_syntax: str
    update_syntax: str
    path: list[str] = field(default_factory=list)
    visiting: set[int] = field(default_factory=set)
    diffs: list[Difference] = field(default_factory=list)

    def add(self, kind: str, *extra: str) -> None:
        self.diffs.append(Difference(kind, "#/" + "/".join([*self.path, *extra])))

    def sub(self, local_name: str) -> _Context:
        return _Context(self.original_types, self.update_types, self.original_syntax,
                        self.update_syntax, local_name.split("."), set(self.visiting))

    @property
    def compatible(self) -> bool:
        return all(diff.kind in COMPATIBLE_CHANGES for diff in self.diffs)


def differences(original: ProtobufSchema, update: ProtobufSchema) -> list[Difference]:
    """Every difference from ``original`` to ``update`` (compatible ones included)."""
    old, new = original.descriptor, update.descriptor
    ctx = _Context(_type_table(original), _type_table(update), old.syntax or "proto2",
                   new.syntax or "proto2")
    if old.package != new.package:
        ctx.add("PACKAGE_CHANGED")
    _compare_types(ctx, list(old.message_type), list(old.enum_type),
                   list(new.message_type), list(new.enum_type))
    return ctx.diffs


def diff_messages(
    original: ProtobufSchema, update: ProtobufSchema, *, reader: str = "new",
    writer: str = "old",
) -> list[str]:
    """Confluent's messages for the incompatible differences (empty: compatible)."""
    seen: set[Difference] = set()
    result = []
    for diff in differences(original, update):
        if diff.kind not in COMPATIBLE_CHANGES and diff not in seen:
            seen.add(diff)
            result.append(diff.message(reader, writer))
    return result


def _messages(
    messages: list[descriptor_pb2.DescriptorProto],
    parent: descriptor_pb2.DescriptorProto | None,
) -> dict[str, tuple[int, descriptor_pb2.DescriptorProto]]:
    """Messages by name with their index, map entries and groups left out (they are fields
    in ``.proto`` text)."""
    groups = {f.type_name.rsplit(".", 1)[-1] for f in parent.field
              if f.type == F.TYPE_GROUP} if parent is not None else set()
    result = {}
    index = 0
    for msg in messages:
        if msg.options.map_entry or msg.name in groups:
            continue
        result[msg.name] = (index, msg)
        index += 1
    return result


def _compare_types(
    ctx: _Context,
    original_messages: list[descriptor_pb2.DescriptorProto],
    original_enums: list[descriptor_pb2.EnumDescriptorProto],
    update_messages: list[descriptor_pb2.DescriptorProto],
    update_enums: list[descriptor_pb2.EnumDescriptorProto],
    original_parent: descriptor_pb2.DescriptorProto | None = None,
    update_parent: descriptor_pb2.DescriptorProto | None = None,
) -> None:
    old = _messages(original_messages, original_parent)
    new = _messages(update_messages, update_parent)
    for name in sorted(old.keys() | new.keys()):
        ctx.path.append(name)
        if name not in new:
            ctx.add("MESSAGE_REMOVED")
        elif name not in old:
            ctx.add("MESSAGE_ADDED")
        else:
            _compare_message(ctx, old[name][1], new[name][1])
            if old[name][0] != new[name][0]:
                ctx.add("MESSAGE_MOVED")
        ctx.path.pop()
    old_enums = {e.name for e in original_enums}
    new_enums = {e.name for e in update_enums}
    for name in sorted(old_enums ^ new_enums):
        ctx.add("ENUM_REMOVED" if name in old_enums else "ENUM_ADDED", name)


@dataclass
class _Fields:
    by_number: dict[int, descriptor_pb2.FieldDescriptorProto]
    oneof_of: dict[int, str]  # field number -> oneof name (real oneofs only)
    oneofs: dict[str, list[int]]


def _collect(msg: descriptor_pb2.DescriptorProto) -> _Fields:
    fields = _Fields({}, {}, {})
    for f in msg.field:
        fields.by_number[f.number] = f
        if f.HasField("oneof_index") and not f.proto3_optional:
            name = msg.oneof_decl[f.oneof_index].name
            fields.oneof_of[f.number] = name
            fields.oneofs.setdefault(name, []).append(f.number)
    return fields


def _compare_message(
    ctx: _Context, original: descriptor_pb2.DescriptorProto,
    update: descriptor_pb2.DescriptorProto,
) -> None:
    if id(original) not in ctx.visiting:
        ctx.visiting.add(id(original))
        try:
            _compare_fields(ctx, original, update)
        finally:
            ctx.visiting.discard(id(original))
    _compare_types(ctx, list(original.nested_type), list(original.enum_type),
                   list(update.nested_type), list(update.enum_type), original, update)


def _compare_fields(
    ctx: _Context, original: descriptor_pb2.DescriptorProto,
    update: descriptor_pb2.DescriptorProto,
) -> None:
    old, new = _collect(original), _collect(update)
    deleted_oneofs = {
        name for name, numbers in old.oneofs.items()
        if name not in new.oneofs and not any(n in new.by_number for n in numbers)
    }
    for name, numbers in new.oneofs.items():
        origins = set()
        moved_in = 0
        for number in numbers:
            if number in old.oneof_of:
                origins.add("oneof:" + old.oneof_of[number])
            elif number in old.by_number:
                origins.add(f"field:{number}")
                moved_in += 1
        if len(origins) > 1:
            ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1
                    else "FIELD_MOVED_TO_EXISTING_ONEOF", name)
    for name in sorted(old.oneofs.keys() | new.oneofs.keys()):
        if name not in new.oneofs:
            ctx.add("ONEOF_REMOVED", name)
        elif name not in old.oneofs:
            ctx.add("ONEOF_ADDED", name)
    for number in sorted(old.by_number.keys() | new.by_number.keys()):
        before, after = old.by_number.get(number), new.by_number.get(number)
        old_oneof, new_oneof = old.oneof_of.get(number), new.oneof_of.get(number)
        if after is None:
            assert before is not None
            if old_oneof is not None:
                if old_oneof not in deleted_oneofs:
                    ctx.add("ONEOF_FIELD_REMOVED", old_oneof, str(number))
            else:
                ctx.add("REQUIRED_FIELD_REMOVED" if before.label == F.LABEL_REQUIRED
                        else "FIELD_REMOVED", str(number))
        elif before is None:
            if new_oneof is not None:
                ctx.add("ONEOF_FIELD_ADDED", new_oneof, str(number))
            else:
                ctx.add("REQUIRED_FIELD_ADDED" if after.label == F.LABEL_REQUIRED
                        else "FIELD_ADDED", str(number))
        else:
            if old_oneof is not None and new_oneof is None:
                ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", str(number))
            scope = [new_oneof, str(number)] if new_oneof is not None else [str(number)]
            ctx.path.extend(scope)
            _compare_field(ctx, original, update, before, after,
                           old_oneof is not None, new_oneof is not None)
            del ctx.path[-len(scope):]


# A field type: ("scalar", name) | ("enum", full name) | ("message", full name)
# | ("map", key type, value type)
_FieldType = tuple


def _field_type(
    f: descriptor_pb2.FieldDescriptorProto, msg: descriptor_pb2.DescriptorProto,
    types: dict[str, _TypeInfo],
) -> _FieldType:
    scalar = scalar_name(f.type)
    if scalar is not None:
        return ("scalar", scalar)
    full = f.type_name.removeprefix(".")
    info = types.get(full)
    if info is not None and info.is_enum:
        return ("enum", full)
    if info is not None and isinstance(info.proto, descriptor_pb2.DescriptorProto) \
            and info.proto.options.map_entry:
        key, value = info.proto.field[0], info.proto.field[1]
        return ("map", _field_type(key, info.proto, types), _field_type(value, info.proto, types))
    return ("message", full)


def _label(f: descriptor_pb2.FieldDescriptorProto, syntax: str, in_oneof: bool,
           is_map: bool) -> str | None:
    """The label Confluent's model (Wire) gives a field: None where the text has none."""
    if in_oneof or is_map:
        return None
    if f.label == F.LABEL_REPEATED:
        return "repeated"
    if f.label == F.LABEL_REQUIRED:
        return "required"
    if syntax == "proto2" or f.proto3_optional:
        return "optional"
    return None


def _compare_field(
    ctx: _Context, original_msg: descriptor_pb2.DescriptorProto,
    update_msg: descriptor_pb2.DescriptorProto, before: descriptor_pb2.FieldDescriptorProto,
    after: descriptor_pb2.FieldDescriptorProto, old_in_oneof: bool, new_in_oneof: bool,
) -> None:
    if before.name != after.name:
        ctx.add("FIELD_NAME_CHANGED")
    old_type = _field_type(before, original_msg, ctx.original_types)
    new_type = _field_type(after, update_msg, ctx.update_types)
    old_label = _label(before, ctx.original_syntax, old_in_oneof, old_type[0] == "map")
    new_label = _label(after, ctx.update_syntax, new_in_oneof, new_type[0] == "map")
    _compare_labels_and_types(ctx, old_label, new_label, old_type, new_type)


def _kind(field_type: _FieldType) -> str:
    return {"scalar": "SCALAR", "enum": "SCALAR", "map": "MAP"}.get(field_type[0], "MESSAGE")


def _scalar_kind(field_type: _FieldType) -> str:
    return "GENERAL_NUMBER" if field_type[0] == "enum" else _SCALAR_KINDS[field_type[1]]


def _compare_labels_and_types(
    ctx: _Context, old_label: str | None, new_label: str | None, old_type: _FieldType,
    new_type: _FieldType,
) -> None:
    kind = _kind(old_type)
    if kind != _kind(new_type):
        ctx.add("FIELD_KIND_CHANGED")
    elif kind == "SCALAR":
        scalar = _scalar_kind(old_type)
        if scalar != _scalar_kind(new_type):
            ctx.add("FIELD_SCALAR_KIND_CHANGED")
        elif old_label is not None and new_label is not None and old_label != new_label:
            ctx.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED" if scalar == "STRING_OR_BYTES"
                    else "FIELD_NUMERIC_LABEL_CHANGED")
    elif kind == "MAP":
        _compare_labels_and_types(ctx, None, None, old_type[1], new_type[1])
        _compare_labels_and_types(ctx, None, None, old_type[2], new_type[2])
    else:
        _compare_message_types(ctx, old_type[1], new_type[1])


def _compare_message_types(ctx: _Context, old_name: str, new_name: str) -> None:
    old_info, new_info = ctx.original_types.get(old_name), ctx.update_types.get(new_name)
    if old_info is None or new_info is None:
        if old_name != new_name:
            ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    old_local = _local(old_name, old_info.package)
    new_local = _local(new_name, new_info.package)
    if old_local != new_local:
        ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    assert isinstance(old_info.proto, descriptor_pb2.DescriptorProto)
    assert isinstance(new_info.proto, descriptor_pb2.DescriptorProto)
    sub = ctx.sub(old_local)
    _compare_message(sub, old_info.proto, new_info.proto)
    ctx.diffs.extend(sub.diffs)
    if not sub.compatible:
        ctx.add("FIELD_NAMED_TYPE_CHANGED")


def _local(full: str, package: str) -> str:
    return full[len(package) + 1:] if package and full.startswith(package + ".") else full
