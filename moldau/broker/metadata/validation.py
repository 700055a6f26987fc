"""Pure validation of topic names, partition counts, replication factors and topic configs.

Each function returns None when the input is acceptable, else ``(ErrorCode, message)`` with a
message a user can act on. Rules follow Kafka's ``Topic.validate`` and controller checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ...protocol.errors import ErrorCode
from ..config.definitions import TOPIC_BY_NAME
from ..config.types import ConfigDef, ConfigError

MAX_NAME_LENGTH = 249
# fullmatch, never match + "$": "$" also matches before a trailing newline, and a name
# with a newline breaks every line-based file that lists topics (the offset checkpoints).
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
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
    if not _LEGAL.fullmatch(name):
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
            # Kafka's text (AdminUtils.assignReplicasToBrokers), which tools match on
            f"Replication factor: {factor} larger than available brokers: {live_brokers}.",
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


def validate_create_configs(configs: Mapping[str, str | None]) -> Problem:
    """Configs given to CreateTopics: known keys, parseable values, no nulls."""
    for key, value in configs.items():
        if value is None:
            return (ErrorCode.invalid_config,
                    f"Null value not supported for topic config {key}; leave the key out to "
                    f"use the default")
    return validate_topic_configs(configs)


def validate_manual_assignment(assignments: Mapping[int, Sequence[int]],
                               registered: Iterable[int]) -> Problem:
    """A CreateTopics manual assignment: partitions 0..n-1, each with the same number of
    distinct, registered brokers."""
    known = set(registered)
    factor: int | None = None
    for partition in sorted(assignments):
        replicas = list(assignments[partition])
        if not replicas:
            return (ErrorCode.invalid_replica_assignment,
                    f"The manual assignment of partition {partition} has no replicas")
        for broker in sorted(set(replicas)):
            if broker not in known:
                return (ErrorCode.invalid_replica_assignment,
                        f"The manual assignment of partition {partition} names broker "
                        f"{broker}, but no such broker is registered (brokers: "
                        f"{sorted(known)})")
        if len(set(replicas)) != len(replicas):
            return (ErrorCode.invalid_replica_assignment,
                    f"The manual assignment of partition {partition} lists a broker more "
                    f"than once: {replicas}")
        if factor is not None and len(replicas) != factor:
            return (ErrorCode.invalid_replica_assignment,
                    f"The manual assignment of partition {partition} has {len(replicas)} "
                    f"replica(s), but earlier partitions have {factor}")
        factor = len(replicas)
    if sorted(assignments) != list(range(len(assignments))):
        return (ErrorCode.invalid_replica_assignment,
                f"Manually assigned partitions must be numbered 0 to {len(assignments) - 1} "
                f"without gaps, got {sorted(assignments)}")
    return None


def validate_broker_resource_name(name: str, registered: Iterable[int]) -> Problem:
    """A BROKER config resource: ``""`` (cluster-wide default) or a registered broker id."""
    if name == "":
        return None
    try:
        broker_id = int(name)
    except ValueError:
        return (ErrorCode.invalid_request,
                f"Broker id must be an integer (or empty for the cluster default), but it "
                f"is: {name!r}")
    if broker_id not in set(registered):
        return ErrorCode.broker_id_not_registered, f"No broker with id {broker_id} is registered"
    return None


# IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType).
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


def apply_incremental(
    current: Mapping[str, str],
    ops: Sequence[tuple[str, int, str | None]],
    definitions: Mapping[str, ConfigDef],
) -> dict[str, str | None] | Problem:
    """The changes (key -> new value, None = delete) that IncrementalAlterConfigs ``ops``
    (key, operation, value) make to the ``current`` dynamic configs.

    APPEND and SUBTRACT work on LIST keys, starting from the current dynamic value or else
    the key's default, and never duplicate an element. Returns a Problem for unknown
    operations, duplicate keys, or list operations on other types."""
    seen: set[str] = set()
    changes: dict[str, str | None] = {}
    for key, op, value in ops:
        if key in seen:
            return (ErrorCode.invalid_request,
                    f"Config key {key} appears more than once in one resource")
        seen.add(key)
        if op == OP_SET:
            if value is None:
                return (ErrorCode.invalid_request,
                        f"Null value not supported for SET of {key}; use DELETE to remove it")
            changes[key] = value
        elif op == OP_DELETE:
            changes[key] = None
        elif op in (OP_APPEND, OP_SUBTRACT):
            definition = definitions.get(key)
            if definition is None:
                changes[key] = value  # reported as an unknown key by the caller's validation
                continue
            if definition.type != "list":
                return (ErrorCode.invalid_config,
                        f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST")
            base = current.get(key)
            if base is None and definition.default is not None:
                base = (",".join(definition.default) if isinstance(definition.default, list)
                        else str(definition.default))
            parts = [p for p in (base or "").split(",") if p]
            for item in (value or "").split(","):
                if op == OP_APPEND and item and item not in parts:
                    parts.append(item)
                elif op == OP_SUBTRACT and item in parts:
                    parts.remove(item)
            changes[key] = ",".join(parts)
        else:
            return (ErrorCode.invalid_request,
                    f"Unknown config operation {op} for key {key}; expected 0 (SET), "
                    f"1 (DELETE), 2 (APPEND) or 3 (SUBTRACT)")
    return changes
