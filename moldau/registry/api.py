"""Confluent's Schema Registry REST API as aiohttp routes.

Every answer is JSON in the negotiated type (``application/vnd.schemaregistry.v1+json``,
``application/vnd.schemaregistry+json`` or ``application/json``); errors are
``{"error_code", "message"}`` (:mod:`moldau.http.errors`). Boolean query parameters are read
as Java's ``Boolean.valueOf`` (``true`` in any case; confluent-kafka sends ``False``).
Write requests go to the primary (:mod:`.primary`): forwarded unchanged by a secondary.

Routes: ``GET /``; ``GET /schemas``, ``/schemas/types``, ``/schemas/ids/{id}`` (+``/schema``,
``/subjects``, ``/versions``); ``GET /subjects``; ``POST|DELETE /subjects/{s}``;
``GET /subjects/{s}/metadata``;
``GET|POST /subjects/{s}/versions``; ``GET|DELETE /subjects/{s}/versions/{v}`` (+``/schema``,
``/referencedby``); ``GET|PUT|DELETE /config[/{s}]`` and ``/mode[/{s}]``;
``POST /compatibility/subjects/{s}/versions[/{v}]``; ``GET /contexts``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

from moldau.http import json_response, query_bool, query_int, read_json, text_response

from .primary import Primary
from .requests import parse_schema_id, parse_schema_request
from .service import RegistryService

SERVICE_KEY: web.AppKey[RegistryService] = web.AppKey("registry.service", RegistryService)
PRIMARY_KEY: web.AppKey[Any] = web.AppKey("registry.primary", object)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
T = TypeVar("T")


def _service(request: web.Request) -> RegistryService:
    return request.app[SERVICE_KEY]


def _page(request: web.Request, items: list[T]) -> list[T]:
    """``offset`` and ``limit`` (negative: no limit) of Confluent's list endpoints."""
    offset = max(query_int(request, "offset", 0), 0)
    limit = query_int(request, "limit", -1)
    items = items[offset:]
    return items if limit < 0 else items[:limit]


def write(handler: Handler) -> Handler:
    """Run a write on the primary: forward it from a secondary (which waits a little for an
    election under way; 50004 when none ends in time), or make it here when this instance is
    (or has just become) the primary."""

    async def on_primary(request: web.Request) -> web.StreamResponse:
        primary: Primary = request.app[PRIMARY_KEY]
        if not primary.is_primary:
            answer = await primary.forward(request)
            if answer is not None:
                return answer
        return await handler(request)

    on_primary.__name__ = handler.__name__
    on_primary.__doc__ = handler.__doc__
    return on_primary


def _subject(request: web.Request) -> str:
    return request.match_info["subject"]


def _fmt(request: web.Request) -> str:
    return request.query.get("format", "")


# --- root, schemas -------------------------------------------------------------------------

async def root(request: web.Request) -> web.Response:
    """``GET /``: ``{}`` (Confluent's answer, used as a health check)."""
    return json_response(request, {})


async def schema_types(request: web.Request) -> web.Response:
    return json_response(request, _service(request).schema_types())


async def list_schemas(request: web.Request) -> web.Response:
    found = await _service(request).schemas(
        request.query.get("subjectPrefix"), deleted=query_bool(request, "deleted"),
        latest_only=query_bool(request, "latestOnly"))
    return json_response(request, _page(request, found))


async def schema_by_id(request: web.Request) -> web.Response:
    answer = await _service(request).schema_by_id(
        parse_schema_id(request.match_info["id"]), fmt=_fmt(request),
        fetch_max_id=query_bool(request, "fetchMaxId"))
    return json_response(request, answer)


async def raw_schema_by_id(request: web.Request) -> web.Response:
    text = await _service(request).raw_schema_by_id(
        parse_schema_id(request.match_info["id"]), fmt=_fmt(request))
    return text_response(request, text)


async def subjects_for_id(request: web.Request) -> web.Response:
    found = await _service(request).subjects_for_id(
        parse_schema_id(request.match_info["id"]), deleted=query_bool(request, "deleted"))
    return json_response(request, _page(request, found))


async def versions_for_id(request: web.Request) -> web.Response:
    found = await _service(request).versions_for_id(
        parse_schema_id(request.match_info["id"]), deleted=query_bool(request, "deleted"))
    return json_response(request, _page(request, found))


# --- subjects --------------------------------------------------------------------------

async def list_subjects(request: web.Request) -> web.Response:
    found = await _service(request).subjects(
        request.query.get("subjectPrefix"), deleted=query_bool(request, "deleted"),
        deleted_only=query_bool(request, "deletedOnly")
        or query_bool(request, "deleted_only"))
    return json_response(request, _page(request, found))


async def lookup(request: web.Request) -> web.Response:
    schema = parse_schema_request(await read_json(request))
    answer = await _service(request).lookup(
        _subject(request), schema, normalize=query_bool(request, "normalize"),
        deleted=query_bool(request, "deleted"), fmt=_fmt(request))
    return json_response(request, answer)


@write
async def delete_subject(request: web.Request) -> web.Response:
    deleted = await _service(request).delete_subject(
        _subject(request), query_bool(request, "permanent"))
    return json_response(request, deleted)


async def list_versions(request: web.Request) -> web.Response:
    found = await _service(request).versions(
        _subject(request), deleted=query_bool(request, "deleted"),
        deleted_only=query_bool(request, "deletedOnly"))
    return json_response(request, _page(request, found))


async def latest_with_metadata(request: web.Request) -> web.Response:
    """``key`` and ``value`` come in pairs, as Confluent pairs them (extra ones ignored)."""
    wanted = dict(zip(request.query.getall("key", []), request.query.getall("value", []),
                      strict=False))
    answer = await _service(request).latest_with_metadata(
        _subject(request), wanted, deleted=query_bool(request, "deleted"), fmt=_fmt(request))
    return json_response(request, answer)


@write
async def register(request: web.Request) -> web.Response:
    schema = parse_schema_request(await read_json(request))
    answer = await _service(request).register(
        _subject(request), schema, normalize=query_bool(request, "normalize"),
        force=query_bool(request, "force"))
    return json_response(request, answer)


async def get_version(request: web.Request) -> web.Response:
    answer = await _service(request).get_version(
        _subject(request), request.match_info["version"],
        deleted=query_bool(request, "deleted"), fmt=_fmt(request))
    return json_response(request, answer)


async def raw_version(request: web.Request) -> web.Response:
    text = await _service(request).raw_version(
        _subject(request), request.match_info["version"],
        deleted=query_bool(request, "deleted"), fmt=_fmt(request))
    return text_response(request, text)


async def referenced_by(request: web.Request) -> web.Response:
    found = await _service(request).referenced_by(
        _subject(request), request.match_info["version"],
        deleted=query_bool(request, "deleted"))
    return json_response(request, _page(request, found))


@write
async def delete_version(request: web.Request) -> web.Response:
    version = await _service(request).delete_version(
        _subject(request), request.match_info["version"], query_bool(request, "permanent"))
    return json_response(request, version)


# --- config and mode ---------------------------------------------------------------------

def _optional_subject(request: web.Request) -> str | None:
    return request.match_info.get("subject")


async def get_config(request: web.Request) -> web.Response:
    answer = await _service(request).get_config(
        _optional_subject(request), default_to_global=query_bool(request, "defaultToGlobal"))
    return json_response(request, answer)


@write
async def put_config(request: web.Request) -> web.Response:
    answer = await _service(request).set_config(_optional_subject(request),
                                                await read_json(request))
    return json_response(request, answer)


@write
async def delete_config(request: web.Request) -> web.Response:
    return json_response(request,
                         await _service(request).delete_config(_optional_subject(request)))


async def get_mode(request: web.Request) -> web.Response:
    answer = await _service(request).get_mode(
        _optional_subject(request), default_to_global=query_bool(request, "defaultToGlobal"))
    return json_response(request, answer)


@write
async def put_mode(request: web.Request) -> web.Response:
    answer = await _service(request).set_mode(
        _optional_subject(request), await read_json(request), query_bool(request, "force"))
    return json_response(request, answer)


@write
async def delete_mode(request: web.Request) -> web.Response:
    return json_response(request,
                         await _service(request).delete_mode(_optional_subject(request)))


# --- compatibility, contexts ---------------------------------------------------------------

async def compatibility(request: web.Request) -> web.Response:
    schema = parse_schema_request(await read_json(request))
    answer = await _service(request).check_compatibility(
        _subject(request), request.match_info.get("version"), schema,
        normalize=query_bool(request, "normalize"), verbose=query_bool(request, "verbose"))
    return json_response(request, answer)


async def contexts(request: web.Request) -> web.Response:
    return json_response(request, _page(request, await _service(request).contexts()))


def add_routes(app: web.Application, service: RegistryService, primary: Primary) -> None:
    """Register every route of the API on ``app``."""
    app[SERVICE_KEY] = service
    app[PRIMARY_KEY] = primary
    r = app.router
    r.add_get("/", root)
    r.add_get("/schemas", list_schemas)
    r.add_get("/schemas/types", schema_types)
    r.add_get("/schemas/ids/{id}", schema_by_id)
    r.add_get("/schemas/ids/{id}/schema", raw_schema_by_id)
    r.add_get("/schemas/ids/{id}/subjects", subjects_for_id)
    r.add_get("/schemas/ids/{id}/versions", versions_for_id)
    r.add_get("/subjects", list_subjects)
    r.add_post("/subjects/{subject}", lookup)
    r.add_delete("/subjects/{subject}", delete_subject)
    r.add_get("/subjects/{subject}/metadata", latest_with_metadata)
    r.add_get("/subjects/{subject}/versions", list_versions)
    r.add_post("/subjects/{subject}/versions", register)
    r.add_get("/subjects/{subject}/versions/{version}", get_version)
    r.add_delete("/subjects/{subject}/versions/{version}", delete_version)
    r.add_get("/subjects/{subject}/versions/{version}/schema", raw_version)
    r.add_get("/subjects/{subject}/versions/{version}/referencedby", referenced_by)
    for prefix in ("/config", "/config/{subject}"):
        r.add_get(prefix, get_config)
        r.add_put(prefix, put_config)
        r.add_delete(prefix, delete_config)
    for prefix in ("/mode", "/mode/{subject}"):
        r.add_get(prefix, get_mode)
        r.add_put(prefix, put_mode)
        r.add_delete(prefix, delete_mode)
    r.add_post("/compatibility/subjects/{subject}/versions", compatibility)
    r.add_post("/compatibility/subjects/{subject}/versions/{version}", compatibility)
    r.add_get("/contexts", contexts)
