"""Schema types of the registry (Avro, JSON Schema, Protobuf): parsing, canonical and
normalized forms, identity for id reuse, and compatibility between two parsed schemas.

Pure code, no I/O. The registry core calls :func:`parse_schema` and
:func:`moldau.registry.compatibility.check` only.
"""

from moldau.registry.schemas.base import (
    SCHEMA_TYPES,
    InvalidSchemaError,
    ParsedSchema,
    Reference,
    parse_schema,
)

__all__ = ["SCHEMA_TYPES", "InvalidSchemaError", "ParsedSchema", "Reference", "parse_schema"]
