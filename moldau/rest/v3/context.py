"""What API v3 needs from the REST proxy around it, and the small pieces every v3 module
shares: the cluster check, links (``metadata.self``, ``related``) and resource names (CRNs).

:class:`V3Context` is the seam with the application (``moldau.rest.app``): an object with a
started :class:`~moldau.client.AdminClient` (``admin``) and
:class:`~moldau.client.Producer` (``producer``), optionally a schema registry client
(``registry``, an :class:`~moldau.registry.client.AsyncSchemaRegistryClient`; None when
``schema.registry.url`` is not set) and an advertised base URI (``base_url``, e.g.
``http://proxy.example:8082``; None: links are built from the request's scheme and Host
header, as Confluent's proxy does without ``advertised.listeners``). ``register_v3`` reads
these attributes on every request, so the application may start its clients after
registering the routes.

Links follow Confluent's ``UrlFactory`` (``<base>/v3/clusters/<id>/...``) and resource names
its ``CrnFactory`` (``crn:///kafka=<id>/topic=<name>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from aiohttp import web

from .errors import V3Error, topic_or_partition_missing

if TYPE_CHECKING:
    from moldau.client import AdminClient, Producer, TopicInfo
    from moldau.registry.client import AsyncSchemaRegistryClient


class V3Context(Protocol):
    """The application's side of the seam (see the module docstring)."""

    admin: AdminClient
    producer: Producer


@dataclass
class V3State:
    """Per-application state of API v3: the context and the cluster id once learned."""

    ctx: Any
    cluster_id: str | None = None
    serializers: dict[Any, Any] = field(default_factory=dict)

    @property
    def admin(self) -> AdminClient:
        """The started admin client of the context."""
        return self.ctx.admin  # type: ignore[no-any-return]

    @property
    def producer(self) -> Producer:
        """The started producer of the context."""
        return self.ctx.producer  # type: ignore[no-any-return]

    @property
    def registry(self) -> AsyncSchemaRegistryClient | None:
        """The schema registry client; None when the context has none (or cannot make one:
        a client without a URL raises ValueError)."""
        try:
            return getattr(self.ctx, "registry", None)
        except ValueError:
            return None

    async def local_cluster_id(self) -> str:
        """The id of the cluster behind ``bootstrap.servers`` (asked once, then kept)."""
        if self.cluster_id is None:
            info = await self.admin.describe_cluster()
            self.cluster_id = info.cluster_id or ""
        return self.cluster_id


STATE_KEY: web.AppKey[V3State] = web.AppKey("moldau.rest.v3", V3State)


def state(request: web.Request) -> V3State:
    """The v3 state of the request's application."""
    return request.app[STATE_KEY]


async def check_cluster(request: web.Request) -> str:
    """The ``cluster_id`` of the path when it names our cluster; 404 otherwise."""
    wanted = request.match_info["cluster_id"]
    if wanted != await state(request).local_cluster_id():
        raise V3Error(404, 404, f"Cluster {wanted} cannot be found.")
    return wanted


def base_url(request: web.Request) -> str:
    """``scheme://host:port`` that links start with."""
    configured = getattr(state(request).ctx, "base_url", None)
    if configured:
        return str(configured).rstrip("/")
    return f"{request.scheme}://{request.host}"


class Links:
    """Builds the links and resource names of one request's answer."""

    def __init__(self, request: web.Request, cluster_id: str) -> None:
        self.base = base_url(request)
        self.cluster_id = cluster_id

    def url(self, *segments: str | int) -> str:
        """``<base>/v3/clusters/<id>/<segments...>`` (each segment percent-encoded)."""
        path = "/".join(quote(str(s), safe="-._~") for s in segments)
        cluster = quote(self.cluster_id, safe="-._~")
        return f"{self.base}/v3/clusters/{cluster}" + (f"/{path}" if path else "")

    def related(self, *segments: str | int) -> dict[str, str]:
        """A relationship: ``{"related": url}``."""
        return {"related": self.url(*segments)}

    def crn(self, *pairs: tuple[str, str | int]) -> str:
        """``crn:///kafka=<cluster>/<kind>=<name>/...``."""
        parts = [f"kafka={self.cluster_id}"] + [f"{kind}={name}" for kind, name in pairs]
        return "crn:///" + "/".join(parts)

    def resource(self, kind: str, segments: tuple[str | int, ...],
                 crn: tuple[tuple[str, str | int], ...] | None) -> dict[str, Any]:
        """The ``kind``/``metadata`` head of a resource."""
        metadata: dict[str, Any] = {"self": self.url(*segments)}
        if crn is not None:
            metadata["resource_name"] = self.crn(*crn)
        return {"kind": kind, "metadata": metadata}

    def collection(self, kind: str, segments: tuple[str | int, ...],
                   data: list[dict[str, Any]]) -> dict[str, Any]:
        """A list answer: ``kind``, ``metadata`` (self, next: null) and ``data``."""
        return {"kind": kind, "metadata": {"self": self.url(*segments), "next": None},
                "data": data}


async def describe_topic(request: web.Request, name: str) -> TopicInfo:
    """Metadata of one topic; 404 (40403) when it does not exist.

    Names that turn out unknown are dropped from the admin client's tracked topics again, so
    requests for made-up names do not make every later metadata refresh bigger.
    """
    from moldau.client import AdminError

    admin = state(request).admin
    try:
        return (await admin.describe_topics([name]))[name]
    except AdminError as exc:
        admin.cluster.wanted_topics.discard(name)
        raise topic_or_partition_missing() from exc
