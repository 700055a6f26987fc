"""Build kio request entities from plain dicts, whatever the version.

Kafka messages gain and lose fields across versions (``name`` vs ``topic_id``, ``timeout``
as milliseconds). Callers describe a request once, as nested dicts and lists with every field
any version might want; :func:`build` keeps the fields the chosen version's schema has,
converts milliseconds to the ``timedelta`` kio expects, and fills defaults. A required field
that is missing is a bug in the caller and raises ``TypeError`` naming it.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

_MISSING = dataclasses.MISSING


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    nested: type | None  # entity class of a nested struct or array of structs
    is_array: bool
    is_timedelta: bool
    required: bool
    nullable: bool


def _unwrap(hint: Any) -> tuple[Any, bool, bool]:
    """Strip Optional; return (inner type, is tuple[...], was Optional)."""
    origin = typing.get_origin(hint)
    nullable = False
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        hint = args[0] if len(args) == 1 else hint
        origin = typing.get_origin(hint)
    if origin is tuple:
        return typing.get_args(hint)[0], True, nullable
    return hint, False, nullable


@functools.cache
def _fields(schema: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(schema)
    result = []
    for f in dataclasses.fields(schema):
        inner, is_array, nullable = _unwrap(hints[f.name])
        nested = inner if dataclasses.is_dataclass(inner) else None
        is_td = isinstance(inner, type) and issubclass(inner, datetime.timedelta)
        required = f.default is _MISSING and f.default_factory is _MISSING
        result.append(_Field(f.name, nested, is_array, is_td, required, nullable))
    return tuple(result)


def build(schema: type, data: Mapping[str, Any]) -> Any:
    """An instance of kio ``schema`` from ``data`` (nested dicts/lists for nested structs).

    Keys the schema lacks are ignored; integer values of timedelta fields are milliseconds.
    Nullable fields the caller leaves out become None.
    """
    kwargs: dict[str, Any] = {}
    for f in _fields(schema):
        if f.name not in data:
            if f.required and f.nullable:
                kwargs[f.name] = None
                continue
            if f.required:
                raise TypeError(f"{schema.__module__}.{schema.__name__} needs field {f.name!r}")
            continue
        value = data[f.name]
        if value is not None:
            if f.nested is not None:
                if f.is_array:
                    value = tuple(build(f.nested, item) for item in value)
                elif isinstance(value, Mapping):
                    value = build(f.nested, value)
            elif f.is_timedelta and not isinstance(value, datetime.timedelta):
                value = datetime.timedelta(milliseconds=value)
            elif f.is_array and not isinstance(value, tuple):
                value = tuple(value)
        kwargs[f.name] = value
    return schema(**kwargs)


def has_field(schema: type, name: str) -> bool:
    """Whether ``schema`` (a kio entity class) has a field called ``name``."""
    return any(f.name == name for f in _fields(schema))


def ms(value: datetime.timedelta | int) -> int:
    """Milliseconds of a kio timedelta field (or an int passed through)."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)
