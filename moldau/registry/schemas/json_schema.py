"""JSON Schema schemas: validated against their draft's meta-schema with ``jsonschema``
(``$schema`` picks the draft: 4, 6, 7, 2019-09, 2020-12; draft 7 when absent), every ``$ref``
resolved (inside the document, or to a reference by its import name) through ``referencing``.

Canonical text: compact JSON in the document's key order (Confluent's ``canonicalString``, what
Jackson writes); normalized: the keys of every object sorted. Identity is the canonical text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import validators

from moldau.registry.schemas.base import BaseSchema, InvalidSchemaError, load_json

if TYPE_CHECKING:
    from referencing._core import Resolver

DEFAULT_DRAFT = referencing.jsonschema.DRAFT7
_DRAFTS = {
    "http://json-schema.org/draft-04/schema": referencing.jsonschema.DRAFT4,
    "http://json-schema.org/draft-06/schema": referencing.jsonschema.DRAFT6,
    "http://json-schema.org/draft-07/schema": referencing.jsonschema.DRAFT7,
    "https://json-schema.org/draft/2019-09/schema": referencing.jsonschema.DRAFT201909,
    "https://json-schema.org/draft/2020-12/schema": referencing.jsonschema.DRAFT202012,
}
# keywords whose values are data, not schemas (no $ref to follow inside)
_DATA_KEYWORDS = frozenset(("enum", "const", "default", "examples"))


def _dump(value: Any, *, sort_keys: bool = False) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)


def specification(schema: Any) -> referencing.Specification[Any]:
    """The draft of ``schema`` (its ``$schema``; draft 7 when absent)."""
    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        uri = schema["$schema"].rstrip("#")
        spec = _DRAFTS.get(uri) or _DRAFTS.get(uri.replace("https://", "http://"))
        if spec is None:
            raise InvalidSchemaError(f"Invalid JSON Schema: unknown $schema {schema['$schema']!r}")
        return spec
    return DEFAULT_DRAFT


def _check_meta_schema(schema: Any, what: str) -> None:
    if not isinstance(schema, dict | bool):
        raise InvalidSchemaError(f"Invalid {what}: a schema is a JSON object or a boolean")
    specification(schema)  # an unknown $schema is invalid
    cls = validators.validator_for(schema if isinstance(schema, dict) else {},
                                   default=validators.Draft7Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        raise InvalidSchemaError(f"Invalid {what}: {exc.message} at {where}") from exc


def _refs(
    node: Any, resolver: Resolver
) -> Iterator[tuple[str, Resolver]]:
    """Every ``$ref`` string in a schema document, with the resolver of its base URI."""
    if isinstance(node, dict):
        if isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(
                referencing.Resource.from_contents(node, default_specification=DEFAULT_DRAFT))
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value, resolver
            elif key not in _DATA_KEYWORDS:
                yield from _refs(value, resolver)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item, resolver)


def _base_uri(schema: Any) -> str:
    if isinstance(schema, dict):
        for key in ("$id", "id"):
            if isinstance(schema.get(key), str):
                return str(schema[key])
    return ""


def build_resolver(
    schema: Any, references: Mapping[str, Any]
) -> Resolver:
    """A resolver for ``schema`` that also finds each reference under its import name (and
    that name relative to the schema's ``$id``)."""
    base = _base_uri(schema)
    resources = []
    for name, contents in references.items():
        resource = referencing.Resource.from_contents(contents, default_specification=DEFAULT_DRAFT)
        resources.append((name, resource))
        if base:
            resources.append((urljoin(base, name), resource))
    root = referencing.Resource.from_contents(schema, default_specification=DEFAULT_DRAFT)
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(resources)
    registry = registry.with_resource(base, root).crawl()
    return registry.resolver(base_uri=base)


def _check_refs(schema: Any, resolver: Resolver, what: str) -> None:
    for ref, base in _refs(schema, resolver):
        try:
            base.lookup(ref)
        except referencing.exceptions.Unresolvable as exc:
            raise InvalidSchemaError(f"Invalid {what}: cannot resolve $ref {ref!r}") from exc


class JsonSchema(BaseSchema):
    """A parsed JSON Schema. Canonical: compact JSON in the document's key order;
    normalized: compact JSON with the keys of every object sorted; no serialized form and no
    formats (Confluent's JSON Schema has none)."""

    schema_type = "JSON"

    def __init__(self, schema: Any, references: Mapping[str, Any], normalize: bool) -> None:
        self.schema = schema
        self.references = dict(references)
        self.resolver = build_resolver(schema, self.references)
        self._canonical = _dump(schema, sort_keys=normalize)
        self._normalized = _dump(schema, sort_keys=True)

    def _backward(self, previous: JsonSchema, reader: str, writer: str) -> list[str]:
        """Confluent's JSON Schema rules with ``previous`` as the original and this schema as
        the update."""
        from moldau.registry.schemas.json_schema_compatibility import diff_messages

        return diff_messages(previous, self, reader=reader, writer=writer)

    def __repr__(self) -> str:
        return f"JsonSchema({self._canonical})"


def parse(text: str, references: Mapping[str, str], *, normalize: bool = False) -> JsonSchema:
    """Parse a JSON Schema; ``references`` maps ``$ref`` names to referenced schema texts."""
    if not isinstance(text, str):
        raise InvalidSchemaError("Invalid JSON Schema: the schema must be a string")
    loaded_refs = {}
    for name, ref_text in references.items():
        ref = load_json(ref_text, f"JSON Schema reference {name!r}")
        _check_meta_schema(ref, f"JSON Schema reference {name!r}")
        loaded_refs[name] = ref
    schema = load_json(text, "JSON Schema")
    _check_meta_schema(schema, "JSON Schema")
    try:
        parsed = JsonSchema(schema, loaded_refs, normalize)
    except referencing.exceptions.CannotDetermineSpecification as exc:
        raise InvalidSchemaError(f"Invalid JSON Schema: {exc}") from exc
    _check_refs(schema, parsed.resolver, "JSON Schema")
    return parsed
