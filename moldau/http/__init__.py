"""Moldau's one HTTP stack (aiohttp), shared by the schema registry, the REST proxy and the
console: listener parsing and the service lifecycle (:mod:`.server`), JSON error bodies for
every failure (:mod:`.errors`) and content negotiation (:mod:`.content`).

This layer imports nothing of moldau but itself; the services built on it (``registry``,
``rest``, ``console``) and ``cli`` import it.
"""

from .content import (
    JSON,
    OCTET_STREAM,
    MediaTypes,
    json_response,
    negotiation_middleware,
    parse_accept,
    parse_json,
    query_bool,
    query_int,
    read_json,
    text_response,
)
from .errors import HttpError, error_middleware, error_response
from .server import HttpService, Listener, ListenerError, parse_listeners

__all__ = [
    "JSON",
    "OCTET_STREAM",
    "HttpError",
    "HttpService",
    "Listener",
    "ListenerError",
    "MediaTypes",
    "error_middleware",
    "error_response",
    "json_response",
    "negotiation_middleware",
    "parse_accept",
    "parse_json",
    "parse_listeners",
    "query_bool",
    "query_int",
    "read_json",
    "text_response",
]
