"""Inputs and results of :class:`moldau.client.admin.AdminClient` calls."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

from moldau.protocol.config_source import ConfigSource as ConfigSource  # re-exported

from .errors import BrokerError, ClientError
from .group.types import OffsetAndMetadata as OffsetAndMetadata  # re-exported
from .types import BrokerInfo, TopicPartition


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


# --- consumer groups ----------------------------------------------------------------------

@dataclass(frozen=True)
class GroupListing:
    """One group as ListGroups reports it (``state``/``type`` None when the broker's
    ListGroups version lacks them)."""

    group_id: str
    protocol_type: str
    state: str | None = None
    type: str | None = None


@dataclass(frozen=True)
class MemberDescription:
    """A group member: ids, where it runs, what it subscribes to and what it holds."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: frozenset[TopicPartition] = frozenset()
    topics: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupDescription:
    """DescribeGroups of one group. ``state`` is Kafka's (Empty, Stable, PreparingRebalance,
    CompletingRebalance, Dead; Dead also for a group that does not exist); ``protocol`` is
    the chosen assignor of a consumer group."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()
    coordinator: BrokerInfo | None = None

    @property
    def is_simple(self) -> bool:
        """A group that only has committed offsets (no protocol, no members)."""
        return not self.protocol_type and not self.members


@dataclass(frozen=True)
class PartitionLag:
    """One row of ``moldau groups --describe``: a partition the group commits or reads.

    ``committed``/``lag`` are None when nothing is committed; ``log_end_offset`` is -1 when
    it could not be read. The member fields are empty for partitions nobody reads now.
    """

    topic: str
    partition: int
    committed: int | None
    log_end_offset: int
    lag: int | None
    member_id: str = ""
    group_instance_id: str | None = None
    client_id: str = ""
    host: str = ""
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class ReplicaLogInfo:
    """One partition's replica in a log dir (DescribeLogDirs): bytes on disk, how far a
    future replica (being moved between dirs) is behind, and whether this is that future
    replica."""

    size: int
    offset_lag: int = 0
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment in progress (ListPartitionReassignments, KIP-455): the partition's
    replicas (old and target while it lasts), those being added and those being removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log dir of one broker: its path, the error the broker reports for it (None when
    healthy), the replicas in it, and the file system's total and usable bytes (-1: not
    reported)."""

    path: str
    error: BrokerError | None = None
    replicas: dict[TopicPartition, ReplicaLogInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1
