"""JSON Schema compatibility as Confluent checks it (``json/diff/SchemaDiff``, strict policy):
the previous schema is the original, the new one the update; a difference outside the
compatible set makes the pair incompatible. BACKWARD holds when the new schema accepts every
document the old one accepted.

The rules of Confluent's documentation table, among others:

- Content models: an object is *open* when it allows any additional property (no
  ``additionalProperties: false`` or schema, no ``patternProperties``, no restricting
  ``unevaluatedProperties``), *closed* otherwise, *partially open* when a property schema
  (pattern or additionalProperties) covers a name. Removing a property is compatible from an
  open model; adding one is compatible to a closed model; adding to an open model or removing
  from a closed one is not (unless a partially open model covers it compatibly, or the
  property's schema is ``{}``/``false``).
- Required: removing ``required`` is compatible, adding it is not (unless with a default).
- Types: integer -> number, a type joining a union (``oneOf``/``anyOf``/type array), ``enum``
  gaining values, ``not`` narrowing are compatible; the reverse, or another type, is not.
- Limits: maximum/maxLength/maxItems/maxProperties rising or removed, minimum/minLength/
  minItems/minProperties falling or removed, ``pattern`` removed, ``multipleOf`` reduced, and
  ``uniqueItems`` removed are compatible; the opposite changes are not.
- ``items``, ``additionalItems``, ``additionalProperties``, ``dependencies`` and combined
  schemas (``allOf``/``anyOf``/``oneOf``, matched by a maximum matching of compatible
  subschemas) are compared recursively; ``$ref`` is followed (recursion counts as compatible).

Messages are Confluent's: ``{errorType:"TYPE_CHANGED", description:"A type at path
'#/properties/age' is different between the new schema and the old schema'}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import referencing

from moldau.registry.schemas.base import fill_labels
from moldau.registry.schemas.json_schema import DEFAULT_DRAFT

if TYPE_CHECKING:
    from referencing._core import Resolver

    from moldau.registry.schemas.json_schema import JsonSchema

COMPATIBLE_CHANGES = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED",
    "TYPE_EXTENDED", "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED",
    "MIN_LENGTH_REMOVED", "PATTERN_REMOVED", "MAXIMUM_INCREASED", "MAXIMUM_REMOVED",
    "MINIMUM_DECREASED", "MINIMUM_REMOVED", "EXCLUSIVE_MAXIMUM_INCREASED",
    "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED",
    "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED", "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
    "REQUIRED_ATTRIBUTE_REMOVED", "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED",
    "DEPENDENCY_SCHEMA_REMOVED", "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED",
    "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED", "ADDITIONAL_PROPERTIES_ADDED",
    "ADDITIONAL_PROPERTIES_EXTENDED", "UNEVALUATED_PROPERTIES_ADDED",
    "UNEVALUATED_PROPERTIES_EXTENDED", "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "MAX_ITEMS_INCREASED",
    "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED", "MAX_CONTAINS_INCREASED",
    "MAX_CONTAINS_REMOVED", "MIN_CONTAINS_DECREASED", "MIN_CONTAINS_REMOVED",
    "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
    "UNEVALUATED_ITEMS_ADDED", "UNEVALUATED_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "ENUM_ARRAY_EXTENDED",
    "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
})

_KEYWORD = "The keyword at path '{path}' in the %s schema is not present in the %s schema"
_MORE = "The value at path '{path}' in the %s schema is more than its value in the %s schema"
_LESS = "The value at path '{path}' in the %s schema is less than its value in the %s schema"
_VALUE = "The value at path '{path}' is different between the %s and %s schema"
_FEWER = ("An array or combined type at path '{path}' has fewer elements in the %s schema "
          "than the %s schema")
_MORE_ELEMENTS = ("An array or combined type at path '{path}' has more elements in the %s "
                  "schema than the %s schema")
_TYPE = "A type at path '{path}' is different between the %s schema and the %s schema"
_TEMPLATES = {
    **dict.fromkeys((
        "MAXIMUM_ADDED", "MINIMUM_ADDED", "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MINIMUM_ADDED",
        "MULTIPLE_OF_ADDED", "MAX_LENGTH_ADDED", "MIN_LENGTH_ADDED", "PATTERN_ADDED",
        "REQUIRED_ATTRIBUTE_ADDED", "MAX_PROPERTIES_ADDED", "MIN_PROPERTIES_ADDED",
        "DEPENDENCY_ARRAY_ADDED", "DEPENDENCY_SCHEMA_ADDED", "MAX_ITEMS_ADDED",
        "MIN_ITEMS_ADDED", "MAX_CONTAINS_ADDED", "MIN_CONTAINS_ADDED", "UNIQUE_ITEMS_ADDED",
        "ADDITIONAL_ITEMS_REMOVED", "ADDITIONAL_PROPERTIES_REMOVED",
        "UNEVALUATED_PROPERTIES_REMOVED", "UNEVALUATED_ITEMS_REMOVED"), _KEYWORD),
    **dict.fromkeys((
        "MIN_LENGTH_INCREASED", "MINIMUM_INCREASED", "EXCLUSIVE_MINIMUM_INCREASED",
        "MIN_PROPERTIES_INCREASED", "MULTIPLE_OF_EXPANDED", "MIN_ITEMS_INCREASED",
        "MIN_CONTAINS_INCREASED"), _MORE),
    **dict.fromkeys((
        "MAX_LENGTH_DECREASED", "MAXIMUM_DECREASED", "MAX_ITEMS_DECREASED",
        "MAX_CONTAINS_DECREASED", "EXCLUSIVE_MAXIMUM_DECREASED", "MAX_PROPERTIES_DECREASED"),
        _LESS),
    **dict.fromkeys(("PATTERN_CHANGED", "MULTIPLE_OF_CHANGED", "DEPENDENCY_ARRAY_CHANGED"),
                    _VALUE),
    **dict.fromkeys((
        "ADDITIONAL_ITEMS_NARROWED", "ENUM_ARRAY_NARROWED", "SUM_TYPE_NARROWED",
        "ADDITIONAL_PROPERTIES_NARROWED", "UNEVALUATED_PROPERTIES_NARROWED",
        "UNEVALUATED_ITEMS_NARROWED"), _FEWER),
    **dict.fromkeys(("TYPE_CHANGED", "TYPE_NARROWED", "COMBINED_TYPE_CHANGED",
                     "COMBINED_TYPE_SUBSCHEMAS_CHANGED", "ENUM_ARRAY_CHANGED"), _TYPE),
    **dict.fromkeys(("DEPENDENCY_ARRAY_EXTENDED", "PRODUCT_TYPE_EXTENDED",
                     "SUM_TYPE_EXTENDED", "NOT_TYPE_EXTENDED"), _MORE_ELEMENTS),
    **dict.fromkeys(("REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                     "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL",
                     "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                     "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"),
                    "The %s schema has an open content model and has a property or item at "
                    "path '{path}' which is missing in the %s schema"),
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        "The %s schema has an unopen content model and has a required property at path "
        "'{path}' which is missing in the %s schema",
    **dict.fromkeys(("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                     "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"),
                    "The %s has a closed content model and is missing a property or item "
                    "present at path '{path}' in the %s schema"),
    **dict.fromkeys(("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                     "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"),
                    "A property or item is missing in the %s schema but present at path "
                    "'{path}' in the %s schema and is not covered by its partially open "
                    "content model"),
    **dict.fromkeys(("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                     "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"),
                    "The %s schema has a property or item at path '{path}' which is missing "
                    "in the %s schema and is not covered by its partially open content model"),
}


@dataclass(frozen=True)
class Difference:
    """One difference between the original and the update."""

    kind: str
    path: str

    def message(self, reader: str, writer: str) -> str:
        """Confluent's text of this difference (its closing quote included)."""
        template = _TEMPLATES.get(self.kind, "").replace("{path}", self.path)
        description = fill_labels(template, reader, writer)
        return f'{{errorType:"{self.kind}", description:"{description}\'}}'


# -- the schema model (what everit's loader makes of a JSON schema) --------------------------

_OBJECT_KEYWORDS = ("properties", "required", "additionalProperties", "patternProperties",
                    "minProperties", "maxProperties", "dependencies", "dependentRequired",
                    "dependentSchemas", "propertyNames", "unevaluatedProperties")
_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems",
                   "contains", "prefixItems", "unevaluatedItems", "minContains", "maxContains")
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_TYPE_KEYWORDS = {"object": _OBJECT_KEYWORDS, "array": _ARRAY_KEYWORDS,
                  "string": _STRING_KEYWORDS, "number": _NUMBER_KEYWORDS,
                  "integer": _NUMBER_KEYWORDS, "boolean": (), "null": ()}


@dataclass(eq=False)
class Node:
    """One schema: kind is empty, false, object, array, string, number, boolean, null, enum,
    const, combined (criterion allOf/anyOf/oneOf) or not."""

    kind: str
    raw: dict[str, Any]
    resolver: Resolver
    criterion: str = ""
    subs: list[Node] = field(default_factory=list)
    integer: bool = False

    def child(self, value: Any) -> Node | None:
        """The node of a subschema of this one (None when absent)."""
        if value is None:
            return None
        return build(value, self.resolver)


def build(schema: Any, resolver: Resolver) -> Node:
    """The model of ``schema`` ($ref followed; several kinds in one schema make an allOf)."""
    if schema is True or schema == {}:
        return Node("empty", {}, resolver)
    if schema is False:
        return Node("false", {}, resolver)
    if not isinstance(schema, dict):
        return Node("empty", {}, resolver)
    if isinstance(schema.get("$id"), str):
        resolver = resolver.in_subresource(
            referencing.Resource.from_contents(schema, default_specification=DEFAULT_DRAFT))
    parts: list[Node] = []
    if isinstance(schema.get("$ref"), str):
        resolved = resolver.lookup(schema["$ref"])
        parts.append(build(resolved.contents, resolved.resolver))
    types = schema.get("type")
    if isinstance(types, str):
        parts.append(_typed(types, schema, resolver))
    elif isinstance(types, list) and types:
        typed = [_typed(t, schema, resolver) for t in types if isinstance(t, str)]
        parts.append(typed[0] if len(typed) == 1 else Node("combined", schema, resolver,
                                                           "anyOf", typed))
    else:
        for name, keywords in _TYPE_KEYWORDS.items():
            if name != "integer" and keywords and any(k in schema for k in keywords):
                parts.append(_typed(name, schema, resolver))
    if "enum" in schema:
        parts.append(Node("enum", schema, resolver))
    if "const" in schema:
        parts.append(Node("const", schema, resolver))
    for criterion in ("allOf", "anyOf", "oneOf"):
        if isinstance(schema.get(criterion), list):
            subs = [build(sub, resolver) for sub in schema[criterion]]
            parts.append(Node("combined", schema, resolver, criterion, subs))
    if "not" in schema:
        parts.append(Node("not", schema, resolver))
    if not parts:
        return Node("empty", schema, resolver)
    if len(parts) == 1:
        return parts[0]
    return Node("combined", schema, resolver, "allOf", parts)


def _typed(name: str, schema: dict[str, Any], resolver: Resolver) -> Node:
    kind = "number" if name == "integer" else name
    return Node(kind, schema, resolver, integer=name == "integer")


# -- the comparison -----------------------------------------------------------------------

@dataclass
class DiffContext:
    """The state of one comparison: the JSON path, the differences found, and the memo of
    compared pairs shared with sub-contexts (a pair in progress is a recursion)."""

    memo: dict[tuple[int, int], list[Difference] | None]
    path: list[str] = field(default_factory=list)
    diffs: list[Difference] = field(default_factory=list)

    def add(self, kind: str, *extra: str) -> None:
        """Record a difference at the current path (plus ``extra`` path parts)."""
        self.diffs.append(Difference(kind, "#/" + "/".join([*self.path, *extra])))

    def sub(self) -> DiffContext:
        """A context for a trial comparison at the same path (its differences kept apart)."""
        return DiffContext(self.memo, list(self.path))

    @property
    def compatible(self) -> bool:
        """Whether every difference found so far is a compatible one."""
        return all(diff.kind in COMPATIBLE_CHANGES for diff in self.diffs)


def differences(original: JsonSchema, update: JsonSchema) -> list[Difference]:
    """Every difference from ``original`` to ``update`` (compatible ones included)."""
    ctx = DiffContext({})
    compare(ctx, build(original.schema, original.resolver), build(update.schema, update.resolver))
    return ctx.diffs


def diff_messages(
    original: JsonSchema, update: JsonSchema, *, reader: str = "new", writer: str = "old"
) -> list[str]:
    """Confluent's messages for the incompatible differences (empty: compatible)."""
    seen: set[Difference] = set()
    result = []
    for diff in differences(original, update):
        if diff.kind not in COMPATIBLE_CHANGES and diff not in seen:
            seen.add(diff)
            result.append(diff.message(reader, writer))
    return result


def compare(ctx: DiffContext, original: Node | None, update: Node | None) -> None:
    """Compare two schemas at the context's path (recursion counts as compatible)."""
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    key = (id(original.raw), original.kind, original.criterion,
           id(update.raw), update.kind, update.criterion)
    if key in ctx.memo:
        _rebase(ctx, ctx.memo[key] or [])  # None: in progress (recursion) -> compatible
        return
    inner = DiffContext(ctx.memo)
    ctx.memo[key] = None
    _compare_types(inner, original, update)
    ctx.memo[key] = inner.diffs
    _rebase(ctx, inner.diffs)


def _rebase(ctx: DiffContext, relative: list[Difference]) -> None:
    prefix = "/".join(ctx.path)
    for diff in relative:
        rest = diff.path[2:]
        ctx.diffs.append(Difference(diff.kind, "#/" + "/".join(p for p in (prefix, rest) if p)))


def _compare_types(ctx: DiffContext, original: Node, update: Node) -> None:
    if original.kind != "combined" and update.kind == "combined":
        if len(update.subs) == 1 or update.criterion in ("anyOf", "oneOf"):
            for sub in update.subs:
                subctx = ctx.sub()
                compare(subctx, original, sub)
                if subctx.compatible:
                    ctx.diffs.extend(subctx.diffs)
                    if len(update.subs) > 1:
                        ctx.add("SUM_TYPE_EXTENDED")
                    return
    elif (original.kind == "combined" and update.kind != "combined"
          and (len(original.subs) == 1 or original.criterion == "allOf")):
        for sub in original.subs:
            subctx = ctx.sub()
            compare(subctx, sub, update)
            if subctx.compatible:
                ctx.diffs.extend(subctx.diffs)
                if len(original.subs) > 1:
                    ctx.add("PRODUCT_TYPE_NARROWED")
                return
    if original.kind != update.kind:
        if original.kind == "false" or update.kind == "empty":
            return
        if original.raw.get("connect.type") == "bytes" == update.raw.get("connect.type"):
            return
        ctx.add("TYPE_CHANGED")
        return
    from moldau.registry.schemas import json_schema_rules as rules

    handler = rules.HANDLERS.get(original.kind)
    if handler is not None:
        handler(ctx, original, update)


def json_key(value: Any) -> str:
    """A hashable, order-independent key of a JSON value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def as_decimal(value: Any) -> Decimal | None:
    """A JSON number as a Decimal (None when absent or not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether a ``patternProperties`` regex finds a match in ``name``."""
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False
