"""Inputs and results of :class:`moldau.client.admin.AdminClient` calls."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import BrokerError, ClientError


class ResourceType(enum.IntEnum):
    """Config resource types as Kafka numbers them."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigResource(NamedTuple):
    """A topic (name) or broker (node id as a string) whose configs to read or change."""

    type: ResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int | str) -> ConfigResource:
        return cls(ResourceType.BROKER, str(node_id))


class ConfigSource(enum.IntEnum):
    """Where a config value comes from (DescribeConfigs ``config_source``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config value as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: int = ConfigSource.UNKNOWN
    read_only: bool = False
    is_sensitive: bool = False
    is_default: bool = False
    synonyms: tuple[tuple[str, str | None, int], ...] = ()
    documentation: str | None = None


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs operations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class AlterConfigOp(NamedTuple):
    """One change for incremental_alter_configs: ``AlterConfigOp("retention.ms", "1000")``."""

    name: str
    value: str | None = None
    op: AlterOp = AlterOp.SET


@dataclass(frozen=True)
class NewTopic:
    """A topic to create. -1 partitions / replication factor = the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    replica_assignment: dict[int, list[int]] | None = None


class OffsetSpec:
    """Special timestamps for list_offsets; any int >= 0 is a timestamp in ms."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3


class ListOffsetsResult(NamedTuple):
    """Answer of list_offsets for one partition (offset -1 when no record matched)."""

    offset: int
    timestamp: int
    leader_epoch: int


class AdminError(ClientError):
    """An admin call failed for some of its items; ``errors`` maps each item to its error."""

    def __init__(self, what: str, errors: dict[object, BrokerError]) -> None:
        listing = "; ".join(f"{key}: {err}" for key, err in errors.items())
        super().__init__(f"{what} failed for {len(errors)} item(s): {listing}")
        self.errors = errors
