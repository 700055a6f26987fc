"""IncrementalAlterConfigs (key 44), versions 0-1.

Operations per key: SET (0), DELETE (1, back to the inherited value), APPEND (2) and
SUBTRACT (3) for LIST keys such as ``cleanup.policy`` (starting from the current dynamic
value, else the key's default; elements are never duplicated). APPEND/SUBTRACT on another
type answers INVALID_CONFIG; the same key twice in one resource, a null SET value or an
unknown operation INVALID_REQUEST. A resource is changed entirely or not at all.

* TOPIC (2) and BROKER (4) follow the rules of AlterConfigs (see ``alter_configs.py``):
  topic values are checked per key (INVALID_CONFIG naming key and value), broker resources
  accept the keys Kafka can change at run time, ``listener.name.*`` forms included, and store
  them (INVALID_REQUEST for other keys). APPEND/SUBTRACT on a broker LIST key that is unset
  start from its default (Kafka's, for keys Moldau has no setting of its own for). Changes
  are ConfigRecords in the metadata log, applied by the controller's listeners.
* BROKER_LOGGER (8), name = this node's id: SET a logger's level (TRACE, DEBUG, INFO, WARN,
  ERROR, FATAL, OFF; TRACE maps to DEBUG) or DELETE it (inherit from its parent again). This
  changes the running process only, as in Kafka; it is not persisted.

``validate_only`` checks without changing anything. The same resource twice answers
INVALID_REQUEST "Duplicate resource.".

In a cluster the change is made by the active controller (this broker's, or forwarded to
it); a request forwarded by another broker that reaches a broker which is not the
active controller answers NOT_CONTROLLER for every entry, so the sender retries there.

Left out: ACL checks, AlterConfigPolicy, custom (plugin) broker config names.
"""

from __future__ import annotations

import logging
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..metadata.records import BROKER_RESOURCE, TOPIC_RESOURCE
from ..metadata.validation import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from .alter_configs import BROKER_LOGGER_RESOURCE, alter_resources, not_controller_answers

_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
           "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
           "OFF": logging.CRITICAL + 10}


def _loggers() -> set[str]:
    return {"root"} | set(logging.root.manager.loggerDict)


def alter_loggers(node_id: int, resource: Any, validate_only: bool
                  ) -> tuple[ErrorCode, str | None]:
    """Change Python logger levels of this process (the BROKER_LOGGER resource)."""
    if resource.resource_name != str(node_id):
        return (ErrorCode.invalid_request,
                f"Unexpected broker id {resource.resource_name!r}: logger levels of broker "
                f"{node_id} can be changed on broker {node_id} only")
    known = _loggers()
    plan: list[tuple[str, int]] = []
    for config in resource.configs:
        if config.name not in known:
            return ErrorCode.invalid_config, f"Logger {config.name} does not exist!"
        if config.config_operation == OP_SET:
            level = _LEVELS.get((config.value or "").upper())
            if level is None:
                return (ErrorCode.invalid_config,
                        f"Cannot set the log level of {config.name} to {config.value} as it is "
                        f"not a supported log level. Valid levels are "
                        f"{', '.join(_LEVELS)}")
            plan.append((config.name, level))
        elif config.config_operation == OP_DELETE:
            if config.name == "root":
                return (ErrorCode.invalid_config,
                        "Removing the log level of the root logger is not allowed")
            plan.append((config.name, logging.NOTSET))
        elif config.config_operation in (OP_APPEND, OP_SUBTRACT):
            return (ErrorCode.invalid_config,
                    f"Operation {config.config_operation} is not allowed for the "
                    f"BROKER_LOGGER resource; use SET or DELETE")
        else:
            return (ErrorCode.invalid_request,
                    f"Unknown config operation {config.config_operation} for key "
                    f"{config.name}")
    if not validate_only:
        for name, level in plan:
            (logging.getLogger() if name == "root" else logging.getLogger(name)).setLevel(level)
    return ErrorCode.none, None


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle_incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker

    async def apply(resource: Any) -> tuple[ErrorCode, str | None]:
        if resource.resource_type == BROKER_LOGGER_RESOURCE:
            return alter_loggers(broker.node_id, resource, request.validate_only)
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
        return await broker.controller.incremental_alter_configs(
            resource.resource_type, resource.resource_name, ops,
            validate_only=request.validate_only)

    answers = not_controller_answers(ctx, request.resources) or await alter_resources(
        request.resources, apply, api="IncrementalAlterConfigs",
        handled_types={TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE})
    return ctx.respond({"throttle_time": 0, "responses": answers})
