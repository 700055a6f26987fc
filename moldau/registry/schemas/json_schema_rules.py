"""The per-kind rules of Confluent's JSON Schema diff (objects, arrays, strings, numbers,
enums, const, combined schemas, not); see ``json_schema_compatibility`` for the overview."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moldau.registry.schemas.json_schema_compatibility import (
    DiffContext,
    Node,
    as_decimal,
    compare,
    json_key,
    pattern_matches,
)

# -- limits --------------------------------------------------------------------------------


def _limit(ctx: DiffContext, name: str, old: Any, new: Any, prefix: str) -> None:
    """maxLength / minItems / ...: ``prefix`` is the Difference stem (MAX_LENGTH...)."""
    old_value, new_value = as_decimal(old), as_decimal(new)
    if old_value == new_value:
        return
    if old_value is None:
        ctx.add(f"{prefix}_ADDED", name)
    elif new_value is None:
        ctx.add(f"{prefix}_REMOVED", name)
    elif old_value < new_value:
        ctx.add(f"{prefix}_INCREASED", name)
    else:
        ctx.add(f"{prefix}_DECREASED", name)


def _exclusive(raw: dict[str, Any], name: str) -> Any:
    value = raw.get(name)
    return None if isinstance(value, bool) else value  # draft 4 booleans are no limit


def string(ctx: DiffContext, original: Node, update: Node) -> None:
    """maxLength, minLength, pattern."""
    old, new = original.raw, update.raw
    _limit(ctx, "maxLength", old.get("maxLength"), new.get("maxLength"), "MAX_LENGTH")
    _limit(ctx, "minLength", old.get("minLength"), new.get("minLength"), "MIN_LENGTH")
    old_pattern, new_pattern = old.get("pattern"), new.get("pattern")
    if old_pattern is None and new_pattern is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif old_pattern is not None and new_pattern is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif old_pattern != new_pattern:
        ctx.add("PATTERN_CHANGED", "pattern")


def number(ctx: DiffContext, original: Node, update: Node) -> None:
    """maximum, minimum, exclusive limits, multipleOf, integer vs number."""
    old, new = original.raw, update.raw
    _limit(ctx, "maximum", old.get("maximum"), new.get("maximum"), "MAXIMUM")
    _limit(ctx, "minimum", old.get("minimum"), new.get("minimum"), "MINIMUM")
    _limit(ctx, "exclusiveMaximum", _exclusive(old, "exclusiveMaximum"),
           _exclusive(new, "exclusiveMaximum"), "EXCLUSIVE_MAXIMUM")
    _limit(ctx, "exclusiveMinimum", _exclusive(old, "exclusiveMinimum"),
           _exclusive(new, "exclusiveMinimum"), "EXCLUSIVE_MINIMUM")
    old_multiple, new_multiple = as_decimal(old.get("multipleOf")), \
        as_decimal(new.get("multipleOf"))
    if old_multiple != new_multiple:
        if old_multiple is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif new_multiple is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif old_multiple != 0 and new_multiple % old_multiple == 0:
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif new_multiple != 0 and old_multiple % new_multiple == 0:
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if original.integer != update.integer:
        ctx.add("TYPE_EXTENDED" if original.integer else "TYPE_NARROWED")


def enum(ctx: DiffContext, original: Node, update: Node) -> None:
    """Values added (extended), removed (narrowed) or both (changed)."""
    old = {json_key(v) for v in original.raw.get("enum") or []}
    new = {json_key(v) for v in update.raw.get("enum") or []}
    if old == new:
        return
    if new >= old:
        ctx.add("ENUM_ARRAY_EXTENDED", "enum")
    elif old >= new:
        ctx.add("ENUM_ARRAY_NARROWED", "enum")
    else:
        ctx.add("ENUM_ARRAY_CHANGED", "enum")


def const(ctx: DiffContext, original: Node, update: Node) -> None:
    """Another constant is another type."""
    if json_key(original.raw.get("const")) != json_key(update.raw.get("const")):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def not_(ctx: DiffContext, original: Node, update: Node) -> None:
    """``not``: compatible when the new excluded schema is narrower than the old one."""
    ctx.path.append("not")
    sub = ctx.sub()
    compare(sub, update.child(update.raw.get("not")), original.child(original.raw.get("not")))
    ctx.add("NOT_TYPE_NARROWED" if sub.compatible else "NOT_TYPE_EXTENDED")
    ctx.path.pop()


# -- combined ------------------------------------------------------------------------------

def _unique(nodes: list[Node]) -> list[Node]:
    seen: set[str] = set()
    result = []
    for node in nodes:
        key = json_key(node.raw) + node.kind + node.criterion
        if key not in seen:
            seen.add(key)
            result.append(node)
    return result


def _max_matching(edges: dict[int, list[int]], left: int) -> dict[int, int]:
    """Maximum bipartite matching (augmenting paths): right index -> left index."""
    match: dict[int, int] = {}

    def augment(u: int, seen: set[int]) -> bool:
        for v in edges.get(u, []):
            if v not in seen:
                seen.add(v)
                if v not in match or augment(match[v], seen):
                    match[v] = u
                    return True
        return False

    for u in range(left):
        augment(u, set())
    return match


def combined(ctx: DiffContext, original: Node, update: Node) -> None:
    """allOf/anyOf/oneOf: criterion, size, and subschemas matched compatibly."""
    old_c, new_c = original.criterion, update.criterion
    if old_c != new_c:
        single_old, single_new = len(original.subs) == 1, len(update.subs) == 1
        if (new_c == "anyOf" or (single_old and single_new)
                or (single_old and new_c == "oneOf") or (single_new and old_c == "allOf")):
            ctx.add("COMBINED_TYPE_EXTENDED")
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            return
    old_subs, new_subs = _unique(original.subs), _unique(update.subs)
    if len(old_subs) < len(new_subs):
        ctx.add("PRODUCT_TYPE_EXTENDED" if new_c == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(old_subs) > len(new_subs):
        ctx.add("SUM_TYPE_NARROWED" if old_c in ("anyOf", "oneOf") else "PRODUCT_TYPE_NARROWED")
    edges: dict[int, list[int]] = {}
    found: dict[tuple[int, int], list[Any]] = {}
    for i, old_sub in enumerate(old_subs):
        ctx.path.append(f"{old_c}/{i}")
        for j, new_sub in enumerate(new_subs):
            sub = ctx.sub()
            compare(sub, old_sub, new_sub)
            if sub.compatible:
                edges.setdefault(i, []).append(j)
                found[(i, j)] = sub.diffs
        ctx.path.pop()
    matching = _max_matching(edges, len(old_subs))
    for j, i in sorted(matching.items()):
        ctx.diffs.extend(found[(i, j)])
    if len(matching) < min(len(old_subs), len(new_subs)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


# -- objects -------------------------------------------------------------------------------

def _permits_additional(raw: dict[str, Any]) -> bool:
    return raw.get("additionalProperties") is not False


def _additional_schema(node: Node) -> Node | None:
    value = node.raw.get("additionalProperties")
    return None if value is None or isinstance(value, bool) else node.child(value)


def _unevaluated(node: Node, key: str) -> Node | None:
    value = node.raw.get(key)
    return None if value is None else node.child(value)


def _open_content(node: Node, uneval_key: str = "unevaluatedProperties",
                  additional_key: str = "additionalProperties") -> bool:
    additional = node.raw.get(additional_key)
    if additional is False or (additional is not None and not isinstance(additional, bool)):
        return False
    if additional_key == "additionalProperties" and node.raw.get("patternProperties"):
        return False
    uneval = _unevaluated(node, uneval_key)
    return uneval is None or uneval.kind == "empty"


def _partial_schema(node: Node, name: str | None, uneval_key: str,
                    additional_key: str) -> Node | None:
    if name is not None:
        for pattern, schema in (node.raw.get("patternProperties") or {}).items():
            if pattern_matches(pattern, name):
                return node.child(schema)
    additional = node.raw.get(additional_key)
    if additional is not None and not isinstance(additional, bool):
        return node.child(additional)
    if additional is None or additional is True:
        uneval = _unevaluated(node, uneval_key)
        if uneval is not None and uneval.kind not in ("false", "empty"):
            return uneval
    return None


def _has_default(schema: Any) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _properties(ctx: DiffContext, original: Node, update: Node) -> None:
    old_props = original.raw.get("properties") or {}
    new_props = update.raw.get("properties") or {}
    required = set(update.raw.get("required") or [])
    ctx.path.append("properties")
    for name in sorted(old_props.keys() | new_props.keys()):
        ctx.path.append(name)
        if name not in new_props:
            _property_removed(ctx, original.child(old_props[name]), update, name)
        elif name not in old_props:
            _property_added(ctx, original, update.child(new_props[name]), name,
                            name in required, _has_default(new_props[name]))
        else:
            compare(ctx, original.child(old_props[name]), update.child(new_props[name]))
        ctx.path.pop()
    ctx.path.pop()


def _property_removed(ctx: DiffContext, old_schema: Node | None, update: Node, name: str) -> None:
    if _open_content(update):
        ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _partial_schema(update, name, "unevaluatedProperties", "additionalProperties")
    if partial is not None:
        sub = ctx.sub()
        compare(sub, old_schema, partial)
        ctx.diffs.extend(sub.diffs)
        ctx.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif old_schema is not None and old_schema.kind == "false":
        ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _property_added(ctx: DiffContext, original: Node, new_schema: Node | None, name: str,
                    required: bool, has_default: bool) -> None:
    if _open_content(original):
        if new_schema is not None and new_schema.kind == "empty":
            ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
        elif required:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL" if has_default
                    else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _partial_schema(original, name, "unevaluatedProperties", "additionalProperties")
    if partial is not None:
        sub = ctx.sub()
        compare(sub, partial, new_schema)
        ctx.diffs.extend(sub.diffs)
        ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if required:
        ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if has_default
                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")


def _required(ctx: DiffContext, original: Node, update: Node) -> None:
    old_props = original.raw.get("properties") or {}
    new_props = update.raw.get("properties") or {}
    old_required = set(original.raw.get("required") or [])
    new_required = set(update.raw.get("required") or [])
    for name in old_props:
        if name not in new_props:
            continue
        if name in old_required and name not in new_required:
            ctx.add("REQUIRED_ATTRIBUTE_REMOVED", "required", name)
        elif name not in old_required and name in new_required:
            ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if _has_default(new_props[name])
                    else "REQUIRED_ATTRIBUTE_ADDED", "required", name)


def _dependencies(ctx: DiffContext, original: Node, update: Node) -> None:
    def split(raw: dict[str, Any]) -> tuple[dict[str, set[str]], dict[str, Any]]:
        arrays = {k: set(v) for k, v in (raw.get("dependentRequired") or {}).items()}
        schemas = dict(raw.get("dependentSchemas") or {})
        for key, value in (raw.get("dependencies") or {}).items():
            if isinstance(value, list):
                arrays[key] = set(value)
            else:
                schemas[key] = value
        return arrays, schemas

    old_arrays, old_schemas = split(original.raw)
    new_arrays, new_schemas = split(update.raw)
    for key in sorted(old_arrays.keys() | new_arrays.keys()):
        before, after = old_arrays.get(key), new_arrays.get(key)
        if after is None:
            ctx.add("DEPENDENCY_ARRAY_REMOVED", "dependencies", key)
        elif before is None:
            ctx.add("DEPENDENCY_ARRAY_ADDED", "dependencies", key)
        elif before != after:
            ctx.add("DEPENDENCY_ARRAY_EXTENDED" if after >= before else
                    "DEPENDENCY_ARRAY_NARROWED" if before >= after else
                    "DEPENDENCY_ARRAY_CHANGED", "dependencies", key)
    for key in sorted(old_schemas.keys() | new_schemas.keys()):
        if key not in new_schemas:
            ctx.add("DEPENDENCY_SCHEMA_REMOVED", "dependencies", key)
        elif key not in old_schemas:
            ctx.add("DEPENDENCY_SCHEMA_ADDED", "dependencies", key)
        else:
            ctx.path.extend(("dependencies", key))
            compare(ctx, original.child(old_schemas[key]), update.child(new_schemas[key]))
            del ctx.path[-2:]


def _additional(ctx: DiffContext, original: Node, update: Node, key: str, stem: str) -> None:
    """additionalProperties / additionalItems: permitted, schema added or removed, compared."""
    ctx.path.append(key)
    old_permits = original.raw.get(key) is not False
    new_permits = update.raw.get(key) is not False
    old_value, new_value = original.raw.get(key), update.raw.get(key)
    old_schema = None if old_value is None or isinstance(old_value, bool) else old_value
    new_schema = None if new_value is None or isinstance(new_value, bool) else new_value
    if old_permits != new_permits:
        ctx.add(f"{stem}_ADDED" if new_permits else f"{stem}_REMOVED")
    elif old_schema is None and new_schema is not None:
        ctx.add(f"{stem}_NARROWED")
    elif new_schema is None and old_schema is not None:
        ctx.add(f"{stem}_EXTENDED")
    elif old_schema is not None:
        compare(ctx, original.child(old_schema), update.child(new_schema))
    ctx.path.pop()


def _unevaluated_diff(ctx: DiffContext, original: Node, update: Node, key: str,
                      stem: str) -> None:
    old, new = _unevaluated(original, key), _unevaluated(update, key)
    if old is None and new is None:
        return
    ctx.path.append(key)
    if old is None:
        ctx.add(f"{stem}_REMOVED" if new is not None and new.kind == "false"
                else f"{stem}_NARROWED")
    elif new is None:
        ctx.add(f"{stem}_ADDED" if old.kind == "false" else f"{stem}_EXTENDED")
    elif old.kind == "false" and new.kind != "false":
        ctx.add(f"{stem}_ADDED")
    elif old.kind != "false" and new.kind == "false":
        ctx.add(f"{stem}_REMOVED")
    elif old.kind == "empty" and new.kind != "empty":
        ctx.add(f"{stem}_NARROWED")
    elif old.kind != "empty" and new.kind == "empty":
        ctx.add(f"{stem}_EXTENDED")
    else:
        compare(ctx, old, new)
    ctx.path.pop()


def object_(ctx: DiffContext, original: Node, update: Node) -> None:
    """required, properties, dependencies, additional/unevaluated properties, counts."""
    _required(ctx, original, update)
    _properties(ctx, original, update)
    _dependencies(ctx, original, update)
    _additional(ctx, original, update, "additionalProperties", "ADDITIONAL_PROPERTIES")
    _unevaluated_diff(ctx, original, update, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
    old, new = original.raw, update.raw
    _limit(ctx, "maxProperties", old.get("maxProperties"), new.get("maxProperties"),
           "MAX_PROPERTIES")
    _limit(ctx, "minProperties", old.get("minProperties"), new.get("minProperties"),
           "MIN_PROPERTIES")


# -- arrays --------------------------------------------------------------------------------

def _items(node: Node) -> tuple[Any, list[Any], str]:
    """(schema for all items, tuple item schemas, the key of additional items)."""
    raw = node.raw
    if isinstance(raw.get("prefixItems"), list):
        return None, raw["prefixItems"], "items"
    items = raw.get("items")
    if isinstance(items, list):
        return None, items, "additionalItems"
    return items, [], "additionalItems"


def array(ctx: DiffContext, original: Node, update: Node) -> None:
    """items (one schema or a tuple), additional/unevaluated items, counts, uniqueItems."""
    old_all, old_tuple, old_extra = _items(original)
    new_all, new_tuple, new_extra = _items(update)
    ctx.path.append("items")
    compare(ctx, original.child(old_all), update.child(new_all))
    ctx.path.pop()
    for index in range(max(len(old_tuple), len(new_tuple))):
        ctx.path.append(f"items/{index}")
        if index < len(old_tuple) and index < len(new_tuple):
            compare(ctx, original.child(old_tuple[index]), update.child(new_tuple[index]))
        elif index < len(old_tuple):
            _item_removed(ctx, original.child(old_tuple[index]), update, new_extra)
        else:
            _item_added(ctx, original, update.child(new_tuple[index]), old_extra)
        ctx.path.pop()
    if old_extra == new_extra == "additionalItems":
        _additional(ctx, original, update, "additionalItems", "ADDITIONAL_ITEMS")
    _unevaluated_diff(ctx, original, update, "unevaluatedItems", "UNEVALUATED_ITEMS")
    old, new = original.raw, update.raw
    _limit(ctx, "maxItems", old.get("maxItems"), new.get("maxItems"), "MAX_ITEMS")
    _limit(ctx, "minItems", old.get("minItems"), new.get("minItems"), "MIN_ITEMS")
    if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
        ctx.add("UNIQUE_ITEMS_REMOVED" if old.get("uniqueItems") else "UNIQUE_ITEMS_ADDED",
                "uniqueItems")
    _limit(ctx, "maxContains", old.get("maxContains"), new.get("maxContains"), "MAX_CONTAINS")
    _limit(ctx, "minContains", old.get("minContains"), new.get("minContains"), "MIN_CONTAINS")


def _item_removed(ctx: DiffContext, old_schema: Node | None, update: Node, extra: str) -> None:
    if _open_content(update, "unevaluatedItems", extra):
        ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _partial_schema(update, None, "unevaluatedItems", extra)
    if partial is not None:
        sub = ctx.sub()
        compare(sub, old_schema, partial)
        ctx.diffs.extend(sub.diffs)
        ctx.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif old_schema is not None and old_schema.kind == "false":
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx: DiffContext, original: Node, new_schema: Node | None, extra: str) -> None:
    if _open_content(original, "unevaluatedItems", extra):
        ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                if new_schema is not None and new_schema.kind == "empty"
                else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _partial_schema(original, None, "unevaluatedItems", extra)
    if partial is not None:
        sub = ctx.sub()
        compare(sub, partial, new_schema)
        ctx.diffs.extend(sub.diffs)
        ctx.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


HANDLERS: dict[str, Callable[[DiffContext, Node, Node], None]] = {
    "object": object_, "array": array, "string": string, "number": number, "enum": enum,
    "const": const, "combined": combined, "not": not_,
}
