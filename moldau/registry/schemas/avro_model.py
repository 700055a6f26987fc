"""The model of a parsed Avro schema, as Avro Java's ``Schema`` holds it, and its text forms:
``to_json`` writes Avro Java's ``Schema.toString`` (the canonical string Confluent stores),
``normalize`` rewrites a model into Confluent's normalized form (see ``avro``)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
MISSING: Any = object()

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
    default: Any = MISSING
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def has_default(self) -> bool:
        """Whether the field declares a default value."""
        return self.default is not MISSING


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


def dump(value: Any) -> str:
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
            yield dump(node.name.qualified(space))
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
    yield f'{{"type":"{kind}","name":{dump(node.name.name)}'
    if node.name.space is not None:
        if node.name.space != space:
            yield f',"namespace":{dump(node.name.space)}'
    elif space is not None:
        yield ',"namespace":""'
    if node.doc is not None:
        yield f',"doc":{dump(node.doc)}'
    if node.kind == "record":
        yield ',"fields":['
        for i, fld in enumerate(node.fields):
            if i:
                yield ","
            yield from _write_field(fld, known, node.name.space)
        yield "]"
    elif node.kind == "enum":
        yield f',"symbols":{dump(node.symbols)}'
        if node.enum_default is not None:
            yield f',"default":{dump(node.enum_default)}'
    else:
        yield f',"size":{node.size}'
    yield from _write_props(node.props)
    if node.aliases:
        yield f',"aliases":{dump([a.qualified(node.name.space) for a in node.aliases])}'
    yield "}"


def _write_field(fld: Field, known: set[str], space: str | None) -> Iterator[str]:
    yield f'{{"name":{dump(fld.name)},"type":'
    yield from _write(fld.type, known, space)
    if fld.doc is not None:
        yield f',"doc":{dump(fld.doc)}'
    if fld.has_default:
        yield f',"default":{dump(fld.default)}'
    if fld.order != "ascending":
        yield f',"order":"{fld.order}"'
    if fld.aliases:
        yield f',"aliases":{dump(fld.aliases)}'
    yield from _write_props(fld.props)
    yield "}"


def _write_props(props: Mapping[str, Any]) -> Iterator[str]:
    for key, value in props.items():
        yield f",{dump(key)}:{dump(value)}"


def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_json(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(item) for item in value]
    return value


def normalize_tree(node: Node, done: set[int]) -> None:
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
        normalize_tree(fld.type, done)
    if node.items is not None:
        normalize_tree(node.items, done)
    for branch in node.branches:
        normalize_tree(branch, done)
