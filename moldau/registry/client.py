"""Moldau's Schema Registry client: Confluent's REST API over aiohttp, with a sync facade.

:class:`AsyncSchemaRegistryClient` speaks the API that Confluent documents (and that moldau's
registry, Confluent's and Karapace serve); :class:`SchemaRegistryClient` runs it on the moldau
client's background event loop for synchronous callers (scripts, Spark executors). Both cache
as Confluent's clients do: schemas by id (they never change), ids by (subject, schema), version
by number, and the latest version of a subject for ``cache.latest.ttl.sec`` (forever when
unset). Failures raise :class:`SchemaRegistryError` carrying the HTTP status, the registry's
``error_code`` and ``message``.

Configuration keys are those of confluent-kafka's Python client: ``url`` (comma-separated; each
is tried in turn when one cannot be reached), ``basic.auth.user.info`` (``user:password``, or
credentials in the URL), ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``, ``ssl.key.password``, ``timeout`` (seconds per request, default 30),
``cache.capacity`` (1000), ``cache.latest.ttl.sec``, ``max.retries`` (3), ``retries.wait.ms``
(1000), ``retries.max.wait.ms`` (20000). :func:`config_from_properties` maps the Java names the
console tools take (``schema.registry.url``, ``schema.registry.basic.auth.user.info``, ...).
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import ssl
import time
from collections import OrderedDict
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import aiohttp

T = TypeVar("T")

ACCEPT = ("application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json; qs=0.9, "
          "application/json; qs=0.5")
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# The client's configuration keys (confluent-kafka's names).
KNOWN_KEYS = frozenset({
    "url", "basic.auth.user.info", "basic.auth.credentials.source", "ssl.ca.location",
    "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "timeout",
    "cache.capacity", "cache.latest.ttl.sec", "max.retries", "retries.wait.ms",
    "retries.max.wait.ms",
})


class SchemaRegistryError(Exception):
    """A request the registry refused (or that never got an answer).

    ``http_status`` is the HTTP status (-1 when no answer came), ``error_code`` the registry's
    code (e.g. 40401 subject not found, 40403 schema not found, 409 incompatible, 42201
    invalid schema; -1 when the body was not a registry error).
    """

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(f"{message} (HTTP status code {http_status}, SR code {error_code})")
        self.http_status = http_status
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class SchemaReference:
    """A reference to another registered schema: import ``name``, its subject and version."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema as the API carries it: text, type (AVRO, JSON, PROTOBUF) and references."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The request body of register, lookup and compatibility requests (Confluent leaves
        ``schemaType`` out for AVRO and ``references`` when empty)."""
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [r.to_json() for r in self.references]
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Schema:
        refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"]))
                     for r in data.get("references") or ())
        return cls(data["schema"], data.get("schemaType") or "AVRO", refs)


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema under a subject: its global id and its version there (None when unknown)."""

    schema_id: int
    schema: Schema
    subject: str | None = None
    version: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], subject: str | None = None) -> RegisteredSchema:
        return cls(int(data["id"]), Schema.from_json(data), data.get("subject", subject),
                   data.get("version"))


def config_from_properties(props: Mapping[str, str]) -> dict[str, Any]:
    """Client settings from the properties of Confluent's Java tools and serializers.

    ``schema.registry.url`` becomes ``url``; ``schema.registry.<key>`` and the bare
    ``basic.auth.user.info`` / ``basic.auth.credentials.source`` become ``<key>``.
    Other properties are not the client's and are left out.
    """
    config: dict[str, Any] = {}
    for key, value in props.items():
        name = key[len("schema.registry."):] if key.startswith("schema.registry.") else key
        if name in KNOWN_KEYS:
            config[name] = value
    return config


def references_of(items: Sequence[Mapping[str, Any]]) -> tuple[SchemaReference, ...]:
    """References from JSON (``[{"name":..., "subject":..., "version":...}]``), as the console
    tools' ``value.refs`` property gives them."""
    try:
        return tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                     for r in items)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a schema reference needs name, subject and version: {exc}") from None


@dataclass
class _Lru:
    """A small LRU map (Confluent's clients bound their caches by ``cache.capacity``)."""

    capacity: int
    items: OrderedDict[Any, Any] = field(default_factory=OrderedDict)

    def get(self, key: Any) -> Any:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.capacity:
            self.items.popitem(last=False)

    def drop_where(self, predicate: Any) -> None:
        for key in [k for k in self.items if predicate(k)]:
            del self.items[key]


def _number(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key)
    if value is None:
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be a number, not {value!r}") from None


def _flag(value: bool | None) -> str | None:
    return None if value is None else ("true" if value else "false")


class AsyncSchemaRegistryClient:
    """Confluent's Schema Registry API over aiohttp (use it inside one event loop)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        unknown = sorted(set(config) - KNOWN_KEYS)
        if unknown:
            raise ValueError(f"unknown schema registry client settings: {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(KNOWN_KEYS))})")
        urls = [u.strip().rstrip("/") for u in str(config.get("url") or "").split(",")]
        urls = [u for u in urls if u]
        if not urls:
            raise ValueError("the schema registry url is missing (url, or the property "
                             "schema.registry.url), e.g. http://localhost:8081")
        self.credentials: tuple[str, str] | None = None  # basic auth (user, password)
        self.urls: list[str] = []
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"invalid schema registry url {url!r}: expected "
                                 "http://HOST:PORT or https://HOST:PORT")
            if parts.username is not None:
                self.credentials = (unquote(parts.username), unquote(parts.password or ""))
                netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
                url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
            self.urls.append(url)
        user_info = config.get("basic.auth.user.info")
        if user_info:
            if self.credentials is not None:
                raise ValueError("basic.auth.user.info given together with credentials in the "
                                 "url; remove one of them")
            user, sep, password = str(user_info).partition(":")
            if not sep:
                raise ValueError("basic.auth.user.info must be in the form user:password")
            self.credentials = (user, password)
        self.timeout = _number(config, "timeout", 30.0)
        self.max_retries = int(_number(config, "max.retries", 3))
        self.retries_wait_ms = _number(config, "retries.wait.ms", 1000)
        self.retries_max_wait_ms = _number(config, "retries.max.wait.ms", 20000)
        capacity = int(_number(config, "cache.capacity", 1000))
        ttl = config.get("cache.latest.ttl.sec")
        self.latest_ttl_s = None if ttl is None or float(ttl) < 0 else float(ttl)
        self._ssl = self._ssl_context(config)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._by_id = _Lru(capacity)        # (id, fmt) -> Schema
        self._by_schema = _Lru(capacity)    # (subject, Schema, normalize) -> RegisteredSchema
        self._versions = _Lru(capacity)     # (subject, version, fmt) -> RegisteredSchema
        self._latest = _Lru(capacity)       # (subject, fmt) -> (RegisteredSchema, expiry)

    @staticmethod
    def _ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext | None:
        keys = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")
        if not any(config.get(k) for k in keys):
            return None
        context = ssl.create_default_context(cafile=config.get("ssl.ca.location") or None)
        if config.get("ssl.certificate.location"):
            context.load_cert_chain(config["ssl.certificate.location"],
                                    config.get("ssl.key.location") or None,
                                    config.get("ssl.key.password") or None)
        return context

    # --- HTTP ------------------------------------------------------------------------------

    def _get_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed:
            headers = {"Accept": ACCEPT, "User-Agent": "moldau-schema-registry-client"}
            if self.credentials is not None:
                token = base64.b64encode(":".join(self.credentials).encode("utf-8"))
                headers["Authorization"] = "Basic " + token.decode("ascii")
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout), headers=headers,
                connector=aiohttp.TCPConnector(ssl=self._ssl or True))
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError("this schema registry client belongs to another event loop; "
                               "use one client per loop (or the sync SchemaRegistryClient)")
        return self._session

    async def request(self, method: str, path: str, body: Any = None,
                      params: Mapping[str, str | None] | None = None) -> Any:
        """One API call: each url in turn until one answers; retries as Confluent's client
        (HTTP 408, 429, 5xx and network errors, ``max.retries`` times, jittered backoff)."""
        session = self._get_session()
        query = {k: v for k, v in (params or {}).items() if v is not None}
        data = None if body is None else json.dumps(body)
        headers = {} if body is None else {"Content-Type": CONTENT_TYPE}
        last: SchemaRegistryError | None = None
        for base in self.urls:
            for attempt in range(self.max_retries + 1):
                try:
                    async with session.request(method, base + path, params=query, data=data,
                                               headers=headers) as response:
                        status = response.status
                        text = await response.text()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    last = SchemaRegistryError(
                        -1, -1, f"cannot reach the schema registry at {base}: "
                                f"{exc.__class__.__name__}: {exc}")
                    last.__cause__ = exc
                else:
                    if 200 <= status < 300:
                        return json.loads(text) if text else None
                    last = self._error(status, text)
                    if status not in RETRIABLE_STATUS:
                        raise last
                if attempt < self.max_retries:
                    delay = min(self.retries_wait_ms * 2 ** attempt, self.retries_max_wait_ms)
                    await asyncio.sleep(random.random() * delay / 1000)
        assert last is not None
        raise last

    @staticmethod
    def _error(status: int, text: str) -> SchemaRegistryError:
        try:
            body = json.loads(text)
            return SchemaRegistryError(status, int(body["error_code"]), str(body["message"]))
        except (ValueError, KeyError, TypeError):
            return SchemaRegistryError(status, -1,
                                       f"Unknown Schema Registry Error: {text[:500]!r}")

    async def close(self) -> None:
        """Close the HTTP session (the client can be used again afterwards)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> AsyncSchemaRegistryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- schemas ---------------------------------------------------------------------------

    async def register_schema(self, subject: str, schema: Schema,
                              normalize_schemas: bool = False) -> int:
        """Register ``schema`` under ``subject`` (or find it there); its global id."""
        return (await self.register_schema_full_response(
            subject, schema, normalize_schemas)).schema_id

    async def register_schema_full_response(self, subject: str, schema: Schema,
                                            normalize_schemas: bool = False
                                            ) -> RegisteredSchema:
        """Register ``schema`` under ``subject``: POST /subjects/{subject}/versions."""
        key = (subject, schema, normalize_schemas)
        cached = self._by_schema.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        data = await self.request("POST", f"/subjects/{_q(subject)}/versions", schema.to_json(),
                                  {"normalize": _flag(normalize_schemas or None)})
        registered = RegisteredSchema(int(data["id"]), schema, subject, data.get("version"))
        self._by_schema.put(key, registered)
        self._by_id.put((registered.schema_id, None), schema)
        return registered

    async def get_schema(self, schema_id: int, subject_name: str | None = None,
                         fmt: str | None = None) -> Schema:
        """The schema with global id ``schema_id``: GET /schemas/ids/{id} (``fmt``: e.g.
        ``serialized`` for Protobuf's base64 FileDescriptorProto)."""
        key = (schema_id, fmt)
        cached = self._by_id.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        data = await self.request("GET", f"/schemas/ids/{int(schema_id)}",
                                  params={"subject": subject_name, "format": fmt})
        schema = Schema.from_json(data)
        self._by_id.put(key, schema)
        return schema

    async def lookup_schema(self, subject: str, schema: Schema, normalize_schemas: bool = False,
                            deleted: bool = False) -> RegisteredSchema:
        """Is ``schema`` registered under ``subject``? POST /subjects/{subject} (40403 if not)."""
        key = (subject, schema, normalize_schemas)
        cached = self._by_schema.get(key)
        if cached is not None and cached.version is not None:
            return cached  # type: ignore[no-any-return]
        data = await self.request("POST", f"/subjects/{_q(subject)}", schema.to_json(),
                                  {"normalize": _flag(normalize_schemas or None),
                                   "deleted": _flag(deleted or None)})
        registered = RegisteredSchema(int(data["id"]), schema, data.get("subject", subject),
                                      data.get("version"))
        self._by_schema.put(key, registered)
        return registered

    async def get_latest_version(self, subject: str, fmt: str | None = None
                                 ) -> RegisteredSchema:
        """The newest live version of ``subject`` (cached for ``cache.latest.ttl.sec``)."""
        key = (subject, fmt)
        cached = self._latest.get(key)
        if cached is not None and (cached[1] is None or cached[1] > time.monotonic()):
            return cached[0]  # type: ignore[no-any-return]
        data = await self.request("GET", f"/subjects/{_q(subject)}/versions/latest",
                                  params={"format": fmt})
        registered = RegisteredSchema.from_json(data, subject)
        expiry = None if self.latest_ttl_s is None else time.monotonic() + self.latest_ttl_s
        self._latest.put(key, (registered, expiry))
        self._by_id.put((registered.schema_id, fmt), registered.schema)
        return registered

    async def get_version(self, subject: str, version: int, deleted: bool = False,
                          fmt: str | None = None) -> RegisteredSchema:
        """Version ``version`` of ``subject`` (a number; versions never change)."""
        key = (subject, int(version), fmt)
        cached = self._versions.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        data = await self.request("GET", f"/subjects/{_q(subject)}/versions/{int(version)}",
                                  params={"deleted": _flag(deleted or None), "format": fmt})
        registered = RegisteredSchema.from_json(data, subject)
        self._versions.put(key, registered)
        return registered

    async def get_versions(self, subject: str) -> list[int]:
        """The live version numbers of ``subject``."""
        return [int(v) for v in await self.request("GET", f"/subjects/{_q(subject)}/versions")]

    async def get_subjects(self, deleted: bool = False) -> list[str]:
        """Every subject (soft-deleted ones too with ``deleted``)."""
        return list(await self.request("GET", "/subjects",
                                       params={"deleted": _flag(deleted or None)}))

    async def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Soft-delete (or with ``permanent``, hard-delete) ``subject``; the versions deleted."""
        result = await self.request("DELETE", f"/subjects/{_q(subject)}",
                                    params={"permanent": _flag(permanent or None)})
        self._forget(subject)
        return [int(v) for v in result]

    async def delete_version(self, subject: str, version: int | str,
                             permanent: bool = False) -> int:
        """Delete one version of ``subject``; its number."""
        result = await self.request("DELETE", f"/subjects/{_q(subject)}/versions/{version}",
                                    params={"permanent": _flag(permanent or None)})
        self._forget(subject)
        return int(result)

    def _forget(self, subject: str) -> None:
        for cache in (self._by_schema, self._versions, self._latest):
            cache.drop_where(lambda key: key[0] == subject)

    async def get_schema_types(self) -> list[str]:
        """The schema types the registry supports: GET /schemas/types."""
        return list(await self.request("GET", "/schemas/types"))

    # --- config and compatibility -----------------------------------------------------------

    async def get_config(self, subject: str | None = None,
                         default_to_global: bool = False) -> dict[str, Any]:
        """GET /config or /config/{subject}: e.g. ``{"compatibilityLevel": "BACKWARD"}``."""
        path = "/config" if subject is None else f"/config/{_q(subject)}"
        return dict(await self.request(
            "GET", path, params={"defaultToGlobal": _flag(default_to_global or None)}))

    async def set_config(self, subject: str | None = None, compatibility: str | None = None,
                         normalize: bool | None = None) -> dict[str, Any]:
        """PUT /config or /config/{subject} with a compatibility level and/or normalize."""
        body: dict[str, Any] = {}
        if compatibility is not None:
            body["compatibility"] = compatibility.upper()
        if normalize is not None:
            body["normalize"] = normalize
        path = "/config" if subject is None else f"/config/{_q(subject)}"
        return dict(await self.request("PUT", path, body))

    async def get_compatibility(self, subject: str | None = None) -> str:
        """The compatibility level of ``subject`` (or the global one)."""
        config = await self.get_config(subject, default_to_global=subject is not None)
        return str(config.get("compatibilityLevel") or config.get("compatibility"))

    async def set_compatibility(self, subject: str | None = None, level: str = "BACKWARD"
                                ) -> str:
        """Set the compatibility level of ``subject`` (or the global one); the level set."""
        return str((await self.set_config(subject, level))["compatibility"])

    async def test_compatibility(self, subject: str, schema: Schema,
                                 version: int | str = "latest", verbose: bool = False
                                 ) -> tuple[bool, list[str]]:
        """Can ``schema`` join ``subject`` next to ``version``? (compatible, the messages)."""
        data = await self.request(
            "POST", f"/compatibility/subjects/{_q(subject)}/versions/{version}",
            schema.to_json(), {"verbose": _flag(verbose or None)})
        return bool(data["is_compatible"]), list(data.get("messages") or ())


def _q(subject: str) -> str:
    return quote(subject, safe="")


class SchemaRegistryClient:
    """Synchronous facade: each call runs on the moldau client's background event loop.

    ``aio`` is the underlying :class:`AsyncSchemaRegistryClient` (bound to that loop);
    :meth:`run` runs any coroutine there and waits, which the serializers use on a cache miss.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.aio = AsyncSchemaRegistryClient(config)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the background loop and return its result."""
        from moldau.client.sync import background_loop

        loop = background_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("the sync schema registry client was called from its own event "
                               "loop; use its async client (.aio) there")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    def close(self) -> None:
        self.run(self.aio.close())

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register_schema(self, subject: str, schema: Schema,
                        normalize_schemas: bool = False) -> int:
        return self.run(self.aio.register_schema(subject, schema, normalize_schemas))

    def register_schema_full_response(self, subject: str, schema: Schema,
                                      normalize_schemas: bool = False) -> RegisteredSchema:
        return self.run(self.aio.register_schema_full_response(subject, schema,
                                                                normalize_schemas))

    def get_schema(self, schema_id: int, subject_name: str | None = None,
                   fmt: str | None = None) -> Schema:
        return self.run(self.aio.get_schema(schema_id, subject_name, fmt))

    def lookup_schema(self, subject: str, schema: Schema, normalize_schemas: bool = False,
                      deleted: bool = False) -> RegisteredSchema:
        return self.run(self.aio.lookup_schema(subject, schema, normalize_schemas, deleted))

    def get_latest_version(self, subject: str, fmt: str | None = None) -> RegisteredSchema:
        return self.run(self.aio.get_latest_version(subject, fmt))

    def get_version(self, subject: str, version: int, deleted: bool = False,
                    fmt: str | None = None) -> RegisteredSchema:
        return self.run(self.aio.get_version(subject, version, deleted, fmt))

    def get_versions(self, subject: str) -> list[int]:
        return self.run(self.aio.get_versions(subject))

    def get_subjects(self, deleted: bool = False) -> list[str]:
        return self.run(self.aio.get_subjects(deleted))

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        return self.run(self.aio.delete_subject(subject, permanent))

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> int:
        return self.run(self.aio.delete_version(subject, version, permanent))

    def get_schema_types(self) -> list[str]:
        return self.run(self.aio.get_schema_types())

    def get_config(self, subject: str | None = None,
                   default_to_global: bool = False) -> dict[str, Any]:
        return self.run(self.aio.get_config(subject, default_to_global))

    def set_config(self, subject: str | None = None, compatibility: str | None = None,
                   normalize: bool | None = None) -> dict[str, Any]:
        return self.run(self.aio.set_config(subject, compatibility, normalize))

    def get_compatibility(self, subject: str | None = None) -> str:
        return self.run(self.aio.get_compatibility(subject))

    def set_compatibility(self, subject: str | None = None, level: str = "BACKWARD") -> str:
        return self.run(self.aio.set_compatibility(subject, level))

    def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest",
                           verbose: bool = False) -> tuple[bool, list[str]]:
        return self.run(self.aio.test_compatibility(subject, schema, version, verbose))


RegistryClient = AsyncSchemaRegistryClient | SchemaRegistryClient

__all__ = [
    "AsyncSchemaRegistryClient", "RegisteredSchema", "RegistryClient", "Schema",
    "SchemaReference", "SchemaRegistryClient", "SchemaRegistryError", "config_from_properties",
    "references_of",
]

