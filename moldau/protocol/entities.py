"""Build kio entities of any version from plain Python values.

Each kio message version is its own set of frozen dataclasses. Handlers describe a response once
as dicts/lists (``{"error_code": 0, "topics": [{"name": ..., "partitions": [...]}]}``), and the
client describes a request the same way with every field any version might want;
``build(Class, data)`` produces the version's entities: keys a version lacks are ignored, fields
left out take their schema default (or a zero value; None where the field is nullable), ints
become ErrorCode, timedelta (from milliseconds) or datetime where the schema says so, lists and
other iterables become tuples. ``build(Class, data, strict=True)`` treats a required,
non-nullable field left out as a bug in the caller and raises ``TypeError`` naming it.

Every field named ``error_message`` is bounded by :func:`~.errors.error_message` (messages
quote names a client chose, and must still fit the response).

``to_ms`` does the reverse for request fields kio decodes as timedelta/datetime.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from .errors import error_message

_ZERO_UUID = uuid.UUID(int=0)
_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


# A field's converter takes (value, strict) and is only called for values that are not None.
_Convert = Callable[[Any, bool], Any]


class _FieldPlan(NamedTuple):
    name: str
    convert: _Convert | None  # None: the value is taken as it is
    required: bool
    nullable: bool
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


def _error(value: Any, strict: bool) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


def _timedelta(value: Any, strict: bool) -> Any:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=int(value))


def _datetime(value: Any, strict: bool) -> Any:
    if isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromtimestamp(int(value) / 1000, datetime.UTC)


def _uuid(value: Any, strict: bool) -> Any:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _error_message(value: Any, strict: bool) -> Any:
    return error_message(value)


def _array(value: Any, strict: bool) -> Any:
    return value if type(value) is tuple else tuple(value)


def _entity(cls: type) -> _Convert:
    def convert(value: Any, strict: bool) -> Any:
        return build(cls, value, strict=strict)
    return convert


def _entities(cls: type) -> _Convert:
    def convert(value: Any, strict: bool) -> Any:
        # One entity per distinct item object: an answer a handler repeats (the same dict
        # for a key asked for many times) is built once, not once per occurrence.
        built: dict[int, Any] = {}
        out = []
        for item in value:
            entity = built.get(id(item))
            if entity is None:
                entity = built[id(item)] = build(cls, item, strict=strict)
            out.append(entity)
        return tuple(out)
    return convert


_BY_KAFKA_TYPE: dict[str, _Convert] = {
    "error_code": _error,
    "timedelta_i32": _timedelta,
    "timedelta_i64": _timedelta,
    "datetime_i64": _datetime,
    "uuid": _uuid,
}


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
        convert: _Convert | None
        if typing.get_origin(base) is tuple:
            item = typing.get_args(base)[0]
            convert = _entities(item) if dataclasses.is_dataclass(item) else _array
        elif isinstance(base, type) and dataclasses.is_dataclass(base):
            convert = _entity(base)
        elif f.name == "error_message":
            convert = _error_message
        else:
            convert = _BY_KAFKA_TYPE.get(kafka_type or "")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plans.append(_FieldPlan(f.name, convert, required, optional,
                                _zero_for(kafka_type, base, optional)))
    return tuple(plans)


def build(cls: type, data: Mapping[str, Any] | Any, *, strict: bool = False) -> Any:
    """An instance of kio entity class ``cls`` from a mapping (or an instance, returned as is).

    With ``strict``, a required non-nullable field missing from ``data`` (at any depth) raises
    ``TypeError`` naming it instead of taking its zero value.
    """
    if isinstance(data, cls):
        return data
    kwargs: dict[str, Any] = {}
    for name, convert, required, nullable, zero in _plan(cls):
        if name in data:
            value = data[name]
            if convert is not None and value is not None:
                value = convert(value, strict)
            kwargs[name] = value
        elif required:
            if strict and not nullable:
                raise TypeError(f"{cls.__module__}.{cls.__name__} needs field {name!r}")
            kwargs[name] = zero
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
