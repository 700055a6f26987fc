"""Build kio entities of any version from plain Python values.

Each kio message version is its own set of frozen dataclasses. Handlers describe a response once
as dicts/lists (``{"error_code": 0, "topics": [{"name": ..., "partitions": [...]}]}``) and
``build(ResponseClass, data)`` produces the version's entities: keys a version lacks are
ignored, fields left out take their schema default (or a zero value), ints become ErrorCode,
timedelta or datetime where the schema says so.

``to_ms`` does the reverse for request fields kio decodes as timedelta/datetime.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

_ZERO_UUID = uuid.UUID(int=0)
_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kind: str  # "error", "td", "dt", "uuid", "entity", "entities", "plain"
    entity: type | None
    required: bool
    zero: Any


def _zero_for(kafka_type: str | None, tp: Any, optional: bool) -> Any:
    if optional:
        return None
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "datetime_i64":
        return _EPOCH
    if kafka_type == "uuid":
        return _ZERO_UUID
    if kafka_type == "bool":
        return False
    if kafka_type in ("string",):
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    origin = typing.get_origin(tp)
    if origin is tuple:
        return ()
    return 0


@functools.cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        kafka_type = f.metadata.get("kafka_type")
        args = typing.get_args(tp)
        optional = type(None) in args
        inner = [a for a in args if a is not type(None)] if optional else [tp]
        base = inner[0] if inner else tp
        entity = None
        if typing.get_origin(base) is tuple:
            item = typing.get_args(base)[0]
            if dataclasses.is_dataclass(item):
                kind, entity = "entities", item
            else:
                kind = "plain"
        elif isinstance(base, type) and dataclasses.is_dataclass(base):
            kind, entity = "entity", base
        elif kafka_type == "error_code":
            kind = "error"
        elif kafka_type in ("timedelta_i32", "timedelta_i64"):
            kind = "td"
        elif kafka_type == "datetime_i64":
            kind = "dt"
        elif kafka_type == "uuid":
            kind = "uuid"
        else:
            kind = "plain"
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plans.append(_FieldPlan(f.name, kind, entity, required,
                                _zero_for(kafka_type, base, optional)))
    return tuple(plans)


def _convert(plan: _FieldPlan, value: Any) -> Any:
    if value is None:
        return None
    match plan.kind:
        case "error":
            return value if isinstance(value, ErrorCode) else ErrorCode(int(value))
        case "td":
            if isinstance(value, datetime.timedelta):
                return value
            return datetime.timedelta(milliseconds=int(value))
        case "dt":
            if isinstance(value, datetime.datetime):
                return value
            return datetime.datetime.fromtimestamp(int(value) / 1000, datetime.UTC)
        case "uuid":
            return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        case "entity":
            assert plan.entity is not None
            return build(plan.entity, value)
        case "entities":
            assert plan.entity is not None
            return tuple(build(plan.entity, item) for item in value)
        case _:
            if isinstance(value, list):
                return tuple(value)
            return value


def build(cls: type, data: Mapping[str, Any] | Any) -> Any:
    """An instance of kio entity class ``cls`` from a mapping (or an instance, returned as is)."""
    if isinstance(data, cls):
        return data
    kwargs: dict[str, Any] = {}
    for plan in _plan(cls):
        if plan.name in data:
            kwargs[plan.name] = _convert(plan, data[plan.name])
        elif plan.required:
            kwargs[plan.name] = plan.zero
    return cls(**kwargs)


def to_ms(value: Any) -> int:
    """Milliseconds from a kio timedelta/datetime field (or an int)."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


def to_dict(entity: Any) -> Any:
    """Plain dicts/lists of an entity tree (for logging, tests and the client)."""
    if dataclasses.is_dataclass(entity) and not isinstance(entity, type):
        return {f.name: to_dict(getattr(entity, f.name)) for f in dataclasses.fields(entity)}
    if isinstance(entity, tuple):
        return [to_dict(item) for item in entity]
    return entity
