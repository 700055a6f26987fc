"""Request bodies, path parameters and answer shapes of Confluent's API (pure).

- Subjects: ``:.:name`` (the default context spelled out, as clients may send it) is
  ``name``; other contexts (``:.ctx:name``) are kept as qualified names.
- Versions: a positive int, ``latest`` or ``-1`` (Confluent's ``VersionId``); anything else
  42202.
- Schema requests: ``schema`` (text), ``schemaType`` (AVRO when absent), ``references``,
  and for IMPORT mode ``id`` and ``version``; ``metadata`` and ``ruleSet`` are stored and
  answered as given. Unknown members are ignored (Confluent's ``ignoreUnknown``).
- Answers: ``schemaType`` is left out for AVRO and ``references`` when empty (what
  confluent-kafka and Confluent's own entity serializer do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moldau.http import HttpError

from . import errors
from .records import RecordError, SchemaValue, references_from_json, schema_extras_to_json
from .schemas.base import SCHEMA_TYPES, Reference

DEFAULT_CONTEXT_PREFIX = ":.:"
CONTEXT_WILDCARD = ":*:"
MAX_VERSION = 2**31 - 1


def bad_body(message: str) -> HttpError:
    """A JSON body of the wrong shape: 400 as Confluent's JsonMappingException mapper."""
    return HttpError(400, 400, message)


def normalize_subject(subject: str) -> str:
    """The subject without the default context's ``:.:`` prefix."""
    if subject.startswith(DEFAULT_CONTEXT_PREFIX):
        return subject[len(DEFAULT_CONTEXT_PREFIX):]
    return subject


def is_default_context(subject: str | None) -> bool:
    """``:.:`` alone (the default context itself): config/mode calls mean the global one."""
    return subject is not None and normalize_subject(subject) == ""


def check_subject(subject: str) -> str:
    """A subject name fit to register under (42208 otherwise): not empty, no control
    characters; returned normalized."""
    name = normalize_subject(subject)
    if not name or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise errors.invalid_subject(subject)
    return name


def context_of(subject: str) -> str:
    """``.`` for the default context, else the context of ``:.ctx:name``."""
    if subject.startswith(":.") and subject.count(":") >= 2:
        return subject[1:subject.index(":", 2)]
    return "."


def parse_version(text: str | int) -> int:
    """A version path parameter: 1..2^31-1, or -1 for ``latest``/``-1``; 42202 otherwise."""
    raw = str(text).strip()
    if raw.lower() == "latest":
        return -1
    try:
        version = int(raw)
    except ValueError:
        raise errors.invalid_version(text) from None
    if version == -1 or 1 <= version <= MAX_VERSION:
        return version
    raise errors.invalid_version(text)


def parse_schema_id(text: str) -> int:
    """An id path parameter; not an integer -> 404 (the JAX-RS answer)."""
    try:
        return int(text)
    except ValueError:
        raise HttpError(404, 404, "HTTP 404 Not Found") from None


@dataclass(frozen=True)
class SchemaRequest:
    """The body of register, lookup and compatibility requests."""

    schema: str | None
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    id: int | None = None
    version: int | None = None
    metadata: Any = None
    rule_set: Any = None


def _optional_int(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_body(f"{name} must be an integer, not {value!r}")
    return value


def parse_schema_request(body: Any) -> SchemaRequest:
    """The schema request in a JSON body (400 for the wrong shape, 42201 for an unknown
    schema type)."""
    if not isinstance(body, dict):
        raise bad_body("the request body must be a JSON object with a schema member")
    schema = body.get("schema")
    if schema is not None and not isinstance(schema, str):
        raise bad_body("schema must be a string holding the schema text")
    schema_type = body.get("schemaType") or "AVRO"
    if not isinstance(schema_type, str):
        raise bad_body(f"schemaType must be a string, not {schema_type!r}")
    if schema_type.upper() not in SCHEMA_TYPES:
        raise errors.invalid_schema(f"unknown schema type {schema_type!r}; expected one of "
                                    f"{', '.join(SCHEMA_TYPES)}")
    try:
        references = references_from_json(body.get("references"))
    except RecordError as exc:
        raise bad_body(str(exc)) from None
    for ref in references:
        if ref.version != -1 and not 1 <= ref.version <= MAX_VERSION:
            raise errors.invalid_schema(f"reference {ref.name!r} has version {ref.version}")
    return SchemaRequest(
        schema=schema,
        schema_type=schema_type.upper(),
        references=tuple(Reference(r.name, normalize_subject(r.subject), r.version)
                         for r in references),
        id=_optional_int(body, "id"),
        version=_optional_int(body, "version"),
        metadata=body.get("metadata"),
        rule_set=body.get("ruleSet"),
    )


def schema_entity(value: SchemaValue, text: str | None = None, *,
                  with_subject: bool = True) -> dict[str, Any]:
    """Confluent's Schema entity: subject, version, id, schemaType (not for AVRO),
    references (when any), metadata, ruleSet, schema."""
    entity: dict[str, Any] = {}
    if with_subject:
        entity["subject"] = value.subject
        entity["version"] = value.version
    entity["id"] = value.id
    if value.schema_type != "AVRO":
        entity["schemaType"] = value.schema_type
    entity.update(schema_extras_to_json(value))
    entity["schema"] = value.schema if text is None else text
    return entity


def schema_string(value: SchemaValue, text: str | None = None) -> dict[str, Any]:
    """Confluent's SchemaString (``GET /schemas/ids/{id}``): schemaType, schema,
    references, metadata, ruleSet."""
    entity: dict[str, Any] = {}
    if value.schema_type != "AVRO":
        entity["schemaType"] = value.schema_type
    entity["schema"] = value.schema if text is None else text
    entity.update(schema_extras_to_json(value))
    return entity
