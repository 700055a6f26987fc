"""Request bodies of API v3: ``application/json`` only, fields read the way Confluent's
Jackson entities read them (numbers may come as numeric strings, booleans as
``"true"``/``"false"``; unknown fields are ignored).

A ``Content-Type`` other than ``application/json`` answers 415 / 415 (a request without one,
or with ``application/octet-stream``, the type some clients send for raw bytes, is read as
JSON, as the schema registry reads it); a body that is not JSON, or a field of the wrong
type, 400 / 400 naming the field.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from moldau.http import OCTET_STREAM, parse_json

from .errors import JSON, V3Error


def check_content_type(request: web.Request) -> None:
    """415 unless the body is declared ``application/json`` (or not declared at all)."""
    declared = request.headers.get("Content-Type")
    if declared is not None and request.content_type.lower() not in (JSON, OCTET_STREAM):
        raise V3Error(415, 415, "HTTP 415 Unsupported Media Type")


async def read_object(request: web.Request, *, required: bool = True) -> dict[str, Any]:
    """The body as a JSON object ({} for an empty body when not ``required``)."""
    check_content_type(request)
    raw = await request.read()
    if not raw.strip():
        if required:
            raise V3Error(400, 400, "Bad Request: Request body is empty. Data is required.")
        return {}
    value = parse_json(raw, V3Error)
    if not isinstance(value, dict):
        raise V3Error(400, 400, f"Bad Request: expected a JSON object, got "
                                f"{type(value).__name__}")
    return value


def _wrong(name: str, expected: str, value: Any) -> V3Error:
    return V3Error(400, 400, f"Bad Request: {name} must be {expected}, not "
                             f"{json.dumps(value)[:100]}")


def get_int(obj: dict[str, Any], name: str, *, required: bool = False) -> int | None:
    """An integer field (a numeric string is accepted, as Jackson coerces it)."""
    value = obj.get(name)
    if value is None:
        if required:
            raise V3Error(400, 400, f"Bad Request: {name} is required.")
        return None
    if isinstance(value, bool):
        raise _wrong(name, "an integer", value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _wrong(name, "an integer", value)


def scalar_text(value: Any) -> str | None:
    """``value`` as the text Jackson gives a ``String`` field for a JSON scalar (a number or
    a boolean becomes its JSON text, ``604800000`` -> ``"604800000"``); None for an object or
    a list, which Jackson refuses."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def get_str(obj: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    """A string field (a number or boolean is taken as its text, as Jackson coerces it)."""
    value = obj.get(name)
    if value is None:
        if required:
            raise V3Error(400, 400, f"Bad Request: {name} is required.")
        return None
    text = scalar_text(value)
    if text is None:
        raise _wrong(name, "a string", value)
    return text


def get_bool(obj: dict[str, Any], name: str) -> bool:
    """A boolean field (false when absent)."""
    value = obj.get(name)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _wrong(name, "true or false", value)


def get_list(obj: dict[str, Any], name: str) -> list[Any]:
    """A list field ([] when absent)."""
    value = obj.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _wrong(name, "a list", value)
    return value


def get_objects(obj: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A list of JSON objects ([] when absent)."""
    items = get_list(obj, name)
    for item in items:
        if not isinstance(item, dict):
            raise _wrong(f"every item of {name}", "an object", item)
    return items
