"""Which (api key, version) pairs kio has schemas for, and their request/response classes.

Every lookup first asks kio's index (two dict lookups, nothing allocated or cached), so an api
key or version that a peer makes up costs nothing and leaves nothing behind: the caches below
only ever hold schemas kio ships (323 versions of 89 APIs in kio 0.6.5), whatever arrives on
the wire. A broker checks the api key and version against what it serves before it asks for
a schema at all (:func:`moldau.broker.dispatch.parse_frame`).

Only kio's own "no such schema" error (:class:`kio.index.KioIndexError`) means "unknown".
Anything else - a failed import in a broken installation, a bug - propagates with its cause
and is not cached, so it is reported where it happens instead of looking like an API the
broker does not support.
"""

from __future__ import annotations

from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map

__all__ = ["has_schema", "highest_version", "override_response_schema", "request_schema",
           "response_schema"]


def has_schema(api_key: int, version: int) -> bool:
    """Whether kio has the request and response schemas of ``(api_key, version)``."""
    name = api_key_map.get(api_key)
    return name is not None and version in schema_name_map[name]


def highest_version(api_key: int) -> int | None:
    """The newest version of ``api_key`` kio knows, or None for an api key it does not."""
    name = api_key_map.get(api_key)
    return None if name is None else max(schema_name_map[name])


def request_schema(api_key: int, version: int) -> type[Any] | None:
    """kio's request class for ``(api_key, version)``, or None if kio does not know it."""
    schema = _loaded.get((api_key, version, False), _UNKNOWN)
    return _load(api_key, version, False) if schema is _UNKNOWN else schema


def response_schema(api_key: int, version: int) -> type[Any] | None:
    """kio's response class for ``(api_key, version)``, or None if kio does not know it."""
    schema = _loaded.get((api_key, version, True), _UNKNOWN)
    return _load(api_key, version, True) if schema is _UNKNOWN else schema


def override_response_schema(api_key: int, version: int, schema: type[Any]) -> None:
    """Decode ``(api_key, version)`` responses with ``schema`` (a variant of kio's class)
    instead of kio's own: for a field whose kio type cannot hold a value brokers send, such
    as DescribeTransactions' ``TransactionStartTimeMs`` of -1 (no open transaction)."""
    if not has_schema(api_key, version):
        raise ValueError(f"kio has no response schema for api {api_key} v{version}")
    _loaded[(api_key, version, True)] = schema


# Schemas loaded so far, by (api key, version, response): only pairs in kio's index get in.
_loaded: dict[tuple[int, int, bool], type[Any]] = {}
_UNKNOWN: Any = object()


def _load(api_key: int, version: int, response: bool) -> type[Any] | None:
    if not has_schema(api_key, version):
        return None
    try:
        schema = (load_response_schema if response else load_request_schema)(api_key, version)
    except KioIndexError:
        return None
    _loaded[(api_key, version, response)] = schema
    return schema
