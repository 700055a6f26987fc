"""Protobuf schemas: protoc (grpcio-tools, in-process) compiles ``.proto`` text to
FileDescriptorProtos; a base64 FileDescriptorProto (what confluent-kafka's ProtobufSerializer
registers and fetches with ``format=serialized``) is accepted as well.

Both inputs end in the same place: the main file's descriptor is printed to ``.proto`` text
(``protobuf_printer``) and that text is the canonical form, so a schema registered as text and
as base64 gets the same identity and id. ``serialized()`` is the base64 descriptor of the
canonical text compiled again.

As Confluent's registry (its ``ProtobufSchemaUtils.toString``), the text has no ``syntax``
line when the registered schema declared none: ``.proto`` text without a ``syntax`` statement,
or a base64 descriptor whose ``syntax`` is empty (protoc's proto2 files; confluent-kafka
registers these). Such a file is proto2 and is compiled as such.

Imports resolve from the references (import name -> schema text, ``.proto`` or base64), the
well-known types bundled with grpcio-tools (``google/protobuf/*.proto``), the
``google/type/*.proto`` files of googleapis-common-protos, and Confluent's own
``confluent/meta.proto`` and ``confluent/type/{decimal,variant}.proto`` (clients skip these
"known types" when they register references, so the registry must know them).

protoc reads files, so each parse writes the texts into a private temporary directory that is
removed afterwards; nothing else touches the file system.
"""

from __future__ import annotations

import ast
import atexit
import base64
import binascii
import importlib
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Mapping
from functools import cache, lru_cache
from pathlib import Path

from google.protobuf import descriptor_pb2, unknown_fields
from google.protobuf.message import DecodeError
from grpc_tools import _protoc_compiler, protoc

from moldau.registry.schemas.base import BaseSchema, InvalidSchemaError
from moldau.registry.schemas.protobuf_printer import print_file

MAIN_FILE = "default"  # Confluent's name of a schema's own file
_WELL_KNOWN_DIR = str(Path(protoc.__file__).parent / "_proto")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\r\n]+")
_LOCK = threading.Lock()  # protoc's in-process compiler is not documented as thread-safe
# comments and whitespace, then a syntax or edition statement: a file's first statement
_DECLARATION = re.compile(r"(?:\s|//[^\n]*|/\*.*?\*/)*(?:syntax|edition)\s*=", re.DOTALL)
_PROTO2_LINE = 'syntax = "proto2";\n'

# Confluent's own types (``confluent/*``): message definitions the clients import without
# registering them.
_CONFLUENT_FILES = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;

import "google/protobuf/descriptor.proto";

message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
  repeated Rule rules = 4;
}

message Rule {
  string name = 1;
  string doc = 2;
  string expr = 3;
  string sql = 4;
}

extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;

message Decimal {
  bytes value = 1;
  uint32 precision = 2;
  int32 scale = 3;
}
""",
    "confluent/type/variant.proto": """syntax = "proto3";
package confluent.type;

message Variant {
  bytes metadata = 1;
  bytes value = 2;
}
""",
}
_GOOGLE_TYPES = (
    "calendar_period", "color", "date", "datetime", "dayofweek", "decimal", "expr",
    "fraction", "interval", "latlng", "localized_text", "money", "month", "phone_number",
    "postal_address", "quaternion", "timeofday",
)


def is_known_dependency(name: str) -> bool:
    """Whether the registry resolves the import ``name`` itself (well-known and Confluent
    types), as confluent-kafka's ``_is_builtin`` assumes."""
    return name.startswith(("google/protobuf/", "google/type/", "confluent/"))


@cache
def _known_dir() -> str:
    """A directory with the ``google/type`` and ``confluent`` files (made once per process)."""
    root = tempfile.mkdtemp(prefix="moldau-proto-known-")
    atexit.register(shutil.rmtree, root, True)
    texts = dict(_CONFLUENT_FILES)
    for name in _GOOGLE_TYPES:
        try:
            module = importlib.import_module(f"google.type.{name}_pb2")
        except ImportError:
            continue
        fdp = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        texts[fdp.name] = print_file(fdp, {})
    for name, text in texts.items():
        path = Path(root, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@cache
def _known_descriptors() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Descriptors of every file the registry resolves itself (for printing the custom
    options of a base64 descriptor that imports them)."""
    names = sorted(
        str(path.relative_to(_WELL_KNOWN_DIR))
        for path in Path(_WELL_KNOWN_DIR, "google", "protobuf").glob("*.proto")
    )
    names += sorted(str(path.relative_to(_known_dir()))
                    for path in Path(_known_dir()).rglob("*.proto"))
    aggregate = 'syntax = "proto3";\n' + "".join(f'import "{name}";\n' for name in names)
    files = compile_proto(aggregate, {})
    files.pop(MAIN_FILE, None)
    return files


def _decode_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto of a base64 text, None when the text is not one."""
    stripped = text.strip()
    if not stripped or not _BASE64.fullmatch(stripped):
        return None
    try:
        raw = base64.b64decode(stripped, validate=False)
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    if len(unknown_fields.UnknownFieldSet(fdp)) or not (
        fdp.message_type or fdp.enum_type or fdp.service or fdp.package or fdp.syntax
    ):
        return None
    return fdp


_SERIALIZED_FILE = re.compile(rb"AddSerializedFile\((b'(?:[^'\\]|\\.)*')\)")


@lru_cache(maxsize=256)
def _serialized_file(code: bytes) -> bytes:
    """The serialized FileDescriptorProto in one generated module (``AddSerializedFile``)."""
    match = _SERIALIZED_FILE.search(code)
    if match is None:
        raise InvalidSchemaError("Invalid Protobuf schema: protoc produced no descriptor")
    raw = ast.literal_eval(match.group(1).decode("ascii"))
    assert isinstance(raw, bytes)
    return raw


def _extract_descriptors(
    generated: list[tuple[bytes, bytes]],
) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """The FileDescriptorProtos embedded in protoc's Python output, by file name."""
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for _module, code in generated:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(_serialized_file(code))
        files[fdp.name] = fdp
    return files


def compile_proto(
    text: str, references: Mapping[str, str]
) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Compile ``text`` (file ``default``) with protoc; answer file name -> descriptor of it
    and of everything it imports. ``references`` are ``.proto`` texts by import name."""
    with tempfile.TemporaryDirectory(prefix="moldau-proto-") as work:
        for name, ref_text in references.items():
            path = Path(work, name)
            if not path.resolve().is_relative_to(Path(work).resolve()) or name == MAIN_FILE:
                raise InvalidSchemaError(f"Invalid Protobuf reference name {name!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(ref_text)
        Path(work, MAIN_FILE).write_text(text)
        include = [work.encode(), _known_dir().encode(), _WELL_KNOWN_DIR.encode()]
        try:
            with _LOCK, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                generated = _protoc_compiler.get_protos(MAIN_FILE.encode(), include)
        except _protoc_compiler.ProtocErrors as exc:
            raise InvalidSchemaError(_protoc_message(exc, work)) from exc
    return _extract_descriptors(generated)


def _protoc_message(exc: Exception, work: str) -> str:
    errors = exc.errors() if hasattr(exc, "errors") and callable(exc.errors) else []
    lines = []
    for error in errors:
        name = error.filename.decode() if isinstance(error.filename, bytes) else error.filename
        message = error.message.decode() if isinstance(error.message, bytes) else error.message
        name = name.removeprefix(work + os.sep)
        # protoc counts lines and columns from 0 here
        location = f"{name}:{error.line + 1}:{error.column + 1}" if error.line >= 0 else name
        lines.append(f"{location}: {message}")
    return "Invalid Protobuf schema: " + ("; ".join(lines) or str(exc))


class ProtobufSchema(BaseSchema):
    """A parsed Protobuf schema. Canonical: the ``.proto`` text printed from the compiled
    descriptor, the same for the ``.proto`` and the base64 form; normalized: the text in
    Confluent's normalized order (fields by number, sorted imports...)."""

    schema_type = "PROTOBUF"

    def __init__(
        self,
        files: dict[str, descriptor_pb2.FileDescriptorProto],
        reference_texts: Mapping[str, str],
        normalize: bool,
        declared: bool = True,
    ) -> None:
        main = files[MAIN_FILE]
        printed = print_file(main, files, normalize=normalize)
        # the stored text, compiled again: the same descriptor whichever form came in
        self.files = compile_proto(printed, reference_texts)
        self.descriptor = self.files[MAIN_FILE]
        self.declared = declared
        self._canonical = printed if declared else printed.removeprefix(_PROTO2_LINE)
        self._normalized = (self._canonical if normalize
                            else print_file(main, files, normalize=True))
        if not declared:
            self._normalized = self._normalized.removeprefix(_PROTO2_LINE)

    def serialized(self) -> str:
        """Base64 FileDescriptorProto of the canonical text (``format=serialized``); a proto2
        file that declared its syntax says so (protoc leaves ``syntax`` empty for proto2)."""
        descriptor = self.descriptor
        if self.declared and not descriptor.syntax:
            descriptor = descriptor_pb2.FileDescriptorProto()
            descriptor.CopyFrom(self.descriptor)
            descriptor.syntax = "proto2"
        return base64.b64encode(descriptor.SerializeToString()).decode("ascii")

    def formatted(self, fmt: str) -> str:
        """``serialized``: base64 descriptor; ``default``/empty/others: the canonical text."""
        if fmt.strip().lower() == "serialized":
            return self.serialized()
        return self._canonical

    def _backward(self, previous: ProtobufSchema, reader: str, writer: str) -> list[str]:
        """Confluent's Protobuf rules with ``previous`` as the original and this schema as
        the update."""
        from moldau.registry.schemas.protobuf_compatibility import diff_messages

        return diff_messages(previous, self, reader=reader, writer=writer)

    def __repr__(self) -> str:
        return f"ProtobufSchema({self._canonical!r})"


def _as_proto_text(text: str, name: str,
                   decoded: Mapping[str, descriptor_pb2.FileDescriptorProto]) -> str:
    fdp = _decode_base64(text)
    if fdp is None:
        return text
    fdp.name = name
    return print_file(fdp, {**_known_descriptors(), **decoded})


def parse(
    text: str, references: Mapping[str, str], *, normalize: bool = False
) -> ProtobufSchema:
    """Parse a Protobuf schema: ``.proto`` text or base64 FileDescriptorProto; ``references``
    map import names to texts of either form (references of references included)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchemaError("Invalid Protobuf schema: empty schema")
    decoded: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for name, ref_text in references.items():
        fdp = _decode_base64(ref_text)
        if fdp is not None:
            fdp.name = name
            decoded[name] = fdp
    reference_texts = {
        name: _as_proto_text(ref_text, name, decoded)
        for name, ref_text in references.items()
        if not (is_known_dependency(name) and _is_bundled(name))
    }
    main_text = _as_proto_text(text, MAIN_FILE, decoded)
    files = compile_proto(main_text, reference_texts)
    return ProtobufSchema(files, reference_texts, normalize, declares_syntax(text))


def declares_syntax(text: str) -> bool:
    """Whether a schema (``.proto`` text or base64 descriptor) states its syntax: text that
    opens with a ``syntax``/``edition`` statement, a descriptor with ``syntax`` set."""
    fdp = _decode_base64(text)
    if fdp is not None:
        return bool(fdp.syntax)
    return _DECLARATION.match(text) is not None


def _is_bundled(name: str) -> bool:
    return Path(_WELL_KNOWN_DIR, name).is_file() or Path(_known_dir(), name).is_file()
