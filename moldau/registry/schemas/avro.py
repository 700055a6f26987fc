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
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import fastavro

from moldau.registry.schemas.base import InvalidSchemaError, ParsedSchema

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_SCHEMA_RESERVED = frozenset(
    ("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases")
)
_ENUM_RESERVED = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
_ORDERS = ("ascending", "descending", "ignore")
_MISSING: Any = object()

# logical type -> the Avro types it annotates (Avro Java's LogicalTypes)
_LOGICAL_TYPES = {
    "decimal": ("bytes", "fixed"),
    "big-decimal": ("bytes",),
    "uuid": ("string", "fixed"),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
    "duration": ("fixed",),
}


@dataclass(frozen=True)
class Name:
    """An Avro name: simple name and namespace (None for the null namespace)."""

    name: str
    space: str | None

    @classmethod
    def parse(cls, name: str, space: str | None) -> Name:
        """Split a possibly dotted name; a dotted name ignores ``space`` (Avro's rule)."""
        if "." in name:
            space, name = name.rsplit(".", 1)
        return cls(name, space or None)

    @property
    def full(self) -> str:
        """The full name."""
        return f"{self.space}.{self.name}" if self.space else self.name

    def qualified(self, space: str | None) -> str:
        """The name as written inside namespace ``space`` (Avro's ``getQualified``)."""
        if self.space is not None and self.space == space and self.name not in _TYPE_NAMES:
            return self.name
        return self.full


_TYPE_NAMES = frozenset(PRIMITIVES) | {"record", "enum", "array", "map", "union", "fixed"}


@dataclass(eq=False)
class Node:
    """One Avro schema node; ``kind`` is a primitive name or record/enum/fixed/array/map/union.

    Identity matters (named types are shared, recursion), so nodes compare by identity.
    """

    kind: str
    props: dict[str, Any] = field(default_factory=dict)
    # named types
    name: Name | None = None
    doc: str | None = None
    aliases: list[Name] = field(default_factory=list)
    is_error: bool = False
    fields: list[Field] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    enum_default: str | None = None
    size: int = 0
    # array items, map values, union branches
    items: Node | None = None
    branches: list[Node] = field(default_factory=list)

    @property
    def named(self) -> bool:
        """Whether this is a record, enum or fixed."""
        return self.kind in ("record", "enum", "fixed")

    def logical_type(self) -> str | None:
        """The valid logical type of this node, None when absent or invalid (Avro Java
        ignores an invalid one and keeps it as a plain property)."""
        logical = self.props.get("logicalType")
        if not isinstance(logical, str) or self.kind not in _LOGICAL_TYPES.get(logical, ()):
            return None
        if logical == "decimal":
            return logical if _valid_decimal(self) else None
        if logical == "uuid" and self.kind == "fixed":
            return logical if self.size == 16 else None
        if logical == "duration":
            return logical if self.size == 12 else None
        return logical


@dataclass(eq=False)
class Field:
    """A record field."""

    name: str
    type: Node
    doc: str | None = None
    default: Any = _MISSING
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def has_default(self) -> bool:
        """Whether the field declares a default value."""
        return self.default is not _MISSING


def _valid_decimal(node: Node) -> bool:
    precision = node.props.get("precision")
    scale = node.props.get("scale", 0)
    if type(precision) is not int or type(scale) is not int:
        return False
    if precision <= 0 or scale < 0 or scale > precision:
        return False
    if node.kind == "fixed":
        return precision <= math.floor(math.log10(2 ** (8 * node.size - 1) - 1))
    return True


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
            raise InvalidSchemaError(f"Schema not yet supported: {_dump(schema)}")
        kind = schema.get("type")
        if not isinstance(kind, str):
            raise InvalidSchemaError(f"No type: {_dump(schema)}")
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
                raise InvalidSchemaError(f"{kind.capitalize()} has no {key} type: {_dump(schema)}")
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
            raise InvalidSchemaError(f"No name in schema: {_dump(schema)}")
        raw_space = schema.get("namespace")
        if raw_space is not None and not isinstance(raw_space, str):
            raise InvalidSchemaError(f"Invalid namespace: {_dump(schema)}")
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
                raise InvalidSchemaError(f"aliases not an array of strings: {_dump(schema)}")
            for alias in dict.fromkeys(aliases):
                node.aliases.append(Name.parse(alias, name.space))
        self.known[name.full] = node
        return node

    def _record(self, schema: dict[str, Any], space: str | None, is_error: bool) -> Node:
        node = self._named(schema, space, "record")
        node.is_error = is_error
        raw_fields = schema.get("fields")
        if not isinstance(raw_fields, list):
            raise InvalidSchemaError(f"Record has no fields: {_dump(schema)}")
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
            raise InvalidSchemaError(f"No field name: {_dump(raw)}")
        if "type" not in raw:
            raise InvalidSchemaError(f"No field type: {_dump(raw)}")
        _check_name(raw["name"])
        node = self.build(raw["type"], space)
        order = raw.get("order", "ascending")
        if not isinstance(order, str) or order.lower() not in _ORDERS:
            raise InvalidSchemaError(f"Invalid field order {order!r} in field {raw['name']}")
        default = raw.get("default", _MISSING)
        if default is not _MISSING:
            if isinstance(default, str) and node.kind in ("float", "double"):
                try:
                    default = float(default)
                except ValueError:
                    pass
            if not _valid_default(node, default):
                raise InvalidSchemaError(
                    f"Invalid default for field {raw['name']}: {_dump(default)} "
                    f"not a {to_json(node, set(), None)}"
                )
        aliases = raw.get("aliases") or []
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise InvalidSchemaError(f"aliases not an array of strings: {_dump(raw)}")
        doc = raw.get("doc")
        return Field(
            raw["name"], node, doc if isinstance(doc, str) else None, default, order.lower(),
            list(dict.fromkeys(aliases)), _props(raw, _FIELD_RESERVED),
        )

    def _enum(self, schema: dict[str, Any], space: str | None) -> Node:
        node = self._named(schema, space, "enum")
        symbols = schema.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
            raise InvalidSchemaError(f"Enum has no symbols: {_dump(schema)}")
        for symbol in symbols:
            _check_name(symbol)
        if len(set(symbols)) != len(symbols):
            raise InvalidSchemaError(f"Duplicate enum symbol in {_dump(symbols)}")
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
            raise InvalidSchemaError(f"Invalid or no size: {_dump(schema)}")
        node.size = size
        node.props = _props(schema, _SCHEMA_RESERVED)
        return node

    def _union(self, schema: list[Any], space: str | None) -> Node:
        branches = [self.build(branch, space) for branch in schema]
        seen: set[str] = set()
        for branch in branches:
            if branch.kind == "union":
                raise InvalidSchemaError(f"Nested union: {_dump(schema)}")
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
            if item is _MISSING or not _valid_default(fld.type, item):
                return False
        return True
    return False


def _dump(value: Any) -> str:
    """Compact JSON as Jackson writes it (no spaces, non-ASCII kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def to_json(node: Node, known: set[str], space: str | None) -> str:
    """Avro Java's ``Schema.toString``: ``known`` holds the full names already written
    (updated as types are written), ``space`` is the enclosing namespace."""
    return "".join(_write(node, known, space))


def _write(node: Node, known: set[str], space: str | None) -> Iterator[str]:
    if node.kind == "union":
        yield "["
        for i, branch in enumerate(node.branches):
            if i:
                yield ","
            yield from _write(branch, known, space)
        yield "]"
        return
    if node.named:
        assert node.name is not None
        if node.name.full in known:
            yield _dump(node.name.qualified(space))
            return
        known.add(node.name.full)
        yield from _write_named(node, known, space)
        return
    if node.kind in ("array", "map"):
        assert node.items is not None
        key = "items" if node.kind == "array" else "values"
        yield f'{{"type":"{node.kind}","{key}":'
        yield from _write(node.items, known, space)
        yield from _write_props(node.props)
        yield "}"
        return
    if not node.props:
        yield f'"{node.kind}"'
        return
    yield f'{{"type":"{node.kind}"'
    yield from _write_props(node.props)
    yield "}"


def _write_named(node: Node, known: set[str], space: str | None) -> Iterator[str]:
    assert node.name is not None
    kind = "error" if node.is_error else node.kind
    yield f'{{"type":"{kind}","name":{_dump(node.name.name)}'
    if node.name.space is not None:
        if node.name.space != space:
            yield f',"namespace":{_dump(node.name.space)}'
    elif space is not None:
        yield ',"namespace":""'
    if node.doc is not None:
        yield f',"doc":{_dump(node.doc)}'
    if node.kind == "record":
        yield ',"fields":['
        for i, fld in enumerate(node.fields):
            if i:
                yield ","
            yield from _write_field(fld, known, node.name.space)
        yield "]"
    elif node.kind == "enum":
        yield f',"symbols":{_dump(node.symbols)}'
        if node.enum_default is not None:
            yield f',"default":{_dump(node.enum_default)}'
    else:
        yield f',"size":{node.size}'
    yield from _write_props(node.props)
    if node.aliases:
        yield f',"aliases":{_dump([a.qualified(node.name.space) for a in node.aliases])}'
    yield "}"


def _write_field(fld: Field, known: set[str], space: str | None) -> Iterator[str]:
    yield f'{{"name":{_dump(fld.name)},"type":'
    yield from _write(fld.type, known, space)
    if fld.doc is not None:
        yield f',"doc":{_dump(fld.doc)}'
    if fld.has_default:
        yield f',"default":{_dump(fld.default)}'
    if fld.order != "ascending":
        yield f',"order":"{fld.order}"'
    if fld.aliases:
        yield f',"aliases":{_dump(fld.aliases)}'
    yield from _write_props(fld.props)
    yield "}"


def _write_props(props: Mapping[str, Any]) -> Iterator[str]:
    for key, value in props.items():
        yield f",{_dump(key)}:{_dump(value)}"


def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_json(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(item) for item in value]
    return value


def _normalize(node: Node, done: set[int]) -> None:
    """Rewrite ``node`` (in place, each node once) into Confluent's normalized form."""
    if id(node) in done:
        return
    done.add(id(node))
    first: dict[str, Any] = {}
    logical = node.logical_type()
    if logical is not None:
        first["logicalType"] = logical
        if logical == "decimal":
            first["precision"] = node.props["precision"]
            if node.props.get("scale", 0) != 0:
                first["scale"] = node.props["scale"]
    rest = {key: _sorted_json(node.props[key]) for key in sorted(node.props) if key not in first}
    node.props = first | rest
    if node.named:
        assert node.name is not None
        if node.doc == "":
            node.doc = None
        node.aliases = sorted(set(node.aliases), key=lambda alias: alias.full)
    for fld in node.fields:
        fld.aliases = sorted(set(fld.aliases))
        fld.props = {key: _sorted_json(fld.props[key]) for key in sorted(fld.props)}
        if fld.has_default:
            fld.default = _sorted_json(fld.default)
        _normalize(fld.type, done)
    if node.items is not None:
        _normalize(node.items, done)
    for branch in node.branches:
        _normalize(branch, done)


class AvroSchema:
    """A parsed Avro schema (implements ``ParsedSchema``)."""

    schema_type = "AVRO"

    def __init__(self, root: Node, references: dict[str, Node], normalize: bool) -> None:
        self.root = root
        # the references' top-level types by full name: written by name only
        self.references = references
        self._canonical = to_json(root, set(references), None)
        normalized_root = _Builder(dict(references)).build(json.loads(self._canonical), None)
        _normalize(normalized_root, {id(node) for node in references.values()})
        self._normalized = to_json(normalized_root, set(references), None)
        if normalize:
            self.root = normalized_root
            self._canonical = self._normalized

    def canonical(self) -> str:
        """Avro Java's ``Schema.toString`` of the parsed schema, references by name."""
        return self._canonical

    def normalized(self) -> str:
        """Confluent's normalized form (sorted properties and aliases)."""
        return self._normalized

    def identity(self) -> str:
        """The canonical text: Confluent reuses an id for the same canonical string."""
        return self._canonical

    def serialized(self) -> str:
        """Avro has no serialized form: the canonical text."""
        return self._canonical

    def formatted(self, fmt: str) -> str:
        """``default`` (or empty): canonical; ``resolved``: the references written inline.
        Other formats answer the canonical text, as Confluent does for forward compatibility."""
        if fmt.strip().lower() == "resolved":
            return to_json(self.root, set(), None)
        return self._canonical

    def backward_messages(
        self, previous: ParsedSchema, *, reader: str = "new", writer: str = "old"
    ) -> list[str]:
        """Avro schema resolution with this schema as the reader and ``previous`` as the
        writer (Avro Java's ``SchemaCompatibility``, Confluent's messages)."""
        from moldau.registry.schemas.avro_compatibility import reader_writer_messages

        if not isinstance(previous, AvroSchema):
            return ["Incompatible because of different schema type"]
        return reader_writer_messages(self.root, previous.root, reader=reader, writer=writer)

    def __repr__(self) -> str:
        return f"AvroSchema({self._canonical})"


def _load_json(text: str, what: str) -> Any:
    def reject_constant(name: str) -> Any:
        raise InvalidSchemaError(f"Invalid {what}: {name} is not JSON")

    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidSchemaError(f"Invalid {what}: not JSON: {exc}") from exc


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
    schema = _load_json(text, "Avro schema")
    root = _Builder(known).build(schema, None)
    _validate_with_fastavro(schema, fast_named, "Avro schema")
    return AvroSchema(root, tops, normalize)


def _parse_references(
    references: Mapping[str, str], fast_named: dict[str, Any], known: dict[str, Node]
) -> list[str]:
    """Parse the referenced schemas, each once all the names it uses are known."""
    pending = {name: _load_json(text, f"Avro reference {name!r}")
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
