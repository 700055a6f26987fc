"""Pure validation of topic names, partition counts, replication factors and topic configs.

Each function returns None when the input is acceptable, else ``(ErrorCode, message)`` with a
message a user can act on. Rules follow Kafka's ``Topic.validate`` and controller checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ...protocol.errors import ErrorCode
from ..config.definitions import TOPIC_BY_NAME
from ..config.types import ConfigError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

Problem = tuple[ErrorCode, str] | None


def validate_topic_name(name: str | None) -> Problem:
    if not name:
        return ErrorCode.invalid_topic_exception, "Topic name is empty"
    if name in (".", ".."):
        return ErrorCode.invalid_topic_exception, f"Topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return (
            ErrorCode.invalid_topic_exception,
            f"Topic name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}",
        )
    if not _LEGAL.match(name):
        return (
            ErrorCode.invalid_topic_exception,
            f"Topic name {name!r} is illegal: it may only contain ASCII letters, digits, "
            f"'.', '_' and '-'",
        )
    return None


def collision_key(name: str) -> str:
    """Kafka forbids topics whose names differ only in '.' versus '_' (metric names clash)."""
    return name.replace(".", "_")


def validate_collision(name: str, existing: Iterable[str]) -> Problem:
    key = collision_key(name)
    for other in existing:
        if other != name and collision_key(other) == key:
            return (
                ErrorCode.invalid_topic_exception,
                f"Topic {name!r} collides with existing topic {other!r} ('.' and '_' are "
                f"treated alike)",
            )
    return None


def validate_partitions(count: int) -> Problem:
    if count < 1:
        return (
            ErrorCode.invalid_partitions,
            f"Number of partitions must be larger than 0, got {count}",
        )
    return None


def validate_replication_factor(factor: int, live_brokers: int) -> Problem:
    if factor < 1:
        return (
            ErrorCode.invalid_replication_factor,
            f"Replication factor must be larger than 0, got {factor}",
        )
    if factor > live_brokers:
        return (
            ErrorCode.invalid_replication_factor,
            f"Replication factor {factor} is larger than the number of available brokers "
            f"({live_brokers})",
        )
    return None


def validate_topic_configs(configs: Mapping[str, str | None]) -> Problem:
    for key, value in configs.items():
        definition = TOPIC_BY_NAME.get(key)
        if definition is None:
            return ErrorCode.invalid_config, f"Unknown topic config name: {key}"
        if value is None:
            continue
        try:
            definition.parse(value)
        except ConfigError as exc:
            return ErrorCode.invalid_config, str(exc)
    return None
