"""Plain data types the client hands out and takes in."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

Header = tuple[str, bytes | None]


class TopicPartition(NamedTuple):
    """A partition of a topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class RecordMetadata(NamedTuple):
    """Where a produced record landed. ``offset`` is -1 with acks=0."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    """One consumed record. ``timestamp_type`` is 0 (CreateTime) or 1 (LogAppendTime)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker as the client connects to it.

    ``host``/``port`` are after ``broker.address.map``; ``advertised`` is what the cluster
    said, kept for error messages ("... advertised as 10.0.0.5:9092").
    """

    node_id: int
    host: str
    port: int
    rack: str | None = None
    advertised: tuple[str, int] | None = None

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def describe(self) -> str:
        """``broker 1 at h:p`` plus the advertised address when the map changed it."""
        text = f"broker {self.node_id} at {self.address}"
        if self.advertised and self.advertised != (self.host, self.port):
            text += (
                f" (advertised as {self.advertised[0]}:{self.advertised[1]}, "
                "rewritten by broker.address.map)"
            )
        return text


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """Metadata of one partition. ``leader`` is -1 when there is none."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """Metadata of one topic. ``topic_id`` is None when the broker sent none (all zeros)."""

    name: str
    topic_id: uuid.UUID | None
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    is_internal: bool = False
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What DescribeCluster (or Metadata) says of the cluster."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """What ``send_offsets_to_transaction`` needs of a consumer's group membership (KIP-447):
    TxnOffsetCommit v3+ sends generation, member id and instance id, so a zombie member's
    offsets are refused. ``generation_id`` -1 with member "" commits as a simple group."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
