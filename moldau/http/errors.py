"""Every failure becomes a JSON body ``{"error_code": ..., "message": ...}``.

Confluent's services (schema registry, REST proxy) answer errors this way, and their clients
read ``error_code`` from the body. :class:`HttpError` carries the HTTP status, the service's
error code and a message; :func:`error_middleware` turns it, aiohttp's own HTTP exceptions
(unknown route 404, 405, 413 for a body over the size limit) and any unexpected exception
(500, error code 50001, the cause logged here and never sent to the client) into that body.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger("moldau.http")

#: request key under which :func:`.content.negotiation_middleware` stores the response type
#: (aiohttp 3.12+ has typed request keys and warns about plain strings)
MEDIA_TYPE_KEY: Any = (web.RequestKey("moldau.media_type", str)
                       if hasattr(web, "RequestKey") else "moldau.media_type")
#: app key: the content type of error bodies when negotiation did not pick one
DEFAULT_TYPE_KEY: web.AppKey[str] = web.AppKey("moldau.default_media_type", str)

#: app key: the request body size limit (aiohttp's ``client_max_size``), for the 413 message
MAX_SIZE_KEY: web.AppKey[int] = web.AppKey("moldau.client_max_size", int)

#: Confluent's code for an unexpected server-side failure ("store error")
INTERNAL_ERROR_CODE = 50001

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpError(Exception):
    """An error answered as ``status`` with body ``{"error_code": code, "message": ...}``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status}, {self.error_code}, {self.message!r})"


def error_response(request: web.Request | None, status: int, error_code: int,
                   message: str) -> web.Response:
    """The JSON error body in the content type negotiated for ``request``."""
    media_type = "application/json"
    if request is not None:
        media_type = request.get(MEDIA_TYPE_KEY) or request.app.get(
            DEFAULT_TYPE_KEY, media_type)
    body = json.dumps({"error_code": error_code, "message": message}, separators=(",", ":"))
    return web.Response(status=status, body=body.encode(), content_type=media_type)


def _from_aiohttp(exc: web.HTTPException, request: web.Request) -> tuple[int, int, str]:
    status = exc.status
    if status == 413:
        limit = request.app.get(MAX_SIZE_KEY)
        text = f" of {limit} bytes" if limit is not None else ""
        return 413, 413, f"Request body is larger than the limit{text}"
    return status, status, f"HTTP {status} {exc.reason or ''}".strip()


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer every error as a JSON body (see the module docstring)."""
    try:
        return await handler(request)
    except HttpError as exc:
        return error_response(request, exc.status, exc.error_code, exc.message)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise  # redirects and the like are not errors
        status, code, message = _from_aiohttp(exc, request)
        response = error_response(request, status, code, message)
        if status == 405:
            allow = exc.headers.get("Allow")
            if allow:
                response.headers["Allow"] = allow
        return response
    except (asyncio.CancelledError, ConnectionResetError):
        raise  # the client went away: nothing to answer
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return error_response(request, 500, INTERNAL_ERROR_CODE, "Internal Server Error")
