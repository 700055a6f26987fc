"""Content types of the REST Proxy, as Confluent's proxy names and negotiates them.

API v2 answers ``application/vnd.kafka.v2+json`` by default; it also accepts the embedded
types (``application/vnd.kafka.{binary,json,avro,jsonschema,protobuf}.v2+json``), the
unversioned ``application/vnd.kafka+json`` and ``application/json`` in ``Accept``. Request
bodies may be any of those or ``application/octet-stream`` (what a client that sends no
``Content-Type`` gets); other types are 415. A produce body's type names its embedded format,
binary when the type names none (Confluent's documented rule). API v3 (``/v3/...``) speaks
``application/json``.

:func:`negotiation_middleware` picks the response type of every request (406 when ``Accept``
allows none); handlers read bodies with :func:`read_body`.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from aiohttp import web

from moldau.http import HttpError, parse_json
from moldau.http.content import negotiate, parse_accept
from moldau.http.errors import MEDIA_TYPE_KEY, Handler

V2 = "application/vnd.kafka.v2+json"
KAFKA_JSON = "application/vnd.kafka+json"
JSON = "application/json"
OCTET_STREAM = "application/octet-stream"

#: embedded format -> its v2 content type
EMBEDDED = {
    "binary": "application/vnd.kafka.binary.v2+json",
    "json": "application/vnd.kafka.json.v2+json",
    "avro": "application/vnd.kafka.avro.v2+json",
    "jsonschema": "application/vnd.kafka.jsonschema.v2+json",
    "protobuf": "application/vnd.kafka.protobuf.v2+json",
}
FORMAT_OF = {media: name for name, media in EMBEDDED.items()}
GENERIC = (V2, KAFKA_JSON, JSON)

#: what v2 answers in, most preferred first (``*/*`` gets the first)
V2_PRODUCES = (V2, *EMBEDDED.values(), KAFKA_JSON, JSON)
#: request body types v2 reads
V2_CONSUMES = frozenset({*V2_PRODUCES, OCTET_STREAM})
V3_PRODUCES = (JSON,)
V3_CONSUMES = frozenset({JSON, OCTET_STREAM})


def is_v3(path: str) -> bool:
    return path == "/v3" or path.startswith("/v3/")


def negotiation_middleware() -> Any:
    """Middleware choosing the response type (v2 or v3 by path; 406 when none fits)."""

    @web.middleware
    async def negotiate_type(request: web.Request, handler: Handler) -> web.StreamResponse:
        produces = V3_PRODUCES if is_v3(request.path) else V2_PRODUCES
        request[MEDIA_TYPE_KEY] = produces[0]  # error bodies, until a better one is chosen
        chosen = negotiate(request.headers.get("Accept"), produces)
        if chosen is None:
            raise HttpError(406, 406, "HTTP 406 Not Acceptable")
        request[MEDIA_TYPE_KEY] = chosen
        return await handler(request)

    return negotiate_type


def body_type(request: web.Request) -> str:
    """The request's ``Content-Type`` (``application/octet-stream`` when none was sent)."""
    return request.content_type.lower()


def produce_format(request: web.Request) -> str:
    """The embedded format a produce request's ``Content-Type`` names (415 for a type v2
    does not read)."""
    media = body_type(request)
    if media in FORMAT_OF:
        return FORMAT_OF[media]
    if media in GENERIC or media == OCTET_STREAM:
        return "binary"
    raise HttpError(415, 415, "HTTP 415 Unsupported Media Type")


def records_format(request: web.Request, own: str) -> tuple[str, str]:
    """(embedded format, response type) a GET .../records asks for with ``Accept``.

    An embedded type names its format; the generic types (and ``*/*``) mean binary, as in
    Confluent's proxy, where only an instance of format binary answers them. Among the
    types of the highest quality the instance's own format wins. 406 when nothing fits.
    """
    accepted = [(m, q) for m, q in parse_accept(request.headers.get("Accept")) if q > 0]
    if not accepted:
        raise HttpError(406, 406, "HTTP 406 Not Acceptable")
    best = accepted[0][1]
    if any(q == best and m == EMBEDDED[own] for m, q in accepted):
        return own, EMBEDDED[own]
    for media, _q in accepted:
        if media in FORMAT_OF:
            return FORMAT_OF[media], media
        if media in GENERIC:
            return "binary", media
        if media in ("*/*", "*", "application/*"):
            return "binary", EMBEDDED["binary"]
    raise HttpError(406, 406, "HTTP 406 Not Acceptable")


async def read_body(request: web.Request, *, consumes: Collection[str] = V2_CONSUMES,
                    optional: bool = False) -> Any:
    """The JSON body of ``request``; None for an empty body when ``optional``.

    415 for a ``Content-Type`` the API does not read, 400 for a body that is not JSON
    (aiohttp answers 413 itself for a body over ``request.max.bytes``).
    """
    if "Content-Type" in request.headers and body_type(request) not in consumes:
        raise HttpError(415, 415, "HTTP 415 Unsupported Media Type")
    body = await request.read()
    if not body.strip():
        if optional:
            return None
        raise HttpError(400, 400, "No content to map due to end-of-input")
    return parse_json(body)


def json_answer(request: web.Request, data: Any, status: int = 200,
                media: str | None = None) -> web.Response:
    """``data`` as compact JSON in the negotiated (or the given) content type."""
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return web.Response(status=status, body=body.encode(),
                        content_type=media or request.get(MEDIA_TYPE_KEY) or V2)


def no_content() -> web.Response:
    """204, as Confluent's void resources answer."""
    return web.Response(status=204)
