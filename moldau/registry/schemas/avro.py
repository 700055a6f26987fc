"""Avro schemas: parsing (fastavro validates), Confluent's canonical string, normalization.

fastavro's ``parse_schema`` validates the schema (types, names it can resolve, defaults,
logical types); a small model of the parsed schema then mirrors Avro Java's ``Schema``, the
object Confluent keeps, because the text the registry stores and answers is that object's
``toString()``:

- compact JSON, keys in Avro Java's order: ``type``, ``name``, ``namespace`` (only where it
  differs from the enclosing one; ``""`` for a null namespace inside a non-null one),
  ``doc``, ``fields``/``symbols``/``size``/``items``/``values``, enum ``default``, the other
  properties in their order, ``aliases`` (relative to the type's namespace); fields:
  ``name``, ``type``, ``doc``, ``default``, ``order`` (unless ascending), ``aliases``, props;
- a named type is written in full once, later by its name relative to the namespace;
  the top-level types of the references are known names (written by name);
- a primitive without properties is written as a string (``{"type":"int"}`` -> ``"int"``).

The normalized form (``?normalize=true``) is Confluent's ``AvroSchemaUtils.toNormalizedString``
re-parsed: properties sorted (a valid logical type's keys first), aliases sorted, object values
with sorted keys, an empty type doc dropped. Strict name rules (ASCII letters, digits, ``_``)
apply to names, field names and enum symbols, as for Confluent's new schemas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import fastavro

from moldau.registry.schemas.avro_model import (
    MISSING,
    PRIMITIVES,
    Field,
    Name,
    Node,
    dump,
    normalize_tree,
    to_json,
)
from moldau.registry.schemas.base import BaseSchema, InvalidSchemaError, load_json

_SCHEMA_RESERVED = frozenset(
    ("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases")
)
_ENUM_RESERVED = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
_ORDERS = ("ascending", "descending", "ignore")

class _Builder:
    """Builds the model from fastavro-validated JSON, with Avro Java's name resolution."""

    def __init__(self, known: dict[str, Node]) -> None:
        self.known = known  # full name -> named node (references' types included)

    def build(self, schema: Any, space: str | None) -> Node:
        if isinstance(schema, str):
            return self._find(schema, space)
        if isinstance(schema, list):
            return self._union(schema, space)
        if not isinstance(schema, dict):
            raise InvalidSchemaError(f"Schema not yet supported: {dump(schema)}")
        kind = schema.get("type")
        if not isinstance(kind, str):
            raise InvalidSchemaError(f"No type: {dump(schema)}")
        if kind in PRIMITIVES:
            return Node(kind, props=_props(schema, _SCHEMA_RESERVED))
        if kind in ("record", "error"):
            return self._record(schema, space, kind == "error")
        if kind == "enum":
            return self._enum(schema, space)
        if kind == "fixed":
            return self._fixed(schema, space)
        if kind in ("array", "map"):
            key = "items" if kind == "array" else "values"
            if key not in schema:
                raise InvalidSchemaError(f"{kind.capitalize()} has no {key} type: {dump(schema)}")
            items = self.build(schema[key], space)
            return Node(kind, props=_props(schema, _SCHEMA_RESERVED), items=items)
        return self._find(kind, space)

    def _find(self, name: str, space: str | None) -> Node:
        if name in PRIMITIVES:
            return Node(name)
        full = name if "." in name or not space else f"{space}.{name}"
        node = self.known.get(full) or self.known.get(name)
        if node is None:
            raise InvalidSchemaError(f"Undefined name: {json.dumps(full)}")
        return node

    def _named(self, schema: dict[str, Any], space: str | None, kind: str) -> Node:
        raw_name = schema.get("name")
        if not isinstance(raw_name, str):
            raise InvalidSchemaError(f"No name in schema: {dump(schema)}")
        raw_space = schema.get("namespace")
        if raw_space is not None and not isinstance(raw_space, str):
            raise InvalidSchemaError(f"Invalid namespace: {dump(schema)}")
        name = Name.parse(raw_name, space if raw_space is None else raw_space)
        _check_name(name.name)
        if name.full in PRIMITIVES:
            raise InvalidSchemaError(f"Schemas may not be named after primitives: {name.full}")
        if name.full in self.known:
            raise InvalidSchemaError(f"Can't redefine: {name.full}")
        doc = schema.get("doc")
        node = Node(kind, name=name, doc=doc if isinstance(doc, str) else None)
        aliases = schema.get("aliases")
        if aliases is not None:
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise InvalidSchemaError(f"aliases not an array of strings: {dump(schema)}")
            for alias in dict.fromkeys(aliases):
                node.aliases.append(Name.parse(alias, name.space))
        self.known[name.full] = node
        return node

    def _record(self, schema: dict[str, Any], space: str | None, is_error: bool) -> Node:
        node = self._named(schema, space, "record")
        node.is_error = is_error
        raw_fields = schema.get("fields")
        if not isinstance(raw_fields, list):
            raise InvalidSchemaError(f"Record has no fields: {dump(schema)}")
        assert node.name is not None
        seen: set[str] = set()
        for raw in raw_fields:
            fld = self._field(raw, node.name.space)
            if fld.name in seen:
                raise InvalidSchemaError(f"Duplicate field {fld.name} in record {node.name.full}")
            seen.add(fld.name)
            node.fields.append(fld)
        node.props = _props(schema, _SCHEMA_RESERVED)
        return node

    def _field(self, raw: Any, space: str | None) -> Field:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise InvalidSchemaError(f"No field name: {dump(raw)}")
        if "type" not in raw:
            raise InvalidSchemaError(f"No field type: {dump(raw)}")
        _check_name(raw["name"])
        node = self.build(raw["type"], space)
        order = raw.get("order", "ascending")
        if not isinstance(order, str) or order.lower() not in _ORDERS:
            raise InvalidSchemaError(f"Invalid field order {order!r} in field {raw['name']}")
        default = raw.get("default", MISSING)
        if default is not MISSING:
            if isinstance(default, str) and node.kind in ("float", "double"):
                try:
                    default = float(default)
                except ValueError:
                    pass
            if not _valid_default(node, default):
                raise InvalidSchemaError(
                    f"Invalid default for field {raw['name']}: {dump(default)} "
                    f"not a {to_json(node, set(), None)}"
                )
        aliases = raw.get("aliases") or []
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise InvalidSchemaError(f"aliases not an array of strings: {dump(raw)}")
        doc = raw.get("doc")
        return Field(
            raw["name"], node, doc if isinstance(doc, str) else None, default, order.lower(),
            list(dict.fromkeys(aliases)), _props(raw, _FIELD_RESERVED),
        )

    def _enum(self, schema: dict[str, Any], space: str | None) -> Node:
        node = self._named(schema, space, "enum")
        symbols = schema.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
            raise InvalidSchemaError(f"Enum has no symbols: {dump(schema)}")
        for symbol in symbols:
            _check_name(symbol)
        if len(set(symbols)) != len(symbols):
            raise InvalidSchemaError(f"Duplicate enum symbol in {dump(symbols)}")
        node.symbols = list(symbols)
        default = schema.get("default")
        if default is not None and default not in symbols:
            raise InvalidSchemaError(f"The Enum Default: {default} is not in the enum symbol set")
        node.enum_default = default
        node.props = _props(schema, _ENUM_RESERVED)
        return node

    def _fixed(self, schema: dict[str, Any], space: str | None) -> Node:
        node = self._named(schema, space, "fixed")
        size = schema.get("size")
        if type(size) is not int or size < 0:
            raise InvalidSchemaError(f"Invalid or no size: {dump(schema)}")
        node.size = size
        node.props = _props(schema, _SCHEMA_RESERVED)
        return node

    def _union(self, schema: list[Any], space: str | None) -> Node:
        branches = [self.build(branch, space) for branch in schema]
        seen: set[str] = set()
        for branch in branches:
            if branch.kind == "union":
                raise InvalidSchemaError(f"Nested union: {dump(schema)}")
            key = branch.name.full if branch.named and branch.name else branch.kind
            if key in seen:
                raise InvalidSchemaError(f"Duplicate in union: {key}")
            seen.add(key)
        return Node("union", branches=branches)


def _check_name(name: str) -> None:
    if not name:
        raise InvalidSchemaError("Empty name")
    if not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")):
        raise InvalidSchemaError(f"Illegal initial character: {name}")
    if not all(c.isascii() and (c.isalnum() or c == "_") for c in name):
        raise InvalidSchemaError(f"Illegal character in: {name}")


def _props(schema: dict[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key not in reserved}


def _valid_default(node: Node, value: Any) -> bool:
    """Avro Java's ``Schema.isValidDefault`` (a union default may match any branch)."""
    kind = node.kind
    if kind in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if kind in ("int", "long"):
        bound = 2**31 if kind == "int" else 2**63
        return type(value) is int and -bound <= value < bound
    if kind in ("float", "double"):
        return type(value) in (int, float)
    if kind == "boolean":
        return type(value) is bool
    if kind == "null":
        return value is None
    if kind == "array":
        assert node.items is not None
        return isinstance(value, list) and all(_valid_default(node.items, v) for v in value)
    if kind == "map":
        assert node.items is not None
        return isinstance(value, dict) and all(
            _valid_default(node.items, v) for v in value.values()
        )
    if kind == "union":
        return any(_valid_default(branch, value) for branch in node.branches)
    if kind == "record":
        if not isinstance(value, dict):
            return False
        for fld in node.fields:
            item = value.get(fld.name, fld.default)
            if item is MISSING or not _valid_default(fld.type, item):
                return False
        return True
    return False


class AvroSchema(BaseSchema):
    """A parsed Avro schema. Canonical: Avro Java's ``Schema.toString`` of the parsed schema,
    references by name; normalized: Confluent's normalized form (sorted properties and
    aliases); no serialized form."""

    schema_type = "AVRO"

    def __init__(self, root: Node, references: dict[str, Node], normalize: bool) -> None:
        self.root = root
        # the references' top-level types by full name: written by name only
        self.references = references
        self._canonical = to_json(root, set(references), None)
        normalized_root = _Builder(dict(references)).build(json.loads(self._canonical), None)
        normalize_tree(normalized_root, {id(node) for node in references.values()})
        self._normalized = to_json(normalized_root, set(references), None)
        if normalize:
            self.root = normalized_root
            self._canonical = self._normalized

    def formatted(self, fmt: str) -> str:
        """``default`` (or empty): canonical; ``resolved``: the references written inline.
        Other formats answer the canonical text, as Confluent does for forward compatibility."""
        if fmt.strip().lower() == "resolved":
            return to_json(self.root, set(), None)
        return self._canonical

    def _backward(self, previous: AvroSchema, reader: str, writer: str) -> list[str]:
        """Avro schema resolution with this schema as the reader and ``previous`` as the
        writer (Avro Java's ``SchemaCompatibility``, Confluent's messages)."""
        from moldau.registry.schemas.avro_compatibility import reader_writer_messages

        return reader_writer_messages(self.root, previous.root, reader=reader, writer=writer)

    def __repr__(self) -> str:
        return f"AvroSchema({self._canonical})"


def _validate_with_fastavro(schema: Any, named: dict[str, Any], what: str) -> None:
    try:
        fastavro.parse_schema(schema, named, _write_hint=False)
    except InvalidSchemaError:
        raise
    except Exception as exc:  # fastavro raises several types (SchemaParseException, KeyError..)
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise InvalidSchemaError(f"Invalid {what}: {detail}") from exc


def parse(
    text: str, references: Mapping[str, str], *, normalize: bool = False
) -> AvroSchema:
    """Parse an Avro schema; ``references`` maps the import name (the referenced type's full
    name) to its schema text, references of references included, in any order."""
    if not isinstance(text, str):
        raise InvalidSchemaError("Invalid Avro schema: the schema must be a string")
    fast_named: dict[str, Any] = {}
    known: dict[str, Node] = {}
    tops = _parse_references(references, fast_named, known)
    schema = load_json(text, "Avro schema")
    root = _Builder(known).build(schema, None)
    _validate_with_fastavro(schema, fast_named, "Avro schema")
    return AvroSchema(root, tops, normalize)


def _parse_references(
    references: Mapping[str, str], fast_named: dict[str, Any], known: dict[str, Node]
) -> list[str]:
    """Parse the referenced schemas, each once all the names it uses are known."""
    pending = {name: load_json(text, f"Avro reference {name!r}")
               for name, text in references.items()}
    tops: dict[str, Node] = {}
    while pending:
        progress = False
        errors: list[str] = []
        for import_name, schema in list(pending.items()):
            named_before, known_before = dict(fast_named), dict(known)
            try:
                node = _Builder(known).build(schema, None)
                _validate_with_fastavro(schema, fast_named, f"Avro reference {import_name!r}")
            except InvalidSchemaError as exc:
                fast_named.clear()
                fast_named.update(named_before)
                known.clear()
                known.update(known_before)
                errors.append(str(exc))
                continue
            del pending[import_name]
            progress = True
            if node.named and node.name is not None:
                tops[node.name.full] = node
        if not progress:
            raise InvalidSchemaError("; ".join(errors))
    return tops
