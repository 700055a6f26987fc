"""Content types: which a service answers in (``Accept``), which bodies it reads
(``Content-Type``), JSON bodies in and out, and query parameters parsed the way Confluent's
JAX-RS services parse them.

A service names its types once in :class:`MediaTypes` (the schema registry:
``application/vnd.schemaregistry.v1+json``, ``application/vnd.schemaregistry+json``,
``application/json``); :func:`negotiation_middleware` picks the response type from
``Accept`` (406 when nothing acceptable is offered) and :func:`read_json` refuses other body
types with 415 and bodies that are not JSON with 400, as Confluent's rest-utils does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from .errors import DEFAULT_TYPE_KEY, MEDIA_TYPE_KEY, Handler, HttpError

JSON = "application/json"
OCTET_STREAM = "application/octet-stream"


@dataclass(frozen=True)
class MediaTypes:
    """A service's response types, most preferred first, and the body types it reads.

    A request without ``Content-Type`` (aiohttp reports ``application/octet-stream``) is read
    as JSON, as Jersey does for Confluent's services.
    """

    produces: tuple[str, ...]
    consumes: tuple[str, ...]


MEDIA_TYPES_KEY: web.AppKey[MediaTypes] = web.AppKey("moldau.media_types", MediaTypes)


def parse_accept(header: str | None) -> list[tuple[str, float]]:
    """``Accept`` as (media type, quality) pairs, best first; ``[("*/*", 1.0)]`` when absent.

    Parameters other than ``q`` are dropped; a malformed quality counts as 1.
    """
    if not header or not header.strip():
        return [("*/*", 1.0)]
    found: list[tuple[str, float, int]] = []
    for index, part in enumerate(header.split(",")):
        pieces = [p.strip() for p in part.split(";")]
        media = pieces[0].lower()
        if not media:
            continue
        quality = 1.0
        for param in pieces[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 1.0
        found.append((media, quality, index))
    found.sort(key=lambda item: (-item[1], item[2]))
    return [(media, quality) for media, quality, _ in found]


def _matches(pattern: str, media: str) -> bool:
    if pattern in ("*/*", "*"):
        return True
    if pattern.endswith("/*"):
        return media.startswith(pattern[:-1])
    return pattern == media


def negotiate(header: str | None, produces: Sequence[str]) -> str | None:
    """The response type for an ``Accept`` header: the first acceptable range (by quality,
    then order) that one of ``produces`` matches; None when nothing matches."""
    for pattern, quality in parse_accept(header):
        if quality <= 0:
            continue
        for media in produces:
            if _matches(pattern, media):
                return media
    return None


def negotiation_middleware(media_types: MediaTypes) -> Any:
    """Middleware choosing the response type of every request (406 when none fits)."""

    @web.middleware
    async def negotiate_type(request: web.Request, handler: Handler) -> web.StreamResponse:
        chosen = negotiate(request.headers.get("Accept"), media_types.produces)
        if chosen is None:
            raise HttpError(406, 406, "HTTP 406 Not Acceptable")
        request[MEDIA_TYPE_KEY] = chosen
        return await handler(request)

    return negotiate_type


def install(app: web.Application, media_types: MediaTypes) -> None:
    """Record ``media_types`` on ``app`` (for :func:`read_json` and error bodies)."""
    app[MEDIA_TYPES_KEY] = media_types
    app[DEFAULT_TYPE_KEY] = media_types.produces[0]


async def read_json(request: web.Request) -> Any:
    """The request body parsed as JSON.

    Raises HttpError 415 for a ``Content-Type`` the service does not read, 400 for a body that
    is not JSON (aiohttp raises 413 itself for a body over the size limit).
    """
    media_types = request.app.get(MEDIA_TYPES_KEY)
    media = request.content_type.lower()
    if media_types is not None and media not in media_types.consumes:
        raise HttpError(415, 415, "HTTP 415 Unsupported Media Type")
    body = await request.read()
    if not body.strip():
        raise HttpError(400, 400, "No content to map due to end-of-input")
    return parse_json(body)


def parse_json(body: bytes, error: type[HttpError] = HttpError) -> Any:
    """``body`` parsed as JSON; 400 / 400 (an ``error``) naming what is wrong: not UTF-8, not
    JSON (where), nested too deeply, a number Python does not convert (the REST proxy's
    bodies, and the registry's through :func:`read_json`)."""
    try:
        return json.loads(body)
    except UnicodeDecodeError as exc:
        raise error(400, 400, f"Request body is not UTF-8 text: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise error(400, 400, f"Unexpected JSON: {exc.msg} (line {exc.lineno} column "
                              f"{exc.colno})") from None
    except RecursionError:
        raise error(400, 400, "Unexpected JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise error(400, 400, f"Unexpected JSON: {exc}") from None


def _media_type(request: web.Request) -> str:
    chosen = request.get(MEDIA_TYPE_KEY)
    if chosen:
        return str(chosen)
    return request.app.get(DEFAULT_TYPE_KEY, JSON)


def json_response(request: web.Request, data: Any, status: int = 200) -> web.Response:
    """``data`` as compact JSON in the negotiated content type."""
    body = json.dumps(data, separators=(",", ":"))
    return web.Response(status=status, body=body.encode(), content_type=_media_type(request))


def text_response(request: web.Request, text: str, status: int = 200) -> web.Response:
    """``text`` as the body itself (Confluent's raw ``/schema`` answers), in the negotiated
    content type."""
    return web.Response(status=status, body=text.encode(), content_type=_media_type(request))


def query_bool(request: web.Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter as Java's ``Boolean.valueOf``: ``true`` in any letter case
    is true, anything else false (confluent-kafka sends Python's ``True``/``False``)."""
    value = request.query.get(name)
    if value is None:
        return default
    return value.strip().lower() == "true"


def query_int(request: web.Request, name: str, default: int) -> int:
    """An integer query parameter; not an integer -> 404, as a JAX-RS service answers."""
    value = request.query.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise HttpError(404, 404, "HTTP 404 Not Found") from None
