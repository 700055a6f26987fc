"""The wire layout of a request body, compiled once from kio's schema of (api key, version).

A plan is a tree of four node kinds that says exactly which bytes kio's reader consumes:

* :class:`Fixed` - a run of fixed-size fields (ints, bools, uuids, durations), merged;
* :class:`Blob` - a string/bytes/records field: compact (unsigned varint length + 1, 0 = null)
  in flexible versions, else an int16 (strings) or int32 (bytes) length, -1 = null;
* :class:`Array` - compact (unsigned varint count + 1, 0 = null) or int32 count (-1 = null);
* :class:`Struct` - fields in order, then (flexible versions) the tagged-field section; a
  nullable struct starts with a KIP-893 marker byte (-1 = null, 1 = present).

Fields are classified the way kio does (``kio.serial._introspect``: ``kafka_type``, the ``tag``
metadata, optionality, the entity's ``__flexible__``), including kio's quirks: tagged primitive
fields are read as non-nullable, array elements are never nullable, and the nullability of an
array is that of the field's own type (``tuple[...] | None``), which kio ignores but Kafka
does not. Each node knows its minimum encoded size, so an array count can be bounded by the
bytes left before a single element is read.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from .schemas import request_schema, response_schema

__all__ = ["Array", "Blob", "Fixed", "Node", "Struct", "request_plan"]

# Encoded sizes of kio's fixed-width kafka types (a nullable datetime is -1, still 8 bytes;
# a null uuid is all zeros).
FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_BLOB_TYPES = {"string": 2, "bytes": 4, "records": 4}  # legacy length prefix size


@dataclasses.dataclass(frozen=True, slots=True)
class Fixed:
    """``size`` bytes of fixed-width fields."""

    size: int


@dataclasses.dataclass(frozen=True, slots=True)
class Blob:
    """A string/bytes/records field. ``prefix`` is the legacy length size (2 or 4), unused
    when ``compact``."""

    name: str
    compact: bool
    prefix: int
    nullable: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Array:
    """An array of ``item`` (never null items; the array itself may be)."""

    name: str
    compact: bool
    nullable: bool
    item: Node


@dataclasses.dataclass(frozen=True, slots=True)
class Struct:
    """An entity: its untagged fields in order, then (flexible) tagged fields by tag."""

    name: str
    flexible: bool
    nullable: bool
    fields: tuple[Node, ...]
    tags: tuple[tuple[int, Node], ...]


Node = Fixed | Blob | Array | Struct


def min_size(node: Node) -> int:
    """The fewest bytes ``node`` can take on the wire."""
    match node:
        case Fixed(size):
            return size
        case Blob(compact=compact, prefix=prefix):
            return 1 if compact else prefix
        case Array(compact=compact):
            return 1 if compact else 4
        case Struct(flexible=flexible, nullable=nullable, fields=fields):
            if nullable:
                return 1
            return sum(min_size(f) for f in fields) + (1 if flexible else 0)
    raise TypeError(node)


def fixed_size(node: Node) -> int | None:
    """The size of ``node`` if every encoding of it has that size, else None."""
    match node:
        case Fixed(size):
            return size
        case Struct(flexible=False, nullable=False, fields=fields):
            sizes = [fixed_size(f) for f in fields]
            if all(s is not None for s in sizes):
                return sum(s for s in sizes if s is not None)
    return None


def _outer_nullable(field: dataclasses.Field[Any]) -> bool:
    """Whether the field's own type admits None (``X | None``), not its elements'."""
    tp = field.type
    return typing.get_origin(tp) in (types.UnionType, typing.Union) and type(None) in (
        typing.get_args(tp)
    )


def _primitive(kafka_type: str, flexible: bool, nullable: bool, name: str) -> Node:
    if kafka_type in FIXED_SIZES:
        return Fixed(FIXED_SIZES[kafka_type])
    if kafka_type in _BLOB_TYPES:
        return Blob(name, flexible, _BLOB_TYPES[kafka_type], nullable)
    raise NotImplementedError(f"kafka type {kafka_type!r} of {name} has no wire layout here")


def _field_node(field: dataclasses.Field[Any], flexible: bool, path: str) -> Node:
    name = path + field.name
    tagged = get_field_tag(field) is not None
    kind = classify_field(field)
    if isinstance(kind, PrimitiveTupleField):
        item = _primitive(get_schema_field_type(field), flexible, False, name + "[]")
        return Array(name, flexible, _outer_nullable(field), item)
    if isinstance(kind, EntityTupleField):
        return Array(name, flexible, _outer_nullable(field),
                     entity_plan(kind.type_, False, name + "[]."))
    # kio reads tagged fields as non-nullable: their absence is how they are "null".
    nullable = False if tagged else is_optional(field)
    if isinstance(kind, EntityField):
        return entity_plan(kind.type_, nullable, name + ".")
    return _primitive(get_schema_field_type(field), flexible, nullable, name)


def _merge_fixed(nodes: list[Node]) -> tuple[Node, ...]:
    merged: list[Node] = []
    for node in nodes:
        if isinstance(node, Fixed) and merged and isinstance(merged[-1], Fixed):
            merged[-1] = Fixed(merged[-1].size + node.size)
        elif not (isinstance(node, Fixed) and node.size == 0):
            merged.append(node)
    return tuple(merged)


def entity_plan(entity: type, nullable: bool = False, path: str = "") -> Struct:
    """The plan of kio entity class ``entity`` (``path`` prefixes field names in messages)."""
    flexible = bool(entity.__flexible__)  # type: ignore[attr-defined]
    untagged: list[Node] = []
    tags: dict[int, Node] = {}
    for field in dataclasses.fields(entity):
        node = _field_node(field, flexible, path)
        tag = get_field_tag(field)
        if tag is None:
            untagged.append(node)
        else:
            tags[int(tag)] = node
    if tags and not flexible:
        raise ValueError(f"{entity.__name__} has tagged fields but is not flexible")
    label = path.rstrip(".") or entity.__name__
    return Struct(label, flexible, nullable, _merge_fixed(untagged), tuple(sorted(tags.items())))


def request_plan(api_key: int, version: int, response: bool = False) -> Struct | None:
    """The plan of the request (or, with ``response``, the response) body of
    ``(api_key, version)``; None if kio has no schema.

    Plans are cached per schema class, so the cache holds at most one plan per schema kio
    ships; an unknown pair is answered without touching it. Errors other than kio's "no such
    schema" (a broken installation) propagate."""
    schema = (response_schema if response else request_schema)(api_key, version)
    return None if schema is None else _plan(schema)


@functools.cache
def _plan(schema: type) -> Struct:
    return entity_plan(schema)
