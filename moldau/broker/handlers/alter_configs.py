"""AlterConfigs (key 33), versions 0-2: the legacy, non-incremental config update.

Each resource's listed configs *replace* its dynamic configs: listed keys are set (a null
value deletes), dynamic keys that are not listed are removed — Kafka's semantics, which is why
clients moved to IncrementalAlterConfigs. A resource is changed entirely or not at all.

* TOPIC (2): keys must be topic configs with valid values, else INVALID_CONFIG with a message
  naming the key and the value; unknown topics answer UNKNOWN_TOPIC_OR_PARTITION.
* BROKER (4): name "" sets cluster-wide dynamic defaults, name = a broker id that broker's
  dynamic configs. Every key Kafka accepts as a dynamic broker config is accepted
  (``moldau/broker/config/kafka_dynamic.py``: SSL/SASL/listener configs, also with a
  ``listener.name.<listener>.`` prefix, thread counts, cleaner settings, connection limits,
  quotas, the primary broker synonyms of topic configs such as ``log.retention.ms``), with
  Kafka's placement rules (store configs per listener only, security configs not at the
  cluster default); only the topic-config synonyms take effect in Moldau (docs/configuration.md
  lists which). Other known keys answer INVALID_REQUEST "Cannot update these configs
  dynamically", names neither Moldau nor Kafka's dynamic set knows "Unknown broker config
  name(s)", bad values INVALID_REQUEST too (Kafka's codes for broker configs, KAFKA-13609).

Changes are ConfigRecords in the metadata log, so they survive restarts; the controller's
listeners (the replica manager) apply them to logs at once. ``validate_only`` checks without
changing anything. The same resource twice answers INVALID_REQUEST "Duplicate resource.";
unknown resource types UNSUPPORTED_VERSION, BROKER_LOGGER and others INVALID_REQUEST.

In a cluster the change is made by the active controller (this broker's, or forwarded to
it); a request forwarded by another broker that reaches a broker which is not the
active controller answers NOT_CONTROLLER for every entry, so the sender retries there.

Left out: ACL checks, AlterConfigPolicy, custom (plugin) broker config names, which Kafka
stores without checking.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..metadata.forwarding import NOT_CONTROLLER_MESSAGE, misdirected
from ..metadata.records import BROKER_RESOURCE, TOPIC_RESOURCE

BROKER_LOGGER_RESOURCE = 8
_KNOWN_RESOURCE_TYPES = {TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, 16, 32}

Apply = Callable[[Any], Awaitable[tuple[ErrorCode, str | None]]]


def not_controller_answers(ctx: RequestContext, resources: Any) -> list[dict[str, Any]] | None:
    """NOT_CONTROLLER for every resource of a forwarded request that reached a broker which
    is not the active controller; None for any other request."""
    if not misdirected(ctx.header.client_id, ctx.broker.controller_id, ctx.broker.node_id):
        return None
    return [{"error_code": ErrorCode.not_controller, "error_message": NOT_CONTROLLER_MESSAGE,
             "resource_type": r.resource_type, "resource_name": r.resource_name}
            for r in resources]


async def alter_resources(resources: Any, apply: Apply, *, api: str,
                          handled_types: set[int]) -> list[dict[str, Any]]:
    """Answers for each resource of an (Incremental)AlterConfigs request: duplicates and
    unsupported types are refused here, the rest go to ``apply``."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    answers: list[dict[str, Any]] = []
    duplicates_answered: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        code: ErrorCode
        message: str | None
        if resource.resource_type not in _KNOWN_RESOURCE_TYPES:
            code, message = (ErrorCode.unsupported_version,
                             f"Unknown resource type {resource.resource_type}.")
        elif counts[key] > 1:
            if key in duplicates_answered:
                continue
            duplicates_answered.add(key)
            code, message = ErrorCode.invalid_request, "Duplicate resource."
        elif resource.resource_type not in handled_types:
            code, message = (ErrorCode.invalid_request,
                             f"{api} does not support resource type {resource.resource_type} "
                             f"on Moldau; supported: "
                             f"{', '.join(str(t) for t in sorted(handled_types))}")
        else:
            code, message = await apply(resource)
        answers.append({"error_code": code, "error_message": message,
                        "resource_type": resource.resource_type,
                        "resource_name": resource.resource_name})
    return answers


@handler(ApiKey.ALTER_CONFIGS, 0, 2)
async def handle_alter_configs(ctx: RequestContext, request: Any) -> Any:
    controller = ctx.broker.controller

    async def apply(resource: Any) -> tuple[ErrorCode, str | None]:
        changes = {c.name: c.value for c in resource.configs}
        return await controller.alter_configs(resource.resource_type, resource.resource_name,
                                              changes, replace=True,
                                              validate_only=request.validate_only)

    answers = not_controller_answers(ctx, request.resources) or await alter_resources(
        request.resources, apply, api="AlterConfigs",
        handled_types={TOPIC_RESOURCE, BROKER_RESOURCE})
    return ctx.respond({"throttle_time": 0, "responses": answers})
