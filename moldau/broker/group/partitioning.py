"""Which partition of ``__consumer_offsets`` holds a group: the coordinator runtime's
placement (:mod:`moldau.broker.coordinator.partitioning`) over this topic."""

from __future__ import annotations

from ..coordinator.partitioning import java_string_hash, kafka_abs, partition_for

OFFSETS_TOPIC = "__consumer_offsets"

__all__ = ["OFFSETS_TOPIC", "java_string_hash", "kafka_abs", "partition_for"]
