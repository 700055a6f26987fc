"""The seam between the registry core and the schema types.

The core resolves references (subject + version -> schema text) and hands the texts to
:func:`parse_schema`; everything it needs afterwards goes through :class:`ParsedSchema`:
``canonical()`` is the text it stores and answers, ``identity()`` decides "the same schema"
for id reuse and lookup, ``formatted(fmt)`` answers ``?format=...``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")

_NO_REFERENCES: Mapping[str, str] = MappingProxyType({})

# schema type -> module with a ``parse(text, references, *, normalize) -> ParsedSchema``
_MODULES = {
    "AVRO": "moldau.registry.schemas.avro",
    "JSON": "moldau.registry.schemas.json_schema",
    "PROTOBUF": "moldau.registry.schemas.protobuf",
}


class InvalidSchemaError(Exception):
    """The schema text does not parse or is not a valid schema of its type (-> 42201)."""


@dataclass(frozen=True)
class Reference:
    """A schema reference as Confluent's API carries it.

    ``name`` is the import name: the protobuf file name, the Avro full name of the referenced
    type, or the JSON Schema ``$ref`` URL.
    """

    name: str
    subject: str
    version: int


@runtime_checkable
class ParsedSchema(Protocol):
    """A schema parsed and validated by its type's library."""

    schema_type: str  # "AVRO" | "JSON" | "PROTOBUF"

    def canonical(self) -> str:
        """The text stored and answered (Confluent's canonical string of the parsed schema)."""
        ...

    def normalized(self) -> str:
        """The text stored with ``?normalize=true``: the same meaning gives the same text."""
        ...

    def identity(self) -> str:
        """What "the same schema" means for id reuse and lookup (compare for equality)."""
        ...

    def serialized(self) -> str:
        """PROTOBUF: the base64 FileDescriptorProto (``format=serialized``); others: canonical."""
        ...

    def formatted(self, fmt: str) -> str:
        """The text answered for ``?format=fmt`` ("" or "default": canonical).

        Raises ValueError for a format this schema type does not have.
        """
        ...

    def backward_messages(
        self, previous: ParsedSchema, *, reader: str = "new", writer: str = "old"
    ) -> list[str]:
        """Why this schema (the reader) cannot read data written with ``previous`` (the
        writer); empty when it can. ``reader``/``writer`` name the two schemas in the messages
        (Confluent's "new"/"old"). ``moldau.registry.compatibility`` builds the levels on this:
        FORWARD is ``previous.backward_messages(new, reader="old", writer="new")``."""
        ...


class BaseSchema:
    """What the schema types share (each implements ``ParsedSchema`` on it): the canonical
    and the normalized text, set by the subclass; the canonical text is the identity and,
    unless the type has others, the answer of every format. Two schemas of different types
    are never compatible; between two of the same type the type's own rules decide
    (:meth:`_backward`)."""

    schema_type: str
    _canonical: str
    _normalized: str

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> str:
        return self._normalized

    def identity(self) -> str:
        """The canonical text: Confluent reuses an id for the same canonical string."""
        return self._canonical

    def serialized(self) -> str:
        """The canonical text where the type has no serialized form."""
        return self._canonical

    def formatted(self, fmt: str) -> str:
        """The canonical text, whatever the format, as Confluent answers formats a type does
        not have."""
        return self._canonical

    def backward_messages(
        self, previous: ParsedSchema, *, reader: str = "new", writer: str = "old"
    ) -> list[str]:
        """As :meth:`ParsedSchema.backward_messages`."""
        if not isinstance(previous, type(self)):
            return ["Incompatible because of different schema type"]
        return self._backward(previous, reader, writer)

    def _backward(self, previous: Any, reader: str, writer: str) -> list[str]:
        """Why this schema cannot read data written with ``previous`` (of this type)."""
        raise NotImplementedError


def load_json(text: str, what: str) -> Any:
    """The JSON of a schema text (Avro, JSON Schema); InvalidSchemaError naming ``what``
    otherwise, also for NaN and Infinity, which Python's parser would take."""

    def reject_constant(name: str) -> Any:
        raise InvalidSchemaError(f"Invalid {what}: {name} is not JSON")

    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidSchemaError(f"Invalid {what}: not JSON: {exc}") from exc


def fill_labels(template: str, reader: str, writer: str) -> str:
    """Put the reader's and the writer's labels into the first and second ``%s`` of a message
    template (Confluent's messages say "the new schema ... the old schema")."""
    first = template.replace("%s", reader, 1)
    return first.replace("%s", writer, 1)


def parse_schema(
    schema_type: str,
    text: str,
    references: Mapping[str, str] = _NO_REFERENCES,
    *,
    normalize: bool = False,
) -> ParsedSchema:
    """Parse and validate ``text`` as a schema of ``schema_type``.

    ``references`` maps import name -> schema text of the referenced version, as resolved by
    the core, including the references of references (transitively). PROTOBUF text may be
    ``.proto`` source or a base64 FileDescriptorProto (what confluent-kafka registers). With
    ``normalize`` the returned schema's ``canonical()`` is its normalized form.

    Raises InvalidSchemaError for text that is not a valid schema (and for an unknown type).
    """
    module_name = _MODULES.get(schema_type.upper()) if isinstance(schema_type, str) else None
    if module_name is None:
        raise InvalidSchemaError(
            f"unknown schema type {schema_type!r}: expected one of {', '.join(SCHEMA_TYPES)}"
        )
    module = importlib.import_module(module_name)
    parsed: ParsedSchema = module.parse(text, references, normalize=normalize)
    return parsed
