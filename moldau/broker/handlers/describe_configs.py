"""DescribeConfigs (key 32), versions 1-4.

Resources:

* TOPIC (2): every topic config (or the keys asked for) with its effective value and source:
  DYNAMIC_TOPIC_CONFIG (1) for the topic's own settings, else the broker synonym that supplies
  it — DYNAMIC_BROKER_CONFIG (2), DYNAMIC_DEFAULT_BROKER_CONFIG (3), STATIC_BROKER_CONFIG (4)
  or DEFAULT_CONFIG (5). With ``include_synonyms`` the whole chain is listed as Kafka lists it
  (``retention.ms``: the topic value, then ``log.retention.ms``/``minutes``/``hours`` per
  level). Unknown topics answer UNKNOWN_TOPIC_OR_PARTITION, bad names
  INVALID_TOPIC_EXCEPTION.
* BROKER (4): name = this node's id lists every broker key with its current value — Moldau's
  keys, Kafka's other dynamic broker keys (with Kafka's defaults until set: kafka-python's
  ``alter_configs`` checks names against this list) and the ``listener.name.*`` keys that are
  set; name "" lists the cluster-wide dynamic defaults only (as Kafka). ``read_only`` is false
  exactly for the keys that AlterConfigs can change at run time; passwords are sensitive
  (value null). Another broker's id answers INVALID_REQUEST (ask that broker).
* BROKER_LOGGER (8): this node's Python loggers (root and ``moldau.*``) with their levels in
  log4j names, source DYNAMIC_BROKER_LOGGER_CONFIG (6).

Values are rendered as Kafka renders them (lists comma-joined, booleans lowercase, doubles as
Java prints them, unset as null). ``config_type`` (v3+) uses Kafka's type ids and
``documentation`` (v3+) is sent when asked for. Results are sorted by config name. Keys that
do not exist are left out of the answer (Kafka's behaviour).

Left out: ACL checks; GROUP and CLIENT_METRICS resources answer INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, answer_each, handler
from ..metadata.configs import ConfigSource, ConfigType, broker_entries, topic_entries
from ..metadata.records import BROKER_RESOURCE, TOPIC_RESOURCE
from ..metadata.validation import validate_topic_name

BROKER_LOGGER_RESOURCE = 8
_LOG4J_LEVELS = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN",
                 logging.ERROR: "ERROR", logging.CRITICAL: "FATAL"}


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _check_broker_name(name: str, node_id: int) -> None:
    if name == "":
        return
    try:
        broker_id = int(name)
    except ValueError as exc:
        raise _Refused(ErrorCode.invalid_request,
                       f"Broker id must be an integer, but it is: {name!r}") from exc
    if broker_id != node_id:
        raise _Refused(ErrorCode.invalid_request,
                       f"Unexpected broker id, expected {node_id} or empty string, but "
                       f"received {broker_id}; describe another broker's configs by asking "
                       f"that broker")


def _logger_entries(keys: set[str] | None) -> list[dict[str, Any]]:
    ours = sorted(n for n in logging.root.manager.loggerDict
                  if n == "moldau" or n.startswith("moldau."))
    names = ["root", *ours]
    entries = []
    for name in names:
        if keys is not None and name not in keys:
            continue
        logger = logging.getLogger() if name == "root" else logging.getLogger(name)
        level = logger.getEffectiveLevel()
        entries.append({"name": name,
                        "value": _LOG4J_LEVELS.get(level, logging.getLevelName(level)),
                        "read_only": False,
                        "config_source": int(ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG),
                        "is_sensitive": False, "synonyms": [],
                        "config_type": int(ConfigType.STRING), "documentation": None})
    return entries


def _describe(ctx: RequestContext, resource: Any, include_synonyms: bool,
              include_docs: bool) -> list[dict[str, Any]]:
    broker = ctx.broker
    keys = set(resource.configuration_keys) if resource.configuration_keys else None
    name = resource.resource_name
    if resource.resource_type == TOPIC_RESOURCE:
        problem = validate_topic_name(name)
        if problem is not None:
            raise _Refused(*problem)
        if name not in broker.image.topics_by_name:
            raise _Refused(ErrorCode.unknown_topic_or_partition,
                           f"The topic '{name}' does not exist.")
        entries = topic_entries(broker.image, broker.config, name, keys)
    elif resource.resource_type == BROKER_RESOURCE:
        _check_broker_name(name, broker.node_id)
        entries = broker_entries(broker.image, broker.config, name, keys)
    elif resource.resource_type == BROKER_LOGGER_RESOURCE:
        _check_broker_name(name, broker.node_id)
        return _logger_entries(keys)
    else:
        raise _Refused(ErrorCode.invalid_request,
                       f"Unsupported resource type {resource.resource_type}: Moldau describes "
                       f"TOPIC (2), BROKER (4) and BROKER_LOGGER (8) configs")
    return [e.as_describe(include_synonyms, include_docs) for e in entries]


@handler(ApiKey.DESCRIBE_CONFIGS, 1, 4)
def handle_describe_configs(ctx: RequestContext, request: Any) -> Any:
    include_synonyms = bool(request.include_synonyms)
    include_docs = bool(getattr(request, "include_documentation", False))

    def result(resource: Any) -> dict[str, Any]:
        answer = {"error_code": ErrorCode.none, "error_message": None,
                  "resource_type": resource.resource_type,
                  "resource_name": resource.resource_name, "configs": []}
        try:
            answer["configs"] = _describe(ctx, resource, include_synonyms, include_docs)
        except _Refused as refused:
            answer["error_code"] = refused.code
            answer["error_message"] = refused.message
        return answer

    results = answer_each(request.resources, result, key=_resource_key)
    return ctx.respond({"throttle_time": 0, "results": results})


def _resource_key(resource: Any) -> tuple[int, str, tuple[str, ...] | None]:
    keys = resource.configuration_keys
    return (resource.resource_type, resource.resource_name,
            None if keys is None else tuple(keys))
