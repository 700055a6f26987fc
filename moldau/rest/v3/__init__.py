"""Confluent's Kafka REST API v3 (the ``/v3`` half of the REST proxy).

``register_v3(app, ctx)`` adds the routes to an aiohttp application built on
:mod:`moldau.http`; ``ctx`` gives the Kafka clients (see :class:`.context.V3Context`).
Shapes follow Confluent's published OpenAPI description (``api/v3/openapi.yaml`` of
confluentinc/kafka-rest): every resource has ``kind`` and ``metadata`` (``self``,
``resource_name``), lists have ``data``, relations are ``{"related": url}``, errors are
``{"error_code", "message"}`` (:mod:`.errors`). Every path is also served with a trailing
slash.

Modules: :mod:`.clusters`, :mod:`.brokers`, :mod:`.configs` (topic, broker and cluster-wide
broker configs), :mod:`.topics`, :mod:`.partitions` (with replicas and reassignments),
:mod:`.groups` (consumer groups, consumers, assignments, lags), :mod:`.records` (produce,
also streaming). Left out: ACLs (no authorizer yet), ``include_authorized_operations``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from . import brokers, clusters, configs, groups, partitions, records, topics
from .context import STATE_KEY, V3Context, V3State

__all__ = ["ROUTES", "V3Context", "register_v3"]

#: every (method, path, handler) of API v3, in matching order ("-" paths before the
#: parameterised ones they would otherwise match)
ROUTES = [
    *clusters.ROUTES,
    *configs.ROUTES,
    *brokers.ROUTES,
    *partitions.ROUTES,
    *topics.ROUTES,
    *groups.ROUTES,
    *records.ROUTES,
]


def register_v3(app: web.Application, ctx: Any) -> None:
    """Serve API v3 on ``app`` with the clients of ``ctx`` (read on each request)."""
    app[STATE_KEY] = V3State(ctx)
    resources: dict[str, Any] = {}
    for method, path, handler in ROUTES:
        for variant in (path, path + "/"):
            resource = resources.get(variant)
            if resource is None:
                resource = resources[variant] = app.router.add_resource(variant)
            resource.add_route(method, handler)
