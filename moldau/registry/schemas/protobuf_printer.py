"""A FileDescriptorProto -> ``.proto`` text emitter (not a parser: protoc parses).

Confluent answers Protobuf schemas as ``.proto`` text while confluent-kafka registers base64
FileDescriptorProtos, so the registry prints descriptors. The text compiles back to the same
descriptor (the tests check the round trip): message and enum order is kept (message indexes
in Confluent's wire format count messages), fields keep their declaration order with each
oneof written where its first field is, type names are fully qualified (``.pkg.Type``), map
fields print as ``map<K, V>``, proto2 groups inline, comments are gone (descriptors carry
none). Custom options print through a descriptor pool that knows their extensions.

With ``normalize`` the output is Confluent's normalized order: imports sorted, fields by number,
oneofs by their first number, enum values by number, reserved ranges and names sorted,
options sorted by name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    text_encoding,
    text_format,
    unknown_fields,
)
from google.protobuf.descriptor import FieldDescriptor

F = descriptor_pb2.FieldDescriptorProto
MAX_FIELD_NUMBER = 536_870_911

_SCALARS = {
    F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64", F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64",
}
_LABELS = {F.LABEL_OPTIONAL: "optional", F.LABEL_REQUIRED: "required",
           F.LABEL_REPEATED: "repeated"}
_EDITIONS = {
    descriptor_pb2.EDITION_2023: "2023",
    descriptor_pb2.EDITION_2024: "2024",
}


def scalar_name(field_type: int) -> str | None:
    """The ``.proto`` name of a scalar field type, None for message, enum and group."""
    return _SCALARS.get(field_type)


def default_json_name(name: str) -> str:
    """protoc's default json_name: lowerCamelCase of the field name."""
    parts = name.split("_")
    return parts[0] + "".join(part[:1].upper() + part[1:] for part in parts[1:])


class _Options:
    """Renders options messages, custom options (extensions) included: those are unknown
    fields of the options messages until parsed again through a pool holding every file of
    the schema, built on first need."""

    def __init__(self, files: Iterable[descriptor_pb2.FileDescriptorProto]) -> None:
        self.files = list(files)
        self._pool: descriptor_pool.DescriptorPool | None = None
        self._pool_failed = False

    def _get_pool(self) -> descriptor_pool.DescriptorPool | None:
        if self._pool is None and not self._pool_failed:
            pool = descriptor_pool.DescriptorPool()
            if descriptor_pb2.DESCRIPTOR.name not in {f.name for f in self.files}:
                pool.AddSerializedFile(descriptor_pb2.DESCRIPTOR.serialized_pb)
            try:
                for fdp in _dependency_order(self.files):
                    pool.Add(fdp)
            except (TypeError, KeyError, ValueError):
                self._pool_failed = True
                return None
            self._pool = pool
        return self._pool

    def items(self, options: Any) -> list[tuple[str, str]]:
        """(name, value text) of every set option, in field order."""
        if options is None or not options.ByteSize():
            return []
        message = options
        if len(unknown_fields.UnknownFieldSet(options)):
            pool = self._get_pool()
            if pool is not None:
                try:
                    cls = message_factory.GetMessageClass(
                        pool.FindMessageTypeByName(options.DESCRIPTOR.full_name))
                    message = cls.FromString(options.SerializeToString())
                except KeyError:
                    message = options
        result: list[tuple[str, str]] = []
        for field, value in message.ListFields():
            if field.name in ("map_entry", "uninterpreted_option"):
                continue
            name = f"({field.full_name})" if field.is_extension else field.name
            values = value if _is_repeated(field) else [value]
            result.extend((name, _value_text(field, item)) for item in values)
        return result


def _dependency_order(
    files: list[descriptor_pb2.FileDescriptorProto],
) -> Iterator[descriptor_pb2.FileDescriptorProto]:
    by_name = {f.name: f for f in files}
    done: set[str] = set()

    def visit(
        fdp: descriptor_pb2.FileDescriptorProto,
    ) -> Iterator[descriptor_pb2.FileDescriptorProto]:
        if fdp.name in done:
            return
        done.add(fdp.name)
        for dependency in fdp.dependency:
            if dependency in by_name:
                yield from visit(by_name[dependency])
        yield fdp

    for fdp in files:
        yield from visit(fdp)


def _is_repeated(field: FieldDescriptor) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 6; `label` is gone in 7
    if repeated is not None:
        return bool(repeated)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _value_text(field: FieldDescriptor, value: Any) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE or field.type == FieldDescriptor.TYPE_GROUP:
        return "{ " + text_format.MessageToString(value, as_one_line=True) + " }"
    if field.type == FieldDescriptor.TYPE_ENUM:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    if field.type == FieldDescriptor.TYPE_STRING:
        return '"' + text_encoding.CEscape(value, as_utf8=True) + '"'
    if field.type == FieldDescriptor.TYPE_BYTES:
        return '"' + text_encoding.CEscape(value, as_utf8=False) + '"'
    if field.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


class Printer:
    """Prints one FileDescriptorProto; ``files`` are all files of the schema (imports too)."""

    def __init__(
        self,
        fdp: descriptor_pb2.FileDescriptorProto,
        files: Mapping[str, descriptor_pb2.FileDescriptorProto],
        *,
        normalize: bool = False,
    ) -> None:
        self.fdp = fdp
        self.normalize = normalize
        self.options = _Options([fdp, *(f for n, f in files.items() if n != fdp.name)])
        self.syntax = fdp.syntax or "proto2"

    def text(self) -> str:
        """The ``.proto`` text."""
        fdp = self.fdp
        out: list[str] = []
        if self.syntax == "editions":
            out.append(f'edition = "{_EDITIONS.get(fdp.edition, "2023")}";\n')
        else:
            out.append(f'syntax = "{self.syntax}";\n')
        if fdp.package:
            out.append(f"package {fdp.package};\n")
        imports = self._imports()
        if imports:
            out.append("\n")
            out.extend(imports)
        options = self._option_lines(fdp.options if fdp.HasField("options") else None)
        if options:
            out.append("\n")
            out.extend(options)
        for message in fdp.message_type:
            out.append("\n")
            out.extend(self._message(message, ""))
        for enum in fdp.enum_type:
            out.append("\n")
            out.extend(self._enum(enum, ""))
        extends = self._extends(fdp.extension, "")
        if extends:
            out.append("\n")
            out.extend(extends)
        for service in fdp.service:
            out.append("\n")
            out.extend(self._service(service))
        return "".join(out)

    def _imports(self) -> list[str]:
        fdp = self.fdp
        public = set(fdp.public_dependency)
        weak = set(fdp.weak_dependency)
        entries = []
        for index, name in enumerate(fdp.dependency):
            kind = "public " if index in public else "weak " if index in weak else ""
            entries.append(f'import {kind}"{name}";\n')
        return sorted(set(entries)) if self.normalize else entries

    def _option_lines(self, options: Any, indent: str = "") -> list[str]:
        items = self.options.items(options)
        if self.normalize:
            items.sort()
        return [f"{indent}option {name} = {value};\n" for name, value in items]

    def _bracket(self, items: list[tuple[str, str]]) -> str:
        if not items:
            return ""
        if self.normalize:
            items = sorted(items)
        return " [" + ", ".join(f"{name} = {value}" for name, value in items) + "]"

    def _message(self, msg: descriptor_pb2.DescriptorProto, indent: str) -> list[str]:
        inner = indent + "  "
        out = [f"{indent}message {msg.name} {{\n"]
        out.extend(self._message_body(msg, inner))
        out.append(f"{indent}}}\n")
        return out

    def _message_body(self, msg: descriptor_pb2.DescriptorProto, indent: str) -> list[str]:
        out: list[str] = []
        out.extend(self._reserved(msg.reserved_range, msg.reserved_name, indent, exclusive=True))
        out.extend(self._option_lines(msg.options if msg.HasField("options") else None, indent))
        nested = {n.name: n for n in msg.nested_type}
        inlined: set[str] = set()
        printed: set[str] = set()
        out.extend(self._fields(msg, nested, inlined, printed, indent))
        for extension_range in msg.extension_range:
            span = _span(extension_range.start, extension_range.end - 1)
            opts = self.options.items(
                extension_range.options if extension_range.HasField("options") else None)
            out.append(f"{indent}extensions {span}{self._bracket(opts)};\n")
        out.extend(self._extends(msg.extension, indent))
        out.extend(self._nested_before(msg, len(msg.nested_type), inlined, printed, indent))
        for enum in msg.enum_type:
            out.extend(self._enum(enum, indent))
        return out

    def _nested_before(
        self, msg: descriptor_pb2.DescriptorProto, limit: int, inlined: set[str],
        printed: set[str], indent: str,
    ) -> list[str]:
        """The nested messages declared before position ``limit`` of ``nested_type`` not yet
        printed: protoc adds a map field's entry (and a group's type) to ``nested_type`` where
        the field is declared, so nested messages print before such fields to keep the
        descriptor's order (confluent-kafka's message indexes count nested types)."""
        out: list[str] = []
        for child in list(msg.nested_type)[:limit]:
            if (child.name in printed or child.name in inlined or child.options.map_entry
                    or _is_group_type(msg, child.name)):
                continue
            printed.add(child.name)
            out.extend(self._message(child, indent))
        return out

    def _fields(
        self,
        msg: descriptor_pb2.DescriptorProto,
        nested: dict[str, descriptor_pb2.DescriptorProto],
        inlined: set[str],
        printed: set[str],
        indent: str,
    ) -> list[str]:
        real_oneofs = {i for i, f in _oneof_members(msg) if not f.proto3_optional}
        fields = sorted(msg.field, key=lambda f: f.number) if self.normalize else list(msg.field)
        firsts: dict[int, int] = {}
        for f in fields:
            if f.HasField("oneof_index") and f.oneof_index in real_oneofs:
                firsts.setdefault(f.oneof_index, f.number)
        positions = {n.name: i for i, n in enumerate(msg.nested_type)}
        out: list[str] = []
        for f in fields:
            in_oneof = f.HasField("oneof_index") and f.oneof_index in real_oneofs
            if in_oneof and firsts.get(f.oneof_index) != f.number:
                continue
            members = [m for m in fields if in_oneof and m.HasField("oneof_index")
                       and m.oneof_index == f.oneof_index] or [f]
            generated = [positions[m.type_name.rsplit(".", 1)[-1]] for m in members
                         if m.type in (F.TYPE_MESSAGE, F.TYPE_GROUP)
                         and m.type_name.rsplit(".", 1)[-1] in positions
                         and (_map_entry(m, nested) is not None or m.type == F.TYPE_GROUP)]
            if generated and not self.normalize:
                out.extend(self._nested_before(msg, min(generated), inlined, printed, indent))
            if not in_oneof:
                out.extend(self._field(f, nested, inlined, indent, with_label=True))
                continue
            oneof = msg.oneof_decl[f.oneof_index]
            out.append(f"{indent}oneof {oneof.name} {{\n")
            out.extend(self._option_lines(
                oneof.options if oneof.HasField("options") else None, indent + "  "))
            for member in members:
                out.extend(self._field(member, nested, inlined, indent + "  ", with_label=False))
            out.append(f"{indent}}}\n")
        return out

    def _field(
        self,
        f: descriptor_pb2.FieldDescriptorProto,
        nested: dict[str, descriptor_pb2.DescriptorProto],
        inlined: set[str],
        indent: str,
        *,
        with_label: bool,
    ) -> list[str]:
        entry = _map_entry(f, nested)
        label = self._label(f) if with_label and entry is None else ""
        options = self._field_options(f)
        if f.type == F.TYPE_GROUP:
            group = nested[f.type_name.rsplit(".", 1)[-1]]
            inlined.add(group.name)
            lines = [f"{indent}{label}group {group.name} = {f.number}{self._bracket(options)} {{\n"]
            lines.extend(self._message_body(group, indent + "  "))
            lines.append(f"{indent}}}\n")
            return lines
        if entry is not None:
            key, value = entry.field[0], entry.field[1]
            type_text = f"map<{self._type(key)}, {self._type(value)}>"
        else:
            type_text = self._type(f)
        return [f"{indent}{label}{type_text} {f.name} = {f.number}{self._bracket(options)};\n"]

    def _label(self, f: descriptor_pb2.FieldDescriptorProto) -> str:
        if f.label == F.LABEL_REPEATED:
            return "repeated "
        if self.syntax == "proto2":
            return _LABELS[f.label] + " "
        if self.syntax == "proto3" and f.proto3_optional:
            return "optional "
        return ""

    def _type(self, f: descriptor_pb2.FieldDescriptorProto) -> str:
        return _SCALARS.get(f.type) or f.type_name

    def _field_options(self, f: descriptor_pb2.FieldDescriptorProto) -> list[tuple[str, str]]:
        items: list[tuple[str, str]] = []
        if f.HasField("default_value"):
            items.append(("default", self._default(f)))
        if f.HasField("json_name") and f.json_name != default_json_name(f.name):
            items.append(("json_name", '"' + text_encoding.CEscape(f.json_name, True) + '"'))
        items.extend(self.options.items(f.options if f.HasField("options") else None))
        return items

    @staticmethod
    def _default(f: descriptor_pb2.FieldDescriptorProto) -> str:
        if f.type == F.TYPE_STRING:
            return '"' + text_encoding.CEscape(f.default_value, as_utf8=True) + '"'
        if f.type == F.TYPE_BYTES:
            return '"' + f.default_value + '"'  # already C-escaped in the descriptor
        return f.default_value

    def _reserved(
        self, ranges: Iterable[Any], names: Iterable[str], indent: str, *, exclusive: bool
    ) -> list[str]:
        spans = [(r.start, r.end - 1 if exclusive else r.end) for r in ranges]
        names = list(names)
        if self.normalize:
            spans.sort()
            names.sort()
        out: list[str] = []
        if spans:
            text = ", ".join(_span(start, end) for start, end in spans)
            out.append(f"{indent}reserved {text};\n")
        if names:
            quote = "" if self.syntax == "editions" else '"'
            out.append(f"{indent}reserved {', '.join(quote + n + quote for n in names)};\n")
        return out

    def _enum(self, enum: descriptor_pb2.EnumDescriptorProto, indent: str) -> list[str]:
        inner = indent + "  "
        out = [f"{indent}enum {enum.name} {{\n"]
        out.extend(self._reserved(enum.reserved_range, enum.reserved_name, inner,
                                  exclusive=False))
        out.extend(self._option_lines(enum.options if enum.HasField("options") else None, inner))
        values = list(enum.value)
        if self.normalize:
            values.sort(key=lambda v: (v.number, v.name))
        for value in values:
            opts = self.options.items(value.options if value.HasField("options") else None)
            out.append(f"{inner}{value.name} = {value.number}{self._bracket(opts)};\n")
        out.append(f"{indent}}}\n")
        return out

    def _extends(self, extensions: Iterable[descriptor_pb2.FieldDescriptorProto],
                 indent: str) -> list[str]:
        groups: dict[str, list[descriptor_pb2.FieldDescriptorProto]] = {}
        for ext in extensions:
            groups.setdefault(ext.extendee, []).append(ext)
        out: list[str] = []
        for extendee, fields in groups.items():
            if self.normalize:
                fields.sort(key=lambda f: f.number)
            out.append(f"{indent}extend {extendee} {{\n")
            for f in fields:
                out.extend(self._field(f, {}, set(), indent + "  ", with_label=True))
            out.append(f"{indent}}}\n")
        return out

    def _service(self, service: descriptor_pb2.ServiceDescriptorProto) -> list[str]:
        out = [f"service {service.name} {{\n"]
        out.extend(self._option_lines(
            service.options if service.HasField("options") else None, "  "))
        for method in service.method:
            request = ("stream " if method.client_streaming else "") + method.input_type
            response = ("stream " if method.server_streaming else "") + method.output_type
            options = self._option_lines(
                method.options if method.HasField("options") else None, "    ")
            head = f"  rpc {method.name} ({request}) returns ({response})"
            if options:
                out.append(head + " {\n")
                out.extend(options)
                out.append("  }\n")
            else:
                out.append(head + ";\n")
        out.append("}\n")
        return out


def _oneof_members(
    msg: descriptor_pb2.DescriptorProto,
) -> Iterator[tuple[int, descriptor_pb2.FieldDescriptorProto]]:
    for f in msg.field:
        if f.HasField("oneof_index"):
            yield f.oneof_index, f


def _is_group_type(msg: descriptor_pb2.DescriptorProto, name: str) -> bool:
    return any(f.type == F.TYPE_GROUP and f.type_name.rsplit(".", 1)[-1] == name
               for f in msg.field)


def _map_entry(
    f: descriptor_pb2.FieldDescriptorProto, nested: dict[str, descriptor_pb2.DescriptorProto]
) -> descriptor_pb2.DescriptorProto | None:
    if f.type != F.TYPE_MESSAGE or f.label != F.LABEL_REPEATED:
        return None
    entry = nested.get(f.type_name.rsplit(".", 1)[-1])
    if entry is not None and entry.options.map_entry:
        return entry
    return None


def _span(start: int, end: int) -> str:
    if start == end:
        return str(start)
    return f"{start} to {'max' if end >= MAX_FIELD_NUMBER else end}"


def print_file(
    fdp: descriptor_pb2.FileDescriptorProto,
    files: Mapping[str, descriptor_pb2.FileDescriptorProto],
    *,
    normalize: bool = False,
) -> str:
    """The ``.proto`` text of ``fdp``; ``files`` maps file name -> descriptor of everything it
    imports (directly or not), for custom options."""
    return Printer(fdp, files, normalize=normalize).text()
