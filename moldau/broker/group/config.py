"""The broker settings the group coordinator uses, read once at start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ASSIGNORS = ("uniform", "range")


@dataclass(frozen=True)
class GroupConfig:
    """Group and offset settings (Kafka's keys and defaults)."""

    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    offsets_commit_timeout_ms: int = 5000
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2_147_483_647
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_max_size: int = 2_147_483_647
    consumer_assignors: tuple[str, ...] = field(default=ASSIGNORS)
    # The single node (no zookeeper.connect) caps offsets.topic.replication.factor at the
    # brokers alive, so `make run` works with Kafka's default of 3; a cluster refuses to
    # create __consumer_offsets until that many brokers are alive, as Kafka does.
    cap_offsets_replication: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> GroupConfig:
        """Build from a broker config (anything indexable by Kafka key)."""
        assignors = tuple(a.strip() for a in _as_list(config["group.consumer.assignors"]))
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if unknown or not assignors:
            raise ValueError(
                f"group.consumer.assignors={','.join(assignors)!s}: Moldau's server-side "
                f"assignors are {', '.join(ASSIGNORS)}; list one or both"
            )
        return cls(
            offsets_topic_num_partitions=config["offsets.topic.num.partitions"],
            offsets_topic_replication_factor=config["offsets.topic.replication.factor"],
            offsets_topic_segment_bytes=config["offsets.topic.segment.bytes"],
            offsets_commit_timeout_ms=config["offsets.commit.timeout.ms"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
            offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            max_size=config["group.max.size"],
            rebalance_protocols=tuple(_as_list(config["group.coordinator.rebalance.protocols"])),
            consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
            consumer_max_size=config["group.consumer.max.size"],
            consumer_assignors=assignors,
            cap_offsets_replication=not config.get("zookeeper.connect"),
        )


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v for v in (p.strip() for p in value.split(",")) if v]
    return [str(v) for v in value]
